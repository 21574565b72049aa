//! `convolution` (StableHLO spec, section "convolution") on the CPU: im2col in cache-sized
//! blocks and the GEMM of [`super::dot`] (`matrixmultiply`), reading both operands in place
//! through their strides (no canonicalizing transposes).
//!
//! Per group (feature or batch groups split the operands as the spec's definition does) the
//! convolution is `out[b, q, o] = Σ_{c, k} x[b, c, pos(q, k)] · w[c, k, o]` with, per spatial
//! dimension, `pos = q·stride + k·rhs_dilation − pad_low` read from `x` at `pos / lhs_dilation`
//! when that divides and lies inside the input (else the term is zero). Two lowerings:
//! - **rows** (forward and input-gradient convolutions: many output rows `(b, q)`, a short
//!   contraction `(k, c)`): output rows are cut into blocks; each block gathers its patch rows
//!   `[(b, q), (k, c)]` (runs over `c` copied with `x`'s feature stride, contiguous for NHWC)
//!   into a block-sized buffer and makes one GEMM with the kernel viewed (or copied) as
//!   `[(k, c), o]`. A 1×1, stride-1, unpadded convolution whose `(b, q)` rows are one stride
//!   in `x` is one GEMM on `x` itself, with no patch buffer. When `x`'s batch dimension is
//!   the contiguous one (a weight gradient the rows lowering serves), the patch is gathered
//!   transposed instead, per output position, in [`super::conv_rows_batch`].
//! - **contraction** (the weight gradients JAX emits as a convolution whose "batch" is the
//!   layer's input features and whose "feature" is the layer's batch: few output rows
//!   `(q, b)`, a contraction `(c, k)` over the whole batch and image): the contraction is cut
//!   into a fixed number of chunks, each accumulates `[(c, k), (q, b)]ᵀ · w[(c, k), o]` over
//!   its blocks, and the chunks' partial sums are added in chunk order. A chunk's result rows
//!   are further cut into parts computed as tasks of their own, so that the few chunks of a
//!   small batch still spread over the threads.
//!
//! The classes below and the patch runs of both lowerings depend on the shapes alone; they
//! come from [`super::conv_plan`], which keeps them across steps.
//!
//! Every GEMM goes through [`super::conv_gemm::gemm_blocks`], which cuts thin products into
//! `matrixmultiply`'s own 256-deep blocks (and computes narrow ones transposed) so that they
//! reach the unpacked kernel with the bits of one call.
//!
//! Lhs dilation (transposed convolutions and the input gradients of strided ones) is lowered
//! without its zeros: output positions are split per spatial dimension into phases
//! `(q·stride − pad_low) mod lhs_dilation`, and each phase contracts only over the kernel taps
//! that land on input elements, a dense sub-convolution whose rows are scattered back.
//!
//! Invariant: every block, chunk and phase is fixed by the shapes alone, never by the thread
//! count, and chunk partial sums are added in a fixed order, so results are deterministic.
//! Workspace: one patch block per running task (at most [`BLOCK_ELEMS`] elements), and the
//! kernel matrix when it is not a strided view.

use super::conv_gemm::gemm_blocks;
use super::conv_plan::Plan;
use super::dot::{group_strides, operand, Gemm, Mat};
use super::layout::{gather_view_into, istrides_of};
use super::{arity, Ctx};
use crate::buffer::Buf;
use crate::error::{invalid, OpError};
use crate::tensor::{Data, Tensor};
use ebb_ir::op::ConvSpec;
use ebb_ir::{DType, OpKind};
use std::borrow::Cow;
use std::mem::MaybeUninit;

/// Elements of one patch block (`f32`: 128 KiB, about a core's L2 share).
pub(crate) const BLOCK_ELEMS: usize = 1 << 15;

/// Most chunks a split contraction is cut into (partial sums: `CHUNKS × rows × o` elements).
const CHUNKS: usize = 16;

/// Contraction rows per chunk below which fewer chunks are made.
const CHUNK_MIN_ROWS: usize = 2048;

/// Tasks a split contraction aims at (chunks × row parts): a small batch makes few chunks,
/// whose result rows are then cut into parts (which never changes the bits: each result
/// element is still one chunk's blocks in order).
const PAR_TASKS: usize = 4;

/// Fewest result rows of a row part of a split contraction.
const PART_MIN_ROWS: usize = 64;

/// One spatial dimension of a convolution.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dim {
    /// Input size (before lhs dilation), output size, kernel size.
    xin: usize,
    q: usize,
    k: usize,
    stride: i64,
    pub(super) ldil: i64,
    rdil: i64,
    pad_lo: i64,
    /// Element stride of this dimension in `x`.
    sx: isize,
}

