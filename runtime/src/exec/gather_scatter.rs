//! `gather` and `scatter` with the full StableHLO semantics (spec, section "Ops"):
//! `offset_dims`/`collapsed_slice_dims`/`operand_batching_dims`/`start_indices_batching_dims`/
//! `start_index_map` for gather, `update_window_dims`/`inserted_window_dims`/
//! `input_batching_dims`/`scatter_indices_batching_dims`/`scatter_dims_to_operand_dims` for
//! scatter, and `index_vector_dim` (equal to the indices' rank for an implicit trailing
//! index vector).
//!
//! Both walk the batch (gather) or update-scatter (scatter) index space once; each index
//! yields one window, copied (gather) or combined (scatter) as a strided block. Gather clamps
//! start indices so the slice fits (spec); scatter does not clamp and skips update elements
//! whose result index is out of bounds (spec). Scatter bodies `add`/`multiply`/`maximum`/
//! `minimum`/`and`/`or` and overwriting bodies run as typed loops, others through the region.
//! Invariant: updates are applied in row-major update order, so results are deterministic
//! even with repeated indices.

use super::layout::{istrides_of, step, strides_of, WindowCopy};
use super::region::{Body, Monoid, RegionFn};
use super::scatter_window::{apply_windows, Window, WindowLoop};
use super::{arity, Ctx};
use crate::buffer::Buf;
use crate::error::{invalid, OpError};
use crate::tensor::{Data, Elem, Tensor};
use ebb_ir::op::{GatherDims, ScatterDims};
use ebb_ir::OpKind;

fn dims(v: &[i64], name: &str, rank: usize) -> Result<Vec<usize>, OpError> {
    v.iter()
        .map(|&d| {
            if d >= 0 && (d as usize) < rank {
                Ok(d as usize)
            } else {
                invalid(format!("`{name}`: dimension {d} out of range"))
            }
        })
        .collect()
}

/// Reads start index vectors out of an index tensor: for a batch multi-index (over the index
/// tensor's dimensions other than `index_vector_dim`, in order) the `nvec` components.
struct IndexReader {
    vals: Vec<i64>,
    /// Index-tensor strides of the batch dimensions, in order.
    batch_strides: Vec<usize>,
    /// Stride of `index_vector_dim` (0 when implicit).
    vec_stride: usize,
    nvec: usize,
}

impl IndexReader {
    fn new(idx: &Tensor, ivd: i64, nvec_expected: usize) -> Result<IndexReader, OpError> {
        let rank = idx.shape().len();
        if ivd < 0 || ivd as usize > rank {
            return invalid(format!(
                "index_vector_dim {ivd} out of range for rank {rank}"
            ));
        }
        let ivd = ivd as usize;
        let st = strides_of(idx.shape());
        let batch_strides = (0..rank).filter(|&d| d != ivd).map(|d| st[d]).collect();
        let (vec_stride, nvec) = if ivd < rank {
            (st[ivd], idx.shape()[ivd])
        } else {
            (0, 1)
        };
        if nvec != nvec_expected {
            return invalid(format!(
                "index vectors have {nvec} components, the index map {nvec_expected}"
            ));
        }
        if !idx.dtype().is_int() {
            return invalid(format!("indices must be integers, got {}", idx.dtype()));
        }
        Ok(IndexReader {
            vals: idx.data().to_i64_vec(),
            batch_strides,
            vec_stride,
            nvec,
        })
    }

    fn batch_rank(&self) -> usize {
        self.batch_strides.len()
    }

    fn read(&self, batch: &[usize], out: &mut Vec<i64>) {
        out.clear();
        let base: usize = batch
            .iter()
            .zip(&self.batch_strides)
            .map(|(i, s)| i * s)
            .sum();
        for j in 0..self.nvec {
            out.push(
                self.vals
                    .get(base + j * self.vec_stride)
                    .copied()
                    .unwrap_or(0),
            );
        }
    }
}

/// `full_batching_index` of the spec: operand dim -> position in the batch index.
fn batching_map(
    op_batch: &[usize],
    idx_batch: &[usize],
    ivd: usize,
    rank: usize,
) -> Result<Vec<Option<usize>>, OpError> {
    if op_batch.len() != idx_batch.len() {
        return invalid("operand and index batching dimension counts differ");
    }
    let mut m = vec![None; rank];
    for (&o, &s) in op_batch.iter().zip(idx_batch) {
        if s == ivd {
            return invalid("index_vector_dim cannot be a batching dimension");
        }
        m[o] = Some(if s < ivd { s } else { s - 1 });
    }
    Ok(m)
}

/// Maps a batch index to the (result, operand) offsets of its window.
type Plan<'a> = &'a dyn Fn(&[usize], &mut Vec<i64>) -> (isize, isize);

