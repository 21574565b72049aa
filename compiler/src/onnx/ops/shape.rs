//! Shape and data-movement ops: `Shape`, `Size`, `Reshape`, `Flatten`, `Transpose`,
//! `Unsqueeze`, `Squeeze`, `Expand`, `Concat`, `Slice`, `Split`, `Constant`,
//! `ConstantOfShape`, `Range`, `Trilu`.
//!
//! Shape operands (`Reshape`'s shape, `Slice`'s starts/ends, axes inputs) must be known at
//! import time: constants or integer computations on `Shape` outputs, which are evaluated
//! symbolically. `Reshape`'s `-1` is the exact symbolic quotient of the element counts
//! ([`exact_div`]).

use super::super::ctx::{norm_axis, sym_of_literal, Cx, NodeAttrs, Val, R};
use super::super::proto::{data_type, NodeProto, TensorProto};
use super::super::tensor::{decode, scalar_literal};
use super::{one, symbolic, Lower};
use crate::stablehlo::sym::{Elems, SymVal};
use ebb_ir::op::Literal;
use ebb_ir::{Attr, Attrs, DType, DimExpr, OpKind, SymbolScope, TensorType};
use std::rc::Rc;

pub(super) fn lookup(op: &str) -> Option<&'static dyn Lower> {
    Some(match op {
        "Shape" => &Shape,
        "Size" => &Size,
        "Reshape" => &Reshape,
        "Flatten" => &Flatten,
        "Transpose" => &Transpose,
        "Unsqueeze" => &Unsqueeze,
        "Squeeze" => &Squeeze,
        "Expand" => &Expand,
        "Concat" => &Concat,
        "Slice" => &Slice,
        "Split" => &Split,
        "Constant" => &Constant,
        "ConstantOfShape" => &ConstantOfShape,
        "Range" => &Range,
        "Trilu" => &Trilu,
        "SplitToSequence" => &SplitToSequence,
        "SequenceAt" => &SequenceAt,
        _ => return None,
    })
}

pub(super) fn lookup_ms(op: &str) -> Option<&'static dyn Lower> {
    Some(match op {
        "ConcatTraining" => &Concat,
        "SliceGrad" => &SliceGrad,
        _ => return None,
    })
}

/// `a / b` as an exact symbolic quotient: `b` a positive constant dividing `a`, or a
/// monomial in symbols whose powers divide every term of `a`. `None` when not exact.
pub(crate) fn exact_div(a: &DimExpr, b: &DimExpr) -> Option<DimExpr> {
    if let Some(k) = b.as_const() {
        if k <= 0 {
            return None;
        }
        let q = a.floor_div(k).ok()?;
        return (q.clone() * DimExpr::constant(k) == *a).then_some(q);
    }
    let s = b.symbols().into_iter().next()?;
    let cb = b.poly_coeffs_in(&s)?;
    let ca = a.poly_coeffs_in(&s)?;
    let d = cb.len() - 1;
    if cb[..d].iter().any(|c| !c.is_zero()) || ca.len() <= d && !a.is_zero() {
        return None;
    }
    if ca[..d.min(ca.len())].iter().any(|c| !c.is_zero()) {
        return None;
    }
    let sym = DimExpr::symbol(&s);
    let mut q = DimExpr::zero();
    for (j, c) in ca.iter().enumerate().skip(d) {
        let qc = exact_div(c, &cb[d])?;
        let mut term = qc;
        for _ in 0..(j - d) {
            term *= sym.clone();
        }
        q += term;
    }
    (q.clone() * b.clone() == *a).then_some(q)
}

fn sym_i64(dims: Vec<DimExpr>) -> SymVal {
    SymVal {
        dtype: DType::I64,
        shape: vec![dims.len() as i64],
        elems: Elems::Int(dims),
    }
}

struct Shape;

impl Lower for Shape {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let shape = input_shape(cx, n, 0)?;
        let r = shape.len() as i64;
        let clamp = |v: i64| if v < 0 { (v + r).max(0) } else { v.min(r) } as usize;
        let s = clamp(n.int_or("start", 0));
        let e = clamp(n.int_or("end", r));
        Ok(vec![Val::sym(sym_i64(shape[s..e.max(s)].to_vec()))])
    }
}

/// The shape of input `i` without materializing it.
fn input_shape(cx: &Cx, n: &NodeProto, i: usize) -> R<Vec<DimExpr>> {
    let v = cx.input_val(n, i)?;
    Ok(match (&v.t, &v.lit, &v.s) {
        (Some(t), _, _) => cx.ty(*t).shape,
        (None, Some(l), _) => l.0.shape.clone(),
        (None, None, Some(s)) => s.shape.iter().map(|&d| DimExpr::constant(d)).collect(),
        _ => return Err(cx.err("input without a type")),
    })
}

struct Size;

