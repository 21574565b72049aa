//! Control flow: `while` (regions `cond` and `body` run as nested programs on the
//! loop-carried values; a `cond` that compares a carried counter with a constant bound is
//! evaluated directly, see `CounterCond`) and `case` (the selected branch runs as a nested
//! program); `sort` is in `sort.rs`. `optimization_barrier` is the identity and handled by the
//! dispatcher; `custom_call` is rejected there.
//!
//! Invariant: `while` charges the executor's memory accounting with the largest
//! per-iteration region peak minus the region inputs; `case` with the largest branch's (the
//! taken one measured, the others from their types, as the planner charges them) less the
//! bytes of its results not written in place ([`ebb_ir::op::in_place_writes`]: a branch that
//! returns an operand unchanged returns that very tensor), and at least 0; regions are prepared
//! once per op execution, not per iteration, and a loop's body reuses its working vectors and
//! one statistics value at every iteration.

use super::reduce::scalar_compare;
use super::{program_schedule, Ctx, KernelFailure, OutType, Program};
use crate::error::OpError;
use crate::tensor::{Data, Scalar, Tensor};
use ebb_ir::{DType, Graph, Op, Relation, ValueRef};

fn region_err(name: &str) -> impl Fn(crate::error::ExecError) -> KernelFailure + '_ {
    move |e| {
        KernelFailure::Op(OpError::Region {
            region: name.into(),
            source: Box::new(e),
        })
    }
}

/// Whether a region holds a non-scalar value (only those are charged; see the module docs).
fn has_tensor(r: &Graph) -> bool {
    r.order()
        .iter()
        .any(|&n| r.node(n).outputs.iter().any(|t| t.rank() > 0))
}

/// The program of region `i` of the op, run with the enclosing op's executor, buffer pool and
/// kernel memo; prepared once per prepared enclosing program when it keeps the regions
/// ([`Ctx::regions`]).
fn nested<'g>(ctx: &Ctx<'g>, i: usize, name: &str) -> Result<Program<'g>, KernelFailure> {
    let g = &ctx.node.regions[i];
    let fresh = || -> Result<_, KernelFailure> {
        Ok(Program::new(g, &program_schedule(g), ctx.bindings)
            .map_err(region_err(name))?
            .prepared())
    };
    let prep = match ctx.regions.get(i) {
        Some(cell) => match cell.get() {
            Some(p) => p.clone(),
            None => {
                let p = fresh()?;
                let _ = cell.set(p.clone());
                p
            }
        },
        None => fresh()?,
    };
    let p = Program::from_prepared(g, prep)
        .with_executor(ctx.executor)
        .with_pool(ctx.pool.clone())
        .untimed();
    Ok(match ctx.memo {
        Some(m) => p.with_kernel_memo(m.clone()),
        None => p,
    })
}

/// `while`: runs `body` while `cond` returns true.
pub(crate) fn while_loop(ctx: &Ctx, ops: Vec<Tensor>) -> Result<Vec<Tensor>, KernelFailure> {
    let [cond, body] = ctx.node.regions.as_slice() else {
        return Err(OpError::Invalid("while needs cond and body regions".into()).into());
    };
    let (cp, bp) = (nested(ctx, 0, "cond")?, nested(ctx, 1, "body")?);
    let (ct, bt) = (has_tensor(cond), has_tensor(body));
    let counted = counter_cond(cond, ctx.bindings);
    let mut vals = ops;
    // A carried value that the body writes in place into its next value starts in the loop
    // result's arena range: the body then updates it there, iteration after iteration, and
    // the result needs no copy after the loop.
    if let Some(slots) = ctx.slots {
        let kept = kept_in_place(body);
        for (i, t) in vals.iter_mut().enumerate() {
            if !kept.contains(&i) {
                continue;
            }
            if let Some(mut d) = slots.take_at(i, t.dtype(), t.len()) {
                // A carried value the loop overwrites whole before reading it
                // (`super::overwrite`) starts with the range's stale contents.
                if !ctx.overwritten.contains(&i) {
                    super::placement::copy_into(&mut d, t.data());
                }
                *t = Tensor::from_parts(t.shape(), d);
            }
        }
    }
    let mut transient = 0u64;
    // One statistics value for every run of the body (its vectors reused).
    let mut st = super::ExecStats::default();
    loop {
        let go = match &counted {
            Some(cc) => cc.holds(&vals)?,
            None => {
                let (c, st) = cp.run(vals.clone()).map_err(region_err("cond"))?;
                if ct {
                    transient = transient.max(st.peak_bytes - st.input_bytes);
                }
                match c.first().and_then(|t| t.scalar_value()) {
                    Some(Scalar::I1(b)) => b,
                    _ => {
                        return Err(OpError::Invalid("cond must return an i1 scalar".into()).into())
                    }
                }
            }
        };
        if !go {
            break;
        }
        let next = bp.run_reusing(vals, &mut st).map_err(region_err("body"))?;
        if bt {
            transient = transient.max(st.peak_bytes - st.input_bytes);
        }
        vals = next;
    }
    ctx.transient.set(transient);
    Ok(vals)
}