impl Dim {
    /// The input index read by output position `q` and kernel tap `k`, if any.
    fn input(&self, q: usize, k: usize) -> Option<usize> {
        let p = q as i64 * self.stride + k as i64 * self.rdil - self.pad_lo;
        (p >= 0 && p % self.ldil == 0 && p / self.ldil < self.xin as i64)
            .then_some((p / self.ldil) as usize)
    }
}

/// Output positions and kernel taps of one phase of one dimension: every pair reads an input
/// element or padding, never a dilation zero.
struct Phase {
    qs: Vec<usize>,
    ks: Vec<usize>,
}

/// The phases of one dimension (one phase with every position and tap without lhs dilation).
fn phases(d: &Dim) -> Vec<Phase> {
    if d.ldil == 1 {
        return vec![Phase {
            qs: (0..d.q).collect(),
            ks: (0..d.k).collect(),
        }];
    }
    (0..d.ldil)
        .filter_map(|r| {
            let qs: Vec<usize> = (0..d.q)
                .filter(|&q| (q as i64 * d.stride - d.pad_lo).rem_euclid(d.ldil) == r)
                .collect();
            let ks = (0..d.k)
                .filter(|&k| (k as i64 * d.rdil + r).rem_euclid(d.ldil) == 0)
                .collect();
            (!qs.is_empty()).then_some(Phase { qs, ks })
        })
        .collect()
}

/// A dense sub-convolution: the product of one phase per spatial dimension.
pub(super) struct Class {
    /// Flat output spatial index (row-major over all `q`) of each class position.
    pub(super) qpos: Vec<usize>,
    /// Flat kernel spatial index of each tap.
    pub(super) taps: Vec<usize>,
    /// `[qpos.len() × taps.len()]`: spatial element offset in `x` of (position, tap), or
    /// `None` for padding.
    pub(super) off: Vec<Option<isize>>,
}

/// Row-major flat indices (over the full `sizes`) of the product of `lists`, in the product's
/// row-major order.
fn product(lists: &[&[usize]], sizes: &[usize]) -> Vec<usize> {
    let mut flat = vec![0usize];
    for (l, &n) in lists.iter().zip(sizes) {
        flat = flat
            .iter()
            .flat_map(|&f| l.iter().map(move |&v| f * n + v))
            .collect();
    }
    flat
}

/// Advances the mixed-radix counter `idx` (digit `j` below `lens[j]`, last digit fastest).
fn next_index(idx: &mut [usize], lens: &[usize]) {
    for j in (0..idx.len()).rev() {
        idx[j] += 1;
        if idx[j] < lens[j] {
            return;
        }
        idx[j] = 0;
    }
}

/// The classes of a convolution (one without lhs dilation).
pub(super) fn classes(dims: &[Dim]) -> Vec<Class> {
    let per: Vec<Vec<Phase>> = dims.iter().map(phases).collect();
    let qsz: Vec<usize> = dims.iter().map(|d| d.q).collect();
    let ksz: Vec<usize> = dims.iter().map(|d| d.k).collect();
    let mut out = Vec::new();
    let mut pick = vec![0usize; dims.len()];
    loop {
        let ph: Vec<&Phase> = pick.iter().zip(&per).map(|(&i, p)| &p[i]).collect();
        let ql: Vec<&[usize]> = ph.iter().map(|p| p.qs.as_slice()).collect();
        let kl: Vec<&[usize]> = ph.iter().map(|p| p.ks.as_slice()).collect();
        let qpos = product(&ql, &qsz);
        let taps = product(&kl, &ksz);
        // per dimension: the offset of (position, tap) of this phase, `[qs × ks]`
        let tables: Vec<Vec<Option<isize>>> = dims
            .iter()
            .zip(&ph)
            .map(|(d, p)| {
                p.qs.iter()
                    .flat_map(|&q| {
                        p.ks.iter()
                            .map(move |&k| d.input(q, k).map(|i| i as isize * d.sx))
                    })
                    .collect()
            })
            .collect();
        let (qlen, klen): (Vec<usize>, Vec<usize>) =
            ph.iter().map(|p| (p.qs.len(), p.ks.len())).unzip();
        let mut off = Vec::with_capacity(qpos.len() * taps.len());
        let mut qi = vec![0usize; dims.len()];
        for _ in 0..qpos.len() {
            let mut ki = vec![0usize; dims.len()];
            for _ in 0..taps.len() {
                let mut o = Some(0isize);
                for j in 0..dims.len() {
                    o = match (o, tables[j][qi[j] * klen[j] + ki[j]]) {
                        (Some(a), Some(b)) => Some(a + b),
                        _ => None,
                    };
                }
                off.push(o);
                next_index(&mut ki, &klen);
            }
            next_index(&mut qi, &qlen);
        }
        out.push(Class { qpos, taps, off });
        // next combination
        let mut j = dims.len();
        loop {
            if j == 0 {
                return out;
            }
            j -= 1;
            pick[j] += 1;
            if pick[j] < per[j].len() {
                break;
            }
            pick[j] = 0;
        }
    }
}

