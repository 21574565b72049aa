//! The rows lowering of `convolution` (see `conv.rs`) for an input whose *batch* dimension is
//! the contiguous one: the weight gradients JAX emits as a convolution whose "batch" is the
//! layer's input features (`[f, 0, 1, b]` with channels last), when their contraction is short
//! enough for the rows lowering (a small batch, or a small image).
//!
//! There each patch row `(b, q)` would gather `taps × c` elements `sc` apart (the layer's
//! batch stride, a whole image), one cache line per element. Here the patch matrix of one
//! class position `q` is gathered transposed instead, as `[(tap, c), b]`: each of its rows is
//! one contiguous run of `x` over `b`. The GEMM reads it through strides (`A[b, (tap, c)]` at
//! `(tap, c)·n + b`) and writes the rows `(b, q)` of the result for that `q`.
//!
//! Invariant: the GEMM computes every result element from the same patch values, the same
//! kernel view and the same contraction order `(tap, c)` as the row-gathering lowering, in one
//! call over the whole contraction; only the split of the result rows into calls differs,
//! which never changes the bits (see `dot.rs`). So the result is bit-identical to it, and
//! deterministic for given shapes whatever the thread count.

use super::conv::{filled, run, Class, Geometry, BLOCK_ELEMS};
use super::conv_gemm::gemm_blocks;
use super::dot::{Gemm, Mat};
use crate::error::OpError;

/// The rows lowering of one group and class into `out` (`[N', Q, O]`, this group's `og`
/// columns from `o0`), for `x` whose batch stride is 1: `w` is the kernel as a
/// `[(tap, c), og]` view, `xo` the group's offset in `x`.
///
/// The caller has checked that every patch read lies inside `x`.
///
/// # Errors
/// [`OpError::Invalid`] when a GEMM view falls outside its buffer (an internal error).
pub(super) fn rows_by_batch<T: Gemm>(
    x: &[T],
    (wm, wv): (&[T], Mat),
    g: &Geometry,
    (xo, o0): (usize, usize),
    class: &Class,
    out: &mut [T],
) -> Result<(), OpError> {
    let (_, sc) = g.x_strides();
    let (nq, nt, ci, og, o, nb) = (class.qpos.len(), class.taps.len(), g.i, g.og, g.o, g.nb_out);
    let (kc, qall) = (nt * ci, g.q());
    if nb == 0 || og == 0 {
        return Ok(());
    }
    // Result rows of one task: a block of `bb` batch rows of one class position.
    let bb = (BLOCK_ELEMS / kc.max(1)).max(64).min(nb);
    let nbb = nb.div_ceil(bb);
    // [nq, nbb · bb, og]: the rows of task `(qi, blk)` at `(qi · nbb + blk) · bb`.
    let mut tmp = vec![T::default(); nq * nbb * bb * og];
    super::par::try_chunks_mut(&mut tmp, bb * og, &|s, cb| {
        let task = s / (bb * og);
        let (qi, b0) = (task / nbb, (task % nbb) * bb);
        let n = bb.min(nb - b0);
        let offs = &class.off[qi * nt..(qi + 1) * nt];
        let mut buf = Vec::new();
        // Row `(t, c)` of the transposed patch: `x` at `xo + c·sc + off(q, t) + b` for the
        // block's `n` batch rows `b`.
        let col = filled(&mut buf, kc * n, |col| {
            for (k, dst) in col.chunks_mut(n).enumerate().take(kc) {
                let (t, c) = (k / ci, k % ci);
                let base = (xo + b0) as isize + c as isize * sc;
                run(x, offs[t].map(|v| v + base), 1, dst);
            }
        });
        let av = Mat {
            off: 0,
            rs: 1,
            cs: n as isize,
        };
        gemm_blocks((n, kc, og), col, av, wm, wv, cb, og, false, &mut Vec::new())
    })?;
    for qi in 0..nq {
        for b in 0..nb {
            let src = (qi * nbb * bb + b) * og;
            let at = (b * qall + class.qpos[qi]) * o + o0;
            out[at..at + og].copy_from_slice(&tmp[src..src + og]);
        }
    }
    Ok(())
}
