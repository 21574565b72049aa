//! Finalize a symbolic [`Plan`] at concrete shapes under a memory budget: check the shape
//! assertions, evaluate sizes, choose which candidates to evict (and whether each is recomputed
//! or swapped) until the peak fits, and assign arena offsets.
//!
//! # Decision heuristic
//! A greedy after DTR with a widening step and a second look (`finalize/greedy.rs`). Costs come
//! from the roofline time model of [`ebb_ir::cost`] on [`FinalizeOptions::device`]:
//! recompute = the modelled time of the ops it reruns; swap = the part of its transfers the
//! schedule's own compute cannot hide, with the link shared by all swaps
//! ([`ebb_ir::cost::exposed_transfer_us`]).
//!
//! Known failure cases: greedy choice per peak point is not optimal (a candidate chosen early
//! may be dominated by one that covers several peaks later; the exact ILP in `ebb bench
//! --exact` measures the gap); recompute transients are charged at the regeneration point in
//! full (conservative); link sharing is a fluid lower bound (see `ebb_ir::cost`).

mod greedy;
pub mod segtree;

use crate::arena::{assign_offsets, Arena};
use ebb_ir::cost::StepCosts;
use ebb_ir::device::DeviceProfile;
use ebb_ir::dim::DimError;
use ebb_ir::plan::{CandidateId, Decision, DecisionKind, Plan, Point, ProgPoint};
use ebb_ir::{Bindings, DimExpr};
use greedy::Option_;
use segtree::PeakTree;
use serde::Serialize;
use std::collections::HashMap;

/// Options of [`finalize`].
#[derive(Clone, Debug)]
pub struct FinalizeOptions {
    /// Device memory budget in bytes; `None` = no budget (no evictions).
    pub budget: Option<i64>,
    /// The device whose roofline times price recompute and swap ([`ebb_ir::cost`]).
    pub device: DeviceProfile,
    /// Decision kinds that may be chosen.
    pub kinds: Vec<DecisionKind>,
    /// Assign arena offsets (skip for a pure planning report).
    pub offsets: bool,
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
    /// The device profile the decisions were priced on.
    pub device: String,
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

/// Memoized evaluation of the plan's expressions at one binding (sizes repeat a lot).
struct Evaluator<'a> {
    b: &'a Bindings,
    memo: HashMap<&'a DimExpr, i64>,
}

