//! A plan atlas: the greedy's pick orders at sample bindings of the symbol space, prepared
//! once per budget and device ([`Finalizer::prepare_atlas`]) or once per device for budgets
//! that are a share of each shape's peak ([`Finalizer::prepare_atlas_relative`]), so that a
//! finalize at a new shape replays a neighbour's picks and lays out the arena in one order
//! chosen ahead, then checks the result exactly and falls back to the full finalize where it
//! does not fit.
//!
//! # What an entry holds
//! Per sample bindings under its budget: the scheduled peak there and the budget's share of
//! it (the coordinates entries are looked up by: two numbers for any number of symbols), the
//! [`greedy::Trace`] of the search its full finalize made (the options the greedy set, in
//! order: the decision skeleton, by identity), each run's log filled on as deep as the greedy
//! goes ([`greedy::deepest_log`]: the same picks first, then those a lower budget would take),
//! with the log of the greedy's second run (swaps priced at least their transfer time) where
//! the full finalize made none, and the layout order
//! that packs its decisions best (one of greedy by size's [`VARIANTS`] as the order of the
//! anchored layout of [`ORDER_ANCHORS`](crate::arena::ORDER_ANCHORS) anchors; the scan where
//! it packs within [`SCAN_PREFERRED_WITHIN`] of that) with that layout's fragmentation (arena
//! / planned peak), and the fragmentation of each anchored order (for the fallback order
//! below).
//!
//! # The fast path
//! At bindings whose scheduled peak exceeds the budget less [`UPWARD_SLACK`] (below it the
//! full finalize takes no decision that adds time), the atlas for exactly this budget, else a
//! relative one for these options; in it the entry with the smallest scheduled peak at least
//! this one's (its log frees at least as much; none: the full finalize) and, in a relative
//! atlas, a budget share within [`RELATIVE_WITHIN`] of this one's, is
//! replayed where that costs less than the full finalize did at the entry (`Entry::faster`;
//! else the full finalize runs) ([`greedy::replay`] of [`greedy::Trace::retargeted`]: each
//! run's options set in order, skipping those absent here, until the peak is within the
//! target: a shape below the entry's peak needs more picks than the entry's budget took
//! (smaller values free less), which the deepened log holds; where it runs out even so (the
//! greedy stopped there at the entry), the greedy's search goes on from there, a local repair
//! of the skeleton rather than a search from nothing; then the greedy's second look;
//! the second run, where the first's swaps saturate the link, replayed likewise)
//! under the budget divided by the fragmentation of the entry's layout (of the nearest
//! feasible entry where it was infeasible; the larger of that and the fragmentation of the
//! nearest feasible entry below the shape, which brackets it with this one), less
//! [`ATLAS_MARGIN`] of the budget, and at most
//! the budget less [`UPWARD_SLACK`]. The residency is then computed exactly (the checker's
//! model) and the arena laid out in the entry's layout order ([`crate::arena`]'s one-order
//! layout: the scan, or one anchored order alone); where the scan exceeds the budget, the
//! same decisions are laid out in the anchored order that packs best at both entries
//! bracketing the shape (the smallest of the larger of their fragmentations; the scan's slabs
//! reused, abandoned once over the budget: [`crate::arena`]'s `assign_offsets_order_within`),
//! since a shape's scan can fragment more than its neighbours' (`gpt2_24l`, B=8: S=110 under
//! `fixed-mid-median` on `h100-sxm-pcie5`, 1.8% over the planned peak against 0.1% at S=122,
//! where anchored order 0 packs within 0.5%). The result is kept where the arena fits the
//! budget. Where it still exceeds the budget, once more under the planned peak scaled by
//! budget / arena (the scan's), less [`ATLAS_MARGIN`] ([`ATLAS_TRIES`]). Else (the search from the log's
//! state does not meet the target, or the arena still exceeds the budget) the full finalize
//! runs on the same evaluated shape.
//!
//! The decisions are not today's search at this shape: they are a neighbour's picks in its
//! order, under a target set by its neighbours' fragmentation. On `gpt2_24l` (B=8, 64
//! long-tail lengths, 32 samples) they add between 0.33 points of the step less and 0.41
//! more than the full finalize's under `fixed-mid-median` on `h100-sxm-pcie5`, between 0.28
//! less and 0.09 more under `po-50%`, and the same (0.000%) on `cpu`
//! (docs/results/2026-11-30-finalize-atlas-relative.md,
//! docs/results/2026-11-30-finalize-atlas-deep-logs.md,
//! docs/results/2026-11-30-finalize-atlas-fallback-order.md).
//!
//! # Cost
//! Fast path: one evaluation, one replay per run (O(picks · log points) plus the second
//! look, plus the search from the log's end where even the deepened log runs out), one
//! layout of one order
//! (`crate::arena`: the scan, O(n log n + points + n·f), or one anchored order, O(n log n +
//! points + K² + n·(f + K)) for K ≤ [`ORDER_ANCHORS`](crate::arena::ORDER_ANCHORS) anchors),
//! plus one anchored order's large intervals where the scan misses the budget; twice where
//! the arena still misses it (on `gpt2_24l`'s 64 long-tail lengths, in no case since the
//! fallback order). No choice among layout orders. A miss adds those to the full finalize.
//! The bound on the lowest reachable peak (`surely_infeasible`) is computed only where the
//! serving entry's sample was infeasible (a replay never meets a target below it, so the
//! result is the same; a feasible sample above the shape makes it feasible but for
//! exceptions).
//!
//! # Determinism
//! The atlas depends only on the plan, the options and the samples (bindings, and budgets
//! for a relative atlas) given to [`Finalizer::prepare_atlas`] or
//! [`Finalizer::prepare_atlas_relative`], never on the shapes finalized since: the same
//! samples and options give the same result whatever was finalized before. Without an atlas
//! for the options (another budget without a relative atlas, another device, or several plan
//! variants), finalize is unchanged.

