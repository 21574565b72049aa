//! Neural-network ops: `Softmax`, `LogSoftmax`, `LayerNormalization`,
//! `SoftmaxCrossEntropyLoss`, `NegativeLogLikelihoodLoss`, and the `com.microsoft` training forms `SoftmaxGrad_13`,
//! `LogSoftmaxGrad_13`, `LayerNormalizationGrad`, `SoftmaxCrossEntropyLossInternal` and
//! `SoftmaxCrossEntropyLossInternalGrad`, lowered to reductions and elementwise math.
//!
//! Softmax subtracts the row maximum before `exp` (as every runtime does); layer
//! normalization computes the biased variance of the centred input, in the input's type.

use super::super::ctx::{norm_axis, Cx, NodeAttrs, Val, R};
use super::super::proto::NodeProto;
use super::reduce::mean;
use super::{one, Lower};
use ebb_ir::{DType, DimExpr, Op, Relation, TensorType, ValueRef};

/// The ai.onnx ops this module lowers, by op type.
pub(super) static OPS: &[(&str, &dyn Lower)] = &[
    ("Softmax", &Softmax { log: false }),
    ("LogSoftmax", &Softmax { log: true }),
    ("LayerNormalization", &LayerNorm),
    ("SoftmaxCrossEntropyLoss", &SceLoss),
    ("NegativeLogLikelihoodLoss", &NllLoss),
];

/// The com.microsoft ops this module lowers, by op type.
pub(super) static OPS_MS: &[(&str, &dyn Lower)] = &[
    ("SoftmaxGrad_13", &SoftmaxGrad { log: false }),
    ("SoftmaxGrad", &SoftmaxGrad { log: false }),
    ("LogSoftmaxGrad_13", &SoftmaxGrad { log: true }),
    ("LogSoftmaxGrad", &SoftmaxGrad { log: true }),
    ("LayerNormalizationGrad", &LayerNormGrad),
    ("SoftmaxCrossEntropyLossInternal", &SceLoss),
    ("SoftmaxCrossEntropyLossInternalGrad", &SceLossGrad),
    ("SoftmaxCrossEntropyLossGrad", &SceLossGrad),
];

/// The axes a softmax normalizes over: `[axis]` from opset 13 (and for the `_13` grads),
/// `[axis, rank)` before (the "coerced to 2-D" semantics).
fn softmax_axes(cx: &Cx, n: &NodeProto, rank: usize, v13: bool) -> R<Vec<usize>> {
    let default = if v13 { -1 } else { 1 };
    let a = norm_axis(cx, n.int_or("axis", default), rank)?;
    Ok(if v13 { vec![a] } else { (a..rank).collect() })
}

/// `softmax(x)` or `log_softmax(x)` over `axes`.
pub(crate) fn softmax(cx: &mut Cx, x: ValueRef, axes: &[usize], log: bool) -> R<ValueRef> {
    let m = cx.reduce(x, axes, Op::Maximum, f64::NEG_INFINITY, true)?;
    let d = cx.binary(Op::Subtract, x, m)?;
    let e = cx.unary(Op::Exponential, d)?;
    let s = cx.reduce(e, axes, Op::Add, 0.0, true)?;
    if log {
        let l = cx.unary(Op::Log, s)?;
        cx.binary(Op::Subtract, d, l)
    } else {
        cx.binary(Op::Divide, e, s)
    }
}

struct Softmax {
    log: bool,
}

impl Lower for Softmax {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        let r = cx.ty(x).rank();
        let axes = softmax_axes(cx, n, r, cx.opset() >= 13)?;
        one(softmax(cx, x, &axes, self.log)?)
    }
}

/// `SoftmaxGrad_13(dY, Y)`: `Y·(dY − Σ dY·Y)`; `LogSoftmaxGrad_13(dY, Y)`:
/// `dY − exp(Y)·Σ dY` (sums over the softmax axis, kept).
struct SoftmaxGrad {
    log: bool,
}

