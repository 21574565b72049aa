//! The `ebb plan` report: a plan's memory figures at one binding, finalized under a budget on
//! a priced device ([`Pricing`]), and proven by the independent plan checker
//! ([`ebb_passes::plan::check()`]) before anything is reported.

use crate::bind::size_error;
use crate::compile::{fusion_groups, plan_graph};
use crate::options::Pricing;
use crate::size::Budget;
use anyhow::{bail, Context, Result};
use ebb_ir::{Bindings, Graph};
use ebb_passes::memory::{self, Schedule};
use ebb_plan::device::DeviceId;
use ebb_plan::format::{DecisionKind, Plan};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// Proves what a report at `b` rests on with the independent plan checker
/// ([`ebb_passes::plan::check()`]): every schedule variant's peak at `b` is the simulated one
/// (so the variant was chosen honestly), and the finalized decisions of `c` are safe with the
/// peak they claim. `ebb plan`, `ebb run` and `bench`'s budget rows call it through
/// [`plan_report_proven`], on every plan, loaded or compiled.
///
/// # Errors
/// The checker's finding, naming the variant, or a planned peak that differs from the proven
/// one.
pub fn prove_at(
    plan: &Plan,
    g: &Graph,
    b: &Bindings,
    c: &ebb_plan::finalize::ConcretePlan,
) -> Result<()> {
    // The finalized variant's derivation at `b` serves both its check without decisions and
    // the check of the decisions.
    let checker = ebb_passes::plan::check_variants_keeping(g, plan, b, c.variant)?;
    prove_with(&checker, c)
}

/// Proves the decisions of `c` with `checker`, the checker of `c`'s schedule variant at `c`'s
/// bindings (its derivation done): it must accept them and simulate `c`'s planned peak.
///
/// # Errors
/// The checker's finding, or a simulated peak other than `c.peak_bytes_planned`.
fn prove_with(
    checker: &ebb_passes::plan::Checker<'_>,
    c: &ebb_plan::finalize::ConcretePlan,
) -> Result<()> {
    let proof = checker
        .check(&c.decisions)
        .context("the plan checker rejects the finalized decisions")?;
    if proof.peak != c.peak_bytes_planned {
        bail!(
            "the plan checker proves a peak of {} bytes with the finalized decisions, the plan claims {}",
            proof.peak,
            c.peak_bytes_planned
        );
    }
    Ok(())
}

