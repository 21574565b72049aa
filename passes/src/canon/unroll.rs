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
//! count (found by running the counter) is at most [`Unroll::max_trip_count`] with at most
//! [`Unroll::max_ops`] body ops in all. Loops with a symbolic trip count (a scan over `S`) or a
//! data-dependent condition are left alone, as are loops in regions.
//!
//! Invariant: the step computes the same values in the same order of floating-point
//! operations (each copy is the body verbatim), so results are bit-identical; graph inputs,
//! outputs and assertions are unchanged; the copies take the `while`'s place in program order.
//! Change count: loops unrolled.

use super::fold::{elements, Num};
use super::has_side_effects;
use crate::manager::{Pass, PassContext, PassError, PassResult};
use ebb_ir::{Graph, Node, NodeId, Op, OpKind, Relation, ValueRef};
use std::collections::{HashMap, HashSet};

/// Default for [`Unroll::max_trip_count`].
pub const MAX_TRIP_COUNT: u64 = 64;

/// Default for [`Unroll::max_ops`]: body ops × trip count, summed over the loops unrolled.
pub const MAX_UNROLLED_OPS: usize = 200_000;

/// The unrolling pass (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct Unroll {
    /// Largest trip count unrolled; 0 disables the pass (`--unroll off`).
    pub max_trip_count: u64,
    /// Largest number of ops the copies may add to the graph, over all loops.
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
        "unroll"
    }

    fn run(&self, g: &mut Graph, _cx: &mut PassContext) -> Result<PassResult, PassError> {
        Ok(PassResult::changes(unroll_loops(g, self)))
    }
}

/// Unrolls the eligible `while` loops of `g` (not of its regions); returns how many.
pub fn unroll_loops(g: &mut Graph, limits: &Unroll) -> usize {
    if limits.max_trip_count == 0 {
        return 0;
    }
    let mut budget = limits.max_ops;
    let loops: Vec<(NodeId, u64)> = g
        .order()
        .iter()
        .filter(|&&id| g.node(id).kind() == OpKind::While)
        .filter_map(|&id| trip_count(g, id, limits.max_trip_count).map(|n| (id, n)))
        .collect();
    let mut done = 0;
    for (id, trips) in loops {
        let body_ops = g.node(id).regions[1].op_count();
        let Some(cost) = body_ops.checked_mul(trips as usize) else {
            continue;
        };
        if cost > budget {
            continue;
        }
        budget -= cost;
        unroll(g, id, trips);
        done += 1;
    }
    done
}

/// The trip count of `while` node `id`, when it is a constant of at most `max`.
pub fn trip_count(g: &Graph, id: NodeId, max: u64) -> Option<u64> {
    let n = g.node(id);
    let [cond, body] = n.regions.as_slice() else {
        return None;
    };
    if has_side_effects(n) {
        return None;
    }
    let inits = g.operands(id);
    // The condition: compare(counter, bound) in either operand order, the bound a constant
    // or a carried value the body passes through unchanged with a constant start (the trip
    // count ONNX `Loop`/`Scan` carry).
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
    let init = *inits.get(k)?;
    let mut v = scalar_int(g, init)?;
    let mut trips = 0u64;
    while rel.holds(v, c) {
        trips += 1;
        if trips > max {
            return None;
        }
        v = v.checked_add(step)?;
    }
    Some(trips)
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
pub(super) fn scalar_int(g: &Graph, v: ValueRef) -> Option<i64> {
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
