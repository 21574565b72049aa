//! Data-movement kernels: `constant`, `dim_constant`, `iota`, `broadcast_in_dim`, `reshape`,
//! `transpose`, `concatenate`, `slice`, `dynamic_slice`, `dynamic_update_slice`, `pad` and
//! `reverse` (StableHLO spec, section "Ops", each op's "Semantics").
//!
//! Each op is a strided view of its operand ([`super::layout`]) or a strided write into a
//! fresh result; `reshape`, and a `broadcast_in_dim` that only adds unit dimensions, share the
//! operand's buffer; a `slice` or `dynamic_slice` whose elements are one contiguous range of
//! an operand held for the whole run (a loop body's stacked input read one step at a time) is
//! a view of that range ([`slice_view`]); `dynamic_update_slice` writes into its operand's
//! buffer when no other tensor holds it (one slice copy where the update is a contiguous range
//! of it, a scan's step written into its stack: [`assign_view`]); a `broadcast_in_dim` of
//! one element is a fill. Start indices of the dynamic ops are
//! clamped into range as the spec prescribes. Invariant: results have exactly the op's
//! declared type at the bindings (the executor checks it).

use super::layout::{assign_view, gather_view_into, istrides, istrides_of, strides_of, Dims};
use super::operands::Operands;
use super::{arity, Ctx};
use crate::buffer::Buf;
use crate::error::{invalid, OpError};
use crate::tensor::{dispatch, map_same, Data, Elem, Tensor};
use ebb_ir::op::PadSpec;
use ebb_ir::{DType, DimExpr, Literal, Op};

/// `constant`: the literal, splat or dense, at the result shape.
pub(crate) fn constant(ctx: &Ctx, lit: &Literal) -> Result<Tensor, OpError> {
    let out = ctx.out0()?;
    let t = Tensor::from_literal(lit, out.shape.clone())
        .map_err(|e| OpError::Invalid(e.to_string()))?;
    if t.dtype() != out.dtype {
        return Ok(Tensor::from_parts(
            out.shape.clone(),
            t.data().convert(out.dtype),
        ));
    }
    Ok(t)
}

/// `dim_constant`: the dimension expressions `vals` evaluated at the bindings.
pub(crate) fn dim_constant(ctx: &Ctx, vals: &[DimExpr]) -> Result<Tensor, OpError> {
    let out = ctx.out0()?;
    let n: usize = out.shape.iter().product();
    let mut v = Vec::with_capacity(vals.len());
    for d in vals {
        v.push(d.eval(ctx.bindings)?);
    }
    let v = match (v.len(), n) {
        (a, b) if a == b => v,
        (1, _) => vec![v[0]; n],
        (a, b) => return invalid(format!("{a} values for {b} elements")),
    };
    Ok(Tensor::from_parts(
        out.shape.clone(),
        Data::I64(Buf::from(v)).into_dtype(out.dtype),
    ))
}

