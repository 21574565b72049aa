//! Shape inference: the result types of an op from its operand types and typed payload, with
//! symbolic dimensions. Rules follow the StableHLO specification (section "Ops", each op's
//! "Constraints" on result shapes), one file per op family: `layout` (broadcast, reshape,
//! transpose, concatenate, slices, pad, iota), `window` (reduce, reduce_window and the window
//! arithmetic shared with convolution), `contract` (dot_general, convolution), `index`
//! (gather); elementwise and control ops are here.
//!
//! Dimension equality is structural on canonical [`DimExpr`](crate::DimExpr)s: two dimensions
//! are equal when
//! their canonical forms are identical (that is, their difference simplifies to zero).

mod contract;
mod index;
mod layout;
mod window;

use crate::dim::DimError;
use crate::dtype::DType;
use crate::graph::Graph;
use crate::op::{Op, OpKind};
use crate::types::{Shape, TensorType};

/// A shape-rule violation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShapeError {
    /// Arithmetic on dimensions failed.
    #[error("op `{op}`: {source}")]
    Dim {
        /// Op name.
        op: String,
        /// Underlying error.
        source: DimError,
    },
    /// Operands or payload are inconsistent.
    #[error("op `{op}`: {msg}")]
    Invalid {
        /// Op name.
        op: String,
        /// What is inconsistent.
        msg: String,
    },
}

/// Result of a shape rule: `None` where the declared types are authoritative.
type Inferred = Result<Option<Vec<TensorType>>, ShapeError>;

fn invalid(op: OpKind, msg: impl Into<String>) -> ShapeError {
    ShapeError::Invalid {
        op: op.name().into(),
        msg: msg.into(),
    }
}

fn dimerr(op: OpKind) -> impl Fn(DimError) -> ShapeError {
    move |source| ShapeError::Dim {
        op: op.name().into(),
        source,
    }
}

/// Checks that `d` is a dimension index of a rank-`rank` tensor.
fn axis(op: OpKind, d: i64, rank: usize) -> Result<usize, ShapeError> {
    if d < 0 || d as usize >= rank {
        return Err(invalid(
            op,
            format!("dimension {d} out of range for rank {rank}"),
        ));
    }
    Ok(d as usize)
}

fn nth<'a>(
    op: OpKind,
    operands: &[&'a TensorType],
    i: usize,
) -> Result<&'a TensorType, ShapeError> {
    operands.get(i).copied().ok_or_else(|| {
        invalid(
            op,
            format!(
                "expected at least {} operands, got {}",
                i + 1,
                operands.len()
            ),
        )
    })
}

fn fmt_shape(s: &Shape) -> String {
    let parts: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(","))
}

fn one(t: TensorType) -> Inferred {
    Ok(Some(vec![t]))
}