/// Memory figures of a plan at one binding, the `ebb plan` report.
#[derive(Debug, Serialize)]
pub struct PlanReport {
    /// The bindings.
    pub bind: BTreeMap<String, i64>,
    /// Peak bytes executing the planned graph in program order.
    pub peak_bytes_program_order: i64,
    /// Peak bytes of the schedule the decisions use (schedule variant `schedule_variant`), no
    /// evictions. Without a budget that is the variant with the lowest peak at this binding;
    /// under a budget finalize can keep another (see `schedule_note`).
    pub peak_bytes_scheduled: i64,
    /// The plan's schedule variant the report uses (0 = the plan's own; `Plan::variant`).
    pub schedule_variant: usize,
    /// Schedule variants the plan keeps (1–4).
    pub schedule_variants: usize,
    /// The lowest peak of any schedule variant at this binding, without decisions (its
    /// `peak_bytes_scheduled` when no budget is given).
    pub peak_bytes_scheduled_best: i64,
    /// Why the schedule's peak is above the program-order peak or the best variant's, when it
    /// is: the variant kept under the budget and the reason, or that every variant's schedule
    /// is above program order at this binding. `None` otherwise.
    pub schedule_note: Option<String>,
    /// Lower bound: persistent bytes + the largest single op's operands and results.
    pub lower_bound_bytes: i64,
    /// Remat/swap candidates in the plan.
    pub candidates: usize,
    /// The budget, if one was given, bytes.
    pub budget_bytes: Option<i64>,
    /// A budget given as a fraction (`--budget 50%`): that fraction (0.5)...
    pub budget_fraction: Option<f64>,
    /// ...of this figure of the report: `peak_bytes_program_order` (`50%`) or
    /// `peak_bytes_scheduled` (`50%scheduled`).
    pub budget_fraction_of: Option<&'static str>,
    /// Peak bytes with the runtime's decisions under the budget, or without one when the plan
    /// has forced swaps.
    pub peak_bytes_planned: Option<i64>,
    /// Decisions taken (recompute, swap).
    pub recompute_decisions: usize,
    /// Swap decisions taken.
    pub swap_decisions: usize,
    /// Values the model placed on the host (an offload policy's `annotate_device_placement`),
    /// unless the plan was compiled to ignore placements.
    pub host_placed_values: usize,
    /// Their bytes at this binding.
    pub host_placed_bytes: i64,
    /// Swaps taken because the plan must (the placed values' windows; among `swap_decisions`).
    pub forced_swaps: usize,
    /// The decisions, in the order the runtime took them (empty without a budget).
    pub decisions: Vec<ebb_plan::finalize::DecisionSummary>,
    /// FLOPs spent on recomputation.
    pub recompute_flops: i64,
    /// The device profile the decisions were priced on (serialized as its name).
    pub device: DeviceId,
    /// Modelled step time without decisions on that device, µs (roofline, `ebb_plan::cost`).
    pub step_us_modelled: f64,
    /// Modelled time the decisions add, µs (recompute + exposed transfer).
    pub added_us: f64,
    /// `added_us / step_us_modelled` (0 for an empty step).
    pub added_fraction: f64,
    /// Modelled recompute time, µs.
    pub recompute_us: f64,
    /// Modelled transfer time of swaps not hidden behind compute, µs.
    pub exposed_transfer_us: f64,
    /// FLOPs of the step.
    pub step_flops: i64,
    /// Bytes offloaded to host.
    pub swap_bytes: i64,
    /// Arena size in bytes (with a budget).
    pub arena_bytes: Option<i64>,
    /// Time to finalize the plan at this binding, µs, the plan variant prepared (what a
    /// runtime pays at a shape it has not seen).
    pub finalize_us: f64,
    /// Time to prepare the plan variant chosen at this binding, µs (once per plan variant:
    /// see `ebb_plan::finalize::Finalizer`).
    pub prepare_us: f64,
    /// Bytes of the donated inputs (their buffers are reused after their last read).
    pub donated_bytes: i64,
    /// `fusion` ops of the planned graph (0 without fusion).
    pub fusion_groups: usize,
    /// Values that exist in memory: inputs and op results of the planned graph (a fusion
    /// group's internal values are not counted).
    pub materialized_values: usize,
    /// What is resident at the scheduled peak, by class, with the largest values there.
    pub peak: memory::Breakdown,
}

/// Evaluates a plan at `b` (and finalizes it under `budget`), priced on the plan's device
/// ([`Pricing::for_plan`]).
///
/// # Errors
/// As [`plan_report_finalized`].
pub fn plan_report(plan: &Plan, b: &Bindings, budget: Option<Budget>) -> Result<PlanReport> {
    Ok(plan_report_finalized(plan, b, budget, &Pricing::for_plan(plan))?.0)
}

/// [`plan_report`], with the finalized plan it reports on (arena layout, decisions, the bytes
/// swapped to the host).
///
/// # Errors
/// Bindings that name symbols the plan does not have or break its facts or assertions; sizes
/// that overflow at `b`; an infeasible budget; an invalid embedded graph.
pub fn plan_report_finalized(
    plan: &Plan,
    b: &Bindings,
    budget: Option<Budget>,
    pricing: &Pricing,
) -> Result<(PlanReport, ebb_plan::finalize::ConcretePlan)> {
    let g = plan_graph(plan)?;
    check_plan_bindings(plan, b)?;
    report_at(plan, &g, b, budget, pricing)
}

