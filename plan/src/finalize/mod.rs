//! Finalize a symbolic [`Plan`] at concrete shapes under a memory budget: check the shape
//! assertions, evaluate sizes, choose which candidates to evict (and whether each is recomputed
//! or swapped) until the peak fits, and assign arena offsets.
//!
//! # Decision heuristic
//! A greedy after DTR with a widening step and a second look (`finalize/greedy.rs`). Costs come
//! from the roofline time model of [`crate::cost`] on [`FinalizeOptions::device`]:
//! recompute = the modelled time of the ops it reruns; swap = the part of its transfers the
//! schedule's own compute cannot hide, with the link shared by all swaps
//! ([`crate::cost::exposed_transfer_us`]).
//!
//! # The arena fits the budget
//! With offsets, the decisions aim at the budget less [`ARENA_ALLOWANCE`] (2%, the
//! fragmentation the layout accepts before it tries harder), so that the arena, not only the
//! planned peak, fits the budget ([`FinalizeOptions::decisions_target`]). They come from one
//! greedy search (`finalize/greedy.rs`'s `Trace`) scored over the budget less
//! [`UPWARD_SLACK`] (0.5%) and filled to that lower target, whose own second look gives them
//! (what its replay there decides; where the search stops short of that target but below the
//! budget less [`UPWARD_SLACK`], its picks replayed at the lowest peak it reached); the
//! search's prefix is exactly the greedy's decisions at the budget less [`UPWARD_SLACK`]. Most
//! layouts fragment by less than that, so those are replayed and laid out first, and kept
//! where they add less time and their arena fits the budget: one search, one replay and one
//! layout in the common case. Where that arena exceeds the budget, the same search is replayed
//! once more under their planned peak scaled by budget / arena, less [`REFIT_MARGIN`]
//! (decisions a few candidates apart fragment alike), laid out and kept on the same terms.
//! Else the first decisions are laid out; where their arena exceeds the
//! budget, the decisions are made again under the planned peak scaled by budget / arena (at
//! most [`FIT_RETRIES`] times); where the arena kept leaves more than [`UPWARD_SLACK`] of the
//! budget unused, the decisions are made once more for the whole budget, and where that arena
//! exceeds the budget once more under its planned peak scaled by budget / arena; the first
//! that fits and adds less time is kept (the greedy is not monotone in its target: decisions
//! for the whole budget can fit and add less where those for the budget less
//! [`UPWARD_SLACK`] do not). Only at the smallest feasible budget (the planned peak is the
//! budget) can the arena still exceed it.
//! Without offsets the decisions aim at the budget itself.
//!
//! Every layout is told the budget ([`crate::arena::assign_offsets_within`]): where its
//! best-fit scan lands over the budget but within
//! [`SCAN_KEPT_WITHIN`](crate::arena::SCAN_KEPT_WITHIN) of the planned peak, it tries
//! [`REPAIR_ORDERS`](crate::arena::REPAIR_ORDERS) order of its anchored layout first: a repair
//! of the offsets that keeps the decisions, cheaper than deciding again. Once a repair comes
//! no lower than its scan, the later layouts of the same finalize skip it (the anchored
//! layout of decisions a few candidates apart packs alike).
//!
//! # Bound on the work at a new shape
//! Per plan variant: one evaluation of its prepared expressions; one greedy search (two runs
//! where its swaps saturate the link); where the decisions add time, one replay of it (no
//! heap search: the budget less [`UPWARD_SLACK`]; the decisions at the budget less
//! [`ARENA_ALLOWANCE`] are the search's own second look, or one more replay); and one
//! layout where that replay's arena fits the budget (the common case: most layouts
//! fragment by less than [`UPWARD_SLACK`], or are repaired to), else one more replay and
//! layout under the target scaled by that fragmentation; plus one replay for the whole
//! budget and its layout where the arena kept leaves more than twice [`UPWARD_SLACK`] unused
//! (the greedy overshot its target). Otherwise
//! at most one more layout for the first decisions, [`FIT_RETRIES`] decisions and layouts
//! where that arena exceeds the budget, and two decisions (replays where the search covers
//! their target) and layouts for the whole budget. Each layout is bounded by construction
//! (`crate::arena`). Where the residency less everything any option frees exceeds the budget
//! (`finalize/bound.rs`, O(options + points)), no greedy run can meet it: the search is
//! skipped and only the budget-independent run is made, for the smallest budget reported.
//!
//! # A plan atlas
//! A caller that holds one budget can prepare an atlas for it ([`Finalizer::prepare_atlas`],
//! `finalize/atlas.rs`), and one whose budget is a share of each shape's peak (`--budget
//! 50%`) an atlas keyed by that share ([`Finalizer::prepare_atlas_relative`]): a finalize
//! then replays a neighbouring sample's greedy picks (searching on from where they run out)
//! and lays out the arena in that sample's best layout order (one replay and one one-order
//! layout; where the scan misses the budget, one anchored order of the same decisions; twice
//! at most), checks the arena against the budget, and falls back to the path
//! above where it does not fit. Results depend on the atlas's samples, never on the shapes
//! finalized before.
//!
//! # Cost
//! A plan is prepared once per plan variant ([`Prepared`]: its size and cost expressions
//! interned, so finalize evaluates each distinct one once, the options' windows indexed by a
//! segment tree of the points, and the step times' tables built ([`crate::cost::CostTables`]: each
//! distinct point cost timed once, each candidate's recompute points listed); [`Finalizer`]
//! and the runtime's plan cache hold the prepared variants). A finalize is then linear in the
//! plan (values, points, candidates) plus the greedy's heap queries and the arena layout; it
//! evaluates its plan variant at the bindings once (values, sizes, residency without decisions,
//! step times), and the decisions it makes under several targets (the arena's retries, the
//! upward re-decision) share that.
//! On GPT-2 medium (10 458 points, 5 469 candidates) at B=8, S=1024 under 50% of its scheduled
//! peak the work per variant is the decisions (options priced when first read,
//! `finalize/options.rs`; the variant whose swaps saturate the link decides twice,
//! `finalize/greedy.rs`) and the arena layout (mostly the best-fit scan of its ~5 700 large
//! residency intervals on the calling thread, the ~5 900 small ones in slabs on a helper
//! thread); the calling thread decides one variant and lays out its arena at once while a
//! helper thread decides the other (`finalize/variants.rs`, `crate::helpers`). Timings:
//! `cargo bench -p ebb-bench --bench plan -- finalize`, and docs/results/ (about 0.9 ms in
//! all on a 2-core VM).
//!
//! Known failure cases: greedy choice per peak point is not optimal (a candidate chosen early
//! may be dominated by one that covers several peaks later; the exact ILP in `ebb bench
//! --exact` measures the gap); recompute transients are charged at the regeneration point in
//! full (conservative); link sharing is a fluid lower bound (see `crate::cost`).

mod atlas;
mod bound;
#[doc(hidden)]
pub mod cover;
mod forced;
mod greedy;
mod options;
mod prepared;
#[doc(hidden)]
pub mod replay_check;
pub mod segtree;
mod summary;
mod variants;

