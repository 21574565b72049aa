//! Concatenation and slicing: `Concat` (and `com.microsoft` `ConcatTraining`), `Slice`,
//! `Split`, `SplitToSequence`/`SequenceAt` (sequences of the split pieces, indexed at import
//! time) and `com.microsoft` `SliceGrad`.
//!
//! Slice bounds are symbolic: ONNX's clamping is applied where it can be decided, and a
//! symbolic end that may exceed its dimension becomes a run-time shape assertion
//! ([`slice_end`]).

use super::super::ctx::{norm_axis, Cx, NodeAttrs, Val, R};
use super::super::proto::NodeProto;
use super::shape::{exact_div, input_shape, sym_i64};
use super::{one, symbolic, Lower};
use crate::sym::SymVal;
use ebb_ir::op::SliceSpec;
use ebb_ir::{DType, DimExpr, Op, SymbolScope};
use std::rc::Rc;

/// The ai.onnx ops this module lowers, by op type.
pub(super) static OPS: &[(&str, &dyn Lower)] = &[
    ("Concat", &Concat),
    ("Slice", &Slice),
    ("Split", &Split),
    ("SplitToSequence", &SplitToSequence),
    ("SequenceAt", &SequenceAt),
];

/// The com.microsoft ops this module lowers, by op type.
pub(super) static OPS_MS: &[(&str, &dyn Lower)] =
    &[("ConcatTraining", &Concat), ("SliceGrad", &SliceGrad)];

struct Concat;

impl Lower for Concat {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let vals: Vec<Val> = (0..n.input.len())
            .map(|i| cx.input_val(n, i))
            .collect::<R<_>>()?;
        if vals.iter().all(|v| v.s.is_some()) {
            let parts: Vec<SymVal> = vals.iter().filter_map(|v| v.s.clone()).collect();
            if let Some(s) = symbolic::concat(&parts) {
                let lens = parts
                    .iter()
                    .map(|p| DimExpr::constant(p.len() as i64))
                    .collect();
                return Ok(vec![Val::sym(s), Val::sym(sym_i64(lens))]);
            }
        }
        let mut xs = Vec::new();
        for i in 0..n.input.len() {
            let x = cx.input(n, i)?;
            // Zero-length pieces (shape computations with an empty part) add nothing.
            if cx.ty(x).num_elements().as_const() == Some(0) && n.input.len() > 1 {
                continue;
            }
            xs.push(x);
        }
        if xs.is_empty() {
            xs.push(cx.input(n, 0)?);
        }
        let r = cx.ty(xs[0]).rank();
        let a = norm_axis(cx, n.int_or("axis", 0), r)?;
        // ConcatTraining's second output: the length of each input along the axis.
        let lens: Vec<DimExpr> = xs.iter().map(|x| cx.ty(*x).shape[a].clone()).collect();
        let y = if xs.len() == 1 {
            xs[0]
        } else {
            cx.emit(Op::Concatenate(a as i64), &xs)?
        };
        Ok(vec![Val::t(y), Val::sym(sym_i64(lens))])
    }
}

/// The end of a slice along a dimension of size `n` from an ONNX index `v`. A symbolic end
/// that is not provably `<= n` (`wpe[:seq]` on a 512-row table) is taken as the exporter's
/// assumption `v <= n`: the importer records it as a shape assertion checked at run time and,
/// for a single symbol against a constant, as a range fact (`seq <= 512`), instead of the
/// clamped `min(v, n)` that ONNX's rule gives.
pub(super) fn slice_end(cx: &mut Cx, v: &DimExpr, n: &DimExpr) -> DimExpr {
    if v.as_const().is_none() && !cx.g.scope.compare(v, n).is_le() {
        if let (Some(s), Some(k)) = (v.as_symbol(), n.as_const()) {
            cx.g.scope.declare_range(s.name(), None, Some(k));
        }
        cx.g.assertions.push(ebb_ir::ShapeAssertion {
            lhs: v.clone(),
            rel: ebb_ir::Relation::Le,
            rhs: n.clone(),
            message: format!(
                "{}: slice end {v} must not exceed the dimension {n}",
                cx.node
            ),
        });
        return v.clone();
    }
    slice_bound(&cx.g.scope, v, n)
}

