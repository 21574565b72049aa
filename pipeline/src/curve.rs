//! The budget curve of a plan at one binding (`ebb plan --budget-curve`, `Plan.budget_curve`):
//! for budgets from the smallest feasible one to the scheduled peak, the planned peak, the
//! arena and the modelled time the decisions add.
//!
//! Each budget `B` of the grid is finalized with offsets ([`ebb_plan::finalize::Finalizer`],
//! as `ebb plan --budget B` and the runtime do); finalize's greedy is not monotone in the
//! budget by itself (a larger budget can add more time, or lay out an arena that misses the
//! budget), so the curve takes, at each `B`, the best of the finalized results found at
//! budgets `B' ≤ B` whose arena fits `B'` (a lower envelope: least added time, then the
//! smaller arena; a point's own result wins ties), or the plan without decisions once its arena
//! fits `B`. A point says where its decisions come from ([`CurvePoint::decided_at_bytes`]):
//! a runtime with `B` bytes of device memory runs them by finalizing at that budget (finalize
//! is deterministic: the same plan, binding, budget and prices give the same decisions and
//! offsets), or without a budget when it is `None`.
//!
//! Invariant (test: `tests/tests/budget_curve.rs`): the points are in increasing budget order;
//! a point that fits has `arena_bytes ≤ decided_at_bytes ≤ budget_bytes`, the result at
//! `decided_at_bytes` is proven by the plan checker ([`crate::report::prove_at`]), and no point
//! adds more time than one before it; once a point fits, every later point fits.

use crate::bind::size_error;
use crate::options::Pricing;
use crate::report::{check_plan_bindings, program_order_peak, prove_at};
use anyhow::{bail, Result};
use ebb_ir::{Bindings, Graph};
use ebb_plan::device::DeviceId;
use ebb_plan::finalize::{ConcretePlan, FinalizeError, Finalizer};
use ebb_plan::format::{DecisionKind, Plan};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Instant;

/// Grid points of a budget curve when none are asked for (the end points included).
pub const DEFAULT_CURVE_POINTS: usize = 16;

/// The rule by which a curve point's decisions are chosen (printed with the curve).
pub const CURVE_RULE: &str = "budget B runs with the decisions finalize finds at the budget \
    B' <= B (decided_at_bytes) that add the least time among those whose arena fits B' (none: \
    the plan without decisions, whose arena fits B); finalize at B' to run them";

/// A plan's budget curve at one binding (see the module docs).
#[derive(Debug, Clone, Serialize)]
pub struct BudgetCurve {
    /// The bindings.
    pub bind: BTreeMap<String, i64>,
    /// The device profile the decisions were priced on (serialized as its name).
    pub device: DeviceId,
    /// Modelled step time without decisions on that device, µs.
    pub step_us_modelled: f64,
    /// Peak bytes executing the planned graph in program order.
    pub peak_bytes_program_order: i64,
    /// Peak bytes of the plan's best schedule variant at the binding, without decisions: the
    /// grid's top.
    pub peak_bytes_scheduled: i64,
    /// The smallest planned peak any schedule variant's decisions reach, bytes: the grid's
    /// bottom (its arena can still exceed it).
    pub smallest_feasible_bytes: i64,
    /// The smallest budget of the curve at which an arena fits, bytes (`None` when no point
    /// fits).
    pub smallest_fitting_bytes: Option<i64>,
    /// Arena bytes of the plan finalized without a budget (no decisions): from this budget on,
    /// nothing is added.
    pub no_decisions_arena_bytes: i64,
    /// [`CURVE_RULE`].
    pub rule: &'static str,
    /// Points that run decisions found at a smaller budget (or none), not their own.
    pub points_from_smaller_budget: usize,
    /// Wall time of the whole curve (every finalize and proof), ms.
    pub curve_ms: f64,
    /// The points, by increasing budget.
    pub points: Vec<CurvePoint>,
}

/// One budget of a [`BudgetCurve`].
#[derive(Debug, Clone, Serialize)]
pub struct CurvePoint {
    /// The budget, bytes.
    pub budget_bytes: i64,
    /// `budget_bytes` / the scheduled peak.
    pub budget_fraction_of_scheduled: f64,
    /// Whether an arena fits this budget (the fields below are 0 when not).
    pub fits: bool,
    /// The budget finalize was given to find the decisions this point runs (≤
    /// `budget_bytes`); `None`: the plan finalized without a budget.
    pub decided_at_bytes: Option<i64>,
    /// The plan variant of those decisions.
    pub variant: usize,
    /// Peak bytes with the decisions.
    pub peak_bytes_planned: i64,
    /// Arena bytes of their layout (≤ `decided_at_bytes`, ≤ `budget_bytes`).
    pub arena_bytes: i64,
    /// Modelled time they add, µs (recompute + exposed transfers).
    pub added_us: f64,
    /// `added_us / step_us_modelled` (0 for an empty step).
    pub added_fraction: f64,
    /// Recompute decisions.
    pub recompute_decisions: usize,
    /// Swap decisions.
    pub swap_decisions: usize,
    /// FLOPs recomputed.
    pub recompute_flops: i64,
    /// Bytes offloaded to the host (each also reloaded).
    pub swap_bytes: i64,
    /// Finalize's own result at `budget_bytes`, before the envelope.
    pub own: OwnResult,
}