/// A `while` condition `compare(counter, bound)` (either operand order) of a scalar integer
/// carried value and a scalar `constant` or `dim_constant`, evaluated without running the
/// region: the bound is computed once, as its op computes it, and compared with the
/// counter as the `compare` kernel compares (so the loop takes the same turns). The region
/// holds no tensor, so it charges nothing either way.
pub(super) struct CounterCond {
    /// The carried value compared.
    pub(super) arg: usize,
    /// The bound's value at the bindings.
    pub(super) bound: Scalar,
    /// Whether the bound is the compare's first operand.
    pub(super) bound_first: bool,
    pub(super) dir: Relation,
    total: bool,
}

impl CounterCond {
    /// Whether the loop goes on with carried values `vals`.
    fn holds(&self, vals: &[Tensor]) -> Result<bool, KernelFailure> {
        let c = vals
            .get(self.arg)
            .and_then(|t| t.scalar_value())
            .ok_or_else(|| OpError::Invalid("the loop counter is not a scalar".into()))?;
        let (a, b) = if self.bound_first {
            (self.bound, c)
        } else {
            (c, self.bound)
        };
        Ok(scalar_compare(a, b, self.dir, self.total)?)
    }
}

/// The [`CounterCond`] of condition region `r` at `bindings`, if it has that form.
pub(super) fn counter_cond(r: &Graph, bindings: &ebb_ir::Bindings) -> Option<CounterCond> {
    let ops = program_schedule(r);
    let [bound, cmp] = ops.as_slice() else {
        return None;
    };
    let Op::Compare(spec) = &r.node(*cmp).op else {
        return None;
    };
    if r.outputs() != [ValueRef::new(*cmp, 0)] {
        return None;
    }
    let b = r.node(*bound);
    let ty = b.outputs.first()?;
    if b.outputs.len() != 1 || ty.rank() != 0 || !matches!(ty.dtype, DType::I32 | DType::I64) {
        return None;
    }
    let value = match &b.op {
        Op::Constant(lit) => {
            let t = Tensor::from_literal(lit, Vec::new()).ok()?;
            (t.dtype() == ty.dtype).then_some(t)?.scalar_value()?
        }
        Op::DimConstant(vals) => {
            let [d] = vals.as_slice() else {
                return None;
            };
            let v = d.eval(bindings).ok()?;
            Data::I64(vec![v].into()).into_dtype(ty.dtype).get(0)?
        }
        _ => return None,
    };
    let bv = ValueRef::new(*bound, 0);
    let operands = r.operands(*cmp);
    let [x, y] = operands.as_slice() else {
        return None;
    };
    let (counter, bound_first) = if *y == bv {
        (*x, false)
    } else if *x == bv {
        (*y, true)
    } else {
        return None;
    };
    let arg = r.inputs().iter().position(|&a| a == counter.node)?;
    (counter.output == 0 && r.value_type(counter) == ty).then_some(CounterCond {
        arg,
        bound: value,
        bound_first,
        dir: spec.direction,
        total: spec.total_order(),
    })
}

/// The carried values `i` that a `while` body writes in place into its next value: output `i`
/// is a result that its op writes into the body's argument `i`
/// ([`ebb_ir::op::in_place_writes`], which needs the argument donated to that output).
fn kept_in_place(body: &Graph) -> Vec<usize> {
    let writes = ebb_ir::op::in_place_writes(body);
    let args = body.inputs();
    body.outputs()
        .iter()
        .enumerate()
        .filter(|&(i, out)| {
            writes.get(&out.node).is_some_and(|w| {
                w.iter().any(|w| {
                    w.result == out.output as usize
                        && body.operands(out.node).get(w.operand)
                            == args.get(i).map(|&a| ValueRef::new(a, 0)).as_ref()
                })
            })
        })
        .map(|(i, _)| i)
        .collect()
}

