//! The compile pipeline: canonicalize (fold, CSE, DCE to a fixed point) → optional e-graph
//! rewrites → op scheduling with symbolic sizes (never worse than program order on the sweep)
//! → remat/swap candidates → [`Plan`], which embeds the planned graph as textual IR so that a
//! plan file is self-contained (`ebb plan`, `ebb run`).
//!
//! With `bind`, every symbol is replaced by its value before planning: the "precise-shape"
//! baseline that the symbolic plan is compared against.

use anyhow::{Context, Result};
use ebb_ir::plan::Plan;
use ebb_ir::{Bindings, BindingsExt, DimExpr, Graph, Symbol};
use ebb_passes::manager::{PassDump, PassManager, PassReport};
use ebb_passes::memory::{self, Schedule};
use ebb_passes::plan::{build_plan, PlanOptions};
use ebb_passes::rewrite::{self, Limits, RewriteReport, RuleGroup};
use ebb_passes::schedule::{schedule_checked, schedule_variants, ScheduleOptions, ScheduleReport};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Instant;

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
    /// Stop canonicalization after this many pass runs (bisecting).
    pub stop_after: Option<usize>,
    /// Record the graph after these passes (`fold`, `cse`, `dce`, `rewrite`, or `all`) into
    /// [`Compiled::dumps`].
    pub print_after: Vec<String>,
    /// Schedules kept in a symbolic plan for the runtime to choose from (default 4).
    pub max_variants: Option<usize>,
}

/// What each stage did and how long it took.
#[derive(Debug, Serialize)]
pub struct CompileReport {
    /// Canonicalization report.
    pub canonicalize: PassReport,
    /// e-graph rewrite report, when groups ran.
    pub rewrite: Option<RewriteReport>,
    /// Scheduler report.
    pub schedule: ScheduleReport,
    /// Number of remat/swap candidates.
    pub candidates: usize,
    /// Ops of the planned graph (inputs excluded).
    pub ops: usize,
    /// Wall time of each stage in ms.
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
    /// Stage reports.
    pub report: CompileReport,
}

/// Parses `B=8,S=512` into bindings (symbols by name).
pub fn parse_bindings(s: &str) -> Result<Bindings> {
    Ok(<Bindings as BindingsExt>::parse(s)?)
}

/// Replaces every bound symbol of `g` by its value (types, attributes, assertions).
pub fn bind_graph(g: &mut Graph, b: &Bindings) {
    let map: BTreeMap<Symbol, DimExpr> = b
        .iter()
        .map(|(s, v)| (s.clone(), DimExpr::constant(*v)))
        .collect();
    g.map_dims(&|d: &DimExpr| {
        if d.symbols().is_empty() {
            d.clone()
        } else {
            d.substitute(&map)
        }
    });
}

