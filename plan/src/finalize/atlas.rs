//! A plan atlas: the greedy's pick orders at sample bindings of the symbol space, prepared
//! once per budget and device ([`Finalizer::prepare_atlas`]), so that a finalize at a new shape
//! replays a neighbour's picks (no search) and lays out the arena by the online scan alone (no
//! anchored layout, no repair), then checks the result exactly and falls back to the full
//! finalize where it does not fit.
//!
//! # What an entry holds
//! Per sample bindings under the atlas's options: the scheduled peak there (the coordinate
//! entries are looked up by: one number for any number of symbols), the [`greedy::Trace`] of
//! the search its full finalize made (the options the greedy set, in order: the decision
//! skeleton, by identity) and the layout order that packs its decisions best (one of greedy by
//! size's [`VARIANTS`] as the anchored layout's order; the scan where it packs within
//! [`SCAN_PREFERRED_WITHIN`] of that) with that layout's fragmentation (arena / planned peak).
//!
//! # The fast path
//! At bindings whose scheduled peak exceeds the budget less [`UPWARD_SLACK`] (below it the
//! full finalize takes no decision that adds time), the entry with the smallest scheduled
//! peak at least this one's (its log frees at least as much; none: the full finalize) is
//! replayed where that costs less than the full finalize did at the entry (`Entry::faster`;
//! else the full finalize runs) ([`greedy::replay`] of [`greedy::Trace::retargeted`]: its options set in order,
//! skipping those absent here, until the peak is within the target, then the greedy's second
//! look) under the budget divided by the fragmentation of the entry's layout (of the nearest
//! feasible entry where it was infeasible), less [`ATLAS_MARGIN`] of the budget, and at most
//! the budget less [`UPWARD_SLACK`]. The residency is then computed exactly (the checker's
//! model) and the arena laid out in the entry's layout order ([`crate::arena`]'s one-order
//! layout: the scan, or one anchored order alone); the result is kept where the arena fits
//! the budget. Where it exceeds the budget, once more under the planned peak scaled by
//! budget / arena, less [`ATLAS_MARGIN`] ([`ATLAS_TRIES`]). Else (the log runs out, or the
//! arena still exceeds the budget) the full finalize runs on the same evaluated shape.
//!
//! The decisions are not today's search at this shape: they are a neighbour's picks in its
//! order, under a target set by its fragmentation. On `gpt2_24l` (B=8, 64 long-tail lengths,
//! `fixed-mid-median`, 32 samples) they add between 0.43 points of the step less and 0.54
//! more than the full finalize's (docs/results/2026-11-29-finalize-atlas.md).
//!
//! # Cost
//! Fast path: one evaluation, one replay (O(picks · log points) plus the second look), one
//! layout of one order (`crate::arena`: the scan, O(n log n + points + n·f), or one anchored
//! order, O(n log n + points + K² + n·(f + K)) for K anchors); twice where the first arena
//! misses the budget. No search, no choice among layout orders. A miss adds those to the full
//! finalize.
//!
//! # Determinism
//! The atlas depends only on the plan, the options and the sample bindings given to
//! [`Finalizer::prepare_atlas`], never on the shapes finalized since: the same bindings and
//! options give the same result whatever was finalized before. Without an atlas for the
//! options (another budget or device, or several plan variants), finalize is unchanged.

use super::{
    check_and_choose_variant, finalize_prepared, greedy, surely_infeasible, upward_target,
    ConcretePlan, FinalizeOptions, Finalizer, Shaped, UPWARD_SLACK,
};
use crate::arena::{assign_offsets_order, greedy::VARIANTS};
use crate::format::Plan;
use ebb_ir::Bindings;
use std::ops::Deref;

/// Share of the budget the atlas's replay aims below the budget scaled by the entry's scan
/// fragmentation (the fragmentation of neighbouring shapes differs by a little).
pub const ATLAS_MARGIN: f64 = UPWARD_SLACK / 2.0;

