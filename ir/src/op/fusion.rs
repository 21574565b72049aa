//! The memory contract of a `fusion` op shared by the planner and the executor: a loop fusion
//! is evaluated over chunks of [`FUSION_CHUNK`] consecutive elements of its flat (row-major)
//! iteration space; each region value is a tile buffer of one chunk, live from its member to its
//! last in-region reader, and so is each region input read flat-aligned (a copy of that chunk
//! of the operand, made when the chunk starts). Nothing else of the region is materialized.
//!
//! Invariant: [`fusion_tile_bytes`] is the bytes the executor charges while the op runs, on top
//! of its operands and results, and never less than what it allocates for the tiles.

use super::{Op, OpKind};
use crate::dim::{DimError, DimExpr};
use crate::graph::{Graph, NodeId, ValueRef};
use std::collections::HashMap;

/// Elements per chunk of a loop fusion's iteration space.
pub const FUSION_CHUNK: i64 = 2048;

/// Whether `consumer` (in `g`) reads its operand `operand` flat-aligned with its own result:
/// an elementwise operand of the result's shape, a `reshape`, or an order-preserving
/// `broadcast_in_dim` that adds only unit dimensions.
pub fn reads_aligned(g: &Graph, consumer: NodeId, operand: usize) -> bool {
    let n = g.node(consumer);
    let Some(out) = n.outputs.first() else {
        return false;
    };
    let ins = g.operands(consumer);
    let Some(v) = ins.get(operand) else {
        return false;
    };
    let t = g.value_type(*v);
    match &n.op {
        Op::Reshape(_) => true,
        Op::BroadcastInDim(b) => {
            b.dims.windows(2).all(|w| w[0] < w[1])
                && b.dims.len() == t.rank()
                && b.dims.iter().zip(&t.shape).all(|(&d, s)| {
                    usize::try_from(d).ok().and_then(|d| out.shape.get(d)) == Some(s)
                })
                && out.num_elements() == t.num_elements()
        }
        _ if n.kind().is_elementwise() => t.shape == out.shape,
        _ => false,
    }
}

/// The region inputs of a loop fusion that some member reads flat-aligned (copied chunk by
/// chunk); the others are read whole (scalars, the operands of expanding broadcasts).
pub fn aligned_inputs(region: &Graph) -> Vec<bool> {
    let ins = region.inputs();
    let mut aligned = vec![false; ins.len()];
    for (i, &id) in ins.iter().enumerate() {
        aligned[i] = region
            .users(id)
            .iter()
            .any(|&(u, operand, _)| reads_aligned(region, u, operand as usize));
    }
    aligned
}

/// The members of a loop fusion's region in program order, and for every region value the
/// index (into that list) of its last in-region reader; `None` for values never read inside.
pub fn member_last_uses(region: &Graph) -> (Vec<NodeId>, HashMap<ValueRef, usize>) {
    let members: Vec<NodeId> = region
        .order()
        .iter()
        .copied()
        .filter(|&id| region.node(id).kind() != OpKind::Input)
        .collect();
    let mut last = HashMap::new();
    for (k, &m) in members.iter().enumerate() {
        for v in region.operands(m) {
            last.insert(v, k);
        }
    }
    (members, last)
}

/// Bytes per element of the iteration space that a chunked evaluation holds at most (see the
/// module docs): while member `k` runs, every aligned input read at `k` or later (all are
/// copied when the chunk starts), every earlier member result read at `k` or later, and the
/// result of `k`. Region outputs are copied out when produced and dropped after their last
/// in-region read.
pub fn tile_bytes_per_element(region: &Graph) -> i64 {
    let (members, last) = member_last_uses(region);
    let aligned = aligned_inputs(region);
    let size = |v: &ValueRef| region.value_type(*v).dtype.size_bytes() as i64;
    let mut peak = 0;
    for k in 0..members.len() {
        let mut live = 0;
        for (&id, &al) in region.inputs().iter().zip(&aligned) {
            let v = ValueRef::new(id, 0);
            if al && last.get(&v).is_some_and(|&l| l >= k) {
                live += size(&v);
            }
        }
        for &m in &members[..k] {
            let v = ValueRef::new(m, 0);
            if last.get(&v).is_some_and(|&l| l >= k) {
                live += size(&v);
            }
        }
        live += size(&ValueRef::new(members[k], 0));
        peak = peak.max(live);
    }
    peak
}

/// Tile bytes of a loop fusion's region (see the module docs): one chunk,
/// `min(FUSION_CHUNK, elements)`, times [`tile_bytes_per_element`]. `elements` is the
/// iteration space, the element count of the region's first output.
///
/// Errors: [`DimError`] on overflow.
pub fn fusion_tile_bytes(region: &Graph) -> Result<DimExpr, DimError> {
    let Some(first) = region.outputs().first() else {
        return Ok(DimExpr::zero());
    };
    let elements = region.value_type(*first).num_elements();
    let chunk = DimExpr::min(&elements, &DimExpr::constant(FUSION_CHUNK));
    chunk.checked_mul(&DimExpr::constant(tile_bytes_per_element(region)))
}