/// Infers the result types of `op` with operand types `operands` and regions `regions`.
/// Returns `Ok(None)` for ops whose result types are not determined by their operands
/// (`input`, `constant`, `dim_constant`, `custom_call`): the declared types are authoritative
/// for those.
///
/// Errors: [`ShapeError`] naming the op when operands and payload violate the op's shape
/// constraints.
pub fn infer(op: &Op, operands: &[&TensorType], regions: &[Graph]) -> Inferred {
    use OpKind::*;
    let kind = op.kind();
    if let Some(n) = kind.fixed_arity() {
        if operands.len() != n {
            return Err(invalid(
                kind,
                format!(
                    "expects {n} operand{}, got {}",
                    if n == 1 { "" } else { "s" },
                    operands.len()
                ),
            ));
        }
    }
    match op {
        Op::Input(_) | Op::Constant(_) | Op::DimConstant(_) | Op::CustomCall(_) => Ok(None),
        Op::BroadcastInDim(b) => layout::broadcast_in_dim(kind, b, operands),
        Op::Reshape(shape) => layout::reshape(kind, shape, operands),
        Op::Transpose(perm) => layout::transpose(kind, perm, operands),
        Op::Concatenate(d) => layout::concatenate(kind, *d, operands),
        Op::Slice(s) => layout::slice(kind, s, operands),
        Op::DynamicSlice(sizes) => layout::dynamic_slice(kind, sizes, operands),
        Op::Pad(p) => layout::pad(kind, p, operands),
        Op::Iota(i) => {
            axis(kind, i.dimension, i.shape.len())?;
            one(TensorType::new(i.dtype, i.shape.clone()))
        }
        Op::RngBitGenerator(r) => {
            let state = nth(kind, operands, 0)?;
            if state.dtype != DType::U64 || state.shape != [crate::dim::DimExpr::constant(2)] {
                return Err(invalid(
                    kind,
                    format!("the state must be ui64[2], got {state}"),
                ));
            }
            if !matches!(r.dtype, DType::U32 | DType::U64) {
                return Err(invalid(
                    kind,
                    format!("bits of type {} (ui32 or ui64 only)", r.dtype),
                ));
            }
            Ok(Some(vec![
                state.clone(),
                TensorType::new(r.dtype, r.shape.clone()),
            ]))
        }
        Op::Reduce(dims) => {
            let r = window::reduce(kind, dims, operands)?;
            window::check_body(kind, operands, regions)?;
            Ok(r)
        }
        Op::ReduceWindow(w) => {
            let r = window::reduce_window(kind, w, operands)?;
            window::check_body(kind, operands, regions)?;
            Ok(r)
        }
        Op::DotGeneral(d) => contract::dot_general(kind, d, operands),
        Op::Convolution(c) => contract::convolution(kind, c, operands),
        Op::Gather(g) => index::gather(kind, g, operands),
        Op::Scatter(_) => {
            let n = (operands.len().saturating_sub(1)) / 2;
            if n == 0 || operands.len() != 2 * n + 1 {
                return Err(invalid(kind, "expects inputs, scatter_indices, updates"));
            }
            Ok(Some(operands[..n].iter().map(|x| (*x).clone()).collect()))
        }
        Op::DynamicUpdateSlice | Op::Reverse(_) | Op::SelectAndScatter(_) => {
            one(nth(kind, operands, 0)?.clone())
        }
        Op::Fusion(_) => {
            let [r] = regions else {
                return Err(invalid(kind, "needs one region"));
            };
            let ins = r.inputs();
            if ins.len() != operands.len() {
                return Err(invalid(
                    kind,
                    "region inputs differ from the operands in number",
                ));
            }
            for (i, (&id, t)) in ins.iter().zip(operands).enumerate() {
                if &r.node(id).outputs[0] != *t {
                    return Err(invalid(
                        kind,
                        format!("region input {i} differs from operand {i}"),
                    ));
                }
            }
            Ok(Some(
                r.outputs()
                    .iter()
                    .map(|v| r.value_type(*v).clone())
                    .collect(),
            ))
        }
        Op::Case => case(kind, operands, regions),
        Op::AnnotateDevicePlacement(_) => {
            if operands.len() > 2 {
                return Err(invalid(
                    kind,
                    format!(
                        "takes a value and an optional ordering operand, not {} operands",
                        operands.len()
                    ),
                ));
            }
            Ok(Some(vec![nth(kind, operands, 0)?.clone()]))
        }
        Op::Sort(_) | Op::While | Op::OptimizationBarrier => {
            if kind == While && regions.len() == 2 {
                let body = &regions[1];
                if body.outputs().len() != operands.len() {
                    return Err(invalid(
                        kind,
                        "body returns a different number of values than the loop carries",
                    ));
                }
            }
            Ok(Some(operands.iter().map(|x| (*x).clone()).collect()))
        }
        Op::Select => {
            let p = nth(kind, operands, 0)?;
            let a = nth(kind, operands, 1)?;
            let b = nth(kind, operands, 2)?;
            if a.shape != b.shape || (p.rank() != 0 && p.shape != a.shape) {
                return Err(invalid(kind, "pred/on_true/on_false shapes differ"));
            }
            one(a.clone())
        }
        Op::Clamp => one(nth(kind, operands, 1)?.clone()),
        _ if kind.is_unary_elementwise() => {
            let x = nth(kind, operands, 0)?;
            let d = match op {
                Op::Convert(d) => *d,
                Op::BitcastConvert(d) if d.size_bytes() != x.dtype.size_bytes() => {
                    return Err(invalid(
                        kind,
                        format!(
                            "{} to {} changes the element size (only equal sizes are supported)",
                            x.dtype, d
                        ),
                    ))
                }
                Op::BitcastConvert(d) => *d,
                Op::ReducePrecision(_) if !x.dtype.is_float() => {
                    return Err(invalid(
                        kind,
                        format!("operand element type {} is not a float", x.dtype),
                    ))
                }
                Op::IsFinite => DType::I1,
                _ => x.dtype,
            };
            one(TensorType::new(d, x.shape.clone()))
        }
        _ if kind.is_binary_elementwise() => {
            let a = nth(kind, operands, 0)?;
            let b = nth(kind, operands, 1)?;
            if a.shape != b.shape {
                return Err(invalid(
                    kind,
                    format!(
                        "operand shapes differ: {} vs {}",
                        fmt_shape(&a.shape),
                        fmt_shape(&b.shape)
                    ),
                ));
            }
            let d = if kind == Compare { DType::I1 } else { a.dtype };
            one(TensorType::new(d, a.shape.clone()))
        }
        _ => Err(invalid(kind, "no shape rule")),
    }
}

/// `case`: an `i32` scalar index, then the branch inputs; every branch region takes those
/// inputs and returns values of the same types, which are the results.
fn case(kind: OpKind, operands: &[&TensorType], regions: &[Graph]) -> Inferred {
    let index = nth(kind, operands, 0)?;
    if index.rank() != 0 || !index.dtype.is_int() {
        return Err(invalid(kind, "the branch index must be an integer scalar"));
    }
    let Some(first) = regions.first() else {
        return Err(invalid(kind, "needs at least one branch region"));
    };
    let types = |r: &Graph| -> Vec<TensorType> {
        r.outputs()
            .iter()
            .map(|v| r.value_type(*v).clone())
            .collect()
    };
    let results = types(first);
    for (b, r) in regions.iter().enumerate() {
        let ins = r.inputs();
        if ins.len() + 1 != operands.len()
            || ins
                .iter()
                .zip(&operands[1..])
                .any(|(&id, t)| &r.node(id).outputs[0] != *t)
        {
            return Err(invalid(
                kind,
                format!("branch {b}'s inputs differ from the operands after the index"),
            ));
        }
        if types(r) != results {
            return Err(invalid(
                kind,
                format!("branch {b} returns other types than branch 0"),
            ));
        }
    }
    Ok(Some(results))
}
