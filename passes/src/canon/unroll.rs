//! Full unrolling of `while` loops with a constant trip count (`unroll`).
//!
//! A `while` is opaque to liveness, scheduling and rematerialization: its results are charged
//! whole at its point, so a step whose layers run under `jax.lax.scan` (Flax `nn.scan`,
//! MaxText) keeps every layer's stacked residuals alive across the loop and cannot be planned
//! below its program-order peak. When the trip count is a compile-time constant — a scan over
//! layers, `fori_loop` with literal bounds — the loop is replaced by that many copies of its
//! body, each reading the previous copy's carried values, the way XLA's `WhileLoopUnroller`
//! does for small loops. The counter becomes a constant in every copy, so [`super::fold`]
//! turns the scan's index arithmetic into constants and [`super::slices`] forwards each
//! `dynamic_slice` of a stacked residual to the value the forward iteration wrote; the stacked
//! buffers then die and the planner sees every layer's tensors, as in an unrolled export.
//!
//! A loop is unrolled when its condition is `compare(counter, c)` (either operand order) with a
//! constant `c` (or a carried value the body passes through, with a constant start: the trip
//! count an ONNX `Loop` or `Scan` carries), the body returns `counter + step` (or `counter - step`) at the counter's
//! position with a constant `step`, the counter's initial value is a constant, and the trip
//! count (found by running the counter) is at most [`Unroll::max_trip_count`] and the copies
//! add at most [`Unroll::max_ops`] ops. Loops with a symbolic trip count (a scan over `S`) or a
//! data-dependent condition are left alone, as are loops in regions.
//!
//! Invariant: the step computes the same values in the same order of floating-point
//! operations (each copy is the body verbatim), so results are bit-identical; graph inputs,
//! outputs and assertions are unchanged; the copies take the `while`'s place in program order.
//! Change count: loops unrolled. The pass records an [`UnrollReport`] (loops unrolled; loops
//! kept and why) that `ebb compile` prints.

use super::fold::{elements, Num};
use super::has_side_effects;
use crate::manager::{Pass, PassContext, PassError, PassResult};
use crate::pass_id::PassId;
use ebb_ir::{Graph, Node, NodeId, Op, OpKind, Relation, ValueRef};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// Default for [`Unroll::max_trip_count`].
pub const MAX_TRIP_COUNT: u64 = 64;

/// Default for [`Unroll::max_ops`].
pub const MAX_UNROLLED_OPS: usize = 200_000;

/// The unrolling pass (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct Unroll {
    /// Largest trip count unrolled; 0 disables the pass (`--unroll off`).
    pub max_trip_count: u64,
    /// Largest number of ops one loop's copies may add (body ops × trip count).
    pub max_ops: usize,
}

impl Default for Unroll {
    fn default() -> Self {
        Unroll {
            max_trip_count: MAX_TRIP_COUNT,
            max_ops: MAX_UNROLLED_OPS,
        }
    }
}

impl Pass for Unroll {
    fn name(&self) -> &'static str {
        PassId::Unroll.name()
    }

    /// Unrolls what it can and records an [`UnrollReport`] in `cx` (loops unrolled over all
    /// runs; the loops kept, and why, as of the last run).
    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<PassResult, PassError> {
        let mut report = cx.take::<UnrollReport>().unwrap_or_default();
        let run = unroll_loops(g, self);
        let n = run.unrolled.len();
        report.unrolled.extend(run.unrolled);
        report.kept = run.kept;
        cx.insert(report);
        Ok(PassResult::changes(n))
    }
}

/// What [`Unroll`] did with the `while` loops of a graph (not of its regions).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UnrollReport {
    /// The loops unrolled, in program order.
    pub unrolled: Vec<UnrolledLoop>,
    /// The loops kept as loops (planned whole at their point), with the reason.
    pub kept: Vec<KeptLoop>,
}

/// A loop replaced by copies of its body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UnrolledLoop {
    /// Source location of the `while`.
    pub loc: Option<String>,
    /// Iterations (copies of the body).
    pub trip_count: u64,
    /// Ops the copies added (body ops × trip count).
    pub ops: usize,
}

