//! `ebb run`: compile (or load) a plan, finalize it at concrete shapes under a budget, execute
//! the step on the CPU with the plan's evictions, recomputes and swaps, and report what it cost.
//!
//! With `check`, the same inputs also run without decisions; the outputs must be bit-identical
//! (`outputs_match_reference`), and the independent plan checker
//! (`ebb_passes::plan::check`) must prove the decisions with the same peak as measured.

use crate::numerics::{self, NumericsReport};
use crate::{self as pipeline, Budget, PlanReport, Pricing};
use anyhow::{bail, Context, Result};
use ebb_ir::Bindings;
use ebb_plan::format::Plan;
use ebb_runtime::inputs::{npz_inputs, random_inputs};
use ebb_runtime::{ExecStats, Executor, Runtime, StepOutput, Tensor};
use serde::Serialize;
use std::path::PathBuf;

/// Where the step's inputs come from.
#[derive(Clone, Debug, PartialEq)]
pub enum InputSource {
    /// Seeded random tensors (`random:SEED`).
    Random(u64),
    /// The `in_i` arrays of an `.npz` (its `out_i`, if any, are compared too).
    Npz(PathBuf),
}

/// Parses `random:SEED` or a path to an `.npz`.
///
/// # Errors
/// A seed that is not an integer.
pub fn parse_inputs(s: &str) -> Result<InputSource> {
    match s.strip_prefix("random:") {
        Some(seed) => Ok(InputSource::Random(seed.trim().parse().with_context(
            || format!("`{seed}` is not a seed (use random:SEED with an integer)"),
        )?)),
        None if s == "random" => Ok(InputSource::Random(0)),
        None => Ok(InputSource::Npz(PathBuf::from(s))),
    }
}