/// `case`: runs the branch that operand 0 selects (the last one for an index outside
/// `[0, N)`, as the spec says) on the other operands.
pub(crate) fn case(ctx: &Ctx, mut ops: Vec<Tensor>) -> Result<Vec<Tensor>, KernelFailure> {
    let branches = ctx.node.regions.as_slice();
    if branches.is_empty() || ops.is_empty() {
        return Err(OpError::Invalid("case needs an index and a branch".into()).into());
    }
    let index = match ops.remove(0).scalar_value() {
        Some(Scalar::I32(i)) => i64::from(i),
        Some(Scalar::I64(i)) => i,
        _ => {
            return Err(OpError::Invalid("the case index must be an integer scalar".into()).into())
        }
    };
    let last = branches.len() - 1;
    let taken = usize::try_from(index).map_or(last, |i| i.min(last));
    let name = format!("branch {taken}");
    let r = &branches[taken];
    let (outs, st) = nested(ctx, taken, &name)?
        .run(ops)
        .map_err(region_err(&name))?;
    // The plan reserves the largest branch's memory whichever runs: the branches not taken
    // are charged without running them.
    let mut transient = if has_tensor(r) {
        st.peak_bytes - st.input_bytes
    } else {
        0
    };
    for (b, other) in branches.iter().enumerate() {
        if b != taken && has_tensor(other) {
            let name = format!("branch {b}");
            let p = nested(ctx, b, &name)?;
            transient = transient.max(p.static_transient().map_err(region_err(&name))?);
        }
    }
    if branches.iter().any(has_tensor) {
        transient = transient.saturating_sub(held_apart(ctx.out, ctx.in_place));
    }
    ctx.transient.set(transient);
    Ok(outs)
}

/// Bytes of the results of a `case` (types `out` at the bindings) not written in place
/// (`in_place`): counted among the op's results, and inside the branch that computes them.
fn held_apart(out: &[OutType], in_place: &[ebb_ir::op::InPlace]) -> u64 {
    out.iter()
        .enumerate()
        .filter(|(j, _)| !in_place.iter().any(|w| w.result == *j))
        .map(|(_, t)| t.bytes())
        .sum()
}

/// The region memory op `id` of `g` holds at its own point, from its types alone (`out`: its
/// result types at `bindings`, `in_place`: its in-place writes): a `fusion`'s tile buffers, a
/// dot-accumulate's product computed apart ([`ebb_ir::op::accumulate_product_bytes`]), the
/// largest `case` branch beyond the results not written in place, the larger `while` region
/// (one iteration); 0 for ops whose regions hold no tensor (reduction bodies, comparators).
pub(crate) fn static_region_bytes(
    g: &ebb_ir::Graph,
    id: ebb_ir::NodeId,
    out: &[OutType],
    in_place: &[ebb_ir::op::InPlace],
    bindings: &ebb_ir::Bindings,
) -> Result<u64, crate::error::ExecError> {
    let node = g.node(id);
    let shape_err = |msg: String| crate::error::ExecError::Shape {
        graph: String::new(),
        op: node.kind().name().into(),
        loc: super::loc_of(node),
        msg,
    };
    if let Some(bytes) = ebb_ir::op::accumulate_product_bytes(g, id, in_place) {
        let bytes = bytes
            .and_then(|e| e.eval(bindings))
            .map_err(|e| shape_err(e.to_string()))?;
        return Ok(u64::try_from(bytes).unwrap_or(0));
    }
    if let (Op::Fusion(_), [region]) = (&node.op, node.regions.as_slice()) {
        let tile = ebb_ir::op::fusion_tile_bytes(region)
            .and_then(|e| e.eval(bindings))
            .map_err(|e| shape_err(e.to_string()))?;
        return Ok(u64::try_from(tile).unwrap_or(0));
    }
    if !matches!(node.op, Op::Case | Op::While) {
        return Ok(0);
    }
    let mut most = 0;
    for r in node.regions.iter().filter(|r| has_tensor(r)) {
        let p = Program::new(r, &program_schedule(r), bindings)?;
        most = most.max(p.static_transient()?);
    }
    if node.op == Op::Case && node.regions.iter().any(has_tensor) {
        most = most.saturating_sub(held_apart(out, in_place));
    }
    Ok(most)
}
