//! `reduce_window` of one monoid input over dense windows ([`super::reduce`]'s `Windows::dense`:
//! no padding or base-dilation holes, every window's taps at the same distances from its first
//! tap) whose innermost output axis reads a contiguous run of the input (a one-tap window at
//! unit stride: the channels of an NHWC pooling or of its gradient). A run of outputs along
//! that axis is folded a tap at a time over whole runs, `out[q] = init ⊕ x[b + t₀ + q] ⊕
//! x[b + t₁ + q] ⊕ …`, a loop the compiler vectorizes, instead of one window walk per output.
//!
//! Invariant: every output is `init` combined with its window's taps in row-major window
//! order, one `comb` per tap — the fold of the element-by-element walk, so the same bits; the
//! thread split (chunks of the output) changes which thread computes an output, never its
//! fold.

use super::par;
use super::reduce::advance;

/// Outputs folded together in registers (one AVX-512 vector of `f32`, two of `f64`).
const L: usize = 8;

/// Whether [`dense_rows`] serves the windows `base` (per output axis, the element offset in
/// `x` of each output position's first tap) and `offs` (the taps' offsets from the first tap,
/// row-major window order) over an `x` of `xlen` elements producing `oshape`: one table per
/// axis of `oshape`'s extents, at least one tap, an innermost axis whose positions are one
/// element apart, and every read inside `x`.
pub(super) fn fits(xlen: usize, base: &[Vec<usize>], offs: &[usize], oshape: &[usize]) -> bool {
    let Some(last) = base.last() else {
        return false;
    };
    if offs.is_empty()
        || base.len() != oshape.len()
        || base.iter().zip(oshape).any(|(b, &n)| b.len() != n)
        || last.iter().enumerate().any(|(q, &b)| b != last[0] + q)
    {
        return false;
    }
    // The last element read: every axis at its largest offset, the farthest tap.
    let hi = base
        .iter()
        .map(|b| b.iter().copied().max().unwrap_or(0))
        .sum::<usize>()
        + offs.iter().copied().max().unwrap_or(0);
    oshape.contains(&0) || hi < xlen
}

/// Fills `out` (the elements of `oshape`, stale contents allowed) with the windows `base`,
/// `offs` of `x` (see [`fits`], which must hold), in chunks of `chunk` outputs on the thread
/// pool (`0`: one chunk).
///
/// # Panics
/// Where [`fits`] does not hold or `out` is not `oshape`'s size (an internal error).
pub(super) fn dense_rows<T: Copy + Send + Sync>(
    x: &[T],
    init: T,
    comb: &(impl Fn(T, T) -> T + Sync),
    (base, offs): (&[Vec<usize>], &[usize]),
    oshape: &[usize],
    out: &mut [T],
    chunk: usize,
) {
    assert!(fits(x.len(), base, offs, oshape) && out.len() == oshape.iter().product::<usize>());
    let (Some((last, outer)), Some((&t0, rest))) = (base.split_last(), offs.split_first()) else {
        return;
    };
    if out.is_empty() {
        return;
    }
    let inner = last.len();
    let outer_shape = &oshape[..oshape.len() - 1];
    par::chunks_mut(out, chunk, &|s, c| {
        let mut o = super::layout::unravel(s / inner, outer_shape);
        let mut k = 0;
        let mut q0 = s % inner;
        while k < c.len() {
            let row: usize = o.iter().zip(outer).map(|(&q, t)| t[q]).sum();
            let n = (inner - q0).min(c.len() - k);
            let b = row + last[q0];
            let dst = &mut c[k..k + n];
            // Blocks of `L` outputs kept in registers across the taps, then the tail.
            let mut q = 0;
            while q + L <= n {
                let mut acc = [init; L];
                let s = &x[b + t0 + q..b + t0 + q + L];
                for j in 0..L {
                    acc[j] = comb(init, s[j]);
                }
                for &t in rest {
                    let s = &x[b + t + q..b + t + q + L];
                    for j in 0..L {
                        acc[j] = comb(acc[j], s[j]);
                    }
                }
                dst[q..q + L].copy_from_slice(&acc);
                q += L;
            }
            if q < n {
                let tail = &mut dst[q..];
                let m = tail.len();
                for (v, &xv) in tail.iter_mut().zip(&x[b + t0 + q..b + t0 + q + m]) {
                    *v = comb(init, xv);
                }
                for &t in rest {
                    for (v, &xv) in tail.iter_mut().zip(&x[b + t + q..b + t + q + m]) {
                        *v = comb(*v, xv);
                    }
                }
            }
            k += n;
            q0 = 0;
            advance(&mut o, outer_shape);
        }
    });
}
