//! The shallow-contraction product of [`super::dot`]: `c = a · b` for a contraction of at
//! most a few dozen terms (attention's per-head `q·k`, a narrow model's projections) or a
//! thin operand, where a packing GEMM spends most of its time packing and writing tiles.
//!
//! Invariant: every output element is `Σ_{p=0..k} a[i,p]·b[p,j]` summed in order of `p`
//! from zero with separate multiplies and adds (never fused), whatever the register blocking
//! and the target-feature variant, so every build and every block split gives the same bits.
//! Operands may be narrower than the accumulator (`bf16`/`f16` read by an `f32` product):
//! they are widened exactly on load, giving the bits of a product of the widened operands.

use super::dot::{Gemm, Mat};

#[cfg(target_arch = "x86_64")]
#[path = "small_k_avx2.rs"]
pub(super) mod avx2;
use half::{bf16, f16};

/// An operand element type that an accumulator type `T` reads, widened exactly.
pub(crate) trait Widen<T>: Copy + Send + Sync + Default {
    /// `src` widened into `dst` (of the same length).
    fn widen_into(src: &[Self], dst: &mut [T]);
    /// `src` itself when it already has type `T` (no copy needed).
    fn as_wide(src: &[Self]) -> Option<&[T]>;
}

macro_rules! widen_same {
    ($t:ty) => {
        impl Widen<$t> for $t {
            fn widen_into(src: &[$t], dst: &mut [$t]) {
                dst.copy_from_slice(src);
            }
            fn as_wide(src: &[$t]) -> Option<&[$t]> {
                Some(src)
            }
        }
    };
}
widen_same!(f32);
widen_same!(f64);

impl Widen<f32> for bf16 {
    #[inline(always)]
    fn widen_into(src: &[bf16], dst: &mut [f32]) {
        crate::tensor::bf16_to_f32_serial(src, dst);
    }
    fn as_wide(_: &[bf16]) -> Option<&[f32]> {
        None
    }
}

impl Widen<f32> for f16 {
    fn widen_into(src: &[f16], dst: &mut [f32]) {
        // Exact (every `f16` value is an `f32`); F16C's vector instructions where the CPU
        // has them.
        crate::f16_conv::f16_to_f32_slice(src, dst);
    }
    fn as_wide(_: &[f16]) -> Option<&[f32]> {
        None
    }
}

/// A result element type that accumulators of type `T` are stored as: `T` itself, or `bf16`/
/// `f16` rounded to nearest even exactly as the executor rounds any `f32` result
/// ([`crate::tensor::f32_to_bf16_into`], `half`'s slice conversion for `f16`).
pub(crate) trait Store<T>: Copy + Send + Sync + Default {
    /// `src` stored into `dst` (of the same length).
    fn store(src: &[T], dst: &mut [Self]);
    /// `dst` itself when it already has type `T` (the packing GEMM can write it).
    fn as_acc(dst: &mut [Self]) -> Option<&mut [T]>;
    /// Whether a product is added to `dst`'s elements rather than stored over them: the GEMM
    /// then adds into [`Store::as_acc`] (`super::dot::Gemm::raw_add`, see [`AddTo`]).
    const ADDS: bool = false;
}

macro_rules! store_same {
    ($t:ty) => {
        impl Store<$t> for $t {
            #[inline(always)]
            fn store(src: &[$t], dst: &mut [$t]) {
                dst.copy_from_slice(src);
            }
            fn as_acc(dst: &mut [$t]) -> Option<&mut [$t]> {
                Some(dst)
            }
        }
    };
}
store_same!(f32);
store_same!(f64);

impl Store<f32> for bf16 {
    #[inline(always)]
    fn store(src: &[f32], dst: &mut [bf16]) {
        crate::tensor::f32_to_bf16_serial(src, dst);
    }
    fn as_acc(_: &mut [bf16]) -> Option<&mut [f32]> {
        None
    }
}

impl Store<f32> for f16 {
    #[inline(always)]
    fn store(src: &[f32], dst: &mut [f16]) {
        crate::f16_conv::f32_to_f16_slice(src, dst);
    }
    fn as_acc(_: &mut [f16]) -> Option<&mut [f32]> {
        None
    }
}

