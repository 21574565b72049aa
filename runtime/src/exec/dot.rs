//! Contractions: `dot_general` (StableHLO spec, section "Ops") through a real GEMM (the
//! `matrixmultiply` crate's `sgemm`/`dgemm`, which take arbitrary strides); `convolution` is
//! lowered onto the same GEMM in [`super::conv`].
//!
//! `dot_general`: each operand is viewed as a batch × rows × columns matrix stack — lhs as
//! `[batch, M, K]` (batching, free, contracting dimensions), rhs as `[batch, K, N]`. When each
//! group of dimensions is contiguous in the operand the view is free (a transposed operand is
//! just other strides); otherwise the operand is first copied into that layout. The result
//! `[batch, M, N]` is exactly the StableHLO result layout (batch, lhs free, rhs free).
//!
//! `bf16`/`f16` operands are computed in `f32` and rounded once at the end; integers use a
//! wrapping `i64` triple loop. Invariant: work is split into blocks of output rows, or of
//! output columns when the result is wider than tall (each block packs its own slice of one
//! operand and the whole other one, so splitting the longer side packs the least), and every
//! output element is computed by one GEMM call over the same `k` products in the same order
//! whatever the thread count and the split (the packing GEMM's blocking depends on `k` alone,
//! and the kernel is chosen from the whole matrix's `{m, n}` and `k`): results are
//! deterministic and the same bits as one unsplit call. Thin `f32` products, where packing
//! costs more than it saves, go through [`super::gemm_direct`] instead (optimized builds),
//! which gives the packing GEMM's bits.

use super::layout::{gather_view, istrides_of, Dims};
use super::operands::Operands;
use super::small_k::{small_k, AddTo, Store, Widen};
use super::{arity, Ctx};
use crate::buffer::Buf;
use crate::error::{invalid, OpError};
use crate::tensor::{Data, Tensor};
use ebb_ir::op::DotDims;
use ebb_ir::{DType, OpKind};
use half::{bf16, f16};
use std::borrow::Cow;

/// Element types with a GEMM kernel.
pub(crate) trait Gemm:
    crate::tensor::Elem + std::ops::Mul<Output = Self> + std::ops::AddAssign
{
    /// `C = A·B` (`C += A·B` when `acc`) for raw strided matrices (no bounds checks: see
    /// [`gemm`]).
    ///
    /// # Safety
    /// All three views must lie inside their allocations and `c` must not alias `a` or `b`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn raw(
        m: usize,
        k: usize,
        n: usize,
        a: *const Self,
        rsa: isize,
        csa: isize,
        b: *const Self,
        rsb: isize,
        csb: isize,
        c: *mut Self,
        rsc: isize,
        csc: isize,
        acc: bool,
    );
    /// The buffer of `d` converted to this type.
    fn take(d: Data) -> Vec<Self>;
    /// `C = C + A·B` over a contraction of one depth block (`k <= 256`), each element of the
    /// product as [`Gemm::raw`] stores it without `acc`, added once to `C`'s (the bits of
    /// `add(c, a·b)`; the dot-accumulate form). By default [`Gemm::raw`] with `acc` (β = 1:
    /// `c + chain`), which is that wherever the kernel stores a chain as it is.
    ///
    /// # Safety
    /// As [`Gemm::raw`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn raw_add(
        (m, k, n): (usize, usize, usize),
        a: *const Self,
        (rsa, csa): (isize, isize),
        b: *const Self,
        (rsb, csb): (isize, isize),
        c: *mut Self,
        (rsc, csc): (isize, isize),
    ) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { Self::raw(m, k, n, a, rsa, csa, b, rsb, csb, c, rsc, csc, true) }
    }
}

impl Gemm for f32 {
    unsafe fn raw(
        m: usize,
        k: usize,
        n: usize,
        a: *const f32,
        rsa: isize,
        csa: isize,
        b: *const f32,
        rsb: isize,
        csb: isize,
        c: *mut f32,
        rsc: isize,
        csc: isize,
        acc: bool,
    ) {
        // Without packing where that gives `matrixmultiply`'s bits ([`direct`]).
        // SAFETY: forwarded from the caller's contract.
        if !acc
            && unsafe {
                direct(
                    (m, k, n),
                    a,
                    (rsa, csa),
                    b,
                    (rsb, csb),
                    c,
                    (rsc, csc),
                    false,
                )
            }
        {
            return;
        }
        let beta = if acc { 1.0 } else { 0.0 };
        // SAFETY: forwarded from the caller's contract.
        unsafe { matrixmultiply::sgemm(m, k, n, 1.0, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc) }
    }
    fn take(d: Data) -> Vec<f32> {
        match d {
            Data::F32(v) => v.into_vec(),
            d => match d.convert(DType::F32) {
                Data::F32(v) => v.into_vec(),
                _ => Vec::new(),
            },
        }
    }
    /// The unpacked kernel where [`Gemm::raw`] would use it (it adds each stored element);
    /// else `matrixmultiply` with β = 1, whose `c + chain` differs from `c` plus the stored
    /// product only on the AVX2+FMA kernel, which stores a chain ending at `-0` (products that
    /// underflow) as `+0` (`fma(1, chain, +0)`), so that a `-0` accumulator would keep `-0`
    /// where the sum is `+0`. That kernel's stored product is never `-0`, so neither is a sum
    /// with it: there every `-0` of `C` becomes `+0`.
    unsafe fn raw_add(
        (m, k, n): (usize, usize, usize),
        a: *const f32,
        (rsa, csa): (isize, isize),
        b: *const f32,
        (rsb, csb): (isize, isize),
        c: *mut f32,
        (rsc, csc): (isize, isize),
    ) {
        // SAFETY: forwarded from the caller's contract.
        if unsafe { direct((m, k, n), a, (rsa, csa), b, (rsb, csb), c, (rsc, csc), true) } {
            return;
        }
        // SAFETY: forwarded from the caller's contract.
        unsafe { matrixmultiply::sgemm(m, k, n, 1.0, a, rsa, csa, b, rsb, csb, 1.0, c, rsc, csc) }
        if super::gemm_direct::stores_plus_zero() {
            for i in 0..m as isize {
                for j in 0..n as isize {
                    // SAFETY: element (i, j) of the caller's view of `C`.
                    // `-0 + 0 = +0`; every other value unchanged.
                    unsafe { *c.offset(i * rsc + j * csc) += 0.0 };
                }
            }
        }
    }
}

