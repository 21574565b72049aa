//! The FLOP model: symbolic floating-point operation counts per op, used to price a
//! recompute (BladeDISC++, arXiv 2412.16985, §3.2 weighs the recompute cost of a candidate
//! against the memory it saves; XLA's `HloRematerialization` and Checkmate (Jain et al.,
//! MLSys 2020) use per-op compute costs the same way).
//!
//! Counts are symbolic ([`DimExpr`]) so the runtime evaluates them at the actual shapes.
//! The model, per op kind (`elems(t)` = number of elements of `t`):
//! * `dot_general`: `2 * elems(result) * K`, `K` the product of the lhs contracting
//!   dimensions, i.e. `2*M*N*K` per batch (one multiply and one add per term).
//! * `convolution`: `2 * elems(result) * (elems(kernel) / output features)`: each output
//!   element is a dot product over the kernel window and input features of its group.
//! * elementwise ops (unary, binary, `select`, `clamp`, `convert`, `compare`): `elems(result)`.
//! * `reduce`: the elements of the reduced inputs; `reduce_window`:
//!   `elems(result) * window size`; `select_and_scatter`: `elems(operand) * window size +
//!   elems(source)`; `scatter`: the elements of the updates.
//! * `sort`: `elems * ceil(log2(n))` for a static sort dimension `n`, `elems * 32` when it is
//!   symbolic (an upper bound for up to 2^32 keys): the comparisons of a merge sort.
//! * data movement and creation (`broadcast_in_dim`, `reshape`, `transpose`, `slice`,
//!   `dynamic_slice`, `dynamic_update_slice`, `concatenate`, `pad`, `reverse`, `gather`,
//!   `iota`, `constant`, `dim_constant`, `input`, `optimization_barrier`): 0 FLOPs.
//! * `fusion`: the sum over its region's ops.
//! * `while` (unknown trip count) and `custom_call` (opaque): 0, so they must never be chosen
//!   for recompute on this estimate; the candidate search excludes them.

use ebb_ir::dim::DimError;
use ebb_ir::{DType, DimExpr, Graph, NodeId, Op, TensorType};
use ebb_plan::device::ComputeKind;

/// Symbolic FLOPs of `node` (see the module docs for the model). Saturates to the constant
/// `i64::MAX` if a coefficient overflows (a model answer, never a panic).
pub fn flops(g: &Graph, node: NodeId) -> DimExpr {
    try_flops(g, node).unwrap_or_else(|_| DimExpr::constant(i64::MAX))
}

/// [`flops`], with coefficient overflow reported as [`DimError::Overflow`].
pub fn try_flops(g: &Graph, node: NodeId) -> Result<DimExpr, DimError> {
    let n = g.node(node);
    let operands: Vec<&TensorType> = g
        .operands(node)
        .into_iter()
        .map(|v| g.value_type(v))
        .collect();
    let result_elems = || n.outputs.first().map_or(Ok(DimExpr::zero()), elems);
    match &n.op {
        op if op.kind().is_elementwise() => result_elems(),
        Op::DotGeneral(dims) => {
            let lhs = operands.first().map(|t| t.shape.as_slice()).unwrap_or(&[]);
            let mut k = DimExpr::constant(1);
            for &d in &dims.lhs_contract {
                if let Some(dim) = usize::try_from(d).ok().and_then(|d| lhs.get(d)) {
                    k = k.checked_mul(dim)?;
                }
            }
            result_elems()?.checked_mul(&k)?.checked_scale(2)
        }
        Op::Convolution(spec) => {
            let Some(kernel) = operands.get(1) else {
                return Ok(DimExpr::zero());
            };
            let o = spec.dims.kernel_output_feature;
            let mut per_output = DimExpr::constant(1);
            for (i, d) in kernel.shape.iter().enumerate() {
                if i != o {
                    per_output = per_output.checked_mul(d)?;
                }
            }
            result_elems()?.checked_mul(&per_output)?.checked_scale(2)
        }
        Op::Reduce(_) => {
            let inputs = operands.len() / 2;
            let mut total = DimExpr::zero();
            for t in &operands[..inputs] {
                total = total.checked_add(&elems(t)?)?;
            }
            Ok(total)
        }
        Op::ReduceWindow(w) => {
            let window = window_size(&w.dimensions)?;
            let mut total = DimExpr::zero();
            for t in &n.outputs {
                total = total.checked_add(&elems(t)?.checked_mul(&window)?)?;
            }
            Ok(total)
        }
        Op::SelectAndScatter(w) => {
            let window = window_size(&w.dimensions)?;
            let operand = operands.first().map_or(Ok(DimExpr::zero()), |t| elems(t))?;
            let source = operands.get(1).map_or(Ok(DimExpr::zero()), |t| elems(t))?;
            operand.checked_mul(&window)?.checked_add(&source)
        }
        Op::Scatter(_) => {
            // Operands: inputs..., indices, updates... (as many updates as inputs).
            let inputs = operands.len().saturating_sub(1) / 2;
            let mut total = DimExpr::zero();
            for t in &operands[operands.len() - inputs..] {
                total = total.checked_add(&elems(t)?)?;
            }
            Ok(total)
        }
        Op::Fusion(_) => {
            let mut total = DimExpr::zero();
            for r in &n.regions {
                for &m in r.order() {
                    total = total.checked_add(&try_flops(r, m)?)?;
                }
            }
            Ok(total)
        }
        Op::Sort(sort) => {
            let Some(t) = operands.first() else {
                return Ok(DimExpr::zero());
            };
            let dim = usize::try_from(sort.dimension).ok();
            let factor = match dim.and_then(|d| t.shape.get(d)).and_then(|d| d.as_const()) {
                Some(len) if len > 1 => i64::from(64 - (len - 1).leading_zeros()),
                Some(_) => 0,
                None => 32,
            };
            elems(t)?.checked_scale(factor)
        }
        _ => Ok(DimExpr::zero()),
    }
}

