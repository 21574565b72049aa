//! The memory contract of a `dot_general` in the dot-accumulate form (three operands: `c + a·b`,
//! [`super::Op::DotGeneral`]) shared by the planner, the checker and the executor: besides its
//! operands and its result (written in place into `c`, [`super::in_place_writes`]), the op
//! holds [`accumulate_product_bytes`] while it runs.
//!
//! Why: the executor adds the product into `c`'s buffer as each element's chain of
//! multiply-adds completes, which gives `add(c, a·b)`'s bits only where every chain is one
//! complete sum before the one addition: a contraction of at most [`ACCUMULATE_DEPTH`] terms
//! (the packing GEMM's depth block, `matrixmultiply`'s `kc` for `f32`; the shallow kernel sums
//! any depth whole). A deeper contraction is summed by the packing GEMM block by block into its
//! result, so the executor computes the product apart, in a buffer of the result's size, and
//! then adds it: the op's transient bytes.
//!
//! Invariant: [`accumulate_product_bytes`] is what the executor charges while the op runs, for
//! every binding: the result's bytes when the contraction is deeper than [`ACCUMULATE_DEPTH`]
//! and the result is written in place, else 0 (`f32` results; the executor's `f64` check mode, which computes every contraction
//! apart in `f64`, is outside the memory accounting for every `dot_general`).

use super::{InPlace, Op};
use crate::dim::{DimError, DimExpr};
use crate::graph::{Graph, NodeId};

/// Deepest contraction a dot-accumulate adds into its accumulator's buffer in place (see the
/// module docs): the `f32` packing GEMM's depth block.
pub const ACCUMULATE_DEPTH: i64 = 256;

/// The transient bytes of node `id` of `g` when it is a dot-accumulate (a `dot_general` with
/// three operands) that writes its result into its accumulator (`writes`: the node's entry of
/// [`super::in_place_writes`], which every caller holds already):
/// `R · min(1, max(0, K − 256))`, `R` the result's bytes and `K` the contraction's depth (the
/// product of the lhs contracting dimensions), that is `R` where `K > 256` and 0 elsewhere; 0
/// for one that does not write in place (the product is computed into the result's own
/// buffer). `None` for any other node.
///
/// # Errors
/// [`DimError`] on coefficient overflow, or a contracting dimension outside the lhs's rank
/// ([`DimError::Unbound`], which the verifier rules out).
pub fn accumulate_product_bytes(
    g: &Graph,
    id: NodeId,
    writes: &[InPlace],
) -> Option<Result<DimExpr, DimError>> {
    let node = g.node(id);
    let Op::DotGeneral(dims) = &node.op else {
        return None;
    };
    let ops = g.operands(id);
    if ops.len() != 3 {
        return None;
    }
    if !writes.iter().any(|w| w.operand == 2) {
        // The product goes to the result's own buffer, and the sum over it.
        return Some(Ok(DimExpr::zero()));
    }
    let lhs = g.value_type(ops[0]);
    let out = node.outputs.first()?;
    let bytes = || -> Result<DimExpr, DimError> {
        let mut depth = DimExpr::constant(1);
        for &d in &dims.lhs_contract {
            let size = usize::try_from(d)
                .ok()
                .and_then(|d| lhs.shape.get(d))
                .ok_or_else(|| DimError::Unbound(format!("lhs contracting dimension {d}")))?;
            depth = depth.checked_mul(size)?;
        }
        let beyond = depth.checked_sub(&DimExpr::constant(ACCUMULATE_DEPTH))?;
        let deeper = DimExpr::constant(1).checked_min(&DimExpr::zero().checked_max(&beyond)?)?;
        out.checked_size_bytes()?.checked_mul(&deeper)
    };
    Some(bytes())
}
