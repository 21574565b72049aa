//! An `f32` GEMM without packing: `C = A·B` with each element of `C` the same bits as
//! `matrixmultiply::sgemm`'s FMA kernels give, without copying `A` and `B` into packed panels
//! first (at the small products of a small batch, packing and its buffer cost as much as the
//! multiply-adds). `B` is read in place when its columns are contiguous, else copied row-major
//! once into a buffer kept by the thread (`A·Bᵀ` with both operands contracted over their
//! contiguous dimension).
//!
//! Why the bits are the same: `matrixmultiply` runs its AVX-512 kernel where the CPU has
//! AVX-512 (and the crate was built with it), else its AVX2+FMA kernel where the CPU has AVX2
//! and FMA. Both compute every element of `C` as one chain `acc = fma(a[i,p], b[p,j], acc)`
//! over `p = 0..k` in order, starting from `+0`, in blocks of `kc = 256` depths (`k` beyond
//! one block adds each block's chain to `C`); with β = 0 the AVX2+FMA kernel stores
//! `fma(1, acc, 0) = acc + 0`, the AVX-512 kernel `1·acc = acc` (the two differ only where
//! the chain ends at `-0`, a sum of products that underflow to `-0`). This kernel computes
//! the same chain per element for `k <= 256` and stores it as the kernel `matrixmultiply`
//! runs on this machine does ([`Store`], found once by a product whose chain ends at `-0`);
//! [`sgemm`] declines the other cases, which then go to `matrixmultiply`. (Checked for finite
//! and infinite operands; where two NaNs of different payloads meet, which payload the result
//! carries is not pinned down.)
//!
//! Register blocking: tiles of 6 rows × 16 columns (12 `__m256` accumulators, a row of `B`
//! loaded once per depth and each element of `A` broadcast), then 8-column and scalar tails;
//! beside the AVX-512 kernel (which needs the CPU's AVX-512), tiles of 8 rows × 32 columns
//! (16 `__m512` accumulators) first, the columns left over as above.

/// Deepest contraction computed here: `matrixmultiply`'s `kc` for `f32`, so one chain per
/// element.
pub(super) const MAX_K: usize = 256;

/// `C[m×n] = A[m×k]·B[k×n]` with `C` row-major (row stride `ldc`, unit column stride), or
/// `C = C + A·B` when `add` (each element of the product, stored as `matrixmultiply` stores
/// it, added once to `C`'s element as the right operand: the bits of `add(c, a·b)`), when
/// this machine runs one of `matrixmultiply`'s FMA kernels ([`store`]), `k <= 256` and the
/// product is one where packing does not pay ([`thin`]); returns `false` (and does nothing) otherwise. A `B` of
/// other than unit column stride (a transposed operand: `A·Bᵀ`, both contracted over their
/// contiguous dimension, as a scan step's `dh·Wᵀ`) is first copied row-major into a scratch
/// buffer of this thread (`k·n` elements, what `matrixmultiply` would pack it into).
///
/// # Safety
/// The views `a` (`m×k`, strides `rsa`, `csa`), `b` (`k×n`, strides `rsb`, `csb`) and `c`
/// (`m×n`, row stride `ldc`) lie inside their allocations, and `c` aliases neither `a` nor
/// `b`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm(
    (m, k, n): (usize, usize, usize),
    a: *const f32,
    (rsa, csa): (isize, isize),
    b: *const f32,
    (rsb, csb): (isize, isize),
    c: *mut f32,
    ldc: usize,
    add: bool,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let st = if k <= MAX_K && thin(m, k, n) {
            store()
        } else {
            None
        };
        if let Some(st) = st {
            // SAFETY (both calls): the features were detected ([`store`]: `Product` only
            // where the CPU has AVX-512); the views are the caller's contract.
            let run = |b: *const f32, rsb: isize| unsafe {
                match (st, add) {
                    (Store::Product, false) => {
                        x86::sgemm512::<false>(m, k, n, a, rsa, csa, b, rsb, c, ldc)
                    }
                    (Store::Product, true) => {
                        x86::sgemm512::<true>(m, k, n, a, rsa, csa, b, rsb, c, ldc)
                    }
                    (Store::PlusZero, false) => {
                        x86::sgemm::<false>(m, k, n, a, rsa, csa, b, rsb, c, ldc, false)
                    }
                    (Store::PlusZero, true) => {
                        x86::sgemm::<true>(m, k, n, a, rsa, csa, b, rsb, c, ldc, false)
                    }
                }
            };
            if csb == 1 {
                run(b, rsb);
            } else {
                SCRATCH.with(|cell| {
                    let mut rows = cell.borrow_mut();
                    // SAFETY: `b`'s view is the caller's contract; `rows` is a distinct buffer
                    // of this thread, `k·n` elements row-major, which `x86::sgemm` reads with
                    // row stride `n`.
                    unsafe { copy_rows(k, n, b, rsb, csb, &mut rows) };
                    run(rows.as_ptr(), n as isize);
                });
            }
            return true;
        }
    }
    let _ = (m, k, n, a, rsa, csa, b, rsb, csb, c, ldc, add);
    false
}

