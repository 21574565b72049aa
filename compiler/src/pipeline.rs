//! The compile pipeline, every stage a pass of one [`PassManager`] (per-pass timing,
//! verification between passes, `stop_after`, `print_after`): canonicalize (unrolling of
//! constant-trip-count loops, fold, slice forwarding, CSE, DCE to a fixed point) → donation (which inputs' buffers the step may reuse) → optional e-graph
//! rewrites → optional loop fusion → op scheduling with symbolic sizes (never worse
//! than program order on the sweep) → remat/swap candidates and the [`Plan`], which embeds the
//! planned graph as textual IR so that a plan file is self-contained (`ebb plan`, `ebb run`).
//!
//! With `bind`, every symbol is replaced by its value before planning: the "precise-shape"
//! baseline that the symbolic plan is compared against.

use anyhow::{bail, Context, Result};
use ebb_ir::{Bindings, BindingsExt, DimExpr, Graph, Symbol};
use ebb_passes::canon::unroll::{UnrollReport, MAX_TRIP_COUNT};
use ebb_passes::canon::{Cse, Dce, Fold, ForwardSlices, Unroll};
use ebb_passes::donate::{DonatePass, DonatePolicy, DonationReport};
use ebb_passes::fuse::{FusePass, FusionReport};
use ebb_passes::manager::{PassContext, PassDump, PassManager, PassReport, StopAfter};
use ebb_passes::memory::{self, Schedule};
use ebb_passes::plan::{PlanOptions, PlanPass};
use ebb_passes::rewrite::{Limits, RewritePass, RewriteReport, RuleGroup};
use ebb_passes::schedule::{ScheduleOptions, SchedulePass, ScheduleReport, Scheduled};
use ebb_plan::device::DeviceProfile;
use ebb_plan::finalize::FinalizeOptions;
use ebb_plan::format::{DecisionKind, Plan};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Instant;

pub use crate::size::{parse_budget, parse_bytes, Budget};

/// Options of [`compile`].
#[derive(Clone, Debug, Default)]
pub struct CompileOptions {
    /// Fix the symbols to these values before planning (precise-shape baseline).
    pub bind: Option<Bindings>,
    /// e-graph rule groups to run (none by default).
    pub rewrite_groups: Vec<RuleGroup>,
    /// Extra bindings the scheduler must not be worse than program order at (besides the
    /// scope's representative bindings).
    pub sweep: Vec<Bindings>,
    /// Stop after this many pass runs, or after the pass or group with this name
    /// (`canonicalize`, `unroll`, `fold`, `forward_slices`, `cse`, `dce`, `rewrite`, `schedule`); see [`run_pipeline`].
    pub stop_after: Option<StopAfter>,
    /// Record the graph after these passes (`unroll`, `fold`, `forward_slices`, `cse`, `dce`,
    /// `donate`, `rewrite`, `fuse`, `schedule`, `plan`, or `all`) into [`Compiled::dumps`].
    pub print_after: Vec<String>,
    /// Schedules kept in a symbolic plan for the runtime to choose from (default 4).
    pub max_variants: Option<usize>,
    /// Run the loop fusion pass (`ebb_passes::fuse`) before scheduling (off by default).
    pub fusion: bool,
    /// Keep `while` loops with a constant trip count as loops instead of unrolling them
    /// (`ebb_passes::canon::unroll`; unrolled by default).
    pub keep_loops: bool,
    /// Which inputs are donated (`ebb_passes::donate`; default: as imported).
    pub donate: DonatePolicy,
    /// The device recorded in the plan ([`Plan::device`]) for the runtime to price decisions
    /// with (`None`: the runtime's default).
    pub device: Option<DeviceProfile>,
}