impl Lower for SoftmaxGrad {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let dy = cx.input(n, 0)?;
        let y = cx.input(n, 1)?;
        let r = cx.ty(y).rank();
        let v13 = n.op_type.as_deref().is_some_and(|s| s.ends_with("_13"));
        let axes = softmax_axes(cx, n, r, v13)?;
        if self.log {
            let s = cx.reduce(dy, &axes, Op::Add, 0.0, true)?;
            let e = cx.unary(Op::Exponential, y)?;
            let p = cx.binary(Op::Multiply, e, s)?;
            return one(cx.binary(Op::Subtract, dy, p)?);
        }
        let p = cx.binary(Op::Multiply, dy, y)?;
        let s = cx.reduce(p, &axes, Op::Add, 0.0, true)?;
        let d = cx.binary(Op::Subtract, dy, s)?;
        one(cx.binary(Op::Multiply, y, d)?)
    }
}

/// `LayerNormalization(X, Scale, B?)`: outputs `Y`, `Mean`, `InvStdDev` (the statistics with
/// the normalized axes kept as size 1).
struct LayerNorm;

impl Lower for LayerNorm {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        let t = cx.ty(x);
        let a = norm_axis(cx, n.int_or("axis", -1), t.rank())?;
        let axes: Vec<usize> = (a..t.rank()).collect();
        let eps = n.float_or("epsilon", 1e-5) as f64;
        let m = mean(cx, x, &axes, true)?;
        let d = cx.binary(Op::Subtract, x, m)?;
        let d2 = cx.binary(Op::Multiply, d, d)?;
        let var = mean(cx, d2, &axes, true)?;
        let ve = cx.binary_scalar(Op::Add, var, eps)?;
        let inv = cx.unary(Op::Rsqrt, ve)?;
        let xh = cx.binary(Op::Multiply, d, inv)?;
        let scale = cx.input(n, 1)?;
        let mut y = cx.binary(Op::Multiply, xh, scale)?;
        if cx.opt_input(n, 2).is_some() {
            let b = cx.input(n, 2)?;
            y = cx.binary(Op::Add, y, b)?;
        }
        Ok(vec![Val::t(y), Val::t(m), Val::t(inv)])
    }
}

/// `LayerNormalizationGrad(dY, X, scale, mean, inv_std_dev)` (com.microsoft): outputs `dX`,
/// `dScale`, `dBias`, with `x̂ = (X − mean)·inv`, `g = dY·scale`,
/// `dX = inv·(g − mean(g) − x̂·mean(g·x̂))` over the normalized axes, and the parameter
/// gradients summed over the leading axes.
struct LayerNormGrad;

impl Lower for LayerNormGrad {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let dy = cx.input(n, 0)?;
        let x = cx.input(n, 1)?;
        let scale = cx.input(n, 2)?;
        let m = cx.input(n, 3)?;
        let inv = cx.input(n, 4)?;
        let t = cx.ty(x);
        let a = norm_axis(cx, n.int_or("axis", -1), t.rank())?;
        let axes: Vec<usize> = (a..t.rank()).collect();
        let lead: Vec<usize> = (0..a).collect();
        let d = cx.binary(Op::Subtract, x, m)?;
        let xh = cx.binary(Op::Multiply, d, inv)?;
        let g = cx.binary(Op::Multiply, dy, scale)?;
        let mg = mean(cx, g, &axes, true)?;
        let gx = cx.binary(Op::Multiply, g, xh)?;
        let mgx = mean(cx, gx, &axes, true)?;
        let t1 = cx.binary(Op::Subtract, g, mg)?;
        let t2 = cx.binary(Op::Multiply, xh, mgx)?;
        let t3 = cx.binary(Op::Subtract, t1, t2)?;
        let dx = cx.binary(Op::Multiply, inv, t3)?;
        let dyx = cx.binary(Op::Multiply, dy, xh)?;
        let dscale = cx.reduce(dyx, &lead, Op::Add, 0.0, false)?;
        let dbias = cx.reduce(dy, &lead, Op::Add, 0.0, false)?;
        Ok(vec![Val::t(dx), Val::t(dscale), Val::t(dbias)])
    }
}

/// One-hot of integer `labels` (shape `[N, d..]`) over the class axis 1 of `scores`
/// (shape `[N, C, d..]`), in `scores`' element type, shaped like `scores`.
///
/// Errors: `scores` of rank below 2, or `labels` not of rank one less.
fn one_hot(cx: &mut Cx, labels: ValueRef, scores: &TensorType) -> R<ValueRef> {
    let hit = class_mask(cx, labels, scores)?;
    cx.convert(hit, scores.dtype)
}