use crate::arena::{assign_offsets_live, every_order_reaches, Arena};
use crate::device::{DeviceId, DeviceProfile};
use crate::format::{CandidateId, Decision, DecisionKind, Plan, ProgPoint};
use crate::index::{ExprValues, PointIx};
pub use atlas::{ATLAS_MARGIN, RELATIVE_WITHIN};
use ebb_ir::dim::DimError;
use ebb_ir::{Bindings, DimExpr};
use options::Options;
pub use prepared::Prepared;
use segtree::PeakTree;
use serde::Serialize;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
pub use summary::DecisionSummary;

/// Options of [`finalize`].
#[derive(Clone, Debug)]
pub struct FinalizeOptions {
    /// Device memory budget in bytes; `None` = no budget (no evictions).
    pub budget: Option<i64>,
    /// The device whose roofline times price recompute and swap ([`crate::cost`]).
    pub device: DeviceProfile,
    /// Decision kinds that may be chosen.
    pub kinds: Vec<DecisionKind>,
    /// Assign arena offsets (skip for a pure planning report).
    pub offsets: bool,
}

impl FinalizeOptions {
    /// The peak in bytes the decisions aim at: the budget, less [`ARENA_ALLOWANCE`] of it when
    /// arena offsets are laid out (so that the arena fits the budget).
    pub fn decisions_target(&self) -> Option<i64> {
        self.budget.map(|budget| {
            if self.offsets {
                arena_target(budget)
            } else {
                budget
            }
        })
    }
}

/// The peak in bytes decisions aim at under `budget` when the arena is laid out: the budget
/// less [`ARENA_ALLOWANCE`] of it.
pub fn arena_target(budget: i64) -> i64 {
    budget - (budget as f64 * ARENA_ALLOWANCE) as i64
}

impl Default for FinalizeOptions {
    fn default() -> Self {
        FinalizeOptions {
            budget: None,
            device: DeviceProfile::default(),
            kinds: vec![DecisionKind::Recompute, DecisionKind::Swap],
            offsets: true,
        }
    }
}

/// A plan finalized at concrete bindings: decisions, resident bytes and offsets.
#[derive(Clone, Debug, Serialize)]
pub struct ConcretePlan {
    /// The plan variant finalized (0 = the plan itself; see `Plan::best_variant`): decisions
    /// and value ids refer to it.
    pub variant: usize,
    /// The symbol values.
    pub bindings: Bindings,
    /// The budget in bytes, if any.
    pub budget: Option<i64>,
    /// Size of every value in bytes (indexed like `Plan::values`).
    pub value_bytes: Vec<i64>,
    /// Peak bytes of the schedule without decisions.
    pub peak_bytes_scheduled: i64,
    /// Peak bytes with the decisions (regeneration transients included).
    pub peak_bytes_planned: i64,
    /// Resident bytes at each point with the decisions (region transients included), as the
    /// plan checker and the executor count them.
    pub resident: Vec<i64>,
    /// Largest device bytes during the regenerations and reloads before each point (0 where
    /// there are none); `peak_bytes_planned` is the maximum of this and `resident`.
    pub regen_peak: Vec<i64>,
    /// Chosen decisions, in the order they were taken.
    pub decisions: Vec<Decision>,
    /// FLOPs spent recomputing evicted values.
    pub recompute_flops: i64,
    /// Bytes offloaded to host (each is also reloaded).
    pub swap_bytes: i64,
    /// Modelled time the decisions add to the step, µs: `recompute_us + exposed_transfer_us`.
    pub overhead_us: f64,
    /// Modelled time of the recomputes, µs.
    pub recompute_us: f64,
    /// Modelled transfer time of the swaps that compute does not hide, µs.
    pub exposed_transfer_us: f64,
    /// Modelled time of the step without decisions, µs (0 when the plan has no per-point
    /// FLOPs).
    pub step_us: f64,
    /// The device profile the decisions were priced on (serialized as its name).
    pub device: DeviceId,
    /// FLOPs of one step (all scheduled ops), 0 when the plan has no per-point FLOPs.
    pub step_flops: i64,
    /// Arena layout (empty when offsets were not requested).
    pub arena: Arena,
}

/// Why a plan cannot be finalized at some bindings.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FinalizeError {
    /// The bindings violate a fact of the symbol scope (range, divisibility, equality).
    #[error("bindings: {0}")]
    Fact(DimError),
    /// A shape assertion of the export fails; `message` is the producer's, with `{0}`, `{1}`
    /// replaced by the values.
    #[error("shape assertion failed: {message}")]
    Assertion {
        /// The failing check, e.g. `-S + 512 >= 0`.
        check: String,
        /// The producer's message.
        message: String,
    },
    /// A size or cost does not evaluate at the bindings.
    #[error("cannot evaluate `{expr}`: {source}")]
    Eval {
        /// The expression.
        expr: String,
        /// Why.
        source: DimError,
    },
    /// The budget is below what the plan can reach.
    #[error("budget {budget} bytes is infeasible: the smallest feasible budget for this plan at these shapes is {smallest} bytes ({smallest_mib:.1} MiB)")]
    Infeasible {
        /// The requested budget.
        budget: i64,
        /// The smallest peak reachable with every useful candidate taken.
        smallest: i64,
        /// The same in MiB.
        smallest_mib: f64,
    },
}

/// Checks the scope's facts and the plan's shape assertions at `b`.
pub fn check_bindings(plan: &Plan, b: &Bindings) -> Result<(), FinalizeError> {
    plan.symbols.check(b).map_err(FinalizeError::Fact)?;
    for a in &plan.assertions {
        let ev = |e: &DimExpr| {
            e.eval(b).map_err(|source| FinalizeError::Eval {
                expr: e.to_string(),
                source,
            })
        };
        let (l, r) = (ev(&a.lhs)?, ev(&a.rhs)?);
        if !a.rel.holds(l, r) {
            let message = a
                .message
                .replace("{0}", &l.to_string())
                .replace("{1}", &r.to_string());
            return Err(FinalizeError::Assertion {
                check: format!("{} {} {}", a.lhs, a.rel.name(), a.rhs),
                message,
            });
        }
    }
    Ok(())
}

/// Finalizes `plan` at bindings `b` (see the module docs). Prepares the chosen plan variant
/// on every call; a caller that finalizes one plan at many bindings keeps a [`Finalizer`].
///
/// Errors: [`FinalizeError::Fact`] / [`FinalizeError::Assertion`] for invalid shapes,
/// [`FinalizeError::Infeasible`] (with the smallest feasible budget) when the budget cannot be
/// met, [`FinalizeError::Eval`] when an expression does not evaluate.
pub fn finalize(
    plan: &Plan,
    b: &Bindings,
    opts: &FinalizeOptions,
) -> Result<ConcretePlan, FinalizeError> {
    Finalizer::new(plan).finalize(b, opts)
}