/// An `f32` accumulator element that each stored product element is added to,
/// `c = c + Σₖ aₖbₖ` with the sum complete before the one addition (the dot-accumulate form of
/// `dot_general`: the bits of `add(c, a·b)`): by [`small_k`]'s store, or by the GEMM adding
/// each stored element ([`Store::ADDS`], `super::dot::Gemm::raw_add`), which the caller hands
/// only contractions of one depth block (`k <= 256`), where each element's chain is complete
/// before it is added.
#[repr(transparent)]
#[derive(Clone, Copy, Default)]
pub(crate) struct AddTo(f32);

impl AddTo {
    /// `v` read as accumulators (the same bytes).
    pub(crate) fn slice_mut(v: &mut [f32]) -> &mut [AddTo] {
        // SAFETY: `AddTo` is `repr(transparent)` over `f32`: same size, alignment and
        // validity; the borrow is carried over.
        unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<AddTo>(), v.len()) }
    }
}

impl Store<f32> for AddTo {
    #[inline(always)]
    fn store(src: &[f32], dst: &mut [AddTo]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            d.0 += s;
        }
    }
    fn as_acc(dst: &mut [AddTo]) -> Option<&mut [f32]> {
        // SAFETY: `AddTo` is `repr(transparent)` over `f32`; the borrow is carried over.
        Some(unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<f32>(), dst.len()) })
    }
    const ADDS: bool = true;
}

/// `c[m×n] (row-major) = a · b` for a shallow contraction (see the module docs). Views must
/// be checked by the caller.
///
/// Compiled once more for AVX2 and for AVX-512, taken when the CPU has them: the vectors are
/// wider and more rows share each load of `b`, the operations the same (separate multiplies
/// and adds in the same order), so every build gives the same bits.
#[allow(clippy::too_many_arguments)]
pub(crate) fn small_k<S: Widen<T>, T: Gemm, O: Store<T>>(
    m: usize,
    k: usize,
    n: usize,
    a: &[S],
    av: Mat,
    b: &[S],
    bv: Mat,
    c: &mut [O],
) {
    #[cfg(target_arch = "x86_64")]
    {
        // `small_k_body` compiled for one more target feature, with blocks of `$r64` rows
        // of 64 columns, `$r32` rows of 32 and `$r16` rows of 16.
        macro_rules! variant {
            ($name:ident, $feature:literal, $r64:literal, $r32:literal, $r16:literal, $avx2:literal) => {
                #[target_feature(enable = $feature)]
                #[allow(clippy::too_many_arguments)]
                unsafe fn $name<S: Widen<T>, T: Gemm, O: Store<T>>(
                    m: usize,
                    k: usize,
                    n: usize,
                    a: &[S],
                    av: Mat,
                    b: &[S],
                    bv: Mat,
                    c: &mut [O],
                ) {
                    small_k_body::<S, T, O, $r64, $r32, $r16, $avx2>(m, k, n, a, av, b, bv, c)
                }
            };
        }
        variant!(avx512, "avx512f", 4, 8, 8, false);
        // `f32` on AVX2 through `avx2::band` (explicit vectors: the loops of `block` leave
        // the 32- and 16-wide bands' accumulators on the stack, added one scalar at a time).
        variant!(avx2, "avx2", 1, 2, 2, true);
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked above).
            return unsafe { avx512(m, k, n, a, av, b, bv, c) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked above).
            return unsafe { avx2(m, k, n, a, av, b, bv, c) };
        }
    }
    small_k_body::<S, T, O, 1, 1, 1, false>(m, k, n, a, av, b, bv, c)
}

/// The `rows × cols` view `v` of `src` as a contiguous, widened row-major block (borrowed
/// when it already is one).
fn contiguous<'a, S: Widen<T>, T: Gemm>(
    src: &'a [S],
    v: Mat,
    rows: usize,
    cols: usize,
) -> std::borrow::Cow<'a, [T]> {
    use std::borrow::Cow;
    let len = rows * cols;
    if v.cs == 1 && (v.rs == cols as isize || rows == 1) {
        let s = &src[v.off..v.off + len];
        return match S::as_wide(s) {
            Some(w) => Cow::Borrowed(w),
            None => {
                let mut out = vec![T::default(); len];
                S::widen_into(s, &mut out);
                Cow::Owned(out)
            }
        };
    }
    // A strided view of an operand already of the accumulation type: gathered straight
    // into the block.
    if let Some(w) = S::as_wide(src) {
        return Cow::Owned(gather_view(w, v, rows, cols));
    }
    let narrow = gather_view(src, v, rows, cols);
    let mut out = vec![T::default(); len];
    S::widen_into(&narrow, &mut out);
    Cow::Owned(out)
}

