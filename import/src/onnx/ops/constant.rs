//! Constants and generated tensors: `Constant`, `ConstantOfShape`, `Range`, `Trilu`.
//!
//! Small integer constants are also kept as symbolic values (for shape computations); a
//! `Range` with a symbolic limit becomes an `iota` of symbolic length.

use super::super::ctx::{sym_of_literal, Cx, NodeAttrs, Val, R};
use super::super::proto::{NodeProto, TensorProto};
use super::super::tensor::{decode, scalar_literal};
use super::shape::{static_of, sym_i64};
use super::{one, Lower};
use crate::sym::{Elems, SymVal};
use ebb_ir::op::Literal;
use ebb_ir::{DType, DimExpr, Op, Relation, TensorType};
use std::rc::Rc;

/// The ai.onnx ops this module lowers, by op type.
pub(super) static OPS: &[(&str, &dyn Lower)] = &[
    ("Constant", &Constant),
    ("ConstantOfShape", &ConstantOfShape),
    ("Range", &Range),
    ("Trilu", &Trilu),
];

/// A literal value as a [`Val`] (symbolic too when it is a small integer tensor).
pub(crate) fn literal_val(ty: TensorType, lit: Literal) -> Val {
    let s = sym_of_literal(&ty, &lit);
    Val {
        t: None,
        s,
        lit: Some(Rc::new((ty, lit))),
        ..Default::default()
    }
}

fn decode_attr_tensor(cx: &Cx, t: &TensorProto) -> R<(TensorType, Literal)> {
    let (dtype, dims, lit) =
        decode(t, cx.model_dir.as_deref()).map_err(|m| cx.err(format!("value tensor: {m}")))?;
    Ok((TensorType::fixed(dtype, &dims), lit))
}

struct Constant;

impl Lower for Constant {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let lit = |dtype: DType, data: Vec<u8>| Literal {
            dtype,
            splat: false,
            data,
        };
        let (ty, l) = if let Some(t) = n.tensor_attr("value") {
            decode_attr_tensor(cx, t)?
        } else if let Some(f) = n.attr("value_float").and_then(|a| a.f) {
            (
                TensorType::scalar(DType::F32),
                lit(DType::F32, f.to_le_bytes().to_vec()),
            )
        } else if let Some(i) = n.attr("value_int").and_then(|a| a.i) {
            (
                TensorType::scalar(DType::I64),
                lit(DType::I64, i.to_le_bytes().to_vec()),
            )
        } else if let Some(a) = n.attr("value_floats") {
            (
                TensorType::fixed(DType::F32, &[a.floats.len() as i64]),
                lit(
                    DType::F32,
                    a.floats.iter().flat_map(|f| f.to_le_bytes()).collect(),
                ),
            )
        } else if let Some(a) = n.attr("value_ints") {
            (
                TensorType::fixed(DType::I64, &[a.ints.len() as i64]),
                lit(
                    DType::I64,
                    a.ints.iter().flat_map(|f| f.to_le_bytes()).collect(),
                ),
            )
        } else {
            return Err(cx.err("Constant without a supported value attribute (sparse and string values are not supported)"));
        };
        Ok(vec![literal_val(ty, l)])
    }
}

struct ConstantOfShape;

impl Lower for ConstantOfShape {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let shape = cx.input_dims(n, 0)?;
        let (dtype, v) = match n.tensor_attr("value") {
            Some(t) => {
                let (ty, l) = decode_attr_tensor(cx, t)?;
                (ty.dtype, l.get_f64(0).unwrap_or(0.0))
            }
            None => (DType::F32, 0.0),
        };
        if let Some(st) = static_of(&shape) {
            if dtype.is_int() && st.iter().product::<i64>() as usize <= super::super::ctx::MAX_SYM {
                let k = st.iter().product::<i64>() as usize;
                return Ok(vec![Val::sym(SymVal {
                    dtype,
                    shape: st,
                    elems: Elems::Int(vec![DimExpr::constant(v as i64); k]),
                })]);
            }
        }
        let s = cx.constant(TensorType::scalar(dtype), scalar_literal(dtype, v));
        one(cx.broadcast_in_dim(s, &[], &shape)?)
    }
}

/// `Range(start, limit, delta)`: `iota·delta + start` of length
/// `ceil((limit - start) / delta)`; symbolic limits are supported for constant start/delta.
struct Range;