/// Share of the budget by which an entry's best anchored order must pack tighter than the
/// scan for the fast path to lay out in that order rather than by the scan (one anchored
/// order costs about twice the scan: its anchors' greedy pass reads up to K²/2 pairs).
pub const SCAN_PREFERRED_WITHIN: f64 = UPWARD_SLACK / 2.0;

/// How many replays and layouts the fast path makes before the full finalize: the second
/// under the first's planned peak scaled by budget / arena, less [`ATLAS_MARGIN`].
pub const ATLAS_TRIES: usize = 2;

/// One sample of an [`Atlas`] (see the module docs).
#[derive(Debug, Clone)]
struct Entry {
    /// Whether the fast path costs less than the full finalize there: that decided or laid out
    /// more than once, or its scan exceeded the budget (it repaired the layout), or the fast
    /// path lays out by the scan alone (else the fast path is not taken at the shapes this
    /// entry serves: a replay and an anchored order cost about what a search and a scan do).
    faster: bool,
    /// Scheduled peak at the sample, bytes.
    peak_scheduled: i64,
    /// The search made there.
    trace: greedy::Trace,
    /// The layout order that packs the sample's decisions best (`None`: the scan alone; else
    /// that anchored order after the scan) and its arena / planned peak; `None` where the
    /// sample was infeasible.
    layout: Option<(Option<usize>, f64)>,
}

/// The entries prepared for one set of finalize options (a budget and a device), by
/// scheduled peak.
#[derive(Debug, Clone)]
pub(super) struct Atlas {
    opts: FinalizeOptions,
    entries: Vec<Entry>,
}

impl<P: Deref<Target = Plan> + Sync> Finalizer<P> {
    /// Prepares an atlas for finalizes under `opts` (a budget, with offsets; a plan of one
    /// variant) from the full finalizes at `samples` (e.g. a geometric grid of the symbol
    /// range); replaces any atlas for the same options. Returns how many entries it holds
    /// (samples whose scheduled peak is within the budget less [`UPWARD_SLACK`], or whose
    /// bindings are invalid, give none). Later finalizes under exactly these options take the
    /// atlas's fast path where it fits (module docs of `finalize/atlas.rs`); their results
    /// depend on the samples, not on the shapes finalized before.
    pub fn prepare_atlas(&self, samples: &[Bindings], opts: &FinalizeOptions) -> usize {
        let Some(budget) = opts.budget else {
            return 0;
        };
        if !opts.offsets || self.prepared.len() != 1 {
            return 0;
        }
        let mut entries = Vec::new();
        for b in samples {
            let Ok(first) = check_and_choose_variant(&self.plan, b) else {
                continue;
            };
            let Ok(shaped) = self.evaluate(first, b, opts) else {
                continue;
            };
            let peak_scheduled = shaped.resident.iter().copied().max().unwrap_or(0);
            if peak_scheduled <= upward_target(budget) {
                continue;
            }
            let result = self
                .decide_first(&shaped, b, opts)
                .map(|c| self.lay_out(c, &shaped, b, opts));
            // (The fast path replays and lays out once: where the full finalize decided and
            // laid out once, it costs about as much, and is kept.)
            let (decided, laid) = (
                shaped.work.0.load(std::sync::atomic::Ordering::Relaxed),
                shaped.work.1.load(std::sync::atomic::Ordering::Relaxed),
            );
            let mut faster = decided > 1 || laid > 1;
            let trace = lock(&shaped.trace)
                .clone()
                .or_else(|| lock(&shaped.partial).clone());
            let Some(trace) = trace else {
                continue;
            };
            let layout = result.ok().map(|c| {
                let faster = &mut faster;
                let (v, prep) = self.prepared_variant(c.variant);
                let arena = |order| {
                    assign_offsets_order(
                        v,
                        &prep.value_live,
                        &c.value_bytes,
                        &c.decisions,
                        c.peak_bytes_planned,
                        order,
                    )
                    .arena_bytes
                };
                // The scan (the cheaper layout) where it packs within `SCAN_PREFERRED_WITHIN`
                // of the budget of the best anchored order, else that order.
                let scan = arena(None);
                let (order, best) = (0..VARIANTS.len())
                    .map(|order| (Some(order), arena(Some(order))))
                    .min_by_key(|&(_, a)| a)
                    .filter(|&(_, a)| (scan - a) as f64 > budget as f64 * SCAN_PREFERRED_WITHIN)
                    .unwrap_or((None, scan));
                // (A scan over the budget: the full finalize repaired it or laid out again.)
                *faster |= order.is_none() || scan > budget;
                (order, best as f64 / c.peak_bytes_planned.max(1) as f64)
            });
            entries.push(Entry {
                faster,
                peak_scheduled,
                trace,
                layout,
            });
        }
        entries.sort_by_key(|e| e.peak_scheduled);
        let n = entries.len();
        let mut atlases = self.atlases.write().unwrap_or_else(|e| e.into_inner());
        atlases.retain(|a| a.opts.budget != opts.budget || !same_options(&a.opts, opts));
        atlases.push(Atlas {
            opts: opts.clone(),
            entries,
        });
        n
    }

