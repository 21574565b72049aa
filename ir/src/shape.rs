//! Shape inference: the result types of an op from its operand types and attributes, with
//! symbolic dimensions. Rules follow the StableHLO specification (section "Ops", each op's
//! "Constraints" on result shapes).
//!
//! Dimension equality is structural on canonical [`DimExpr`]s: two dimensions are equal when
//! their canonical forms are identical (that is, their difference simplifies to zero).

use crate::dim::{DimError, DimExpr};
use crate::dtype::DType;
use crate::graph::Graph;
use crate::op::{AttrError, Attrs, AttrsExt, OpKind};
use crate::types::{Shape, TensorType};

/// A shape-rule violation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShapeError {
    /// A missing or ill-typed attribute.
    #[error(transparent)]
    Attr(#[from] AttrError),
    /// Arithmetic on dimensions failed.
    #[error("op `{op}`: {source}")]
    Dim {
        /// Op name.
        op: String,
        /// Underlying error.
        source: DimError,
    },
    /// Operands or attributes are inconsistent.
    #[error("op `{op}`: {msg}")]
    Invalid {
        /// Op name.
        op: String,
        /// What is inconsistent.
        msg: String,
    },
}

fn invalid(op: OpKind, msg: impl Into<String>) -> ShapeError {
    ShapeError::Invalid {
        op: op.name().into(),
        msg: msg.into(),
    }
}

fn dimerr(op: OpKind) -> impl Fn(DimError) -> ShapeError {
    move |source| ShapeError::Dim {
        op: op.name().into(),
        source,
    }
}

fn axis(op: OpKind, d: i64, rank: usize) -> Result<usize, ShapeError> {
    if d < 0 || d as usize >= rank {
        return Err(invalid(
            op,
            format!("dimension {d} out of range for rank {rank}"),
        ));
    }
    Ok(d as usize)
}

fn nth<'a>(
    op: OpKind,
    operands: &[&'a TensorType],
    i: usize,
) -> Result<&'a TensorType, ShapeError> {
    operands.get(i).copied().ok_or_else(|| {
        invalid(
            op,
            format!(
                "expected at least {} operands, got {}",
                i + 1,
                operands.len()
            ),
        )
    })
}

fn fmt_shape(s: &Shape) -> String {
    let parts: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(","))
}

