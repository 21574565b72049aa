//! Shape rules of the reductions: `reduce`, `reduce_window`, and the window arithmetic that
//! `convolution` shares (StableHLO spec, `reduce_window` C15 / `convolution` C25).

use super::{axis, dimerr, invalid, Inferred, ShapeError};
use crate::dim::{DimError, DimExpr};
use crate::op::{OpKind, Window};
use crate::types::{Shape, TensorType};

/// `reduce` (spec C1–C8): inputs followed by as many init values; the reduced dimensions are
/// dropped, each result takes its init value's element type.
pub(super) fn reduce(op: OpKind, dims: &[i64], operands: &[&TensorType]) -> Inferred {
    let n = operands.len() / 2;
    if n == 0 || !operands.len().is_multiple_of(2) {
        return Err(invalid(
            op,
            "expects inputs followed by as many init values",
        ));
    }
    let x = operands[0];
    for &d in dims {
        axis(op, d, x.rank())?;
    }
    let s: Shape = (0..x.rank())
        .filter(|i| !dims.contains(&(*i as i64)))
        .map(|i| x.shape[i].clone())
        .collect();
    Ok(Some(
        (0..n)
            .map(|i| TensorType::new(operands[n + i].dtype, s.clone()))
            .collect(),
    ))
}

/// `reduce_window` (spec C1–C16).
pub(super) fn reduce_window(op: OpKind, w: &Window, operands: &[&TensorType]) -> Inferred {
    let n = operands.len() / 2;
    if n == 0 || !operands.len().is_multiple_of(2) {
        return Err(invalid(
            op,
            "expects inputs followed by as many init values",
        ));
    }
    let x = operands[0];
    let s = window_shape(op, w, &x.shape, None)?;
    Ok(Some(
        (0..n)
            .map(|i| TensorType::new(operands[n + i].dtype, s.clone()))
            .collect(),
    ))
}

/// Result sizes of a window op over `input`: `(dilated_padded - dilated_window) floordiv
/// stride + 1` per windowed dimension (StableHLO spec, `reduce_window` C15 / `convolution` C25
/// form). `only` restricts the window to those dimensions of `input` (convolution's spatial
/// dimensions); the others keep their size.
pub(super) fn window_shape(
    op: OpKind,
    w: &Window,
    input: &Shape,
    only: Option<&[usize]>,
) -> Result<Shape, ShapeError> {
    let idx: Vec<usize> = only
        .map(|o| o.to_vec())
        .unwrap_or_else(|| (0..input.len()).collect());
    let n = idx.len();
    if w.dimensions.len() != n
        || w.strides.len() != n
        || w.base_dilations.len() != n
        || w.window_dilations.len() != n
        || w.padding.len() != n
    {
        return Err(invalid(
            op,
            "window attribute lengths differ from the number of window dimensions",
        ));
    }
    let mut out = input.clone();
    for (j, &i) in idx.iter().enumerate() {
        let d = input
            .get(i)
            .cloned()
            .ok_or_else(|| invalid(op, "window dimension out of range"))?;
        let (lo, hi) = w.padding[j];
        if w.strides[j] <= 0 {
            return Err(invalid(op, "non-positive window stride"));
        }
        let of = DimError::Overflow;
        let one_ = DimExpr::constant(1);
        let dw = (w.dimensions[j].checked_sub(1))
            .and_then(|x| x.checked_mul(w.window_dilations[j]))
            .and_then(|x| x.checked_add(1))
            .ok_or(of.clone())
            .map_err(dimerr(op))?;
        let edges = lo.checked_add(hi).ok_or(of).map_err(dimerr(op))?;
        out[i] = d
            .checked_sub(&one_)
            .and_then(|x| x.checked_scale(w.base_dilations[j]))
            .and_then(|x| x.checked_add(&one_))
            .and_then(|x| x.checked_add(&DimExpr::constant(edges)))
            .and_then(|x| x.checked_sub(&DimExpr::constant(dw)))
            .and_then(|x| x.floor_div(w.strides[j]))
            .and_then(|x| x.checked_add(&one_))
            .map_err(dimerr(op))?;
    }
    Ok(out)
}