/// The `ebb run` report: the fields of `ebb plan` plus what the execution measured.
#[derive(Debug, Serialize)]
pub struct RunReport {
    /// The planning figures at these shapes (as `ebb plan --json`).
    #[serde(flatten)]
    pub plan: PlanReport,
    /// Peak device bytes the executor measured (equals `peak_bytes_planned`, or the scheduled
    /// peak without a budget).
    pub measured_peak_bytes: u64,
    /// Largest bytes held in the host pool by swapped values.
    pub host_peak_bytes: u64,
    /// Wall time of the planned execution, ms.
    pub wall_ms: f64,
    /// Part of `wall_ms` spent recomputing and reloading, ms.
    pub regen_ms: f64,
    /// With `--check`: the outputs are bit-identical to a run without decisions.
    pub outputs_match_reference: Option<bool>,
    /// With `--check` and a GPU executor: the largest relative error of the outputs against
    /// the reference executor's (per output, max |x - y| over max |y|; 0 when bit-identical).
    pub reference_max_rel_err: Option<f64>,
    /// With `--check` and a GPU executor: every output is bit-identical or within its
    /// tolerance of the reference executor's ([`crate::device_check`]).
    pub outputs_within_tolerance: Option<bool>,
    /// With `--check` and a GPU executor: the outputs that are not bit-identical to the
    /// reference executor's, with their errors and tolerances.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reference_output_errors: Vec<crate::device_check::OutputError>,
    /// With a GPU executor: the lowered program, the hazard check, what the device measured.
    pub device: Option<ebb_runtime::step::DeviceReport>,
    /// With `--check`: wall time of the run without decisions, ms.
    pub wall_ms_unplanned: Option<f64>,
    /// With `--check`: the peak the independent plan checker proves for the decisions.
    pub checker_peak_bytes: Option<i64>,
    /// With `.npz` inputs holding `out_i`: the largest `max_rel_err` of [`RunReport::numerics`]
    /// (infinite where a shape or a NaN/inf position differs).
    pub npz_max_rel_err: Option<f64>,
    /// With `.npz` inputs holding `out_i`: every output against the framework's
    /// ([`crate::numerics`]: the rule, per output its errors and verdict).
    pub numerics: Option<NumericsReport>,
    /// Number of program points executed.
    pub points: usize,
    /// Which kernels ran the fusion groups.
    pub executor: Executor,
    /// Fusion kernels JIT-compiled during the step (0 when an earlier process on this machine
    /// compiled them all: they come from the on-disk kernel cache).
    pub kernels_compiled: u64,
    /// Fusion kernels whose object code came from the on-disk kernel cache (linked, not
    /// compiled) during the step.
    pub kernels_loaded: u64,
    /// Fusion kernels taken from the process's cache during the step.
    pub kernels_reused: u64,
    /// Part of `wall_ms` spent compiling kernels, ms.
    pub jit_compile_ms: f64,
    /// Part of `wall_ms` spent reading cached kernels and linking them, ms.
    pub jit_load_ms: f64,
    /// Bytes of results written into buffers recycled from freed values instead of new ones
    /// (of the last step with `--repeat`; the first step recycles only within itself).
    pub recycled_bytes: u64,
    /// With `--repeat N`: the median wall time of the N steps after the first, ms, each the
    /// whole `Runtime::step` call a trainer makes (the finalized plan looked up, the program
    /// prepared at the step's shapes, executed, the outputs handed over).
    pub wall_ms_median: Option<f64>,
    /// With `--repeat N`: the median of the same steps' execution alone (`wall_ms` of each),
    /// ms; the rest of [`RunReport::wall_ms_median`] is per-step preparation.
    pub exec_ms_median: Option<f64>,
    /// Bytes of the step's inputs (the caller holds them; the arena's ranges planned for them
    /// are not used).
    pub input_bytes: u64,
    /// The step ran out of one arena of `arena_bytes`, every result at its planned offset.
    pub arena_backed: bool,
    /// Measured in that arena: the highest byte any result used (graph inputs stay where the
    /// caller keeps them, so their planned ranges are not touched).
    pub arena_high_water_bytes: u64,
    /// Measured in that arena: the most bytes held by results at one time.
    pub arena_peak_live_bytes: u64,
    /// Bytes of results their kernels wrote at the planned offset directly (of the last step
    /// with `--repeat`, like the two figures below).
    pub arena_direct_bytes: u64,
    /// Bytes of results copied to their planned offset after their kernel (views, in-place
    /// updates of inputs the caller still shares, interpreted kernels, reloads, recomputes).
    pub arena_copied_bytes: u64,
    /// Bytes of results that could not be placed (a bug if not 0; `--check` fails then).
    pub arena_unplaced_bytes: u64,
    /// Bytes of results written in place into a donated input's buffer and left there
    /// instead of copied to their planned range (0 for a step on inputs the caller still
    /// shares, as the first step of `ebb run` is: those are updated into new buffers; each
    /// `--repeat` step gets inputs of its own).
    pub in_place_kept_bytes: u64,
    /// Op time of the planned run by op kind, largest first (of the last step with
    /// `--repeat`).
    pub time_by_kind: Vec<KindTime>,
    /// The ten ops that took longest in that step, slowest first.
    pub slowest_ops: Vec<OpTime>,
}

/// Wall time of one executed op.
#[derive(Clone, Debug, Serialize)]
pub struct OpTime {
    /// Op kind (`fusion`, `dot_general`, ...).
    pub kind: String,
    /// Its result type (symbolic shape) and source location, when the graph has one.
    pub op: String,
    /// Wall time, ms.
    pub ms: f64,
}

/// Time spent in the ops of one kind.
#[derive(Clone, Debug, Serialize)]
pub struct KindTime {
    /// Op kind (`fusion`, `dot_general`, ...).
    pub kind: String,
    /// Ops executed.
    pub count: usize,
    /// Their total wall time, ms.
    pub ms: f64,
}