/// A plan held for finalize at many bindings: each plan variant is prepared ([`Prepared`])
/// the first time it is chosen (or by [`Finalizer::prepare_all`]), so later finalizes
/// evaluate only the plan's distinct expressions. `P` owns or borrows the plan.
#[derive(Debug)]
pub struct Finalizer<P: Deref<Target = Plan> = Arc<Plan>> {
    plan: P,
    prepared: Vec<OnceLock<Prepared>>,
    /// The plan variant whose decisions ended first in the last comparison of variants
    /// (`finalize/variants.rs` runs it first: a hint for the order of work, never for the
    /// result).
    ended_first: AtomicUsize,
    /// The atlases prepared ([`Finalizer::prepare_atlas`], `finalize/atlas.rs`), one per set of
    /// options.
    atlases: RwLock<Vec<atlas::Atlas>>,
    /// How many finalizes took an atlas's fast path ([`Finalizer::atlas_hits`]).
    atlas_hits: AtomicUsize,
    /// How many arenas the finalizes laid out ([`Finalizer::layouts`]).
    layouts: AtomicUsize,
}

impl<P: Deref<Target = Plan> + Sync> Finalizer<P> {
    /// A finalizer of `plan`; nothing is prepared yet.
    pub fn new(plan: P) -> Self {
        let prepared = (0..=plan.alternatives.len())
            .map(|_| OnceLock::new())
            .collect();
        Finalizer {
            plan,
            prepared,
            ended_first: AtomicUsize::new(0),
            atlases: RwLock::new(Vec::new()),
            atlas_hits: AtomicUsize::new(0),
            layouts: AtomicUsize::new(0),
        }
    }

    /// Prepares every plan variant now (so that no later finalize pays for it).
    pub fn prepare_all(&self) {
        for i in 0..self.prepared.len() {
            self.prepared_variant(i);
        }
    }

    /// Prepares the plan variant finalize chooses at `b`.
    ///
    /// # Errors
    /// As [`finalize`], for the bindings.
    pub fn prepare(&self, b: &Bindings) -> Result<(), FinalizeError> {
        self.prepared_variant(check_and_choose_variant(&self.plan, b)?);
        Ok(())
    }

    fn prepared_variant(&self, i: usize) -> (&Plan, &Prepared) {
        let i = i.min(self.prepared.len() - 1);
        let v = self.plan.variant(i).unwrap_or(&self.plan);
        (v, self.prepared[i].get_or_init(|| Prepared::new(v)))
    }

    /// As [`finalize`] on the held plan, without preparing a variant twice.
    ///
    /// Without a budget (or with one plan variant) the variant with the lowest scheduled peak
    /// at `b` is finalized. Under a budget every variant's decisions are computed, in
    /// parallel (on the calling thread and the helper threads of `crate::helpers`); when the
    /// lowest peak's decisions bind (it evicts, or cannot meet the budget), a variant whose
    /// peak is a little higher can need fewer or cheaper evictions, lay out into an arena
    /// that fits the budget, or meet a budget the lowest peak's cannot. The feasible results
    /// are ordered by modelled added time, then planned peak; with offsets
    /// their arenas are laid out in that order until one fits the budget (the decisions leave
    /// the layout [`ARENA_ALLOWANCE`], so the first usually does), else the smallest arena is
    /// kept; without offsets the first is kept. Plans keep 1–4 variants.
    ///
    /// # Errors
    /// As [`finalize`]; an infeasible budget names the smallest budget some variant meets.
    pub fn finalize(
        &self,
        b: &Bindings,
        opts: &FinalizeOptions,
    ) -> Result<ConcretePlan, FinalizeError> {
        let first = check_and_choose_variant(&self.plan, b)?;
        let compare = opts.budget.is_some() && self.prepared.len() > 1;
        if !compare {
            let shaped = self.evaluate(first, b, opts)?;
            if let Some(c) = self.atlas_result(&shaped, b, opts) {
                return Ok(c);
            }
            let c = self.decide_first(&shaped, b, opts)?;
            return Ok(self.lay_out(c, &shaped, b, opts));
        }
        self.finalize_variants(first, b, opts)
    }

    /// Plan variant `i` evaluated at `b` ([`Shaped`]), for its decisions under any target.
    ///
    /// # Errors
    /// [`FinalizeError::Eval`] when an expression does not evaluate.
    fn evaluate(
        &self,
        i: usize,
        b: &Bindings,
        opts: &FinalizeOptions,
    ) -> Result<Shaped, FinalizeError> {
        let (v, prep) = self.prepared_variant(i);
        evaluate(v, prep, i, b, opts)
    }

    /// The decisions of the plan variant `shaped` evaluated at `b` under `target` bytes,
    /// without the arena layout. Where `target` is below the budget (the arena's allowance)
    /// and cannot be met while the budget can, the decisions reach the smallest peak the greedy
    /// meets instead.
    fn decide(
        &self,
        shaped: &Shaped,
        b: &Bindings,
        opts: &FinalizeOptions,
        target: Option<i64>,
    ) -> Result<ConcretePlan, FinalizeError> {
        let (v, prep) = self.prepared_variant(shaped.variant);
        // (`None` only comes from a replay.)
        let full = |target| {
            finalize_prepared(v, prep, shaped, b, opts, target, None).unwrap_or(Err(
                FinalizeError::Eval {
                    expr: "greedy".into(),
                    source: DimError::Overflow,
                },
            ))
        };
        match full(target) {
            Err(FinalizeError::Infeasible { smallest, .. })
                if target < opts.budget && Some(smallest) <= opts.budget =>
            {
                full(Some(smallest))
            }
            // Reported against the budget asked for, not the target.
            Err(FinalizeError::Infeasible {
                smallest,
                smallest_mib,
                ..
            }) => Err(FinalizeError::Infeasible {
                budget: opts.budget.or(target).unwrap_or(0),
                smallest,
                smallest_mib,
            }),
            r => r,
        }
    }

    /// The first decisions of the plan variant `shaped` evaluated at `b`: under
    /// [`FinalizeOptions::decisions_target`]. With offsets and a budget they come from one
    /// greedy search scored over the budget less [`UPWARD_SLACK`] and filled to that target
    /// ([`trace_prepared`], replayed at it), whose prefix gives the decisions at the budget
    /// less [`UPWARD_SLACK`] that [`Finalizer::upward_first`] lays out first; else (and where
    /// that search does not meet the target) they are made in full.
    fn decide_first(
        &self,
        shaped: &Shaped,
        b: &Bindings,
        opts: &FinalizeOptions,
    ) -> Result<ConcretePlan, FinalizeError> {
        let target = opts.decisions_target();
        if let (true, Some(budget), Some(t)) = (opts.offsets, opts.budget, target) {
            let (v, prep) = self.prepared_variant(shaped.variant);
            // (Where no decisions meet the budget, the search would fail and its picks go
            // unused: the finalize reports the budget infeasible.)
            if !surely_infeasible(v, prep, shaped, opts, budget)
                && trace_prepared(v, prep, shaped, opts, t, upward_target(budget))
            {
                // The trace was filled to `t`: its replay there is the first decisions.
                let trace = shaped
                    .trace
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                if let Some(r) = trace.and_then(|trace| {
                    finalize_prepared(v, prep, shaped, b, opts, Some(t), Some(&trace))
                }) {
                    return r;
                }
            } else if shaped
                .trace_failed_at
                .load(std::sync::atomic::Ordering::Relaxed)
                == t
            {
                // The search stopped short of `t` but below the budget less `UPWARD_SLACK`:
                // the lowest peak it reached is the first decisions' target (what a search
                // there takes, replayed), as the greedy in full would reach the smallest peak
                // it meets.
                let partial = shaped
                    .partial
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone()
                    .filter(|p| p.target <= upward_target(budget));
                if let Some(r) = partial.and_then(|p| {
                    finalize_prepared(v, prep, shaped, b, opts, Some(p.target), Some(&p))
                }) {
                    return r;
                }
            }
        }
        self.decide(shaped, b, opts, target)
    }

