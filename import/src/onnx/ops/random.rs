//! Random ops: `Dropout` (both forms), `RandomUniform(Like)`, `RandomNormal(Like)`,
//! `Bernoulli` (ai.onnx), and ONNX Runtime's `DropoutGrad` (com.microsoft).
//!
//! The bits come from `rng_bit_generator` on the state [`Cx::rng_state`] builds from the
//! `ebb.rng_seed` graph input and the node (ONNX leaves the values to the runtime; a `seed`
//! attribute is ignored, as ORT ignores it across runs): so the masks differ from ONNX
//! Runtime's, are a pure function of the seed input, and a recomputed mask is exact. A
//! uniform `u32` word `w` keeps an element when `w >= ceil(ratio·2^32)` (probability
//! `1 − ratio` to within 2^-32); uniform floats are `(w >> 8)·2^-24`; normal values use the
//! Box–Muller transform of two uniform words.

use super::super::ctx::{Cx, NodeAttrs, Val, R};
use super::super::proto::NodeProto;
use super::super::tensor::dtype_of;
use super::{one, Lower};
use ebb_ir::op::RngSpec;
use ebb_ir::{DType, DimExpr, Op, Relation, ValueRef};

/// The ai.onnx random ops, by op type.
pub(super) static OPS: &[(&str, &dyn Lower)] = &[
    ("Dropout", &Dropout),
    (
        "RandomUniform",
        &Random {
            normal: false,
            like: false,
        },
    ),
    (
        "RandomUniformLike",
        &Random {
            normal: false,
            like: true,
        },
    ),
    (
        "RandomNormal",
        &Random {
            normal: true,
            like: false,
        },
    ),
    (
        "RandomNormalLike",
        &Random {
            normal: true,
            like: true,
        },
    ),
    ("Bernoulli", &Bernoulli),
];

/// The com.microsoft random ops, by op type.
pub(super) static OPS_MS: &[(&str, &dyn Lower)] = &[("DropoutGrad", &DropoutGrad)];

/// `k` independent `u32` words per element of `shape` for the current node: `ui32[k, shape..]`
/// (`k` = 1 or 2), from one `rng_bit_generator`.
fn words(cx: &mut Cx, n: &NodeProto, shape: &[DimExpr], k: i64) -> R<Vec<ValueRef>> {
    let state = cx.rng_state(n)?;
    let mut all = vec![DimExpr::constant(k)];
    all.extend_from_slice(shape);
    let spec = RngSpec {
        algorithm: ebb_ir::op::RngAlgorithm::Default,
        shape: all.clone(),
        dtype: DType::U32,
    };
    let bits = cx.emit_n(Op::RngBitGenerator(spec), &[state], Vec::new())?[1];
    let rank = all.len();
    (0..k)
        .map(|i| {
            let mut start = vec![DimExpr::constant(0); rank];
            start[0] = DimExpr::constant(i);
            let mut limit = all.clone();
            limit[0] = DimExpr::constant(i + 1);
            let spec = ebb_ir::op::SliceSpec {
                start,
                limit,
                strides: vec![DimExpr::constant(1); rank],
            };
            let s = cx.emit(Op::Slice(spec), &[bits])?;
            cx.reshape(s, shape)
        })
        .collect()
}

/// Uniform floats in `[0, 1)` of `dtype` from `u32` words: `(w >> 8)·2^-24` (exact in f32).
fn unit(cx: &mut Cx, w: ValueRef, dtype: DType) -> R<ValueRef> {
    let sh = cx.scalar(DType::U32, 8.0);
    let shape = cx.ty(w).shape;
    let sh = cx.broadcast_in_dim(sh, &[], &shape)?;
    let top = cx.binary(Op::ShiftRightLogical, w, sh)?;
    let f = cx.convert(top, DType::F32)?;
    let u = cx.binary_scalar(Op::Multiply, f, 1.0 / 16_777_216.0)?;
    cx.convert(u, dtype)
}

/// The keep mask of a dropout with `ratio`: `w >= ceil(ratio·2^32)`.
fn keep_mask(cx: &mut Cx, n: &NodeProto, shape: &[DimExpr], ratio: f64) -> R<ValueRef> {
    let w = words(cx, n, shape, 1)?[0];
    let threshold = (ratio * 4_294_967_296.0).ceil().min(u32::MAX as f64);
    let t = cx.scalar(DType::U32, threshold);
    let t = cx.broadcast_in_dim(t, &[], shape)?;
    cx.compare(Relation::Ge, w, t)
}

/// `x` scaled by `1 / (1 − ratio)` where `mask`, 0 elsewhere.
fn apply_mask(cx: &mut Cx, x: ValueRef, mask: ValueRef, ratio: f64) -> R<ValueRef> {
    let scaled = cx.binary_scalar(Op::Multiply, x, 1.0 / (1.0 - ratio))?;
    let shape = cx.ty(x).shape;
    let zero = cx.full(cx.ty(x).dtype, 0.0, &shape)?;
    cx.select(mask, scaled, zero)
}

/// A training-mode flag input (`Dropout`'s input 2, `DropoutGrad`'s input 3), known at import
/// time; `default` when absent.
fn training_flag(cx: &Cx, n: &NodeProto, i: usize, default: bool) -> R<bool> {
    if cx.opt_input(n, i).is_none() {
        return Ok(default);
    }
    cx.input_scalar_f64(n, i).map(|t| t != 0.0).ok_or_else(|| {
        cx.err(format!(
            "input {i} (training_mode) must be known at import time"
        ))
    })
}

