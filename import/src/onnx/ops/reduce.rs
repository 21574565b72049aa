//! Reductions: `ReduceSum` (and ORT's `ReduceSumTraining`), `ReduceMean`, `ReduceMax`, `ReduceMin`, `ReduceProd`,
//! `ReduceSumSquare`, `ReduceL2`, `ReduceLogSumExp`, lowered to StableHLO `reduce` with a
//! one-op body (recognized by the executor as a monoid).
//!
//! Axes come from the `axes` input (`ReduceSum` since opset 13, the others since opset 18) or
//! attribute; no axes means all axes unless `noop_with_empty_axes = 1`. `ReduceMean` divides
//! by the (possibly symbolic) element count of the reduced axes.

use super::super::ctx::{norm_axis, Cx, NodeAttrs, Val, R};
use super::super::proto::NodeProto;
use super::shape::axes_of;
use super::{one, Lower};
use ebb_ir::{DimExpr, Op, ValueRef};

/// The ai.onnx ops this module lowers, by op type.
pub(super) static OPS: &[(&str, &dyn Lower)] = &[
    ("ReduceSum", &Reduce(Kind::Sum)),
    ("ReduceMean", &Reduce(Kind::Mean)),
    ("ReduceMax", &Reduce(Kind::Max)),
    ("ReduceMin", &Reduce(Kind::Min)),
    ("ReduceProd", &Reduce(Kind::Prod)),
    ("ReduceSumSquare", &Reduce(Kind::SumSquare)),
    ("ReduceL2", &Reduce(Kind::L2)),
    ("ReduceLogSumExp", &Reduce(Kind::LogSumExp)),
];

/// The com.microsoft reductions: ORT's `ReduceSumTraining` is `ReduceSum` with its axes as an
/// input, as opset 13's.
pub(super) static OPS_MS: &[(&str, &dyn Lower)] = &[("ReduceSumTraining", &Reduce(Kind::Sum))];

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    SumSquare,
    L2,
    LogSumExp,
}

struct Reduce(Kind);

/// Sum of `x` over `axes` divided by their element count.
pub(crate) fn mean(cx: &mut Cx, x: ValueRef, axes: &[usize], keep: bool) -> R<ValueRef> {
    let t = cx.ty(x);
    let s = cx.reduce(x, axes, Op::Add, 0.0, keep)?;
    let count = axes
        .iter()
        .fold(DimExpr::constant(1), |a, &i| a * t.shape[i].clone());
    let c = match count.as_const() {
        Some(k) => cx.scalar(t.dtype, k as f64),
        None => cx.dim_scalar(&count, t.dtype)?,
    };
    cx.binary(Op::Divide, s, c)
}

impl Lower for Reduce {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        let t = cx.ty(x);
        let keep = n.int_or("keepdims", 1) != 0;
        let axes: Vec<usize> = match axes_of(cx, n, 1)? {
            Some(a) if !a.is_empty() => a
                .iter()
                .map(|&a| norm_axis(cx, a, t.rank()))
                .collect::<R<_>>()?,
            _ if n.int_or("noop_with_empty_axes", 0) != 0 => return one(x),
            _ => (0..t.rank()).collect(),
        };
        let y = match self.0 {
            Kind::Sum => cx.reduce(x, &axes, Op::Add, 0.0, keep)?,
            Kind::Mean => mean(cx, x, &axes, keep)?,
            Kind::Max => cx.reduce(x, &axes, Op::Maximum, f64::NEG_INFINITY, keep)?,
            Kind::Min => cx.reduce(x, &axes, Op::Minimum, f64::INFINITY, keep)?,
            Kind::Prod => cx.reduce(x, &axes, Op::Multiply, 1.0, keep)?,
            Kind::SumSquare | Kind::L2 => {
                let sq = cx.binary(Op::Multiply, x, x)?;
                let s = cx.reduce(sq, &axes, Op::Add, 0.0, keep)?;
                if self.0 == Kind::L2 {
                    cx.unary(Op::Sqrt, s)?
                } else {
                    s
                }
            }
            Kind::LogSumExp => {
                let m = cx.reduce(x, &axes, Op::Maximum, f64::NEG_INFINITY, true)?;
                let d = cx.binary(Op::Subtract, x, m)?;
                let e = cx.unary(Op::Exponential, d)?;
                let s = cx.reduce(e, &axes, Op::Add, 0.0, true)?;
                let l = cx.unary(Op::Log, s)?;
                let y = cx.binary(Op::Add, l, m)?;
                if keep {
                    y
                } else {
                    let shape: Vec<DimExpr> = (0..t.rank())
                        .filter(|i| !axes.contains(i))
                        .map(|i| t.shape[i].clone())
                        .collect();
                    cx.reshape(y, &shape)?
                }
            }
        };
        one(y)
    }
}
