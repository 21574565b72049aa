//! ONNX Runtime training ops that update inputs in place (`com.microsoft`):
//! `InPlaceAccumulatorV2` (gradient accumulation buffers) and `AdamWOptimizer`.
//!
//! Ebb graphs are pure, so an in-place update is imported as a new value that becomes an extra
//! graph output named `<input>@after` (see [`super::super::ctx::Cx::in_place`]); the op's
//! declared outputs (the `updated_flag`s) are constant `true` (no `update_signal` skipping).
//!
//! `AdamWOptimizer` follows ONNX Runtime's CPU kernel (`orttraining/training_ops/cpu/
//! optimizer/adamw`): `adam_mode = 0` is PyTorch's AdamW (decay first, then the bias-corrected
//! step); `adam_mode = 1` is Hugging Face's (`lr' = lr·√(1−β₂ᵗ)/(1−β₁ᵗ)` when
//! `correct_bias`, `p ← p − lr'·m/(√v + eps)`, then `p ← p − lr·wd·p`). `step` is the 1-based
//! count of this update.

use super::super::ctx::{Cx, NodeAttrs, Val, R};
use super::super::proto::NodeProto;
use super::Lower;
use ebb_ir::{DType, DimExpr, Op, ValueRef};
use std::rc::Rc;

/// The com.microsoft ops this module lowers, by op type.
pub(super) static OPS_MS: &[(&str, &dyn Lower)] = &[
    ("InPlaceAccumulatorV2", &Accumulate),
    ("AdamWOptimizer", &AdamW),
];

/// A `bool[1]` constant `true` (an `updated_flag`).
fn flag(cx: &mut Cx) -> R<ValueRef> {
    cx.full(DType::I1, 1.0, &[DimExpr::constant(1)])
}

/// `InPlaceAccumulatorV2(buffer, value, overwrite?)`: the buffer becomes `value` when
/// `overwrite` is true, `buffer + value` otherwise.
struct Accumulate;

impl Lower for Accumulate {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let buf_name = cx.input_name(n, 0)?.to_string();
        let buf = cx.input(n, 0)?;
        let v = cx.input(n, 1)?;
        let sum = cx.binary(Op::Add, buf, v)?;
        let new = if cx.opt_input(n, 2).is_some() {
            let o = cx.input(n, 2)?;
            let o = cx.reshape(o, &[])?;
            cx.select(o, v, sum)?
        } else {
            sum
        };
        cx.in_place.push((buf_name, new));
        Ok(vec![Val::t(flag(cx)?), Val::t(new)])
    }
}

/// `AdamWOptimizer(lr, step, weights, gradients, m1, m2, update_signal?)` on tensor
/// sequences (see the module docs).
struct AdamW;

impl Lower for AdamW {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        if cx.opt_input(n, 6).is_some() {
            return Err(cx.err("AdamWOptimizer with an update_signal input is not supported"));
        }
        let alpha = n.float_or("alpha", 0.9) as f64;
        let beta = n.float_or("beta", 0.999) as f64;
        let eps = n.float_or("epsilon", 1e-8) as f64;
        let wd = n.float_or("weight_decay", 0.0) as f64;
        let mode = n.int_or("adam_mode", 0);
        let correct = n.int_or("correct_bias", 1) != 0;
        let seq = |cx: &Cx, i: usize| -> R<(String, Rc<Vec<Val>>)> {
            let name = cx.input_name(n, i)?.to_string();
            let v = cx.val(&name)?;
            let s = v
                .seq
                .ok_or_else(|| cx.err(format!("input {i} (`{name}`) is not a tensor sequence")))?;
            Ok((name, s))
        };
        let (pn, ps) = seq(cx, 2)?;
        let (_, gs) = seq(cx, 3)?;
        let (m1n, m1s) = seq(cx, 4)?;
        let (m2n, m2s) = seq(cx, 5)?;
        if gs.len() != ps.len() || m1s.len() != ps.len() || m2s.len() != ps.len() {
            return Err(cx.err("weights, gradients and moments differ in length"));
        }
        // Scalars: lr (f32), t = step (f32), bias corrections.
        let lr = cx.input(n, 0)?;
        let lr = cx.reshape(lr, &[])?;
        let step = cx.input(n, 1)?;
        let step = cx.reshape(step, &[])?;
        let t = cx.convert(step, DType::F32)?;
        let pow = |cx: &mut Cx, b: f64| -> R<ValueRef> {
            let bv = cx.scalar(DType::F32, b);
            let p = cx.binary(Op::Power, bv, t)?;
            let one = cx.scalar(DType::F32, 1.0);
            cx.binary(Op::Subtract, one, p)
        };
        let bc1 = pow(cx, alpha)?;
        let bc2 = pow(cx, beta)?;
        let decay = if wd > 0.0 {
            let lw = cx.binary_scalar(Op::Multiply, lr, wd)?;
            let one = cx.scalar(DType::F32, 1.0);
            Some(cx.binary(Op::Subtract, one, lw)?)
        } else {
            None
        };
        let step_size = match mode {
            0 => cx.binary(Op::Divide, lr, bc1)?,
            1 if correct => {
                let s2 = cx.unary(Op::Sqrt, bc2)?;
                let a = cx.binary(Op::Multiply, lr, s2)?;
                cx.binary(Op::Divide, a, bc1)?
            }
            1 => lr,
            m => return Err(cx.err(format!("adam_mode {m} is not supported"))),
        };
        let sqrt_bc2 = cx.unary(Op::Sqrt, bc2)?;
        for j in 0..ps.len() {
            let p = cx.materialize(&ps[j])?;
            let g = cx.materialize(&gs[j])?;
            let m1 = cx.materialize(&m1s[j])?;
            let m2 = cx.materialize(&m2s[j])?;
            let m1a = cx.binary_scalar(Op::Multiply, m1, alpha)?;
            let ga = cx.binary_scalar(Op::Multiply, g, 1.0 - alpha)?;
            let m1n_ = cx.binary(Op::Add, m1a, ga)?;
            let m2b = cx.binary_scalar(Op::Multiply, m2, beta)?;
            let g2 = cx.binary(Op::Multiply, g, g)?;
            let g2b = cx.binary_scalar(Op::Multiply, g2, 1.0 - beta)?;
            let m2n_ = cx.binary(Op::Add, m2b, g2b)?;
            let sv = cx.unary(Op::Sqrt, m2n_)?;
            let p_new = if mode == 0 {
                let p0 = match decay {
                    Some(d) => cx.binary(Op::Multiply, p, d)?,
                    None => p,
                };
                let den = cx.binary(Op::Divide, sv, sqrt_bc2)?;
                let den = cx.binary_scalar(Op::Add, den, eps)?;
                let u = cx.binary(Op::Divide, m1n_, den)?;
                let u = cx.binary(Op::Multiply, u, step_size)?;
                cx.binary(Op::Subtract, p0, u)?
            } else {
                let den = cx.binary_scalar(Op::Add, sv, eps)?;
                let u = cx.binary(Op::Divide, m1n_, den)?;
                let u = cx.binary(Op::Multiply, u, step_size)?;
                let p1 = cx.binary(Op::Subtract, p, u)?;
                match decay {
                    Some(d) => cx.binary(Op::Multiply, p1, d)?,
                    None => p1,
                }
            };
            cx.in_place.push((format!("{pn}[{j}]"), p_new));
            cx.in_place.push((format!("{m1n}[{j}]"), m1n_));
            cx.in_place.push((format!("{m2n}[{j}]"), m2n_));
        }
        Ok(vec![Val::t(flag(cx)?)])
    }
}