/// Dispatches the remaining data-movement ops.
pub(crate) fn run(ctx: &Ctx, ops: &mut Operands<'_>) -> Result<Tensor, OpError> {
    let kind = ctx.node.kind();
    let out = ctx.out0()?;
    match &ctx.node.op {
        Op::Iota(spec) => iota(out.dtype, &out.shape, spec.dimension),
        Op::Reshape(_) => {
            arity(ops, 1, kind)?;
            ops[0]
                .reshaped(&out.shape)
                .map_err(|e| OpError::Invalid(e.to_string()))
        }
        Op::BroadcastInDim(spec) => {
            arity(ops, 1, kind)?;
            let x = &ops[0];
            let dims = &spec.dims;
            if dims.len() != x.shape().len() {
                return invalid("broadcast_dimensions length differs from the operand rank");
            }
            let xs = istrides(x.shape());
            let mut st: Dims<isize> = smallvec::smallvec![0isize; out.shape.len()];
            for (i, &d) in dims.iter().enumerate() {
                let d = axis(d, out.shape.len())?;
                let n = x.shape()[i];
                if n != 1 && n != out.shape[d] {
                    return invalid(format!(
                        "operand dim {i} ({n}) is neither 1 nor result dim {d} ({})",
                        out.shape[d]
                    ));
                }
                if n != 1 {
                    st[d] = xs[i];
                }
            }
            // Only unit dimensions added (every operand dimension kept, as checked above, and in
            // order): the same elements in the same order, so the result shares the operand's
            // buffer, as `reshape` does.
            if x.len() == out.shape.iter().product::<usize>()
                && dims.windows(2).all(|w| w[0] < w[1])
            {
                return x
                    .reshaped(&out.shape)
                    .map_err(|e| OpError::Invalid(e.to_string()));
            }
            if x.len() == 1 {
                return Ok(splat(ctx, x, &out.shape));
            }
            view(ctx, x, 0, &st, &out.shape)
        }
        Op::Transpose(perm) => {
            arity(ops, 1, kind)?;
            let x = &ops[0];
            let xs = istrides(x.shape());
            let mut st: Dims<isize> = Dims::with_capacity(perm.len());
            for &p in perm {
                st.push(xs[axis(p, x.shape().len())?]);
            }
            view(ctx, x, 0, &st, &out.shape)
        }
        Op::Slice(spec) => {
            arity(ops, 1, kind)?;
            let x = &ops[0];
            let start = eval_dims(ctx, &spec.start)?;
            let strides = eval_dims(ctx, &spec.strides)?;
            if start.len() != x.shape().len() || strides.len() != start.len() {
                return invalid("start_indices/strides length differs from the rank");
            }
            let xs = istrides(x.shape());
            let mut off = 0isize;
            let mut st: Dims<isize> = Dims::with_capacity(xs.len());
            for i in 0..xs.len() {
                off += start[i] as isize * xs[i];
                st.push(strides[i] as isize * xs[i]);
            }
            slice_view(ctx, x, off, &st, &out.shape)
        }
        Op::Reverse(dims) => {
            arity(ops, 1, kind)?;
            let x = &ops[0];
            let mut st = istrides_of(x.shape());
            let mut off = 0isize;
            for &d in dims {
                let d = axis(d, st.len())?;
                off += (x.shape()[d] as isize - 1).max(0) * st[d];
                st[d] = -st[d];
            }
            view(ctx, x, off, &st, &out.shape)
        }
        Op::DynamicSlice(_) => {
            let x = ops
                .first()
                .ok_or_else(|| OpError::Invalid("missing operand".into()))?;
            let sizes = &out.shape;
            let starts = clamped_starts(&ops[1..], x.shape(), sizes)?;
            let xs = istrides(x.shape());
            let off = starts.iter().zip(&xs).map(|(&s, &k)| s as isize * k).sum();
            slice_view(ctx, x, off, &xs, sizes)
        }
        Op::DynamicUpdateSlice => {
            if ops.len() < 2 {
                return invalid("expects operand and update");
            }
            // `ops` is then the update and the start indices.
            let Some(mut x) = ops.take_first() else {
                return invalid("expects operand and update");
            };
            let (u, idx) = (&ops[0], &ops[1..]);
            let starts = clamped_starts(idx, x.shape(), u.shape())?;
            if x.dtype() != u.dtype() {
                return invalid("operand and update element types differ");
            }
            // The operand is updated in its own buffer when nothing else holds it (the
            // executor moves it in at its last use); else it is copied first, into the result's
            // arena range or a recycled buffer.
            if x.unique_data_mut().is_none() {
                let shape = x.shape().to_vec();
                x = view(ctx, &x, 0, &istrides_of(&shape), &shape)?;
            }
            let xs = istrides(x.shape());
            let off = starts.iter().zip(&xs).map(|(&s, &k)| s as isize * k).sum();
            let us = istrides(u.shape());
            let ushape: Dims<usize> = Dims::from_slice(u.shape());
            assign_data(x.data_mut(), off, &xs, u.data(), 0, &us, &ushape)?;
            Ok(x)
        }
        Op::Concatenate(d) => concatenate(ctx, ops, axis(*d, out.shape.len())?, out),
        Op::Pad(spec) => {
            arity(ops, 2, kind)?;
            pad(ctx, spec, &ops[0], &ops[1], out)
        }
        _ => Err(OpError::Unsupported(format!(
            "`{kind}` is not a data-movement op"
        ))),
    }
}

fn axis(d: i64, rank: usize) -> Result<usize, OpError> {
    if d < 0 || d as usize >= rank {
        return invalid(format!("dimension {d} out of range for rank {rank}"));
    }
    Ok(d as usize)
}

fn eval_dims(ctx: &Ctx, d: &[DimExpr]) -> Result<Dims<i64>, OpError> {
    let mut out = Dims::new();
    for e in d {
        out.push(e.eval(ctx.bindings)?);
    }
    Ok(out)
}

