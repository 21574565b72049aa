//! `Erf` and the GELU family: ONNX `Gelu` (opset 20, exact or `approximate = "tanh"`) and
//! `com.microsoft` `Gelu`, `BiasGelu`, `FastGelu`, `GeluGrad`, `BiasGeluGrad_dX`,
//! `FastGeluGrad`, `BiasFastGeluGrad_dX`.
//!
//! `Erf` has no primitive: it is lowered to the rational approximation XLA and Eigen use for
//! `f32` (`erf(x) ≈ x·P(x²)/Q(x²)` on `x` clamped to `[-4, 4]`, degree 13/8; absolute error
//! below 2 ulp of f32), evaluated in the input's type. The tanh form is
//! `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.

use super::super::ctx::{Cx, NodeAttrs, Val, R};
use super::super::proto::NodeProto;
use super::{one, Lower};
use ebb_ir::{Op, ValueRef};

/// The ai.onnx ops this module lowers, by op type.
pub(super) static OPS: &[(&str, &dyn Lower)] = &[("Erf", &Erf), ("Gelu", &Gelu { bias: false })];

/// The com.microsoft ops this module lowers, by op type.
pub(super) static OPS_MS: &[(&str, &dyn Lower)] = &[
    ("Gelu", &Gelu { bias: false }),
    ("BiasGelu", &Gelu { bias: true }),
    ("FastGelu", &FastGelu),
    ("GeluGrad", &GeluGrad { bias: false }),
    ("BiasGeluGrad_dX", &GeluGrad { bias: true }),
    ("FastGeluGrad", &FastGeluGrad),
    ("BiasFastGeluGrad_dX", &FastGeluGrad),
];

/// The erf approximation of the module docs.
pub(crate) fn erf(cx: &mut Cx, x: ValueRef) -> R<ValueRef> {
    const ALPHA: [f64; 7] = [
        -2.72614225801306e-10,
        2.77068142495902e-08,
        -2.10102402082508e-06,
        -5.69250639462346e-05,
        -7.34990630326855e-04,
        -2.95459980854025e-03,
        -1.60960333262415e-02,
    ];
    const BETA: [f64; 5] = [
        -1.45660718464996e-05,
        -2.13374055278905e-04,
        -1.68282697438203e-03,
        -7.37332916720468e-03,
        -1.42647390514189e-02,
    ];
    let x = cx.binary_scalar(Op::Maximum, x, -4.0)?;
    let x = cx.binary_scalar(Op::Minimum, x, 4.0)?;
    let x2 = cx.binary(Op::Multiply, x, x)?;
    let horner = |cx: &mut Cx, c: &[f64]| -> R<ValueRef> {
        let d = cx.ty(x2).dtype;
        let mut acc = cx.scalar(d, c[0]);
        for &k in &c[1..] {
            acc = cx.binary(Op::Multiply, acc, x2)?;
            acc = cx.binary_scalar(Op::Add, acc, k)?;
        }
        Ok(acc)
    };
    let p = horner(cx, &ALPHA)?;
    let p = cx.binary(Op::Multiply, x, p)?;
    let q = horner(cx, &BETA)?;
    cx.binary(Op::Divide, p, q)
}

struct Erf;

impl Lower for Erf {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        if !cx.ty(x).dtype.is_float() {
            return Err(cx.err("Erf of a non-float tensor"));
        }
        one(erf(cx, x)?)
    }
}

/// Exact GELU `0.5·x·(1 + erf(x/√2))`; `bias` adds input 1 first (`BiasGelu`). ONNX `Gelu`
/// with `approximate = "tanh"` uses the tanh form of [`FastGelu`].
struct Gelu {
    bias: bool,
}

fn gelu_tanh(cx: &mut Cx, x: ValueRef) -> R<ValueRef> {
    // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    let x2 = cx.binary(Op::Multiply, x, x)?;
    let x3 = cx.binary(Op::Multiply, x2, x)?;
    let c = cx.binary_scalar(Op::Multiply, x3, 0.044715)?;
    let inner = cx.binary(Op::Add, x, c)?;
    let inner = cx.binary_scalar(Op::Multiply, inner, (2.0 / std::f64::consts::PI).sqrt())?;
    let t = cx.unary(Op::Tanh, inner)?;
    let t = cx.binary_scalar(Op::Add, t, 1.0)?;
    let h = cx.binary_scalar(Op::Multiply, x, 0.5)?;
    cx.binary(Op::Multiply, h, t)
}