/// `gather` (see the module docs).
pub(crate) fn gather(ctx: &Ctx, gd: &GatherDims, ops: Vec<Tensor>) -> Result<Tensor, OpError> {
    arity(&ops, 2, OpKind::Gather)?;
    let (x, idx) = (&ops[0], &ops[1]);
    let out = ctx.out0()?;
    let (xr, rr) = (x.shape().len(), out.shape.len());
    let offset_dims = dims(&gd.offset_dims, "offset_dims", rr)?;
    let collapsed = dims(&gd.collapsed_slice_dims, "collapsed_slice_dims", xr)?;
    let op_batch = dims(&gd.operand_batching_dims, "operand_batching_dims", xr)?;
    let idx_batch = dims(
        &gd.start_indices_batching_dims,
        "start_indices_batching_dims",
        idx.shape().len(),
    )?;
    let start_map = dims(&gd.start_index_map, "start_index_map", xr)?;
    let ivd = gd.index_vector_dim;
    let sizes: Vec<i64> = gd
        .slice_sizes
        .iter()
        .map(|d| d.eval(ctx.bindings))
        .collect::<Result<_, _>>()?;
    if sizes.len() != xr
        || sizes
            .iter()
            .zip(x.shape())
            .any(|(&s, &d)| s < 0 || s as usize > d)
    {
        return invalid("slice_sizes must be within the operand shape");
    }
    let reader = IndexReader::new(idx, ivd, start_map.len())?;
    let batch_dims: Vec<usize> = (0..rr).filter(|d| !offset_dims.contains(d)).collect();
    let window_op_dims: Vec<usize> = (0..xr)
        .filter(|d| !collapsed.contains(d) && !op_batch.contains(d))
        .collect();
    if batch_dims.len() != reader.batch_rank() || window_op_dims.len() != offset_dims.len() {
        return invalid("offset/collapsed/batching dimensions do not match the ranks");
    }
    let bmap = batching_map(&op_batch, &idx_batch, ivd as usize, xr)?;
    let bshape: Vec<usize> = batch_dims.iter().map(|&d| out.shape[d]).collect();
    let wshape: Vec<usize> = offset_dims.iter().map(|&d| out.shape[d]).collect();
    let (xst, rst) = (istrides_of(x.shape()), istrides_of(&out.shape));
    let wdst: Vec<isize> = offset_dims.iter().map(|&d| rst[d]).collect();
    let wsrc: Vec<isize> = window_op_dims.iter().map(|&d| xst[d]).collect();
    // Every result element lies in exactly one window: the result buffer (recycled, or the
    // result's arena range) is overwritten in full.
    fn go<T: Elem>(
        src: &[T],
        mut res: Buf<T>,
        bshape: &[usize],
        plan: Plan,
        window: &WindowCopy,
    ) -> Result<Buf<T>, OpError> {
        let mut buf = Vec::new();
        // The batch index, counted up in row-major order.
        let mut bidx = vec![0usize; bshape.len()];
        let zeros = vec![0isize; bshape.len()];
        for b in 0..bshape.iter().product::<usize>() {
            if b > 0 {
                step(&mut bidx, bshape, &zeros);
            }
            let (roff, xoff) = plan(&bidx, &mut buf);
            // (A window consecutive in both, an embedding row, is one slice copy.)
            window.copy(&mut res, roff, src, xoff)?;
        }
        Ok(res)
    }
    let plan = |bidx: &[usize], buf: &mut Vec<i64>| -> (isize, isize) {
        reader.read(bidx, buf);
        let mut xoff = 0isize;
        for (j, &d) in start_map.iter().enumerate() {
            let hi = x.shape()[d] as i64 - sizes[d];
            xoff += buf[j].clamp(0, hi.max(0)) as isize * xst[d];
        }
        for (d, m) in bmap.iter().enumerate() {
            if let Some(p) = m {
                xoff += bidx.get(*p).copied().unwrap_or(0) as isize * xst[d];
            }
        }
        let roff = bidx
            .iter()
            .zip(&batch_dims)
            .map(|(&i, &d)| i as isize * rst[d])
            .sum();
        (roff, xoff)
    };
    let n_out: usize = out.shape.iter().product();
    let window = WindowCopy::new(&wdst, &wsrc, &wshape);
    let data = crate::tensor::map_same!(x.data(), v => {
        go(v, ctx.take_vec(n_out), &bshape, &plan, &window)?
    });
    Ok(Tensor::from_parts(out.shape.as_slice(), data))
}

