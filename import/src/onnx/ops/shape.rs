//! Shape ops: `Shape`, `Size`, `Reshape`, `Flatten`, `Transpose`, `Unsqueeze`, `Squeeze`,
//! `Expand`.
//!
//! Shape operands (`Reshape`'s shape, axes inputs) must be known at import time: constants or
//! integer computations on `Shape` outputs, which are evaluated symbolically. `Reshape`'s `-1`
//! is the exact symbolic quotient of the element counts ([`exact_div`]).

use super::super::ctx::{norm_axis, Cx, NodeAttrs, Val, R};
use super::super::proto::NodeProto;
use super::{one, symbolic, Lower};
use crate::sym::{Elems, SymVal};
use ebb_ir::{DType, DimExpr};

/// The ai.onnx ops this module lowers, by op type.
pub(super) static OPS: &[(&str, &dyn Lower)] = &[
    ("Shape", &Shape),
    ("Size", &Size),
    ("Reshape", &Reshape),
    ("Flatten", &Flatten),
    ("Transpose", &Transpose),
    ("Unsqueeze", &Unsqueeze),
    ("Squeeze", &Squeeze),
    ("Expand", &Expand),
];

/// `a / b` as an exact symbolic quotient: `b` a positive constant dividing `a`, or a
/// monomial in symbols whose powers divide every term of `a`. `None` when not exact.
pub fn exact_div(a: &DimExpr, b: &DimExpr) -> Option<DimExpr> {
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

pub(super) fn sym_i64(dims: Vec<DimExpr>) -> SymVal {
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
pub(super) fn input_shape(cx: &Cx, n: &NodeProto, i: usize) -> R<Vec<DimExpr>> {
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
        let p = product(cx, &shape)?;
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
        let total = product(cx, &src)?;
        if let Some(i) = infer {
            let rest = product(cx, &out)?;
            out[i] = exact_div(&total, &rest).ok_or_else(|| {
                cx.err(format!(
                    "cannot infer the -1 entry: {total} elements are not an exact multiple of {rest}"
                ))
            })?;
        }
        reshape_val(cx, n, 0, out)
    }
}

/// The product of `dims`, an error naming them when a coefficient overflows `i64`.
pub(super) fn product(cx: &Cx, dims: &[DimExpr]) -> R<DimExpr> {
    dims.iter()
        .try_fold(DimExpr::constant(1), |a, d| a.checked_mul(d))
        .map_err(|_| {
            let shown: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            cx.err(format!(
                "the product of the dimensions [{}] overflows 64-bit integers",
                shown.join(", ")
            ))
        })
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

pub(super) fn static_of(shape: &[DimExpr]) -> Option<Vec<i64>> {
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
        let shape = vec![
            product(cx, &s[..a as usize])?,
            product(cx, &s[a as usize..])?,
        ];
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
