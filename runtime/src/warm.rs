//! Warm workers: while a step runs on rayon's pool, every other worker of the pool stays
//! awake, taking the step's split work as soon as a kernel offers it, instead of going to
//! sleep between two kernels that split.
//!
//! Why: a rayon worker that finds no work spins briefly, then sleeps on a futex; the next
//! kernel that splits its work must wake it (a system call on the step's own thread, then, in
//! a virtual machine, an interrupt that brings a halted virtual CPU back, tens of µs). A
//! step of hundreds of ops of 20–150 µs each, a few hundred of which split, paid more in
//! those wake-ups than the second thread gained: on 2 CPUs, the T5-style trial step at
//! B=8, S=32, T=16 ran 6.5 ms on two threads and 6.3 ms on one, and 5.1 ms with the workers
//! kept awake (XLA:CPU, whose Eigen pool also spins between tasks, 5.8 ms). Work-stealing
//! pools elsewhere make the same trade (Eigen's `ThreadPool` spins before it parks a thread).
//!
//! How: [`with_warm_workers`] runs the step in a rayon scope and spawns one *warden* job per
//! other worker into the pool, detached ([`rayon::spawn`]): the step never waits for a
//! warden, which matters on a loaded machine, where a warden may be off its CPU when the step
//! ends (waiting for it to see the end would cost a scheduler time slice, several ms). A
//! warden runs whatever job it can take ([`rayon::yield_now`]: the pool's queues, so the
//! split work of the step's kernels) and otherwise gives its CPU back to the operating system
//! for a moment ([`std::thread::yield_now`]). When that yield lasts [`BUSY`] or more, another
//! thread wanted the CPU (a loaded machine, where a spinning warden would take CPU time from
//! the step's own thread and from other processes): the warden then stops for the rest of
//! the step, and its worker sleeps between splits as without wardens. After [`IDLE`]
//! without a job a warden returns and spawns its successor into the pool, which the worker
//! takes up again from its own queue.
//!
//! Why the successor: a worker waiting for a stolen half of its own split runs other jobs
//! meanwhile, and may take a warden; that warden runs on top of the waiting job, which
//! resumes only once the warden returns. A warden that looped until the step's end would
//! then never let it resume (a deadlock: the step waits for that job). Returning after
//! [`IDLE`] bounds that delay; the successor keeps the worker warm all the same. The step's
//! own thread runs no warden at all (one it takes returns at once, without a successor), so
//! the step's critical path is never held up by one.
//!
//! `EBB_WARM_WORKERS=0` turns the wardens off (each split then wakes sleeping workers as
//! before).
//!
//! Invariant: a warden only runs jobs that the step's kernels put into the pool; which thread
//! runs a job never changes its result (the kernels split their work by the thread count,
//! not by which threads take it: see `exec::par`), so the bits are those of a step without
//! wardens. Wardens stop, without successors, once the step's closure has returned (or
//! unwound); one still off its CPU then returns as soon as it runs again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Whether steps keep their workers warm: `EBB_WARM_WORKERS` unset or anything but `0`.
pub fn enabled() -> bool {
    static V: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *V.get_or_init(|| std::env::var("EBB_WARM_WORKERS").map_or(true, |v| v.trim() != "0"))
}

/// Sets the flag when dropped, so that the wardens stop even when `f` unwinds.
struct Done<'a>(&'a AtomicBool);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// How long a warden waits for a job before it hands over to its successor (see the module
/// docs): the most a warden taken by a waiting job delays it once the job's half is done.
const IDLE: std::time::Duration = std::time::Duration::from_micros(20);

/// A yield of the CPU that takes at least this long gave it to another thread (an idle CPU
/// returns at once): the warden then stops, without a successor (see the module docs).
const BUSY: std::time::Duration = std::time::Duration::from_micros(50);

std::thread_local! {
    /// Whether this thread is running a step's closure (it then runs no warden).
    static STEP_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f()` on a thread of rayon's global pool (inside a [`rayon::scope`]), with the pool's
/// other workers kept awake until it returns (see the module docs); with `warm` false, or a
/// pool of one thread, just `f()` inside a scope.
pub fn with_warm_workers<R: Send>(warm: bool, f: impl FnOnce() -> R + Send) -> R {
    let others = rayon::current_num_threads().saturating_sub(1);
    if !warm || others == 0 {
        return rayon::scope(|_| f());
    }
    rayon::scope(|_| {
        let done = Arc::new(AtomicBool::new(false));
        for _ in 0..others {
            let done = done.clone();
            rayon::spawn(move || warden(done));
        }
        let _done = Done(&done);
        let outer = STEP_THREAD.with(|c| c.replace(true));
        let _restore = Restore(outer);
        f()
    })
}

/// Puts back this thread's [`STEP_THREAD`] flag when dropped.
struct Restore(bool);

impl Drop for Restore {
    fn drop(&mut self) {
        STEP_THREAD.with(|c| c.set(self.0));
    }
}

/// A warden (see the module docs): runs the pool's jobs until `done`, or until it has found
/// none for [`IDLE`] (then spawns its successor), or until a yield of its CPU lasted
/// [`BUSY`] (then stops).
fn warden(done: Arc<AtomicBool>) {
    if STEP_THREAD.with(std::cell::Cell::get) {
        return;
    }
    let mut since = Instant::now();
    while !done.load(Ordering::Acquire) {
        match rayon::yield_now() {
            Some(rayon::Yield::Executed) => since = Instant::now(),
            _ if since.elapsed() >= IDLE => {
                rayon::spawn(move || warden(done));
                return;
            }
            _ => {
                let t = Instant::now();
                std::thread::yield_now();
                if t.elapsed() >= BUSY {
                    // Another thread ran on this CPU meanwhile: the machine has no CPU to
                    // spare, so this worker goes back to sleeping between splits.
                    return;
                }
            }
        }
    }
}
