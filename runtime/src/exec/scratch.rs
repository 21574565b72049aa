//! Per-thread scratch rows for the generated input-fusion kernels ([`super::jit`]): a row or
//! column reduction's kernel writes a batch of rows into a scratch buffer that the launch then
//! folds. The buffer is kept on the thread between launches instead of being allocated and
//! zeroed at every launch (a small step runs about a hundred such launches; their zeroing was
//! about 1.5% of the T5-style trial step's instructions).
//!
//! Invariant: a borrower gets exactly `len` elements with stale contents and reads only the
//! elements its kernel wrote first (every launch writes `[0, len')` before folding `[0, len')`),
//! so the contents never reach a result. A buffer of more than [`KEEP_MAX`] elements is not
//! kept; a borrow made while the thread's buffer is lent (a nested launch) gets a new one.

use std::cell::RefCell;

/// The most elements a thread keeps between launches (256 KiB of `f32`): the planned tile
/// bytes of the trial steps' input fusions are far below it, and a larger buffer is returned
/// to the allocator, so that no thread holds more than this beyond the plan's transient bytes.
pub(crate) const KEEP_MAX: usize = 1 << 16;

thread_local! {
    static ROWS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// `f` on `len` scratch elements of this thread (stale contents; see the module docs).
pub(crate) fn with_rows<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    if len > KEEP_MAX {
        return f(&mut vec![0f32; len]);
    }
    let kept = ROWS.try_with(|c| {
        let mut v = c.try_borrow_mut().ok()?;
        Some(std::mem::take(&mut *v))
    });
    let mut v = kept.ok().flatten().unwrap_or_default();
    if v.len() < len {
        v.resize(len, 0.0);
    }
    let r = f(&mut v[..len]);
    // Back for the next launch (a nested borrow's buffer is dropped instead when the outer
    // one is already back).
    let _ = ROWS.try_with(|c| {
        if let Ok(mut slot) = c.try_borrow_mut() {
            if slot.capacity() < v.capacity() {
                *slot = v;
            }
        }
    });
    r
}
