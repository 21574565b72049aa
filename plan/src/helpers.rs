//! The threads a finalize runs on: the calling thread, which does the work on the critical
//! path itself, and a small pool of helper threads (one fewer than the machine's cores) for
//! the work beside it — the other plan variants' decisions, the small intervals' layout.
//!
//! Why not rayon's global pool: a caller outside it hands its work over and sleeps until a
//! pool thread hands the result back, and on a 2-core VM each hand-off (waking a sleeping
//! thread) costs 20–50 µs, several times per finalize. Here the caller never waits for a
//! thread to wake: work a helper has not started by the time the caller is free, the caller
//! takes back ([`join`]). With the caller, the pool keeps as many threads busy as there are
//! cores.
//!
//! Invariant: what runs where changes timing only; every result is the one a serial run
//! gives.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// The helper threads: `available_parallelism − 1` of them (at least 1), named
/// `ebb-helper-<i>`; `None` where they cannot be started (the work then runs serially).
pub(crate) fn pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(cores.saturating_sub(1).max(1))
            .thread_name(|i| format!("ebb-helper-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Takes what `cell` holds, once (whichever thread comes first).
fn take<T>(cell: &Mutex<Option<T>>) -> Option<T> {
    cell.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// Runs `a` on the calling thread and `b` on a helper, or on the calling thread after `a`
/// when no helper has started it by then; returns both results.
pub(crate) fn join<RA, RB: Send>(
    a: impl FnOnce() -> RA,
    b: impl FnOnce() -> RB + Send,
) -> (RA, RB) {
    let Some(pool) = pool() else {
        let ra = a();
        return (ra, b());
    };
    let job = Mutex::new(Some(b));
    let theirs: Mutex<Option<RB>> = Mutex::new(None);
    let (ra, mine) = pool.in_place_scope(|s| {
        s.spawn(|_| {
            if let Some(b) = take(&job) {
                let rb = b();
                *theirs.lock().unwrap_or_else(|e| e.into_inner()) = Some(rb);
            }
        });
        let ra = a();
        (ra, take(&job).map(|b| b()))
    });
    // The scope has ended: a helper that took `b` has stored its result.
    let rb = mine
        .or_else(|| take(&theirs))
        .unwrap_or_else(|| unreachable!("`b` ran on one thread or the other"));
    (ra, rb)
}

/// Calls `f(k)` for every `k` in `0..n`, the calling thread starting with `k = 0` and
/// helpers taking the next undone `k` as they come free; the results in order of `k`.
pub(crate) fn map_shared<R: Send>(n: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let slots: Vec<Mutex<Option<R>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let run = |k: usize| *slots[k].lock().unwrap_or_else(|e| e.into_inner()) = Some(f(k));
    let work = || loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        if k >= n {
            break;
        }
        run(k);
    };
    match pool() {
        Some(pool) if n > 1 => pool.in_place_scope(|s| {
            // The caller claims the first before any helper can.
            let k = next.fetch_add(1, Ordering::Relaxed);
            for _ in 1..n.min(pool.current_num_threads() + 1) {
                s.spawn(|_| work());
            }
            run(k);
            work();
        }),
        _ => work(),
    }
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .unwrap_or_else(|| unreachable!("every k was claimed and run"))
        })
        .collect()
}