/// `C = A·B` (or `C += A·B` when `add`) through the unpacked kernel
/// ([`super::gemm_direct::sgemm`]) where it gives `matrixmultiply`'s bits: `C` of unit column
/// stride, its rows `rsc >= 0` apart, in optimized builds only (at the test profile's opt-level
/// 1 the unpacked kernel is several times slower than `matrixmultiply`, a dependency built at
/// opt-level 2; the bits are the same either way, `exec_gemm_direct` tests the kernel itself).
/// Whether it did; else nothing was written.
///
/// # Safety
/// As [`Gemm::raw`].
#[allow(clippy::too_many_arguments)]
unsafe fn direct(
    (m, k, n): (usize, usize, usize),
    a: *const f32,
    (rsa, csa): (isize, isize),
    b: *const f32,
    (rsb, csb): (isize, isize),
    c: *mut f32,
    (rsc, csc): (isize, isize),
    add: bool,
) -> bool {
    if cfg!(debug_assertions) || csc != 1 || rsc < 0 {
        return false;
    }
    // SAFETY: forwarded from the caller's contract (`C` of unit column stride, its rows `rsc`
    // apart).
    unsafe {
        super::gemm_direct::sgemm(
            (m, k, n),
            a,
            (rsa, csa),
            b,
            (rsb, csb),
            c,
            rsc as usize,
            add,
        )
    }
}

impl Gemm for f64 {
    unsafe fn raw(
        m: usize,
        k: usize,
        n: usize,
        a: *const f64,
        rsa: isize,
        csa: isize,
        b: *const f64,
        rsb: isize,
        csb: isize,
        c: *mut f64,
        rsc: isize,
        csc: isize,
        acc: bool,
    ) {
        let beta = if acc { 1.0 } else { 0.0 };
        // SAFETY: forwarded from the caller's contract.
        unsafe { matrixmultiply::dgemm(m, k, n, 1.0, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc) }
    }
    fn take(d: Data) -> Vec<f64> {
        match d {
            Data::F64(v) => v.into_vec(),
            d => match d.convert(DType::F64) {
                Data::F64(v) => v.into_vec(),
                _ => Vec::new(),
            },
        }
    }
}

/// A strided `rows × cols` matrix view into a buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mat {
    pub(crate) off: usize,
    pub(crate) rs: isize,
    pub(crate) cs: isize,
}

impl Mat {
    /// The view moved by `by` elements (a batch element's, a row block's).
    ///
    /// # Errors
    /// A negative offset (an internal error).
    fn shifted(self, by: isize) -> Result<Mat, OpError> {
        match usize::try_from(self.off as isize + by) {
            Ok(off) => Ok(Mat { off, ..self }),
            Err(_) => invalid("internal: negative GEMM offset"),
        }
    }
}

fn view_fits(len: usize, v: Mat, rows: usize, cols: usize) -> bool {
    if rows == 0 || cols == 0 {
        return true;
    }
    let last =
        v.off as i128 + v.rs as i128 * (rows as i128 - 1) + v.cs as i128 * (cols as i128 - 1);
    v.rs >= 0 && v.cs >= 0 && last < len as i128
}

/// `c[m×n] (row-major) = a[m×k] · b[k×n]`, checking every view before calling the kernel.
/// Operands narrower than `T` go through [`small_k`] only (see [`any_packing`]); one that
/// would need the packing GEMM is an internal error.
#[allow(clippy::too_many_arguments)]
fn gemm<S: Widen<T>, T: Gemm, O: Store<T>>(
    m: usize,
    k: usize,
    n: usize,
    a: &[S],
    av: Mat,
    b: &[S],
    bv: Mat,
    c: &mut [O],
) -> Result<(), OpError> {
    if c.len() != m * n {
        return invalid("internal: GEMM result size");
    }
    // The kernel is chosen from {m, n} and k alone, so that `A·B` and `(Bᵀ·Aᵀ)ᵀ` (a dot whose
    // operands a rewrite swapped, `fold_transpose_dot`'s result rule) give the same bits:
    // both kernels sum each element over `p = 0..k` in order, but with different roundings
    // (`small_k` multiplies then adds; the packing GEMM may fuse them).
    if uses_small_k(m, k, n) && view_fits(a.len(), av, m, k) && view_fits(b.len(), bv, k, n) {
        small_k(m, k, n, a, av, b, bv, c);
        return Ok(());
    }
    match (S::as_wide(a), S::as_wide(b), O::as_acc(c)) {
        (Some(a), Some(b), Some(c)) if O::ADDS => gemm_add_into((m, k, n), a, av, b, bv, c),
        (Some(a), Some(b), Some(c)) => gemm_into((m, k, n), a, av, b, bv, c, n, false),
        _ => invalid("internal: a narrow operand or result reached the packing GEMM"),
    }
}

