//! Elementwise ops: unary math, binary arithmetic with numpy broadcasting, comparisons,
//! `Where`, `Cast`, `Identity`, `Relu`, `Clip` and
//! `com.microsoft` `ReluGrad`, `TanhGrad`, `SigmoidGrad`. `Erf` and the GELU family are in [`super::gelu`].
//!
//! Integer inputs known at import time (shape arithmetic) are evaluated symbolically
//! ([`super::symbolic`]).

use super::super::ctx::{Cx, NodeAttrs, Val, R};
use super::super::proto::NodeProto;
use super::super::tensor::dtype_of;
use super::{one, symbolic, Lower};
use crate::sym::{Elems, SymVal};
use ebb_ir::{DimExpr, Op, Relation, ValueRef};

/// The ai.onnx ops this module lowers, by op type.
pub(super) static OPS: &[(&str, &dyn Lower)] = &[
    ("Neg", &Unary(Op::Negate)),
    ("Exp", &Unary(Op::Exponential)),
    ("Log", &Unary(Op::Log)),
    ("Tanh", &Unary(Op::Tanh)),
    ("Sqrt", &Unary(Op::Sqrt)),
    ("Abs", &Unary(Op::Abs)),
    ("Sigmoid", &Unary(Op::Logistic)),
    ("Floor", &Unary(Op::Floor)),
    ("Ceil", &Unary(Op::Ceil)),
    ("Not", &Unary(Op::Not)),
    ("Sin", &Unary(Op::Sine)),
    ("Cos", &Unary(Op::Cosine)),
    ("Sign", &Unary(Op::Sign)),
    ("Round", &Unary(Op::RoundNearestEven)),
    ("Add", &Binary(Op::Add, "add")),
    ("Sub", &Binary(Op::Subtract, "subtract")),
    ("Mul", &Binary(Op::Multiply, "multiply")),
    ("Div", &Binary(Op::Divide, "divide")),
    ("Mod", &Binary(Op::Remainder, "remainder")),
    ("Max", &Binary(Op::Maximum, "maximum")),
    ("Min", &Binary(Op::Minimum, "minimum")),
    ("Sum", &Binary(Op::Add, "add")),
    ("And", &Binary(Op::And, "")),
    ("Or", &Binary(Op::Or, "")),
    ("Xor", &Binary(Op::Xor, "")),
    ("Pow", &Pow),
    ("Equal", &Cmp(Relation::Eq)),
    ("Less", &Cmp(Relation::Lt)),
    ("LessOrEqual", &Cmp(Relation::Le)),
    ("Greater", &Cmp(Relation::Gt)),
    ("GreaterOrEqual", &Cmp(Relation::Ge)),
    ("Where", &Where),
    ("Cast", &Cast),
    ("CastLike", &Cast),
    ("Identity", &Identity),
    ("Relu", &Relu),
    ("Reciprocal", &Reciprocal),
    ("Clip", &Clip),
    ("IsNaN", &IsNaN),
];

/// The com.microsoft ops this module lowers, by op type.
pub(super) static OPS_MS: &[(&str, &dyn Lower)] = &[
    ("ReluGrad", &ReluGrad),
    ("TanhGrad", &TanhGrad),
    ("SigmoidGrad", &SigmoidGrad),
    ("Scale", &Scale),
];

struct Unary(Op);

impl Lower for Unary {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        one(cx.unary(self.0.clone(), x)?)
    }
}

/// Binary (or, for `Sum`/`Max`/`Min`, variadic) arithmetic; the string names the symbolic
/// integer form ("" = none).
struct Binary(Op, &'static str);

impl Lower for Binary {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let k = n.input.len();
        if k == 0 {
            return Err(cx.err("expects at least one input"));
        }
        // Symbolic evaluation of integer shape arithmetic.
        if !self.1.is_empty() {
            let vals: Vec<Val> = (0..k).map(|i| cx.input_val(n, i)).collect::<R<_>>()?;
            if vals
                .iter()
                .all(|v| v.s.as_ref().and_then(|s| s.ints()).is_some())
            {
                let mut acc = vals[0].s.clone();
                for v in &vals[1..] {
                    acc =
                        acc.and_then(|a| symbolic::binary(self.1, &a, v.s.as_ref()?, &cx.g.scope));
                }
                if let Some(s) = acc {
                    return Ok(vec![Val::sym(s)]);
                }
            }
        }
        let mut acc = cx.input(n, 0)?;
        for i in 1..k {
            let b = cx.input(n, i)?;
            // ONNX integer Div truncates toward zero, as StableHLO `divide` does.
            acc = cx.binary(self.0.clone(), acc, b)?;
        }
        if n.op_type.as_deref() == Some("Mod")
            && n.int_or("fmod", 0) == 0
            && cx.ty(acc).dtype.is_int()
        {
            // Mod with fmod=0 takes the sign of the divisor: r + b where r != 0 and sign(r) != sign(b).
            let b = cx.input(n, 1)?;
            let r = acc;
            let d = cx.ty(r).dtype;
            let zero = cx.scalar(d, 0.0);
            let rz = cx.compare(Relation::Ne, r, zero)?;
            let rneg = cx.compare(Relation::Lt, r, zero)?;
            let bneg = cx.compare(Relation::Lt, b, zero)?;
            let differ = cx.compare(Relation::Ne, rneg, bneg)?;
            let fix = cx.binary(Op::And, rz, differ)?;
            let rb = cx.binary(Op::Add, r, b)?;
            acc = cx.select(fix, rb, r)?;
        }
        one(acc)
    }
}

