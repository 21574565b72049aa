//! Finalize under a budget when a plan keeps several schedule variants ([`Finalizer`]): every
//! variant's decisions in parallel (the calling thread and the helper threads,
//! `crate::helpers`), then arenas laid out in order of modelled added time until one fits the
//! budget.
//!
//! The variant whose decisions end first lays out its arena at once, speculating that it adds
//! the least time (on GPT-2 medium the variant with fewer evictions both ends first and adds
//! less); the variant whose decisions end last checks the speculation against every result
//! and cancels the layout when another variant comes first. A right guess overlaps the
//! layout with the other variants' decisions; a wrong one costs the time until the cancel is
//! seen (the scan looks every few hundred placements). The calling thread starts with the
//! variant that ended first at the previous finalize, so that the layout on the critical path
//! runs where the result is awaited (no thread is woken for it); the thread that decides last
//! stays awake, helping, until the speculative layout returns.
//!
//! Before a result is laid out in full it is screened (`Finalizer::surely_misses`): where
//! every order of its layout, each abandoned early, fragments past what its retries could
//! recover (their target would lie below the lowest peak its decisions reach), the results
//! that come before the first that may fit go last, so that a variant that cannot fit the
//! budget is not laid out and retried ahead of one that fits (the speculating variant is
//! screened before its layout, on its thread).
//!
//! Invariant: speculation changes when arenas are laid out, never which result is returned:
//! the first feasible result in order of its decisions' (added time, planned peak, the first
//! variant before the others, then by index), those that surely miss the budget ahead of the
//! first that may fit taken last, whose arena fits the budget (a layout that misses it
//! decides again under a lower target, [`Finalizer`]'s `lay_out`), else the smallest arena
//! (tests: `tests/tests/finalize.rs`, `the_variant_comparison_follows_its_rule`;
//! `tests/tests/variant_screen.rs`).

use super::{smaller_infeasible, ConcretePlan, FinalizeError, FinalizeOptions, Finalizer, Shaped};
use crate::format::Plan;
use ebb_ir::dim::DimError;
use ebb_ir::Bindings;
use std::cmp::Ordering as Cmp;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// A feasible result's place in the order: added time (µs), planned peak (bytes), and its
/// rank among equals (the first variant first, then by index).
type Key = (f64, i64, usize);

/// One variant's outcome: the result, whether its arena is laid out, and its decisions' key
/// before any layout.
type Outcome = Result<(ConcretePlan, bool, Key), FinalizeError>;

fn compare(a: &Key, b: &Key) -> Cmp {
    a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2))
}

/// Variant `i`'s rank among equal results when variant `first` comes first.
fn rank(i: usize, first: usize) -> usize {
    if i == first {
        0
    } else if i == 0 {
        first
    } else {
        i
    }
}

/// The shared state of one comparison: how many variants' decisions are done, each feasible
/// one's key, and the variant laying out its arena ahead, if any.
struct Race {
    finished: usize,
    keys: Vec<Option<Key>>,
    speculating: Option<usize>,
}

