//! [`super::small_k`]'s `f32` product on AVX2, in explicit 8-lane vectors: the same
//! operations as its portable loops (per output element `acc += a[i,p] · b[p,j]`, a multiply
//! then an add, in order of `p` from zero), so the same bits. Columns go in bands of 64 (one
//! row per block), 32 (two rows) and 16 (four rows), eight accumulator registers per block,
//! every vector loaded from `b` used by each row of the block; the last columns (fewer than
//! 16) row by row, read through a lane mask.

use super::{Gemm, Store};
use std::arch::x86_64::{
    __m256, __m256i, _mm256_add_ps, _mm256_broadcast_ss, _mm256_loadu_ps, _mm256_loadu_si256,
    _mm256_maskload_ps, _mm256_mul_ps, _mm256_setzero_ps, _mm256_storeu_ps,
};

/// Lane masks: the 8 lanes starting at `8 - r` have their first `r` lanes set.
const MASKS: [i32; 16] = [-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0];

/// `c[m×n] = a · b` for `n >= 8`, `a` (`m×k`) and `b` (`k×n`) contiguous row-major.
///
/// # Safety
/// `T` must be `f32`, the CPU must have AVX2, and `a`, `b`, `c` must hold `m·k`, `k·n` and
/// `m·n` elements.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn product<T: Gemm, O: Store<T>>(
    (m, k, n): (usize, usize, usize),
    a: &[T],
    b: &[T],
    c: &mut [O],
) {
    assert!(
        a.len() >= m * k && b.len() >= k * n && c.len() >= m * n,
        "small_k operands too short"
    );
    let mut j0 = 0;
    while n - j0 >= 64 {
        band::<T, O, 8, 1>((m, k, n), a, b, c, j0);
        j0 += 64;
    }
    if n - j0 >= 32 {
        band::<T, O, 4, 2>((m, k, n), a, b, c, j0);
        j0 += 32;
    }
    if n - j0 >= 16 {
        band::<T, O, 2, 4>((m, k, n), a, b, c, j0);
        j0 += 16;
    }
    if j0 < n {
        for i in 0..m {
            // SAFETY: as this function's (row `i < m`, columns `j0..n`).
            unsafe { block::<T, O, 2, 1>((k, n), a, b, c, (i, j0), n - j0) };
        }
    }
}

/// Columns `j0..j0 + 8·V` of every row, in blocks of `R` rows, then row by row.
///
/// # Safety
/// As [`product`]'s, with `j0 + 8·V <= n`.
#[target_feature(enable = "avx2")]
unsafe fn band<T: Gemm, O: Store<T>, const V: usize, const R: usize>(
    (m, k, n): (usize, usize, usize),
    a: &[T],
    b: &[T],
    c: &mut [O],
    j0: usize,
) {
    let mut i0 = 0;
    while m - i0 >= R {
        // SAFETY: rows `i0..i0 + R <= m`, columns `j0..j0 + 8V <= n`.
        unsafe { block::<T, O, V, R>((k, n), a, b, c, (i0, j0), 8 * V) };
        i0 += R;
    }
    while i0 < m {
        // SAFETY: as above, one row.
        unsafe { block::<T, O, V, 1>((k, n), a, b, c, (i0, j0), 8 * V) };
        i0 += 1;
    }
}

/// Rows `i0..i0 + R`, columns `j0..j0 + w` (`w <= 8·V <= 64`) of `c = a · b`, accumulated in
/// `R·V` vector registers; columns past `w` are neither read nor written.
///
/// # Safety
/// `T` is `f32`, the CPU has AVX2, `(i0 + R)·k <= a.len()`, `(k - 1)·n + j0 + w <= b.len()`
/// when `k > 0`, and `(i0 + R - 1)·n + j0 + w <= c.len()`.
#[target_feature(enable = "avx2")]
unsafe fn block<T: Gemm, O: Store<T>, const V: usize, const R: usize>(
    (k, n): (usize, usize),
    a: &[T],
    b: &[T],
    c: &mut [O],
    (i0, j0): (usize, usize),
    w: usize,
) {
    debug_assert!(w <= 8 * V && V <= 8);
    let pa = a.as_ptr().cast::<f32>();
    let pb = b.as_ptr().cast::<f32>();
    // The lanes of each vector that lie before column `j0 + w`: all, a mask, or none.
    let mut mask = [None::<__m256i>; V];
    for (v, m) in mask.iter_mut().enumerate() {
        let r = w.saturating_sub(8 * v).min(8);
        if r < 8 {
            // SAFETY: `8 - r + 8 <= 16` elements of `MASKS`.
            *m = Some(unsafe { _mm256_loadu_si256(MASKS.as_ptr().add(8 - r).cast()) });
        }
    }
    let mut acc: [[__m256; V]; R] = [[_mm256_setzero_ps(); V]; R];
    for p in 0..k {
        let row = p * n + j0;
        let mut y = [_mm256_setzero_ps(); V];
        for (v, yv) in y.iter_mut().enumerate() {
            // SAFETY: lanes before `j0 + w` of row `p` lie inside `b` (the caller's bound);
            // a masked load reads only those.
            *yv = unsafe {
                match mask[v] {
                    None => _mm256_loadu_ps(pb.add(row + 8 * v)),
                    Some(mk) => _mm256_maskload_ps(pb.add(row + 8 * v), mk),
                }
            };
        }
        for (r, accr) in acc.iter_mut().enumerate() {
            // SAFETY: `(i0 + r)·k + p < (i0 + R)·k <= a.len()`.
            let s = unsafe { _mm256_broadcast_ss(&*pa.add((i0 + r) * k + p)) };
            for (x, &yv) in accr.iter_mut().zip(&y) {
                *x = _mm256_add_ps(*x, _mm256_mul_ps(s, yv));
            }
        }
    }
    let mut out = [T::default(); 64];
    for (r, accr) in acc.iter().enumerate() {
        for (v, x) in accr.iter().enumerate() {
            // SAFETY: `8v + 8 <= 8V <= 64` elements of `out`, which holds `f32`s (`T`).
            unsafe { _mm256_storeu_ps(out.as_mut_ptr().cast::<f32>().add(8 * v), *x) };
        }
        let o = (i0 + r) * n + j0;
        O::store(&out[..w], &mut c[o..o + w]);
    }
}
