//! Import-time evaluation of integer shape computations on [`SymVal`]s: the elementwise
//! arithmetic, comparisons, `Where`, `Gather`, `Concat`, `Slice`, `Reshape`-like ops that
//! exporters emit between `Shape` and the shape operand of `Reshape`/`Expand`/... .
//!
//! Every function returns `None` when the result is not expressible (a tensor larger than
//! [`MAX_SYM`], a division that is not exact floor division, mixed element kinds); the caller
//! then lowers the op to graph ops instead.

use super::super::ctx::MAX_SYM;
use crate::sym::{self, Elems, Pred, SymVal};
use ebb_ir::{DType, DimExpr, Relation, SymbolScope};

fn numel(shape: &[i64]) -> i64 {
    shape.iter().product()
}

/// Numpy broadcast of two static shapes.
fn bshape(a: &[i64], b: &[i64]) -> Option<Vec<i64>> {
    let r = a.len().max(b.len());
    let mut out = Vec::with_capacity(r);
    for i in 0..r {
        let x = (i + a.len()).checked_sub(r).map(|j| a[j]).unwrap_or(1);
        let y = (i + b.len()).checked_sub(r).map(|j| b[j]).unwrap_or(1);
        out.push(if x == y || y == 1 {
            x
        } else if x == 1 {
            y
        } else {
            return None;
        });
    }
    Some(out)
}

/// The elements of `v` broadcast to `shape` (row-major).
fn expand<T: Clone>(v: &[T], from: &[i64], shape: &[i64]) -> Vec<T> {
    let n = numel(shape) as usize;
    let off = shape.len() - from.len();
    (0..n)
        .map(|flat| {
            let mut rem = flat as i64;
            let mut src = 0i64;
            let mut stride = 1i64;
            let mut idx = vec![0i64; shape.len()];
            for d in (0..shape.len()).rev() {
                idx[d] = rem % shape[d];
                rem /= shape[d];
            }
            for d in (0..from.len()).rev() {
                let i = if from[d] == 1 { 0 } else { idx[d + off] };
                src += i * stride;
                stride *= from[d];
            }
            v[src as usize].clone()
        })
        .collect()
}

/// Elementwise integer arithmetic (`add subtract multiply divide remainder maximum minimum`)
/// with numpy broadcasting.
pub fn binary(op: &str, a: &SymVal, b: &SymVal, scope: &SymbolScope) -> Option<SymVal> {
    let (x, y) = (a.ints()?, b.ints()?);
    let shape = bshape(&a.shape, &b.shape)?;
    if numel(&shape) as usize > MAX_SYM {
        return None;
    }
    let x = expand(x, &a.shape, &shape);
    let y = expand(y, &b.shape, &shape);
    let r = sym::binary(op, &x, &y, scope)?;
    Some(SymVal {
        dtype: a.dtype,
        shape,
        elems: Elems::Int(r),
    })
}

/// Elementwise comparison with numpy broadcasting.
pub fn compare(rel: Relation, a: &SymVal, b: &SymVal, scope: &SymbolScope) -> Option<SymVal> {
    let (x, y) = (a.ints()?, b.ints()?);
    let shape = bshape(&a.shape, &b.shape)?;
    let x = expand(x, &a.shape, &shape);
    let y = expand(y, &b.shape, &shape);
    let preds = x
        .iter()
        .zip(&y)
        .map(|(p, q)| {
            let c = Pred::Cmp(p.clone(), rel, q.clone());
            match c.decide(scope) {
                Some(b) => Pred::Const(b),
                None => c,
            }
        })
        .collect();
    Some(SymVal {
        dtype: DType::I1,
        shape,
        elems: Elems::Bool(preds),
    })
}

/// `Where(c, a, b)` when every predicate is decided.
pub fn select(c: &SymVal, a: &SymVal, b: &SymVal, scope: &SymbolScope) -> Option<SymVal> {
    let Elems::Bool(p) = &c.elems else {
        return None;
    };
    let (x, y) = (a.ints()?, b.ints()?);
    let shape = bshape(&bshape(&a.shape, &b.shape)?, &c.shape)?;
    let p = expand(p, &c.shape, &shape);
    let x = expand(x, &a.shape, &shape);
    let y = expand(y, &b.shape, &shape);
    let r: Option<Vec<DimExpr>> = p
        .iter()
        .zip(x.into_iter().zip(y))
        .map(|(p, (x, y))| p.decide(scope).map(|t| if t { x } else { y }))
        .collect();
    Some(SymVal {
        dtype: a.dtype,
        shape,
        elems: Elems::Int(r?),
    })
}

