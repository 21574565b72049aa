//! Which carried values of a `while` the loop overwrites whole before it reads them, and
//! which `broadcast_in_dim` results only initialize such a carried value: the kernel of that
//! broadcast may leave its buffer's contents stale (no fill), and the loop may start that
//! carried value in its result's arena range without copying the initial contents there.
//!
//! This is the stack of a `lax.scan`'s per-iteration outputs (and of the residuals its
//! linearization saves): JAX initializes it with zeros, then the body writes row `i` of it at
//! iteration `i` (or row `n - 1 - i` for `reverse=True`) with a `dynamic_update_slice`, and
//! nothing reads it before the loop ends. Filling it costs a write of the whole stack (and a
//! copy into the loop result's range) that the loop then overwrites.
//!
//! A carried value `i` of a `while` is *overwritten* at the bindings when all of these hold:
//! - the condition is `counter < bound` ([`super::control::counter_cond`]'s form, the bound a
//!   constant or `dim_constant` of value `n ≥ 1`), the counter's initial value (the `while`
//!   operand) is a constant 0, and the body returns `add(counter, 1)` as the counter;
//!   so the body runs exactly `n` times, with counter values `0, 1, …, n − 1`;
//! - body output `i` is a `dynamic_update_slice` of body argument `i` (its only use in the
//!   body; the condition does not read it) by an update of one row (`[1, d1, …]` of a
//!   `[n, d1, …]` value: every dimension but the first whole), at start indices whose first
//!   is a scalar integer function of the counter (constants, `dim_constant`s, the counter,
//!   `add`/`subtract`/`multiply`/`negate`, and loop fusions of them) and whose others are
//!   constant 0; and the `dynamic_update_slice`'s result is read by nothing but the body's
//!   return (once);
//! - the row indices that function gives over the `n` counter values, clamped to `[0, n − 1]`
//!   as `dynamic_update_slice` clamps them, are every row `0..n`.
//!
//! Then every element of carried value `i` is written by the loop before anything reads it
//! (the body reads it only through the update itself, which does not read the rows it leaves
//! alone, the condition not at all), and the loop's result holds only written elements.
//!
//! Invariant: a broadcast is marked only when its one use is a `while` operand that is
//! overwritten in this sense, so no op ever reads an element of a buffer left stale; results
//! and the memory accounting are those of a run that fills it (the same buffers, the same
//! lifetimes).

use super::control::counter_cond;
use crate::tensor::{Scalar, Tensor};
use ebb_ir::{Bindings, Graph, NodeId, Op, OpKind, Relation, ValueRef};

/// The carried values of `while` op `id` of `g` that the loop overwrites whole before reading
/// them, at `bindings` (see the module docs); empty when `id` is not a `while` or the loop has
/// not the counted form.
pub fn overwritten_carries(g: &Graph, id: NodeId, bindings: &Bindings) -> Vec<usize> {
    let node = g.node(id);
    let (Op::While, [cond, body]) = (&node.op, node.regions.as_slice()) else {
        return Vec::new();
    };
    let Some(k) = counted(g, id, cond, body, bindings) else {
        return Vec::new();
    };
    let (counter, n) = k;
    let args = body.inputs();
    let cond_args = cond.inputs();
    let outs = body.outputs();
    (0..outs.len())
        .filter(|&i| i != counter)
        .filter(|&i| cond_args.get(i).is_some_and(|&a| cond.users(a).is_empty()))
        .filter(|&i| written_whole(body, args[i], outs[i], args[counter], n, bindings))
        .collect()
}

/// `(counter argument, trip count n)` when the loop is `for counter in 0..n` (see the module
/// docs).
fn counted(
    g: &Graph,
    id: NodeId,
    cond: &Graph,
    body: &Graph,
    b: &Bindings,
) -> Option<(usize, i64)> {
    let cc = counter_cond(cond, b)?;
    // `counter < bound`, or `bound > counter`.
    let lt = matches!(
        (cc.dir, cc.bound_first),
        (Relation::Lt, false) | (Relation::Gt, true)
    );
    let n = int(cc.bound)?;
    if !lt || n < 1 {
        return None;
    }
    let k = cc.arg;
    // Initial value 0.
    let init = g.operands(id).get(k).copied()?;
    if init.output != 0 || const_int(g, init.node)? != 0 {
        return None;
    }
    // Next value `counter + 1`.
    let arg = ValueRef::new(*body.inputs().get(k)?, 0);
    let next = *body.outputs().get(k)?;
    if body.node(next.node).op != Op::Add || next.output != 0 {
        return None;
    }
    let ops = body.operands(next.node);
    let one = match ops.as_slice() {
        [x, y] if *x == arg => *y,
        [x, y] if *y == arg => *x,
        _ => return None,
    };
    (one.output == 0 && const_int(body, one.node)? == 1).then_some((k, n))
}