std::thread_local! {
    /// A transposed `B` copied row-major (see [`sgemm`]); reused by every product of a thread.
    static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `out` = the `k×n` view `b` (strides `rsb`, `csb`) row-major: 8×8 blocks transposed in
/// registers where `b`'s columns are contiguous (`rsb = 1`, a transposed row-major matrix),
/// else element by element.
///
/// # Safety
/// The view lies inside its allocation, and the machine has AVX2 (see [`store`]).
#[cfg(target_arch = "x86_64")]
unsafe fn copy_rows(k: usize, n: usize, b: *const f32, rsb: isize, csb: isize, out: &mut Vec<f32>) {
    out.clear();
    out.reserve(k * n);
    let o = out.as_mut_ptr();
    // SAFETY (both branches): `out` has room for `k·n` elements, all written below before
    // the length is set; reads stay inside `b`'s view (the caller's contract).
    unsafe {
        if rsb == 1 {
            x86::transpose_into(k, n, b, csb, o);
        } else {
            for p in 0..k {
                let src = b.offset(p as isize * rsb);
                for j in 0..n {
                    *o.add(p * n + j) = *src.offset(j as isize * csb);
                }
            }
        }
        out.set_len(k * n);
    }
}

/// Whether packing would cost more than this kernel loses to `matrixmultiply`'s: a side of
/// `C` of at most [`THIN_SIDE`] (packing costs about `1/m + 1/n` of the multiply-adds, each
/// packed element several of them), or at most [`SMALL_WORK`] multiply-adds in all (where the
/// packing buffer's allocation alone is a good part of the time).
fn thin(m: usize, k: usize, n: usize) -> bool {
    m.min(n) <= THIN_SIDE || m.saturating_mul(n).saturating_mul(k) <= SMALL_WORK
}

/// See [`thin`]: attention's per-head products (`[S, S]·[S, 16]`) are the typical case.
const THIN_SIDE: usize = 32;

/// See [`thin`].
const SMALL_WORK: usize = 1 << 16;

/// How the `matrixmultiply` kernel this machine runs stores a chain with β = 0.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Store {
    /// `fma(1, acc, 0) = acc + 0` (the AVX2+FMA kernel): a chain ending at `-0` is stored `+0`.
    PlusZero,
    /// `1·acc` (the AVX-512 kernel, found only where the CPU has AVX-512): the chain's value,
    /// `-0` kept.
    Product,
}