/// `C[m×n] (row-major) = C + A·B` through [`Gemm::raw_add`] (the dot-accumulate form, `k <= 256`),
/// checking every view before calling the kernel (`k = 0` leaves `C` as it is).
fn gemm_add_into<T: Gemm>(
    (m, k, n): (usize, usize, usize),
    a: &[T],
    av: Mat,
    b: &[T],
    bv: Mat,
    c: &mut [T],
) -> Result<(), OpError> {
    if m == 0 || n == 0 || k == 0 {
        return Ok(());
    }
    if m * n > c.len() || !view_fits(a.len(), av, m, k) || !view_fits(b.len(), bv, k, n) {
        return invalid("internal: GEMM operand views out of bounds");
    }
    // SAFETY: the views were checked to lie inside `a`, `b` and `c`, and `c` is a distinct
    // mutable borrow, aliasing neither input.
    unsafe {
        T::raw_add(
            (m, k, n),
            a.as_ptr().add(av.off),
            (av.rs, av.cs),
            b.as_ptr().add(bv.off),
            (bv.rs, bv.cs),
            c.as_mut_ptr(),
            (n as isize, 1),
        );
    }
    Ok(())
}

/// Whether [`gemm`] computes an `m×k·k×n` product with [`small_k`] (else the packing GEMM).
fn uses_small_k(m: usize, k: usize, n: usize) -> bool {
    let thin = k > 0 && m.min(n) <= THIN && m.saturating_mul(n).saturating_mul(k) <= THIN_WORK;
    ((1..=SMALL_K).contains(&k) || thin) && n.max(m) >= 8 && m > 0 && n > 0
}

/// `C[m×n] (row stride ldc, unit column stride) = A·B`, or `C += A·B` when `acc`, checking
/// every view before calling the kernel (`k = 0` writes zeros unless `acc`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_into<T: Gemm>(
    (m, k, n): (usize, usize, usize),
    a: &[T],
    av: Mat,
    b: &[T],
    bv: Mat,
    c: &mut [T],
    ldc: usize,
    acc: bool,
) -> Result<(), OpError> {
    if m == 0 || n == 0 {
        return Ok(());
    }
    if ldc < n
        || (m - 1) * ldc + n > c.len()
        || !view_fits(a.len(), av, m, k)
        || !view_fits(b.len(), bv, k, n)
    {
        return invalid("internal: GEMM operand views out of bounds");
    }
    if k == 0 {
        if !acc {
            for r in 0..m {
                c[r * ldc..r * ldc + n].fill(T::default());
            }
        }
        return Ok(());
    }
    // SAFETY: the views were checked to lie inside `a`, `b` and `c` (non-negative strides,
    // last element in range; rows of `c` do not overlap as `ldc >= n`) and `c` is a distinct
    // mutable borrow, aliasing neither input.
    unsafe {
        T::raw(
            m,
            k,
            n,
            a.as_ptr().add(av.off),
            av.rs,
            av.cs,
            b.as_ptr().add(bv.off),
            bv.rs,
            bv.cs,
            c.as_mut_ptr(),
            ldc as isize,
            1,
            acc,
        );
    }
    Ok(())
}

/// Contractions at most this deep use [`small_k`] (attention's per-head `q·k`, `K = 16`):
/// the packing GEMM spends most of its time packing and writing tiles there.
const SMALL_K: usize = 32;

/// Products with at most this many rows or columns (a matrix-vector product, or a scan
/// step's per-batch `[1, 64]·[64, 8]`) and at most [`THIN_WORK`] multiply-adds also use
/// [`small_k`], whatever their depth: packing such a thin operand costs more than the product.
const THIN: usize = 2;

/// See [`THIN`].
const THIN_WORK: usize = 1 << 16;

/// Blocks a GEMM's rows (or columns) are split into, per thread. Every block packs the whole
/// other operand again, which for the small products of a small batch costs about as much as
/// the block's multiply-adds; two blocks per thread still leave a thread that finishes early
/// a block to take over. (The split never changes the bits: see the module docs.)
const BLOCKS_PER_THREAD: usize = 2;

/// Where each element of a stack's batch starts, in elements from the view's offset: the
/// batch dimensions `(extent, stride)`, outermost first, after merging neighbours that
/// advance by one stride (one dimension, or none, for most stacks; two for attention's
/// `[B, S, H, D]` operands batched over `B` and `H`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BatchAt(Vec<(usize, isize)>);

impl BatchAt {
    /// `batch` elements `stride` apart.
    pub(crate) fn strided(batch: usize, stride: isize) -> BatchAt {
        BatchAt(vec![(batch, stride)])
    }

    /// The batch dimensions `dims` of an operand of `shape` with strides `st` (unit
    /// dimensions dropped, neighbours merged where contiguous).
    fn of(shape: &[usize], st: &[isize], dims: &[usize]) -> BatchAt {
        let mut out: Vec<(usize, isize)> = Vec::new();
        for &d in dims.iter().filter(|&&d| shape[d] != 1) {
            match out.last_mut() {
                Some((n, s)) if *s == st[d] * shape[d] as isize => {
                    *n *= shape[d];
                    *s = st[d];
                }
                _ => out.push((shape[d], st[d])),
            }
        }
        BatchAt(out)
    }

