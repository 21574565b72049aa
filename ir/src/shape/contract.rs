//! Shape rules of the contractions: `dot_general` and `convolution` (StableHLO spec, each op's
//! constraints).

use super::window::window_out;
use super::{axis, dimerr, invalid, nth, one, Inferred};
use crate::dim::DimExpr;
use crate::op::{ConvSpec, DotDims, OpKind};
use crate::types::{Shape, TensorType};

/// `dot_general` (spec C1–C12): batching dimensions, then the lhs's and the rhs's free
/// dimensions; batching and contracting sizes must agree. A third operand, the accumulator
/// (Ebb's dot-accumulate form, [`crate::op::Op::DotGeneral`]), must have the result's type.
pub(super) fn dot_general(op: OpKind, d: &DotDims, operands: &[&TensorType]) -> Inferred {
    let a = nth(op, operands, 0)?;
    let b = nth(op, operands, 1)?;
    if operands.len() > 3 {
        return Err(invalid(
            op,
            format!("expects 2 or 3 operands, got {}", operands.len()),
        ));
    }
    let (lb, rb, lc, rc) = (&d.lhs_batch, &d.rhs_batch, &d.lhs_contract, &d.rhs_contract);
    if lb.len() != rb.len() || lc.len() != rc.len() {
        return Err(invalid(op, "batching/contracting dimension counts differ"));
    }
    for (&l, &r) in lb.iter().zip(rb).chain(lc.iter().zip(rc)) {
        let (l, r) = (axis(op, l, a.rank())?, axis(op, r, b.rank())?);
        if a.shape[l] != b.shape[r] {
            return Err(invalid(
                op,
                format!(
                    "lhs dim {l} ({}) != rhs dim {r} ({})",
                    a.shape[l], b.shape[r]
                ),
            ));
        }
    }
    let mut s: Shape = lb.iter().map(|&d| a.shape[d as usize].clone()).collect();
    let free = |x: &TensorType, bd: &[i64], cd: &[i64]| -> Vec<DimExpr> {
        (0..x.rank())
            .filter(|i| !bd.contains(&(*i as i64)) && !cd.contains(&(*i as i64)))
            .map(|i| x.shape[i].clone())
            .collect()
    };
    s.extend(free(a, lb, lc));
    s.extend(free(b, rb, rc));
    let ty = TensorType::new(d.result_dtype.unwrap_or(a.dtype), s);
    if let Some(c) = operands.get(2) {
        if **c != ty {
            return Err(invalid(
                op,
                format!("accumulator {c} differs from the result type {ty}"),
            ));
        }
    }
    one(ty)
}

/// `convolution` (spec C1–C33): the window runs over the input's spatial dimensions with the
/// kernel's spatial sizes; batch and feature sizes follow the group counts.
pub(super) fn convolution(op: OpKind, c: &ConvSpec, operands: &[&TensorType]) -> Inferred {
    let x = nth(op, operands, 0)?;
    let k = nth(op, operands, 1)?;
    let dn = &c.dims;
    let sd = dn.input_spatial.len();
    let in_range =
        |r: usize, v: &[usize], extra: [usize; 2]| v.iter().chain(&extra).all(|&i| i < r);
    if dn.kernel_spatial.len() != sd
        || dn.output_spatial.len() != sd
        || x.rank() != sd + 2
        || k.rank() != sd + 2
        || !in_range(
            x.rank(),
            &dn.input_spatial,
            [dn.input_batch, dn.input_feature],
        )
        || !in_range(
            k.rank(),
            &dn.kernel_spatial,
            [dn.kernel_output_feature, dn.kernel_input_feature],
        )
        || !in_range(
            x.rank(),
            &dn.output_spatial,
            [dn.output_batch, dn.output_feature],
        )
    {
        return Err(invalid(op, "dimension_numbers do not match operand ranks"));
    }
    let n = |v: &[i64], what: &str| {
        if v.len() == sd {
            Ok(())
        } else {
            Err(invalid(
                op,
                format!("{what} length differs from the spatial rank"),
            ))
        }
    };
    n(&c.window_strides, "window_strides")?;
    n(&c.lhs_dilation, "lhs_dilation")?;
    n(&c.rhs_dilation, "rhs_dilation")?;
    if c.padding.len() != sd {
        return Err(invalid(op, "padding length differs from the spatial rank"));
    }
    // Per spatial dimension; the kernel's size may be symbolic (a weight gradient's kernel is
    // an activation).
    let mut spatial = Vec::with_capacity(sd);
    for j in 0..sd {
        spatial.push(window_out(
            op,
            &x.shape[dn.input_spatial[j]],
            &k.shape[dn.kernel_spatial[j]],
            c.window_strides[j],
            c.lhs_dilation[j],
            c.rhs_dilation[j],
            (
                &DimExpr::constant(c.padding[j].0),
                &DimExpr::constant(c.padding[j].1),
            ),
        )?);
    }
    let bgc = c.batch_group_count.max(1);
    let mut s = vec![DimExpr::constant(0); x.rank()];
    s[dn.output_batch] = x.shape[dn.input_batch]
        .clone()
        .floor_div(bgc)
        .map_err(dimerr(op))?;
    s[dn.output_feature] = k.shape[dn.kernel_output_feature].clone();
    for (j, &p) in dn.output_spatial.iter().enumerate() {
        s[p] = spatial[j].clone();
    }
    one(TensorType::new(c.result_dtype.unwrap_or(x.dtype), s))
}