/// Infers the result types of an op of kind `kind` with attributes `attrs`, operand types
/// `operands` and regions `regions`. Returns `Ok(None)` for ops whose result types are not
/// determined by their operands (`input`, `constant`, `dim_constant`, `custom_call`): the
/// declared types are authoritative for those.
///
/// Errors: [`ShapeError`] naming the op when operands and attributes violate the op's shape
/// constraints.
pub fn infer(
    kind: OpKind,
    attrs: &Attrs,
    operands: &[&TensorType],
    regions: &[Graph],
) -> Result<Option<Vec<TensorType>>, ShapeError> {
    use OpKind::*;
    let op = kind;
    let t = |s: Shape, d: DType| TensorType::new(d, s);
    let one = |tt: TensorType| Ok(Some(vec![tt]));
    match kind {
        Input | Constant | DimConstant | CustomCall => Ok(None),
        k if k.is_unary_elementwise() => {
            let x = nth(op, operands, 0)?;
            let d = match k {
                Convert => attrs.dtype(op, "dtype")?,
                IsFinite => DType::I1,
                _ => x.dtype,
            };
            one(t(x.shape.clone(), d))
        }
        k if k.is_binary_elementwise() => {
            let a = nth(op, operands, 0)?;
            let b = nth(op, operands, 1)?;
            if a.shape != b.shape {
                return Err(invalid(
                    op,
                    format!(
                        "operand shapes differ: {} vs {}",
                        fmt_shape(&a.shape),
                        fmt_shape(&b.shape)
                    ),
                ));
            }
            one(t(
                a.shape.clone(),
                if k == Compare { DType::I1 } else { a.dtype },
            ))
        }
        Select => {
            let p = nth(op, operands, 0)?;
            let a = nth(op, operands, 1)?;
            let b = nth(op, operands, 2)?;
            if a.shape != b.shape || (p.rank() != 0 && p.shape != a.shape) {
                return Err(invalid(op, "pred/on_true/on_false shapes differ"));
            }
            one(a.clone())
        }
        Clamp => one(nth(op, operands, 1)?.clone()),
        BroadcastInDim => {
            let x = nth(op, operands, 0)?;
            let dims = attrs.ints(op, "broadcast_dimensions")?;
            let shape = attrs.dims(op, "shape")?.to_vec();
            if dims.len() != x.rank() {
                return Err(invalid(
                    op,
                    "broadcast_dimensions length differs from operand rank",
                ));
            }
            for (i, &d) in dims.iter().enumerate() {
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
            one(t(shape, x.dtype))
        }
        Reshape => {
            let x = nth(op, operands, 0)?;
            let shape = attrs.dims(op, "shape")?.to_vec();
            let r = t(shape, x.dtype);
            if r.num_elements() != x.num_elements() {
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
        Transpose => {
            let x = nth(op, operands, 0)?;
            let perm = attrs.ints(op, "permutation")?;
            if perm.len() != x.rank() {
                return Err(invalid(op, "permutation length differs from rank"));
            }
            let s = perm
                .iter()
                .map(|&p| axis(op, p, x.rank()).map(|p| x.shape[p].clone()))
                .collect::<Result<_, _>>()?;
            one(t(s, x.dtype))
        }
        Concatenate => {
            let x = nth(op, operands, 0)?;
            let d = axis(op, attrs.int(op, "dimension")?, x.rank())?;
            let mut s = x.shape.clone();
            for o in &operands[1..] {
                if o.rank() != x.rank() {
                    return Err(invalid(op, "operand ranks differ"));
                }
                s[d] = s[d].clone() + o.shape[d].clone();
            }
            one(t(s, x.dtype))
        }
        Slice => {
            let x = nth(op, operands, 0)?;
            let st = attrs.dims(op, "start_indices")?;
            let li = attrs.dims(op, "limit_indices")?;
            let sr = attrs.dims(op, "strides")?;
            if st.len() != x.rank() || li.len() != x.rank() || sr.len() != x.rank() {
                return Err(invalid(op, "start/limit/stride lengths differ from rank"));
            }
            let mut s = Vec::new();
            for i in 0..x.rank() {
                let k = sr[i]
                    .as_const()
                    .ok_or_else(|| invalid(op, "symbolic stride"))?;
                let n = (li[i].clone() - st[i].clone() + DimExpr::constant(k - 1))
                    .floor_div(k)
                    .map_err(dimerr(op))?;
                s.push(n);
            }
            one(t(s, x.dtype))
        }
        DynamicSlice => {
            let x = nth(op, operands, 0)?;
            let sizes = attrs.dims(op, "slice_sizes")?.to_vec();
            if sizes.len() != x.rank() || operands.len() != 1 + x.rank() {
                return Err(invalid(
                    op,
                    "slice_sizes/start index count differs from rank",
                ));
            }
            one(t(sizes, x.dtype))
        }
        DynamicUpdateSlice | Reverse | SelectAndScatter => one(nth(op, operands, 0)?.clone()),
        Pad => {
            let x = nth(op, operands, 0)?;
            let lo = attrs.ints(op, "edge_padding_low")?;
            let hi = attrs.ints(op, "edge_padding_high")?;
            let it = attrs.ints(op, "interior_padding")?;
            if lo.len() != x.rank() || hi.len() != x.rank() || it.len() != x.rank() {
                return Err(invalid(op, "padding lengths differ from rank"));
            }
            let s = (0..x.rank())
                .map(|i| {
                    let d = x.shape[i].clone();
                    // interior padding adds (d-1)*interior for d >= 1
                    d.clone()
                        + DimExpr::constant(lo[i] + hi[i])
                        + (d - DimExpr::constant(1)) * DimExpr::constant(it[i])
                })
                .collect();
            one(t(s, x.dtype))
        }
        Iota => one(t(
            attrs.dims(op, "shape")?.to_vec(),
            attrs.dtype(op, "dtype")?,
        )),
        Reduce => {
            let n = operands.len() / 2;
            if n == 0 || operands.len() % 2 != 0 {
                return Err(invalid(
                    op,
                    "expects inputs followed by as many init values",
                ));
            }
            let dims = attrs.ints(op, "dimensions")?;
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
                    .map(|i| t(s.clone(), operands[n + i].dtype))
                    .collect(),
            ))
        }
        ReduceWindow => {
            let n = operands.len() / 2;
            if n == 0 || operands.len() % 2 != 0 {
                return Err(invalid(
                    op,
                    "expects inputs followed by as many init values",
                ));
            }
            let x = operands[0];
            let s = window_shape(
                op,
                attrs,
                &x.shape,
                "window_dimensions",
                "window_strides",
                "base_dilations",
                "window_dilations",
                None,
            )?;
            Ok(Some(
                (0..n)
                    .map(|i| t(s.clone(), operands[n + i].dtype))
                    .collect(),
            ))
        }
        DotGeneral => {
            let a = nth(op, operands, 0)?;
            let b = nth(op, operands, 1)?;
            let lb = attrs.ints_or_empty(op, "lhs_batching_dimensions")?;
            let rb = attrs.ints_or_empty(op, "rhs_batching_dimensions")?;
            let lc = attrs.ints_or_empty(op, "lhs_contracting_dimensions")?;
            let rc = attrs.ints_or_empty(op, "rhs_contracting_dimensions")?;
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
            let d = attrs.dtype(op, "dtype").unwrap_or(a.dtype);
            one(t(s, d))
        }
        Convolution => convolution(op, attrs, operands),
        Gather => gather(op, attrs, operands),
        Scatter => {
            let n = (operands.len().saturating_sub(1)) / 2;
            if n == 0 || operands.len() != 2 * n + 1 {
                return Err(invalid(op, "expects inputs, scatter_indices, updates"));
            }
            Ok(Some(operands[..n].iter().map(|x| (*x).clone()).collect()))
        }
        Sort | While | OptimizationBarrier => {
            if kind == While && regions.len() == 2 {
                let body = &regions[1];
                if body.outputs().len() != operands.len() {
                    return Err(invalid(
                        op,
                        "body returns a different number of values than the loop carries",
                    ));
                }
            }
            Ok(Some(operands.iter().map(|x| (*x).clone()).collect()))
        }
        _ => Err(invalid(op, "no shape rule")),
    }
}

/// Result spatial size of a window op: `(dilated_padded - dilated_window) floordiv stride + 1`
/// (StableHLO spec, `reduce_window` constraint C15 / `convolution` C25 form).
#[allow(clippy::too_many_arguments)]
fn window_shape(
    op: OpKind,
    attrs: &Attrs,
    input: &Shape,
    win: &str,
    strides: &str,
    base_dil: &str,
    win_dil: &str,
    only: Option<&[usize]>,
) -> Result<Shape, ShapeError> {
    let rank = input.len();
    let idx: Vec<usize> = only
        .map(|o| o.to_vec())
        .unwrap_or_else(|| (0..rank).collect());
    let w = attrs.ints(op, win)?;
    let get = |name: &str, default: i64| -> Result<Vec<i64>, ShapeError> {
        let v = attrs.ints_or_empty(op, name)?;
        Ok(if v.is_empty() {
            vec![default; idx.len()]
        } else {
            v.to_vec()
        })
    };
    let st = get(strides, 1)?;
    let bd = get(base_dil, 1)?;
    let wd = get(win_dil, 1)?;
    let pad = {
        let v = attrs.ints_or_empty(op, "padding")?;
        if v.is_empty() {
            vec![0; 2 * idx.len()]
        } else {
            v.to_vec()
        }
    };
    if w.len() != idx.len()
        || st.len() != idx.len()
        || bd.len() != idx.len()
        || wd.len() != idx.len()
        || pad.len() != 2 * idx.len()
    {
        return Err(invalid(
            op,
            "window attribute lengths differ from the number of window dimensions",
        ));
    }
    let mut out = input.clone();
    for (j, &i) in idx.iter().enumerate() {
        let d = input[i].clone();
        let dilated = (d - DimExpr::constant(1)) * DimExpr::constant(bd[j]) + DimExpr::constant(1);
        let padded = dilated + DimExpr::constant(pad[2 * j] + pad[2 * j + 1]);
        let dw = (w[j] - 1) * wd[j] + 1;
        if st[j] <= 0 {
            return Err(invalid(op, "non-positive window stride"));
        }
        out[i] = (padded - DimExpr::constant(dw))
            .floor_div(st[j])
            .map_err(dimerr(op))?
            + DimExpr::constant(1);
    }
    Ok(out)
}

/// Parses StableHLO convolution dimension numbers `[b, 0, 1, f]x[o, i, 0, 1]->[b, 0, 1, f]`
/// into (batch, feature, spatial) positions for input, (out, in, spatial) for the kernel and
/// (batch, feature, spatial) for the output.
pub fn parse_conv_dims(s: &str) -> Option<[(usize, usize, Vec<usize>); 3]> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rest) = s.split_once('x')?;
    let (rhs, out) = rest.split_once("->")?;
    let part = |p: &str, a: char, b: char| -> Option<(usize, usize, Vec<usize>)> {
        let p = p.strip_prefix('[')?.strip_suffix(']')?;
        let items: Vec<&str> = p.split(',').collect();
        let ia = items
            .iter()
            .position(|x| x.len() == 1 && x.starts_with(a))?;
        let ib = items
            .iter()
            .position(|x| x.len() == 1 && x.starts_with(b))?;
        let mut sp: Vec<(usize, usize)> = Vec::new();
        for (pos, x) in items.iter().enumerate() {
            if let Ok(n) = x.parse::<usize>() {
                sp.push((n, pos));
            }
        }
        sp.sort();
        Some((ia, ib, sp.into_iter().map(|(_, p)| p).collect()))
    };
    Some([
        part(lhs, 'b', 'f')?,
        part(rhs, 'o', 'i')?,
        part(&out, 'b', 'f')?,
    ])
}

