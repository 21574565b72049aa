//! Rule 11 of [`super::fold`]: a `gather` of one window at constant start indices is a `slice`.
//!
//! A `gather` whose start indices are a small constant holding a single index vector (indices
//! of rank 0, or of rank 1 with `index_vector_dim = 0`), without batching dimensions, reads one
//! window of `slice_sizes` from its operand: along dimension `d = start_index_map[k]` it starts
//! at `clamp(indices[k], 0, dim(d) - slice_sizes[d])`, along every other dimension at 0
//! (StableHLO spec, `gather`: the full start index is clamped into the operand). Its result
//! holds that window with the `collapsed_slice_dims` (of size 1) removed, in operand order
//! (`offset_dims` are then `[0, rank)`). So it becomes `slice(operand, start, start + sizes)`,
//! followed by a `reshape` to the result type when dimensions are collapsed. JAX emits such
//! gathers for every static index into a vector (`x[:, 32:64]` of a gate matrix in a scan's
//! body once the loop-invariant offsets are constants, [`super::fold_loop`]).
//!
//! A dimension whose size is symbolic is understood only when the window covers it whole
//! (`dim - size` is the constant 0, the start clamps to 0).
//!
//! Invariant: the replacement reads the same elements in the same order, so the result is
//! bit-identical; it takes the gather's place in program order and has its result type. The
//! index constant, when now unused, is left to DCE. Change count: gathers replaced.

use super::fold::one_index_vector;
use ebb_ir::op::{GatherDims, SliceSpec};
use ebb_ir::{DimExpr, Graph, Node, NodeId, Op, TensorType, ValueRef};

/// The `slice` (and the `reshape` after it, when dimensions are collapsed) that `gather` node
/// `id` of `g` is, when rule 11 applies: `(slice node, its operand, reshape node)`.
pub(super) fn as_slice(
    g: &Graph,
    id: NodeId,
    max: usize,
) -> Option<(Node, ValueRef, Option<Node>)> {
    let n = g.node(id);
    let Op::Gather(d) = &n.op else {
        return None;
    };
    let ops = g.operands(id);
    let [operand, indices] = ops.as_slice() else {
        return None;
    };
    let out = n.outputs.first()?;
    let starts = starts(g, d, *indices, max)?;
    let src = g.value_type(*operand);
    let rank = src.rank();
    if d.slice_sizes.len() != rank || !d.operand_batching_dims.is_empty() {
        return None;
    }
    let mut start = vec![DimExpr::zero(); rank];
    let mut limit = d.slice_sizes.clone();
    for (k, &dim) in d.start_index_map.iter().enumerate() {
        let dim = usize::try_from(dim).ok().filter(|&x| x < rank)?;
        let room = src.shape[dim]
            .checked_sub(&d.slice_sizes[dim])
            .ok()?
            .as_const()?;
        if room < 0 {
            return None;
        }
        let s = starts[k].clamp(0, room);
        start[dim] = DimExpr::constant(s);
        limit[dim] = d.slice_sizes[dim].checked_add(&DimExpr::constant(s)).ok()?;
    }
    // The result is the window with the collapsed dimensions removed.
    let kept: Vec<DimExpr> = (0..rank)
        .filter(|k| !d.collapsed_slice_dims.contains(&(*k as i64)))
        .map(|k| d.slice_sizes[k].clone())
        .collect();
    let offsets: Vec<i64> = (0..kept.len() as i64).collect();
    if d.offset_dims != offsets || out.shape != kept || out.dtype != src.dtype {
        return None;
    }
    let window = TensorType::new(src.dtype, d.slice_sizes.clone());
    let mut slice = Node::new(
        Op::Slice(SliceSpec {
            strides: vec![DimExpr::constant(1); rank],
            start,
            limit,
        }),
        vec![window.clone()],
    );
    slice.loc.clone_from(&n.loc);
    let reshape = (window != *out).then(|| {
        let mut r = Node::new(Op::Reshape(out.shape.clone()), vec![out.clone()]);
        r.loc.clone_from(&n.loc);
        r
    });
    Some((slice, *operand, reshape))
}

/// The start indices of gather `d` (one per `start_index_map` entry), when `indices` is a
/// constant holding exactly one index vector and `d` has no batching dimensions.
fn starts(g: &Graph, d: &GatherDims, indices: ValueRef, max: usize) -> Option<Vec<i64>> {
    if !d.start_indices_batching_dims.is_empty() {
        return None;
    }
    one_index_vector(g, indices, d.index_vector_dim, d.start_index_map.len(), max)
}
