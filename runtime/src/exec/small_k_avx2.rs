//! [`super::small_k`]'s `f32` product on AVX2, in explicit 8-lane vectors: the same
//! operations as its portable loops (per output element `acc += a[i,p] · b[p,j]`, a multiply
//! then an add, in order of `p` from zero), so the same bits. Columns go in bands of 64 (one
//! row per block), 32 (two rows) and 16 (four rows), eight accumulator registers per block,
//! every vector loaded from `b` used by each row of the block; the last columns (fewer than
//! 16) in blocks of four rows, read through a lane mask. A result narrower than 8 columns
//! holds eight rows in the lanes instead ([`narrow`]).

use super::{Gemm, Store};
use std::arch::x86_64::{
    __m256, __m256i, _mm256_add_ps, _mm256_broadcast_ss, _mm256_loadu_ps, _mm256_loadu_si256,
    _mm256_maskload_ps, _mm256_mul_ps, _mm256_permute2f128_ps, _mm256_setzero_ps,
    _mm256_shuffle_ps, _mm256_storeu_ps, _mm256_unpackhi_ps, _mm256_unpacklo_ps,
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
    match n - j0 {
        0 => {}
        // SAFETY: as this function's (columns `j0..n`, at most 8 or 16 of them).
        w @ 1..=8 => unsafe { tail::<T, O, 1>((m, k, n), a, b, c, j0, w) },
        // SAFETY: as above.
        w => unsafe { tail::<T, O, 2>((m, k, n), a, b, c, j0, w) },
    }
}

/// The last `w <= 8·V` columns `j0..j0 + w` of every row, in blocks of four rows, then row
/// by row (read and written through lane masks).
///
/// # Safety
/// As [`product`]'s, with `j0 + w == n`.
#[target_feature(enable = "avx2")]
unsafe fn tail<T: Gemm, O: Store<T>, const V: usize>(
    (m, k, n): (usize, usize, usize),
    a: &[T],
    b: &[T],
    c: &mut [O],
    j0: usize,
    w: usize,
) {
    let mut i0 = 0;
    while m - i0 >= 4 {
        // SAFETY: rows `i0..i0 + 4 <= m`, columns `j0..j0 + w == n`.
        unsafe { block::<T, O, V, 4>((k, n), a, b, c, (i0, j0), w) };
        i0 += 4;
    }
    while i0 < m {
        // SAFETY: as above, one row.
        unsafe { block::<T, O, V, 1>((k, n), a, b, c, (i0, j0), w) };
        i0 += 1;
    }
}

/// `c[m×n] = a · b` for `n < 8` (a matrix-vector product and the like), `a` (`m×k`) and `b`
/// (`k×n`) contiguous row-major: eight rows in the lanes of one accumulator per column,
/// `acc[j] += a[i0.., p] · b[p, j]` for `p` in order from zero (the portable loop's
/// operations). Eight columns of eight rows of `a` are read as eight rows and transposed in
/// registers; a last partial block of rows or of `p` is gathered element by element.
///
/// # Safety
/// `T` must be `f32`, the CPU must have AVX2, `1 <= n < 8`, and `a`, `b`, `c` must hold
/// `m·k`, `k·n` and `m·n` elements.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn narrow<T: Gemm, O: Store<T>>(
    (m, k, n): (usize, usize, usize),
    a: &[T],
    b: &[T],
    c: &mut [O],
) {
    assert!(
        (1..8).contains(&n) && a.len() >= m * k && b.len() >= k * n && c.len() >= m * n,
        "small_k operands too short"
    );
    // SAFETY: forwarded (`N == n`).
    unsafe {
        match n {
            1 => narrow_n::<T, O, 1>((m, k), a, b, c),
            2 => narrow_n::<T, O, 2>((m, k), a, b, c),
            3 => narrow_n::<T, O, 3>((m, k), a, b, c),
            4 => narrow_n::<T, O, 4>((m, k), a, b, c),
            5 => narrow_n::<T, O, 5>((m, k), a, b, c),
            6 => narrow_n::<T, O, 6>((m, k), a, b, c),
            _ => narrow_n::<T, O, 7>((m, k), a, b, c),
        }
    }
}