    /// The offset of batch element `bt`.
    fn at(&self, mut bt: usize) -> isize {
        let mut off = 0isize;
        for &(n, s) in self.0.iter().rev() {
            off += (bt % n.max(1)) as isize * s;
            bt /= n.max(1);
        }
        off
    }
}

/// Rows per batch element or depth up to which a product is *skinny*: [`split_min`] asks
/// twice the work before splitting it.
const SKINNY: usize = 16;

/// Multiply-adds from which [`batched`] splits a product of `m` rows per batch element and
/// depth `k` over threads: [`super::par::dot_min`] (2¹⁸ by default), twice that when `m` or
/// `k` is at most [`SKINNY`]. A skinny product (a recurrent cell's `[B, H]·[H, 4H]` at a small
/// batch, its weight gradient `[H, B]·[B, 4H]` over the batch) runs a few µs; split, its
/// blocks are shorter than waking the other threads and joining them. Measured on the BiLSTM
/// trial step at B=16, H=64 (2¹⁸ multiply-adds each): 8.2 → 7.9 ms, 1.17 → 1.08 × XLA:CPU
/// (median of 3 alternated runs), the T5-style, WaveNet-style, MLP-Mixer and bf16 steps
/// unchanged. Every split gives the same bits, so this only moves time.
fn split_min(m: usize, k: usize) -> u64 {
    let min = super::par::dot_min();
    if m.min(k) <= SKINNY {
        min.saturating_mul(2)
    } else {
        min
    }
}

/// Blocks of rows (or columns) per batch element that [`batched`] splits a
/// `[batch, m, k]·[batch, k, n]` product into: one below [`split_min`] multiply-adds or on
/// one thread
/// (each block packs the whole other operand again), else [`BLOCKS_PER_THREAD`] per thread
/// of the current pool spread over the batch.
fn blocks_per_batch(batch: usize, m: usize, k: usize, n: usize) -> usize {
    let work = batch as u64 * m as u64 * n as u64 * k.max(1) as u64;
    let threads = rayon::current_num_threads().max(1);
    if work < split_min(m, k) || threads == 1 {
        1
    } else {
        (BLOCKS_PER_THREAD * threads).div_ceil(batch.max(1)).max(1)
    }
}

/// Whether [`batched`] hands any block of a `[batch, m, k]·[batch, k, n]` product to the
/// packing GEMM (else every block goes through [`small_k`], which reads `bf16`/`f16`
/// operands without a converted copy). Mirrors [`batched`]'s split: column blocks, or row
/// blocks of `rows_per` rows and one last block of the rest.
fn any_packing(batch: usize, m: usize, k: usize, n: usize) -> bool {
    if batch == 0 || m == 0 || n == 0 {
        return false;
    }
    let blocks = blocks_per_batch(batch, m, k, n);
    if n > m && blocks > 1 && !uses_small_k(m, k, n) {
        return true;
    }
    let rows_per = m.div_ceil(blocks).max(1);
    let last = m - rows_per * (m.div_ceil(rows_per) - 1);
    !uses_small_k(rows_per.min(m), k, n) || !uses_small_k(last, k, n)
}

/// Batched GEMM: `c[bt] = a[bt] · b[bt]` for `bt < batch`, `c` row-major `[batch, m, n]`;
/// `sa`/`sb` say where each batch element starts. Split across threads in fixed row blocks.
#[allow(clippy::too_many_arguments)]
fn batched<S: Widen<T>, T: Gemm, O: Store<T>>(
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    a: &[S],
    av: Mat,
    sa: &BatchAt,
    b: &[S],
    bv: Mat,
    sb: &BatchAt,
    c: &mut [O],
) -> Result<(), OpError> {
    if c.len() != batch * m * n {
        return invalid("internal: GEMM result size");
    }
    if batch == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    let work = batch as u64 * m as u64 * n as u64 * k.max(1) as u64;
    let blocks_per_batch = blocks_per_batch(batch, m, k, n);
    if n > m && blocks_per_batch > 1 && !uses_small_k(m, k, n) {
        return match (S::as_wide(a), S::as_wide(b), O::as_acc(c)) {
            (Some(a), Some(b), Some(c)) => column_blocks(
                batch,
                (m, k, n),
                (a, av, sa),
                (b, bv, sb),
                c,
                (blocks_per_batch, O::ADDS),
            ),
            _ => invalid("internal: a narrow operand or result reached the packing GEMM"),
        };
    }
    let rows_per = m.div_ceil(blocks_per_batch).max(1);
    let job = |bt: usize, r0: usize, cc: &mut [O]| {
        let rows = cc.len() / n;
        let a_at = av.shifted(sa.at(bt) + r0 as isize * av.rs)?;
        let b_at = bv.shifted(sb.at(bt))?;
        gemm(rows, k, n, a, a_at, b, b_at, cc)
    };
    if work < split_min(m, k) {
        for (bt, cb) in c.chunks_mut(m * n).enumerate() {
            job(bt, 0, cb)?;
        }
        return Ok(());
    }
    super::par::try_chunks_mut(c, m * n, &|s, cb| {
        let bt = s / (m * n);
        super::par::try_chunks_mut(cb, rows_per * n, &|s2, cc| job(bt, s2 / n, cc))
    })
}

/// The pointer to `c` shared by the column blocks of [`column_blocks`].
#[derive(Clone, Copy)]
struct Out<T>(*mut T);
// SAFETY: the blocks write disjoint columns (see `column_blocks`).
unsafe impl<T> Send for Out<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Out<T> {}

