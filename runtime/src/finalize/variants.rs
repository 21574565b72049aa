//! Finalize under a budget when a plan keeps several schedule variants ([`Finalizer`]): every
//! variant's decisions in parallel, then arenas laid out in order of modelled added time until
//! one fits the budget.
//!
//! The variant whose decisions end first lays out its arena at once, speculating that it adds
//! the least time (on GPT-2 medium the variant with fewer evictions both ends first and adds
//! less); the variant whose decisions end last checks the speculation against every result
//! and cancels the layout when another variant comes first. A right guess overlaps the
//! layout with the other variants' decisions; a wrong one costs the time until the cancel is
//! seen (the scan looks every few hundred placements).
//!
//! Invariant: speculation changes when arenas are laid out, never which result is returned:
//! the first feasible result in order of its decisions' (added time, planned peak, the first
//! variant before the others, then by index) whose arena fits the budget (a layout that misses
//! it decides again under a lower target, [`Finalizer`]'s `lay_out`), else the smallest arena
//! (test: `tests/tests/finalize.rs`, `the_variant_comparison_follows_its_rule`).

use super::{smaller_infeasible, ConcretePlan, FinalizeError, FinalizeOptions, Finalizer};
use ebb_ir::dim::DimError;
use ebb_ir::plan::Plan;
use ebb_ir::Bindings;
use rayon::prelude::*;
use std::cmp::Ordering as Cmp;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// A feasible result's place in the order: added time (µs), planned peak (bytes), and its
/// rank among equals (the first variant first, then by index).
type Key = (f64, i64, usize);

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

/// The shared state of one comparison: per variant, its key once its decisions are done
/// (`Some(None)` when infeasible), and the variant laying out its arena ahead, if any.
struct Race {
    done: Vec<Option<Option<Key>>>,
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
        let target = opts.decisions_target();
        let race = Mutex::new(Race {
            done: vec![None; n],
            speculating: None,
        });
        let cancel = AtomicBool::new(false);
        // (variant, result, whether its arena is laid out, its decisions' key before any
        // layout: a layout that misses the budget decides again and adds time)
        type Decided = (
            usize,
            Result<ConcretePlan, FinalizeError>,
            bool,
            Option<Key>,
        );
        let mut all: Vec<Decided> = (0..n)
            .into_par_iter()
            .map(|i| {
                let r = self.decide(i, b, opts, target);
                let key = r
                    .as_ref()
                    .ok()
                    .map(|c| (c.overhead_us, c.peak_bytes_planned, rank(i, first)));
                let speculate = {
                    let mut race = race.lock().unwrap_or_else(|e| e.into_inner());
                    race.done[i] = Some(key);
                    let finished = race.done.iter().filter(|d| d.is_some()).count();
                    if finished == n {
                        if let Some(s) = race.speculating {
                            if !leads(s, &race.done) {
                                cancel.store(true, Ordering::Relaxed);
                            }
                        }
                        false
                    } else if finished == 1
                        && opts.offsets
                        && r.as_ref().is_ok_and(|c| !c.decisions.is_empty())
                    {
                        race.speculating = Some(i);
                        true
                    } else {
                        false
                    }
                };
                match r {
                    Ok(c) if speculate => {
                        let (c, laid) = self.lay_out_unless(c, b, opts, &cancel);
                        (i, Ok(c), laid, key)
                    }
                    r => (i, r, false, key),
                }
            })
            .collect();
        let binds = match &all[first].1 {
            Ok(c) => !c.decisions.is_empty(),
            Err(e) => matches!(e, FinalizeError::Infeasible { .. }),
        };
        if !binds {
            let (_, r, laid, _) = all.swap_remove(first);
            return r.map(|c| if laid { c } else { self.lay_out(c, b, opts) });
        }
        let mut ok: Vec<(ConcretePlan, bool, Key)> = Vec::new();
        let mut infeasible: Option<FinalizeError> = None;
        for (_, r, laid, key) in all {
            match (r, key) {
                (Ok(c), Some(key)) => ok.push((c, laid, key)),
                (Ok(_), None) => {}
                (Err(e), _) => {
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
        // Arenas in that order, until one fits the budget (the decisions leave the layout
        // room, so the first usually does); else the smallest.
        let budget = opts.budget.unwrap_or(i64::MAX);
        let mut laid: Vec<ConcretePlan> = Vec::with_capacity(ok.len());
        for (c, done, _) in ok {
            let c = if done { c } else { self.lay_out(c, b, opts) };
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

/// Whether variant `s`'s result comes before every other feasible one (`done`: every
/// variant's key, all decided).
fn leads(s: usize, done: &[Option<Option<Key>>]) -> bool {
    let Some(Some(Some(ks))) = done.get(s) else {
        return false;
    };
    done.iter().enumerate().all(|(j, d)| match d {
        Some(Some(kj)) if j != s => compare(ks, kj) == Cmp::Less,
        _ => true,
    })
}