/// [`plan_report_finalized`], then [`prove_at`] on the same parsed graph: what `ebb plan`,
/// `ebb run` and `bench`'s budget rows report is proven by the independent checker.
///
/// # Errors
/// As [`plan_report_finalized`] and [`prove_at`].
pub fn plan_report_proven(
    plan: &Plan,
    b: &Bindings,
    budget: Option<Budget>,
    pricing: &Pricing,
) -> Result<(PlanReport, ebb_plan::finalize::ConcretePlan)> {
    plan_report_proven_on(plan, &plan_graph(plan)?, b, budget, pricing)
}

/// [`plan_report_proven`] on the plan's graph `g`, already parsed ([`plan_graph`], or the graph
/// [`crate::api::read_plan_and_graph`] verified): for callers that report on one plan at many
/// bindings.
///
/// # Errors
/// As [`plan_report_proven`].
pub fn plan_report_proven_on(
    plan: &Plan,
    g: &Graph,
    b: &Bindings,
    budget: Option<Budget>,
    pricing: &Pricing,
) -> Result<(PlanReport, ebb_plan::finalize::ConcretePlan)> {
    check_plan_bindings(plan, b)?;
    // The checker derives every variant at `b` (about a third of a cold `ebb plan`'s work on
    // the 24-layer GPT-2) on a thread of its own while this one finalizes and reports; its
    // errors come after the report's, as when the two ran one after the other.
    let (reported, checked) = std::thread::scope(|s| {
        let checking = std::thread::Builder::new()
            .name("ebb-checker".into())
            .spawn_scoped(s, || ebb_passes::plan::check_variants_each(g, plan, b));
        let reported = report_at(plan, g, b, budget, pricing);
        let checked = match checking {
            Ok(h) => h
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            // No thread to be had: check here.
            Err(_) => ebb_passes::plan::check_variants_each(g, plan, b),
        };
        (reported, checked)
    });
    let (report, c) = reported?;
    let checkers = checked?;
    // `check_variants_each` returns one checker per variant; `c.variant` is one of them.
    let checker = checkers
        .get(c.variant)
        .context("the finalized plan names a schedule variant the plan does not have")?;
    prove_with(checker, &c)?;
    Ok((report, c))
}

/// Checks bindings against a plan: every symbol is the plan's, and its facts and shape
/// assertions hold ([`ebb_plan::finalize::check_bindings`]).
///
/// # Errors
/// An unknown symbol; a violated fact or assertion (with the producer's message).
pub fn check_plan_bindings(plan: &Plan, b: &Bindings) -> Result<()> {
    plan.symbols.check_known(b)?;
    ebb_plan::finalize::check_bindings(plan, b)?;
    Ok(())
}

/// Peak bytes of `g` executed in program order at `b`.
pub(crate) fn program_order_peak(g: &Graph, b: &Bindings) -> Result<i64> {
    program_order_peak_of(&memory::GraphMemory::new(g), g, b)
}

/// [`program_order_peak`] on `g`'s memory view `m`, already built.
fn program_order_peak_of(m: &memory::GraphMemory, g: &Graph, b: &Bindings) -> Result<i64> {
    Ok(m.liveness(&memory::program_order(g))
        .peak(b)
        .map_err(|e| size_error(g, b, e))?
        .0)
}

/// The bytes of `budget` at `b` for `plan` (whose graph is `g`): bytes as given, `50%` of the
/// program-order peak at `b`, or `50%scheduled` of the plan's scheduled peak at `b` (its best
/// schedule variant's, without decisions) — what `ebb plan`/`run --budget`, `Plan.finalize`
/// and `ebb.Runtime(budget=…)` resolve a budget to at each shape.
///
/// # Errors
/// Sizes that do not evaluate at `b`.
pub fn resolve_budget(plan: &Plan, g: &Graph, b: &Bindings, budget: Budget) -> Result<i64> {
    crate::BudgetResolver::new(budget).resolve(plan, g, b)
}

/// [`resolve_budget`] with the program-order peak `po` at `b` known.
pub(crate) fn resolve_with(
    plan: &Plan,
    g: &Graph,
    b: &Bindings,
    budget: Budget,
    po: i64,
) -> Result<i64> {
    Ok(match budget {
        Budget::FractionOfScheduled(_) => {
            let scheduled = plan.best_variant(b).map_err(|e| size_error(g, b, e))?.1;
            budget.resolve(po, scheduled)
        }
        x => x.resolve(po, 0),
    })
}