impl<'a> Evaluator<'a> {
    fn eval(&mut self, e: &'a DimExpr) -> Result<i64, FinalizeError> {
        if let Some(v) = e.as_const() {
            return Ok(v);
        }
        if let Some(v) = self.memo.get(e) {
            return Ok(*v);
        }
        let v = e.eval(self.b).map_err(|source| FinalizeError::Eval {
            expr: e.to_string(),
            source,
        })?;
        self.memo.insert(e, v);
        Ok(v)
    }
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

/// Finalizes `plan` at bindings `b` (see the module docs).
///
/// Errors: [`FinalizeError::Fact`] / [`FinalizeError::Assertion`] for invalid shapes,
/// [`FinalizeError::Infeasible`] (with the smallest feasible budget) when the budget cannot be
/// met, [`FinalizeError::Eval`] when an expression does not evaluate.
pub fn finalize(
    plan: &Plan,
    b: &Bindings,
    opts: &FinalizeOptions,
) -> Result<ConcretePlan, FinalizeError> {
    check_bindings(plan, b)?;
    let variant = if plan.alternatives.is_empty() {
        0
    } else {
        plan.best_variant(b)
            .map_err(|source| FinalizeError::Eval {
                expr: "peak terms".into(),
                source,
            })?
            .0
    };
    let plan = plan.variant(variant).unwrap_or(plan);
    let mut ev = Evaluator {
        b,
        memo: HashMap::new(),
    };
    let points = plan.schedule.len().max(1);
    let mut value_bytes = Vec::with_capacity(plan.values.len());
    let mut diff = vec![0i64; points + 1];
    for v in &plan.values {
        let bytes = ev.eval(&v.bytes)?;
        value_bytes.push(bytes);
        diff[v.def.index().min(points - 1)] += bytes;
        diff[(v.last_use.index() + 1).min(points)] -= bytes;
    }
    let mut resident = Vec::with_capacity(points);
    let mut acc = 0i64;
    for d in &diff[..points] {
        acc += d;
        resident.push(acc);
    }
    for t in &plan.region_transients {
        if let Some(slot) = resident.get_mut(t.point.index()) {
            *slot += ev.eval(&t.bytes)?;
        }
    }
    let step_flops = match &plan.point_flops {
        Some(f) => f.iter().map(|e| ev.eval(e)).sum::<Result<i64, _>>()?,
        None => 0,
    };
    let peak_scheduled = resident.iter().copied().max().unwrap_or(0);
    let costs = StepCosts::new(plan, &opts.device, |e| ev.eval(e))?;
    let mut tree = PeakTree::new(&resident);
    let mut decisions = Vec::new();
    let (mut recompute_flops, mut swap_bytes) = (0i64, 0i64);
    let (mut recompute_us, mut exposed_transfer_us) = (0.0f64, 0.0f64);
    if let Some(budget) = opts.budget {
        if peak_scheduled > budget {
            let options = price_options(plan, &mut ev, &costs, &value_bytes, opts)?;
            let c = greedy::choose(
                options,
                plan.candidates.len(),
                &mut tree,
                budget,
                costs.step_us(),
            )?;
            decisions = c.decisions;
            recompute_flops = c.recompute_flops;
            swap_bytes = c.swap_bytes;
            recompute_us = c.recompute_us;
            exposed_transfer_us = c.exposed_transfer_us;
        }
    }
    let (resident, regen_peak) =
        exact_residency(plan, &mut ev, &value_bytes, tree.values(), &decisions)?;
    let peak_planned = resident
        .iter()
        .chain(&regen_peak)
        .copied()
        .max()
        .unwrap_or(0);
    let arena = if opts.offsets {
        assign_offsets(plan, &value_bytes, &decisions, peak_planned)
    } else {
        Arena::default()
    };
    Ok(ConcretePlan {
        variant,
        bindings: b.clone(),
        budget: opts.budget,
        value_bytes,
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
        arena,
    })
}

/// The exact memory of the chosen decisions, in the plan checker's model
/// (`ebb_passes::plan::check`): the greedy charges a recompute's transient results at its
/// regeneration point on top of that point's op (a bound); here they count only while the
/// regeneration runs, before the op. `charged` is the greedy's per-point residency.
///
/// Returns `(resident, regen_peak)`: resident bytes per point without transient charges, and
/// per point the largest bytes during its regenerations and reloads (run in candidate order;
/// each holds what is resident before the op, the values brought back before it, and its own
/// [`Candidate::regen_peak_bytes`](ebb_ir::plan::Candidate) — the value for a reload).
fn exact_residency<'a>(
    plan: &'a Plan,
    ev: &mut Evaluator<'a>,
    value_bytes: &[i64],
    mut resident: Vec<i64>,
    decisions: &[Decision],
) -> Result<(Vec<i64>, Vec<i64>), FinalizeError> {
    let points = resident.len();
    let mut regen_peak = vec![0i64; points];
    if decisions.is_empty() {
        return Ok((resident, regen_peak));
    }
    // (when, candidate, bytes brought back, peak bytes while it runs), `when` before a point.
    let mut back: Vec<(ProgPoint, CandidateId, i64, i64)> = Vec::with_capacity(decisions.len());
    for d in decisions {
        let c = &plan.candidates[d.candidate.index()];
        let bytes = value_bytes.get(c.value.index()).copied().unwrap_or(0);
        let peak = match d.kind {
            DecisionKind::Recompute => {
                let transient = ev.eval(&c.transient_bytes)?;
                if let Some(slot) = resident.get_mut(c.regenerate_before.index()) {
                    *slot -= transient;
                }
                match &c.regen_peak_bytes {
                    Some(e) => ev.eval(e)?,
                    None => bytes + transient,
                }
            }
            DecisionKind::Swap => bytes,
        };
        back.push((c.back_point(d.kind), d.candidate, bytes, peak));
    }
    back.sort_unstable_by_key(|&(at, c, _, _)| (at, c));
    // Bytes of the op results and region transients at each point with regenerations.
    let mut before_op: HashMap<Point, i64> = HashMap::new();
    for &(at, _, _, _) in &back {
        let p = at.point();
        if let Some(&x) = resident.get(p.index()) {
            before_op.entry(p).or_insert(x);
        }
    }
    for (pv, &bytes) in plan.values.iter().zip(value_bytes) {
        if !matches!(
            pv.class,
            ebb_ir::plan::ValueClass::Input | ebb_ir::plan::ValueClass::Donated
        ) {
            if let Some(x) = before_op.get_mut(&pv.def) {
                *x -= bytes;
            }
        }
    }
    for t in &plan.region_transients {
        if let Some(x) = before_op.get_mut(&t.point) {
            *x -= ev.eval(&t.bytes)?;
        }
    }
    for &(at, _, bytes, _) in &back {
        if let Some(x) = before_op.get_mut(&at.point()) {
            *x -= bytes;
        }
    }
    for &(at, _, bytes, peak) in &back {
        let p = at.point();
        if let Some(x) = before_op.get_mut(&p) {
            regen_peak[p.index()] = regen_peak[p.index()].max(*x + peak);
            *x += bytes;
        }
    }
    Ok((resident, regen_peak))
}