/// `convolution` (see the module docs).
pub(crate) fn convolution(ctx: &Ctx, spec: &ConvSpec, ops: Vec<Tensor>) -> Result<Tensor, OpError> {
    arity(&ops, 2, OpKind::Convolution)?;
    let out = ctx.out0()?;
    let dn = &spec.dims;
    let (ib, ifd, isp) = (dn.input_batch, dn.input_feature, &dn.input_spatial);
    let (ko, ki, ksp) = (
        dn.kernel_output_feature,
        dn.kernel_input_feature,
        &dn.kernel_spatial,
    );
    let (ob, of, osp) = (dn.output_batch, dn.output_feature, &dn.output_spatial);
    let (x, w) = (&ops[0], &ops[1]);
    let sd = isp.len();
    if x.shape().len() != sd + 2
        || w.shape().len() != sd + 2
        || ksp.len() != sd
        || osp.len() != sd
        || out.shape.len() != sd + 2
    {
        return invalid("dimension_numbers do not match the operand ranks");
    }
    // each part must place batch, feature and spatial dimensions on distinct positions
    let is_perm = |a: usize, b: usize, sp: &[usize]| {
        let mut seen = vec![false; sd + 2];
        [a, b]
            .iter()
            .chain(sp)
            .all(|&d| d < sd + 2 && !std::mem::replace(&mut seen[d], true))
    };
    if !is_perm(ib, ifd, isp) || !is_perm(ko, ki, ksp) || !is_perm(ob, of, osp) {
        return invalid(format!(
            "dimension_numbers `{dn}` repeat or skip a dimension"
        ));
    }
    let get = |name: &str, v: &[i64]| -> Result<Vec<i64>, OpError> {
        if v.len() == sd {
            Ok(v.to_vec())
        } else {
            invalid(format!("`{name}` has {} entries, expected {sd}", v.len()))
        }
    };
    let strides = get("window_strides", &spec.window_strides)?;
    let ldil = get("lhs_dilation", &spec.lhs_dilation)?;
    let rdil = get("rhs_dilation", &spec.rhs_dilation)?;
    if spec.padding.len() != sd {
        return invalid(format!(
            "`padding` has {} entries, expected {sd}",
            spec.padding.len()
        ));
    }
    if strides.iter().chain(&ldil).chain(&rdil).any(|&v| v <= 0) {
        return invalid("strides and dilations must be positive");
    }
    let (xsh, wsh) = (x.shape(), w.shape());
    let (nb, c, o, i) = (xsh[ib], xsh[ifd], wsh[ko], wsh[ki]);
    let fgc = spec.feature_group_count.max(1) as usize;
    let bgc = spec.batch_group_count.max(1) as usize;
    let groups = fgc.max(bgc);
    if (fgc > 1 && bgc > 1) || c != i * fgc || o % groups != 0 || nb % bgc != 0 {
        return invalid("feature/batch group counts do not divide the dimensions");
    }
    let nb_out = nb / bgc;
    if out.shape[ob] != nb_out || out.shape[of] != o {
        return invalid("result batch/feature sizes do not match the operands");
    }
    let xst = istrides_of(xsh);
    let dims: Vec<Dim> = (0..sd)
        .map(|d| Dim {
            xin: xsh[isp[d]],
            q: out.shape[osp[d]],
            k: wsh[ksp[d]],
            stride: strides[d],
            ldil: ldil[d],
            rdil: rdil[d],
            pad_lo: spec.padding[d].0,
            sx: xst[isp[d]],
        })
        .collect();
    let geo = Geometry {
        dims,
        xshape: xsh.to_vec(),
        wshape: wsh.to_vec(),
        x_batch: ib,
        x_feature: ifd,
        x_spatial: isp.clone(),
        w_out: ko,
        w_in: ki,
        w_spatial: ksp.clone(),
        nb_out,
        i,
        o,
        og: o / groups,
        fgc,
        bgc,
    };
    let ct = if [x.dtype(), w.dtype(), out.dtype].contains(&DType::F64) {
        DType::F64
    } else {
        DType::F32
    };
    // The canonical result: [N', Q..., O] (rows) or [Q..., N', O] (contraction).
    let q: Vec<usize> = osp.iter().map(|&d| out.shape[d]).collect();
    let by_rows = geo.by_rows();
    let cshape: Vec<usize> = if by_rows {
        [nb_out]
            .into_iter()
            .chain(q.iter().copied())
            .chain([o])
            .collect()
    } else {
        q.iter().copied().chain([nb_out, o]).collect()
    };
    // strides of the output's dimensions in the canonical result
    let cst = istrides_of(&cshape);
    let mut ost = vec![0isize; sd + 2];
    let (b_at, q_at) = if by_rows { (0, 1) } else { (sd, 0) };
    ost[ob] = cst[b_at];
    ost[of] = cst[sd + 1];
    for (j, &d) in osp.iter().enumerate() {
        ost[d] = cst[q_at + j];
    }
    let direct = ost == istrides_of(&out.shape) && out.dtype == ct;
    let (xd, wd) = (x.data(), w.data());
    let at = (direct, ost.as_slice(), out.shape.as_slice());
    let data = match ct {
        DType::F64 => Data::F64(conv_into::<f64>(ctx, (xd, wd), &geo, at)?).into_dtype(out.dtype),
        _ => ctx.result_from_f32(conv_into::<f32>(ctx, (xd, wd), &geo, at)?, out.dtype),
    };
    Ok(Tensor::from_parts(out.shape.as_slice(), data))
}