/// What each pass did and how long it took.
#[derive(Debug, Serialize)]
pub struct CompileReport {
    /// Every pass run of the pipeline (groups `canonicalize`, `rewrite`, `schedule`, `plan`)
    /// with its changes, op counts and timing.
    pub passes: PassReport,
    /// e-graph rewrite report, when groups ran.
    pub rewrite: Option<RewriteReport>,
    /// Fusion report (groups and the reasons for pairs not fused), when fusion ran.
    pub fusion: Option<FusionReport>,
    /// The donated inputs (absent when the pipeline stopped before the `donate` pass).
    pub donation: Option<DonationReport>,
    /// The `while` loops unrolled and kept (absent when no loop was seen).
    pub unroll: Option<UnrollReport>,
    /// Scheduler report (absent when the pipeline stopped before scheduling).
    pub schedule: Option<ScheduleReport>,
    /// Number of remat/swap candidates (0 when the pipeline stopped before the plan).
    pub candidates: usize,
    /// Ops of the planned graph (inputs excluded).
    pub ops: usize,
    /// Wall time of each group in ms (passes and verification).
    pub stage_ms: BTreeMap<String, f64>,
}

/// The planned graph, its schedule, the plan and the report.
pub struct Compiled {
    /// The graph after canonicalization and rewrites (the plan's positions refer to it).
    pub graph: Graph,
    /// The schedule chosen.
    pub schedule: Schedule,
    /// The graph after the passes named by [`CompileOptions::print_after`], in order.
    pub dumps: Vec<PassDump>,
    /// The plan (embeds `graph` as textual IR in `graph_ir`).
    pub plan: Plan,
    /// Pass reports.
    pub report: CompileReport,
}

/// The state of the pipeline where it ended ([`run_pipeline`]): the graph, the analysis
/// results that were produced, the dumps and the report.
pub struct Staged {
    /// The graph after the last pass that ran.
    pub graph: Graph,
    /// The schedule and its variants, when the `schedule` pass ran.
    pub scheduled: Option<Scheduled>,
    /// The plan, when the `plan` pass ran.
    pub plan: Option<Plan>,
    /// The graph after the passes named by [`CompileOptions::print_after`], in order.
    pub dumps: Vec<PassDump>,
    /// Pass reports.
    pub report: CompileReport,
}

/// Parses `B=8,S=512` into bindings (symbols by name).
pub fn parse_bindings(s: &str) -> Result<Bindings> {
    Ok(<Bindings as BindingsExt>::parse(s)?)
}

/// Replaces every bound symbol of `g` by its value (types, attributes, assertions), then
/// verifies the bound graph.
///
/// # Errors
/// A dimension whose value overflows 64-bit integers (naming it), or a bound graph that fails
/// verification (a size that overflows, a shape that no longer holds).
pub fn bind_graph(g: &mut Graph, b: &Bindings) -> Result<()> {
    let map: BTreeMap<Symbol, DimExpr> = b
        .iter()
        .map(|(s, v)| (s.clone(), DimExpr::constant(*v)))
        .collect();
    let failed: std::cell::RefCell<Option<String>> = Default::default();
    g.map_dims(&|d: &DimExpr| {
        if d.symbols().is_empty() {
            return d.clone();
        }
        d.try_substitute(&map).unwrap_or_else(|e| {
            failed
                .borrow_mut()
                .get_or_insert_with(|| format!("dimension `{d}`: {e}"));
            d.clone()
        })
    });
    if let Some(msg) = failed.into_inner() {
        anyhow::bail!("at {}: {msg}", show(b));
    }
    ebb_ir::verify::verify(g).with_context(|| format!("the graph bound at {}", show(b)))?;
    Ok(())
}

/// `B=8,S=512`: bindings as the CLI spells them.
pub fn show(b: &Bindings) -> String {
    b.to_text()
}

/// Checks that every size of `g` evaluates at `b`: `b` names only symbols of `g`'s scope,
/// keeps its facts, binds (directly or through the scope's equalities) every symbol the sizes
/// use, and no size or sum of sizes overflows.
///
/// # Errors
/// The first of those that fails, naming the symbol or the fact.
pub fn check_evaluable(g: &Graph, b: &Bindings) -> Result<()> {
    g.scope.check_known(b)?;
    g.scope.check(b)?;
    let full = g.scope.complete(b)?;
    memory::liveness(g, &memory::program_order(g))
        .peak(&full)
        .map_err(|e| size_error(g, &full, e))?;
    Ok(())
}

