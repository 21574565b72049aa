//! Depthwise convolutions (StableHLO `convolution` with one feature per group) on the CPU,
//! computed directly instead of as one tiny GEMM per group.
//!
//! Two forms, both with one output feature per group and no lhs dilation (one class, see
//! `conv.rs`):
//! - **feature groups** (a depthwise layer's forward pass and input gradient:
//!   `feature_group_count = C`, one input feature per group):
//!   `out[b, q, f] = Σ_t x[b, pos(q, t), f] · w[t, 0, f]`;
//! - **batch groups** (its weight gradient, which JAX emits with `batch_group_count = C`
//!   and a result batch of 1): `out[q, 0, f] = Σ_c Σ_t x[f, c, pos(q, t)] · w[c, t, f]`
//!   (`x`'s batch dimension holds the groups, its feature dimension the contraction).
//!
//! The feature `f` is the inner loop: contiguous in every operand for the channels-last
//! layouts JAX and PyTorch export, so it vectorizes. Per output element the terms are added
//! in a fixed order — `c`, then taps in row-major order, padding taps skipped — starting
//! from zero, whatever the thread count (rows are split over threads, never a sum).
//! Invariant: the result is the convolution's (same elements as the GEMM lowering up to the
//! order of the additions), deterministic for given shapes.

use super::conv::{Class, Geometry};
use super::dot::Gemm;
use super::par;
use crate::error::{invalid, OpError};

/// The strides and offsets one output row reads, per form.
struct Form {
    /// Element stride of the feature `f` in `x` and in `w`.
    xf: isize,
    wf: isize,
    /// Contraction features `c` (1 for the feature-group form) and their strides.
    nc: usize,
    xc: isize,
    wc: isize,
    /// Stride in `x` of the result batch `b` (feature-group form).
    xb: isize,
}

/// Computes a depthwise convolution of `g` into `out` (the canonical layout of `conv.rs`:
/// `[N', Q, O]` by rows, `[Q, N', O]` else), if `g` is one (see the module docs); `Ok(false)`
/// leaves `out` untouched for the general lowering.
///
/// # Errors
/// [`OpError::Invalid`] when a read would fall outside an operand (a malformed geometry).
pub(crate) fn depthwise<T: Gemm>(
    x: &[T],
    w: &[T],
    g: &Geometry,
    cls: &[Class],
    out: &mut [T],
) -> Result<bool, OpError> {
    let [class] = cls else {
        return Ok(false);
    };
    if g.og != 1 || g.dims.iter().any(|d| d.ldil != 1) {
        return Ok(false);
    }
    let (sb, sc) = g.x_strides();
    let wst = super::layout::istrides_of(&g.wshape);
    let (wo, wi) = (wst[g.w_out], wst[g.w_in]);
    let form = if g.fgc > 1 && g.i == 1 {
        Form {
            xf: sc,
            wf: wo,
            nc: 1,
            xc: 0,
            wc: 0,
            xb: sb,
        }
    } else if g.bgc > 1 && g.nb_out == 1 {
        Form {
            xf: sb,
            wf: wo,
            nc: g.i,
            xc: sc,
            wc: wi,
            xb: 0,
        }
    } else {
        return Ok(false);
    };
    let (o, nq, nt) = (g.o, class.qpos.len(), class.taps.len());
    let taps = g.tap_offsets(&class.taps);
    let rows = g.nb_out * nq;
    if out.len() != rows * o || o == 0 {
        return Ok(false);
    }
    let by_rows = g.by_rows();
    // Output row `r` of the canonical layout: its batch and class position.
    let row = |r: usize| -> (usize, usize) {
        if by_rows {
            (r / nq, r % nq)
        } else {
            (r % g.nb_out, r / g.nb_out)
        }
    };
    // The last element of a row of `o` features read from `x` and `w`.
    let (xhi, whi) = ((o - 1) as isize * form.xf, (o - 1) as isize * form.wf);
    let fits = |xo: isize, wo: isize| {
        xo >= 0 && wo >= 0 && xo + xhi < x.len() as isize && wo + whi < w.len() as isize
    };
    let rows_per_chunk = (par::PAR_MIN / o / nt.max(1) / form.nc.max(1)).max(1);
    par::try_chunks_mut(out, rows_per_chunk * o, &|start, chunk| {
        for (k, acc) in chunk.chunks_mut(o).enumerate() {
            let (b, qi) = row(start / o + k);
            acc.fill(T::default());
            for c in 0..form.nc {
                for (t, &woff) in taps.iter().enumerate() {
                    let Some(xoff) = class.off[qi * nt + t] else {
                        continue;
                    };
                    let xo = b as isize * form.xb + c as isize * form.xc + xoff;
                    let wo = c as isize * form.wc + woff;
                    if !fits(xo, wo) {
                        return invalid("internal: depthwise convolution reads out of bounds");
                    }
                    let (xo, wo) = (xo as usize, wo as usize);
                    if form.xf == 1 && form.wf == 1 {
                        let (xs, ws) = (&x[xo..xo + o], &w[wo..wo + o]);
                        for ((a, &xv), &wv) in acc.iter_mut().zip(xs).zip(ws) {
                            *a += xv * wv;
                        }
                    } else {
                        for (f, a) in acc.iter_mut().enumerate() {
                            let xv = x[xo + f * form.xf as usize];
                            let wv = w[wo + f * form.wf as usize];
                            *a += xv * wv;
                        }
                    }
                }
            }
        }
        Ok(())
    })?;
    Ok(true)
}
