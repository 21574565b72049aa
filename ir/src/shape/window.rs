//! Shape rules of the reductions: `reduce`, `reduce_window`, and the window arithmetic that
//! `convolution` shares (StableHLO spec, `reduce_window` C15 / `convolution` C25).

use super::{axis, dimerr, invalid, Inferred, ShapeError};
use crate::dim::DimExpr;
use crate::graph::Graph;
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

/// The body of a `reduce` or `reduce_window` over `n` inputs (spec `reduce` C6, `reduce_window`
/// C13): it takes `2n` scalars and returns `n` scalars, each of its init value's element type.
/// A missing region (a graph built without one) is left to the region-count check.
pub(super) fn check_body(
    op: OpKind,
    operands: &[&TensorType],
    regions: &[Graph],
) -> Result<(), ShapeError> {
    let Some(body) = regions.first() else {
        return Ok(());
    };
    let n = operands.len() / 2;
    let (ins, outs) = (body.inputs().len(), body.outputs().len());
    if ins != 2 * n || outs != n {
        return Err(invalid(
            op,
            format!(
                "its body takes {ins} values and returns {outs}; over {n} input(s) it must take \
                 {} scalars and return {n}",
                2 * n
            ),
        ));
    }
    for (i, v) in body.outputs().iter().enumerate() {
        let t = body.value_type(*v);
        let init = operands[n + i];
        if t.rank() != 0 || t.dtype != init.dtype {
            return Err(invalid(
                op,
                format!(
                    "its body returns {t} as value {i}; it must return a scalar of the init \
                     value's type {}",
                    init.dtype
                ),
            ));
        }
    }
    Ok(())
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
        let (lo, hi) = &w.padding[j];
        if w.strides[j] <= 0 {
            return Err(invalid(op, "non-positive window stride"));
        }
        out[i] = window_out(
            op,
            &d,
            &w.dimensions[j],
            w.strides[j],
            w.base_dilations[j],
            w.window_dilations[j],
            (lo, hi),
        )?;
    }
    Ok(out)
}

/// The output size along one window dimension of input size `d` and window size `k` (both
/// may be symbolic; a convolution's weight gradient has the activation as its kernel):
/// `floor(((d − 1)·base_dilation + 1 + lo + hi − ((k − 1)·window_dilation + 1)) / stride) + 1`
/// (StableHLO spec, `reduce_window` C15 and `convolution` C23, with the dilated and padded
/// sizes spelled out). Padding may be symbolic (`reduce_window`'s from
/// `dynamic_reduce_window`).
pub(super) fn window_out(
    op: OpKind,
    d: &DimExpr,
    k: &DimExpr,
    stride: i64,
    base_dilation: i64,
    window_dilation: i64,
    (lo, hi): (&DimExpr, &DimExpr),
) -> Result<DimExpr, ShapeError> {
    if stride <= 0 {
        return Err(invalid(op, "non-positive window stride"));
    }
    let one_ = DimExpr::constant(1);
    let dw = k
        .checked_sub(&one_)
        .and_then(|x| x.checked_scale(window_dilation))
        .and_then(|x| x.checked_add(&one_))
        .map_err(dimerr(op))?;
    let edges = lo.checked_add(hi).map_err(dimerr(op))?;
    d.checked_sub(&one_)
        .and_then(|x| x.checked_scale(base_dilation))
        .and_then(|x| x.checked_add(&one_))
        .and_then(|x| x.checked_add(&edges))
        .and_then(|x| x.checked_sub(&dw))
        .and_then(|x| x.floor_div(stride))
        .and_then(|x| x.checked_add(&one_))
        .map_err(dimerr(op))
}