/// Whether `matrixmultiply` runs one of its FMA `f32` kernels on this machine (AVX2+FMA, or
/// AVX-512 where the CPU has it and `matrixmultiply` was built with its `avx512` feature),
/// found by [`store`]: both compute each element of `C` per depth block of 256 as one chain
/// from `+0` and add a later block's chain to `C` with one rounding.
pub(super) fn fma_kernel() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        store().is_some()
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether `matrixmultiply` runs its AVX2+FMA `f32` kernel on this machine, which stores a
/// chain ending at `-0` as `+0` with β = 0 ([`Store::PlusZero`]) but adds it to `C` as it is
/// with β = 1: the one kernel whose `C + A·B` (β = 1) can differ from `C` plus its stored
/// `A·B` (see `super::dot::Gemm::raw_add`).
pub(super) fn stores_plus_zero() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        store() == Some(Store::PlusZero)
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// How `matrixmultiply` stores a chain on this machine, where it runs one of its FMA kernels
/// (the CPU has AVX2 and FMA, which this kernel needs; `matrixmultiply` then runs its AVX-512
/// kernel or its AVX2+FMA one, never a kernel without FMA); `None` elsewhere. Found once, by
/// the sign `matrixmultiply` gives a `1×1·1×1` product whose FMA chain ends at `-0`
/// (`-1e-30·1e-30` underflows): `+0` from the AVX2+FMA kernel, `-0` from the AVX-512 one.
#[cfg(target_arch = "x86_64")]
fn store() -> Option<Store> {
    static STORE: std::sync::OnceLock<Option<Store>> = std::sync::OnceLock::new();
    *STORE.get_or_init(|| {
        if !(std::is_x86_feature_detected!("fma") && std::is_x86_feature_detected!("avx2")) {
            return None;
        }
        let (a, b, mut c) = (-1e-30f32, 1e-30f32, f32::NAN);
        // SAFETY: three one-element matrices, `c` distinct from `a` and `b`.
        unsafe { matrixmultiply::sgemm(1, 1, 1, 1.0, &a, 1, 1, &b, 1, 1, 0.0, &mut c, 1, 1) };
        match c.to_bits() {
            0 => Some(Store::PlusZero),
            0x8000_0000 if std::is_x86_feature_detected!("avx512f") => Some(Store::Product),
            _ => None,
        }
    })
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// See [`super::sgemm`].
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn sgemm<const ADD: bool>(
        m: usize,
        k: usize,
        n: usize,
        a: *const f32,
        rsa: isize,
        csa: isize,
        b: *const f32,
        rsb: isize,
        c: *mut f32,
        ldc: usize,
        keep: bool,
    ) {
        // SAFETY (every block below): rows `i..i+R` and columns `j..j+8W` of the caller's
        // views, which lie inside their allocations.
        let mut j = 0;
        let strip = |w: usize, j: usize| {
            let (b, c) = (b.add(j), c.add(j));
            match (w, keep) {
                (2, false) => rows::<2, false, ADD>(m, k, a, rsa, csa, b, rsb, c, ldc),
                (2, true) => rows::<2, true, ADD>(m, k, a, rsa, csa, b, rsb, c, ldc),
                (_, false) => rows::<1, false, ADD>(m, k, a, rsa, csa, b, rsb, c, ldc),
                (_, true) => rows::<1, true, ADD>(m, k, a, rsa, csa, b, rsb, c, ldc),
            }
        };
        while j + 16 <= n {
            strip(2, j);
            j += 16;
        }
        if j + 8 <= n {
            strip(1, j);
            j += 8;
        }
        for jj in j..n {
            for i in 0..m {
                let ai = a.offset(i as isize * rsa);
                let mut acc = 0f32;
                for p in 0..k {
                    let bp = *b.offset(p as isize * rsb).add(jj);
                    acc = (*ai.offset(p as isize * csa)).mul_add(bp, acc);
                }
                let v = if keep { acc } else { acc + 0.0 };
                let at = c.add(i * ldc + jj);
                *at = if ADD { *at + v } else { v };
            }
        }
    }

    /// [`sgemm`] beside `matrixmultiply`'s AVX-512 kernel (chains stored as `1·acc`): strips of
    /// 32 and 16 columns in `__m512` tiles, the columns left over by [`sgemm`].
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn sgemm512<const ADD: bool>(
        m: usize,
        k: usize,
        n: usize,
        a: *const f32,
        rsa: isize,
        csa: isize,
        b: *const f32,
        rsb: isize,
        c: *mut f32,
        ldc: usize,
    ) {
        // SAFETY (every block below): rows `i..i+R` and columns `j..j+16W` of the caller's
        // views, which lie inside their allocations.
        let mut j = 0;
        while j + 32 <= n {
            rows512::<2, true, ADD>(m, k, a, rsa, csa, b.add(j), rsb, c.add(j), ldc);
            j += 32;
        }
        if j + 16 <= n {
            rows512::<1, true, ADD>(m, k, a, rsa, csa, b.add(j), rsb, c.add(j), ldc);
            j += 16;
        }
        if j < n {
            sgemm::<ADD>(m, k, n - j, a, rsa, csa, b.add(j), rsb, c.add(j), ldc, true);
        }
    }

    /// `out[p·n + j] = b[j·ldb + p]` for `p < k`, `j < n` (`b` an `n×k` row-major matrix with
    /// rows `ldb` apart, `out` its `k×n` transpose): 8×8 blocks through registers (unpack,
    /// shuffle, lane permute), the edges element by element.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn transpose_into(
        k: usize,
        n: usize,
        b: *const f32,
        ldb: isize,
        out: *mut f32,
    ) {
        let (k8, n8) = (k - k % 8, n - n % 8);
        for j in (0..n8).step_by(8) {
            for p in (0..k8).step_by(8) {
                let mut r = [_mm256_setzero_ps(); 8];
                for (q, v) in r.iter_mut().enumerate() {
                    *v = _mm256_loadu_ps(b.offset((j + q) as isize * ldb).add(p));
                }
                let cols = crate::exec::small_k::avx2::transpose8(r);
                for (q, c) in cols.iter().enumerate() {
                    _mm256_storeu_ps(out.add((p + q) * n + j), *c);
                }
            }
        }
        for j in 0..n {
            let row = b.offset(j as isize * ldb);
            let from = if j < n8 { k8 } else { 0 };
            for p in from..k {
                *out.add(p * n + j) = *row.add(p);
            }
        }
    }

    /// Defines `$rows` (all `m` rows of a strip of `LANES·W` columns, in tiles of the listed
    /// heights, tallest first) and `$tile` (`R` rows × `LANES·W` columns: one FMA chain per
    /// element over the depths in order, from `+0`, stored as `acc` where `KEEP` — the AVX-512
    /// kernel's `1·acc` — else as `acc + 0`; where `ADD`, that value added to `C`'s element,
    /// `c + v`), for one vector width: the AVX2 and AVX-512 tiles are the same code over
    /// `__m256` and `__m512`.
    macro_rules! tiles {
        ($rows:ident, $tile:ident, $feature:literal, $lanes:literal, [$($height:literal),+],
         $zero:ident, $load:ident, $splat:ident, $fma:ident, $add:ident, $store:ident) => {
            #[allow(clippy::too_many_arguments, clippy::int_plus_one)]
            #[target_feature(enable = $feature)]
            unsafe fn $rows<const W: usize, const KEEP: bool, const ADD: bool>(
                m: usize,
                k: usize,
                a: *const f32,
                rsa: isize,
                csa: isize,
                b: *const f32,
                rsb: isize,
                c: *mut f32,
                ldc: usize,
            ) {
                let mut i = 0;
                $(
                    while i + $height <= m {
                        let (a, c) = (a.offset(i as isize * rsa), c.add(i * ldc));
                        $tile::<$height, W, KEEP, ADD>(k, a, rsa, csa, b, rsb, c, ldc);
                        i += $height;
                    }
                )+
            }

            #[allow(clippy::too_many_arguments)]
            #[target_feature(enable = $feature)]
            #[inline]
            unsafe fn $tile<const R: usize, const W: usize, const KEEP: bool, const ADD: bool>(
                k: usize,
                a: *const f32,
                rsa: isize,
                csa: isize,
                b: *const f32,
                rsb: isize,
                c: *mut f32,
                ldc: usize,
            ) {
                let mut acc = [[$zero(); W]; R];
                for p in 0..k {
                    let bp = b.offset(p as isize * rsb);
                    let mut bv = [$zero(); W];
                    for (w, v) in bv.iter_mut().enumerate() {
                        *v = $load(bp.add($lanes * w));
                    }
                    let ap = a.offset(p as isize * csa);
                    for (r, row) in acc.iter_mut().enumerate() {
                        let av = $splat(*ap.offset(r as isize * rsa));
                        for (x, v) in row.iter_mut().zip(&bv) {
                            *x = $fma(av, *v, *x);
                        }
                    }
                }
                let zero = $zero();
                for (r, row) in acc.iter().enumerate() {
                    for (w, x) in row.iter().enumerate() {
                        let v = if KEEP { *x } else { $add(*x, zero) };
                        let at = c.add(r * ldc + $lanes * w);
                        let v = if ADD { $add($load(at), v) } else { v };
                        $store(at, v);
                    }
                }
            }
        };
    }

    // Tiles of 6 rows × 16 or 8 columns (12 `__m256` accumulators at most), then single rows.
    tiles!(
        rows,
        tile,
        "avx2,fma",
        8,
        [6, 1],
        _mm256_setzero_ps,
        _mm256_loadu_ps,
        _mm256_set1_ps,
        _mm256_fmadd_ps,
        _mm256_add_ps,
        _mm256_storeu_ps
    );
    // Tiles of 8 rows × 32 or 16 columns (16 `__m512` accumulators at most), then 4 rows, then
    // single rows.
    tiles!(
        rows512,
        tile512,
        "avx512f",
        16,
        [8, 4, 1],
        _mm512_setzero_ps,
        _mm512_loadu_ps,
        _mm512_set1_ps,
        _mm512_fmadd_ps,
        _mm512_add_ps,
        _mm512_storeu_ps
    );
}