/// Options of [`run`].
pub struct RunOptions {
    /// Symbol values.
    pub bind: Bindings,
    /// Device budget.
    pub budget: Option<Budget>,
    /// Inputs.
    pub inputs: InputSource,
    /// Also run without decisions and check bit-identity and the checker.
    pub check: bool,
    /// Host memory the run may use, bytes; `None`: what the process may still allocate
    /// ([`mem_available`]: `MemAvailable`, `ulimit -v`/`-d`, the cgroup's limit; no check
    /// where none can be read). See [`check_host_memory`].
    pub max_host_memory: Option<i64>,
    /// Kernels for the fusion groups of the planned run (the `--check` run without
    /// decisions always uses [`Executor::Reference`]).
    pub executor: Executor,
    /// Steps run again after the first (a warm-up: kernels compiled, plan cached) to time
    /// the step: [`RunReport::wall_ms_median`].
    pub repeat: usize,
    /// Run out of the planned arena ([`Runtime::set_arena_backed`]); `false`: heap buffers.
    pub arena_backed: bool,
    /// Device and decision kinds; `None`: [`Pricing::for_plan`].
    pub pricing: Option<Pricing>,
    /// With `.npz` inputs holding `out_i`: the tolerance on each output's normwise relative
    /// error ([`crate::numerics`]; `--tolerance`, default 2%).
    pub tolerance: f64,
    /// With `check` and a GPU executor: the largest relative error accepted against the
    /// reference executor's outputs where they are not bit-identical.
    pub device_tolerance: f64,
}

impl RunOptions {
    /// `ebb run`'s defaults at bindings `bind`: no budget, seeded random inputs (seed 0), no
    /// check, generated kernels, the arena, the plan's pricing, tolerance 2% (1e-5 against the
    /// reference executor for a GPU executor).
    pub fn new(bind: Bindings) -> RunOptions {
        RunOptions {
            bind,
            budget: None,
            inputs: InputSource::Random(0),
            check: false,
            max_host_memory: None,
            executor: Executor::Jit,
            repeat: 0,
            arena_backed: true,
            pricing: None,
            tolerance: DEFAULT_TOLERANCE,
            device_tolerance: DEFAULT_DEVICE_TOLERANCE,
        }
    }
}

/// The default largest relative error of a GPU executor's outputs against the reference
/// executor's where they are not bit-identical (`--device-tolerance`).
pub const DEFAULT_DEVICE_TOLERANCE: f64 = 1e-5;

/// The default tolerance on an output's normwise relative error against the framework's
/// (`--tolerance`).
pub const DEFAULT_TOLERANCE: f64 = 0.02;

/// Everything `ebb run` prints or plots.
pub struct RunResult {
    /// The report.
    pub report: RunReport,
    /// The planned step's outputs and statistics.
    pub step: StepOutput,
    /// Resident bytes per point without decisions (from the finalized plan).
    pub resident_unplanned: Vec<i64>,
    /// The graph's name (for plot titles).
    pub graph_name: String,
    /// The plan that ran.
    pub plan: Plan,
}

/// What executing a finalized plan holds in host memory at most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryNeed {
    /// The finalized arena (the executor's device memory, simulated on the host).
    pub arena_bytes: i64,
    /// The host pool for swapped values (at most every swapped byte at once).
    pub host_pool_bytes: i64,
    /// With `--check`: the peak of the run without decisions, after the planned one.
    pub reference_bytes: i64,
}

impl MemoryNeed {
    /// The largest number of bytes held at once: the planned run (arena + host pool), or the
    /// reference run after it, whichever is larger.
    pub fn total(&self) -> i64 {
        self.arena_bytes
            .saturating_add(self.host_pool_bytes)
            .max(self.reference_bytes)
    }
}

/// Bytes this process may still allocate on the host, `None` where no limit can be read: the
/// smallest of `MemAvailable`, the `RLIMIT_AS`/`RLIMIT_DATA` headroom and the cgroup's
/// `memory.max` headroom ([`ebb_runtime::host_memory::host_memory_limit`]).
pub fn mem_available() -> Option<i64> {
    ebb_runtime::host_memory::host_memory_limit().map(|l| l.bytes)
}