/// A readable error for sizes of `g` that do not evaluate at `b`: for an overflow, the first
/// value whose size overflows (its op, type and size expression) or else the sum of sizes.
fn size_error(g: &Graph, b: &Bindings, e: ebb_ir::dim::DimError) -> anyhow::Error {
    if e != ebb_ir::dim::DimError::Overflow {
        return e.into();
    }
    for (i, &id) in g.order().iter().enumerate() {
        let n = g.node(id);
        for (k, t) in n.outputs.iter().enumerate() {
            let Ok(size) = t.checked_size_bytes() else {
                continue;
            };
            if size.eval(b) == Err(ebb_ir::dim::DimError::Overflow) {
                return anyhow::anyhow!(
                    "at {}, the size of result {k} of op #{i} `{}` ({t}: {size} bytes) overflows \
                     64-bit integers",
                    show(b),
                    n.kind().name()
                );
            }
        }
    }
    anyhow::anyhow!(
        "at {}, the bytes resident at once overflow 64-bit integers",
        show(b)
    )
}

/// Names `--stop-after` accepts besides a run count: the groups and passes of the pipeline.
pub const STOP_POINTS: &[&str] = &[
    "canonicalize",
    "unroll",
    "fold",
    "forward_slices",
    "cse",
    "dce",
    "donate",
    "rewrite",
    "fuse",
    "schedule",
    "plan",
];

/// The pass manager of the pipeline (see the module docs): groups `canonicalize` (unroll,
/// fold, forward_slices, CSE, DCE to a fixed point, at most 4 sweeps), `donate` ([`CompileOptions::donate`]), `rewrite` (only with rule groups), `fuse` (only
/// with [`CompileOptions::fusion`]), `schedule` and `plan`.
pub fn pass_manager(opts: &CompileOptions) -> PassManager {
    let mut sweep = opts.sweep.clone();
    if let Some(b) = &opts.bind {
        sweep.push(b.clone());
    }
    let mut pm = PassManager::new()
        .group("canonicalize")
        .add_pass(Unroll {
            max_trip_count: if opts.keep_loops { 0 } else { MAX_TRIP_COUNT },
            ..Unroll::default()
        })
        .add_pass(Fold::default())
        .add_pass(ForwardSlices)
        .add_pass(Cse)
        .add_pass(Dce)
        .fixed_point(4)
        .group("donate")
        .add_pass(DonatePass {
            policy: opts.donate.clone(),
        });
    if !opts.rewrite_groups.is_empty() {
        pm = pm.group("rewrite").add_pass(RewritePass {
            groups: opts.rewrite_groups.clone(),
            limits: Limits::default(),
        });
    }
    if opts.fusion {
        pm = pm.group("fuse").add_pass(FusePass);
    }
    pm.group("schedule")
        .add_pass(SchedulePass {
            opts: ScheduleOptions {
                bindings: sweep.clone(),
                ..ScheduleOptions::default()
            },
            sweep,
            // Without --bind, keep other good schedules too: the runtime picks per shape.
            max_variants: if opts.bind.is_some() {
                1
            } else {
                opts.max_variants.unwrap_or(4)
            },
            apply: false,
        })
        .group("plan")
        .add_pass(PlanPass {
            opts: PlanOptions {
                bind: opts.bind.clone(),
                ..PlanOptions::default()
            },
        })
        .stop_at(opts.stop_after.clone())
        .print_after(&opts.print_after)
}

