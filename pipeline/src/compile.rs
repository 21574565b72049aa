//! The compile pipeline, every stage a pass of one [`PassManager`] (per-pass timing,
//! verification between passes, `stop_after`, `print_after`): canonicalize (unrolling of
//! constant-trip-count loops, fold, slice forwarding, CSE, DCE to a fixed point) → donation (which inputs' buffers the step may reuse) → optional e-graph
//! rewrites → loop-invariant code motion → optional loop fusion → op scheduling with symbolic sizes (never worse
//! than program order on the sweep) → remat/swap candidates and the [`Plan`], which embeds the
//! planned graph as textual IR so that a plan file is self-contained (`ebb plan`, `ebb run`).
//!
//! With `bind`, every symbol is replaced by its value before planning: the "precise-shape"
//! baseline that the symbolic plan is compared against.

use crate::bind::{bind_graph, check_evaluable, show};
use anyhow::{Context, Result};
use ebb_ir::{Bindings, Graph};
use ebb_passes::canon::unroll::{UnrollReport, MAX_TRIP_COUNT};
use ebb_passes::canon::{Cse, Dce, Fold, ForwardSlices, Unroll};
use ebb_passes::donate::{DonatePass, DonatePolicy, DonationReport};
use ebb_passes::dot_accumulate::DotAccumulate;
use ebb_passes::fuse::{FusePass, FusionReport};
use ebb_passes::licm::Licm;
use ebb_passes::manager::{PassContext, PassDump, PassManager, PassReport, StopAfter};
use ebb_passes::memory::Schedule;
use ebb_passes::plan::{PlanOptions, PlanPass};
use ebb_passes::remat::{CandidateOptions, OffloadPolicy};
use ebb_passes::rewrite::{Limits, RewritePass, RewriteReport, RuleGroup};
use ebb_passes::schedule::{ScheduleOptions, SchedulePass, ScheduleReport, Scheduled};
use ebb_passes::PassId;
use ebb_plan::device::DeviceProfile;
use ebb_plan::format::Plan;
use serde::Serialize;
use std::collections::BTreeMap;

/// Options of [`compile`]. Make them with [`CompileOptions::builder`];
/// [`CompileOptions::default`] is the builder's defaults (fusion on, donation `auto`).
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Fix the symbols to these values before planning (precise-shape baseline).
    pub bind: Option<Bindings>,
    /// e-graph rule groups to run (by default `fold_transpose_dot` with fusion, none without).
    pub rewrite_groups: Vec<RuleGroup>,
    /// Extra bindings the scheduler must not be worse than program order at (besides the
    /// scope's representative bindings).
    pub sweep: Vec<Bindings>,
    /// Stop after this many pass runs, or after the pass or group with this name
    /// (`canonicalize`, `unroll`, `fold`, `forward_slices`, `cse`, `dce`, `rewrite`, `schedule`); see [`run_pipeline`].
    pub stop_after: Option<StopAfter>,
    /// Record the graph after these passes (`unroll`, `fold`, `forward_slices`, `cse`, `dce`,
    /// `donate`, `rewrite`, `licm`, `dot_accumulate`, `fuse`, `schedule`, `plan`, or `all`) into [`Compiled::dumps`].
    pub print_after: Vec<String>,
    /// Schedules kept in a symbolic plan for the runtime to choose from (default 4).
    pub max_variants: Option<usize>,
    /// Run the loop fusion pass (`ebb_passes::fuse`) before scheduling (on by default).
    pub fusion: bool,
    /// Keep `while` loops with a constant trip count as loops instead of unrolling them
    /// (`ebb_passes::canon::unroll`; unrolled by default).
    pub keep_loops: bool,
    /// Which inputs are donated (`ebb_passes::donate`; default `auto`: every input with an
    /// output of its type).
    pub donate: DonatePolicy,
    /// The device recorded in the plan ([`Plan::device`]) for the runtime to price decisions
    /// with (`None`: the runtime's default).
    pub device: Option<DeviceProfile>,
    /// What the plan does with values the user placed on the host
    /// (`ebb_passes::remat::OffloadPolicy`; default: the swaps are forced).
    pub offload: OffloadPolicy,
}