impl<P: Deref<Target = Plan> + Sync> Finalizer<P> {
    /// The comparison of the plan's variants (see the module docs); `first` is the variant
    /// with the lowest scheduled peak at `b`.
    pub(super) fn finalize_variants(
        &self,
        first: usize,
        b: &Bindings,
        opts: &FinalizeOptions,
    ) -> Result<ConcretePlan, FinalizeError> {
        let n = self.prepared.len();
        let race = Mutex::new(Race {
            finished: 0,
            keys: vec![None; n],
            speculating: None,
        });
        let cancel = AtomicBool::new(false);
        // Set once the speculative layout has returned (done or cancelled), and once it has
        // started (after its screen).
        let laid_out = AtomicBool::new(false);
        let laying = AtomicBool::new(false);
        // The variant that ended first last time runs first, on this thread: the speculative
        // layout then starts without waiting for another thread to wake (timing only).
        let lead = self.ended_first.load(Ordering::Relaxed).min(n - 1);
        let order: Vec<usize> = std::iter::once(lead)
            .chain((0..n).filter(|&i| i != lead))
            .collect();
        // Per variant (in index order once sorted): the result, whether its arena is laid
        // out, and its decisions' key before any layout (a layout that misses the budget
        // decides again and adds time).
        // (Per variant also whether its arena surely misses the budget, where that was
        // screened: by the variant that speculates, before its layout.)
        type Run = (usize, Outcome, Option<Shaped>, Option<bool>);
        let mut run: Vec<Run> = crate::helpers::map_shared(n, |k| {
            let i = order[k];
            let shaped = self.evaluate(i, b, opts);
            let decided = match &shaped {
                Ok(s) => self.decide_first(s, b, opts),
                Err(e) => Err(e.clone()),
            }
            .map(|c| {
                let key = (c.overhead_us, c.peak_bytes_planned, rank(i, first));
                (c, key)
            });
            let shaped = shaped.ok();
            let key = decided.as_ref().ok().map(|&(_, key)| key);
            let (speculate, wait) = {
                let mut race = race.lock().unwrap_or_else(|e| e.into_inner());
                race.keys[i] = key;
                race.finished += 1;
                if race.finished == 1 {
                    self.ended_first.store(i, Ordering::Relaxed);
                }
                if race.finished == n {
                    let wait = match race.speculating {
                        Some(s) if !leads(s, &race.keys) => {
                            cancel.store(true, Ordering::Relaxed);
                            false
                        }
                        Some(_) => true,
                        None => false,
                    };
                    (false, wait)
                } else if race.finished == 1
                    && opts.offsets
                    && decided.as_ref().is_ok_and(|(c, _)| !c.decisions.is_empty())
                {
                    race.speculating = Some(i);
                    (true, false)
                } else {
                    (false, false)
                }
            };
            if wait {
                // The last decisions are done and the speculation stands: stay awake
                // (taking any work of the pool, such as the layout's other half) until
                // the layout returns, rather than sleep and be woken late; not while the
                // speculating variant is still screened (a busy wait beside that work, at
                // a real-time priority on two cores, can hold its core for seconds).
                while !laid_out.load(Ordering::Acquire) && laying.load(Ordering::Acquire) {
                    if rayon::yield_now() != Some(rayon::Yield::Executed) {
                        std::hint::spin_loop();
                    }
                }
            }
            let mut misses_budget = None;
            let r = match (decided, &shaped) {
                (Ok((c, key)), Some(shaped)) if speculate => {
                    // Not laid out where its arena surely misses the budget: another
                    // variant's result then comes first (see below).
                    let misses = self.surely_misses(&c, shaped, opts);
                    misses_budget = Some(misses);
                    let (c, laid) = if misses {
                        (c, false)
                    } else {
                        laying.store(true, Ordering::Release);
                        self.lay_out_unless(c, shaped, b, opts, &cancel)
                    };
                    laid_out.store(true, Ordering::Release);
                    Ok((c, laid, key))
                }
                (Ok((c, key)), _) => Ok((c, false, key)),
                (Err(e), _) => Err(e),
            };
            (i, r, shaped, misses_budget)
        });
        run.sort_unstable_by_key(|r| r.0);
        // Each variant evaluated at `b` (`None` where that failed), by index.
        let mut screened: Vec<Option<bool>> = Vec::with_capacity(n);
        let (all, shaped): (Vec<Outcome>, Vec<Option<Shaped>>) = run
            .into_iter()
            .map(|(_, r, s, misses)| {
                screened.push(misses);
                (r, s)
            })
            .unzip();
        let mut all = all;
        // Lays out `c`, whose variant was evaluated (it has decisions).
        let lay_out = |c: ConcretePlan| match &shaped[c.variant] {
            Some(s) => self.lay_out(c, s, b, opts),
            None => c,
        };
        let binds = match &all[first] {
            Ok((c, _, _)) => !c.decisions.is_empty(),
            Err(e) => matches!(e, FinalizeError::Infeasible { .. }),
        };
        if !binds {
            return all
                .swap_remove(first)
                .map(|(c, laid, _)| if laid { c } else { lay_out(c) });
        }
        let mut ok: Vec<(ConcretePlan, bool, Key)> = Vec::new();
        let mut infeasible: Option<FinalizeError> = None;
        for r in all {
            match r {
                Ok(r) => ok.push(r),
                Err(e) => {
                    if infeasible
                        .as_ref()
                        .is_none_or(|i| smaller_infeasible(&e, i))
                    {
                        infeasible = Some(e);
                    }
                }
            }
        }
        ok.sort_by(|x, y| compare(&x.2, &y.2));
        if ok.is_empty() {
            return Err(infeasible.unwrap_or(FinalizeError::Eval {
                expr: "plan variants".into(),
                source: DimError::Overflow,
            }));
        }
        if !opts.offsets {
            return Ok(ok.swap_remove(0).0);
        }
        // The results whose arenas surely miss the budget, retries included
        // (`Finalizer::surely_misses`), ahead of the first that may fit go last, in that
        // order: their full layouts and retries would be made before the next result's.
        let may_fit = |(c, done, _): &(ConcretePlan, bool, Key)| {
            *done
                || !screened[c.variant].unwrap_or_else(|| {
                    shaped[c.variant]
                        .as_ref()
                        .is_some_and(|s| self.surely_misses(c, s, opts))
                })
        };
        if let Some(k) = ok.iter().position(may_fit) {
            ok.rotate_left(k);
        }
        // Arenas in that order, until one fits the budget (the decisions leave the layout
        // room, so the first usually does); else the smallest.
        let budget = opts.budget.unwrap_or(i64::MAX);
        let mut laid: Vec<ConcretePlan> = Vec::with_capacity(ok.len());
        for (c, done, _) in ok {
            let c = if done { c } else { lay_out(c) };
            if c.arena.arena_bytes <= budget {
                return Ok(c);
            }
            laid.push(c);
        }
        let size = |c: &ConcretePlan| (c.arena.arena_bytes, c.overhead_us);
        let k = (0..laid.len()).fold(0, |b, i| {
            if size(&laid[i]) < size(&laid[b]) {
                i
            } else {
                b
            }
        });
        Ok(laid.swap_remove(k))
    }
}

/// Whether variant `s`'s result comes before every other feasible one (`keys`: every
/// variant's key, all decided; `None` for an infeasible one).
fn leads(s: usize, keys: &[Option<Key>]) -> bool {
    let Some(Some(ks)) = keys.get(s) else {
        return false;
    };
    keys.iter().enumerate().all(|(j, k)| match k {
        Some(kj) if j != s => compare(ks, kj) == Cmp::Less,
        _ => true,
    })
}