use super::options::Options;
use super::{
    check_and_choose_variant, finalize_prepared, forced, greedy, surely_infeasible, upward_target,
    ConcretePlan, FinalizeOptions, Finalizer, Shaped, UPWARD_SLACK,
};
use crate::arena::{assign_offsets_order, assign_offsets_order_within, greedy::VARIANTS};
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
    /// more than once, or its scan exceeded the budget (it repaired the layout); else the fast
    /// path is not taken at the shapes this entry serves. A full finalize that decided and
    /// laid out once costs a search and a scan, about what one replay and one layout do, and
    /// less than two where the shape's scan fragments more than the entry's (on `gpt2_24l`
    /// on `cpu`: 0.55–0.64 ms at S=72, 80 under `fixed-mid-median` and S=379 under `po-50%`,
    /// where the fast path took 0.9–1.2 ms; 0.1 ms more where one replay fits).
    faster: bool,
    /// Scheduled peak at the sample, bytes.
    peak_scheduled: i64,
    /// The sample's budget, bytes.
    budget: i64,
    /// The search made there.
    trace: greedy::Trace,
    /// The layout order that packs the sample's decisions best (`None`: the scan, with an
    /// anchored order where it misses the budget; else that anchored order alone) and its
    /// arena / planned peak; `None` where the sample was infeasible.
    layout: Option<Layout>,
}

/// The layout kept by an [`Entry`].
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// The order the fast path lays out in: `None` the scan, else that anchored order.
    order: Option<usize>,
    /// Arena / planned peak of the sample's decisions in each anchored order (by index of
    /// [`VARIANTS`]): where the scan (`order` `None`) exceeds the budget at a shape, the order
    /// that packs best at both samples bracketing it is laid out before deciding again.
    anchored: [f64; VARIANTS.len()],
    /// Its arena / planned peak at the sample.
    fragmentation: f64,
}

impl Entry {
    /// The sample's budget as a share of its scheduled peak.
    fn share(&self) -> f64 {
        self.budget as f64 / self.peak_scheduled.max(1) as f64
    }
}

/// The entries prepared for one set of finalize options (a budget and a device; any budget
/// where `relative`), by scheduled peak.
#[derive(Debug, Clone)]
pub(super) struct Atlas {
    opts: FinalizeOptions,
    /// Keyed by the budget's share of the scheduled peak ([`Finalizer::prepare_atlas_relative`]):
    /// an entry serves a shape whose budget's share of its peak is within [`RELATIVE_WITHIN`]
    /// of the entry's.
    relative: bool,
    entries: Vec<Entry>,
}