/// A validated convolution on the operands' own layouts.
pub(super) struct Geometry {
    pub(super) dims: Vec<Dim>,
    xshape: Vec<usize>,
    pub(super) wshape: Vec<usize>,
    x_batch: usize,
    x_feature: usize,
    x_spatial: Vec<usize>,
    pub(super) w_out: usize,
    pub(super) w_in: usize,
    w_spatial: Vec<usize>,
    /// Result batch, kernel input features, output features, output features per group.
    pub(super) nb_out: usize,
    pub(super) i: usize,
    pub(super) o: usize,
    pub(super) og: usize,
    pub(super) fgc: usize,
    pub(super) bgc: usize,
}

impl Geometry {
    /// Every number the geometry holds, in a fixed order: equal keys, equal geometries.
    pub(super) fn key(&self) -> Vec<i64> {
        let mut k: Vec<i64> = Vec::with_capacity(8 * self.dims.len() + 32);
        for d in &self.dims {
            k.extend([
                d.xin as i64,
                d.q as i64,
                d.k as i64,
                d.stride,
                d.ldil,
                d.rdil,
                d.pad_lo,
            ]);
            k.push(d.sx as i64);
        }
        let lists = [&self.xshape, &self.wshape, &self.x_spatial, &self.w_spatial];
        for l in lists {
            k.push(l.len() as i64);
            k.extend(l.iter().map(|&v| v as i64));
        }
        k.extend(
            [
                self.x_batch,
                self.x_feature,
                self.w_out,
                self.w_in,
                self.nb_out,
                self.i,
                self.o,
                self.og,
                self.fgc,
                self.bgc,
            ]
            .map(|v| v as i64),
        );
        k
    }
    pub(super) fn q(&self) -> usize {
        self.dims.iter().map(|d| d.q).product()
    }
    fn k(&self) -> usize {
        self.dims.iter().map(|d| d.k).product()
    }
    /// Whether the rows lowering serves (else the contraction one, see the module docs).
    pub(super) fn by_rows(&self) -> bool {
        let rows = self.nb_out * self.q();
        let contraction = self.i * self.k();
        contraction <= 4 * rows || rows > 4096
    }
    /// Element strides of `x`'s batch and feature dimensions.
    pub(super) fn x_strides(&self) -> (isize, isize) {
        let xst = istrides_of(&self.xshape);
        (xst[self.x_batch], xst[self.x_feature])
    }
    /// `(x offset, kernel output-feature offset)` of group `g`.
    fn group_offsets(&self, g: usize) -> (usize, usize) {
        let xst = istrides_of(&self.xshape);
        let xo = if self.bgc > 1 {
            g * self.nb_out * xst[self.x_batch] as usize
        } else if self.fgc > 1 {
            g * self.i * xst[self.x_feature] as usize
        } else {
            0
        };
        (xo, g * self.og)
    }
    /// The element offset in the kernel of each flat spatial tap of `taps` (row-major over the
    /// kernel's spatial dimensions).
    pub(super) fn tap_offsets(&self, taps: &[usize]) -> Vec<isize> {
        let wst = istrides_of(&self.wshape);
        let ksz: Vec<usize> = self.w_spatial.iter().map(|&d| self.wshape[d]).collect();
        taps.iter()
            .map(|&t| {
                let mut rem = t;
                let mut off = 0isize;
                for (j, &d) in self.w_spatial.iter().enumerate().rev() {
                    off += (rem % ksz[j]) as isize * wst[d];
                    rem /= ksz[j];
                }
                off
            })
            .collect()
    }