impl<T> Out<T> {
    /// The pointer (a method, so that a closure captures the whole `Out`, not its field).
    fn ptr(&self) -> *mut T {
        self.0
    }
}

/// [`batched`] split into `blocks` column blocks per batch element: each block is one packing
/// GEMM of all `m` rows and its columns `j0..j1`, written straight into `c` (row stride `n`),
/// or added to it when `add` ([`Gemm::raw_add`]). The caller has chosen the packing GEMM for
/// the whole `m×k·k×n` product.
fn column_blocks<T: Gemm>(
    batch: usize,
    (m, k, n): (usize, usize, usize),
    (a, av, sa): (&[T], Mat, &BatchAt),
    (b, bv, sb): (&[T], Mat, &BatchAt),
    c: &mut [T],
    (blocks, add): (usize, bool),
) -> Result<(), OpError> {
    // Column blocks a multiple of 16 wide (the widest packing kernel's tile), so no block
    // ends in a sliver.
    let cols_per = n.div_ceil(blocks).next_multiple_of(16);
    let per_batch = n.div_ceil(cols_per);
    for bt in 0..batch {
        let (a_at, b_at) = (av.shifted(sa.at(bt))?, bv.shifted(sb.at(bt))?);
        if !view_fits(a.len(), a_at, m, k) || !view_fits(b.len(), b_at, k, n) {
            return invalid("internal: GEMM operand views out of bounds");
        }
    }
    let out = Out(c.as_mut_ptr());
    super::par::indices(batch * per_batch, &|i| {
        let (bt, j0) = (i / per_batch, (i % per_batch) * cols_per);
        let cols = cols_per.min(n - j0);
        let a_off = (av.off as isize + sa.at(bt)) as usize;
        let b_off = (bv.off as isize + sb.at(bt) + j0 as isize * bv.cs) as usize;
        // SAFETY: every batch element's views of `a` and `b` were checked above (columns
        // `j0..j0+cols` lie inside the checked `k×n` view), `c` holds `batch·m·n` elements
        // (checked by `batched`) of which this block writes only rows `0..m` of columns
        // `j0..j0+cols` of batch element `bt`, disjoint from every other block's, and `c` is
        // an exclusive borrow aliasing neither input.
        unsafe {
            let (a, b, c) = (
                a.as_ptr().add(a_off),
                b.as_ptr().add(b_off),
                out.ptr().add(bt * m * n + j0),
            );
            if add {
                let (ra, rb) = ((av.rs, av.cs), (bv.rs, bv.cs));
                T::raw_add((m, k, cols), a, ra, b, rb, c, (n as isize, 1));
            } else {
                T::raw(
                    m, k, cols, a, av.rs, av.cs, b, bv.rs, bv.cs, c, n as isize, 1, false,
                );
            }
        }
    });
    Ok(())
}

/// `C = A·B` (`f32`, batched, the views of [`crate::exec::device::GemmCall`]) on raw
/// buffers, through the same kernel as `dot_general` (the device executors' host GEMM).
///
/// # Safety
/// `a` and `b` point at `a_len`/`b_len` readable elements, `c` at `batch·m·n` writable ones
/// not overlapping them.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_f32_raw(
    (batch, m, k, n): (usize, usize, usize, usize),
    a: *const f32,
    (a_len, rsa, csa, sa): (usize, isize, isize, isize),
    b: *const f32,
    (b_len, rsb, csb, sb): (usize, isize, isize, isize),
    c: *mut f32,
) -> Result<(), OpError> {
    // SAFETY: forwarded from the caller's contract.
    let (a, b, c) = unsafe {
        (
            std::slice::from_raw_parts(a, a_len),
            std::slice::from_raw_parts(b, b_len),
            std::slice::from_raw_parts_mut(c, batch * m * n),
        )
    };
    let av = Mat {
        off: 0,
        rs: rsa,
        cs: csa,
    };
    let bv = Mat {
        off: 0,
        rs: rsb,
        cs: csb,
    };
    let (sa, sb) = (BatchAt::strided(batch, sa), BatchAt::strided(batch, sb));
    batched(batch, m, k, n, a, av, &sa, b, bv, &sb, c)
}

/// Strides `(batch, rows, cols)` of the operand viewed with dimension groups `g`, if every
/// group is contiguous within itself; `None` when a copy is needed.
pub(crate) fn group_strides(shape: &[usize], groups: [&[usize]; 3]) -> Option<[isize; 3]> {
    let st = istrides_of(shape);
    let mut out = [0isize; 3];
    for (k, g) in groups.iter().enumerate() {
        // The group's non-unit dimensions, each next to the one before it.
        let mut prev: Option<usize> = None;
        for d in g.iter().copied().filter(|&d| shape[d] != 1) {
            if let Some(p) = prev {
                if st[p] != st[d] * shape[d] as isize {
                    return None;
                }
            }
            prev = Some(d);
        }
        out[k] = prev.map(|d| st[d]).unwrap_or(0);
    }
    Some(out)
}