    /// As [`Finalizer::decide`] at `target`, replayed ([`greedy::replay`], no search) from the
    /// trace kept in `shaped` when that was scored over `target` and filled to it or below
    /// (the same decisions), or from the picks of a traced run that stopped short of its own
    /// target (`Shaped::partial`) where they reach `target` and were scored over it; else
    /// decided in full. With `scored_below`, a trace scored over any
    /// target up to `target` is replayed (the options keep their scores over that target).
    fn redecide(
        &self,
        shaped: &Shaped,
        b: &Bindings,
        opts: &FinalizeOptions,
        target: i64,
        scored_below: bool,
    ) -> Result<ConcretePlan, FinalizeError> {
        let trace = shaped
            .trace
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let usable = |t: &greedy::Trace| {
            t.target <= target
                && (t.scored_over == target || (scored_below && t.scored_over <= target))
        };
        // Else the picks of a traced run that stopped short of its target, where they reach
        // `target` and were scored over it (exactly what a search there takes).
        let partial = || {
            shaped
                .partial
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .filter(|t| t.target <= target && t.scored_over == target)
        };
        if let Some(trace) = trace.filter(usable).or_else(partial) {
            let (v, prep) = self.prepared_variant(shaped.variant);
            if let Some(r) = finalize_prepared(v, prep, shaped, b, opts, Some(target), Some(&trace))
            {
                return r;
            }
        }
        self.decide(shaped, b, opts, Some(target))
    }

    /// Lays out the arena of finalized plan `c` (of variant `c.variant`) when `opts` asks for
    /// offsets, after trying the decisions for the budget less [`UPWARD_SLACK`] first
    /// ([`Finalizer::upward_first`], kept when they add less time than `c` and their arena
    /// fits). Where `c`'s arena exceeds the budget (the layout fragmented more than
    /// [`ARENA_ALLOWANCE`]), the decisions are made again under the planned peak scaled by
    /// budget / arena, up to [`FIT_RETRIES`] times, until the arena fits; else the smallest
    /// arena is kept; then [`Finalizer::decide_upward`].
    fn lay_out(
        &self,
        c: ConcretePlan,
        shaped: &Shaped,
        b: &Bindings,
        opts: &FinalizeOptions,
    ) -> ConcretePlan {
        let never = AtomicBool::new(false);
        self.lay_out_unless(c, shaped, b, opts, &never).0
    }

    /// The arena of `c` (of variant `c.variant`) with `c.peak_bytes_planned` as its peak;
    /// `None` when `cancel` is set before it is done.
    fn lay(&self, c: &ConcretePlan, shaped: &Shaped, cancel: &AtomicBool) -> Option<Arena> {
        shaped
            .work
            .1
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.layouts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (v, prep) = self.prepared_variant(c.variant);
        assign_offsets_live(
            v,
            &prep.value_live,
            &c.value_bytes,
            &c.decisions,
            c.peak_bytes_planned,
            c.budget,
            &shaped.repair_futile,
            cancel,
        )
    }