/// A loop left as a `while`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeptLoop {
    /// Source location of the `while`.
    pub loc: Option<String>,
    /// Why it was not unrolled.
    pub reason: KeepReason,
}

/// Why a loop was not unrolled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeepReason {
    /// Unrolling is off (`--unroll off`).
    Disabled,
    /// The loop (or its body) has side effects.
    SideEffects,
    /// The trip count is not a compile-time constant: the condition is not `compare(counter,
    /// bound)` with a constant bound, step and start (a scan over a symbolic length, a
    /// data-dependent `while_loop`).
    NotConstant,
    /// More iterations than [`Unroll::max_trip_count`] (this limit).
    TooManyIterations(u64),
    /// The copies would add more ops than [`Unroll::max_ops`] (this many).
    TooManyOps(u64),
}

impl std::fmt::Display for KeepReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeepReason::Disabled => write!(f, "unrolling is off (--unroll off)"),
            KeepReason::SideEffects => write!(f, "the loop has side effects"),
            KeepReason::NotConstant => write!(f, "its trip count is not a compile-time constant"),
            KeepReason::TooManyIterations(max) => write!(f, "it runs more than {max} iterations"),
            KeepReason::TooManyOps(n) => {
                write!(f, "its copies would add {n} ops, over the unrolling limit")
            }
        }
    }
}

/// Unrolls the eligible `while` loops of `g` (not of its regions); reports what it did.
pub fn unroll_loops(g: &mut Graph, limits: &Unroll) -> UnrollReport {
    let loops: Vec<NodeId> = g
        .order()
        .iter()
        .copied()
        .filter(|&id| g.node(id).kind() == OpKind::While)
        .collect();
    let mut report = UnrollReport::default();
    for id in loops {
        let loc = g.node(id).loc.clone();
        let outcome = if limits.max_trip_count == 0 {
            Err(KeepReason::Disabled)
        } else {
            trip_count(g, id, limits.max_trip_count).and_then(|trips| {
                let body_ops = g.node(id).regions[1].op_count();
                let ops = body_ops.saturating_mul(trips as usize);
                if ops > limits.max_ops {
                    Err(KeepReason::TooManyOps(ops as u64))
                } else {
                    Ok((trips, ops))
                }
            })
        };
        match outcome {
            Ok((trip_count, ops)) => {
                unroll(g, id, trip_count);
                report.unrolled.push(UnrolledLoop {
                    loc,
                    trip_count,
                    ops,
                });
            }
            Err(reason) => report.kept.push(KeptLoop { loc, reason }),
        }
    }
    report
}

/// The trip count of `while` node `id` when it is a constant of at most `max`, else why not.
///
/// # Errors
/// [`KeepReason::SideEffects`], [`KeepReason::NotConstant`],
/// [`KeepReason::TooManyIterations`].
pub fn trip_count(g: &Graph, id: NodeId, max: u64) -> Result<u64, KeepReason> {
    let n = g.node(id);
    if has_side_effects(n) {
        return Err(KeepReason::SideEffects);
    }
    let (init, c, rel, step) = counted(g, id).ok_or(KeepReason::NotConstant)?;
    let mut v = init;
    let mut trips = 0u64;
    while rel.holds(v, c) {
        trips += 1;
        if trips > max {
            return Err(KeepReason::TooManyIterations(max));
        }
        v = v.checked_add(step).ok_or(KeepReason::NotConstant)?;
    }
    Ok(trips)
}