    /// The kernel of group `g` restricted to `taps` as a `[rows, og]` matrix whose rows are
    /// `(tap, c)` (`tap_major`) or `(c, tap)`: a strided view when the rows are one stride of
    /// the kernel's own buffer (all taps), else a copy.
    fn kernel<'a, T: Gemm>(
        &self,
        w: &'a [T],
        g: usize,
        taps: &[usize],
        tap_major: bool,
    ) -> (Cow<'a, [T]>, Mat) {
        let wst = istrides_of(&self.wshape);
        let o0 = g * self.og;
        if taps.len() == self.k() {
            let rows: Vec<usize> = if tap_major {
                self.w_spatial.iter().copied().chain([self.w_in]).collect()
            } else {
                [self.w_in]
                    .into_iter()
                    .chain(self.w_spatial.iter().copied())
                    .collect()
            };
            if let Some([_, rs, cs]) = group_strides(&self.wshape, [&[], &rows, &[self.w_out]]) {
                let m = Mat {
                    off: o0 * wst[self.w_out] as usize,
                    rs,
                    cs,
                };
                return (Cow::Borrowed(w), m);
            }
        }
        let tap_off = self.tap_offsets(taps);
        let (so, si) = (wst[self.w_out], wst[self.w_in]);
        let mut v = Vec::with_capacity(taps.len() * self.i * self.og);
        let mut push_row = |base: isize| {
            for oo in 0..self.og {
                v.push(w[(base + (o0 + oo) as isize * so) as usize]);
            }
        };
        if tap_major {
            for &t in &tap_off {
                for cc in 0..self.i {
                    push_row(t + cc as isize * si);
                }
            }
        } else {
            for cc in 0..self.i {
                for &t in &tap_off {
                    push_row(t + cc as isize * si);
                }
            }
        }
        let m = Mat {
            off: 0,
            rs: self.og as isize,
            cs: 1,
        };
        (Cow::Owned(v), m)
    }
}

/// Writes `dst.len()` elements of `x` from `src` with stride `s` into `dst` (`None`: zeros):
/// every element of `dst` is initialized.
#[inline]
pub(super) fn run<T: Copy + Default>(
    x: &[T],
    src: Option<isize>,
    s: isize,
    dst: &mut [MaybeUninit<T>],
) {
    match src {
        None => dst.fill(MaybeUninit::new(T::default())),
        Some(o) if s == 1 => {
            let o = o as usize;
            copy_run(&x[o..o + dst.len()], dst);
        }
        Some(o) => {
            for (j, v) in dst.iter_mut().enumerate() {
                v.write(x[(o + j as isize * s) as usize]);
            }
        }
    }
}

/// Copies a contiguous run in blocks of 8 elements (moves inlined: the runs are one pixel's
/// channels, often 16–64 elements, where a `memmove` call costs more than the copy).
#[inline]
fn copy_run<T: Copy>(src: &[T], dst: &mut [MaybeUninit<T>]) {
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (a, b) in (&mut d).zip(&mut s) {
        for j in 0..8 {
            a[j].write(b[j]);
        }
    }
    for (a, &b) in d.into_remainder().iter_mut().zip(s.remainder()) {
        a.write(b);
    }
}

/// The first `len` elements of `buf`'s capacity, filled by `fill` (which must initialize every
/// element it is given), as `buf`'s contents: a patch buffer with no zeroing pass.
pub(super) fn filled<T>(
    buf: &mut Vec<T>,
    len: usize,
    fill: impl FnOnce(&mut [MaybeUninit<T>]),
) -> &[T] {
    buf.clear();
    buf.reserve(len);
    fill(&mut buf.spare_capacity_mut()[..len]);
    // SAFETY: `fill` initialized the `len` elements (every caller writes each of them through
    // `run`, whose runs tile the rows).
    unsafe { buf.set_len(len) };
    buf
}

/// Checks that every patch read of `class` stays inside `x` (runs of `len` with stride `s`
/// from `base + b·sb + off` for `b < nb`).
fn reads_fit(
    class: &Class,
    xlen: usize,
    base: usize,
    (nb, sb): (usize, isize),
    (len, s): (usize, isize),
) -> bool {
    let hi = class.off.iter().flatten().max().copied().unwrap_or(0);
    let lo = class.off.iter().flatten().min().copied().unwrap_or(0);
    let span = |n: usize, st: isize| st.max(0) * n.saturating_sub(1) as isize;
    lo >= 0
        && sb >= 0
        && s >= 0
        && (base as isize + hi + span(nb, sb) + span(len, s)) < xlen as isize
}