/// What finalize gives at a curve point's own budget.
#[derive(Debug, Clone, Serialize)]
pub struct OwnResult {
    /// Whether the budget is feasible for finalize.
    pub feasible: bool,
    /// Peak bytes with its decisions (0 when infeasible).
    pub peak_bytes_planned: i64,
    /// Its arena bytes (0 when infeasible).
    pub arena_bytes: i64,
    /// The time its decisions add, µs (0 when infeasible).
    pub added_us: f64,
    /// Time of that finalize (decisions and offsets), µs.
    pub finalize_us: f64,
}

/// A finalized result the envelope can take: where it was decided and what it costs.
struct Found {
    decided_at: Option<i64>,
    c: ConcretePlan,
}

impl Found {
    fn key(&self) -> (f64, i64) {
        (self.c.overhead_us, self.c.arena.arena_bytes)
    }
}

/// The budget grid: `points` budgets evenly spaced from `lo` to `hi` (both included), with
/// `extra` budgets added; sorted, without repeats. Public for the tests only.
#[doc(hidden)]
pub fn grid(lo: i64, hi: i64, points: usize, extra: &[i64]) -> Vec<i64> {
    let n = points.max(2) - 1;
    let mut g: Vec<i64> = (0..=n)
        .map(|k| lo + ((hi - lo) as i128 * k as i128 / n as i128) as i64)
        .chain(extra.iter().copied())
        .collect();
    g.sort_unstable();
    g.dedup();
    g
}