/// The product `a·b` (`a` an `m×k` view of strides `(rsa, csa)`, `b` a `k×n` view of strides
/// `(rsb, csb)`, unit column stride or not) through this kernel and through `matrixmultiply::sgemm` (β = 0):
/// `Some((direct, matrixmultiply))`, both `m×n` row-major, or `None` where this kernel
/// declines the product (no FMA kernel on this machine, `k > 256`, a product where packing
/// pays). For the test that the two agree bit for bit.
///
/// # Panics
/// When a view does not lie inside its buffer.
#[doc(hidden)]
pub fn direct_and_packed(
    mkn: (usize, usize, usize),
    a: &[f32],
    sa: (usize, usize),
    b: &[f32],
    sb: (usize, usize),
) -> Option<(Vec<f32>, Vec<f32>)> {
    direct_and_packed_into(mkn, a, sa, b, sb, None)
}

/// [`direct_and_packed`] added to `c` (`m×n` row-major): this kernel adding into `c`, and `c`
/// plus `matrixmultiply`'s product (β = 0) element by element, `c + p` (the dot-accumulate
/// form's bits). For the test that the two agree bit for bit.
///
/// # Panics
/// When a view does not lie inside its buffer, or `c` is not `m·n` long.
#[doc(hidden)]
pub fn direct_add_and_packed(
    mkn: (usize, usize, usize),
    a: &[f32],
    sa: (usize, usize),
    b: &[f32],
    sb: (usize, usize),
    c: &[f32],
) -> Option<(Vec<f32>, Vec<f32>)> {
    assert_eq!(c.len(), mkn.0 * mkn.2, "c's length");
    direct_and_packed_into(mkn, a, sa, b, sb, Some(c))
}