/// Refuses a run that needs more memory than `limit` (or, without one, than the process may
/// still allocate: [`mem_available`]), naming both figures and the limit's source, before
/// anything large is allocated.
///
/// # Errors
/// The need exceeds the limit.
pub fn check_host_memory(need: &MemoryNeed, limit: Option<i64>) -> Result<()> {
    let (limit, source) = match limit {
        Some(l) => (l, "--max-host-memory".to_string()),
        None => match ebb_runtime::host_memory::host_memory_limit() {
            Some(l) => (l.bytes, l.source),
            None => return Ok(()),
        },
    };
    let mib = |x: i64| x as f64 / 1048576.0;
    if need.total() > limit {
        let reference = if need.reference_bytes > 0 {
            format!(
                "; the --check run without decisions peaks at {} bytes ({:.1} MiB)",
                need.reference_bytes,
                mib(need.reference_bytes)
            )
        } else {
            String::new()
        };
        bail!(
            "not enough host memory to run this step: it needs {} bytes ({:.1} MiB: arena {} + \
             host pool {}{reference}), but only {} bytes ({:.1} MiB) are available ({source}); \
             lower --budget, bind smaller shapes, or raise --max-host-memory",
            need.total(),
            mib(need.total()),
            need.arena_bytes,
            need.host_pool_bytes,
            limit,
            mib(limit)
        );
    }
    Ok(())
}

/// What [`repeat_steps`] measured.
pub struct Repeated {
    /// Median wall time of the whole `Runtime::step` calls, ms (`None` for no step).
    pub median_ms: Option<f64>,
    /// Median of their execution alone (the report's `wall_ms`), ms.
    pub exec_median_ms: Option<f64>,
    /// Kernels the steps compiled.
    pub kernels_compiled: u64,
    /// The last step's statistics and recycled bytes.
    pub last: Option<(ExecStats, u64)>,
}