/// The `rows × cols` view `v` of `src` copied into a row-major block: row by row where the
/// view's rows are contiguous runs (`cs == 1`), column by column where its columns are
/// (`rs == 1`, a transposed operand: attention's `kᵀ`), else element by element. The view
/// must lie inside `src` (the caller checks it).
fn gather_view<U: Copy + Default>(src: &[U], v: Mat, rows: usize, cols: usize) -> Vec<U> {
    let len = rows * cols;
    if len == 0 {
        return Vec::new();
    }
    let at = |r: usize, j: usize| (v.off as isize + r as isize * v.rs + j as isize * v.cs) as usize;
    if v.cs == 1 {
        let mut out = Vec::with_capacity(len);
        for r in 0..rows {
            let s = at(r, 0);
            out.extend_from_slice(&src[s..s + cols]);
        }
        return out;
    }
    if v.rs == 1 {
        let mut out = vec![U::default(); len];
        for j in 0..cols {
            let s = at(0, j);
            for (o, &x) in out.chunks_exact_mut(cols).zip(&src[s..s + rows]) {
                o[j] = x;
            }
        }
        return out;
    }
    let mut out = Vec::with_capacity(len);
    for r in 0..rows {
        let row = at(r, 0) as isize;
        out.extend((0..cols).map(|j| src[(row + j as isize * v.cs) as usize]));
    }
    out
}

/// [`small_k`]'s loops, inlined into each of its target-feature variants. Columns go in bands
/// of 64, then one of 32 and one of 16 where as many are left, each band in blocks of rows
/// (`R64`, `R32`, `R16`; one for 8-byte accumulators) held in registers, every loaded row of
/// `b` used by each row of the block; the last columns (fewer than 16) row by row. A result
/// narrower than 8 columns goes column by column, in blocks of 64 rows.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn small_k_body<
    S: Widen<T>,
    T: Gemm,
    O: Store<T>,
    const R64: usize,
    const R32: usize,
    const R16: usize,
    const AVX2: bool,