/// [`one_hot`] as a boolean mask: true at `[n, labels[n, d..], d..]`.
fn class_mask(cx: &mut Cx, labels: ValueRef, scores: &TensorType) -> R<ValueRef> {
    let tl = cx.ty(labels);
    if scores.rank() < 2 || tl.rank() + 1 != scores.rank() {
        return Err(cx.err(format!(
            "scores must have shape [N, C, d..] and labels [N, d..]; got {scores} and {tl}"
        )));
    }
    let c = &scores.shape[1];
    let labels = cx.convert(labels, DType::I64)?;
    let mut shape = tl.shape.clone();
    shape.insert(1, c.clone());
    let io = cx.iota(DType::I64, &shape, 1)?;
    let dims: Vec<i64> = (0..shape.len() as i64).filter(|&i| i != 1).collect();
    let lb = cx.broadcast_in_dim(labels, &dims, &shape)?;
    cx.compare(Relation::Eq, io, lb)
}

/// The per-sample weights `w[label]·(label != ignore_index)` (shape of `labels`, `dtype`),
/// or `None` when neither weights nor an ignore index is given.
fn sample_weights(
    cx: &mut Cx,
    n: &NodeProto,
    labels_in: usize,
    dtype: DType,
    oh: ValueRef,
) -> R<Option<ValueRef>> {
    let labels = cx.input(n, labels_in)?;
    let mut w = None;
    if cx.opt_input(n, labels_in + 1).is_some() {
        // Σ_c onehot·w[c] along the class axis.
        let wt = cx.input(n, labels_in + 1)?;
        let shape = cx.ty(oh).shape;
        let wb = cx.broadcast_in_dim(wt, &[1], &shape)?;
        let p = cx.binary(Op::Multiply, oh, wb)?;
        w = Some(cx.reduce(p, &[1], Op::Add, 0.0, false)?);
    }
    let ignore = if cx.opt_input(n, labels_in + 2).is_some() {
        cx.input_ints(n, labels_in + 2)?.first().copied()
    } else {
        n.attr("ignore_index").and_then(|a| a.i)
    };
    if let Some(ig) = ignore {
        let l = cx.convert(labels, DType::I64)?;
        let igv = cx.scalar(DType::I64, ig as f64);
        let keep = cx.compare(Relation::Ne, l, igv)?;
        let keep = cx.convert(keep, dtype)?;
        w = Some(match w {
            Some(w) => cx.binary(Op::Multiply, w, keep)?,
            None => keep,
        });
    }
    Ok(w)
}

/// The divisor of a `mean` reduction: `Σ w` with weights, else the sample count.
fn mean_divisor(
    cx: &mut Cx,
    w: Option<ValueRef>,
    labels_shape: &[DimExpr],
    dtype: DType,
) -> R<ValueRef> {
    match w {
        Some(w) => {
            let all: Vec<usize> = (0..labels_shape.len()).collect();
            cx.reduce(w, &all, Op::Add, 0.0, false)
        }
        None => {
            let count = labels_shape
                .iter()
                .fold(DimExpr::constant(1), |a, d| a * d.clone());
            match count.as_const() {
                Some(k) => Ok(cx.scalar(dtype, k as f64)),
                None => cx.dim_scalar(&count, dtype),
            }
        }
    }
}

/// `SoftmaxCrossEntropyLoss(scores, labels, weights?)` (ai.onnx) and
/// `SoftmaxCrossEntropyLossInternal(logits, label, weight?, ignore_index?)`
/// (com.microsoft): outputs the loss (reduced per `reduction`: `mean` default, `sum`,
/// `none`) and the log-probabilities.
struct SceLoss;

impl Lower for SceLoss {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        let labels = cx.input(n, 1)?;
        let t = cx.ty(x);
        if t.rank() < 2 {
            return Err(cx.err("scores must have rank >= 2 ([N, C, ...])"));
        }
        let logp = softmax(cx, x, &[1], true)?;
        let oh = one_hot(cx, labels, &t)?;
        let w = sample_weights(cx, n, 1, t.dtype, oh)?;
        let p = cx.binary(Op::Multiply, logp, oh)?;
        let loss = nll_reduced(cx, n, p, w, labels, t.dtype)?;
        Ok(vec![Val::t(loss), Val::t(logp)])
    }
}

