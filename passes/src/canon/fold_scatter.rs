//! Rule 12 of [`super::fold`]: a sum of `scatter`-adds into zeros whose windows tile the
//! result along one dimension is a `concatenate`.
//!
//! The transpose of splitting a vector into pieces (`x[:, 0:32]`, `x[:, 32:64]`, ... of an RNN
//! cell's gate matmul) is, in JAX's backward pass, one `scatter` per piece of its cotangent into
//! a zero tensor, summed with `add`: `add(add(scatter(0, [0], u0), scatter(0, [32], u1)),
//! scatter(0, [64], u2))`. When the windows are disjoint and cover the result, every element is
//! the sum of one `0 + u_i` and zeros, so the sum is `concatenate(0 + u0, 0 + u1, 0 + u2)`
//! along the split dimension: one op instead of a zero fill and a scatter per piece, and no
//! add of whole tensors.
//!
//! Matched: an `add` tree (an `add` whose operands are `add`s read by nothing else, down to its
//! leaves, at most [`MAX_LEAVES`]) whose leaves are `scatter`s with
//! * one operand, one update, the combiner `add` of the region's two arguments (either order);
//! * as operand a `broadcast_in_dim` of a scalar `constant` `+0` (or a splat `constant` `+0`)
//!   of the result's type;
//! * start indices a small constant holding one index vector (rank 0, or rank 1 with
//!   `index_vector_dim = 0`), no batching or inserted dimensions, the update's dimensions all
//!   window dimensions in order (the update is the window);
//! * the window inside the operand (a scatter skips windows that are not), covering every
//!   dimension whole except one, `d`, the same for every leaf;
//!
//! and the leaves' windows along `d` tile `[0, dim(d))` without overlap.
//!
//! Exactness: `+0 + u` is never `-0`, and `x + (+0) = x` for every `x` other than `-0` (a NaN
//! stays that NaN), so each element of the tree's result is the one `0 + u_i` that its window
//! holds, in whatever order the tree adds; IEEE addition is commutative. Each piece is
//! computed as `add(broadcast_in_dim(0), u_i)`, which the fusion pass may merge into the
//! update's producer. Integer zeros hold the same.
//!
//! Invariant: the result is bit-identical and of the tree's type; the new ops take the root's
//! place in program order, the old scatters and adds, when now unused, are left to DCE; no new
//! tensor is larger than the tree's result. Change count: trees replaced.

use super::fold::{elements, one_index_vector, Num};
use ebb_ir::op::{BroadcastSpec, ScatterDims};
use ebb_ir::{DimExpr, Graph, NodeId, Op, OpKind, TensorType, ValueRef};

/// The most leaves of one `add` tree that the rule looks at.
pub const MAX_LEAVES: usize = 16;

/// The concatenation an `add` tree rooted at `id` is (rule 12): the scalar zero to broadcast
/// (an existing value, or a literal to make), the updates in window order, the dimension.
pub(super) struct Tiling {
    /// A scalar `+0` of the element type, when the graph has one.
    pub zero: Option<ValueRef>,
    /// The element type.
    pub dtype: ebb_ir::DType,
    /// The updates, ordered along `dim`.
    pub pieces: Vec<ValueRef>,
    /// The concatenation dimension.
    pub dim: i64,
}

/// The [`Tiling`] of `add` node `id` of `g`, when rule 12 applies.
pub(super) fn tiling(g: &Graph, id: NodeId, max: usize) -> Option<Tiling> {
    if g.node(id).op != Op::Add {
        return None;
    }
    let out = g.node(id).outputs.first()?.clone();
    let mut leaves = Vec::new();
    let mut stack = g.operands(id);
    while let Some(v) = stack.pop() {
        let n = g.node(v.node);
        if n.op == Op::Add && v.output == 0 && g.users(v.node).len() == 1 {
            stack.extend(g.operands(v.node));
        } else {
            leaves.push(v);
        }
        if leaves.len() + stack.len() > MAX_LEAVES {
            return None;
        }
    }
    let mut zero = None;
    let mut windows = Vec::new();
    for v in &leaves {
        let (z, start, update) = leaf(g, *v, &out, max)?;
        if zero.is_some() && zero != Some(z) {
            return None;
        }
        zero = Some(z);
        windows.push((start, update));
    }
    // The one dimension along which the windows are not whole.
    let mut dim = None;
    for (start, update) in &windows {
        let shape = &g.value_type(*update).shape;
        for (k, (&s, upd)) in start.iter().zip(shape).enumerate() {
            let whole = s == 0 && *upd == out.shape[k];
            if !whole && dim.is_some_and(|d| d != k) {
                return None;
            }
            if !whole {
                dim = Some(k);
            }
        }
    }
    let d = dim?;
    let total = out.shape[d].as_const()?;
    windows.sort_by_key(|(s, _)| s[d]);
    let mut at = 0;
    for (start, update) in &windows {
        let len = g.value_type(*update).shape[d].as_const()?;
        if start[d] != at {
            return None;
        }
        at += len;
    }
    (at == total).then(|| Tiling {
        zero: zero.flatten(),
        dtype: out.dtype,
        pieces: windows.into_iter().map(|(_, u)| u).collect(),
        dim: d as i64,
    })
}

