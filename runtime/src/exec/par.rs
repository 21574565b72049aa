//! The kernels' one door to rayon: a result buffer split into consecutive chunks, each chunk
//! filled by a `&dyn Fn(start, chunk)` on the thread pool.
//!
//! Why a `dyn` body: rayon's parallel-iterator machinery is generic over the closure, and with
//! a closure per op and per element type the runtime instantiated it about 600 times (60% of
//! the crate's LLVM IR, most of its build time). Behind a `dyn` body it is instantiated once
//! per element type, while each body's inner loop stays monomorphic and inlined.
//!
//! Invariant: every element of `out` is passed to `body` exactly once, inside the chunk that
//! starts at its index rounded down to a multiple of `chunk`; chunks are disjoint, so a body
//! that writes only its chunk and reads only shared data gives the same bits on any number of
//! threads.

use rayon::prelude::*;

/// Outputs with at least this many elements are produced by several threads: the default of
/// [`par_min`] and [`copy_min`], and the threshold of the reductions, gathers and other
/// kernels that split on their own.
pub(crate) const PAR_MIN: usize = 1 << 15;

/// A split threshold read once from the environment variable `name` (a count of elements, or
/// of multiply-adds), `default` when it is unset or not a number. The thresholds trade the
/// helpers' wake-up and join against the work they take over, which depends on the machine;
/// these variables let a measurement sweep them without a rebuild. Any value gives the same
/// bits (see the module docs).
pub(crate) fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Outputs with at least this many elements are split over threads by [`elements`] and the
/// fused loop and row kernels: `EBB_PAR_MIN`, default [`PAR_MIN`].
pub(crate) fn par_min() -> usize {
    static V: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *V.get_or_init(|| knob("EBB_PAR_MIN", PAR_MIN))
}

/// Copies of at least this many elements are split over threads by [`copy`]:
/// `EBB_PAR_COPY_MIN`, default [`PAR_MIN`].
pub(crate) fn copy_min() -> usize {
    static V: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *V.get_or_init(|| knob("EBB_PAR_COPY_MIN", PAR_MIN))
}

/// GEMMs (all batch elements together) of at least this many multiply-adds are split into
/// blocks over threads: `EBB_PAR_DOT_MIN`, default 2¹⁸.
pub(crate) fn dot_min() -> u64 {
    static V: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *V.get_or_init(|| knob("EBB_PAR_DOT_MIN", 1 << 18)) as u64
}

/// Elements per chunk of a flat elementwise split: about four chunks per thread, at least
/// 8192 elements.
pub(crate) fn grain(n: usize) -> usize {
    n.div_ceil(4 * rayon::current_num_threads().max(1))
        .max(8192)
}

/// `body(start, chunk)` for the chunks of `chunk` elements of `out` (the last may be shorter),
/// in parallel; one call `body(0, out)` when `out` is shorter than `chunk` (or `chunk` is 0).
pub(crate) fn chunks_mut<U: Send>(
    out: &mut [U],
    chunk: usize,
    body: &(dyn Fn(usize, &mut [U]) + Sync),
) {
    if chunk == 0 || out.len() <= chunk {
        body(0, out);
    } else {
        out.par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(k, c)| body(k * chunk, c));
    }
}

/// A fallible chunk body: `(start, chunk)` to `Ok` or the error that stops the split.
pub(crate) type TryBody<'a, U, E> = dyn Fn(usize, &mut [U]) -> Result<(), E> + Sync + 'a;

/// [`chunks_mut`] with a fallible body: the first error (in no particular order) is returned.
pub(crate) fn try_chunks_mut<U: Send, E: Send>(
    out: &mut [U],
    chunk: usize,
    body: &TryBody<'_, U, E>,
) -> Result<(), E> {
    if chunk == 0 || out.len() <= chunk {
        body(0, out)
    } else {
        out.par_chunks_mut(chunk)
            .enumerate()
            .try_for_each(|(k, c)| body(k * chunk, c))
    }
}

/// `body(i)` for every `i < n`, in parallel (each index once).
pub(crate) fn indices(n: usize, body: &(dyn Fn(usize) + Sync)) {
    (0..n).into_par_iter().for_each(body);
}

/// `dst.copy_from_slice(src)`, split like [`elements`] from [`copy_min`] elements on (equal
/// lengths: the caller's contract).
pub(crate) fn copy<U: Copy + Send + Sync>(dst: &mut [U], src: &[U]) {
    if dst.len() < copy_min() {
        dst.copy_from_slice(src);
        return;
    }
    elements(dst, &|start, c| {
        c.copy_from_slice(&src[start..start + c.len()])
    });
}

/// The elementwise split: [`chunks_mut`] with chunks of [`grain`] elements when `out` has at
/// least [`par_min`], else one sequential call.
pub(crate) fn elements<U: Send>(out: &mut [U], body: &(dyn Fn(usize, &mut [U]) + Sync)) {
    if out.len() >= par_min() {
        chunks_mut(out, grain(out.len()), body);
    } else {
        body(0, out);
    }
}