/// A ratio input (or, before opset 12, attribute), known at import time, in `[0, 1)`.
fn ratio(cx: &Cx, n: &NodeProto, i: usize) -> R<f64> {
    let r = if cx.opt_input(n, i).is_some() {
        cx.input_scalar_f64(n, i)
            .ok_or_else(|| cx.err(format!("input {i} (ratio) must be known at import time")))?
    } else {
        f64::from(n.float_or("ratio", 0.5))
    };
    if !(0.0..1.0).contains(&r) {
        return Err(cx.err(format!("dropout ratio {r} is outside [0, 1)")));
    }
    Ok(r)
}

/// `Dropout(data, ratio?, training_mode?) -> (output, mask?)`.
struct Dropout;

impl Lower for Dropout {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let train = training_flag(cx, n, 2, false)?;
        let r = ratio(cx, n, 1)?;
        let want_mask = n.output.get(1).is_some_and(|s| !s.is_empty());
        if !train || r == 0.0 {
            let x = cx.input_val(n, 0)?;
            let mut out = vec![x];
            if want_mask {
                let t = cx.input(n, 0)?;
                let shape = cx.ty(t).shape;
                out.push(Val::t(cx.full(DType::I1, 1.0, &shape)?));
            }
            return Ok(out);
        }
        let x = cx.input(n, 0)?;
        let shape = cx.ty(x).shape;
        let mask = keep_mask(cx, n, &shape, r)?;
        let y = apply_mask(cx, x, mask, r)?;
        Ok(vec![Val::t(y), Val::t(mask)])
    }
}

/// `DropoutGrad(dY, mask, ratio?, training_mode?)` (com.microsoft): `dY · mask / (1 − ratio)`
/// in training mode, `dY` otherwise (ORT's defaults: ratio 0.5, training_mode false).
struct DropoutGrad;

impl Lower for DropoutGrad {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let dy = cx.input(n, 0)?;
        if !training_flag(cx, n, 3, false)? {
            return one(dy);
        }
        let r = ratio(cx, n, 2)?;
        let mask = cx.input(n, 1)?;
        one(apply_mask(cx, dy, mask, r)?)
    }
}

/// `RandomUniform(Like)` and `RandomNormal(Like)`: attributes `low`/`high` or
/// `mean`/`scale`, `dtype` (default float, or the input's for the `Like` forms), `shape`.
struct Random {
    normal: bool,
    like: bool,
}

impl Lower for Random {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let (shape, input_dtype) = if self.like {
            let x = cx.input(n, 0)?;
            (cx.ty(x).shape, Some(cx.ty(x).dtype))
        } else {
            let s = n.ints("shape").ok_or_else(|| cx.err("missing `shape`"))?;
            (s.into_iter().map(DimExpr::constant).collect(), None)
        };
        let dtype = match n.attr("dtype").and_then(|a| a.i) {
            Some(code) => dtype_of(code as i32)
                .ok_or_else(|| cx.err(format!("unsupported dtype code {code}")))?,
            None => input_dtype.unwrap_or(DType::F32),
        };
        if !dtype.is_float() {
            return Err(cx.err(format!("random values of type {dtype}")));
        }
        let v = if self.normal {
            // Box–Muller: sqrt(−2 ln u1)·cos(2π u2) with u1 in (0, 1].
            let w = words(cx, n, &shape, 2)?;
            let u1 = unit(cx, w[0], DType::F32)?;
            let u1 = cx.binary_scalar(Op::Add, u1, 1.0 / 16_777_216.0)?;
            let u2 = unit(cx, w[1], DType::F32)?;
            let l = cx.unary(Op::Log, u1)?;
            let l = cx.binary_scalar(Op::Multiply, l, -2.0)?;
            let r = cx.unary(Op::Sqrt, l)?;
            let a = cx.binary_scalar(Op::Multiply, u2, 2.0 * std::f64::consts::PI)?;
            let c = cx.unary(Op::Cosine, a)?;
            let z = cx.binary(Op::Multiply, r, c)?;
            let z = cx.binary_scalar(Op::Multiply, z, f64::from(n.float_or("scale", 1.0)))?;
            cx.binary_scalar(Op::Add, z, f64::from(n.float_or("mean", 0.0)))?
        } else {
            let w = words(cx, n, &shape, 1)?;
            let u = unit(cx, w[0], DType::F32)?;
            let (lo, hi) = (n.float_or("low", 0.0), n.float_or("high", 1.0));
            let u = cx.binary_scalar(Op::Multiply, u, f64::from(hi - lo))?;
            cx.binary_scalar(Op::Add, u, f64::from(lo))?
        };
        one(cx.convert(v, dtype)?)
    }
}

/// `Bernoulli(p)`: 1 with probability `p` per element, in `dtype` (default the input's).
struct Bernoulli;

impl Lower for Bernoulli {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let p = cx.input(n, 0)?;
        let t = cx.ty(p);
        let w = words(cx, n, &t.shape, 1)?;
        let u = unit(cx, w[0], DType::F32)?;
        let pf = cx.convert(p, DType::F32)?;
        let hit = cx.compare(Relation::Lt, u, pf)?;
        let dtype = match n.attr("dtype").and_then(|a| a.i) {
            Some(code) => dtype_of(code as i32)
                .ok_or_else(|| cx.err(format!("unsupported dtype code {code}")))?,
            None => t.dtype,
        };
        one(cx.convert(hit, dtype)?)
    }
}