/// Runs the pipeline's [`pass_manager`] on an imported graph, after binding symbols with
/// [`CompileOptions::bind`], up to [`CompileOptions::stop_after`].
///
/// Errors: a `--bind` outside the graph's facts; a pass that fails or breaks the graph
/// (named, with its run number); an unknown `stop_after` name.
pub fn run_pipeline(mut g: Graph, opts: &CompileOptions) -> Result<Staged> {
    if let Some(StopAfter::Pass(name)) = &opts.stop_after {
        if !STOP_POINTS.contains(&name.as_str()) {
            anyhow::bail!(
                "--stop-after: unknown pass `{name}` (a run count or one of: {})",
                STOP_POINTS.join(", ")
            );
        }
    }
    for (i, b) in opts.sweep.iter().enumerate() {
        check_evaluable(&g, b).with_context(|| format!("--sweep entry {} `{}`", i + 1, show(b)))?;
    }
    if let Some(b) = &opts.bind {
        g.scope.check_known(b).context("--bind")?;
        g.scope.check(b).context("--bind")?;
        bind_graph(&mut g, b).context("--bind")?;
    }
    let mut cx = PassContext::new();
    let mut passes = pass_manager(opts).run_in(&mut g, &mut cx)?;
    let dumps = std::mem::take(&mut passes.dumps);
    let stage_ms = passes
        .groups
        .iter()
        .map(|r| (r.group.to_string(), r.time_us as f64 / 1e3))
        .collect();
    let scheduled = cx.take::<Scheduled>();
    let mut plan = cx.take::<Plan>();
    if let Some(p) = &mut plan {
        p.device.clone_from(&opts.device);
    }
    let report = CompileReport {
        rewrite: cx.take::<RewriteReport>(),
        fusion: cx.take::<FusionReport>(),
        donation: cx.take::<DonationReport>(),
        unroll: cx
            .take::<UnrollReport>()
            .filter(|r| !r.unrolled.is_empty() || !r.kept.is_empty()),
        schedule: scheduled.as_ref().map(|s| s.report.clone()),
        candidates: plan.as_ref().map_or(0, |p| p.candidates.len()),
        ops: g.op_count(),
        stage_ms,
        passes,
    };
    Ok(Staged {
        graph: g,
        scheduled,
        plan,
        dumps,
        report,
    })
}

/// Runs the whole pipeline on an imported graph (see the module docs and [`run_pipeline`]).
///
/// Errors: those of [`run_pipeline`], and a `stop_after` that stopped it before the plan.
pub fn compile(g: Graph, opts: &CompileOptions) -> Result<Compiled> {
    let s = run_pipeline(g, opts)?;
    let (Some(scheduled), Some(plan)) = (s.scheduled, s.plan) else {
        anyhow::bail!("the pipeline stopped before the plan was built (stop_after)");
    };
    Ok(Compiled {
        graph: s.graph,
        schedule: scheduled.schedule,
        plan,
        report: s.report,
        dumps: s.dumps,
    })
}

/// Reads the planned graph embedded in a plan.
pub fn plan_graph(plan: &Plan) -> Result<Graph> {
    let text = plan
        .graph_ir
        .as_deref()
        .context("the plan does not embed its graph (made by an older ebb?)")?;
    let g = ebb_ir::text::parse(text).map_err(|e| anyhow::anyhow!("embedded graph: {e}"))?;
    ebb_ir::verify::verify(&g).map_err(|e| anyhow::anyhow!("embedded graph: {e}"))?;
    Ok(g)
}

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
    ebb_passes::plan::check_variants_at(g, plan, b)?;
    let variant = plan.variant(c.variant).unwrap_or(plan);
    let proof = ebb_passes::plan::check(g, variant, &c.decisions, b)
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

/// Number of `fusion` ops of `g` (0 without fusion).
pub fn fusion_groups(g: &Graph) -> usize {
    g.order()
        .iter()
        .filter(|&&id| g.node(id).kind() == ebb_ir::OpKind::Fusion)
        .count()
}