/// A leaf of the tree: the scalar zero it broadcasts (`None` for a splat `constant` operand),
/// the window's start, the update.
#[allow(clippy::type_complexity)]
fn leaf(
    g: &Graph,
    v: ValueRef,
    out: &TensorType,
    max: usize,
) -> Option<(Option<ValueRef>, Vec<i64>, ValueRef)> {
    let n = g.node(v.node);
    let Op::Scatter(d) = &n.op else {
        return None;
    };
    let ops = g.operands(v.node);
    let [operand, indices, update] = ops.as_slice() else {
        return None;
    };
    if v.output != 0 || n.outputs.len() != 1 || n.outputs[0] != *out || !adds(g, v.node) {
        return None;
    }
    let zero = zero_of(g, *operand, max)?;
    let upd = g.value_type(*update);
    let rank = out.rank();
    let window: Vec<i64> = (0..rank as i64).collect();
    if upd.rank() != rank || upd.dtype != out.dtype || d.update_window_dims != window || !plain(d) {
        return None;
    }
    let starts = starts(g, d, *indices, max)?;
    let mut start = vec![0; rank];
    for (k, &dim) in d.scatter_dims_to_operand_dims.iter().enumerate() {
        let dim = usize::try_from(dim).ok().filter(|&x| x < rank)?;
        start[dim] = starts[k];
    }
    for ((&s, u), o) in start.iter().zip(&upd.shape).zip(&out.shape) {
        let fits = if u == o {
            s == 0
        } else {
            let (size, whole) = (u.as_const()?, o.as_const()?);
            s >= 0 && s + size <= whole
        };
        if !fits {
            return None;
        }
    }
    Some((zero, start, *update))
}

/// Whether the scatter has no inserted or batching dimensions.
fn plain(d: &ScatterDims) -> bool {
    d.inserted_window_dims.is_empty()
        && d.input_batching_dims.is_empty()
        && d.scatter_indices_batching_dims.is_empty()
}

/// Whether node `id`'s one region returns the `add` of its two arguments.
fn adds(g: &Graph, id: NodeId) -> bool {
    matches!(g.node(id).regions.as_slice(), [r] if ebb_ir::op::fusion::combiner(r) == Some(OpKind::Add))
}

/// `Some(Some(s))` when `v` is `broadcast_in_dim` of the scalar `+0` `s`, `Some(None)` when
/// it is a splat `constant` `+0`, else `None`.
fn zero_of(g: &Graph, v: ValueRef, max: usize) -> Option<Option<ValueRef>> {
    let is_zero = |x: ValueRef| match elements(g, x, max) {
        Some((true, xs)) => match xs[0] {
            Num::I(i) => i == 0,
            Num::F(f) => f == 0.0 && f.is_sign_positive(),
        },
        _ => false,
    };
    let n = g.node(v.node);
    match &n.op {
        Op::Constant(_) => is_zero(v).then_some(None),
        Op::BroadcastInDim(BroadcastSpec { dims, .. }) if dims.is_empty() => {
            let s = *g.operands(v.node).first()?;
            (g.value_type(s).rank() == 0 && is_zero(s)).then_some(Some(s))
        }
        _ => None,
    }
}

/// The start indices of scatter `d` (one per `scatter_dims_to_operand_dims` entry), when
/// `indices` is a constant holding exactly one index vector.
fn starts(g: &Graph, d: &ScatterDims, indices: ValueRef, max: usize) -> Option<Vec<i64>> {
    one_index_vector(
        g,
        indices,
        d.index_vector_dim,
        d.scatter_dims_to_operand_dims.len(),
        max,
    )
}

/// The `broadcast_in_dim` of a scalar to `shape`.
pub(super) fn broadcast(shape: &[DimExpr]) -> Op {
    Op::BroadcastInDim(BroadcastSpec {
        dims: Vec::new(),
        shape: shape.to_vec(),
    })
}