/// The loss of the cross-entropy ops from `picked`, `[N, C, d..]` holding each target's
/// (log-)probability at its class and 0 elsewhere: summed over the classes and negated,
/// times the per-sample weights `w`, then reduced per the node's `reduction` (`mean` default:
/// divided by the applied weights, [`mean_divisor`]; `sum`; `none`).
fn nll_reduced(
    cx: &mut Cx,
    n: &NodeProto,
    picked: ValueRef,
    w: Option<ValueRef>,
    labels: ValueRef,
    dtype: DType,
) -> R<ValueRef> {
    let picked = cx.reduce(picked, &[1], Op::Add, 0.0, false)?;
    let mut nll = cx.unary(Op::Negate, picked)?;
    if let Some(w) = w {
        nll = cx.binary(Op::Multiply, nll, w)?;
    }
    let ls = cx.ty(labels).shape;
    let all: Vec<usize> = (0..ls.len()).collect();
    Ok(match n.string("reduction").as_deref().unwrap_or("mean") {
        "none" => nll,
        "sum" => cx.reduce(nll, &all, Op::Add, 0.0, false)?,
        "mean" => {
            let s = cx.reduce(nll, &all, Op::Add, 0.0, false)?;
            let dv = mean_divisor(cx, w, &ls, dtype)?;
            cx.binary(Op::Divide, s, dv)?
        }
        r => return Err(cx.err(format!("unknown reduction `{r}`"))),
    })
}

/// `NegativeLogLikelihoodLoss(input, target, weight?)` (ai.onnx, opset 12+):
/// `loss[n, d..] = −input[n, target[n, d..], d..] · weight[target[n, d..]]`, 0 (with no
/// weight) where the target is `ignore_index`; reduced per `reduction` (`mean` default: the
/// sum divided by the sum of the applied weights, or by the count of targets when there are
/// neither weights nor an ignore index; `sum`; `none`). The picked element is selected by a
/// class mask (not multiplied by a one-hot), so an infinite or NaN input at another class does
/// not reach the loss. A target outside `[0, C)` other than `ignore_index` contributes 0.
struct NllLoss;

impl Lower for NllLoss {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        let labels = cx.input(n, 1)?;
        let t = cx.ty(x);
        if t.rank() < 2 {
            return Err(cx.err("input must have rank >= 2 ([N, C, d..])"));
        }
        if !t.dtype.is_float() {
            return Err(cx.err(format!("input must be a float tensor, not {}", t.dtype)));
        }
        if !cx.ty(labels).dtype.is_int() {
            return Err(cx.err("target must be an integer tensor"));
        }
        let hit = class_mask(cx, labels, &t)?;
        let oh = cx.convert(hit, t.dtype)?;
        let w = sample_weights(cx, n, 1, t.dtype, oh)?;
        let zeros = cx.full(t.dtype, 0.0, &t.shape)?;
        let sel = cx.select(hit, x, zeros)?;
        one(nll_reduced(cx, n, sel, w, labels, t.dtype)?)
    }
}

/// `SoftmaxCrossEntropyLossInternalGrad(dY, log_prob, label, weight?, ignore_index?)`:
/// `(exp(log_prob) − onehot)·w·dY`, divided by the mean divisor for `reduction = mean`.
struct SceLossGrad;

impl Lower for SceLossGrad {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let dy = cx.input(n, 0)?;
        let logp = cx.input(n, 1)?;
        let labels = cx.input(n, 2)?;
        let t = cx.ty(logp);
        let oh = one_hot(cx, labels, &t)?;
        let w = sample_weights(cx, n, 2, t.dtype, oh)?;
        let p = cx.unary(Op::Exponential, logp)?;
        let mut g = cx.binary(Op::Subtract, p, oh)?;
        let ls = cx.ty(labels).shape;
        let shape = t.shape.clone();
        let dims: Vec<i64> = (0..shape.len() as i64).filter(|&i| i != 1).collect();
        if let Some(w) = w {
            let wb = cx.broadcast_in_dim(w, &dims, &shape)?;
            g = cx.binary(Op::Multiply, g, wb)?;
        }
        let red = n.string("reduction").unwrap_or_else(|| "mean".into());
        let dyv = if cx.ty(dy).rank() == 0 {
            dy
        } else if red == "none" {
            cx.broadcast_in_dim(dy, &dims, &shape)?
        } else {
            cx.reshape(dy, &[])?
        };
        g = cx.binary(Op::Multiply, g, dyv)?;
        if red == "mean" {
            let dv = mean_divisor(cx, w, &ls, t.dtype)?;
            g = cx.binary(Op::Divide, g, dv)?;
        }
        one(g)
    }
}