/// [`narrow`] for `n == N`.
///
/// # Safety
/// As [`narrow`]'s.
#[target_feature(enable = "avx2")]
unsafe fn narrow_n<T: Gemm, O: Store<T>, const N: usize>(
    (m, k): (usize, usize),
    a: &[T],
    b: &[T],
    c: &mut [O],
) {
    let pa = a.as_ptr().cast::<f32>();
    let pb = b.as_ptr().cast::<f32>();
    let mut i0 = 0;
    while i0 < m {
        let rows = (m - i0).min(8);
        let mut acc = [_mm256_setzero_ps(); N];
        let mut p0 = 0;
        while p0 < k {
            let q = (k - p0).min(8);
            // `t[qq]`'s lane `r` is `a[i0 + r, p0 + qq]` (lanes past the rows: zero).
            let mut t = [_mm256_setzero_ps(); 8];
            if rows == 8 && q == 8 {
                // SAFETY: rows `i0..i0 + 8 <= m`, columns `p0..p0 + 8 <= k` of `a`.
                let r: [__m256; 8] =
                    std::array::from_fn(|r| unsafe { _mm256_loadu_ps(pa.add((i0 + r) * k + p0)) });
                t = transpose8(r);
            } else {
                for (qq, tq) in t.iter_mut().enumerate().take(q) {
                    let mut lanes = [0f32; 8];
                    for (r, l) in lanes.iter_mut().enumerate().take(rows) {
                        // SAFETY: row `i0 + r < m`, column `p0 + qq < k`.
                        *l = unsafe { *pa.add((i0 + r) * k + p0 + qq) };
                    }
                    // SAFETY: 8 elements of `lanes`.
                    *tq = unsafe { _mm256_loadu_ps(lanes.as_ptr()) };
                }
            }
            for (qq, &tq) in t.iter().enumerate().take(q) {
                for (j, x) in acc.iter_mut().enumerate() {
                    // SAFETY: `(p0 + qq)·N + j < k·N <= b.len()`.
                    let s = unsafe { _mm256_broadcast_ss(&*pb.add((p0 + qq) * N + j)) };
                    *x = _mm256_add_ps(*x, _mm256_mul_ps(tq, s));
                }
            }
            p0 += 8;
        }
        let mut out = [T::default(); 8];
        for (j, x) in acc.iter().enumerate() {
            // SAFETY: 8 elements of `out`, which holds `f32`s (`T`).
            unsafe { _mm256_storeu_ps(out.as_mut_ptr().cast::<f32>(), *x) };
            for (r, v) in out.iter().enumerate().take(rows) {
                let o = (i0 + r) * N + j;
                O::store(std::slice::from_ref(v), &mut c[o..o + 1]);
            }
        }
        i0 += 8;
    }
}

/// The 8×8 block of rows `r` transposed: lane `i` of result `j` is lane `j` of `r[i]`.
#[inline(always)]
pub(crate) fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    // SAFETY: the callers run on a CPU with AVX (implied by AVX2); these are pure register
    // shuffles.
    unsafe {
        let t0 = _mm256_unpacklo_ps(r[0], r[1]);
        let t1 = _mm256_unpackhi_ps(r[0], r[1]);
        let t2 = _mm256_unpacklo_ps(r[2], r[3]);
        let t3 = _mm256_unpackhi_ps(r[2], r[3]);
        let t4 = _mm256_unpacklo_ps(r[4], r[5]);
        let t5 = _mm256_unpackhi_ps(r[4], r[5]);
        let t6 = _mm256_unpacklo_ps(r[6], r[7]);
        let t7 = _mm256_unpackhi_ps(r[6], r[7]);
        let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        [
            _mm256_permute2f128_ps::<0x20>(s0, s4),
            _mm256_permute2f128_ps::<0x20>(s1, s5),
            _mm256_permute2f128_ps::<0x20>(s2, s6),
            _mm256_permute2f128_ps::<0x20>(s3, s7),
            _mm256_permute2f128_ps::<0x31>(s0, s4),
            _mm256_permute2f128_ps::<0x31>(s1, s5),
            _mm256_permute2f128_ps::<0x31>(s2, s6),
            _mm256_permute2f128_ps::<0x31>(s3, s7),
        ]
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