impl Lower for Range {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input_val(n, 0)?;
        let dtype = match (&x.t, &x.lit, &x.s) {
            (Some(t), _, _) => cx.ty(*t).dtype,
            (None, Some(l), _) => l.0.dtype,
            (None, None, Some(s)) => s.dtype,
            _ => return Err(cx.err("start without a type")),
        };
        if !dtype.is_int() {
            let (s, l, d) = (
                cx.input_scalar_f64(n, 0),
                cx.input_scalar_f64(n, 1),
                cx.input_scalar_f64(n, 2),
            );
            let (Some(s), Some(l), Some(d)) = (s, l, d) else {
                return Err(cx.err("a float Range needs constant start, limit and delta"));
            };
            let len = ((l - s) / d).ceil().max(0.0) as i64;
            let io = cx.iota(dtype, &[DimExpr::constant(len)], 0)?;
            let io = cx.binary_scalar(Op::Multiply, io, d)?;
            return one(cx.binary_scalar(Op::Add, io, s)?);
        }
        let start = cx.input_dims(n, 0)?;
        let limit = cx.input_dims(n, 1)?;
        let delta = cx.input_dims(n, 2)?;
        let (Some(s), Some(l), Some(d)) = (start.first(), limit.first(), delta.first()) else {
            return Err(cx.err("start, limit and delta must be scalars"));
        };
        let dk = d
            .as_const()
            .filter(|k| *k != 0)
            .ok_or_else(|| cx.err("delta must be a non-zero constant"))?;
        let overflow = || cx.err("start, limit and delta overflow 64-bit integers");
        let span = if dk > 0 {
            l.checked_sub(s)
                .and_then(|x| x.checked_add(&DimExpr::constant(dk - 1)))
        } else {
            let m = dk.checked_neg().ok_or_else(overflow)?;
            s.checked_sub(l)
                .and_then(|x| x.checked_add(&DimExpr::constant(m - 1)))
        }
        .map_err(|_| overflow())?;
        let len = span
            .floor_div(dk.abs())
            .map_err(|e| cx.err(e.to_string()))?;
        let len = if cx.g.scope.compare(&len, &DimExpr::zero()).is_ge() {
            len
        } else {
            DimExpr::max(&len, &DimExpr::zero())
        };
        if let Some(k) = len.as_const() {
            if (k as usize) <= super::super::ctx::MAX_SYM {
                let v = (0..k)
                    .map(|i| {
                        let step = i.checked_mul(dk).ok_or_else(overflow)?;
                        s.checked_add(&DimExpr::constant(step))
                            .map_err(|_| overflow())
                    })
                    .collect::<R<Vec<_>>>()?;
                let mut sv = sym_i64(v);
                sv.dtype = dtype;
                return Ok(vec![Val::sym(sv)]);
            }
        }
        let io = cx.iota(dtype, &[len], 0)?;
        let io = if dk != 1 {
            cx.binary_scalar(Op::Multiply, io, dk as f64)?
        } else {
            io
        };
        if s.is_zero() {
            return one(io);
        }
        let sv = cx.dim_scalar(s, dtype)?;
        one(cx.binary(Op::Add, io, sv)?)
    }
}

/// `Trilu(x, k)`: keeps the upper (`upper = 1`) or lower triangle of the last two dimensions
/// relative to diagonal `k`, zeroing the rest.
struct Trilu;

impl Lower for Trilu {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        let t = cx.ty(x);
        let r = t.rank();
        if r < 2 {
            return Err(cx.err("Trilu needs rank >= 2"));
        }
        let k = if cx.opt_input(n, 1).is_some() {
            cx.input_ints(n, 1)?.first().copied().unwrap_or(0)
        } else {
            0
        };
        let upper = n.int_or("upper", 1) != 0;
        let mn = [t.shape[r - 2].clone(), t.shape[r - 1].clone()];
        let i = cx.iota(DType::I64, &mn, 0)?;
        let j = cx.iota(DType::I64, &mn, 1)?;
        let ik = cx.binary_scalar(Op::Add, i, k as f64)?;
        // upper: j >= i + k; lower: j <= i + k
        let mask = cx.compare(if upper { Relation::Ge } else { Relation::Le }, j, ik)?;
        let zero = cx.scalar(t.dtype, 0.0);
        one(cx.select(mask, x, zero)?)
    }
}
