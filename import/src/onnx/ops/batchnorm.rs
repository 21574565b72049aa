//! Batch normalization: `BatchNormalization` (ai.onnx, both modes), ONNX Runtime's
//! `BatchNormInternal` (its training form, which also returns the saved statistics) and
//! `BatchNormalizationGrad` (com.microsoft), lowered to reductions over every axis but the
//! channel axis 1 and elementwise math.
//!
//! Training mode normalizes with the batch statistics (mean, biased variance over the `N`
//! elements of each channel); the running statistics are `input·momentum + batch·(1 −
//! momentum)` with the biased variance, as ONNX Runtime's CPU kernel computes them. The
//! gradient is the standard one (Ioffe and Szegedy, "Batch Normalization", ICML 2015, §3):
//! with `x̂ = (x − mean)·inv_std`, `dB = Σ dY`, `dScale = Σ dY·x̂`,
//! `dX = scale·inv_std/N · (N·dY − dB − x̂·dScale)`.

use super::super::ctx::{Cx, NodeAttrs, Val, R};
use super::super::proto::NodeProto;
use super::Lower;
use ebb_ir::{DimExpr, Op, ValueRef};

/// The ai.onnx batch-normalization ops, by op type.
pub(super) static OPS: &[(&str, &dyn Lower)] = &[("BatchNormalization", &BatchNorm)];

/// The com.microsoft batch-normalization ops, by op type.
pub(super) static OPS_MS: &[(&str, &dyn Lower)] = &[
    ("BatchNormInternal", &BatchNorm),
    ("BatchNormalizationGrad", &BatchNormGrad),
];

/// Axes other than the channel axis 1.
fn stat_axes(cx: &Cx, x: ValueRef) -> R<Vec<usize>> {
    let r = cx.ty(x).rank();
    if r < 2 {
        return Err(cx.err("batch norm needs an input of rank 2 or more"));
    }
    Ok((0..r).filter(|&a| a != 1).collect())
}

/// `c` (a per-channel vector) broadcast along axis 1 of `x`'s shape.
fn per_channel(cx: &mut Cx, c: ValueRef, x: ValueRef) -> R<ValueRef> {
    let shape = cx.ty(x).shape;
    cx.broadcast_in_dim(c, &[1], &shape)
}

/// The element count per channel, as a scalar of `x`'s type.
fn count(cx: &mut Cx, x: ValueRef) -> R<ValueRef> {
    let t = cx.ty(x);
    let n = t
        .shape
        .iter()
        .enumerate()
        .filter(|(a, _)| *a != 1)
        .try_fold(DimExpr::constant(1), |acc, (_, d)| acc.checked_mul(d))
        .map_err(|e| cx.err(e.to_string()))?;
    cx.dim_scalar(&n, t.dtype)
}

/// Per-channel mean of `x` over the statistic axes.
fn channel_mean(cx: &mut Cx, x: ValueRef, n: ValueRef) -> R<ValueRef> {
    let axes = stat_axes(cx, x)?;
    let s = cx.reduce(x, &axes, Op::Add, 0.0, false)?;
    let shape = cx.ty(s).shape;
    let nb = cx.broadcast_in_dim(n, &[], &shape)?;
    cx.binary(Op::Divide, s, nb)
}

/// `BatchNormalization(X, scale, B, input_mean, input_var)` and `BatchNormInternal` (same
/// inputs; outputs `Y, running_mean, running_var, saved_mean, saved_inv_std`).
struct BatchNorm;

impl Lower for BatchNorm {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        let scale = cx.input(n, 1)?;
        let bias = cx.input(n, 2)?;
        let in_mean = cx.input(n, 3)?;
        let in_var = cx.input(n, 4)?;
        let eps = f64::from(n.float_or("epsilon", 1e-5));
        let momentum = f64::from(n.float_or("momentum", 0.9));
        let train = n.int_or("training_mode", 0) != 0;
        let (mean, var) = if train {
            let cnt = count(cx, x)?;
            let mean = channel_mean(cx, x, cnt)?;
            let mb = per_channel(cx, mean, x)?;
            let d = cx.binary(Op::Subtract, x, mb)?;
            let d2 = cx.binary(Op::Multiply, d, d)?;
            (mean, channel_mean(cx, d2, cnt)?)
        } else {
            (in_mean, in_var)
        };
        let ve = cx.binary_scalar(Op::Add, var, eps)?;
        let inv_std = cx.unary(Op::Rsqrt, ve)?;
        let mb = per_channel(cx, mean, x)?;
        let centred = cx.binary(Op::Subtract, x, mb)?;
        let k = cx.binary(Op::Multiply, inv_std, scale)?;
        let kb = per_channel(cx, k, x)?;
        let y = cx.binary(Op::Multiply, centred, kb)?;
        let bb = per_channel(cx, bias, x)?;
        let y = cx.binary(Op::Add, y, bb)?;
        let mut out = vec![Val::t(y)];
        if train {
            let running = |cx: &mut Cx, old: ValueRef, new: ValueRef| -> R<ValueRef> {
                let a = cx.binary_scalar(Op::Multiply, old, momentum)?;
                let b = cx.binary_scalar(Op::Multiply, new, 1.0 - momentum)?;
                cx.binary(Op::Add, a, b)
            };
            out.push(Val::t(running(cx, in_mean, mean)?));
            out.push(Val::t(running(cx, in_var, var)?));
            out.push(Val::t(mean));
            out.push(Val::t(inv_std));
        }
        Ok(out)
    }
}

/// `BatchNormalizationGrad(dY, X, scale, saved_mean, saved_inv_std) -> (dX, dScale, dB)`.
struct BatchNormGrad;

impl Lower for BatchNormGrad {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let dy = cx.input(n, 0)?;
        let x = cx.input(n, 1)?;
        let scale = cx.input(n, 2)?;
        let mean = cx.input(n, 3)?;
        let inv_std = cx.input(n, 4)?;
        let axes = stat_axes(cx, x)?;
        let mb = per_channel(cx, mean, x)?;
        let ib = per_channel(cx, inv_std, x)?;
        let centred = cx.binary(Op::Subtract, x, mb)?;
        let xhat = cx.binary(Op::Multiply, centred, ib)?;
        let db = cx.reduce(dy, &axes, Op::Add, 0.0, false)?;
        let dyx = cx.binary(Op::Multiply, dy, xhat)?;
        let dscale = cx.reduce(dyx, &axes, Op::Add, 0.0, false)?;
        // dX = scale·inv_std/N · (N·dY − dB − x̂·dScale)
        let cnt = count(cx, x)?;
        let shape = cx.ty(dy).shape;
        let nb = cx.broadcast_in_dim(cnt, &[], &shape)?;
        let ndy = cx.binary(Op::Multiply, dy, nb)?;
        let dbb = per_channel(cx, db, x)?;
        let t = cx.binary(Op::Subtract, ndy, dbb)?;
        let dsb = per_channel(cx, dscale, x)?;
        let xs = cx.binary(Op::Multiply, xhat, dsb)?;
        let t = cx.binary(Op::Subtract, t, xs)?;
        let k = cx.binary(Op::Multiply, scale, inv_std)?;
        let kb = per_channel(cx, k, x)?;
        let t = cx.binary(Op::Multiply, t, kb)?;
        let dx = cx.binary(Op::Divide, t, nb)?;
        Ok(vec![Val::t(dx), Val::t(dscale), Val::t(db)])
    }
}