/// [`direct_and_packed`], added to `c` when given.
fn direct_and_packed_into(
    (m, k, n): (usize, usize, usize),
    a: &[f32],
    (rsa, csa): (usize, usize),
    b: &[f32],
    (rsb, csb): (usize, usize),
    c: Option<&[f32]>,
) -> Option<(Vec<f32>, Vec<f32>)> {
    let last = |rows: usize, cols: usize, rs: usize, cs: usize| {
        (rows.max(1) - 1) * rs + (cols.max(1) - 1) * cs
    };
    assert!(m * k == 0 || last(m, k, rsa, csa) < a.len(), "a's view");
    assert!(k * n == 0 || last(k, n, rsb, csb) < b.len(), "b's view");
    let mut direct = c.map_or_else(|| vec![f32::NAN; m * n], <[f32]>::to_vec);
    let mut packed = vec![f32::NAN; m * n];
    let (rsa, csa, rsb, csb) = (rsa as isize, csa as isize, rsb as isize, csb as isize);
    // SAFETY: the views were checked above; `direct` and `packed` are fresh buffers of
    // `m·n` elements.
    unsafe {
        if !sgemm(
            (m, k, n),
            a.as_ptr(),
            (rsa, csa),
            b.as_ptr(),
            (rsb, csb),
            direct.as_mut_ptr(),
            n,
            c.is_some(),
        ) {
            return None;
        }
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            rsa,
            csa,
            b.as_ptr(),
            rsb,
            csb,
            0.0,
            packed.as_mut_ptr(),
            n as isize,
            1,
        );
    }
    if let Some(c) = c {
        for (p, &x) in packed.iter_mut().zip(c) {
            // `c + p`: the accumulator the left operand, as the `add` has it.
            #[allow(clippy::assign_op_pattern)]
            {
                *p = x + *p;
            }
        }
    }
    Some((direct, packed))
}