/// Runs the pipeline on an imported graph (see the module docs).
pub fn compile(mut g: Graph, opts: &CompileOptions) -> Result<Compiled> {
    let mut stage_ms = BTreeMap::new();
    let mut t = Instant::now();
    let mut lap = |name: &str, t: &mut Instant| {
        stage_ms.insert(name.to_string(), t.elapsed().as_secs_f64() * 1e3);
        *t = Instant::now();
    };
    if let Some(b) = &opts.bind {
        g.scope
            .check(b)
            .map_err(|e| anyhow::anyhow!("--bind: {e}"))?;
        bind_graph(&mut g, b);
    }
    let pm = PassManager::from_names(&["fold", "cse", "dce"])?
        .fixed_point(4)
        .stop_after(opts.stop_after)
        .print_after(&opts.print_after);
    let mut canonicalize = pm.run(&mut g).context("canonicalization")?;
    let mut dumps = std::mem::take(&mut canonicalize.dumps);
    lap("canonicalize", &mut t);
    let mut rewrite_report = None;
    if !opts.rewrite_groups.is_empty() {
        let (ng, r) = rewrite::rewrite(&g, &opts.rewrite_groups, &Limits::default())
            .context("e-graph rewrites")?;
        g = ng;
        rewrite_report = Some(r);
        if opts
            .print_after
            .iter()
            .any(|p| p == "rewrite" || p == "all")
        {
            dumps.push(PassDump {
                run: canonicalize.runs.len() + 1,
                pass: "rewrite",
                ir: ebb_ir::text::print(&g),
            });
        }
        lap("rewrite", &mut t);
    }
    let mut sweep = opts.sweep.clone();
    if let Some(b) = &opts.bind {
        sweep.push(b.clone());
    }
    let sopts = ScheduleOptions {
        bindings: sweep.clone(),
        ..ScheduleOptions::default()
    };
    let (schedule, sreport) = schedule_checked(&g, &sopts, &sweep);
    // Without --bind, keep other good schedules too: the runtime picks per shape.
    let variants = if opts.bind.is_some() {
        Vec::new()
    } else {
        schedule_variants(&g, &sopts, opts.max_variants.unwrap_or(4))
    };
    lap("schedule", &mut t);
    let popts = PlanOptions {
        bind: opts.bind.clone(),
        ..PlanOptions::default()
    };
    let mut plan = build_plan(&g, &schedule, &popts).context("building the plan")?;
    for (_, s) in variants.iter().filter(|(_, s)| *s != schedule) {
        plan.alternatives
            .push(build_plan(&g, s, &popts).context("building a plan variant")?);
    }
    plan.graph_ir = Some(ebb_ir::text::print(&g));
    lap("plan", &mut t);
    let report = CompileReport {
        canonicalize,
        rewrite: rewrite_report,
        schedule: sreport,
        candidates: plan.candidates.len(),
        ops: g.op_count(),
        stage_ms,
    };
    Ok(Compiled {
        graph: g,
        schedule,
        plan,
        report,
        dumps,
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
    /// FLOPs spent on recomputation.
    pub recompute_flops: i64,
    /// FLOPs of the step.
    pub step_flops: i64,
    /// Bytes offloaded to host.
    pub swap_bytes: i64,
    /// Arena size in bytes (with a budget).
    pub arena_bytes: Option<i64>,
    /// Time to finalize the plan at this binding, µs.
    pub finalize_us: f64,
}

/// A memory budget: bytes, or a fraction of the program-order peak at the shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    /// Bytes.
    Bytes(i64),
    /// Fraction of `peak_bytes_program_order` (0.5 = half).
    Fraction(f64),
}

/// Parses `2GiB`, `512MiB`, `1.5GB`, `40000` or `50%` (of the program-order peak).
pub fn parse_budget(s: &str) -> Result<Budget> {
    match s.trim().strip_suffix('%') {
        Some(p) => {
            let f: f64 = p
                .trim()
                .parse()
                .with_context(|| format!("`{s}` is not a percentage"))?;
            anyhow::ensure!(f > 0.0, "budget `{s}` must be positive");
            Ok(Budget::Fraction(f / 100.0))
        }
        None => Ok(Budget::Bytes(parse_bytes(s)?)),
    }
}

/// Evaluates a plan at `b` (and finalizes it under `budget`).
pub fn plan_report(plan: &Plan, b: &Bindings, budget: Option<Budget>) -> Result<PlanReport> {
    let g = plan_graph(plan)?;
    ebb_runtime::finalize::check_bindings(plan, b)?;
    let po = memory::liveness(&g, &memory::program_order(&g))
        .peak(b)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .0;
    let budget = budget.map(|x| match x {
        Budget::Bytes(v) => v,
        Budget::Fraction(f) => (po as f64 * f) as i64,
    });
    let lower = memory::lower_bound(&g, b).map_err(|e| anyhow::anyhow!("{e}"))?;
    let opts = ebb_runtime::finalize::FinalizeOptions {
        budget,
        ..Default::default()
    };
    let t = Instant::now();
    let c = ebb_runtime::finalize::finalize(plan, b, &opts)?;
    let finalize_us = t.elapsed().as_secs_f64() * 1e6;
    use ebb_ir::plan::DecisionKind;
    Ok(PlanReport {
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
        recompute_flops: c.recompute_flops,
        step_flops: c.step_flops,
        swap_bytes: c.swap_bytes,
        arena_bytes: budget.map(|_| c.arena.arena_bytes),
        finalize_us,
    })
}

/// Parses a byte size: `2GiB`, `512MiB`, `1.5GB`, `40000` (bytes).
pub fn parse_bytes(s: &str) -> Result<i64> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .trim()
        .parse()
        .with_context(|| format!("`{s}` is not a size (e.g. 2GiB, 512MiB, 1.5GB)"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kib" => 1024.0,
        "mib" => 1048576.0,
        "gib" => 1073741824.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        u => anyhow::bail!("unknown size unit `{u}` in `{s}` (use B, KiB, MiB, GiB, KB, MB, GB)"),
    };
    Ok((v * mult).round() as i64)
}