/// Memory figures of a plan at one binding, the `ebb plan` report.
#[derive(Debug, Serialize)]
pub struct PlanReport {
    /// The bindings.
    pub bind: BTreeMap<String, i64>,
    /// Peak bytes executing the planned graph in program order.
    pub peak_bytes_program_order: i64,
    /// Peak bytes of the plan's schedule (no evictions).
    pub peak_bytes_scheduled: i64,
    /// Lower bound: persistent bytes + the largest single op's operands and results.
    pub lower_bound_bytes: i64,
    /// Remat/swap candidates in the plan.
    pub candidates: usize,
    /// The budget, if one was given.
    pub budget_bytes: Option<i64>,
    /// Peak bytes with the runtime's decisions under the budget.
    pub peak_bytes_planned: Option<i64>,
    /// Decisions taken (recompute, swap).
    pub recompute_decisions: usize,
    /// Swap decisions taken.
    pub swap_decisions: usize,
    /// The decisions, in the order the runtime took them (empty without a budget).
    pub decisions: Vec<ebb_plan::finalize::DecisionSummary>,
    /// FLOPs spent on recomputation.
    pub recompute_flops: i64,
    /// The device profile the decisions were priced on.
    pub device: String,
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

/// How decisions are priced and which kinds may be chosen (`--device`, `--kinds`).
#[derive(Clone, Debug)]
pub struct Pricing {
    /// The device whose roofline times price recompute and swap.
    pub device: DeviceProfile,
    /// Decision kinds the runtime may choose.
    pub kinds: Vec<DecisionKind>,
}

impl Pricing {
    /// The plan's device ([`Plan::device`], else the library default) with both kinds.
    pub fn for_plan(plan: &Plan) -> Pricing {
        Pricing {
            device: plan.device.clone().unwrap_or_default(),
            kinds: vec![DecisionKind::Recompute, DecisionKind::Swap],
        }
    }

    /// Finalize options with these prices under `budget` bytes.
    pub fn finalize_options(&self, budget: Option<i64>, offsets: bool) -> FinalizeOptions {
        FinalizeOptions {
            budget,
            device: self.device.clone(),
            kinds: self.kinds.clone(),
            offsets,
        }
    }
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
    report_at(plan, &plan_graph(plan)?, b, budget, pricing)
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
    let (report, c) = report_at(plan, g, b, budget, pricing)?;
    prove_at(plan, g, b, &c)?;
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

/// [`plan_report_finalized`] on the plan's graph `g`, already parsed.
fn report_at(
    plan: &Plan,
    g: &Graph,
    b: &Bindings,
    budget: Option<Budget>,
    pricing: &Pricing,
) -> Result<(PlanReport, ebb_plan::finalize::ConcretePlan)> {
    check_plan_bindings(plan, b)?;
    let po = memory::liveness(g, &memory::program_order(g))
        .peak(b)
        .map_err(|e| size_error(g, b, e))?
        .0;
    let budget = match budget {
        Some(x @ Budget::FractionOfScheduled(_)) => {
            let scheduled = plan.best_variant(b).map_err(|e| size_error(g, b, e))?.1;
            Some(x.resolve(po, scheduled))
        }
        Some(x) => Some(x.resolve(po, 0)),
        None => None,
    };
    let lower = memory::lower_bound(g, b).map_err(|e| size_error(g, b, e))?;
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
    let peak = memory::liveness(g, &schedule)
        .peak_breakdown(g, b)
        .map_err(|e| size_error(g, b, e))?;
    let mut donated_bytes = 0i64;
    for &id in g.inputs() {
        if let (Some(_), Some(t)) = (g.aliasing_output(id), g.node(id).outputs.first()) {
            let x = t.size_bytes().eval(b).map_err(|e| size_error(g, b, e))?;
            donated_bytes = donated_bytes.saturating_add(x);
        }
    }
    let report = PlanReport {
        bind: b.iter().map(|(s, v)| (s.name().to_string(), *v)).collect(),
        peak_bytes_program_order: po,
        peak_bytes_scheduled: c.peak_bytes_scheduled,
        lower_bound_bytes: lower,
        candidates: plan.candidates.len(),
        budget_bytes: budget,
        peak_bytes_planned: budget.map(|_| c.peak_bytes_planned),
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
