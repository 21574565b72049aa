//! The sweep driver of `ebb bench`: compile once, then per shape reuse
//! [`pipeline::plan_report`] on the symbolic plan, compile and report a precise plan, and
//! optionally solve the exact ILP; then ask the XLA peer and record one timeline.

use super::exact;
use super::shapes::{self, ShapeSource};
use super::xla::{self, XlaOutcome};
use super::{
    BenchReport, BudgetRow, ExecRow, Row, Summary, Timeline, XlaInfo, XlaRow, SCHEMA_VERSION,
};
use crate::flags::DeviceFlags;
use anyhow::{Context, Result};
use ebb_import::{self as frontend, Format};
use ebb_ir::{Bindings, Graph, Symbol};
use ebb_pipeline::{self as pipeline, Budget, CompileOptions, Pricing};
use ebb_plan::finalize::{self, FinalizeError};
use ebb_plan::format::Plan;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What to sweep and compare.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// A `.mlir`/`.onnx` module (compiled here) or a plan JSON written by `ebb compile`.
    pub input: PathBuf,
    /// Input format; by default from the extension.
    pub format: Option<Format>,
    /// For an ONNX Runtime optimizer model: the training model whose trainable parameters are
    /// its sequence elements (`--params-from`).
    pub params_from: Option<PathBuf>,
    /// The shapes.
    pub shapes: ShapeSource,
    /// The budget as `pipeline::parse_budget` reads it (`50%`, `2GiB`, bytes).
    pub budget: Option<String>,
    /// Run the XLA peer.
    pub xla: bool,
    /// With `xla`: executions of XLA's step to time per shape (0: memory only).
    pub xla_time_runs: usize,
    /// Executions of Ebb's step to time per shape, after a warm-up (0: none).
    pub exec_runs: usize,
    /// Run the exact solver with this time limit per shape, s.
    pub exact_time_limit_s: Option<f64>,
    /// The shape of the memory timeline (default: the largest shape where the budget is met).
    pub timeline_at: Option<Bindings>,
    /// Pipeline options of every compile of a model file (fusion, donation); `bind` is set
    /// per shape for the precise plans.
    pub compile: CompileOptions,
    /// The device and decision kinds (as `ebb plan --device --kinds`).
    pub device: DeviceFlags,
}

/// Progress reporting (a no-op for tests; `indicatif` in the CLI).
pub trait Progress {
    /// A new phase of `len` steps.
    fn start(&mut self, phase: &str, len: u64);
    /// One step done, with a short message.
    fn tick(&mut self, msg: &str);
    /// The phase is over.
    fn finish(&mut self);
}

impl Progress for () {
    fn start(&mut self, _: &str, _: u64) {}
    fn tick(&mut self, _: &str) {}
    fn finish(&mut self) {}
}