/// The operand as a `[batch, rows, cols]` stack: (buffer, view, where each batch element
/// starts), copying into that layout when the rows' or the columns' dimensions are not
/// contiguous (batch dimensions that do not merge are read through their own strides).
fn as_stack<'a, T: Copy + Send + Sync + Default>(
    v: Cow<'a, [T]>,
    shape: &[usize],
    groups: [&[usize]; 3],
) -> Result<(Cow<'a, [T]>, Mat, BatchAt), OpError> {
    if let Some([_, sr, sc]) = group_strides(shape, [&[], groups[1], groups[2]]) {
        let st = istrides_of(shape);
        return Ok((
            v,
            Mat {
                off: 0,
                rs: sr,
                cs: sc,
            },
            BatchAt::of(shape, &st, groups[0]),
        ));
    }
    let perm: Vec<usize> = groups.iter().flat_map(|g| g.iter().copied()).collect();
    let st = istrides_of(shape);
    let pshape: Vec<usize> = perm.iter().map(|&d| shape[d]).collect();
    let pst: Vec<isize> = perm.iter().map(|&d| st[d]).collect();
    let copy = gather_view(&v, 0, &pst, &pshape)?;
    let rows: usize = groups[1].iter().map(|&d| shape[d]).product();
    let cols: usize = groups[2].iter().map(|&d| shape[d]).product();
    let batch: usize = groups[0].iter().map(|&d| shape[d]).product();
    Ok((
        Cow::Owned(copy),
        Mat {
            off: 0,
            rs: cols as isize,
            cs: 1,
        },
        BatchAt::strided(batch, (rows * cols) as isize),
    ))
}

pub(crate) fn dims_of(v: &[i64], name: &str, rank: usize) -> Result<Dims<usize>, OpError> {
    let mut out = Dims::new();
    for &d in v {
        if d < 0 || d as usize >= rank {
            return invalid(format!("{name}: dimension {d} out of range"));
        }
        out.push(d as usize);
    }
    Ok(out)
}

/// The computation type of a contraction of `a` and `b` producing `out`.
fn compute_type(a: DType, b: DType, out: DType) -> DType {
    if a == DType::F64 || b == DType::F64 || out == DType::F64 {
        DType::F64
    } else if a.is_float() || b.is_float() || out.is_float() {
        DType::F32
    } else {
        DType::I64
    }
}