/// Why the schedule of finalized plan `c` peaks above program order (`po` bytes) or above the
/// best variant (`best`: its index and peak), if it does ([`PlanReport::schedule_note`]).
/// When finalize kept a variant other than the best under the budget, the best variant is
/// finalized alone under the same options to say why: it cannot meet the budget, its arena
/// does not fit it, or its decisions add more time.
fn schedule_note(
    plan: &Plan,
    b: &Bindings,
    opts: &ebb_plan::finalize::FinalizeOptions,
    c: &ebb_plan::finalize::ConcretePlan,
    po: i64,
    best: (usize, i64),
) -> Option<String> {
    let mib = |x: i64| format!("{:.1} MiB", x as f64 / 1048576.0);
    let n = plan.alternatives.len() + 1;
    if c.variant != best.0 && c.peak_bytes_scheduled > best.1 {
        let mut alone = plan.variant(best.0).unwrap_or(plan).clone();
        alone.alternatives.clear();
        let why = match ebb_plan::finalize::finalize(&alone, b, opts) {
            Err(ebb_plan::finalize::FinalizeError::Infeasible { smallest, .. }) => format!(
                "variant {} (the lowest scheduled peak here, {}) cannot meet the budget (its \
                 smallest feasible budget is {})",
                best.0,
                mib(best.1),
                mib(smallest)
            ),
            Ok(r) if opts.offsets && r.arena.arena_bytes > opts.budget.unwrap_or(i64::MAX) => {
                format!(
                    "variant {} (the lowest scheduled peak here, {}) lays out an arena of {}, \
                     above the budget",
                    best.0,
                    mib(best.1),
                    mib(r.arena.arena_bytes)
                )
            }
            Ok(r) => format!(
                "its decisions add {:.3} us (planned peak {}), variant {}'s (the lowest \
                 scheduled peak here, {}) add {:.3} us (planned peak {}): finalize keeps the \
                 variant whose decisions add the least time, then the lower planned peak",
                c.overhead_us,
                mib(c.peak_bytes_planned),
                best.0,
                mib(best.1),
                r.overhead_us,
                mib(r.peak_bytes_planned)
            ),
            Err(e) => format!("variant {} could not be finalized alone: {e}", best.0),
        };
        return Some(format!(
            "schedule variant {} of {n} kept under the budget: {why}",
            c.variant
        ));
    }
    (c.peak_bytes_scheduled > po).then(|| {
        format!(
            "{} at this binding: the plan's schedules were chosen at other shapes (`ebb \
             compile --sweep` with this binding keeps the schedule no worse than program order \
             here)",
            if n > 1 {
                format!("all {n} schedule variants peak above program order")
            } else {
                "the plan's schedule peaks above program order".to_string()
            }
        )
    })
}