struct Cmp(Relation);

impl Lower for Cmp {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let (a, b) = (cx.input_val(n, 0)?, cx.input_val(n, 1)?);
        if let (Some(x), Some(y)) = (&a.s, &b.s) {
            if let Some(s) = symbolic::compare(self.0, x, y, &cx.g.scope) {
                return Ok(vec![Val::sym(s)]);
            }
        }
        let (a, b) = (cx.input(n, 0)?, cx.input(n, 1)?);
        one(cx.compare(self.0, a, b)?)
    }
}

struct Where;

impl Lower for Where {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let (c, a, b) = (
            cx.input_val(n, 0)?,
            cx.input_val(n, 1)?,
            cx.input_val(n, 2)?,
        );
        if let (Some(c), Some(a), Some(b)) = (&c.s, &a.s, &b.s) {
            if let Some(s) = symbolic::select(c, a, b, &cx.g.scope) {
                return Ok(vec![Val::sym(s)]);
            }
        }
        let (c, a, b) = (cx.input(n, 0)?, cx.input(n, 1)?, cx.input(n, 2)?);
        one(cx.select(c, a, b)?)
    }
}

struct Cast;

impl Lower for Cast {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let to = if n.op_type.as_deref() == Some("CastLike") {
            let t = cx.input(n, 1)?;
            cx.ty(t).dtype
        } else {
            let code = n.int_or("to", 0) as i32;
            dtype_of(code).ok_or_else(|| cx.err(format!("unsupported target type code {code}")))?
        };
        let v = cx.input_val(n, 0)?;
        if let Some(s) = &v.s {
            if to.is_int() && s.ints().is_some() {
                let mut s = s.clone();
                s.dtype = to;
                return Ok(vec![Val::sym(s)]);
            }
        }
        // A small float literal cast to an integer type (exporters' `CastLike(0.0, n)`).
        if let (Some(l), true) = (&v.lit, to.is_int()) {
            let (ty, lit) = (&l.0, &l.1);
            if let Some(dims) = ty.static_dims() {
                let k: i64 = dims.iter().product();
                if k as usize <= super::super::ctx::MAX_SYM {
                    let vals: Option<Vec<DimExpr>> = (0..k as usize)
                        .map(|i| {
                            lit.get_f64(if lit.splat { 0 } else { i })
                                .filter(|x| x.is_finite())
                                .map(|x| DimExpr::constant(x.trunc() as i64))
                        })
                        .collect();
                    if let Some(vals) = vals {
                        return Ok(vec![Val::sym(SymVal {
                            dtype: to,
                            shape: dims,
                            elems: Elems::Int(vals),
                        })]);
                    }
                }
            }
        }
        let x = cx.input(n, 0)?;
        one(cx.convert(x, to)?)
    }
}

struct Identity;

impl Lower for Identity {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        Ok(vec![cx.input_val(n, 0)?])
    }
}

/// `Dropout` in inference form (`training_mode` absent or constant false, or ratio 0): the
/// identity, with an all-true mask when asked for.
/// `Scale(input, scale)` (com.microsoft, ORT's gradient of `ReduceMean` and friends):
/// `input / scale` with `scale_down = 1`, else `input * scale`; `scale` is a scalar of any
/// numeric type, converted to the input's.
struct Scale;

impl Lower for Scale {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        let s = cx.input(n, 1)?;
        let t = cx.ty(x);
        if cx.ty(s).rank() > 1 || cx.ty(s).shape.iter().any(|d| d.as_const() != Some(1)) {
            return Err(cx.err("the scale must be a scalar"));
        }
        let s = cx.convert(s, t.dtype)?;
        let s = cx.reshape(s, &[])?;
        let s = cx.broadcast_in_dim(s, &[], &t.shape)?;
        let op = if n.int_or("scale_down", 0) != 0 {
            Op::Divide
        } else {
            Op::Multiply
        };
        one(cx.binary(op, x, s)?)
    }
}