    /// The atlas's result for the plan variant `shaped` evaluated at `b` (see the module
    /// docs), `None` where there is no atlas for `opts`, no entry applies, or the replay or
    /// its arena does not fit (the caller finalizes in full on the same `shaped`).
    pub(super) fn atlas_result(
        &self,
        shaped: &Shaped,
        b: &Bindings,
        opts: &FinalizeOptions,
    ) -> Option<ConcretePlan> {
        let budget = opts.budget?;
        let peak = shaped.resident.iter().copied().max().unwrap_or(0);
        if peak <= upward_target(budget) {
            return None;
        }
        let (trace, (order, fragmentation)) = {
            let atlases = self.atlases.read().unwrap_or_else(|e| e.into_inner());
            let atlas = atlases
                .iter()
                .find(|a| a.opts.budget == opts.budget && same_options(&a.opts, opts))?;
            let at = atlas.entries.partition_point(|e| e.peak_scheduled < peak);
            let e = atlas.entries.get(at).filter(|e| e.faster)?;
            // The layout of the nearest feasible entry (this one's where feasible).
            let layout = atlas.entries[..=at]
                .iter()
                .rev()
                .chain(&atlas.entries[at + 1..])
                .find_map(|e| e.layout)?;
            (e.trace.clone(), layout)
        };
        let (v, prep) = self.prepared_variant(shaped.variant);
        if surely_infeasible(v, prep, shaped, opts, budget) {
            return None;
        }
        let mut target = ((budget as f64 / fragmentation.max(1.0)) as i64
            - (budget as f64 * ATLAS_MARGIN) as i64)
            .min(upward_target(budget));
        for _ in 0..ATLAS_TRIES {
            let replay = trace.retargeted(target);
            let mut c =
                finalize_prepared(v, prep, shaped, b, opts, Some(target), Some(&replay))?.ok()?;
            if c.peak_bytes_planned > budget {
                return None;
            }
            let arena = assign_offsets_order(
                v,
                &prep.value_live,
                &c.value_bytes,
                &c.decisions,
                c.peak_bytes_planned,
                order,
            );
            if arena.arena_bytes <= budget {
                c.arena = arena;
                self.atlas_hits
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Some(c);
            }
            // This shape fragments more than the entry's: once more under the planned peak
            // scaled by budget / arena, less the margin.
            target = (c.peak_bytes_planned as f64 * budget as f64 / arena.arena_bytes as f64)
                as i64
                - (budget as f64 * ATLAS_MARGIN) as i64;
        }
        None
    }

    /// How many finalizes so far took an atlas's fast path (for measurements).
    pub fn atlas_hits(&self) -> usize {
        self.atlas_hits.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Whether finalizes under `a` and `b` decide alike (device, kinds and offsets; the budget is
/// compared by the caller).
fn same_options(a: &FinalizeOptions, b: &FinalizeOptions) -> bool {
    a.offsets == b.offsets && a.kinds == b.kinds && a.device == b.device
}

/// The value in `m`, poisoned or not.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
