//! The GEMM calls of the convolution lowerings, cut along the contraction into
//! `matrixmultiply`'s own depth blocks so that thin products (few output features) reach the
//! unpacked kernel of [`super::gemm_direct`], which takes one block of at most 256 depths
//! and no accumulation.
//!
//! Why the bits are those of one `matrixmultiply::sgemm` call: its FMA kernels (AVX2+FMA, and
//! AVX-512 where it was built with its `avx512` feature and the CPU has it) compute each
//! element of `C` per depth block `[256·j, 256·(j + 1))` as one chain of FMAs from `+0` and
//! store `ab` for the first block when `β = 0` (AVX2+FMA: `fma(1, ab, 0)`, AVX-512: `1·ab`),
//! else `fma(1, ab, 1·c) = c + ab` (one rounding; their edge tiles compute `ab` into a buffer
//! and add `c·1 + ab`, the same value). Here each block's chain is computed by a call of its
//! own with `β = 0` (by `gemm_direct` or `matrixmultiply`, the same chain) into `C` for the
//! first block of a non-accumulating product, else into a scratch tile that is then added to
//! `C` element by element: the same roundings in the same order. A chain ends at `-0` only
//! when its products underflow to `-0`; each call stores it as `matrixmultiply`'s kernel on
//! this machine does (`gemm_direct`'s `Store`, probed once). Only `f32` on machines where
//! `matrixmultiply` runs one of those kernels (the way it stores a chain tells) is cut; other
//! products are one call. A product narrower than one vector whose `A` is column-major is computed
//! as its transpose, `Cᵀ = Bᵀ·Aᵀ`, into the scratch tile and copied back: the same chains,
//! since an FMA's two factors commute.

use super::dot::{gemm_into, Gemm, Mat};
use crate::error::OpError;

/// `matrixmultiply`'s depth block for `f32` (`S_KC`).
const KC: usize = 256;

/// Products with fewer columns than this (one vector of 8 `f32`) whose `A` is column-major
/// are computed transposed, `Cᵀ = Bᵀ·Aᵀ`, so that the unpacked kernel runs along the long
/// side (it computes fewer than 8 columns one element at a time).
pub(super) const NARROW: usize = 8;

/// Products whose `C` has at most this many rows or columns are cut (`gemm_direct`'s thin
/// side: packing does not pay there).
const THIN_SIDE: usize = 32;

/// `C[m×n]` (row stride `ldc`) `= A·B`, or `+= A·B` when `acc`, with the bits of one
/// [`gemm_into`] call (see the module docs); `scratch` is reused between calls.
///
/// # Errors
/// [`OpError::Invalid`] when a view falls outside its buffer (an internal error).
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm_blocks<T: Gemm>(
    (m, k, n): (usize, usize, usize),
    a: &[T],
    av: Mat,
    b: &[T],
    bv: Mat,
    c: &mut [T],
    ldc: usize,
    acc: bool,
    scratch: &mut Vec<T>,
) -> Result<(), OpError> {
    // A product of fewer than 8 columns whose `A` is column-major is computed transposed.
    let tr = n < NARROW && av.rs == 1 && m >= 2 * NARROW;
    let cut = std::mem::size_of::<T>() == 4
        && (tr || (n >= NARROW && m.min(n) <= THIN_SIDE && (k > KC || acc)))
        && m > 0
        && n > 0
        && k > 0
        && fma_kernel();
    if !cut {
        return gemm_into((m, k, n), a, av, b, bv, c, ldc, acc);
    }
    let mut p0 = 0;
    while p0 < k {
        let kb = KC.min(k - p0);
        let ab = Mat {
            off: (av.off as isize + p0 as isize * av.cs) as usize,
            ..av
        };
        let bb = Mat {
            off: (bv.off as isize + p0 as isize * bv.rs) as usize,
            ..bv
        };
        if tr {
            // Sᵀ[n × m] = Bᵀ·Aᵀ: the same chains (an FMA's two factors commute), `m` wide.
            scratch.clear();
            scratch.resize(m * n, T::default());
            let bt = Mat {
                off: bb.off,
                rs: bv.cs,
                cs: bv.rs,
            };
            let at = Mat {
                off: ab.off,
                rs: av.cs,
                cs: 1,
            };
            gemm_into((n, kb, m), b, bt, a, at, scratch, m, false)?;
            let set = p0 == 0 && !acc;
            for (r, row) in c.chunks_mut(ldc).take(m).enumerate() {
                for (j, d) in row[..n].iter_mut().enumerate() {
                    let v = scratch[j * m + r];
                    if set {
                        *d = v;
                    } else {
                        *d += v;
                    }
                }
            }
        } else if p0 == 0 && !acc {
            gemm_into((m, kb, n), a, ab, b, bb, c, ldc, false)?;
        } else {
            scratch.clear();
            scratch.resize(m * n, T::default());
            gemm_into((m, kb, n), a, ab, b, bb, scratch, n, false)?;
            for (r, src) in scratch.chunks_exact(n).enumerate() {
                let dst = &mut c[r * ldc..r * ldc + n];
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d += s;
                }
            }
        }
        p0 += kb;
    }
    Ok(())
}

/// Whether `matrixmultiply` runs one of its FMA `f32` kernels on this machine
/// ([`super::gemm_direct::fma_kernel`]).
fn fma_kernel() -> bool {
    super::gemm_direct::fma_kernel()
}