/// The budget curve of `plan` (whose graph is `g`) at `b`, priced by `pricing`, over
/// `points` budgets from the smallest feasible to the scheduled peak (both included), plus
/// the smallest budget whose arena fits when the bottom's does not, and the arena of the plan
/// without decisions when it is above the scheduled peak. See the module docs for the rule
/// and the invariant.
///
/// # Errors
/// `points` < 2; bindings that break the plan's facts or assertions; sizes that do not
/// evaluate at `b`; a result the plan checker rejects.
pub fn budget_curve(
    plan: &Plan,
    g: &Graph,
    b: &Bindings,
    pricing: &Pricing,
    points: usize,
) -> Result<BudgetCurve> {
    if points < 2 {
        bail!("a budget curve needs at least 2 points (the smallest feasible budget and the scheduled peak), not {points}");
    }
    let t0 = Instant::now();
    check_plan_bindings(plan, b)?;
    let po = program_order_peak(g, b)?;
    let scheduled = plan.best_variant(b).map_err(|e| size_error(g, b, e))?.1;
    let finalizer = Finalizer::new(plan);
    finalizer.prepare_all();
    let none = finalizer.finalize(b, &pricing.finalize_options(None, true))?;
    // The smallest planned peak: what a budget of one byte is told it needs.
    let smallest = match finalizer.finalize(b, &pricing.finalize_options(Some(1), false)) {
        Ok(c) => c.peak_bytes_planned,
        Err(FinalizeError::Infeasible { smallest, .. }) => smallest,
        Err(e) => return Err(e.into()),
    }
    .min(scheduled);
    let at = |budget: i64| -> Result<(Option<ConcretePlan>, f64)> {
        let t = Instant::now();
        let r = finalizer.finalize(b, &pricing.finalize_options(Some(budget), true));
        let us = t.elapsed().as_secs_f64() * 1e6;
        match r {
            Ok(c) => Ok((Some(c), us)),
            Err(FinalizeError::Infeasible { .. }) => Ok((None, us)),
            Err(e) => Err(e.into()),
        }
    };
    let mut extra = vec![none.arena.arena_bytes.max(scheduled)];
    let bottom = at(smallest)?;
    if let Some(c) = &bottom.0 {
        if c.arena.arena_bytes > smallest {
            extra.push(c.arena.arena_bytes);
        }
    }
    let budgets = grid(smallest, scheduled, points, &extra);
    let none = Found {
        decided_at: None,
        c: none,
    };
    let step_us = none.c.step_us;
    let mut best: Option<Found> = None;
    let mut out = Vec::with_capacity(budgets.len());
    let mut proven: Vec<Option<i64>> = Vec::new();
    for (k, &budget) in budgets.iter().enumerate() {
        let (c, finalize_us) = if k == 0 && budget == smallest {
            (bottom.0.clone(), bottom.1)
        } else {
            at(budget)?
        };
        let own = match &c {
            Some(c) => OwnResult {
                feasible: true,
                peak_bytes_planned: c.peak_bytes_planned,
                arena_bytes: c.arena.arena_bytes,
                added_us: c.overhead_us,
                finalize_us,
            },
            None => OwnResult {
                feasible: false,
                peak_bytes_planned: 0,
                arena_bytes: 0,
                added_us: 0.0,
                finalize_us,
            },
        };
        // The plan without decisions, once its arena fits; then this budget's own result,
        // which wins ties.
        if none.c.arena.arena_bytes <= budget && best.as_ref().is_none_or(|f| none.key() < f.key())
        {
            best = Some(Found {
                decided_at: None,
                c: none.c.clone(),
            });
        }
        if let Some(c) = c.filter(|c| c.arena.arena_bytes <= budget) {
            let f = Found {
                decided_at: Some(budget),
                c,
            };
            if best.as_ref().is_none_or(|x| f.key().0 <= x.key().0) {
                best = Some(f);
            }
        }
        let point = match &best {
            Some(f) => {
                if !proven.contains(&f.decided_at) {
                    prove_at(plan, g, b, &f.c)?;
                    proven.push(f.decided_at);
                }
                let count = |kind| f.c.decisions.iter().filter(|d| d.kind == kind).count();
                CurvePoint {
                    budget_bytes: budget,
                    budget_fraction_of_scheduled: budget as f64 / scheduled.max(1) as f64,
                    fits: true,
                    decided_at_bytes: f.decided_at,
                    variant: f.c.variant,
                    peak_bytes_planned: f.c.peak_bytes_planned,
                    arena_bytes: f.c.arena.arena_bytes,
                    added_us: f.c.overhead_us,
                    added_fraction: if step_us > 0.0 {
                        f.c.overhead_us / step_us
                    } else {
                        0.0
                    },
                    recompute_decisions: count(DecisionKind::Recompute),
                    swap_decisions: count(DecisionKind::Swap),
                    recompute_flops: f.c.recompute_flops,
                    swap_bytes: f.c.swap_bytes,
                    own,
                }
            }
            None => CurvePoint {
                budget_bytes: budget,
                budget_fraction_of_scheduled: budget as f64 / scheduled.max(1) as f64,
                fits: false,
                decided_at_bytes: None,
                variant: 0,
                peak_bytes_planned: 0,
                arena_bytes: 0,
                added_us: 0.0,
                added_fraction: 0.0,
                recompute_decisions: 0,
                swap_decisions: 0,
                recompute_flops: 0,
                swap_bytes: 0,
                own,
            },
        };
        out.push(point);
    }
    Ok(BudgetCurve {
        bind: b.iter().map(|(s, v)| (s.name().to_string(), *v)).collect(),
        device: none.c.device.clone(),
        step_us_modelled: step_us,
        peak_bytes_program_order: po,
        peak_bytes_scheduled: scheduled,
        smallest_feasible_bytes: smallest,
        smallest_fitting_bytes: out.iter().find(|p| p.fits).map(|p| p.budget_bytes),
        no_decisions_arena_bytes: none.c.arena.arena_bytes,
        rule: CURVE_RULE,
        points_from_smaller_budget: out
            .iter()
            .filter(|p| p.fits && p.decided_at_bytes != Some(p.budget_bytes))
            .count(),
        curve_ms: t0.elapsed().as_secs_f64() * 1e3,
        points: out,
    })
}

impl BudgetCurve {
    /// Checks the invariant of the module docs, naming the first point that breaks it.
    ///
    /// # Errors
    /// A point out of budget order, one whose arena or source budget is above its budget, one
    /// that adds more time than an earlier point, or one that does not fit after one that
    /// does.
    pub fn check(&self) -> Result<()> {
        let mut last: Option<&CurvePoint> = None;
        for p in &self.points {
            let at = p.decided_at_bytes.unwrap_or(p.arena_bytes);
            if p.fits && !(p.arena_bytes <= at && at <= p.budget_bytes) {
                bail!(
                    "at budget {} bytes the arena is {} bytes, decided at {:?}",
                    p.budget_bytes,
                    p.arena_bytes,
                    p.decided_at_bytes
                );
            }
            if let Some(q) = last {
                if p.budget_bytes <= q.budget_bytes {
                    bail!("budget {} after {}", p.budget_bytes, q.budget_bytes);
                }
                if q.fits && !p.fits {
                    bail!(
                        "budget {} does not fit after {} did",
                        p.budget_bytes,
                        q.budget_bytes
                    );
                }
                if q.fits && p.added_us > q.added_us {
                    bail!(
                        "budget {} adds {} us, more than {} us at {}",
                        p.budget_bytes,
                        p.added_us,
                        q.added_us,
                        q.budget_bytes
                    );
                }
            }
            last = Some(p);
        }
        Ok(())
    }
}
