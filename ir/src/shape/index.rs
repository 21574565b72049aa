//! Shape rule of `gather` (StableHLO spec, `gather` C1–C24).

use super::{invalid, nth, one, Inferred};
use crate::dim::DimExpr;
use crate::op::{GatherDims, OpKind};
use crate::types::TensorType;

/// `gather`: batch dimensions of the indices (all but `index_vector_dim`) interleaved with the
/// slice's offset dimensions at `offset_dims` (spec C22–C24).
pub(super) fn gather(op: OpKind, g: &GatherDims, operands: &[&TensorType]) -> Inferred {
    let x = nth(op, operands, 0)?;
    let idx = nth(op, operands, 1)?;
    let sizes = &g.slice_sizes;
    if sizes.len() != x.rank() {
        return Err(invalid(op, "slice_sizes length differs from operand rank"));
    }
    let batch: Vec<DimExpr> = (0..idx.rank())
        .filter(|&i| i as i64 != g.index_vector_dim)
        .map(|i| idx.shape[i].clone())
        .collect();
    let offs: Vec<DimExpr> = (0..x.rank())
        .filter(|i| {
            !g.collapsed_slice_dims.contains(&(*i as i64))
                && !g.operand_batching_dims.contains(&(*i as i64))
        })
        .map(|i| sizes[i].clone())
        .collect();
    if offs.len() != g.offset_dims.len() {
        return Err(invalid(
            op,
            "offset_dims count differs from the non-collapsed slice dims",
        ));
    }
    let rank = batch.len() + offs.len();
    let mut s = Vec::with_capacity(rank);
    let (mut bi, mut oi) = (0, 0);
    for i in 0..rank {
        if g.offset_dims.contains(&(i as i64)) {
            s.push(offs[oi].clone());
            oi += 1;
        } else {
            s.push(
                batch
                    .get(bi)
                    .cloned()
                    .ok_or_else(|| invalid(op, "offset_dims out of range"))?,
            );
            bi += 1;
        }
    }
    one(TensorType::new(x.dtype, s))
}