/// `Gather` along `axis` with constant indices (negative indices count from the end).
pub fn gather(x: &SymVal, idx: &[i64], idx_shape: &[i64], axis: usize) -> Option<SymVal> {
    let vals = x.ints()?;
    let outer: i64 = x.shape[..axis].iter().product();
    let inner: i64 = x.shape[axis + 1..].iter().product();
    let n = *x.shape.get(axis)?;
    let mut out = Vec::new();
    for o in 0..outer {
        for &i in idx {
            let i = if i < 0 { i + n } else { i };
            if i < 0 || i >= n {
                return None;
            }
            for k in 0..inner {
                out.push(vals[((o * n + i) * inner + k) as usize].clone());
            }
        }
    }
    let mut shape = x.shape[..axis].to_vec();
    shape.extend_from_slice(idx_shape);
    shape.extend_from_slice(&x.shape[axis + 1..]);
    Some(SymVal {
        dtype: x.dtype,
        shape,
        elems: Elems::Int(out),
    })
}

/// `Concat` of rank-1 values (the only rank exporters use for shapes).
pub fn concat(parts: &[SymVal]) -> Option<SymVal> {
    let mut out = Vec::new();
    for p in parts {
        if p.shape.len() != 1 {
            return None;
        }
        out.extend_from_slice(p.ints()?);
    }
    if out.len() > MAX_SYM {
        return None;
    }
    Some(SymVal {
        dtype: parts.first()?.dtype,
        shape: vec![out.len() as i64],
        elems: Elems::Int(out),
    })
}

/// `Slice` of a rank-1 value with constant start/end/step (ONNX clamping rules).
pub fn slice1(x: &SymVal, start: i64, end: i64, step: i64) -> Option<SymVal> {
    let v = x.ints()?;
    if x.shape.len() != 1 || step == 0 {
        return None;
    }
    let n = v.len() as i64;
    let idx = slice_indices(n, start, end, step);
    let out: Vec<DimExpr> = idx.iter().map(|&i| v[i as usize].clone()).collect();
    Some(SymVal {
        dtype: x.dtype,
        shape: vec![out.len() as i64],
        elems: Elems::Int(out),
    })
}

/// The indices `Slice` selects from a dimension of size `n` (ONNX Slice: negative starts/ends
/// add `n`, then clamp to `[0, n]` for positive steps and `[-1, n-1]` for negative ones).
pub fn slice_indices(n: i64, start: i64, end: i64, step: i64) -> Vec<i64> {
    let fix = |v: i64| if v < 0 { v.saturating_add(n) } else { v };
    let (s, e) = (fix(start), fix(end));
    let mut out = Vec::new();
    if step > 0 {
        let (s, e) = (s.clamp(0, n), e.clamp(0, n));
        let mut i = s;
        while i < e {
            out.push(i);
            i = i.saturating_add(step);
        }
    } else {
        let (s, e) = (s.clamp(-1, n - 1), e.clamp(-1, n - 1));
        let mut i = s;
        while i > e {
            out.push(i);
            i = i.saturating_add(step);
        }
    }
    out
}

/// The same elements under a new static shape (`Reshape`, `Unsqueeze`, `Squeeze`,
/// `Flatten`).
pub fn reshape(x: &SymVal, shape: Vec<i64>) -> Option<SymVal> {
    if numel(&shape) != x.len() as i64 {
        return None;
    }
    Some(SymVal { shape, ..x.clone() })
}

/// `Expand`/broadcast of a small value to a static shape.
pub fn broadcast(x: &SymVal, shape: &[i64]) -> Option<SymVal> {
    let s = bshape(&x.shape, shape)?;
    if numel(&s) as usize > MAX_SYM {
        return None;
    }
    let elems = match &x.elems {
        Elems::Int(v) => Elems::Int(expand(v, &x.shape, &s)),
        Elems::Bool(v) => Elems::Bool(expand(v, &x.shape, &s)),
    };
    Some(SymVal {
        dtype: x.dtype,
        shape: s,
        elems,
    })
}