/// [`plan_report_finalized`] on the plan's graph `g`, already parsed, its bindings `b` already
/// checked ([`check_plan_bindings`]).
fn report_at(
    plan: &Plan,
    g: &Graph,
    b: &Bindings,
    budget: Option<Budget>,
    pricing: &Pricing,
) -> Result<(PlanReport, ebb_plan::finalize::ConcretePlan)> {
    // One view of the graph for the program-order peak, the lower bound and the scheduled
    // breakdown, its region transients the plan's (verified with the plan; the checker proves
    // them at `b` in [`prove_at`]).
    let mem = memory::GraphMemory::of_plan(g, plan).unwrap_or_else(|| memory::GraphMemory::new(g));
    let po = program_order_peak_of(&mem, g, b)?;
    let given = budget;
    let budget = budget
        .map(|x| resolve_with(plan, g, b, x, po))
        .transpose()?;
    let lower = mem.lower_bound(b).map_err(|e| size_error(g, b, e))?;
    let opts = pricing.finalize_options(budget, true);
    // Prepared first, as a runtime does once per plan: `finalize_us` is what a new shape
    // costs.
    let finalizer = ebb_plan::finalize::Finalizer::new(plan);
    let t = Instant::now();
    finalizer.prepare(b)?;
    let prepare_us = t.elapsed().as_secs_f64() * 1e6;
    let t = Instant::now();
    let c = finalizer.finalize(b, &opts)?;
    let finalize_us = t.elapsed().as_secs_f64() * 1e6;
    let chosen = plan.variant(c.variant).unwrap_or(plan);
    let schedule: Schedule = chosen
        .schedule
        .iter()
        .filter_map(|pos| g.order().get(pos.index()).copied())
        .collect();
    let peak = mem
        .liveness(&schedule)
        .peak_breakdown(g, b)
        .map_err(|e| size_error(g, b, e))?;
    let mut donated_bytes = 0i64;
    // Each distinct type's bytes evaluated once (a step's inputs repeat a few types per layer).
    let mut bytes_of: HashMap<&ebb_ir::TensorType, i64> = HashMap::new();
    for &id in g.inputs() {
        if let (Some(_), Some(t)) = (g.aliasing_output(id), g.node(id).outputs.first()) {
            let x = match bytes_of.get(t) {
                Some(&x) => x,
                None => {
                    let x = t.size_bytes().eval(b).map_err(|e| size_error(g, b, e))?;
                    *bytes_of.entry(t).or_insert(x)
                }
            };
            donated_bytes = donated_bytes.saturating_add(x);
        }
    }
    let best = plan.best_variant(b).map_err(|e| size_error(g, b, e))?;
    let variant = plan.variant(c.variant).unwrap_or(plan);
    let report = PlanReport {
        bind: b.iter().map(|(s, v)| (s.name().to_string(), *v)).collect(),
        peak_bytes_program_order: po,
        peak_bytes_scheduled: c.peak_bytes_scheduled,
        schedule_variant: c.variant,
        schedule_variants: plan.alternatives.len() + 1,
        peak_bytes_scheduled_best: best.1,
        schedule_note: schedule_note(plan, b, &opts, &c, po, best),
        lower_bound_bytes: lower,
        candidates: plan.candidates.len(),
        budget_bytes: budget,
        budget_fraction: match given {
            Some(Budget::Fraction(f) | Budget::FractionOfScheduled(f)) => Some(f),
            _ => None,
        },
        budget_fraction_of: match given {
            Some(Budget::Fraction(_)) => Some("peak_bytes_program_order"),
            Some(Budget::FractionOfScheduled(_)) => Some("peak_bytes_scheduled"),
            _ => None,
        },
        peak_bytes_planned: (budget.is_some() || !c.decisions.is_empty())
            .then_some(c.peak_bytes_planned),
        recompute_decisions: c
            .decisions
            .iter()
            .filter(|d| d.kind == DecisionKind::Recompute)
            .count(),
        swap_decisions: c
            .decisions
            .iter()
            .filter(|d| d.kind == DecisionKind::Swap)
            .count(),
        host_placed_values: variant.host_placed.len(),
        host_placed_bytes: variant
            .host_placed
            .iter()
            .filter_map(|v| c.value_bytes.get(v.index()))
            .sum(),
        forced_swaps: c
            .decisions
            .iter()
            .filter(|d| variant.forced_swaps.contains(&d.candidate))
            .count(),
        decisions: c.decision_summaries(plan),
        recompute_flops: c.recompute_flops,
        device: c.device.clone(),
        step_us_modelled: c.step_us,
        added_us: c.overhead_us,
        added_fraction: if c.step_us > 0.0 {
            c.overhead_us / c.step_us
        } else {
            0.0
        },
        recompute_us: c.recompute_us,
        exposed_transfer_us: c.exposed_transfer_us,
        step_flops: c.step_flops,
        swap_bytes: c.swap_bytes,
        arena_bytes: budget.map(|_| c.arena.arena_bytes),
        finalize_us,
        prepare_us,
        donated_bytes,
        fusion_groups: fusion_groups(g),
        materialized_values: g.order().iter().map(|&id| g.node(id).outputs.len()).sum(),
        peak,
    };
    Ok((report, c))
}