/// `scatter` (see the module docs): operands are the inputs, the scatter indices, then as
/// many updates as inputs.
pub(crate) fn scatter(
    ctx: &Ctx,
    sd: &ScatterDims,
    ops: Vec<Tensor>,
) -> Result<Vec<Tensor>, OpError> {
    let n = ops.len().saturating_sub(1) / 2;
    if n == 0 || ops.len() != 2 * n + 1 || ctx.out.len() != n {
        return invalid("expects inputs, scatter_indices and as many updates as inputs");
    }
    let mut it = ops.into_iter();
    let mut inputs: Vec<Tensor> = it.by_ref().take(n).collect();
    let idx = it
        .next()
        .ok_or_else(|| OpError::Invalid("missing indices".into()))?;
    let updates: Vec<Tensor> = it.collect();
    let xshape = inputs[0].shape().to_vec();
    let ushape = updates[0].shape().to_vec();
    if inputs.iter().any(|t| t.shape() != xshape.as_slice())
        || updates.iter().any(|t| t.shape() != ushape.as_slice())
    {
        return invalid("inputs (and updates) must share one shape");
    }
    let (xr, ur) = (xshape.len(), ushape.len());
    let uwd = dims(&sd.update_window_dims, "update_window_dims", ur)?;
    let inserted = dims(&sd.inserted_window_dims, "inserted_window_dims", xr)?;
    let in_batch = dims(&sd.input_batching_dims, "input_batching_dims", xr)?;
    let idx_batch = dims(
        &sd.scatter_indices_batching_dims,
        "scatter_indices_batching_dims",
        idx.shape().len(),
    )?;
    let to_op = dims(
        &sd.scatter_dims_to_operand_dims,
        "scatter_dims_to_operand_dims",
        xr,
    )?;
    let ivd = sd.index_vector_dim;
    let reader = IndexReader::new(&idx, ivd, to_op.len())?;
    let scatter_dims: Vec<usize> = (0..ur).filter(|d| !uwd.contains(d)).collect();
    let window_op_dims: Vec<usize> = (0..xr)
        .filter(|d| !inserted.contains(d) && !in_batch.contains(d))
        .collect();
    if scatter_dims.len() != reader.batch_rank() || window_op_dims.len() != uwd.len() {
        return invalid("window/inserted/batching dimensions do not match the ranks");
    }
    let bmap = batching_map(&in_batch, &idx_batch, ivd as usize, xr)?;
    let sshape: Vec<usize> = scatter_dims.iter().map(|&d| ushape[d]).collect();
    let wshape: Vec<usize> = uwd.iter().map(|&d| ushape[d]).collect();
    let ust = strides_of(&ushape);
    let xst = strides_of(&xshape);
    if ctx.node.regions.is_empty() {
        return invalid("scatter without a body");
    }
    let f = RegionFn::of(ctx, 0, "body")?;
    // strides of the window dimensions in the result and in the updates
    let wxst: Vec<usize> = window_op_dims.iter().map(|&d| xst[d]).collect();
    let wust: Vec<usize> = uwd.iter().map(|&d| ust[d]).collect();
    let mut extent = vec![1usize; xr];
    for (k, &d) in window_op_dims.iter().enumerate() {
        extent[d] = wshape[k];
    }
    let mut start = Vec::new();
    let mut base = vec![0i64; xr];
    let ns: usize = sshape.iter().product();
    // every window in update order: its origins where it lies inside the result, else its
    // in-bounds (result offset, update offset) pairs in `part`
    let mut windows: Vec<Window> = Vec::with_capacity(ns);
    let mut part: Vec<(usize, usize)> = Vec::new();
    // The scatter index and its update offset, counted up by [`step`] (row-major order).
    let sst: Vec<isize> = scatter_dims.iter().map(|&d| ust[d] as isize).collect();
    let mut sidx = vec![0usize; sshape.len()];
    let mut ubase = 0usize;
    for s in 0..ns {
        if s > 0 {
            ubase = ubase.wrapping_add_signed(step(&mut sidx, &sshape, &sst));
        }
        reader.read(&sidx, &mut start);
        base.iter_mut().for_each(|b| *b = 0);
        for (j, &d) in to_op.iter().enumerate() {
            base[d] += start[j];
        }
        for (d, m) in bmap.iter().enumerate() {
            if let Some(p) = m {
                base[d] += sidx.get(*p).copied().unwrap_or(0) as i64;
            }
        }
        let inside =
            (0..xr).all(|d| base[d] >= 0 && base[d] + extent[d] as i64 <= xshape[d] as i64);
        if inside {
            let xbase: usize = base.iter().zip(&xst).map(|(&i, &st)| i as usize * st).sum();
            windows.push(Window::Full { x: xbase, u: ubase });
            continue;
        }
        // partly out of bounds: check element by element (spec: skip out-of-bounds elements)
        let first = part.len();
        let mut widx = vec![0usize; wshape.len()];
        for w in 0..wshape.iter().product::<usize>() {
            if w > 0 {
                odometer(&mut widx, &wshape);
            }
            let mut full = base.clone();
            for (k, &d) in window_op_dims.iter().enumerate() {
                full[d] += widx[k] as i64;
            }
            if full
                .iter()
                .zip(&xshape)
                .any(|(&i, &dim)| i < 0 || i >= dim as i64)
            {
                continue;
            }
            let xo: usize = full.iter().zip(&xst).map(|(&i, &st)| i as usize * st).sum();
            let uo: usize = widx.iter().zip(&wust).map(|(&i, &st)| i * st).sum();
            part.push((xo, ubase + uo));
        }
        windows.push(Window::Pairs {
            start: first,
            end: part.len(),
        });
    }
    let typed = |m: Option<Monoid>, x: &mut Tensor| {
        // An input that another value shares is copied first, into a recycled buffer (or the
        // result's arena range), as `dynamic_update_slice` copies.
        if x.unique_data_mut().is_none() {
            let data = crate::tensor::map_same!(x.data(), v => {
                let mut b = ctx.take_vec(v.len());
                b.copy_from_slice(v);
                b
            });
            *x = Tensor::from_parts(x.shape(), data);
        }
        let lp = WindowLoop::new(&wshape, &wxst, &wust);
        apply_windows(x, &updates[0], &lp, &windows, &part, m)
    };
    match (&f.body, n) {
        (Body::Monoid(m), 1) => typed(Some(*m), &mut inputs[0])?,
        (Body::Overwrite, 1) => typed(None, &mut inputs[0])?,
        _ => {
            let pairs = all_pairs(&windows, &part, &wshape, &wxst, &wust);
            let mut datas: Vec<Data> = inputs.iter().map(|t| t.data().clone()).collect();
            let mut args = Vec::with_capacity(2 * n);
            for &(xo, uo) in &pairs {
                args.clear();
                for d in &datas {
                    args.push(
                        d.get(xo)
                            .ok_or_else(|| OpError::Invalid("index out of range".into()))?,
                    );
                }
                for u in &updates {
                    args.push(
                        u.data()
                            .get(uo)
                            .ok_or_else(|| OpError::Invalid("index out of range".into()))?,
                    );
                }
                let r = f.call(&args)?;
                for (d, s) in datas.iter_mut().zip(r) {
                    if !d.set(xo, s) {
                        return invalid(
                            "update computation returned a value of another element type",
                        );
                    }
                }
            }
            inputs = inputs
                .iter()
                .zip(datas)
                .map(|(t, d)| Tensor::from_parts(t.shape(), d))
                .collect();
        }
    }
    Ok(inputs)
}