/// How far (absolute, in shares of the scheduled peak) the budget's share of the peak at a
/// shape may be from an entry's for a relative atlas's entry to serve it
/// ([`Finalizer::prepare_atlas_relative`]).
pub const RELATIVE_WITHIN: f64 = 0.02;

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
        let entries = samples
            .iter()
            .filter_map(|b| self.entry_at(b, budget, opts))
            .collect();
        self.keep_atlas(opts, false, entries)
    }

    /// Prepares an atlas for finalizes whose budget is a fraction of each shape's peak (a
    /// budget per shape, as `--budget 50%` resolves: half of each shape's program-order peak):
    /// from the full finalizes at each sample bindings under its own budget (bytes), with
    /// `opts`'s device, kinds and offsets (its budget is not read). Its entries are keyed by
    /// the scheduled peak and by the budget as a share of it ([`RELATIVE_WITHIN`]); a later
    /// finalize under these options at any budget takes the fast path where an entry with a
    /// share within [`RELATIVE_WITHIN`] of its own serves it (an atlas for its exact budget,
    /// [`Finalizer::prepare_atlas`], is looked up first). Replaces any such atlas for the same
    /// options; returns how many entries it holds (as [`Finalizer::prepare_atlas`]).
    pub fn prepare_atlas_relative(
        &self,
        samples: &[(Bindings, i64)],
        opts: &FinalizeOptions,
    ) -> usize {
        if !opts.offsets || self.prepared.len() != 1 {
            return 0;
        }
        let entries = samples
            .iter()
            .filter_map(|(b, budget)| {
                let opts = FinalizeOptions {
                    budget: Some(*budget),
                    ..opts.clone()
                };
                self.entry_at(b, *budget, &opts)
            })
            .collect();
        self.keep_atlas(opts, true, entries)
    }

    /// Keeps an atlas of `entries` for `opts` (`relative`: keyed by the budget's share of the
    /// peak, any budget), replacing the one for the same options; its number of entries.
    fn keep_atlas(&self, opts: &FinalizeOptions, relative: bool, mut entries: Vec<Entry>) -> usize {
        entries.sort_by_key(|e| e.peak_scheduled);
        let n = entries.len();
        let mut atlases = self.atlases.write().unwrap_or_else(|e| e.into_inner());
        atlases.retain(|a| {
            a.relative != relative
                || (!relative && a.opts.budget != opts.budget)
                || !same_options(&a.opts, opts)
        });
        atlases.push(Atlas {
            opts: opts.clone(),
            relative,
            entries,
        });
        n
    }

    /// The entry of the full finalize at sample `b` under `budget` (`opts`), `None` where the
    /// bindings are invalid or the sample's scheduled peak is within the budget less
    /// [`UPWARD_SLACK`].
    fn entry_at(&self, b: &Bindings, budget: i64, opts: &FinalizeOptions) -> Option<Entry> {
        let first = check_and_choose_variant(&self.plan, b).ok()?;
        let shaped = self.evaluate(first, b, opts).ok()?;
        let peak_scheduled = shaped.resident.iter().copied().max().unwrap_or(0);
        if peak_scheduled <= upward_target(budget) {
            return None;
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

        let mut trace = lock(&shaped.trace)
            .clone()
            .or_else(|| lock(&shaped.partial).clone())?;
        let (v, prep) = self.prepared_variant(shaped.variant);
        {
            // Each run's log filled as deep as the greedy goes, and the greedy's second run
            // (swaps priced at their transfer time) added where the trace lacks it: where a
            // shape needs more picks than the sample, or the replay's swaps saturate the link,
            // the replay goes on down the log rather than searching.
            let mut resident = shaped.resident.clone();
            let mut options =
                Options::new(prep, &shaped.vals, &shaped.costs, &shaped.value_bytes, opts);
            if !v.forced_swaps.is_empty() {
                forced::take(v, &mut options, &shaped.value_bytes, &mut resident);
            }
            trace.deepen(|price, scored_over| {
                greedy::deepest_log(
                    &mut options,
                    &prep.cover,
                    v.candidates.len(),
                    &resident,
                    scored_over,
                    price,
                    shaped.costs.step_us(),
                )
            });
        }
        let layout = result.ok().map(|c| {
            let faster = &mut faster;
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
            let arenas: [i64; VARIANTS.len()] = std::array::from_fn(|order| arena(Some(order)));
            let (fallback, anchored) = arenas
                .iter()
                .copied()
                .enumerate()
                .min_by_key(|&(_, a)| a)
                .unwrap_or((0, i64::MAX));
            let (order, best) = if (scan - anchored) as f64 > budget as f64 * SCAN_PREFERRED_WITHIN
            {
                (Some(fallback), anchored)
            } else {
                (None, scan)
            };
            let planned = c.peak_bytes_planned.max(1) as f64;
            // (A scan over the budget: the full finalize repaired it or laid out again.)
            *faster |= scan > budget;
            Layout {
                order,
                anchored: arenas.map(|a| a as f64 / planned),
                fragmentation: best as f64 / planned,
            }
        });
        Some(Entry {
            faster,
            peak_scheduled,
            budget,
            trace,
            layout,
        })
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
        // The nearest entry that serves this shape, with the layout of the nearest feasible
        // entry that serves it (its own where feasible).
        let (mut replay, layout, feasible) = {
            let atlases = self.atlases.read().unwrap_or_else(|e| e.into_inner());
            // An atlas for this exact budget, else one keyed by the budget's share of the peak.
            let fixed = atlases.iter().find(|a| {
                !a.relative && a.opts.budget == opts.budget && same_options(&a.opts, opts)
            });
            // (`None`: any entry serves; else the budget's share of the peak here.)
            let (atlas, share) = match fixed {
                Some(a) => (a, None),
                None => (
                    atlases
                        .iter()
                        .find(|a| a.relative && same_options(&a.opts, opts))?,
                    Some(budget as f64 / peak.max(1) as f64),
                ),
            };
            let serves =
                |e: &Entry| share.is_none_or(|share| (e.share() - share).abs() <= RELATIVE_WITHIN);
            let from = atlas.entries.partition_point(|e| e.peak_scheduled < peak);
            let (at, e) = atlas.entries[from..]
                .iter()
                .enumerate()
                .find(|&(_, e)| serves(e))
                .map(|(k, e)| (from + k, e))?;
            if !e.faster {
                return None;
            }
            let mut layout = atlas.entries[..=at]
                .iter()
                .rev()
                .chain(&atlas.entries[at + 1..])
                .filter(|&e| serves(e))
                .find_map(|e| e.layout)?;
            // The shape lies between this entry and the nearest feasible one below it that
            // serves it: aimed under the larger of their fragmentations.
            if let Some(below) = atlas.entries[..from]
                .iter()
                .rev()
                .filter(|&e| serves(e))
                .find_map(|e| e.layout)
            {
                layout.fragmentation = layout.fragmentation.max(below.fragmentation);
                for (f, b) in layout.anchored.iter_mut().zip(below.anchored) {
                    *f = f.max(b);
                }
            }
            (e.trace.retargeted(i64::MIN), layout, e.layout.is_some())
        };
        let (v, prep) = self.prepared_variant(shaped.variant);
        // (Served by a feasible sample, whose scheduled peak is at least this one's, the shape
        // is feasible but for exceptions, where the replay fails: the bound is skipped. A
        // replay never meets a target below the bound, so the result is the same.)
        if !feasible && surely_infeasible(v, prep, shaped, opts, budget) {
            return None;
        }
        let mut target = ((budget as f64 / layout.fragmentation.max(1.0)) as i64
            - (budget as f64 * ATLAS_MARGIN) as i64)
            .min(upward_target(budget));
        // Where the scan exceeds the budget, the anchored order that packs best at both
        // bracketing samples (the larger of their fragmentations), of the same decisions,
        // before deciding again.
        let fallback = (0..VARIANTS.len())
            .min_by(|&x, &y| layout.anchored[x].total_cmp(&layout.anchored[y]))
            .unwrap_or(0);
        let lay = |c: &ConcretePlan| {
            assign_offsets_order_within(
                v,
                &prep.value_live,
                &c.value_bytes,
                &c.decisions,
                c.peak_bytes_planned,
                layout.order,
                Some((fallback, budget)),
            )
        };
        for _ in 0..ATLAS_TRIES {
            // (The log replayed, then the greedy's search from there where it runs out.)
            replay.retarget(target);
            let mut c =
                finalize_prepared(v, prep, shaped, b, opts, Some(target), Some(&replay))?.ok()?;
            if c.peak_bytes_planned > budget {
                return None;
            }
            let arena = lay(&c);
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