/// The convolution into the op's result buffer (of `shape`): computed there when the
/// canonical layout is the result's (`direct`), else into a recycled canonical buffer whose
/// view `ost` is gathered into it (the canonical buffer goes back to the pool).
fn conv_into<T: Gemm>(
    ctx: &Ctx,
    (xd, wd): (&Data, &Data),
    g: &Geometry,
    (direct, ost, shape): (bool, &[isize], &[usize]),
) -> Result<Buf<T>, OpError> {
    let n_out: usize = shape.iter().product();
    let r = conv_typed::<T>(ctx, xd, wd, g, n_out, direct)?;
    if direct {
        return Ok(r);
    }
    let res = gather_view_into(&r, 0, ost, shape, ctx.take_vec::<T>(n_out))?;
    ctx.pool.put(T::wrap(r));
    Ok(res)
}

/// The convolution in the canonical result layout (see [`convolution`]); `n_out` elements,
/// written into the op's result buffer when `direct`, else into a recycled one.
fn conv_typed<T: Gemm>(
    ctx: &Ctx,
    xd: &Data,
    wd: &Data,
    g: &Geometry,
    n_out: usize,
    direct: bool,
) -> Result<Buf<T>, OpError> {
    let x = operand::<T>(xd);
    let w = operand::<T>(wd);
    // Stale contents: every class writes its outputs.
    let mut out: Buf<T> = if direct {
        ctx.take_vec::<T>(n_out)
    } else {
        ctx.pool.take_vec::<T>(n_out)
    };
    if n_out == 0 {
        return Ok(out);
    }
    let plan = super::conv_plan::plan(g);
    if super::conv_depthwise::depthwise(&x, &w, g, &plan.classes, &mut out)? {
        return Ok(out);
    }
    let groups = g.fgc.max(g.bgc);
    for grp in 0..groups {
        for c in 0..plan.classes.len() {
            if g.by_rows() {
                rows_class(&x, &w, g, grp, (&plan, c), &mut out)?;
            } else {
                contraction_class(&x, &w, g, grp, (&plan, c), &mut out)?;
            }
        }
    }
    Ok(out)
}

/// The patch row of each class position as runs of `x` (start offset or `None` for zeros,
/// length): one run of `ci` elements per tap, neighbours merged where they continue each
/// other (two padding runs, or two taps whose runs are adjacent in `x`, as the taps of one
/// kernel row are in a channels-last image).
pub(super) struct Runs {
    /// Runs of position `qi`: `runs[starts[qi]..starts[qi + 1]]`.
    starts: Vec<usize>,
    runs: Vec<(Option<isize>, usize)>,
}

impl Runs {
    /// The runs of `class` for `ci` features `sc` apart in `x`.
    fn of(class: &Class, ci: usize, sc: isize) -> Runs {
        let nt = class.taps.len();
        let mut starts = Vec::with_capacity(class.qpos.len() + 1);
        let mut runs: Vec<(Option<isize>, usize)> = Vec::new();
        for qi in 0..class.qpos.len() {
            starts.push(runs.len());
            let first = runs.len();
            for &t in &class.off[qi * nt..(qi + 1) * nt] {
                if runs.len() > first {
                    let (src, len) = runs[runs.len() - 1];
                    let continues = match (src, t) {
                        (None, None) => true,
                        (Some(a), Some(b)) => sc == 1 && b == a + len as isize,
                        _ => false,
                    };
                    if continues {
                        let last = runs.len() - 1;
                        runs[last].1 += ci;
                        continue;
                    }
                }
                runs.push((t, ci));
            }
        }
        starts.push(runs.len());
        Runs { starts, runs }
    }
}

/// The columns `[p0, p0 + m)` (result rows `(q, b)`, `b` fastest) of the contraction lowering's
/// patch rows, per kernel tap: runs `(x offset or None for zeros, first column from p0,
/// length)` over `b` with `x`'s batch stride, neighbours merged where they continue each other
/// (two padding runs, or consecutive positions whose runs are adjacent in `x`, as the
/// neighbouring taps of one kernel row of a channels-last image are).
pub(super) struct ColumnRuns {
    /// Runs of tap `t`: `runs[starts[t]..starts[t + 1]]`.
    starts: Vec<usize>,
    runs: Vec<(Option<isize>, usize, usize)>,
}