impl Lower for Size {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let shape = input_shape(cx, n, 0)?;
        let p = shape
            .iter()
            .fold(DimExpr::constant(1), |a, d| a * d.clone());
        Ok(vec![Val::sym(SymVal::scalar(DType::I64, p))])
    }
}

struct Reshape;

impl Lower for Reshape {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let src = input_shape(cx, n, 0)?;
        let target = cx.input_dims(n, 1)?;
        let allow_zero = n.int_or("allowzero", 0) != 0;
        let mut out = Vec::with_capacity(target.len());
        let mut infer = None;
        for (i, d) in target.iter().enumerate() {
            match d.as_const() {
                Some(0) if !allow_zero => out.push(src.get(i).cloned().ok_or_else(|| {
                    cx.err(format!(
                        "shape entry {i} is 0 but the input has rank {}",
                        src.len()
                    ))
                })?),
                Some(-1) => {
                    if infer.is_some() {
                        return Err(cx.err("more than one -1 in the target shape"));
                    }
                    infer = Some(i);
                    out.push(DimExpr::constant(1));
                }
                Some(k) if k < -1 => return Err(cx.err(format!("invalid shape entry {k}"))),
                _ => out.push(d.clone()),
            }
        }
        let total = src.iter().fold(DimExpr::constant(1), |a, d| a * d.clone());
        if let Some(i) = infer {
            let rest = out.iter().fold(DimExpr::constant(1), |a, d| a * d.clone());
            out[i] = exact_div(&total, &rest).ok_or_else(|| {
                cx.err(format!(
                    "cannot infer the -1 entry: {total} elements are not an exact multiple of {rest}"
                ))
            })?;
        }
        reshape_val(cx, n, 0, out)
    }
}

/// Reshapes input `i` to `shape`, symbolically when its elements are known.
fn reshape_val(cx: &mut Cx, n: &NodeProto, i: usize, shape: Vec<DimExpr>) -> R<Vec<Val>> {
    let v = cx.input_val(n, i)?;
    if let (Some(s), Some(st)) = (&v.s, static_of(&shape)) {
        if let Some(r) = symbolic::reshape(s, st) {
            return Ok(vec![Val::sym(r)]);
        }
    }
    let x = cx.input(n, i)?;
    one(cx.reshape(x, &shape)?)
}

fn static_of(shape: &[DimExpr]) -> Option<Vec<i64>> {
    shape.iter().map(|d| d.as_const()).collect()
}

struct Flatten;

impl Lower for Flatten {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let s = input_shape(cx, n, 0)?;
        let r = s.len() as i64;
        let a = n.int_or("axis", 1);
        let a = if a < 0 { a + r } else { a };
        if a < 0 || a > r {
            return Err(cx.err(format!("axis {a} out of range for rank {r}")));
        }
        let p = |ds: &[DimExpr]| ds.iter().fold(DimExpr::constant(1), |x, d| x * d.clone());
        let shape = vec![p(&s[..a as usize]), p(&s[a as usize..])];
        reshape_val(cx, n, 0, shape)
    }
}

struct Transpose;

impl Lower for Transpose {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        let r = cx.ty(x).rank() as i64;
        let perm = n.ints("perm").unwrap_or_else(|| (0..r).rev().collect());
        one(cx.transpose(x, &perm)?)
    }
}

/// The `axes` of `Unsqueeze`/`Squeeze`/reductions: input `i` (newer opsets) or attribute.
pub(crate) fn axes_of(cx: &Cx, n: &NodeProto, i: usize) -> R<Option<Vec<i64>>> {
    if cx.opt_input(n, i).is_some() {
        return Ok(Some(cx.input_ints(n, i)?));
    }
    Ok(n.ints("axes"))
}

struct Unsqueeze;

impl Lower for Unsqueeze {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let s = input_shape(cx, n, 0)?;
        let axes = axes_of(cx, n, 1)?.ok_or_else(|| cx.err("Unsqueeze without axes"))?;
        let r = s.len() + axes.len();
        let mut ax: Vec<usize> = axes
            .iter()
            .map(|&a| norm_axis(cx, a, r))
            .collect::<R<_>>()?;
        ax.sort_unstable();
        let mut out = Vec::with_capacity(r);
        let mut it = s.into_iter();
        for i in 0..r {
            if ax.contains(&i) {
                out.push(DimExpr::constant(1));
            } else {
                out.push(it.next().ok_or_else(|| cx.err("duplicate axes"))?);
            }
        }
        reshape_val(cx, n, 0, out)
    }
}

struct Squeeze;

impl Lower for Squeeze {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let s = input_shape(cx, n, 0)?;
        let ax: Vec<usize> = match axes_of(cx, n, 1)? {
            Some(a) => a
                .iter()
                .map(|&a| norm_axis(cx, a, s.len()))
                .collect::<R<_>>()?,
            None => (0..s.len())
                .filter(|&i| s[i].as_const() == Some(1))
                .collect(),
        };
        for &a in &ax {
            if s[a].as_const() != Some(1) {
                return Err(cx.err(format!("cannot squeeze dimension {a} of size {}", s[a])));
            }
        }
        let out = (0..s.len())
            .filter(|i| !ax.contains(i))
            .map(|i| s[i].clone())
            .collect();
        reshape_val(cx, n, 0, out)
    }
}