/// What each pass did and how long it took.
#[derive(Clone, Debug, Serialize)]
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
#[derive(Clone)]
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

/// The name of the pipeline's group of canonicalization passes.
pub const CANONICALIZE: &str = "canonicalize";

/// The pipeline's passes in the order they run ([`pass_manager`]): the first five are the
/// [`CANONICALIZE`] group; every other pass is a group of its own, named after it.
pub const PIPELINE_PASSES: [PassId; 12] = [
    PassId::Unroll,
    PassId::Fold,
    PassId::ForwardSlices,
    PassId::Cse,
    PassId::Dce,
    PassId::Donate,
    PassId::Rewrite,
    PassId::Licm,
    PassId::DotAccumulate,
    PassId::Fuse,
    PassId::Schedule,
    PassId::Plan,
];

/// Names `--stop-after` accepts besides a run count: the [`CANONICALIZE`] group, then the
/// [`PIPELINE_PASSES`] in order.
pub const STOP_POINTS: [&str; 13] = [
    CANONICALIZE,
    PIPELINE_PASSES[0].name(),
    PIPELINE_PASSES[1].name(),
    PIPELINE_PASSES[2].name(),
    PIPELINE_PASSES[3].name(),
    PIPELINE_PASSES[4].name(),
    PIPELINE_PASSES[5].name(),
    PIPELINE_PASSES[6].name(),
    PIPELINE_PASSES[7].name(),
    PIPELINE_PASSES[8].name(),
    PIPELINE_PASSES[9].name(),
    PIPELINE_PASSES[10].name(),
    PIPELINE_PASSES[11].name(),
];

/// The pass manager of the pipeline (see the module docs): groups `canonicalize` (unroll,
/// fold, forward_slices, CSE, DCE to a fixed point, at most 4 sweeps), `donate` ([`CompileOptions::donate`]), `rewrite` (only with rule groups), `licm`, `dot_accumulate` and `fuse` (only
/// with [`CompileOptions::fusion`]), `schedule` and `plan`.
pub fn pass_manager(opts: &CompileOptions) -> PassManager {
    let mut sweep = opts.sweep.clone();
    if let Some(b) = &opts.bind {
        sweep.push(b.clone());
    }
    let mut pm = PassManager::new()
        .group(CANONICALIZE)
        .add_pass(Unroll {
            max_trip_count: if opts.keep_loops { 0 } else { MAX_TRIP_COUNT },
            ..Unroll::default()
        })
        .add_pass(Fold::default())
        .add_pass(ForwardSlices)
        .add_pass(Cse)
        .add_pass(Dce)
        .fixed_point(4)
        .group(PassId::Donate.name())
        .add_pass(DonatePass {
            policy: opts.donate.clone(),
        });
    if !opts.rewrite_groups.is_empty() {
        pm = pm.group(PassId::Rewrite.name()).add_pass(RewritePass {
            groups: opts.rewrite_groups.clone(),
            limits: Limits::default(),
        });
    }
    pm = pm.group(PassId::Licm.name()).add_pass(Licm);
    if opts.fusion {
        pm = pm
            .group(PassId::DotAccumulate.name())
            .add_pass(DotAccumulate)
            .group(PassId::Fuse.name())
            .add_pass(FusePass);
    }
    pm.group(PassId::Schedule.name())
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
        .group(PassId::Plan.name())
        .add_pass(PlanPass {
            opts: PlanOptions {
                bind: opts.bind.clone(),
                candidates: CandidateOptions {
                    offload: opts.offload,
                    ..CandidateOptions::default()
                },
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

/// Number of `fusion` ops of `g` (0 without fusion).
pub fn fusion_groups(g: &Graph) -> usize {
    g.order()
        .iter()
        .filter(|&&id| g.node(id).kind() == ebb_ir::OpKind::Fusion)
        .count()
}