/// The fixture name in the `.json` metadata next to a `.mlir` file.
fn fixture_name(input: &Path) -> Option<String> {
    if input.extension()? != "mlir" {
        return None;
    }
    let text = std::fs::read_to_string(input.with_extension("json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(v.get("name")?.as_str()?.to_string())
}

/// The loaded input: the graph to compile precise plans from, the symbolic plan and its
/// compile time.
fn load(opts: &BenchOptions) -> Result<(Graph, Plan, Option<f64>)> {
    if frontend::is_model_file(&opts.input, opts.format) {
        let (g, _) =
            frontend::import_file_with(&opts.input, opts.format, opts.params_from.as_deref())?;
        let t = Instant::now();
        let c = pipeline::compile(g.clone(), &opts.compile)
            .with_context(|| format!("compiling {}", opts.input.display()))?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        Ok((g, c.plan, Some(ms)))
    } else {
        let (plan, g) = ebb_pipeline::api::read_plan_and_graph(&opts.input)?;
        Ok((g, plan, None))
    }
}

fn names(b: &Bindings) -> BTreeMap<String, i64> {
    b.iter().map(|(s, v)| (s.name().to_string(), *v)).collect()
}

/// Runs the sweep (see the module docs of [`super`]).
///
/// # Errors
/// Import/compile errors, shapes that break the plan's facts, a bad budget, an exact-solver
/// error. An unavailable XLA peer is not an error (see [`XlaInfo::note`]); nor is a budget the
/// greedy cannot meet (the row says `feasible: false`).
pub fn run(opts: &BenchOptions, progress: &mut dyn Progress) -> Result<BenchReport> {
    let budget = opts
        .budget
        .as_deref()
        .map(pipeline::parse_budget)
        .transpose()
        .context("--budget")?;
    if opts.exact_time_limit_s.is_some() {
        exact::available()?;
        anyhow::ensure!(budget.is_some(), "--exact needs --budget");
    }
    let (graph, plan, compile_ms_symbolic) = load(opts)?;
    let mut binds = shapes::resolve(&opts.shapes, &plan.symbols)?;
    let x_symbol = if plan.symbols.contains(&Symbol::new("S")) {
        "S".to_string()
    } else {
        plan.symbols
            .symbols()
            .first()
            .map_or_else(|| "S".into(), |s| s.name().to_string())
    };
    let xs = Symbol::new(&x_symbol);
    binds.sort_by(|a, b| (a.get(&xs), a).cmp(&(b.get(&xs), b)));
    binds.dedup();
    let pricing = opts.device.pricing(&plan)?;

    progress.start("ebb", binds.len() as u64);
    let mut rows = Vec::with_capacity(binds.len());
    for b in &binds {
        let show = shapes::show_bindings(b);
        let sym = pipeline::plan_report(&plan, b, None).with_context(|| format!("at {show}"))?;
        let t = Instant::now();
        let precise = pipeline::compile(
            graph.clone(),
            &CompileOptions {
                bind: Some(b.clone()),
                ..opts.compile.clone()
            },
        )
        .with_context(|| format!("compiling with --bind {show}"))?;
        let compile_ms_precise = t.elapsed().as_secs_f64() * 1e3;
        let pre = pipeline::plan_report(&precise.plan, b, None)
            .with_context(|| format!("precise plan at {show}"))?;
        let budget_row = match budget {
            None => None,
            Some(bu) => Some(budget_row(
                &plan,
                b,
                bu,
                (sym.peak_bytes_program_order, sym.peak_bytes_scheduled),
                &pricing,
            )?),
        };
        let exact_row = match (opts.exact_time_limit_s, &budget_row) {
            (Some(limit), Some(br)) => {
                let fo = pricing.finalize_options(Some(br.budget_bytes), false);
                let greedy = finalize::finalize(&plan, b, &fo).ok();
                let variant = match &greedy {
                    Some(g) => g.variant,
                    None => plan.best_variant(b).map_err(|e| anyhow::anyhow!("{e}"))?.0,
                };
                Some(
                    exact::exact_row(
                        &plan,
                        variant,
                        b,
                        br.budget_bytes,
                        greedy.as_ref(),
                        &pricing,
                        limit,
                    )
                    .with_context(|| format!("exact solve at {show}"))?,
                )
            }
            _ => None,
        };
        rows.push(Row {
            bind: names(b),
            peak_bytes_program_order: sym.peak_bytes_program_order,
            peak_bytes_scheduled: sym.peak_bytes_scheduled,
            peak_bytes_precise: pre.peak_bytes_scheduled,
            symbolic_over_precise: sym.peak_bytes_scheduled as f64
                / pre.peak_bytes_scheduled.max(1) as f64,
            lower_bound_bytes: sym.lower_bound_bytes,
            compile_ms_precise,
            budget: budget_row,
            xla: None,
            exact: exact_row,
            exec: None,
        });
        progress.tick(&show);
    }
    progress.finish();

    let fixture = fixture_name(&opts.input);
    let mut xla_info = XlaInfo {
        requested: opts.xla,
        ..XlaInfo::default()
    };
    if opts.xla {
        let signature = xla::module_signature(&opts.input, &graph);
        let step = xla::PeerStep {
            fixture: fixture.as_deref(),
            module: signature.as_deref().map(|s| (opts.input.as_path(), s)),
        };
        let outcome = if step.fixture.is_none() && step.module.is_none() {
            XlaOutcome::Unavailable(format!(
                "{} is not a StableHLO module and has no fixture metadata (`{}`) naming the \
                 JAX step",
                opts.input.display(),
                opts.input.with_extension("json").display()
            ))
        } else {
            progress.start("xla", binds.len() as u64);
            let o = xla::run_peer(&step, &binds, opts.xla_time_runs, || progress.tick("xla"));
            progress.finish();
            o
        };
        match outcome {
            XlaOutcome::Ok {
                shapes,
                jax_version,
            } => {
                for (row, x) in rows.iter_mut().zip(shapes) {
                    row.xla = Some(XlaRow {
                        ebb_over_xla: row.peak_bytes_scheduled as f64 / x.total_bytes.max(1) as f64,
                        argument_bytes: x.argument_bytes,
                        output_bytes: x.output_bytes,
                        alias_bytes: x.alias_bytes,
                        temp_bytes: x.temp_bytes,
                        total_bytes: x.total_bytes,
                        compile_ms: x.compile_ms,
                        total_bytes_donated: x.donated_total_bytes,
                        ebb_over_xla_donated: x
                            .donated_total_bytes
                            .map(|t| row.peak_bytes_scheduled as f64 / t.max(1) as f64),
                        step_ms: x.step_ms,
                    });
                }
                xla_info.available = true;
                xla_info.jax_version = Some(jax_version);
            }
            XlaOutcome::Unavailable(why) => xla_info.note = Some(why),
        }
    }

    if opts.exec_runs > 0 {
        progress.start("exec", binds.len() as u64);
        for (row, b) in rows.iter_mut().zip(&binds) {
            let exec = time_step(&plan, b, opts.exec_runs)?;
            let xla_ms = row.xla.as_ref().and_then(|x| x.step_ms);
            row.exec = Some(ExecRow {
                ebb_over_xla_step: xla_ms.map(|x| exec.step_ms / x.max(1e-9)),
                ..exec
            });
            progress.tick("exec");
        }
        progress.finish();
    }

    let timeline = timeline(
        &plan,
        &binds,
        &rows,
        opts.timeline_at.as_ref(),
        budget,
        &pricing,
    )?;
    let planned = pipeline::plan_graph(&plan)?;
    Ok(BenchReport {
        schema_version: SCHEMA_VERSION,
        ebb_version: env!("CARGO_PKG_VERSION").to_string(),
        input: opts.input.display().to_string(),
        fixture,
        x_symbol,
        shape_source: opts.shapes.clone(),
        budget: opts.budget.clone(),
        device: pricing.device.clone(),
        kinds: pricing.kinds.clone(),
        compile_ms_symbolic,
        plan_variants: 1 + plan.alternatives.len(),
        candidates: plan.candidates.len(),
        fusion_groups: pipeline::fusion_groups(&planned),
        donated_inputs: ebb_passes::donate::report(&planned).donated.len(),
        xla: xla_info,
        exact_time_limit_s: opts.exact_time_limit_s,
        summary: Summary::of(&rows),
        rows,
        timeline: Some(timeline),
    })
}

/// `plan_report` under the budget; an infeasible budget becomes a row with `feasible: false`.
fn budget_row(
    plan: &Plan,
    b: &Bindings,
    bu: Budget,
    (po, scheduled): (i64, i64),
    pricing: &Pricing,
) -> Result<BudgetRow> {
    let bytes = bu.resolve(po, scheduled);
    // The decisions rest on the candidates' claims: proven at `b` before they are reported.
    match pipeline::plan_report_proven(plan, b, Some(bu), pricing).map(|r| r.0) {
        Ok(r) => Ok(BudgetRow {
            budget_bytes: r.budget_bytes.unwrap_or(bytes),
            feasible: true,
            peak_bytes_planned: r.peak_bytes_planned,
            smallest_feasible_bytes: None,
            arena_bytes: r.arena_bytes,
            recompute_decisions: r.recompute_decisions,
            swap_decisions: r.swap_decisions,
            recompute_flops: r.recompute_flops,
            step_flops: r.step_flops,
            recompute_fraction: r.recompute_flops as f64 / r.step_flops.max(1) as f64,
            swap_bytes: r.swap_bytes,
            step_us_modelled: r.step_us_modelled,
            added_us: r.added_us,
            added_fraction: r.added_fraction,
            recompute_us: r.recompute_us,
            exposed_transfer_us: r.exposed_transfer_us,
            finalize_us: r.finalize_us,
        }),
        Err(e) => match e.downcast_ref::<FinalizeError>() {
            Some(FinalizeError::Infeasible { smallest, .. }) => Ok(BudgetRow {
                budget_bytes: bytes,
                feasible: false,
                peak_bytes_planned: None,
                smallest_feasible_bytes: Some(*smallest),
                arena_bytes: None,
                recompute_decisions: 0,
                swap_decisions: 0,
                recompute_flops: 0,
                step_flops: 0,
                recompute_fraction: 0.0,
                swap_bytes: 0,
                step_us_modelled: 0.0,
                added_us: 0.0,
                added_fraction: 0.0,
                recompute_us: 0.0,
                exposed_transfer_us: 0.0,
                finalize_us: 0.0,
            }),
            _ => Err(e.context(format!("budget at {}", shapes::show_bindings(b)))),
        },
    }
}

/// Resident bytes before/after decisions at `at`, or at the largest shape whose budget is met
/// (the largest shape when none is, or without a budget).
fn timeline(
    plan: &Plan,
    binds: &[Bindings],
    rows: &[Row],
    at: Option<&Bindings>,
    budget: Option<Budget>,
    pricing: &Pricing,
) -> Result<Timeline> {
    let b = match at {
        Some(b) => {
            let b = plan
                .symbols
                .complete(b)
                .map_err(|e| anyhow::anyhow!("--timeline-at: {e}"))?;
            plan.symbols
                .check(&b)
                .map_err(|e| anyhow::anyhow!("--timeline-at: {e}"))?;
            b
        }
        None => {
            let i = rows
                .iter()
                .rposition(|r| r.budget.as_ref().is_some_and(|b| b.feasible))
                .unwrap_or(rows.len().saturating_sub(1));
            binds.get(i).cloned().unwrap_or_default()
        }
    };
    let show = shapes::show_bindings(&b);
    let fo = |budget| pricing.finalize_options(budget, false);
    let budget = match budget {
        None => None,
        Some(bu) => {
            let r = pipeline::plan_report(plan, &b, None)
                .with_context(|| format!("timeline at {show}"))?;
            Some(bu.resolve(r.peak_bytes_program_order, r.peak_bytes_scheduled))
        }
    };
    let after = budget.and_then(|x| finalize::finalize(plan, &b, &fo(Some(x))).ok());
    // "Before" is the schedule "after" finalized (the best one without a budget may differ).
    let variant = match &after {
        Some(c) => c.variant,
        None => {
            finalize::finalize(plan, &b, &fo(None))
                .with_context(|| format!("timeline at {show}"))?
                .variant
        }
    };
    let before = pipeline::run::resident_of_variant(plan, variant, &b, pricing)
        .with_context(|| format!("timeline at {show}"))?;
    let marks = after
        .as_ref()
        .map(|c| super::decision_marks(plan.variant(c.variant).unwrap_or(plan), &c.decisions))
        .unwrap_or_default();
    Ok(Timeline {
        bind: names(&b),
        before,
        after: after.map(|c| {
            // Regeneration peaks happen before the point's op: show them at the point.
            c.resident
                .iter()
                .zip(&c.regen_peak)
                .map(|(&r, &q)| r.max(q))
                .collect()
        }),
        budget_bytes: budget,
        marks,
    })
}

/// Ebb's step at `b` on seeded random inputs, without a budget: one warm-up step (kernels
/// compiled, plan finalized and cached), then the median wall time of `runs` steps.
fn time_step(plan: &Plan, b: &Bindings, runs: usize) -> Result<ExecRow> {
    let mut rt = ebb_runtime::Runtime::new(plan.clone(), None)?;
    let inputs =
        ebb_runtime::inputs::random_inputs(rt.graph(), b, 0).map_err(anyhow::Error::msg)?;
    let warm = rt.step(b, inputs.clone())?;
    let warm_report = warm.report;
    rt.recycle(warm.outputs);
    let timed = ebb_pipeline::run::repeat_steps(&mut rt, b, &inputs, runs)?;
    Ok(ExecRow {
        step_ms: timed.median_ms.unwrap_or(f64::NAN),
        warmup_ms: warm_report.wall_ms,
        kernels_compiled_warmup: warm_report.kernels_compiled,
        jit_compile_ms_warmup: warm_report.jit_compile_ms,
        kernels_compiled_timed: timed.kernels_compiled,
        ebb_over_xla_step: None,
    })
}