/// A `slice` or `dynamic_slice` of `x` (the view at `off` with strides `st` and `shape`): the
/// range of `x`'s buffer itself when the view's elements are one contiguous range in row-major
/// order, `x` is held unchanged while the result lives (a graph input not donated, or an
/// operand whose last reader comes after every reader of the result: it outlives the result,
/// and nothing writes it in place meanwhile; `build::hold_sliced`) and the result has no planned arena
/// range to be written into; else copied ([`view`]). The executor copies a view that leaves
/// the run as an output ([`super::Program::run`]), so a view never outlives its operand's
/// run. The memory accounting is unchanged: the result is charged its own bytes either way.
fn slice_view(
    ctx: &Ctx,
    x: &Tensor,
    off: isize,
    st: &[isize],
    shape: &[usize],
) -> Result<Tensor, OpError> {
    // Row-major strides of `shape`, innermost first, compared as they are computed.
    let mut want = 1isize;
    let mut contiguous = st.len() == shape.len();
    for (&got, &n) in st.iter().zip(shape).rev() {
        if n != 1 && got != want {
            contiguous = false;
            break;
        }
        want *= n as isize;
    }
    if contiguous && ctx.slots.is_none() && ctx.held.first() == Some(&true) {
        if let Some(t) = usize::try_from(off)
            .ok()
            .and_then(|start| x.contiguous_view(start, shape))
        {
            return Ok(t);
        }
    }
    view(ctx, x, off, st, shape)
}

/// The view of `x` copied into a new tensor (a recycled buffer of the pool when there is one).
fn view(
    ctx: &Ctx,
    x: &Tensor,
    off: isize,
    st: &[isize],
    shape: &[usize],
) -> Result<Tensor, OpError> {
    let n = shape.iter().product();
    let data = dispatch!(x.data(), v => {
        Elem::wrap(gather_view_into(v, off, st, shape, ctx.take_vec(n))?)
    });
    Ok(Tensor::from_parts(shape, data))
}

/// The one element of `x` repeated over `shape` (a `broadcast_in_dim` of a one-element operand),
/// in a buffer as [`view`] takes it.
///
/// When the result only initializes a carried value that a `while` overwrites whole before
/// reading it ([`Ctx::unread`]), the buffer keeps its stale contents.
fn splat(ctx: &Ctx, x: &Tensor, shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    let data = dispatch!(x.data(), v => {
        let mut out = ctx.take_vec(n);
        if !ctx.unread {
            out.fill(v[0]);
        }
        Elem::wrap(out)
    });
    Tensor::from_parts(shape, data)
}

/// `dst[view] = src[view]` for two data of the same element type.
pub(crate) fn assign_data(
    dst: &mut Data,
    doff: isize,
    dstr: &[isize],
    src: &Data,
    soff: isize,
    sstr: &[isize],
    shape: &[usize],
) -> Result<(), OpError> {
    macro_rules! go {
        ($($v:ident),*) => {
            match (dst, src) {
                $((Data::$v(d), Data::$v(s)) => assign_view(d, doff, dstr, s, soff, sstr, shape),)*
                _ => invalid("element types differ"),
            }
        };
    }
    go!(F32, BF16, F16, F64, I1, I8, I16, I32, I64, U8, U32)
}

/// Start indices of `dynamic_slice`/`dynamic_update_slice`, each clamped to
/// `[0, dim - size]` (StableHLO spec, `dynamic_slice` semantics). The index tensors by value
/// or by reference (`super::direct` reads them from their slots).
pub(super) fn clamped_starts<T: std::borrow::Borrow<Tensor>>(
    idx: &[T],
    shape: &[usize],
    sizes: &[usize],
) -> Result<Dims<usize>, OpError> {
    if idx.len() != shape.len() || sizes.len() != shape.len() {
        return invalid(format!(
            "{} start indices for rank {}",
            idx.len(),
            shape.len()
        ));
    }
    let mut out = Dims::new();
    for (i, t) in idx.iter().enumerate() {
        let t: &Tensor = t.borrow();
        if !t.shape().is_empty() {
            return invalid("start indices must be scalars");
        }
        let s = match t.data() {
            Data::I32(v) if v.len() == 1 => Some(i64::from(v[0])),
            Data::I64(v) if v.len() == 1 => Some(v[0]),
            d => dispatch!(d, v => v.first().map(|x| x.to_i64())),
        }
        .ok_or_else(|| OpError::Invalid("an empty start index".into()))?;
        if sizes[i] > shape[i] {
            return invalid(format!(
                "slice size {} exceeds dimension {}",
                sizes[i], shape[i]
            ));
        }
        out.push(s.clamp(0, (shape[i] - sizes[i]) as i64) as usize);
    }
    Ok(out)
}