/// Prices every (candidate, allowed kind) pair on `costs` (pairs that free nothing are left
/// out).
fn price_options<'a>(
    plan: &'a Plan,
    ev: &mut Evaluator<'a>,
    costs: &StepCosts,
    value_bytes: &[i64],
    opts: &FinalizeOptions,
) -> Result<Vec<Option_>, FinalizeError> {
    let mut out = Vec::new();
    for (c, cand) in CandidateId::all(plan.candidates.len()).zip(&plan.candidates) {
        let bytes = value_bytes.get(cand.value.index()).copied().unwrap_or(0);
        if bytes <= 0 {
            continue;
        }
        for &kind in &opts.kinds {
            if !cand.allows(kind) {
                continue;
            }
            let (l, r, transient, cost_us, transfer_us, flops) = match kind {
                DecisionKind::Recompute => {
                    let flops = ev.eval(&cand.recompute_flops)?;
                    let tr = ev.eval(&cand.transient_bytes)?;
                    (
                        cand.evict_after.next(),
                        cand.regenerate_before.prev(),
                        (cand.regenerate_before, tr),
                        costs.recompute_us(cand, flops),
                        0.0,
                        flops,
                    )
                }
                DecisionKind::Swap => {
                    let (l, r) = (cand.evict_after.next(), cand.prefetch_at.prev());
                    let moved = ev.eval(&cand.swap_bytes)?;
                    let cost_us = costs.swap_us(cand, moved);
                    let transfer_us = costs.transfer_us(moved);
                    (l, r, (Point::new(0), 0), cost_us, transfer_us, 0)
                }
            };
            // The window frees points `[l, r]`; an empty window frees nothing.
            let Some(r) = r.filter(|&r| l <= r) else {
                continue;
            };
            let window = (r.index() - l.index() + 1) as f64;
            let score = cost_us / (bytes as f64 * window);
            let o = Option_ {
                c,
                kind,
                l,
                r,
                bytes,
                transient,
                cost_us,
                transfer_us,
                flops,
                score,
            };
            out.push(o);
        }
    }
    Ok(out)
}