/// `(start, bound, relation, step)` of a counted loop: the condition is `compare(counter,
/// bound)` in either operand order, the bound a constant or a carried value the body passes
/// through unchanged with a constant start (the trip count ONNX `Loop`/`Scan` carry); the body
/// returns `counter ± step`; the counter starts at a constant.
fn counted(g: &Graph, id: NodeId) -> Option<(i64, i64, Relation, i64)> {
    let [cond, body] = g.node(id).regions.as_slice() else {
        return None;
    };
    let inits = g.operands(id);
    let &[p] = cond.outputs() else { return None };
    let Op::Compare(spec) = &cond.node(p.node).op else {
        return None;
    };
    let ops = cond.operands(p.node);
    let bound = |v: ValueRef| {
        scalar_int(cond, v).or_else(|| {
            let j = input_index(cond, v)?;
            let through = *body.outputs().get(j)? == ValueRef::new(*body.inputs().get(j)?, 0);
            through.then(|| scalar_int(g, *inits.get(j)?)).flatten()
        })
    };
    let counted = |k: usize, c: i64, rel: Relation| Some((k, c, rel, step(body, k)?));
    let (k, c, rel, step) = input_index(cond, ops[0])
        .and_then(|k| counted(k, bound(ops[1])?, spec.direction))
        .or_else(|| {
            counted(
                input_index(cond, ops[1])?,
                bound(ops[0])?,
                spec.direction.mirror(),
            )
        })?;
    Some((scalar_int(g, *inits.get(k)?)?, c, rel, step))
}

/// The step of carried value `k` when the body returns `counter + step` or `counter - step`
/// there, `step` a constant.
fn step(body: &Graph, k: usize) -> Option<i64> {
    let next = *body.outputs().get(k)?;
    let counter = ValueRef::new(*body.inputs().get(k)?, 0);
    let bops = body.operands(next.node);
    match &body.node(next.node).op {
        Op::Add if bops[0] == counter => scalar_int(body, bops[1]),
        Op::Add if bops[1] == counter => scalar_int(body, bops[0]),
        Op::Subtract if bops[0] == counter => scalar_int(body, bops[1])?.checked_neg(),
        _ => None,
    }
}

/// The argument index of `v` when it is a region input.
fn input_index(r: &Graph, v: ValueRef) -> Option<usize> {
    r.inputs().iter().position(|&i| i == v.node)
}

/// The value of a scalar integer constant.
pub(crate) fn scalar_int(g: &Graph, v: ValueRef) -> Option<i64> {
    if !g.value_type(v).dtype.is_int() {
        return None;
    }
    match elements(g, v, 1)? {
        (true, xs) => match xs[0] {
            Num::I(i) => Some(i),
            Num::F(_) => None,
        },
        _ => None,
    }
}

/// Replaces `while` node `id` by `trips` copies of its body, in its place in program order.
fn unroll(g: &mut Graph, id: NodeId, trips: u64) {
    let body = g.node(id).regions[1].clone();
    let loc = g.node(id).loc.clone();
    let mut carried = g.operands(id);
    let first_new = g.order().len();
    for _ in 0..trips {
        let mut map: HashMap<NodeId, NodeId> = HashMap::new();
        let args: HashMap<NodeId, ValueRef> = body
            .inputs()
            .iter()
            .copied()
            .zip(carried.iter().copied())
            .collect();
        let value = |map: &HashMap<NodeId, NodeId>, v: ValueRef| match args.get(&v.node) {
            Some(&a) => a,
            None => ValueRef::new(map[&v.node], v.output),
        };
        for &b in body.order() {
            if args.contains_key(&b) {
                continue;
            }
            let operands: Vec<ValueRef> =
                body.operands(b).iter().map(|&v| value(&map, v)).collect();
            let mut node: Node = body.node(b).clone();
            if node.loc.is_none() {
                node.loc.clone_from(&loc);
            }
            let new = g.add_node(node, &operands);
            map.insert(b, new);
        }
        carried = body.outputs().iter().map(|&v| value(&map, v)).collect();
    }
    for (i, v) in carried.into_iter().enumerate() {
        g.replace_all_uses(ValueRef::new(id, i as u32), v);
    }
    // The copies were appended; move them to the loop's place.
    let order = g.order().to_vec();
    let (old, new) = order.split_at(first_new);
    let mut placed = Vec::with_capacity(order.len());
    for &n in old {
        if n == id {
            placed.extend_from_slice(new);
        } else {
            placed.push(n);
        }
    }
    g.set_order(placed);
    g.remove_nodes(&HashSet::from([id]));
}