fn iota(dtype: DType, shape: &[usize], dim: i64) -> Result<Tensor, OpError> {
    let d = axis(dim, shape.len())?;
    let n: usize = shape.iter().product();
    let st = strides_of(shape);
    let idx: Vec<i64> = (0..n).map(|i| ((i / st[d]) % shape[d]) as i64).collect();
    Ok(Tensor::from_parts(
        shape.to_vec(),
        Data::I64(Buf::from(idx)).into_dtype(dtype),
    ))
}

fn concatenate(
    ctx: &Ctx,
    ops: &[Tensor],
    d: usize,
    out: &super::OutType,
) -> Result<Tensor, OpError> {
    let first = ops
        .first()
        .ok_or_else(|| OpError::Invalid("no operands".into()))?;
    let outer: usize = out.shape[..d].iter().product();
    let inner: usize = out.shape[d + 1..].iter().product();
    let mut total = 0;
    for o in ops {
        if o.dtype() != first.dtype() || o.shape().len() != out.shape.len() {
            return invalid("operands differ in element type or rank");
        }
        for (k, (&a, &b)) in o.shape().iter().zip(&out.shape).enumerate() {
            if k != d && a != b {
                return invalid("operand shapes differ outside the concatenation dimension");
            }
        }
        total += o.shape()[d];
    }
    if total != out.shape[d] {
        return invalid("operand sizes do not add up to the result");
    }
    let chunks: Vec<usize> = ops.iter().map(|o| o.shape()[d] * inner).collect();
    let n = outer * total * inner;
    let data = map_same!(first.data(), _v => {
        let srcs: Vec<&[_]> = ops.iter().filter_map(|o| Elem::slice(o.data())).collect();
        let mut v = ctx.take_vec(n);
        let mut at = 0;
        for r in 0..outer {
            for (s, &c) in srcs.iter().zip(&chunks) {
                v[at..at + c].copy_from_slice(&s[r * c..(r + 1) * c]);
                at += c;
            }
        }
        v
    });
    Ok(Tensor::from_parts(out.shape.as_slice(), data))
}

/// `pad` (StableHLO spec): edge padding may be negative (cropping); interior padding inserts
/// `interior[d]` padding elements between neighbours.
fn pad(
    ctx: &Ctx,
    spec: &PadSpec,
    x: &Tensor,
    pv: &Tensor,
    out: &super::OutType,
) -> Result<Tensor, OpError> {
    let (lo, it) = (&spec.low, &spec.interior);
    let rank = x.shape().len();
    if lo.len() != rank || it.len() != rank || out.shape.len() != rank {
        return invalid("padding lengths differ from the rank");
    }
    let fill = pv
        .scalar_value()
        .ok_or_else(|| OpError::Invalid("padding value must be a scalar".into()))?;
    if fill.dtype() != x.dtype() {
        return invalid("padding value has another element type");
    }
    let n: usize = out.shape.iter().product();
    // The result's own buffer (stale contents) filled with the padding value.
    let mut data = ctx.take_result(0, x.dtype(), n);
    let one = Data::splat(fill, 1);
    macro_rules! fill {
        ($($v:ident),*) => {
            match (&mut data, &one) {
                $((Data::$v(d), Data::$v(s)) => d.fill(s[0]),)*
                _ => return invalid("padding value has another element type"),
            }
        };
    }
    fill!(F32, BF16, F16, F64, I1, I8, I16, I32, I64, U8, U32, U64);
    let os = istrides_of(&out.shape);
    let xs = istrides_of(x.shape());
    // per dim: operand index range [a, b) whose positions lo + i*(it+1) land inside the result
    let (mut doff, mut soff) = (0isize, 0isize);
    let mut dstr = Vec::with_capacity(rank);
    let mut shape = Vec::with_capacity(rank);
    for k in 0..rank {
        if it[k] < 0 {
            return invalid("negative interior padding");
        }
        let step = it[k] + 1;
        let dim = x.shape()[k] as i64;
        let first = if lo[k] >= 0 {
            0
        } else {
            (-lo[k] + step - 1) / step
        };
        let mut last = dim; // exclusive
        while last > first && lo[k] + (last - 1) * step >= out.shape[k] as i64 {
            last -= 1;
        }
        let cnt = (last - first).max(0) as usize;
        shape.push(cnt);
        doff += (lo[k] + first * step) as isize * os[k];
        soff += first as isize * xs[k];
        dstr.push(step as isize * os[k]);
    }
    if shape.iter().all(|&c| c > 0) {
        assign_data(&mut data, doff, &dstr, x.data(), soff, &xs, &shape)?;
    }
    Ok(Tensor::from_parts(out.shape.as_slice(), data))
}