/// Whether body output `out` is a one-row `dynamic_update_slice` of argument `arg` (its only
/// use) at a first index that visits every row over counter values `0..n` (see the module
/// docs).
fn written_whole(
    body: &Graph,
    arg: NodeId,
    out: ValueRef,
    counter: NodeId,
    n: i64,
    b: &Bindings,
) -> bool {
    let dus = out.node;
    if body.node(dus).kind() != OpKind::DynamicUpdateSlice || out.output != 0 {
        return false;
    }
    let ops = body.operands(dus);
    let [target, update, first, rest @ ..] = ops.as_slice() else {
        return false;
    };
    if *target != ValueRef::new(arg, 0) || body.users(arg).len() != 1 {
        return false;
    }
    // The update's result feeds the return only, once.
    if !body.users(dus).is_empty() || body.outputs().iter().filter(|&&o| o == out).count() != 1 {
        return false;
    }
    let (Ok(shape), Ok(ushape)) = (
        eval_shape(&body.value_type(*target).shape, b),
        eval_shape(&body.value_type(*update).shape, b),
    ) else {
        return false;
    };
    if shape.first() != Some(&n) || ushape.first() != Some(&1) || shape[1..] != ushape[1..] {
        return false;
    }
    if rest.len() + 1 != shape.len() || !rest.iter().all(|v| const_int(body, v.node) == Some(0)) {
        return false;
    }
    let mut seen = vec![false; n as usize];
    for t in 0..n {
        let Some(r) = scalar_of(body, *first, counter, t, b, 0) else {
            return false;
        };
        seen[r.clamp(0, n - 1) as usize] = true;
    }
    seen.iter().all(|&s| s)
}

/// A shape's dimensions at the bindings.
fn eval_shape(shape: &[ebb_ir::DimExpr], b: &Bindings) -> Result<Vec<i64>, ()> {
    shape.iter().map(|d| d.eval(b).map_err(|_| ())).collect()
}

/// An integer scalar as `i64`.
fn int(s: Scalar) -> Option<i64> {
    match s {
        Scalar::I32(v) => Some(i64::from(v)),
        Scalar::I64(v) => Some(v),
        _ => None,
    }
}

/// The value of a scalar integer `constant` node.
fn const_int(g: &Graph, id: NodeId) -> Option<i64> {
    let node = g.node(id);
    let Op::Constant(lit) = &node.op else {
        return None;
    };
    let ty = node.outputs.first()?;
    if ty.rank() != 0 {
        return None;
    }
    int(Tensor::from_literal(lit, Vec::new()).ok()?.scalar_value()?)
}

/// Nesting depth of loop fusions followed by [`scalar_of`].
const MAX_DEPTH: usize = 4;

/// The value of scalar integer `v` of `g` when argument `counter` holds `t`: `None` when it
/// depends on anything else, is not an `i32`/`i64` scalar, or leaves the `i32` range (so that
/// the `i64` arithmetic here is the op's own).
fn scalar_of(
    g: &Graph,
    v: ValueRef,
    counter: NodeId,
    t: i64,
    b: &Bindings,
    depth: usize,
) -> Option<i64> {
    let node = g.node(v.node);
    let ty = node.outputs.get(v.output as usize)?;
    if ty.rank() != 0 || !matches!(ty.dtype, ebb_ir::DType::I32 | ebb_ir::DType::I64) {
        return None;
    }
    let arg = |k: usize| -> Option<i64> {
        let o = *g.operands(v.node).get(k)?;
        scalar_of(g, o, counter, t, b, depth)
    };
    let r = match &node.op {
        _ if v.node == counter => t,
        Op::Fusion(_) if depth < MAX_DEPTH && v.output == 0 => {
            let [region] = node.regions.as_slice() else {
                return None;
            };
            let [ro] = region.outputs() else {
                return None;
            };
            return fused_scalar(g, v.node, region, *ro, counter, t, b, depth + 1);
        }
        op => scalar_arith(g, v.node, op, b, arg)?,
    };
    in_i32(r)
}