impl Lower for Gelu {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let mut x = cx.input(n, 0)?;
        if self.bias {
            let b = cx.input(n, 1)?;
            x = cx.binary(Op::Add, x, b)?;
        }
        if n.string("approximate").as_deref() == Some("tanh") {
            return one(gelu_tanh(cx, x)?);
        }
        let s = cx.binary_scalar(Op::Multiply, x, std::f64::consts::FRAC_1_SQRT_2)?;
        let e = erf(cx, s)?;
        let e = cx.binary_scalar(Op::Add, e, 1.0)?;
        let h = cx.binary_scalar(Op::Multiply, x, 0.5)?;
        one(cx.binary(Op::Multiply, h, e)?)
    }
}

/// `FastGelu(x, bias?)` (com.microsoft): the tanh approximation.
struct FastGelu;

impl Lower for FastGelu {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let mut x = cx.input(n, 0)?;
        if cx.opt_input(n, 1).is_some() {
            let b = cx.input(n, 1)?;
            x = cx.binary(Op::Add, x, b)?;
        }
        one(gelu_tanh(cx, x)?)
    }
}

/// `GeluGrad(dY, X)` / `BiasGeluGrad_dX(dY, X, B)`:
/// `dY·(0.5·(1 + erf(x/√2)) + x·exp(-x²/2)/√(2π))`.
struct GeluGrad {
    bias: bool,
}

impl Lower for GeluGrad {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let dy = cx.input(n, 0)?;
        let mut x = cx.input(n, 1)?;
        if self.bias {
            let b = cx.input(n, 2)?;
            x = cx.binary(Op::Add, x, b)?;
        }
        let s = cx.binary_scalar(Op::Multiply, x, std::f64::consts::FRAC_1_SQRT_2)?;
        let e = erf(cx, s)?;
        let e = cx.binary_scalar(Op::Add, e, 1.0)?;
        let cdf = cx.binary_scalar(Op::Multiply, e, 0.5)?;
        let x2 = cx.binary(Op::Multiply, x, x)?;
        let m = cx.binary_scalar(Op::Multiply, x2, -0.5)?;
        let pdf = cx.unary(Op::Exponential, m)?;
        let pdf = cx.binary_scalar(Op::Multiply, pdf, 1.0 / (2.0 * std::f64::consts::PI).sqrt())?;
        let xp = cx.binary(Op::Multiply, x, pdf)?;
        let g = cx.binary(Op::Add, cdf, xp)?;
        one(cx.binary(Op::Multiply, dy, g)?)
    }
}

/// `FastGeluGrad(dY, X)` / `BiasFastGeluGrad_dX(dY, X, B)`: derivative of the tanh
/// approximation at `X (+ B)`.
struct FastGeluGrad;

impl Lower for FastGeluGrad {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let dy = cx.input(n, 0)?;
        let mut x = cx.input(n, 1)?;
        if cx.opt_input(n, 2).is_some() {
            let b = cx.input(n, 2)?;
            x = cx.binary(Op::Add, x, b)?;
        }
        let k = (2.0 / std::f64::consts::PI).sqrt();
        let x2 = cx.binary(Op::Multiply, x, x)?;
        let x3 = cx.binary(Op::Multiply, x2, x)?;
        let c = cx.binary_scalar(Op::Multiply, x3, 0.044715)?;
        let u = cx.binary(Op::Add, x, c)?;
        let u = cx.binary_scalar(Op::Multiply, u, k)?;
        let t = cx.unary(Op::Tanh, u)?;
        // 0.5(1+t) + 0.5·x·(1-t²)·k·(1 + 3·0.044715·x²)
        let a = cx.binary_scalar(Op::Add, t, 1.0)?;
        let a = cx.binary_scalar(Op::Multiply, a, 0.5)?;
        let t2 = cx.binary(Op::Multiply, t, t)?;
        let d = cx.ty(t2).dtype;
        let one_ = cx.scalar(d, 1.0);
        let sech2 = cx.binary(Op::Subtract, one_, t2)?;
        let p = cx.binary_scalar(Op::Multiply, x2, 3.0 * 0.044715)?;
        let p = cx.binary_scalar(Op::Add, p, 1.0)?;
        let p = cx.binary_scalar(Op::Multiply, p, 0.5 * k)?;
        let b = cx.binary(Op::Multiply, x, sech2)?;
        let b = cx.binary(Op::Multiply, b, p)?;
        let g = cx.binary(Op::Add, a, b)?;
        one(cx.binary(Op::Multiply, dy, g)?)
    }
}