/// The offsets of every element of a window of `shape` from the window's origin, in row-major
/// window order: `Σ idx[k] * a[k]` and `Σ idx[k] * b[k]` for each multi-index `idx` (strides
/// `a` in the result, `b` in the updates), counted up by [`step`] (no multi-index built per
/// element); empty when a dimension is 0.
fn window_offsets(shape: &[usize], a: &[usize], b: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let n: usize = shape.iter().product();
    let signed = |s: &[usize]| s.iter().map(|&x| x as isize).collect::<Vec<_>>();
    let (a, b) = (signed(a), signed(b));
    let (mut xs, mut us) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut ia, mut ib) = (vec![0usize; shape.len()], vec![0usize; shape.len()]);
    let (mut x, mut u) = (0isize, 0isize);
    for _ in 0..n {
        xs.push(x as usize);
        us.push(u as usize);
        x += step(&mut ia, shape, &a);
        u += step(&mut ib, shape, &b);
    }
    (xs, us)
}

/// The (result offset, update offset) of every in-bounds update element of `windows`, in
/// update order (a full window's from [`window_offsets`] of `wshape` with result strides
/// `wxst` and update strides `wust`; a partial one's from `part`).
fn all_pairs(
    windows: &[Window],
    part: &[(usize, usize)],
    wshape: &[usize],
    wxst: &[usize],
    wust: &[usize],
) -> Vec<(usize, usize)> {
    let (wx, wu) = window_offsets(wshape, wxst, wust);
    let mut pairs = Vec::new();
    for w in windows {
        match *w {
            Window::Full { x, u } => {
                pairs.extend(wx.iter().zip(&wu).map(|(&a, &b)| (x + a, u + b)));
            }
            Window::Pairs { start, end } => pairs.extend_from_slice(&part[start..end]),
        }
    }
    pairs
}

/// Advances the row-major multi-index `idx` over `shape` by one (wrapping to zeros at the
/// end).
fn odometer(idx: &mut [usize], shape: &[usize]) {
    for k in (0..shape.len()).rev() {
        idx[k] += 1;
        if idx[k] < shape[k] {
            return;
        }
        idx[k] = 0;
    }
}