    /// How many arenas this finalizer's finalizes have laid out in full (the layouts of
    /// [`Finalizer::lay_out`]'s path: the scan and, where it fragments, the anchored orders),
    /// not counting the cheap layouts that screen the results of several plan variants
    /// (`finalize/variants.rs`) or the atlas's fast path.
    #[doc(hidden)]
    pub fn layouts(&self) -> usize {
        self.layouts.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// [`Finalizer::surely_misses`] for `c`, decided by this finalizer at `b` under `opts`
    /// (for tests of the comparison of plan variants).
    ///
    /// # Errors
    /// As [`finalize`], for the bindings.
    #[doc(hidden)]
    pub fn surely_misses_at(
        &self,
        c: &ConcretePlan,
        b: &Bindings,
        opts: &FinalizeOptions,
    ) -> Result<bool, FinalizeError> {
        check_bindings(&self.plan, b)?;
        let shaped = self.evaluate(c.variant, b, opts)?;
        Ok(self.surely_misses(c, &shaped, opts))
    }

    /// Whether the arena of `c`'s decisions (of variant `c.variant`, evaluated as `shaped`)
    /// surely misses `budget` bytes, retries included: in every order its layout tries
    /// ([`every_order_reaches`](crate::arena), each abandoned once past the bound) it
    /// fragments so far that the first retry's target ([`Finalizer::lay_out`]: the planned
    /// peak scaled by budget / arena) lies below the lowest peak any decisions reach
    /// ([`bound::lowest_reachable`]), so every retry reaches that peak at best, and laid out
    /// alike misses the budget again. Of cost at most one layout, about one scan where the
    /// scan or the first order stays below the bound; `false` where no bound is known.
    ///
    /// The comparison of plan variants (`finalize/variants.rs`) lays such a result out after
    /// the others: on the golden set, `gpt2_small` fused at B=8, S=128 under 75% of its
    /// scheduled peak on `h100-sxm-pcie5`, variant 0's decisions add 290 µs against variant
    /// 1's 1159 µs, but each of its arenas lies 6.2-6.4% over its planned peak (4-6% over the
    /// budget), down to its lowest reachable peak: four layouts of about 6 ms each before
    /// variant 1's (0.2 ms) was kept; the screen abandons each order early.
    fn surely_misses(&self, c: &ConcretePlan, shaped: &Shaped, opts: &FinalizeOptions) -> bool {
        let (Some(budget), true) = (opts.budget, c.peak_bytes_planned > 0) else {
            return false;
        };
        let (v, prep) = self.prepared_variant(shaped.variant);
        let Some(lowest) = lowest_reachable(v, prep, shaped, opts).filter(|&l| l > 0) else {
            return false;
        };
        // The smallest arena whose retry target is below `lowest`.
        let beat = (c.peak_bytes_planned as f64 * budget as f64 / lowest as f64).ceil() as i64 + 1;
        every_order_reaches(
            v,
            &prep.value_live,
            &c.value_bytes,
            &c.decisions,
            c.peak_bytes_planned,
            budget,
            beat,
            &AtomicBool::new(false),
        )
    }

    /// As [`Finalizer::lay_out`], and whether it is done: given back without an arena
    /// (`false`) when `cancel` is set before.
    fn lay_out_unless(
        &self,
        mut c: ConcretePlan,
        shaped: &Shaped,
        b: &Bindings,
        opts: &FinalizeOptions,
        cancel: &AtomicBool,
    ) -> (ConcretePlan, bool) {
        if !opts.offsets {
            return (c, true);
        }
        let lay = |c: &ConcretePlan| self.lay(c, shaped, cancel);
        if let Some(budget) = opts.budget {
            // (Decisions that add no time cannot be bettered.)
            if c.overhead_us > 0.0 && upward_target(budget) > c.peak_bytes_planned {
                match self.upward_first(shaped, b, opts, budget, c.overhead_us, &lay) {
                    // Decisions for the whole budget where these overshot their target (a
                    // tight layout of them leaves about `UPWARD_SLACK` unused, not twice).
                    Upward::Fits(up) if overshot(&up, budget) => {
                        return (
                            self.decide_upward(*up, shaped, b, opts, &lay, 1, UPWARD_SLACK),
                            true,
                        )
                    }
                    // Decisions for the whole budget (and under its scaled target) wherever
                    // the arena leaves any of it unused: the scaled decisions are scored over
                    // the budget less `UPWARD_SLACK`, those for the whole budget can add less
                    // (the greedy is not monotone in its target).
                    Upward::Refit(up) => {
                        return (self.decide_upward(*up, shaped, b, opts, &lay, 2, 0.0), true)
                    }
                    Upward::Fits(up) => return (*up, true),
                    Upward::Cancelled => return (c, false),
                    Upward::Not => {}
                }
            }
        }
        let Some(arena) = lay(&c) else {
            return (c, false);
        };
        c.arena = arena;
        let Some(budget) = opts.budget else {
            return (c, true);
        };
        // `c` keeps the decisions it came with (given back as they were when cancelled); a
        // retry whose arena is smaller than the best so far replaces `best`.
        let mut best: Option<ConcretePlan> = None;
        let mut last = (c.peak_bytes_planned, c.arena.arena_bytes);
        let mut tried = None;
        for _ in 0..FIT_RETRIES {
            let smallest = best.as_ref().unwrap_or(&c).arena.arena_bytes;
            if smallest <= budget || last.1 <= 0 {
                break;
            }
            let scaled = (last.0 as f64 * budget as f64 / last.1 as f64) as i64;
            // The target of the last retry again (its decisions reached the smallest peak
            // the greedy meets, and laid out alike): the same decisions and arena again.
            if tried == Some(scaled) {
                break;
            }
            tried = Some(scaled);
            let Ok(mut again) = self.decide(shaped, b, opts, Some(scaled)) else {
                break;
            };
            let Some(arena) = lay(&again) else {
                c.arena = Arena::default();
                return (c, false);
            };
            again.arena = arena;
            last = (again.peak_bytes_planned, again.arena.arena_bytes);
            if again.arena.arena_bytes < smallest {
                best = Some(again);
            }
        }
        let out = best.unwrap_or(c);
        (
            self.decide_upward(out, shaped, b, opts, &lay, 2, UPWARD_SLACK),
            true,
        )
    }

    /// Before the arena of the first decisions (for the budget less [`ARENA_ALLOWANCE`], adding
    /// `than` µs) is laid out: the decisions for the budget less [`UPWARD_SLACK`] (replayed
    /// where `shaped` holds a search scored over that target, [`Finalizer::redecide`]; else
    /// decided in full), laid out by `lay` when they add less than `than`: [`Upward::Fits`]
    /// when that arena fits `budget` (most layouts fragment by less than [`UPWARD_SLACK`]).
    /// Where it exceeds `budget`, the decisions under their planned peak scaled by budget /
    /// arena less [`REFIT_MARGIN`] ([`Finalizer::replayed`] from the same search; none where
    /// it does not reach that target), laid out and kept on the same terms.
    fn upward_first(
        &self,
        shaped: &Shaped,
        b: &Bindings,
        opts: &FinalizeOptions,
        budget: i64,
        than: f64,
        lay: &dyn Fn(&ConcretePlan) -> Option<Arena>,
    ) -> Upward {
        let Ok(mut up) = self.redecide(shaped, b, opts, upward_target(budget), false) else {
            return Upward::Not;
        };
        if up.overhead_us >= than {
            return Upward::Not;
        }
        let Some(arena) = lay(&up) else {
            return Upward::Cancelled;
        };
        if arena.arena_bytes <= budget {
            up.arena = arena;
            return Upward::Fits(Box::new(up));
        }
        // The layout fragments by more than `UPWARD_SLACK`: once more under the planned peak
        // scaled by budget / arena, less `REFIT_MARGIN`, replayed from the same search (its
        // trace reaches down to the first decisions' target).
        let scaled = (up.peak_bytes_planned as f64 * budget as f64 / arena.arena_bytes as f64
            - budget as f64 * REFIT_MARGIN) as i64;
        let Some(mut again) = self.replayed(shaped, b, opts, scaled) else {
            return Upward::Not;
        };
        if again.overhead_us >= than {
            return Upward::Not;
        }
        let Some(arena) = lay(&again) else {
            return Upward::Cancelled;
        };
        if arena.arena_bytes > budget {
            return Upward::Not;
        }
        again.arena = arena;
        Upward::Refit(Box::new(again))
    }

    /// The decisions at `target` replayed from the search kept in `shaped` (the trace, else
    /// the picks of a traced run that stopped short) wherever it reaches `target`, whatever
    /// target its options were scored over; `None` where none reaches it or the replay fails.
    fn replayed(
        &self,
        shaped: &Shaped,
        b: &Bindings,
        opts: &FinalizeOptions,
        target: i64,
    ) -> Option<ConcretePlan> {
        let reaches = |t: &greedy::Trace| t.target <= target && target <= t.scored_over;
        let trace = shaped
            .trace
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .filter(reaches)
            .or_else(|| {
                shaped
                    .partial
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone()
                    .filter(reaches)
            })?;
        let (v, prep) = self.prepared_variant(shaped.variant);
        finalize_prepared(v, prep, shaped, b, opts, Some(target), Some(&trace))?.ok()
    }

    /// Where the arena of `c` (kept after the retries of [`Finalizer::lay_out`]) leaves more
    /// than `min_slack` of the budget unused ([`UPWARD_SLACK`]; any, 0, after the scaled
    /// decisions of [`Finalizer::upward_first`]), decides again for the whole budget and
    /// keeps that
    /// result when its arena (laid out by `lay`; `None` when cancelled) fits the budget and it
    /// adds less time. Where that arena exceeds the budget, decides once
    /// more under its planned peak scaled by budget / arena (as the retries of
    /// [`Finalizer::lay_out`] do) and keeps that result on the same terms; else `c`. At most
    /// `tries` (1 or 2) decisions and layouts: one where `c` is the decisions for the budget
    /// less [`UPWARD_SLACK`] (the whole budget only), two after the retries and after the
    /// scaled decisions of [`Finalizer::upward_first`] (on the golden set, one there lost 4.3
    /// points of the step: `gpt2_tiny_scan` fused, B=8, S=255 under half its scheduled peak on
    /// `h100-sxm-pcie5`).
    #[allow(clippy::too_many_arguments)]
    fn decide_upward(
        &self,
        c: ConcretePlan,
        shaped: &Shaped,
        b: &Bindings,
        opts: &FinalizeOptions,
        lay: &dyn Fn(&ConcretePlan) -> Option<Arena>,
        tries: usize,
        min_slack: f64,
    ) -> ConcretePlan {
        let Some(budget) = opts.budget else {
            return c;
        };
        let slack = budget - c.arena.arena_bytes;
        // (Decisions that add no time cannot be bettered.)
        if c.decisions.is_empty()
            || c.overhead_us <= 0.0
            || slack <= 0
            || (slack as f64) < budget as f64 * min_slack
        {
            return c;
        }
        let mut target = budget;
        for _ in 0..tries {
            let Ok(mut up) = self.redecide(shaped, b, opts, target, true) else {
                return c;
            };
            if up.overhead_us >= c.overhead_us {
                return c;
            }
            let Some(arena) = lay(&up) else {
                return c;
            };
            if arena.arena_bytes <= budget {
                up.arena = arena;
                return up;
            }
            // Below the first target tried (the budget): the arena fragments about as much.
            target =
                (up.peak_bytes_planned as f64 * budget as f64 / arena.arena_bytes as f64) as i64;
            if target <= c.peak_bytes_planned {
                return c;
            }
        }
        c
    }
}

/// Whether the arena of `c`, decided for the budget less [`UPWARD_SLACK`], leaves more than
/// twice that share of `budget` unused: its decisions overshot their target, and those for the
/// whole budget can add less time (`gpt2_tiny_scan` fused at B=8, S=37 under half its
/// scheduled peak on `h100-sxm-pcie5`: 1.5% left, 243.2% of the step added, 241.4% for the
/// whole budget).
fn overshot(c: &ConcretePlan, budget: i64) -> bool {
    (budget - c.arena.arena_bytes) as f64 > 2.0 * UPWARD_SLACK * budget as f64
}

/// What [`Finalizer::upward_first`] found.
enum Upward {
    /// Decisions that add less time, with an arena that fits the budget.
    Fits(Box<ConcretePlan>),
    /// As `Fits`, the decisions under the target scaled by the first layout's fragmentation.
    Refit(Box<ConcretePlan>),
    /// They add no less time, or their arena exceeds the budget: the first decisions are laid
    /// out.
    Not,
    /// The layout was cancelled.
    Cancelled,
}

/// Share of the budget the layout is assumed to need when finalize first tries decisions above
/// the [`ARENA_ALLOWANCE`] target ([`ARENA_ALLOWANCE`] assumes the layout fragments by up to 2%;
/// most layouts come within a fraction of that, and then the allowance only costs evictions),
/// and the share an arena must leave unused after the retries for finalize to decide again for
/// the whole budget. On the long-tail benchmark's plans most arenas are within 0.5% of their
/// planned peak (`bench/benches/finalize_longtail.rs`).
pub const UPWARD_SLACK: f64 = ARENA_ALLOWANCE / 4.0;

/// The target in bytes of the decisions [`Finalizer`] lays out first under `budget`: the
/// budget less [`UPWARD_SLACK`] of it.
fn upward_target(budget: i64) -> i64 {
    budget - (budget as f64 * UPWARD_SLACK) as i64
}

/// Share of the budget by which the decisions laid out again after a layout that fragments
/// more than [`UPWARD_SLACK`] aim below the budget scaled by that fragmentation (decisions a
/// few candidates apart fragment alike, but not exactly: on `gpt2_24l` at B=8, S=84 under
/// `fixed-mid-median` on `h100-sxm-pcie5`, 1.00658 and 1.00635 of their planned peaks).
pub const REFIT_MARGIN: f64 = UPWARD_SLACK / 10.0;

/// How many times [`Finalizer::finalize`] decides again under a lower target when the arena
/// does not fit the budget.
pub const FIT_RETRIES: usize = 3;

/// Share of the budget left to the arena's fragmentation: with offsets, the decisions bring
/// the planned peak to the budget less this share, so that the arena (the planned peak times
/// the layout's fragmentation, which the layout brings within
/// [`SCAN_KEPT_WITHIN`](crate::arena::SCAN_KEPT_WITHIN) of its lower bound where it can) fits
/// the budget.
pub const ARENA_ALLOWANCE: f64 = crate::arena::SCAN_KEPT_WITHIN;

/// Of two finalize errors, whether `a` should be reported over `b`: an infeasible budget with
/// the smaller smallest feasible budget (the one some variant meets); other errors never win.
fn smaller_infeasible(a: &FinalizeError, b: &FinalizeError) -> bool {
    match (a, b) {
        (
            FinalizeError::Infeasible { smallest: sa, .. },
            FinalizeError::Infeasible { smallest: sb, .. },
        ) => sa < sb,
        _ => false,
    }
}

/// Checks `b` ([`check_bindings`]) and picks the plan variant with the lowest scheduled peak.
fn check_and_choose_variant(plan: &Plan, b: &Bindings) -> Result<usize, FinalizeError> {
    check_bindings(plan, b)?;
    if plan.alternatives.is_empty() {
        return Ok(0);
    }
    Ok(plan
        .best_variant(b)
        .map_err(|source| FinalizeError::Eval {
            expr: "peak terms".into(),
            source,
        })?
        .0)
}

/// What one finalize of a plan variant evaluates at its bindings before any decision: shared
/// by the decisions it makes under several targets (the arena's retries and the upward
/// re-decision, [`Finalizer`]), each of which would otherwise evaluate it again.
pub(crate) struct Shaped {
    /// The plan variant.
    variant: usize,
    /// Every interned expression's value.
    vals: ExprValues,
    /// Size of every value in bytes.
    value_bytes: Vec<i64>,
    /// Resident bytes per point without decisions (region transients included).
    resident: Vec<i64>,
    /// FLOPs of one step.
    step_flops: i64,
    /// The step's modelled times on the options' device.
    costs: crate::cost::PointTimes,
    /// The trace of the greedy's last search ([`greedy::Trace`]: [`trace_prepared`]'s, or a
    /// decision's in full): decisions at a higher target replay it ([`Finalizer::redecide`]).
    trace: Mutex<Option<greedy::Trace>>,
    /// The target at which a traced run ([`trace_prepared`]) did not meet the target
    /// (`i64::MIN`: none): decisions there go straight to the greedy's budget-independent run
    /// ([`greedy::choose`]'s `unscored`).
    trace_failed_at: AtomicI64,
    /// The picks of a traced run ([`trace_prepared`]) that did not meet its target, up to the
    /// lowest peak it reached (its `target`): decisions at its `scored_over` exactly, where
    /// that is at least the lowest peak, replay it ([`Finalizer::redecide`]).
    partial: Mutex<Option<greedy::Trace>>,
    /// No greedy state's peak is below this ([`bound::lowest_reachable`]; `None`: no bound),
    /// computed when first asked ([`surely_infeasible`]).
    lowest_reachable: OnceLock<Option<i64>>,
    /// Set once a layout's repair of this finalize came no lower than its scan: later layouts
    /// skip the repair ([`crate::arena`]'s `assign_offsets_live`).
    repair_futile: AtomicBool,
    /// How many decisions (searches and replays, [`finalize_prepared`]) and arena layouts
    /// ([`Finalizer`]'s `lay`) this finalize made: what the atlas reads of a sample's full
    /// finalize (`finalize/atlas.rs`).
    work: (AtomicUsize, AtomicUsize),
    /// The decisions of the traced run ([`trace_prepared`]) at its target (bytes), its second
    /// look made on the run's own state: what the first replay of the trace at that target
    /// decides, taken by it instead of replaying.
    traced: Mutex<Option<(i64, greedy::Chosen)>>,
}

/// Whether no decisions of the greedy can bring the plan variant `shaped` evaluated (`plan`,
/// prepared as `prep`) within `target` bytes: its peak with everything any option frees
/// taken is above `target` ([`bound::lowest_reachable`]; never where the plan forces swaps).
fn surely_infeasible(
    plan: &Plan,
    prep: &Prepared,
    shaped: &Shaped,
    opts: &FinalizeOptions,
    target: i64,
) -> bool {
    // (The bound is at most the peak: without decisions needed, nothing is computed.)
    if !plan.forced_swaps.is_empty() || shaped.resident.iter().all(|&x| x <= target) {
        return false;
    }
    lowest_reachable(plan, prep, shaped, opts).is_some_and(|l| l > target)
}

/// The lowest peak any decisions of `plan` (prepared as `prep`, evaluated as `shaped`) reach
/// under `opts`'s kinds, bounded from below ([`bound::lowest_reachable`], computed once per
/// [`Shaped`]); `None` where the plan forces swaps or the bound does not hold.
fn lowest_reachable(
    plan: &Plan,
    prep: &Prepared,
    shaped: &Shaped,
    opts: &FinalizeOptions,
) -> Option<i64> {
    if !plan.forced_swaps.is_empty() {
        return None;
    }
    *shaped.lowest_reachable.get_or_init(|| {
        let options = Options::new(prep, &shaped.vals, &shaped.costs, &shaped.value_bytes, opts);
        bound::lowest_reachable(prep, &shaped.vals, &options, &shaped.resident)
    })
}

/// Evaluates plan variant `variant` (`plan`, prepared as `prep`) at checked bindings `b` on
/// the device of `opts` ([`Shaped`]).
///
/// # Errors
/// [`FinalizeError::Eval`] when an expression does not evaluate.
fn evaluate(
    plan: &Plan,
    prep: &Prepared,
    variant: usize,
    b: &Bindings,
    opts: &FinalizeOptions,
) -> Result<Shaped, FinalizeError> {
    let vals = prep.eval(b)?;
    let points = plan.schedule.len().max(1);
    let value_bytes: Vec<i64> = prep.value_bytes.iter().map(|&e| vals[e]).collect();
    let mut diff = vec![0i64; points + 1];
    for (live, &bytes) in prep.value_live.iter().zip(&value_bytes) {
        diff[live.start.index().min(points - 1)] += bytes;
        diff[live.after().min(points)] -= bytes;
    }
    let mut resident = Vec::with_capacity(points);
    let mut acc = 0i64;
    for d in &diff[..points] {
        acc += d;
        resident.push(acc);
    }
    for &(p, bytes) in &prep.region_transients {
        if let Some(slot) = resident.get_mut(p.index()) {
            *slot += vals[bytes];
        }
    }
    let step_flops = prep.step_flops.iter().map(|&(e, n)| n * vals[e]).sum();
    let costs = prep.costs.times(&opts.device, &vals);
    Ok(Shaped {
        variant,
        vals,
        value_bytes,
        resident,
        step_flops,
        costs,
        trace: Mutex::new(None),
        trace_failed_at: AtomicI64::new(i64::MIN),
        partial: Mutex::new(None),
        lowest_reachable: OnceLock::new(),
        repair_futile: AtomicBool::new(false),
        work: (AtomicUsize::new(0), AtomicUsize::new(0)),
        traced: Mutex::new(None),
    })
}

/// Traces the greedy's picks ([`greedy::trace`]) filled to `target` bytes with the options
/// scored over `scored_over` bytes on the plan variant `shaped` evaluated (`plan`, prepared as
/// `prep`) and keeps the trace in `shaped`; `false`
/// (nothing kept) where the peak is within `target` without the greedy or its run does not
/// meet `target` (then the decisions are made in full).
fn trace_prepared(
    plan: &Plan,
    prep: &Prepared,
    shaped: &Shaped,
    opts: &FinalizeOptions,
    target: i64,
    scored_over: i64,
) -> bool {
    let mut resident = shaped.resident.clone();
    let mut options = Options::new(prep, &shaped.vals, &shaped.costs, &shaped.value_bytes, opts);
    if !plan.forced_swaps.is_empty() {
        forced::take(plan, &mut options, &shaped.value_bytes, &mut resident);
    }
    if resident.iter().all(|&x| x <= target) {
        return false;
    }
    let trace = greedy::trace(
        &mut options,
        &prep.cover,
        plan.candidates.len(),
        &resident,
        target,
        scored_over.max(target),
        shaped.costs.step_us(),
    );
    match trace {
        Ok((trace, chosen)) => {
            *shaped.traced.lock().unwrap_or_else(|e| e.into_inner()) = chosen.map(|c| (target, c));
            *shaped.trace.lock().unwrap_or_else(|e| e.into_inner()) = Some(trace);
            true
        }
        Err(partial) => {
            shaped
                .trace_failed_at
                .store(target, std::sync::atomic::Ordering::Relaxed);
            *shaped.trace.lock().unwrap_or_else(|e| e.into_inner()) = None;
            *shaped.partial.lock().unwrap_or_else(|e| e.into_inner()) = Some(partial);
            false
        }
    }
}

/// Finalizes the plan variant `shaped` evaluated (`plan`, prepared as `prep`) at checked
/// bindings `b`, with decisions that bring the peak to `target` bytes (`None`: no decisions),
/// without the arena layout. With `replay`, the greedy's decisions are replayed from that
/// trace ([`greedy::replay`]; `None` when it does not reach `target`); else they are made in
/// full and their trace kept in `shaped`.
fn finalize_prepared(
    plan: &Plan,
    prep: &Prepared,
    shaped: &Shaped,
    b: &Bindings,
    opts: &FinalizeOptions,
    target: Option<i64>,
    replay: Option<&greedy::Trace>,
) -> Option<Result<ConcretePlan, FinalizeError>> {
    let Shaped {
        variant,
        ref vals,
        ref value_bytes,
        step_flops,
        ref costs,
        ..
    } = *shaped;
    shaped
        .work
        .0
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut resident = shaped.resident.clone();
    let peak_scheduled = resident.iter().copied().max().unwrap_or(0);
    let mut decisions = Vec::new();
    let (mut recompute_flops, mut swap_bytes) = (0i64, 0i64);
    let (mut recompute_us, mut exposed_transfer_us) = (0.0f64, 0.0f64);
    // Built when first needed (pricing is lazy, but the index is one slot per option).
    let mut options =
        (!plan.forced_swaps.is_empty()).then(|| Options::new(prep, vals, costs, value_bytes, opts));
    let forced = match &mut options {
        Some(o) => forced::take(plan, o, value_bytes, &mut resident),
        None => forced::Forced::default(),
    };
    let mut link = (forced.alone_us, forced.transfer_us);
    swap_bytes += forced.swap_bytes;
    decisions.extend_from_slice(&forced.decisions);
    let peak_forced = resident.iter().copied().max().unwrap_or(0);
    if let Some(budget) = target {
        if peak_forced > budget {
            // The traced run's own decisions, where this replays its trace at its target.
            let traced = replay
                .filter(|t| t.target == budget)
                .and_then(|_| {
                    let mut traced = shaped.traced.lock().unwrap_or_else(|e| e.into_inner());
                    traced.take_if(|(t, _)| *t == budget)
                })
                .map(|(_, c)| c);
            // (Built where a replay or search needs it.)
            macro_rules! options {
                () => {
                    options
                        .get_or_insert_with(|| Options::new(prep, vals, costs, value_bytes, opts))
                };
            }
            let c = match (traced, replay) {
                (Some(c), _) => c,
                (None, Some(trace)) => greedy::replay(
                    options!(),
                    &prep.cover,
                    plan.candidates.len(),
                    &resident,
                    trace,
                    budget,
                    costs.step_us(),
                )?,
                (None, None) => {
                    let tree = PeakTree::new(&resident);
                    // (A scored run there fails before the budget-independent one.)
                    let unscored = shaped
                        .trace_failed_at
                        .load(std::sync::atomic::Ordering::Relaxed)
                        == budget
                        || surely_infeasible(plan, prep, shaped, opts, budget);
                    match greedy::choose(
                        options!(),
                        &prep.cover,
                        plan.candidates.len(),
                        tree,
                        &resident,
                        budget,
                        costs.step_us(),
                        unscored,
                    ) {
                        Ok((c, trace)) => {
                            *shaped.trace.lock().unwrap_or_else(|e| e.into_inner()) = trace;
                            c
                        }
                        Err(e) => return Some(Err(e)),
                    }
                }
            };
            // The tree's residency, without walking it.
            c.charge(&mut resident);
            decisions.extend_from_slice(&c.decisions);
            recompute_flops = c.recompute_flops;
            swap_bytes += c.swap_bytes;
            recompute_us = c.recompute_us;
            exposed_transfer_us = c.exposed_transfer_us;
            let (alone, transfers) = c.link_sums();
            link.0 += alone;
            link.1 += transfers;
        }
    }
    if !forced.decisions.is_empty() {
        // The forced swaps share the link with the greedy's.
        exposed_transfer_us = crate::cost::exposed_transfer_us(link.0, link.1, costs.step_us());
    }
    let (resident, regen_peak) =
        exact_residency(plan, prep, vals, value_bytes, resident, &decisions);
    let peak_planned = resident
        .iter()
        .chain(&regen_peak)
        .copied()
        .max()
        .unwrap_or(0);
    Some(Ok(ConcretePlan {
        variant,
        bindings: b.clone(),
        budget: opts.budget,
        value_bytes: value_bytes.clone(),
        peak_bytes_scheduled: peak_scheduled,
        peak_bytes_planned: peak_planned,
        resident,
        regen_peak,
        decisions,
        recompute_flops,
        swap_bytes,
        overhead_us: recompute_us + exposed_transfer_us,
        recompute_us,
        exposed_transfer_us,
        step_us: costs.step_us(),
        device: opts.device.name.clone(),
        step_flops,
        arena: Arena::default(),
    }))
}

/// The exact memory of the chosen decisions, in the plan checker's model
/// (`ebb_passes::plan::check`): the greedy charges a recompute's transient results at its
/// regeneration point on top of that point's op (a bound); here they count only while the
/// regeneration runs, before the op. `charged` is the greedy's per-point residency.
///
/// Returns `(resident, regen_peak)`: resident bytes per point without transient charges, and
/// per point the largest bytes during its regenerations and reloads (run in candidate order;
/// each holds what is resident before the op, the values brought back before it, and its own
/// [`Candidate::regen_peak_bytes`](crate::format::Candidate) — the value for a reload).
fn exact_residency(
    plan: &Plan,
    prep: &Prepared,
    vals: &ExprValues,
    value_bytes: &[i64],
    mut resident: Vec<i64>,
    decisions: &[Decision],
) -> (Vec<i64>, Vec<i64>) {
    let points = resident.len();
    let mut regen_peak = vec![0i64; points];
    if decisions.is_empty() {
        return (resident, regen_peak);
    }
    // (when, candidate, bytes brought back, peak bytes while it runs), `when` before a point.
    let mut back: Vec<(ProgPoint, CandidateId, i64, i64)> = Vec::with_capacity(decisions.len());
    for d in decisions {
        let c = &plan.candidates[d.candidate.index()];
        let e = &prep.candidates[d.candidate.into()];
        let bytes = value_bytes.get(c.value.index()).copied().unwrap_or(0);
        let peak = match d.kind {
            DecisionKind::Recompute => {
                let transient = vals[e.transient_bytes];
                if let Some(slot) = resident.get_mut(c.regenerate_before.index()) {
                    *slot -= transient;
                }
                e.regen_peak_bytes.map_or(bytes + transient, |x| vals[x])
            }
            DecisionKind::Swap => bytes,
        };
        back.push((c.back_point(d.kind), d.candidate, bytes, peak));
    }
    back.sort_unstable_by_key(|&(when, c, _, _)| (when, c));
    // The points with regenerations, in order (`regen_points`), each with the bytes resident
    // there less its op's results and region transients and everything brought back before it
    // (`base_bytes`; sparse: a few hundred points of thousands).
    let mut regen_points: Vec<usize> = Vec::new();
    let mut base_bytes: Vec<i64> = Vec::new();
    for &(when, _, _, _) in &back {
        let p = when.point().index();
        if p < points && regen_points.last() != Some(&p) {
            let made: i64 = prep
                .produced
                .row(PointIx::new(p))
                .iter()
                .map(|&v| value_bytes.get(v.index()).copied().unwrap_or(0))
                .sum();
            regen_points.push(p);
            base_bytes.push(resident[p] - made);
        }
    }
    for &(p, bytes) in &prep.region_transients {
        if let Ok(k) = regen_points.binary_search(&p.index()) {
            base_bytes[k] -= vals[bytes];
        }
    }
    // `back` is by point: walk it alongside `regen_points`.
    let position = |k: &mut usize, p: usize| {
        while *k < regen_points.len() && regen_points[*k] < p {
            *k += 1;
        }
        (*k < regen_points.len() && regen_points[*k] == p).then_some(*k)
    };
    let mut k = 0;
    for &(when, _, bytes, _) in &back {
        if let Some(j) = position(&mut k, when.point().index()) {
            base_bytes[j] -= bytes;
        }
    }
    let mut k = 0;
    for &(when, _, bytes, peak) in &back {
        let p = when.point().index();
        if let Some(j) = position(&mut k, p) {
            regen_peak[p] = regen_peak[p].max(base_bytes[j] + peak);
            base_bytes[j] += bytes;
        }
    }
    (resident, regen_peak)
}