>(
    m: usize,
    k: usize,
    n: usize,
    a: &[S],
    av: Mat,
    b: &[S],
    bv: Mat,
    c: &mut [O],
) {
    let bc = contiguous::<S, T>(b, bv, k, n);
    let ac = contiguous::<S, T>(a, av, m, k);
    let (ac, bc) = (&ac[..], &bc[..]);
    #[cfg(target_arch = "x86_64")]
    if AVX2 && T::DTYPE == ebb_ir::DType::F32 && (1..8).contains(&n) {
        // SAFETY: `T` is `f32` (checked above), and this body is inlined into the AVX2
        // variant only (`AVX2`), which runs on a CPU with AVX2.
        unsafe { avx2::narrow::<T, O>((m, k, n), ac, bc, c) };
        return;
    }
    if n < 8 {
        // Rows too narrow for a vector: column blocks of up to 64 rows,
        // `c[i0.., j] = Σ_p a[i0.., p] · b[p, j]` (a matrix-vector product per column).
        const W: usize = 64;
        for i0 in (0..m).step_by(W) {
            let w = W.min(m - i0);
            for j in 0..n {
                let mut acc = [T::default(); W];
                for p in 0..k {
                    let s = bc[p * n + j];
                    for (ii, x) in acc[..w].iter_mut().enumerate() {
                        *x += ac[(i0 + ii) * k + p] * s;
                    }
                }
                for (ii, x) in acc[..w].iter().enumerate() {
                    let o = (i0 + ii) * n + j;
                    O::store(std::slice::from_ref(x), &mut c[o..o + 1]);
                }
            }
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if AVX2 && T::DTYPE == ebb_ir::DType::F32 {
        // SAFETY: `T` is `f32` (checked above), and this body is inlined into the AVX2
        // variant only (`AVX2`), which runs on a CPU with AVX2.
        unsafe { avx2::product::<T, O>((m, k, n), ac, bc, c) };
        return;
    }
    let wide = std::mem::size_of::<T>() > 4;
    let mut j0 = 0;
    while n - j0 >= 64 {
        match wide {
            true => band::<T, O, 64, 1>((m, k, n), ac, bc, c, j0),
            false => band::<T, O, 64, R64>((m, k, n), ac, bc, c, j0),
        }
        j0 += 64;
    }
    if n - j0 >= 32 {
        match wide {
            true => band::<T, O, 32, 1>((m, k, n), ac, bc, c, j0),
            false => band::<T, O, 32, R32>((m, k, n), ac, bc, c, j0),
        }
        j0 += 32;
    }
    if n - j0 >= 16 {
        match wide {
            true => band::<T, O, 16, 1>((m, k, n), ac, bc, c, j0),
            false => band::<T, O, 16, R16>((m, k, n), ac, bc, c, j0),
        }
        j0 += 16;
    }
    if j0 < n {
        let w = n - j0;
        for i in 0..m {
            let mut acc = [T::default(); 16];
            for (p, &s) in ac[i * k..(i + 1) * k].iter().enumerate() {
                for (x, &y) in acc[..w].iter_mut().zip(&bc[p * n + j0..p * n + n]) {
                    *x += s * y;
                }
            }
            O::store(&acc[..w], &mut c[i * n + j0..i * n + n]);
        }
    }
}

/// Columns `j0..j0 + W` of every row of `c = a · b` (`a` `m×k`, `b` `k×n`, both contiguous
/// and widened), in blocks of `R` rows, then row by row.
#[inline(always)]
fn band<T: Gemm, O: Store<T>, const W: usize, const R: usize>(
    (m, k, n): (usize, usize, usize),
    a: &[T],
    b: &[T],
    c: &mut [O],
    j0: usize,
) {
    let mut i0 = 0;
    while m - i0 >= R {
        block::<T, O, W, R>((k, n), a, b, c, (i0, j0));
        i0 += R;
    }
    while i0 < m {
        block::<T, O, W, 1>((k, n), a, b, c, (i0, j0));
        i0 += 1;
    }
}

/// Rows `i0..i0 + R`, columns `j0..j0 + W` of `c = a · b`, accumulated in registers.
#[inline(always)]
fn block<T: Gemm, O: Store<T>, const W: usize, const R: usize>(
    (k, n): (usize, usize),
    a: &[T],
    b: &[T],
    c: &mut [O],
    (i0, j0): (usize, usize),
) {
    let mut acc = [[T::default(); W]; R];
    // Checked once here, so that the loop has no exit but its end and the accumulators stay
    // in registers.
    assert!(
        k == 0 || ((i0 + R) * k <= a.len() && (k - 1) * n + j0 + W <= b.len()),
        "small_k block out of bounds"
    );
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    for p in 0..k {
        // SAFETY: `p < k`, so `p·n + j0 + W <= (k - 1)·n + j0 + W <= b.len()` (asserted
        // above): the `W` elements lie inside `b`.
        let brow: &[T; W] = unsafe { &*pb.add(p * n + j0).cast::<[T; W]>() };
        for (r, accr) in acc.iter_mut().enumerate() {
            // SAFETY: `r < R` and `p < k`, so `(i0 + r)·k + p < (i0 + R)·k <= a.len()`.
            let s = unsafe { *pa.add((i0 + r) * k + p) };
            for (x, &y) in accr.iter_mut().zip(brow) {
                *x += s * y;
            }
        }
    }
    for (r, accr) in acc.iter().enumerate() {
        let o = (i0 + r) * n + j0;
        O::store(accr, &mut c[o..o + W]);
    }
}

/// [`small_k`] of `a` (`m×k`, row-major) and `b` (`k×n` row-major, or read transposed
/// through its strides from an `n×k` buffer when `b_transposed`) through the CPU's widest
/// variant and through the baseline build: `(dispatched, baseline)`, for the test that they
/// agree bit for bit.
#[doc(hidden)]
pub fn small_k_both(
    (m, k, n): (usize, usize, usize),
    a: &[f32],
    b: &[f32],
    b_transposed: bool,
) -> (Vec<f32>, Vec<f32>) {
    let av = Mat {
        off: 0,
        rs: k as isize,
        cs: 1,
    };
    let bv = if b_transposed {
        Mat {
            off: 0,
            rs: 1,
            cs: k as isize,
        }
    } else {
        Mat {
            off: 0,
            rs: n as isize,
            cs: 1,
        }
    };
    let (mut c0, mut c1) = (vec![0f32; m * n], vec![0f32; m * n]);
    small_k(m, k, n, a, av, b, bv, &mut c0);
    small_k_body::<f32, f32, f32, 1, 1, 1, false>(m, k, n, a, av, b, bv, &mut c1);
    (c0, c1)
}