impl ColumnRuns {
    /// The runs of `class` for columns `[p0, p0 + m)` of `nbo` batch elements `sb` apart.
    fn of(class: &Class, (p0, m): (usize, usize), nbo: usize, sb: isize) -> ColumnRuns {
        let nt = class.taps.len();
        let mut starts = Vec::with_capacity(nt + 1);
        let mut runs: Vec<(Option<isize>, usize, usize)> = Vec::new();
        for t in 0..nt {
            starts.push(runs.len());
            let first = runs.len();
            let mut j = 0;
            while j < m {
                let (qi, b) = ((p0 + j) / nbo, (p0 + j) % nbo);
                let len = (nbo - b).min(m - j);
                let src = class.off[qi * nt + t].map(|v| v + b as isize * sb);
                let last = runs.len().checked_sub(1).filter(|&l| l >= first);
                let continues = last.is_some_and(|l| match (runs[l].0, src) {
                    (None, None) => true,
                    (Some(a), Some(s)) => s == a + runs[l].2 as isize * sb,
                    _ => false,
                });
                match last {
                    Some(l) if continues => runs[l].2 += len,
                    _ => runs.push((src, j, len)),
                }
                j += len;
            }
        }
        starts.push(runs.len());
        ColumnRuns { starts, runs }
    }

    /// The runs of tap `t`.
    fn of_tap(&self, t: usize) -> &[(Option<isize>, usize, usize)] {
        &self.runs[self.starts[t]..self.starts[t + 1]]
    }
}

/// The rows lowering of one group and class into `out` (`[N', Q, O]`).
fn rows_class<T: Gemm>(
    x: &[T],
    w: &[T],
    g: &Geometry,
    grp: usize,
    (plan, cid): (&Plan, usize),
    out: &mut [T],
) -> Result<(), OpError> {
    let class = &plan.classes[cid];
    let ((sb, sc), (xo, o0)) = (g.x_strides(), g.group_offsets(grp));
    let (nq, nt, ci, og, o) = (class.qpos.len(), class.taps.len(), g.i, g.og, g.o);
    let qall = g.q();
    let rows = g.nb_out * nq;
    let kc = nt * ci;
    let single = nq == qall;
    // 1x1, stride 1, unpadded, rows one stride of x: x is the patch matrix
    let identity = single
        && nt == 1
        && g.dims
            .iter()
            .all(|d| d.q == d.xin && d.stride == 1 && d.pad_lo == 0 && d.ldil == 1);
    let xrows: Vec<usize> = [g.x_batch]
        .into_iter()
        .chain(g.x_spatial.iter().copied())
        .collect();
    let xview = if identity {
        group_strides(&g.xshape, [&[], &xrows, &[g.x_feature]]).map(|[_, rs, _]| Mat {
            off: xo,
            rs,
            cs: sc,
        })
    } else {
        None
    };
    if !reads_fit(class, x.len(), xo, (g.nb_out, sb), (ci, sc)) {
        return invalid("internal: convolution patch reads out of bounds");
    }
    let (wm, wv) = g.kernel(w, grp, &class.taps, true);
    if xview.is_none() && sb == 1 && sc != 1 {
        let at = (xo, o0);
        return super::conv_rows_batch::rows_by_batch(x, (&wm, wv), g, at, class, out);
    }
    let rb = (BLOCK_ELEMS / kc.max(1)).max(64).min(rows.max(1));
    let runs = plan.rows(cid, || Runs::of(class, ci, sc));
    // block of rows [r0, r0 + n) into `cc` (row stride ldc, og columns)
    let block = |r0: usize, n: usize, cc: &mut [T], ldc: usize| -> Result<(), OpError> {
        if let Some(xv) = xview {
            let av = Mat {
                off: xv.off + r0 * xv.rs as usize,
                ..xv
            };
            return gemm_blocks((n, kc, og), x, av, &wm, wv, cc, ldc, false, &mut Vec::new());
        }
        // Each row is `nt` runs of `ci` elements (`kc` in all), merged where contiguous.
        let mut buf = Vec::new();
        let col = filled(&mut buf, n * kc, |col| {
            for (r, crow) in col.chunks_mut(kc.max(1)).enumerate().take(n) {
                let (b, qi) = ((r0 + r) / nq, (r0 + r) % nq);
                let base = (xo as isize) + b as isize * sb;
                let (rs, re) = (runs.starts[qi], runs.starts[qi + 1]);
                let mut at = 0;
                for &(src, len) in &runs.runs[rs..re] {
                    run(x, src.map(|v| v + base), sc, &mut crow[at..at + len]);
                    at += len;
                }
            }
        });
        let av = Mat {
            off: 0,
            rs: kc as isize,
            cs: 1,
        };
        gemm_blocks(
            (n, kc, og),
            col,
            av,
            &wm,
            wv,
            cc,
            ldc,
            false,
            &mut Vec::new(),
        )
    };
    if single {
        // rows are the result's own rows: write them in place, og of o columns
        let out = &mut out[..];
        return super::par::try_chunks_mut(out, rb * o, &|s, cb| {
            let r0 = s / o;
            let n = cb.len() / o;
            block(r0, n, &mut cb[o0..], o)
        });
    }
    let mut tmp = vec![T::default(); rows * og];
    super::par::try_chunks_mut(&mut tmp, rb * og, &|s, cb| {
        block(s / og, cb.len() / og, cb, og)
    })?;
    for (r, src) in tmp.chunks(og.max(1)).enumerate().take(rows) {
        let (b, qi) = (r / nq, r % nq);
        let at = (b * qall + class.qpos[qi]) * o + o0;
        out[at..at + og].copy_from_slice(src);
    }
    Ok(())
}