struct Expand;

impl Lower for Expand {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let s = input_shape(cx, n, 0)?;
        let target = cx.input_dims(n, 1)?;
        let out = cx.broadcast_shape(&s, &target)?;
        let v = cx.input_val(n, 0)?;
        if let (Some(sv), Some(st)) = (&v.s, static_of(&out)) {
            if let Some(r) = symbolic::broadcast(sv, &st) {
                return Ok(vec![Val::sym(r)]);
            }
        }
        let x = cx.input(n, 0)?;
        one(cx.broadcast_to(x, &out)?)
    }
}

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
            let mut at = Attrs::new();
            at.insert("dimension".into(), Attr::I64(a as i64));
            cx.emit(OpKind::Concatenate, at, &xs)?
        };
        Ok(vec![Val::t(y), Val::sym(sym_i64(lens))])
    }
}

/// The end of a slice along a dimension of size `n` from an ONNX index `v`. A symbolic end
/// that is not provably `<= n` (`wpe[:seq]` on a 512-row table) is taken as the exporter's
/// assumption `v <= n`: the importer records it as a shape assertion checked at run time and,
/// for a single symbol against a constant, as a range fact (`seq <= 512`), instead of the
/// clamped `min(v, n)` that ONNX's rule gives.
fn slice_end(cx: &mut Cx, v: &DimExpr, n: &DimExpr) -> DimExpr {
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
        let mut at = Attrs::new();
        at.insert("start_indices".into(), Attr::Dims(st));
        at.insert("limit_indices".into(), Attr::Dims(li));
        at.insert("strides".into(), Attr::Dims(sr));
        one(cx.emit(OpKind::Slice, at, &[x])?)
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
        one(cx.emit(OpKind::DynamicUpdateSlice, Attrs::new(), &ops)?)
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
        li[a] = off.clone() + s.clone();
        off += s;
        let mut at = Attrs::new();
        at.insert("start_indices".into(), Attr::Dims(st));
        at.insert("limit_indices".into(), Attr::Dims(li));
        at.insert(
            "strides".into(),
            Attr::Dims(vec![DimExpr::constant(1); shape.len()]),
        );
        let mut piece = cx.emit(OpKind::Slice, at, &[x])?;
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

/// A literal value as a [`Val`] (symbolic too when it is a small integer tensor).
pub(crate) fn literal_val(ty: TensorType, lit: Literal) -> Val {
    let s = sym_of_literal(&ty, &lit);
    Val {
        t: None,
        s,
        lit: Some(Rc::new((ty, lit))),
        seq: None,
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
        let _ = data_type::FLOAT;
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
            let io = cx.binary_scalar(OpKind::Multiply, io, d)?;
            return one(cx.binary_scalar(OpKind::Add, io, s)?);
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
        let span = if dk > 0 {
            l.clone() - s.clone() + DimExpr::constant(dk - 1)
        } else {
            s.clone() - l.clone() + DimExpr::constant(-dk - 1)
        };
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
                    .map(|i| s.clone() + DimExpr::constant(i * dk))
                    .collect();
                let mut sv = sym_i64(v);
                sv.dtype = dtype;
                return Ok(vec![Val::sym(sv)]);
            }
        }
        let io = cx.iota(dtype, &[len], 0)?;
        let io = if dk != 1 {
            cx.binary_scalar(OpKind::Multiply, io, dk as f64)?
        } else {
            io
        };
        if s.is_zero() {
            return one(io);
        }
        let sv = cx.dim_scalar(s, dtype)?;
        one(cx.binary(OpKind::Add, io, sv)?)
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
        let ik = cx.binary_scalar(OpKind::Add, i, k as f64)?;
        // upper: j >= i + k; lower: j <= i + k
        let mask = cx.compare(if upper { "GE" } else { "LE" }, j, ik)?;
        let zero = cx.scalar(t.dtype, 0.0);
        one(cx.select(mask, x, zero)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_division_of_symbolic_products() {
        let b = DimExpr::sym("B");
        let s = DimExpr::sym("S");
        let bs64 = b.clone() * s.clone() * DimExpr::constant(64);
        assert_eq!(
            exact_div(&bs64, &DimExpr::constant(64)),
            Some(b.clone() * s.clone())
        );
        assert_eq!(
            exact_div(&bs64, &(s.clone() * DimExpr::constant(64))),
            Some(b.clone())
        );
        assert_eq!(exact_div(&bs64, &DimExpr::constant(128)), None);
        assert_eq!(exact_div(&(b.clone() + DimExpr::constant(1)), &b), None);
    }
}