thread_local! {
    /// Whether `f32` contractions on this thread accumulate in `f64` ([`with_f64_dot`]).
    static F64_DOT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with every `f32` `dot_general` that this thread executes computed in `f64` (the
/// operands widened exactly, the products summed in `f64`, the result rounded once to its
/// type): a more accurate run of the same step, against which the GPU check measures how far
/// the reference executor's own `f32` sums are from exact (`ebb_pipeline::device_check`).
/// A [`crate::Runtime::step`] called inside `f` carries the setting to the pool thread that
/// runs the step; ops that other threads execute are unaffected.
pub fn with_f64_dot<R>(f: impl FnOnce() -> R) -> R {
    f64_dot_set(true, f)
}

/// Whether [`with_f64_dot`] is in force on this thread.
pub(crate) fn f64_dot() -> bool {
    F64_DOT.with(|c| c.get())
}

/// `f()` with [`with_f64_dot`]'s setting `on` on this thread (restored after).
pub(crate) fn f64_dot_set<R>(on: bool, f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            F64_DOT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(F64_DOT.with(|c| c.replace(on)));
    f()
}

/// `dot_general` (see the module docs).
pub(crate) fn dot_general(
    ctx: &Ctx,
    dd: &DotDims,
    ops: &mut Operands<'_>,
) -> Result<Tensor, OpError> {
    // The dot-accumulate form: `c + a·b` ([`ebb_ir::Op::DotGeneral`]); `c` by value (moved
    // when the step gave it at its last use, so that its buffer can take the sum in place).
    let acc = if ops.len() == 3 {
        ops.take_last()
    } else {
        None
    };
    arity(ops, 2, OpKind::DotGeneral)?;
    let out = ctx.out0()?;
    let (l, r) = (&ops[0], &ops[1]);
    let (ls, rs) = (l.shape(), r.shape());
    let lb = dims_of(&dd.lhs_batch, "lhs_batching_dimensions", ls.len())?;
    let rb = dims_of(&dd.rhs_batch, "rhs_batching_dimensions", rs.len())?;
    let lc = dims_of(&dd.lhs_contract, "lhs_contracting_dimensions", ls.len())?;
    let rc = dims_of(&dd.rhs_contract, "rhs_contracting_dimensions", rs.len())?;
    if lb.len() != rb.len() || lc.len() != rc.len() {
        return invalid("batching/contracting dimension counts differ");
    }
    for (&x, &y) in lb.iter().zip(&rb).chain(lc.iter().zip(&rc)) {
        if ls[x] != rs[y] {
            return invalid(format!(
                "lhs dim {x} ({}) != rhs dim {y} ({})",
                ls[x], rs[y]
            ));
        }
    }
    let free = |rank: usize, b: &[usize], c: &[usize]| {
        let mut f: Dims<usize> = Dims::new();
        for d in (0..rank).filter(|d| !b.contains(d) && !c.contains(d)) {
            f.push(d);
        }
        f
    };
    let (lf, rf) = (free(ls.len(), &lb, &lc), free(rs.len(), &rb, &rc));
    let prod = |s: &[usize], g: &[usize]| g.iter().map(|&d| s[d]).product::<usize>();
    let (bt, m, k, n) = (prod(ls, &lb), prod(ls, &lf), prod(ls, &lc), prod(rs, &rf));
    let ct = match compute_type(l.dtype(), r.dtype(), out.dtype) {
        DType::F32 if f64_dot() => DType::F64,
        ct => ct,
    };
    let (lg, rg): (Groups, Groups) = ([&lb, &lf, &lc], [&rb, &rc, &rf]);
    if let Some(c) = acc {
        if c.shape() != out.shape.as_slice() || c.dtype() != out.dtype {
            return invalid(format!(
                "accumulator {:?} {} differs from the result {:?} {}",
                c.shape(),
                c.dtype(),
                out.shape.as_slice(),
                out.dtype
            ));
        }
        // In place where the contraction is at most one depth block deep (the contract of
        // `ebb_ir::op::accumulate`): each block of the product through `small_k`, or through
        // the GEMM adding each element's complete chain as it stores it (`Gemm::raw_add`; an
        // empty contraction adds zeros).
        let in_place = ct == DType::F32
            && [l.dtype(), r.dtype(), out.dtype] == [DType::F32; 3]
            && k <= ACCUMULATE_DEPTH;
        if in_place {
            let (Data::F32(x), Data::F32(y)) = (l.data(), r.data()) else {
                return invalid("internal: f32 operands");
            };
            let mut sum = match c.try_into_data() {
                Ok(Data::F32(v)) => v,
                Ok(_) => return invalid("internal: f32 accumulator"),
                Err(shared) => {
                    let Data::F32(v) = shared.data() else {
                        return invalid("internal: f32 accumulator");
                    };
                    let mut own = ctx.take_vec::<f32>(v.len());
                    own.copy_from_slice(v);
                    own
                }
            };
            dot_stacks::<f32, f32, AddTo>(
                Cow::Borrowed(x),
                Cow::Borrowed(y),
                ls,
                rs,
                lg,
                rg,
                (bt, m, k, n),
                AddTo::slice_mut(&mut sum),
            )?;
            if k == 0 {
                // `c + 0` (no kernel ran: the GEMM leaves `C` as it is).
                sum.iter_mut().for_each(|x| *x += 0.0);
            }
            return Ok(Tensor::from_parts(out.shape.as_slice(), Data::F32(sum)));
        }
        // Deeper (the packing GEMM would add each depth block's partial sums into `c`), or the
        // `f64` check mode: the product apart, then added as `add(c, product)` adds. The
        // product's buffer is the op's transient (`ebb_ir::op::accumulate_product_bytes`).
        let product = dot_general(ctx, dd, ops)?;
        if k > ACCUMULATE_DEPTH && ctx.in_place.iter().any(|w| w.operand == 2) {
            ctx.transient.set(product.size_bytes());
        }
        let sum = super::elementwise::add(c, product)?;
        return Ok(Tensor::from_parts(out.shape.as_slice(), sum));
    }
    let data = match ct {
        DType::F64 => Data::F64(dot_typed::<f64>(
            l.data(),
            r.data(),
            ls,
            rs,
            lg,
            rg,
            (bt, m, k, n),
            ctx,
        )?),
        DType::F32 => dot_f32(
            l.data(),
            r.data(),
            ls,
            rs,
            lg,
            rg,
            (bt, m, k, n),
            out.dtype,
            ctx,
        )?,
        _ => Data::I64(Buf::from(dot_int(
            l,
            r,
            &lb,
            &lf,
            &lc,
            &rb,
            &rc,
            &rf,
            (bt, m, k, n),
        )?)),
    };
    Ok(Tensor::from_parts(
        out.shape.as_slice(),
        data.into_dtype(out.dtype),
    ))
}

type Groups<'a> = [&'a [usize]; 3];

/// Deepest contraction a dot-accumulate adds into its accumulator in place
/// ([`ebb_ir::op::ACCUMULATE_DEPTH`]): the packing GEMM's depth block, as deep as
/// [`super::gemm_direct`] computes one chain.
const ACCUMULATE_DEPTH: usize = ebb_ir::op::ACCUMULATE_DEPTH as usize;
const _: () = assert!(ACCUMULATE_DEPTH == super::gemm_direct::MAX_K);

/// The buffer of `d` as `T`, borrowed when it already has that type.
pub(crate) fn operand<T: Gemm>(d: &Data) -> Cow<'_, [T]> {
    match T::slice(d) {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(T::take(d.convert(T::DTYPE))),
    }
}