fn convolution(
    op: OpKind,
    attrs: &Attrs,
    operands: &[&TensorType],
) -> Result<Option<Vec<TensorType>>, ShapeError> {
    let x = nth(op, operands, 0)?;
    let k = nth(op, operands, 1)?;
    let dn = attrs.str(op, "dimension_numbers")?;
    let [(ib, _if, isp), (ko, _ki, ksp), (ob, of, osp)] = parse_conv_dims(dn)
        .ok_or_else(|| invalid(op, format!("cannot parse dimension_numbers `{dn}`")))?;
    if isp.len() != ksp.len()
        || isp.len() != osp.len()
        || x.rank() != isp.len() + 2
        || k.rank() != ksp.len() + 2
    {
        return Err(invalid(op, "dimension_numbers do not match operand ranks"));
    }
    // Window over the input's spatial dims: window sizes are the kernel's spatial sizes.
    let mut wattrs = attrs.clone();
    let wins: Option<Vec<i64>> = ksp.iter().map(|&i| k.shape[i].as_const()).collect();
    let wins = wins.ok_or_else(|| invalid(op, "symbolic kernel spatial size"))?;
    wattrs.insert("__window".into(), crate::op::Attr::Ints(wins));
    let spatial = window_shape(
        op,
        &wattrs,
        &x.shape,
        "__window",
        "window_strides",
        "lhs_dilation",
        "rhs_dilation",
        Some(&isp),
    )?;
    let bgc = attrs.int(op, "batch_group_count").unwrap_or(1).max(1);
    let mut s = vec![DimExpr::constant(0); x.rank()];
    s[ob] = x.shape[ib].clone().floor_div(bgc).map_err(dimerr(op))?;
    s[of] = k.shape[ko].clone();
    for (j, &p) in osp.iter().enumerate() {
        s[p] = spatial[isp[j]].clone();
    }
    let d = attrs.dtype(op, "dtype").unwrap_or(x.dtype);
    Ok(Some(vec![TensorType::new(d, s)]))
}