/// Runs `runs` more steps at `b` on `inputs`, handing each step's outputs back to `rt` for
/// recycling (as a trainer does once it has read them; XLA's timed loop likewise drops each
/// step's outputs). Each step gets its own copy of the inputs, made before its clock starts:
/// a trainer passes the last step's parameters and optimizer state and keeps no other
/// reference to them, so a donated input is updated in its own buffer; a step on tensors the
/// caller still shares would first copy every donated input (copy-on-write), which no trainer
/// pays. Only the last step times its ops ([`Runtime::set_op_timing`]), whose times the
/// report lists.
///
/// # Errors
/// A failed step.
pub fn repeat_steps(
    rt: &mut Runtime,
    b: &Bindings,
    inputs: &[Tensor],
    runs: usize,
) -> Result<Repeated> {
    let (mut times, mut exec) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    let mut kernels_compiled = 0;
    let mut last = None;
    for i in 0..runs {
        // Only the last step's op times are read.
        rt.set_op_timing(i + 1 == runs);
        let ins: Vec<Tensor> = inputs.iter().map(Tensor::deep_copy).collect();
        let t = std::time::Instant::now();
        let s = rt.step(b, ins)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        exec.push(s.report.wall_ms);
        kernels_compiled += s.report.kernels_compiled;
        last = Some((s.stats, s.report.recycled_bytes));
        rt.recycle(s.outputs);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    Ok(Repeated {
        median_ms: median(times),
        exec_median_ms: median(exec),
        kernels_compiled,
        last,
    })
}

/// Resident bytes per program point of schedule variant `variant` of `plan` at `b` without
/// decisions: the "before" of a timeline whose "after" is that variant finalized under a
/// budget (the best variant without a budget may be another schedule).
///
/// # Errors
/// Sizes that do not evaluate at `b`.
pub fn resident_of_variant(
    plan: &Plan,
    variant: usize,
    b: &Bindings,
    pricing: &Pricing,
) -> Result<Vec<i64>> {
    let mut only = plan.variant(variant).unwrap_or(plan).clone();
    only.alternatives.clear();
    Ok(ebb_plan::finalize::finalize(&only, b, &pricing.finalize_options(None, false))?.resident)
}

/// Runs `plan` (see the module docs), calling `progress(point, points)` during execution.
///
/// # Errors
/// Invalid shapes or assertion violations, an infeasible budget (stating the smallest feasible
/// one), a step that needs more host memory than available ([`check_host_memory`]),
/// unreadable or mismatched inputs, kernel errors, and a failed checker proof.
pub fn run(
    plan: Plan,
    opts: &RunOptions,
    progress: &mut ebb_runtime::step::Progress<'_>,
) -> Result<RunResult> {
    let b = &opts.bind;
    let pricing = opts
        .pricing
        .clone()
        .unwrap_or_else(|| Pricing::for_plan(&plan));
    let (report, concrete) = pipeline::plan_report_proven(&plan, b, opts.budget, &pricing)?;
    let mut need = MemoryNeed {
        arena_bytes: concrete.arena.arena_bytes,
        host_pool_bytes: concrete.swap_bytes,
        reference_bytes: 0,
    };
    if opts.check {
        need.reference_bytes = report.peak_bytes_scheduled;
    }
    check_host_memory(&need, opts.max_host_memory)?;
    let mut rt = Runtime::with_options(
        plan.clone(),
        pricing.finalize_options(report.budget_bytes, true),
        64,
    )?;
    rt.set_executor(opts.executor);
    rt.set_arena_backed(opts.arena_backed);
    let n_in = rt.graph().inputs().len();
    let (inputs, expected): (Vec<Tensor>, Vec<Tensor>) = match &opts.inputs {
        InputSource::Random(seed) => (
            random_inputs(rt.graph(), b, *seed).map_err(anyhow::Error::msg)?,
            Vec::new(),
        ),
        InputSource::Npz(p) => npz_inputs(p, n_in)?,
    };
    let input_bytes = inputs.iter().map(Tensor::size_bytes).sum();
    rt.set_op_timing(true);
    let step = rt.step_with_progress(b, inputs.clone(), progress)?;
    // The op times reported are the last step's (warm with `--repeat`).
    let repeated = repeat_steps(&mut rt, b, &inputs, opts.repeat)?;
    let (wall_ms_median, exec_ms_median) = (repeated.median_ms, repeated.exec_median_ms);
    let (last_stats, recycled_bytes) = match repeated.last {
        Some((stats, recycled)) => (Some(stats), recycled),
        None => (None, step.report.recycled_bytes),
    };
    let numerics = if expected.is_empty() {
        None
    } else {
        let graph = rt.graph().clone();
        let mut rerun = |ins: Vec<Tensor>| -> Result<Vec<Tensor>> { Ok(rt.step(b, ins)?.outputs) };
        Some(numerics::compare(
            &graph,
            &inputs,
            &step.outputs,
            &expected,
            opts.tolerance,
            &mut rerun,
        )?)
    };
    let npz_max_rel_err = numerics.as_ref().map(NumericsReport::max_rel_err);
    let (mut matches, mut unplanned_ms, mut checker_peak) = (None, None, None);
    let (mut ref_err, mut within, mut ref_errors) = (None, None, Vec::new());
    if opts.check {
        let mut free = Runtime::new(plan.clone(), None)?;
        free.set_executor(Executor::Reference);
        // The inputs again for the `f64`-accumulated reference a GPU check may need.
        let kept = if opts.executor.is_device() {
            inputs.clone()
        } else {
            Vec::new()
        };
        let reference = free.step(b, inputs)?;
        matches = Some(
            reference.outputs.len() == step.outputs.len()
                && reference
                    .outputs
                    .iter()
                    .zip(&step.outputs)
                    .all(|(x, y)| x.bits_eq(y)),
        );
        unplanned_ms = Some(reference.report.wall_ms);
        if opts.executor.is_device() {
            let e = reference
                .outputs
                .iter()
                .zip(&step.outputs)
                .map(|(r, x)| if x.bits_eq(r) { 0.0 } else { x.rel_err(r) })
                .fold(0f64, |a, b| {
                    if a.is_nan() || b.is_nan() {
                        f64::NAN
                    } else {
                        a.max(b)
                    }
                });
            ref_err = Some(e);
            ref_errors = crate::device_check::compare(
                &step.outputs,
                &reference.outputs,
                &rt.graph().output_names,
                crate::device_check::coarsest_float(rt.graph()),
                opts.device_tolerance,
            );
            if !ref_errors
                .iter()
                .all(crate::device_check::OutputError::passed)
            {
                // Over the tolerance: how accurate is the reference itself?
                let mut exact_rt = Runtime::new(plan.clone(), None)?;
                exact_rt.set_executor(Executor::Reference);
                let exact = ebb_runtime::exec::with_f64_dot(|| exact_rt.step(b, kept))?;
                for e in &mut ref_errors {
                    if let (Some(x), Some(y), Some(z)) = (
                        step.outputs.get(e.index),
                        reference.outputs.get(e.index),
                        exact.outputs.get(e.index),
                    ) {
                        e.weigh(x, y, z);
                    }
                }
            }
            within = Some(
                matches == Some(true)
                    || (reference.outputs.len() == step.outputs.len()
                        && ref_errors
                            .iter()
                            .all(crate::device_check::OutputError::passed)),
            );
        }
        let variant = plan.variant(step.concrete.variant).unwrap_or(&plan);
        let proof =
            ebb_passes::plan::check::check(rt.graph(), variant, &step.concrete.decisions, b)
                .context("the plan checker rejects the finalized decisions")?;
        if proof.peak != step.concrete.peak_bytes_planned {
            bail!(
                "the plan checker proves a peak of {} bytes, the plan claims {}",
                proof.peak,
                step.concrete.peak_bytes_planned
            );
        }
        checker_peak = Some(proof.peak);
        if step.report.arena_unplaced_bytes > 0 {
            bail!(
                "{} bytes of results could not be placed at their planned arena offsets",
                step.report.arena_unplaced_bytes
            );
        }
    }
    let concrete = &step.concrete;
    let variant = plan.variant(concrete.variant).unwrap_or(&plan);
    let schedule = ebb_runtime::step::schedule_nodes(rt.graph(), variant)?;
    let stats = last_stats.as_ref().unwrap_or(&step.stats);
    let slowest_ops = stats
        .slowest(&schedule, 10)
        .into_iter()
        .map(|(id, t)| {
            let node = rt.graph().node(id);
            let ty = node
                .outputs
                .first()
                .map(|t| t.to_string())
                .unwrap_or_default();
            OpTime {
                kind: node.kind().name().to_string(),
                op: match &node.loc {
                    Some(l) => format!("{ty} at {l}"),
                    None => ty,
                },
                ms: t.as_secs_f64() * 1e3,
            }
        })
        .collect();
    let time_by_kind = stats
        .time_by_kind(rt.graph(), &schedule)
        .into_iter()
        .map(|(k, count, t)| KindTime {
            kind: k.name().to_string(),
            count,
            ms: t.as_secs_f64() * 1e3,
        })
        .collect();
    let resident_unplanned = resident_of_variant(&plan, concrete.variant, b, &pricing)?;
    let report = RunReport {
        measured_peak_bytes: step.report.measured_peak_bytes,
        host_peak_bytes: step.report.host_peak_bytes,
        wall_ms: step.report.wall_ms,
        regen_ms: step.report.regen_ms,
        outputs_match_reference: matches,
        reference_max_rel_err: ref_err,
        outputs_within_tolerance: within,
        reference_output_errors: ref_errors,
        device: step.report.device.clone(),
        wall_ms_unplanned: unplanned_ms,
        checker_peak_bytes: checker_peak,
        npz_max_rel_err,
        numerics,
        points: concrete.resident.len(),
        executor: step.report.executor,
        kernels_compiled: step.report.kernels_compiled,
        kernels_loaded: step.report.kernels_loaded,
        kernels_reused: step.report.kernels_reused,
        jit_compile_ms: step.report.jit_compile_ms,
        jit_load_ms: step.report.jit_load_ms,
        recycled_bytes,
        input_bytes,
        arena_backed: step.report.arena_backed,
        arena_high_water_bytes: step.report.arena_usage.high_water_bytes,
        arena_peak_live_bytes: step.report.arena_usage.peak_live_bytes,
        arena_direct_bytes: stats.arena_direct_bytes,
        arena_copied_bytes: stats.arena_copied_bytes,
        arena_unplaced_bytes: step.report.arena_unplaced_bytes,
        in_place_kept_bytes: stats.in_place_kept_bytes,
        time_by_kind,
        slowest_ops,
        wall_ms_median,
        exec_ms_median,
        plan: PlanReport {
            arena_bytes: Some(concrete.arena.arena_bytes),
            finalize_us: step.report.finalize_us,
            ..report
        },
    };
    Ok(RunResult {
        report,
        step,
        resident_unplanned,
        graph_name: plan.graph_name.clone(),
        plan,
    })
}