/// Bytes `node` reads and writes: its operands plus its results, the traffic of the roofline
/// model (`ebb_plan::cost`). Ops that move no data on a device are 0: `reshape` (a view of a
/// contiguous buffer), `optimization_barrier`, `input`, `dim_constant`. A
/// `dynamic_update_slice` writes in place: it reads and writes the update only. A `fusion`
/// counts only the values that cross its boundary. Saturates to `i64::MAX` on overflow.
pub fn bytes_accessed(g: &Graph, node: NodeId) -> DimExpr {
    let n = g.node(node);
    if matches!(
        n.op,
        Op::Reshape(_) | Op::OptimizationBarrier | Op::Input(_) | Op::DimConstant(_)
    ) {
        return DimExpr::zero();
    }
    if matches!(n.op, Op::DynamicUpdateSlice) {
        let update = g
            .operands(node)
            .get(1)
            .map(|&v| g.value_type(v).checked_size_bytes());
        return match update {
            Some(Ok(b)) => b.checked_scale(2).unwrap_or(DimExpr::constant(i64::MAX)),
            Some(Err(_)) => DimExpr::constant(i64::MAX),
            None => DimExpr::zero(),
        };
    }
    let types = g
        .operands(node)
        .into_iter()
        .map(|v| g.value_type(v).clone())
        .chain(n.outputs.iter().cloned());
    let mut total = DimExpr::zero();
    for t in types {
        match t.checked_size_bytes().and_then(|b| total.checked_add(&b)) {
            Ok(x) => total = x,
            Err(_) => return DimExpr::constant(i64::MAX),
        }
    }
    total
}

/// The compute unit `node` runs on: [`ComputeKind::Matrix`] / [`ComputeKind::MatrixHalf`] for
/// `dot_general` and `convolution` (by their first operand's element type), and for a
/// `fusion` that contains one; [`ComputeKind::Vector`] otherwise.
pub fn compute_kind(g: &Graph, node: NodeId) -> ComputeKind {
    let n = g.node(node);
    match &n.op {
        Op::DotGeneral(_) | Op::Convolution(_) => {
            let half = g
                .operands(node)
                .first()
                .is_some_and(|&v| matches!(g.value_type(v).dtype, DType::BF16 | DType::F16));
            if half {
                ComputeKind::MatrixHalf
            } else {
                ComputeKind::Matrix
            }
        }
        Op::Fusion(_) => n
            .regions
            .iter()
            .flat_map(|r| r.order().iter().map(move |&m| compute_kind(r, m)))
            .max_by_key(|k| match k {
                ComputeKind::Vector => 0,
                ComputeKind::MatrixHalf => 1,
                ComputeKind::Matrix => 2,
            })
            .unwrap_or_default(),
        _ => ComputeKind::Vector,
    }
}

/// Number of elements of `t`, with overflow checked.
fn elems(t: &TensorType) -> Result<DimExpr, DimError> {
    t.shape
        .iter()
        .try_fold(DimExpr::constant(1), |acc, d| acc.checked_mul(d))
}

fn window_size(dims: &[DimExpr]) -> Result<DimExpr, DimError> {
    dims.iter()
        .try_fold(DimExpr::constant(1), |acc, d| acc.checked_mul(d))
}