/// The value of node `id` of `graph` (its op `op`) when it is scalar integer arithmetic: a
/// constant, a `dim_constant`, or add/subtract/multiply/negate of operands whose values `arg`
/// gives; `None` otherwise or on overflow.
fn scalar_arith(
    graph: &Graph,
    id: NodeId,
    op: &Op,
    b: &Bindings,
    arg: impl Fn(usize) -> Option<i64>,
) -> Option<i64> {
    Some(match op {
        Op::Constant(_) => const_int(graph, id)?,
        Op::DimConstant(vals) => match vals.as_slice() {
            [d] => d.eval(b).ok()?,
            _ => return None,
        },
        Op::Add => arg(0)?.checked_add(arg(1)?)?,
        Op::Subtract => arg(0)?.checked_sub(arg(1)?)?,
        Op::Multiply => arg(0)?.checked_mul(arg(1)?)?,
        Op::Negate => arg(0)?.checked_neg()?,
        _ => return None,
    })
}

/// `r` when it fits an `i32` (an index the kernels take).
fn in_i32(r: i64) -> Option<i64> {
    (i64::from(i32::MIN)..=i64::from(i32::MAX))
        .contains(&r)
        .then_some(r)
}

/// [`scalar_of`] for output `ro` of the region of fusion `f` of `g`: region inputs take the
/// values of the fusion's operands.
#[allow(clippy::too_many_arguments)]
fn fused_scalar(
    g: &Graph,
    f: NodeId,
    region: &Graph,
    ro: ValueRef,
    counter: NodeId,
    t: i64,
    b: &Bindings,
    depth: usize,
) -> Option<i64> {
    let operands = g.operands(f);
    let node = region.node(ro.node);
    let ty = node.outputs.get(ro.output as usize)?;
    if ty.rank() != 0 || !matches!(ty.dtype, ebb_ir::DType::I32 | ebb_ir::DType::I64) {
        return None;
    }
    if node.kind() == OpKind::Input {
        let k = region.inputs().iter().position(|&a| a == ro.node)?;
        return scalar_of(g, *operands.get(k)?, counter, t, b, depth);
    }
    let arg = |k: usize| -> Option<i64> {
        let o = *region.operands(ro.node).get(k)?;
        fused_scalar(g, f, region, o, counter, t, b, depth)
    };
    in_i32(scalar_arith(region, ro.node, &node.op, b, arg)?)
}

/// The splat `broadcast_in_dim` ops of `g` (its top level) whose kernels leave their buffers
/// unfilled at `bindings`: each only initializes a carried value that its `while` overwrites
/// whole before reading it ([`initializes_overwritten`]), in node order.
pub fn unfilled_inits(g: &Graph, bindings: &Bindings) -> Vec<NodeId> {
    let mut of = std::collections::HashMap::new();
    for &id in g.order() {
        if g.node(id).op == Op::While {
            of.insert(id, overwritten_carries(g, id, bindings));
        }
    }
    g.order()
        .iter()
        .copied()
        .filter(|&id| initializes_overwritten(g, id, |w| of.get(&w).cloned().unwrap_or_default()))
        .collect()
}

/// Whether `broadcast_in_dim` op `id` of `g` only initializes an overwritten carried value:
/// a splat (one-element operand), its result read once, as operand `i` of a `while` whose
/// carried value `i` is overwritten (`overwritten(while)`), and not a graph output.
pub(crate) fn initializes_overwritten(
    g: &Graph,
    id: NodeId,
    overwritten: impl Fn(NodeId) -> Vec<usize>,
) -> bool {
    let node = g.node(id);
    if node.kind() != OpKind::BroadcastInDim || node.outputs.len() != 1 {
        return false;
    }
    let one = g.operands(id).first().is_some_and(|v| {
        g.value_type(*v)
            .shape
            .iter()
            .all(|d| d.as_const() == Some(1))
    });
    if !one || g.outputs().iter().any(|o| o.node == id) {
        return false;
    }
    match g.users(id).as_slice() {
        [(w, i, 0)] => g.node(*w).op == Op::While && overwritten(*w).contains(&(*i as usize)),
        _ => false,
    }
}