/// Symbolic start (or end) of a slice along a dimension of size `n` from an ONNX index `v`
/// (negative counts from the end; clamped to `[0, n]`).
fn slice_bound(scope: &SymbolScope, v: &DimExpr, n: &DimExpr) -> DimExpr {
    let big = i64::MAX / 4;
    match v.as_const() {
        Some(k) if k >= big => n.clone(),
        Some(k) if k <= -big => DimExpr::zero(),
        Some(k) if k < 0 => {
            let e = n.clone() + DimExpr::constant(k);
            if scope.compare(&e, &DimExpr::zero()).is_ge() {
                e
            } else {
                DimExpr::max(&e, &DimExpr::zero())
            }
        }
        _ => {
            if scope.compare(v, n).is_le() {
                v.clone()
            } else {
                v.min(n)
            }
        }
    }
}

struct Slice;

impl Lower for Slice {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let shape = input_shape(cx, n, 0)?;
        let r = shape.len();
        let (starts, ends, axes, steps) = if cx.opset() >= 10 || n.attr("starts").is_none() {
            let starts = cx.input_dims(n, 1)?;
            let ends = cx.input_dims(n, 2)?;
            let axes = if cx.opt_input(n, 3).is_some() {
                cx.input_ints(n, 3)?
            } else {
                (0..starts.len() as i64).collect()
            };
            let steps = if cx.opt_input(n, 4).is_some() {
                cx.input_ints(n, 4)?
            } else {
                vec![1; starts.len()]
            };
            (starts, ends, axes, steps)
        } else {
            let c = |v: Vec<i64>| v.into_iter().map(DimExpr::constant).collect::<Vec<_>>();
            let starts = c(n.ints("starts").unwrap_or_default());
            let ends = c(n.ints("ends").unwrap_or_default());
            let axes = n
                .ints("axes")
                .unwrap_or_else(|| (0..starts.len() as i64).collect());
            let steps = vec![1; starts.len()];
            (starts, ends, axes, steps)
        };
        if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
            return Err(cx.err("starts, ends, axes and steps differ in length"));
        }
        // Symbolic 1-D slices (shape computations).
        let v = cx.input_val(n, 0)?;
        if let Some(s) = &v.s {
            if r == 1 && starts.len() == 1 {
                if let (Some(a), Some(b)) = (starts[0].as_const(), ends[0].as_const()) {
                    if let Some(out) = symbolic::slice1(s, a, b, steps[0]) {
                        return Ok(vec![Val::sym(out)]);
                    }
                }
            }
        }
        let mut st: Vec<DimExpr> = vec![DimExpr::zero(); r];
        let mut li: Vec<DimExpr> = shape.clone();
        let mut sr: Vec<DimExpr> = vec![DimExpr::constant(1); r];
        for k in 0..starts.len() {
            let a = norm_axis(cx, axes[k], r)?;
            if steps[k] <= 0 {
                return Err(cx.err("Slice with a non-positive step is not supported"));
            }
            st[a] = slice_bound(&cx.g.scope, &starts[k], &shape[a]);
            li[a] = slice_end(cx, &ends[k], &shape[a]);
            sr[a] = DimExpr::constant(steps[k]);
        }
        let x = cx.input(n, 0)?;
        if st.iter().all(|d| d.is_zero()) && li == shape {
            return one(x);
        }
        let spec = SliceSpec {
            start: st,
            limit: li,
            strides: sr,
        };
        one(cx.emit(Op::Slice(spec), &[x])?)
    }
}

/// `SliceGrad(dY, shape, starts, ends, axes?, steps?)` (com.microsoft): zeros of `shape`
/// with `dY` written at the slice (unit steps), via `dynamic_update_slice`.
struct SliceGrad;

impl Lower for SliceGrad {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let dy = cx.input(n, 0)?;
        let shape = cx.input_dims(n, 1)?;
        let r = shape.len();
        let starts = cx.input_dims(n, 2)?;
        let axes = if cx.opt_input(n, 4).is_some() {
            cx.input_ints(n, 4)?
        } else {
            (0..starts.len() as i64).collect()
        };
        if cx.opt_input(n, 5).is_some() && cx.input_ints(n, 5)?.iter().any(|s| *s != 1) {
            return Err(cx.err("SliceGrad with non-unit steps is not supported"));
        }
        let mut st = vec![DimExpr::zero(); r];
        for (k, s) in starts.iter().enumerate() {
            let a = norm_axis(
                cx,
                *axes
                    .get(k)
                    .ok_or_else(|| cx.err("axes shorter than starts"))?,
                r,
            )?;
            st[a] = slice_bound(&cx.g.scope, s, &shape[a]);
        }
        let d = cx.ty(dy).dtype;
        let zeros = cx.full(d, 0.0, &shape)?;
        let mut ops = vec![zeros, dy];
        for s in &st {
            ops.push(cx.dim_scalar(s, DType::I64)?);
        }
        one(cx.emit(Op::DynamicUpdateSlice, &ops)?)
    }
}