/// The contraction lowering of one group and class into `out` (`[Q, N', O]`).
fn contraction_class<T: Gemm>(
    x: &[T],
    w: &[T],
    g: &Geometry,
    grp: usize,
    (plan, cid): (&Plan, usize),
    out: &mut [T],
) -> Result<(), OpError> {
    let class = &plan.classes[cid];
    let ((sb, sc), (xo, o0)) = (g.x_strides(), g.group_offsets(grp));
    let (nq, nt, ci, og, o, nbo) = (class.qpos.len(), class.taps.len(), g.i, g.og, g.o, g.nb_out);
    let ncols = nq * nbo; // result rows of this class: (q, b)
    let kc = ci * nt; // contraction rows: (c, tap)
    if !reads_fit(class, x.len(), xo, (ci, sc), (nbo, sb)) {
        return invalid("internal: convolution patch reads out of bounds");
    }
    let (wm, wv) = g.kernel(w, grp, &class.taps, false);
    let chunks = (kc / CHUNK_MIN_ROWS).clamp(1, CHUNKS);
    let per_chunk = kc.div_ceil(chunks).max(1);
    let kb = (BLOCK_ELEMS / ncols.max(1)).max(128).min(per_chunk);
    // Each chunk's result rows are cut into `parts` tasks of `rp` rows (the last one may be
    // short), so that a small batch's few chunks still make several tasks; `partial` holds
    // `np = parts · rp` rows per chunk.
    let rp = ncols
        .div_ceil((PAR_TASKS / chunks).max(1))
        .max(PART_MIN_ROWS)
        .min(ncols.max(1));
    let parts = ncols.div_ceil(rp).max(1);
    let np = parts * rp;
    let mut partial = vec![T::default(); chunks * np * og];
    // The patch runs of each row part (the same for every chunk).
    let cols = plan.cols(cid, || {
        (0..parts)
            .map(|p| ColumnRuns::of(class, (p * rp, rp.min(ncols - p * rp)), nbo, sb))
            .collect()
    });
    super::par::try_chunks_mut(&mut partial, rp * og, &|s, acc| {
        let task = s / (rp * og);
        let (ch, p0) = (task / parts, (task % parts) * rp);
        let m = rp.min(ncols - p0);
        let (k0, k1) = (ch * per_chunk, ((ch + 1) * per_chunk).min(kc));
        let mut buf = Vec::with_capacity(kb * m);
        let mut scratch = Vec::new();
        let mut first = true;
        let mut r0 = k0;
        let cols = &cols[task % parts];
        while r0 < k1 {
            let n = kb.min(k1 - r0);
            // Each row holds the task's result rows `(q, b)` from `p0`: runs over `b`.
            let col = filled(&mut buf, n * m, |col| {
                let (mut cc, mut t) = (r0 / nt, r0 % nt);
                for crow in col.chunks_mut(m.max(1)).take(n) {
                    let base = xo as isize + cc as isize * sc;
                    for &(src, j, len) in cols.of_tap(t) {
                        run(x, src.map(|v| v + base), sb, &mut crow[j..j + len]);
                    }
                    t += 1;
                    if t == nt {
                        (cc, t) = (cc + 1, 0);
                    }
                }
            });
            let av = Mat {
                off: 0,
                rs: 1,
                cs: m as isize,
            };
            let bv = Mat {
                off: (wv.off as isize + r0 as isize * wv.rs) as usize,
                ..wv
            };
            gemm_blocks::<T>((m, n, og), col, av, &wm, bv, acc, og, !first, &mut scratch)?;
            first = false;
            r0 += n;
        }
        if first {
            acc.fill(T::default());
        }
        Ok::<(), OpError>(())
    })?;
    for qi in 0..nq {
        for b in 0..nbo {
            let row = qi * nbo + b;
            let at = (class.qpos[qi] * nbo + b) * o + o0;
            let dst = &mut out[at..at + og];
            dst.copy_from_slice(&partial[row * og..(row + 1) * og]);
            for ch in 1..chunks {
                let p = &partial[(ch * np + row) * og..(ch * np + row + 1) * og];
                for (d, &v) in dst.iter_mut().zip(p) {
                    *d += v;
                }
            }
        }
    }
    Ok(())
}
