//! Shape rules of the data-movement ops: `broadcast_in_dim`, `reshape`, `transpose`,
//! `concatenate`, `slice`, `dynamic_slice`, `pad` (StableHLO spec, each op's constraints).

use super::{axis, dimerr, fmt_shape, invalid, nth, one, Inferred};
use crate::dim::{DimError, DimExpr};
use crate::op::{BroadcastSpec, OpKind, PadSpec, SliceSpec};
use crate::types::TensorType;

/// `broadcast_in_dim` (spec C1–C6): each operand dimension is 1 or equals its result dimension.
pub(super) fn broadcast_in_dim(
    op: OpKind,
    b: &BroadcastSpec,
    operands: &[&TensorType],
) -> Inferred {
    let x = nth(op, operands, 0)?;
    let shape = b.shape.clone();
    if b.dims.len() != x.rank() {
        return Err(invalid(
            op,
            "broadcast_dimensions length differs from operand rank",
        ));
    }
    for (i, &d) in b.dims.iter().enumerate() {
        let d = axis(op, d, shape.len())?;
        let od = &x.shape[i];
        if od.as_const() != Some(1) && *od != shape[d] {
            return Err(invalid(
                op,
                format!(
                    "operand dim {i} ({od}) is neither 1 nor result dim {d} ({})",
                    shape[d]
                ),
            ));
        }
    }
    one(TensorType::new(x.dtype, shape))
}

/// `reshape` (spec C1): the element count is kept.
pub(super) fn reshape(op: OpKind, shape: &[DimExpr], operands: &[&TensorType]) -> Inferred {
    let x = nth(op, operands, 0)?;
    let r = TensorType::new(x.dtype, shape.to_vec());
    let dim = dimerr(op);
    if r.checked_num_elements().map_err(&dim)? != x.checked_num_elements().map_err(&dim)? {
        return Err(invalid(
            op,
            format!(
                "element count changes: {} -> {}",
                fmt_shape(&x.shape),
                fmt_shape(&r.shape)
            ),
        ));
    }
    one(r)
}

/// `transpose` (spec C1–C4).
pub(super) fn transpose(op: OpKind, perm: &[i64], operands: &[&TensorType]) -> Inferred {
    let x = nth(op, operands, 0)?;
    if perm.len() != x.rank() {
        return Err(invalid(op, "permutation length differs from rank"));
    }
    let mut seen = vec![false; perm.len()];
    for &p in perm {
        if axis(op, p, x.rank()).is_ok_and(|p| std::mem::replace(&mut seen[p], true)) {
            return Err(invalid(
                op,
                format!(
                    "permutation {perm:?} names dimension {p} twice (each of 0..{} once)",
                    x.rank()
                ),
            ));
        }
    }
    let s = perm
        .iter()
        .map(|&p| axis(op, p, x.rank()).map(|p| x.shape[p].clone()))
        .collect::<Result<_, _>>()?;
    one(TensorType::new(x.dtype, s))
}

/// `concatenate` (spec C1–C6): sizes add up along `dimension`.
pub(super) fn concatenate(op: OpKind, dimension: i64, operands: &[&TensorType]) -> Inferred {
    let x = nth(op, operands, 0)?;
    let d = axis(op, dimension, x.rank())?;
    let mut s = x.shape.clone();
    for (k, o) in operands.iter().enumerate().skip(1) {
        if o.rank() != x.rank() || o.dtype != x.dtype {
            return Err(invalid(
                op,
                format!("operand {k} ({o}) differs in rank or element type from operand 0 ({x})"),
            ));
        }
        if let Some(j) = (0..x.rank()).find(|&j| j != d && o.shape[j] != x.shape[j]) {
            return Err(invalid(
                op,
                format!(
                    "operand {k} ({o}) differs from operand 0 ({x}) in dimension {j}, which is \
                     not the concatenated dimension {d}"
                ),
            ));
        }
        s[d] = s[d].checked_add(&o.shape[d]).map_err(dimerr(op))?;
    }
    one(TensorType::new(x.dtype, s))
}

/// `slice` (spec C1–C5): `ceil((limit - start) / stride)` per dimension.
pub(super) fn slice(op: OpKind, sl: &SliceSpec, operands: &[&TensorType]) -> Inferred {
    let x = nth(op, operands, 0)?;
    let (st, li, sr) = (&sl.start, &sl.limit, &sl.strides);
    if st.len() != x.rank() || li.len() != x.rank() || sr.len() != x.rank() {
        return Err(invalid(op, "start/limit/stride lengths differ from rank"));
    }
    let mut s = Vec::new();
    for i in 0..x.rank() {
        let k = sr[i]
            .as_const()
            .ok_or_else(|| invalid(op, "symbolic stride"))?;
        if k < 1 {
            return Err(invalid(
                op,
                format!("dimension {i}: stride {k} (a stride is at least 1)"),
            ));
        }
        let k1 = k
            .checked_sub(1)
            .ok_or_else(|| invalid(op, "stride out of range"))?;
        // 0 <= start <= limit <= size, where the difference is a known constant (symbolic
        // bounds are checked at run time, with the bindings).
        let below = |a: &DimExpr, b: &DimExpr| {
            b.checked_sub(a)
                .ok()
                .and_then(|d| d.as_const())
                .is_some_and(|d| d < 0)
        };
        let zero = DimExpr::constant(0);
        if below(&zero, &st[i]) || below(&st[i], &li[i]) || below(&li[i], &x.shape[i]) {
            return Err(invalid(
                op,
                format!(
                    "dimension {i}: start {}, limit {} do not slice a dimension of size {} \
                     (0 <= start <= limit <= size)",
                    st[i], li[i], x.shape[i]
                ),
            ));
        }
        let n = li[i]
            .checked_sub(&st[i])
            .and_then(|e| e.checked_add(&DimExpr::constant(k1)))
            .and_then(|e| e.floor_div(k))
            .map_err(dimerr(op))?;
        s.push(n);
    }
    one(TensorType::new(x.dtype, s))
}

/// `dynamic_slice` (spec C1–C5): the result has `slice_sizes`.
pub(super) fn dynamic_slice(op: OpKind, sizes: &[DimExpr], operands: &[&TensorType]) -> Inferred {
    let x = nth(op, operands, 0)?;
    if sizes.len() != x.rank() || operands.len() != 1 + x.rank() {
        return Err(invalid(
            op,
            "slice_sizes/start index count differs from rank",
        ));
    }
    one(TensorType::new(x.dtype, sizes.to_vec()))
}

/// `pad` (spec C1–C4): `d + low + high + (d - 1) * interior` per dimension.
pub(super) fn pad(op: OpKind, p: &PadSpec, operands: &[&TensorType]) -> Inferred {
    let x = nth(op, operands, 0)?;
    let (lo, hi, it) = (&p.low, &p.high, &p.interior);
    if lo.len() != x.rank() || hi.len() != x.rank() || it.len() != x.rank() {
        return Err(invalid(op, "padding lengths differ from rank"));
    }
    let s = (0..x.rank())
        .map(|i| {
            let d = &x.shape[i];
            let edges = lo[i].checked_add(hi[i]).ok_or(DimError::Overflow)?;
            d.checked_add(&DimExpr::constant(edges))?
                .checked_add(&d.checked_sub(&DimExpr::constant(1))?.checked_scale(it[i])?)
        })
        .collect::<Result<_, DimError>>()
        .map_err(dimerr(op))?;
    one(TensorType::new(x.dtype, s))
}