struct Relu;

impl Lower for Relu {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        one(cx.binary_scalar(Op::Maximum, x, 0.0)?)
    }
}

/// `ReluGrad(dY, Y)` (com.microsoft): `dY` where `Y > 0`, else 0.
struct ReluGrad;

impl Lower for ReluGrad {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let dy = cx.input(n, 0)?;
        let y = cx.input(n, 1)?;
        let d = cx.ty(y).dtype;
        let z = cx.scalar(d, 0.0);
        let p = cx.compare(Relation::Gt, y, z)?;
        let zero = cx.scalar(d, 0.0);
        one(cx.select(p, dy, zero)?)
    }
}

/// `TanhGrad(dY, Y)` (com.microsoft; ONNX Runtime's gradient of `Tanh`, `Y` = the forward
/// output): `dX = dY · (1 − Y·Y)`, in the order ONNX Runtime's CPU kernel evaluates it.
struct TanhGrad;

impl Lower for TanhGrad {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let dy = cx.input(n, 0)?;
        let y = cx.input(n, 1)?;
        let d = cx.ty(y).dtype;
        let one_ = cx.scalar(d, 1.0);
        let yy = cx.binary(Op::Multiply, y, y)?;
        let slope = cx.binary(Op::Subtract, one_, yy)?;
        one(cx.binary(Op::Multiply, dy, slope)?)
    }
}

/// `SigmoidGrad(dY, Y)` (com.microsoft; the gradient of `Sigmoid`, `Y` = the forward output):
/// `dX = dY · Y · (1 − Y)`, left to right as ONNX Runtime's CPU kernel evaluates it.
struct SigmoidGrad;

impl Lower for SigmoidGrad {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let dy = cx.input(n, 0)?;
        let y = cx.input(n, 1)?;
        let d = cx.ty(y).dtype;
        let one_ = cx.scalar(d, 1.0);
        let dyy = cx.binary(Op::Multiply, dy, y)?;
        let rest = cx.binary(Op::Subtract, one_, y)?;
        one(cx.binary(Op::Multiply, dyy, rest)?)
    }
}

struct Reciprocal;

impl Lower for Reciprocal {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        let d = cx.ty(x).dtype;
        let one_ = cx.scalar(d, 1.0);
        one(cx.binary(Op::Divide, one_, x)?)
    }
}

struct IsNaN;

impl Lower for IsNaN {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        one(cx.compare(Relation::Ne, x, x)?)
    }
}

/// `Pow(x, y)`: constant exponents 1, 2, 0.5 and -1 become `x`, `x*x`, `sqrt`, `1/x`;
/// otherwise `power` (the exponent converted to `x`'s type).
struct Pow;

impl Lower for Pow {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        let d = cx.ty(x).dtype;
        let e = cx.input_scalar_f64(n, 1);
        let ey = cx.input(n, 1)?;
        let scalar_e = cx.ty(ey).rank() == 0
            || cx
                .ty(ey)
                .static_dims()
                .is_some_and(|s| s.iter().product::<i64>() == 1);
        if let (Some(v), true) = (e, scalar_e) {
            if v == 1.0 {
                return one(x);
            }
            if v == 2.0 {
                return one(cx.binary(Op::Multiply, x, x)?);
            }
            if v == 0.5 && d.is_float() {
                return one(cx.unary(Op::Sqrt, x)?);
            }
        }
        let y = cx.convert(ey, d)?;
        one(cx.binary(Op::Power, x, y)?)
    }
}

/// `Clip(x, min, max)` (inputs since opset 11, attributes before).
struct Clip;

impl Lower for Clip {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let mut x = cx.input(n, 0)?;
        let d = cx.ty(x).dtype;
        let bound = |cx: &mut Cx, i: usize, attr: &str| -> R<Option<ValueRef>> {
            if cx.opt_input(n, i).is_some() {
                let b = cx.input(n, i)?;
                return Ok(Some(cx.convert(b, d)?));
            }
            Ok(n.attr(attr)
                .and_then(|a| a.f)
                .map(|f| cx.scalar(d, f as f64)))
        };
        if let Some(lo) = bound(cx, 1, "min")? {
            x = cx.binary(Op::Maximum, x, lo)?;
        }
        if let Some(hi) = bound(cx, 2, "max")? {
            x = cx.binary(Op::Minimum, x, hi)?;
        }
        one(x)
    }
}