struct Split;

impl Lower for Split {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let parts = n.int_or("num_outputs", n.output.len() as i64);
        split(cx, n, parts, true)
    }
}

/// Slices input 0 of `n` along `axis` into pieces of the sizes given by input 1 (a list, or
/// for `SplitToSequence` a scalar chunk size), the `split` attribute, or `parts` equal parts;
/// with `keep` false (`SplitToSequence` with `keepdims = 0` and no split) the axis is dropped.
fn split(cx: &mut Cx, n: &NodeProto, parts: i64, keep: bool) -> R<Vec<Val>> {
    let x = cx.input(n, 0)?;
    let shape = cx.ty(x).shape;
    let a = norm_axis(cx, n.int_or("axis", 0), shape.len())?;
    let d = shape[a].clone();
    let sizes: Vec<DimExpr> = if cx.opt_input(n, 1).is_some() {
        let v = cx.input_val(n, 1)?;
        let ds = cx.input_dims(n, 1)?;
        if v.s.as_ref().is_some_and(|s| s.shape.is_empty()) {
            // A scalar chunk size: as many chunks as fit, the last one possibly shorter.
            let c = ds[0]
                .as_const()
                .filter(|c| *c > 0)
                .ok_or_else(|| cx.err("the split size must be a positive constant"))?;
            let dk = d
                .as_const()
                .ok_or_else(|| cx.err("a scalar split size needs a static dimension"))?;
            (0..dk)
                .step_by(c as usize)
                .map(|o| DimExpr::constant(c.min(dk - o)))
                .collect()
        } else {
            ds
        }
    } else if let Some(s) = n.ints("split") {
        s.into_iter().map(DimExpr::constant).collect()
    } else {
        let each = exact_div(&d, &DimExpr::constant(parts))
            .ok_or_else(|| cx.err(format!("dimension {d} does not split evenly into {parts}")))?;
        vec![each; parts as usize]
    };
    let mut out = Vec::new();
    let mut off = DimExpr::zero();
    for s in sizes {
        let mut st = vec![DimExpr::zero(); shape.len()];
        let mut li = shape.clone();
        st[a] = off.clone();
        li[a] = off
            .checked_add(&s)
            .map_err(|_| cx.err("the split sizes overflow 64-bit integers"))?;
        off = li[a].clone();
        let spec = SliceSpec {
            start: st,
            limit: li,
            strides: vec![DimExpr::constant(1); shape.len()],
        };
        let mut piece = cx.emit(Op::Slice(spec), &[x])?;
        if !keep {
            let mut s = cx.ty(piece).shape;
            s.remove(a);
            piece = cx.reshape(piece, &s)?;
        }
        out.push(Val::t(piece));
    }
    Ok(out)
}

/// `SplitToSequence(input, split?)`: the pieces of [`split`] as a sequence value.
struct SplitToSequence;

impl Lower for SplitToSequence {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let keep = n.int_or("keepdims", 1) != 0 || cx.opt_input(n, 1).is_some();
        let parts = if cx.opt_input(n, 1).is_some() {
            0
        } else {
            let x = cx.input(n, 0)?;
            let shape = cx.ty(x).shape;
            let a = norm_axis(cx, n.int_or("axis", 0), shape.len())?;
            shape[a]
                .as_const()
                .ok_or_else(|| cx.err("SplitToSequence without split needs a static dimension"))?
        };
        let pieces = split(cx, n, parts, keep)?;
        Ok(vec![Val {
            seq: Some(Rc::new(pieces)),
            ..Default::default()
        }])
    }
}

/// `SequenceAt(seq, position)` with a position known at import time.
struct SequenceAt;

impl Lower for SequenceAt {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let s = cx.input_val(n, 0)?;
        let seq = s
            .seq
            .ok_or_else(|| cx.err("input 0 is not a sequence produced by SplitToSequence"))?;
        let p = cx.input_ints(n, 1)?;
        let p = *p.first().ok_or_else(|| cx.err("empty position"))?;
        let len = seq.len() as i64;
        let i = if p < 0 { p + len } else { p };
        if i < 0 || i >= len {
            return Err(cx.err(format!("position {p} out of range for a sequence of {len}")));
        }
        Ok(vec![seq[i as usize].clone()])
    }
}