fn gather(
    op: OpKind,
    attrs: &Attrs,
    operands: &[&TensorType],
) -> Result<Option<Vec<TensorType>>, ShapeError> {
    let x = nth(op, operands, 0)?;
    let idx = nth(op, operands, 1)?;
    let offset_dims = attrs.ints_or_empty(op, "offset_dims")?;
    let collapsed = attrs.ints_or_empty(op, "collapsed_slice_dims")?;
    let obatch = attrs.ints_or_empty(op, "operand_batching_dims")?;
    let ivd = attrs.int(op, "index_vector_dim")?;
    let sizes = attrs.dims(op, "slice_sizes")?;
    if sizes.len() != x.rank() {
        return Err(invalid(op, "slice_sizes length differs from operand rank"));
    }
    // batch dims: indices dims except index_vector_dim (StableHLO spec, gather C22-C24)
    let batch: Vec<DimExpr> = (0..idx.rank())
        .filter(|&i| i as i64 != ivd)
        .map(|i| idx.shape[i].clone())
        .collect();
    let offs: Vec<DimExpr> = (0..x.rank())
        .filter(|i| !collapsed.contains(&(*i as i64)) && !obatch.contains(&(*i as i64)))
        .map(|i| sizes[i].clone())
        .collect();
    if offs.len() != offset_dims.len() {
        return Err(invalid(
            op,
            "offset_dims count differs from the non-collapsed slice dims",
        ));
    }
    let rank = batch.len() + offs.len();
    let mut s = Vec::with_capacity(rank);
    let (mut bi, mut oi) = (0, 0);
    for i in 0..rank {
        if offset_dims.contains(&(i as i64)) {
            s.push(offs[oi].clone());
            oi += 1;
        } else {
            s.push(
                batch
                    .get(bi)
                    .cloned()
                    .ok_or_else(|| invalid(op, "offset_dims out of range"))?,
            );
            bi += 1;
        }
    }
    Ok(Some(vec![TensorType::new(x.dtype, s)]))
}