/// The contraction in `f32`, as `out` (the result type). Two `bf16` or two `f16` operands
/// of a product that [`small_k`] computes whole are read as they are (widened on load) and a
/// `bf16`/`f16` result is rounded as each block is stored: the bits of converting the
/// operands to `f32` first and rounding the `f32` result after. Other products convert.
#[allow(clippy::too_many_arguments)]
fn dot_f32(
    a: &Data,
    b: &Data,
    ls: &[usize],
    rs: &[usize],
    lg: Groups,
    rg: Groups,
    dims @ (bt, m, k, n): (usize, usize, usize, usize),
    out: DType,
    ctx: &Ctx,
) -> Result<Data, OpError> {
    /// One operand type `S`: the result stored as `out`.
    #[allow(clippy::too_many_arguments)]
    fn narrow<S: Widen<f32>>(
        (x, y): (&[S], &[S]),
        (ls, rs): (&[usize], &[usize]),
        (lg, rg): (Groups, Groups),
        dims @ (bt, m, _, n): (usize, usize, usize, usize),
        out: DType,
        ctx: &Ctx,
    ) -> Result<Option<Data>, OpError> {
        let (x, y) = (Cow::Borrowed(x), Cow::Borrowed(y));
        Ok(Some(match ctx.take_result(0, out, bt * m * n) {
            Data::BF16(mut c) => {
                dot_stacks::<S, f32, bf16>(x, y, ls, rs, lg, rg, dims, &mut c)?;
                Data::BF16(c)
            }
            Data::F16(mut c) => {
                dot_stacks::<S, f32, f16>(x, y, ls, rs, lg, rg, dims, &mut c)?;
                Data::F16(c)
            }
            Data::F32(mut c) => {
                dot_stacks::<S, f32, f32>(x, y, ls, rs, lg, rg, dims, &mut c)?;
                Data::F32(c)
            }
            _ => return Ok(None),
        }))
    }
    if !any_packing(bt, m, k, n) {
        let shapes = (ls, rs);
        let groups = (lg, rg);
        let done = match (a, b) {
            (Data::BF16(x), Data::BF16(y)) => narrow((x, y), shapes, groups, dims, out, ctx)?,
            (Data::F16(x), Data::F16(y)) => narrow((x, y), shapes, groups, dims, out, ctx)?,
            _ => None,
        };
        if let Some(d) = done {
            return Ok(d);
        }
    }
    // Narrow operands converted into recycled buffers, handed back after the product.
    let (wa, wb) = (widened(a, ctx), widened(b, ctx));
    let mut c = ctx.take_vec::<f32>(bt * m * n);
    let x = wa
        .as_deref()
        .map_or_else(|| operand::<f32>(a), Cow::Borrowed);
    let y = wb
        .as_deref()
        .map_or_else(|| operand::<f32>(b), Cow::Borrowed);
    dot_stacks::<f32, f32, f32>(x, y, ls, rs, lg, rg, dims, &mut c)?;
    for w in [wa, wb].into_iter().flatten() {
        ctx.pool.put(Data::F32(w));
    }
    Ok(ctx.result_from_f32(c, out))
}

/// A `bf16`/`f16` buffer widened to `f32` (exactly) into a buffer of the step's pool; `None`
/// for other types.
fn widened(d: &Data, ctx: &Ctx) -> Option<Buf<f32>> {
    match d {
        Data::BF16(v) => {
            let mut out = ctx.pool.take_vec::<f32>(v.len());
            super::par::elements(&mut out, &|s, o| {
                crate::tensor::bf16_to_f32_serial(&v[s..s + o.len()], o)
            });
            Some(out)
        }
        Data::F16(v) => {
            let mut out = ctx.pool.take_vec::<f32>(v.len());
            super::par::elements(&mut out, &|s, o| {
                <f16 as Widen<f32>>::widen_into(&v[s..s + o.len()], o)
            });
            Some(out)
        }
        _ => None,
    }
}

#[allow(clippy::too_many_arguments)]
fn dot_typed<T: Gemm + Widen<T> + Store<T>>(
    a: &Data,
    b: &Data,
    ls: &[usize],
    rs: &[usize],
    lg: Groups,
    rg: Groups,
    dims @ (bt, m, _, n): (usize, usize, usize, usize),
    ctx: &Ctx,
) -> Result<Buf<T>, OpError> {
    // A recycled buffer: every element is written (β = 0 in the GEMM, `small_k` stores whole
    // blocks, `k = 0` fills).
    let mut c = ctx.take_vec::<T>(bt * m * n);
    dot_stacks::<T, T, T>(
        operand::<T>(a),
        operand::<T>(b),
        ls,
        rs,
        lg,
        rg,
        dims,
        &mut c,
    )?;
    Ok(c)
}

/// The contraction of two operand buffers of element type `S`, accumulated in `T`, stored
/// as `O` into `c` (`bt·m·n` elements, every one written).
#[allow(clippy::too_many_arguments)]
fn dot_stacks<S: Widen<T>, T: Gemm, O: Store<T>>(
    a: Cow<'_, [S]>,
    b: Cow<'_, [S]>,
    ls: &[usize],
    rs: &[usize],
    lg: Groups,
    rg: Groups,
    (bt, m, k, n): (usize, usize, usize, usize),
    c: &mut [O],
) -> Result<(), OpError> {
    let (av, am, asb) = as_stack(a, ls, lg)?;
    let (bv, bm, bsb) = as_stack(b, rs, rg)?;
    batched(bt, m, k, n, &av, am, &asb, &bv, bm, &bsb, c)
}

#[allow(clippy::too_many_arguments)]
fn dot_int(
    l: &Tensor,
    r: &Tensor,
    lb: &[usize],
    lf: &[usize],
    lc: &[usize],
    rb: &[usize],
    rc: &[usize],
    rf: &[usize],
    (bt, m, k, n): (usize, usize, usize, usize),
) -> Result<Vec<i64>, OpError> {
    let stack = |t: &Tensor, g: [&[usize]; 3]| -> Result<Vec<i64>, OpError> {
        let perm: Vec<usize> = g.iter().flat_map(|x| x.iter().copied()).collect();
        let st = istrides_of(t.shape());
        let sh: Vec<usize> = perm.iter().map(|&d| t.shape()[d]).collect();
        let ps: Vec<isize> = perm.iter().map(|&d| st[d]).collect();
        gather_view(&t.data().to_i64_vec(), 0, &ps, &sh)
    };
    let a = stack(l, [lb, lf, lc])?;
    let b = stack(r, [rb, rc, rf])?;
    let mut c = vec![0i64; bt * m * n];
    for x in 0..bt {
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0i64;
                for p in 0..k {
                    acc = acc
                        .wrapping_add(a[(x * m + i) * k + p].wrapping_mul(b[(x * k + p) * n + j]));
                }
                c[(x * m + i) * n + j] = acc;
            }
        }
    }
    Ok(c)
}
