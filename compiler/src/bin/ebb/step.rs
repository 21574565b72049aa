//! `ebb run`: finalize a plan at one binding, execute the step under the decisions and report
//! the planning figures with the measured ones.

use super::{load_plan, write_decisions, write_peaks};
use anyhow::{Context, Result};
use ebb_compiler::flags::{DeviceFlags, ImportFlags, PipelineFlags};
use ebb_import::Format;
use ebb_pipeline::run::{RunOptions, RunResult};
use ebb_pipeline::{self as pipeline, output, run};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The flags of `ebb run` besides the plan and the bindings.
#[derive(clap::Args)]
pub(crate) struct RunFlags {
    /// Device memory budget: `40MiB`, `2GiB`, bytes, `50%` of the program-order peak, or
    /// `50%scheduled` of the plan's scheduled peak.
    #[arg(long, allow_hyphen_values = true)]
    budget: Option<String>,
    /// Inputs: `random:SEED` (seeded random tensors) or an `.npz` with `in_0..in_{n-1}`
    /// (and `out_i` to compare with, as the fixtures' `.ref0.npz`).
    #[arg(long, default_value = "random:0")]
    inputs: String,
    /// With an `.npz` holding `out_i`: the largest normwise relative error accepted per output
    /// (`||x - y|| / ||y||`; for an output that updates an input — a parameter or optimizer
    /// state — of its update `x - x0`). An output above it still passes when its error is
    /// within 8 times its change under a perturbation of the inputs by one unit of round-off
    /// of the least precise float type the step computes in (round-off the step amplifies, as
    /// Adam, Lion or momentum do on a gradient that is zero in exact arithmetic); shapes and
    /// NaN/inf positions must match. The run fails (exit code 1),
    /// naming each failing output. `--json` gives every output's figures under `numerics`.
    #[arg(
        long,
        value_name = "REL",
        default_value_t = pipeline::run::DEFAULT_TOLERANCE,
        allow_hyphen_values = true
    )]
    tolerance: f64,
    /// Also run without decisions: outputs must be bit-identical and the plan checker
    /// must prove the measured peak (exit code 1 otherwise).
    #[arg(long)]
    check: bool,
    /// With `--check` and a GPU executor: the largest relative error (per output, max
    /// |x - y| over max |y|) accepted against the reference executor where the outputs are
    /// not bit-identical (the GPU's `log`/`exp`/`pow` round differently from the C library's
    /// on rare inputs; cuBLAS sums in another order).
    #[arg(long, value_name = "REL", default_value_t = pipeline::run::DEFAULT_DEVICE_TOLERANCE)]
    device_tolerance: f64,
    /// Write the step's outputs to this `.npz` (`out_0`, `out_1`, ... in graph output order;
    /// `bf16` as `float32`, exactly), e.g. to compare with the framework's outputs.
    #[arg(long, value_name = "FILE.npz")]
    save_outputs: Option<PathBuf>,
    /// Write an SVG of resident bytes over program points (budget line, before/after the
    /// decisions, evict/regenerate/swap points marked).
    #[arg(long)]
    timeline: Option<PathBuf>,
    /// Input format of a model file; by default from the extension.
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// For a model file: how to compile it (a plan file was compiled already).
    #[command(flatten)]
    pipeline: PipelineFlags,
    /// For a model file: how to import it.
    #[command(flatten)]
    import: ImportFlags,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Host memory the run may use (`16GiB`, bytes, ...); by default what the process may
    /// still allocate: the smallest of `MemAvailable` of /proc/meminfo and the headroom under
    /// `ulimit -v`, `ulimit -d` and the cgroup's `memory.max`. The run is refused before
    /// executing when the finalized arena and the host pool for swapped values need more.
    #[arg(long, value_name = "SIZE")]
    max_host_memory: Option<String>,
    /// Kernels for fusion groups: `jit` (generated with LLVM, compiled once per group
    /// structure and reused at every shape; groups it cannot generate are interpreted) or
    /// `reference` (the chunked interpreter, the numerics oracle); or a GPU executor: `simt`
    /// (the GPU kernels run by a simulated device on the CPU, with streams, events and a
    /// hazard check) or `cuda` (an NVIDIA GPU; a build with the `cuda` feature). With
    /// `--check`, the run without decisions always uses the reference executor.
    #[arg(long, value_enum, default_value = "jit")]
    executor: ExecutorFlag,
    /// Run the step N more times after the first (which compiles the kernels and finalizes
    /// the plan) and report the median wall time of those N.
    #[arg(long, value_name = "N", default_value_t = 0, allow_hyphen_values = true,
          value_parser = ebb_compiler::flags::count)]
    repeat: usize,
    /// Where results live: `arena` (one block of the plan's arena size, every result at the
    /// offset the layout gave it; the measured high-water mark is reported) or `heap` (a
    /// buffer per result, recycled between steps).
    #[arg(long, value_enum, default_value = "arena")]
    storage: StorageFlag,
    #[command(flatten)]
    device: DeviceFlags,
}

/// `--storage`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum StorageFlag {
    /// The planned arena.
    Arena,
    /// Heap buffers.
    Heap,
}

/// `--executor`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ExecutorFlag {
    /// Generated kernels (LLVM JIT).
    Jit,
    /// The interpreter.
    Reference,
    /// The GPU executor on the simulated device.
    Simt,
    /// The GPU executor on an NVIDIA GPU.
    Cuda,
}

/// `ebb run` (see `ebb run --help`).
pub(crate) fn run_step(plan: &Path, bind: &str, f: RunFlags) -> Result<()> {
    if let Some(t) = &f.timeline {
        output::check_target(t).context("--timeline")?;
    }
    if let Some(t) = &f.save_outputs {
        output::check_target(t).context("--save-outputs")?;
    }
    if !(f.tolerance.is_finite() && f.tolerance >= 0.0) {
        anyhow::bail!(
            "--tolerance {} must be a finite relative error >= 0",
            f.tolerance
        );
    }
    let p = load_plan(plan, f.format, &f.pipeline, &f.import)?;
    let opts = run_options(&f, &p, bind)?;
    let r = execute_with_progress(p, &opts)?;
    if let Some(path) = &f.timeline {
        ebb_compiler::bench::plot::run_timeline(&r, path)?;
    }
    if let Some(path) = &f.save_outputs {
        save_outputs(&r, path)?;
    }
    let rep = &r.report;
    let out = if f.json {
        serde_json::to_string_pretty(rep)? + "\n"
    } else {
        report_text(bind, rep, f.timeline.as_deref())?
    };
    output::print_stdout(&out)?;
    check_outputs(rep, f.tolerance)
}

/// The run's options from the flags, for plan `p` at bindings `bind`.
fn run_options(f: &RunFlags, p: &ebb_plan::format::Plan, bind: &str) -> Result<RunOptions> {
    Ok(RunOptions {
        pricing: Some(f.device.pricing(p)?),
        bind: pipeline::parse_bindings(bind)?,
        budget: f
            .budget
            .as_deref()
            .map(pipeline::parse_budget)
            .transpose()
            .context("--budget")?,
        inputs: run::parse_inputs(&f.inputs)?,
        check: f.check,
        max_host_memory: f
            .max_host_memory
            .as_deref()
            .map(pipeline::parse_bytes)
            .transpose()
            .context("--max-host-memory")?,
        executor: match f.executor {
            ExecutorFlag::Jit => ebb_runtime::Executor::Jit,
            ExecutorFlag::Reference => ebb_runtime::Executor::Reference,
            ExecutorFlag::Simt => ebb_runtime::Executor::Simt,
            ExecutorFlag::Cuda => ebb_runtime::Executor::Cuda,
        },
        device_tolerance: f.device_tolerance,
        repeat: f.repeat,
        arena_backed: f.storage == StorageFlag::Arena,
        tolerance: f.tolerance,
    })
}

/// Runs the step with progress on standard error (points executed; a bar on a terminal,
/// lines otherwise).
fn execute_with_progress(p: ebb_plan::format::Plan, opts: &RunOptions) -> Result<RunResult> {
    let mut progress = ebb_compiler::progress::Progress::new("ebb run");
    let r = run::run(p, opts, &mut |i, n| {
        if i == 0 {
            progress.start("executing", n as u64);
        }
        progress.set(i as u64 + 1, "points");
    });
    progress.finish();
    r
}

/// Writes the step's outputs to `path` as `out_0`, `out_1`, ... (`--save-outputs`).
fn save_outputs(r: &RunResult, path: &Path) -> Result<()> {
    let named: Vec<(String, &ebb_runtime::Tensor)> = r
        .step
        .outputs
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("out_{i}"), t))
        .collect();
    let bytes = ebb_runtime::npz::npz_bytes(&named, &path.display().to_string())?;
    output::write_file(path, &bytes).context("--save-outputs")?;
    Ok(())
}

/// The text report of a run at `bind` (MiB = 2^20 bytes), naming the `timeline` written.
fn report_text(bind: &str, rep: &run::RunReport, timeline: Option<&Path>) -> Result<String> {
    let mut out = String::new();
    let mib = |x: i64| x as f64 / 1048576.0;
    let pr = &rep.plan;
    writeln!(out, "bind: {bind}")?;
    write_peaks(&mut out, pr)?;
    write_decisions(&mut out, pr)?;
    writeln!(
        out,
        "peak, measured:       {:>10.1} MiB",
        mib(rep.measured_peak_bytes as i64)
    )?;
    writeln!(
        out,
        "finalize: {:.0} us; execute: {:.1} ms ({:.1} ms recompute/reload) over {} points",
        pr.finalize_us, rep.wall_ms, rep.regen_ms, rep.points
    )?;
    if rep.kernels_compiled + rep.kernels_loaded + rep.kernels_reused > 0 {
        writeln!(
            out,
            "fusion kernels: {} compiled ({:.0} ms), {} from the kernel cache ({:.0} ms), {} \
             reused",
            rep.kernels_compiled,
            rep.jit_compile_ms,
            rep.kernels_loaded,
            rep.jit_load_ms,
            rep.kernels_reused
        )?;
    }
    if let Some(m) = rep.wall_ms_median {
        let exec = rep.exec_ms_median.unwrap_or(m);
        writeln!(
            out,
            "step after warm-up: {m:.1} ms (median of the whole step calls; {exec:.1} ms \
             executing, {:.1} ms preparing)",
            m - exec
        )?;
    }
    if rep.arena_backed {
        writeln!(
            out,
            "arena: {:.1} MiB laid out for inputs and results; the {:.1} MiB of inputs stay \
             where the caller keeps them, so results alone reach {:.1} MiB (highest byte \
             used) and hold {:.1} MiB at most; {:.1} MiB written in place by their \
             kernels, {:.1} MiB copied in, {:.1} MiB updated in the donated inputs' own \
             buffers",
            mib(pr.arena_bytes.unwrap_or(0)),
            mib(rep.input_bytes as i64),
            mib(rep.arena_high_water_bytes as i64),
            mib(rep.arena_peak_live_bytes as i64),
            mib(rep.arena_direct_bytes as i64),
            mib(rep.arena_copied_bytes as i64),
            mib(rep.in_place_kept_bytes as i64)
        )?;
    }
    writeln!(
        out,
        "results in recycled buffers: {:.1} MiB",
        mib(rep.recycled_bytes as i64)
    )?;
    if let Some(d) = &rep.device {
        write_device(&mut out, d)?;
    }
    if let Some(m) = rep.outputs_match_reference {
        let how = match (m, rep.reference_max_rel_err) {
            (true, _) => "bit-identical to".to_string(),
            (false, Some(e)) if rep.outputs_within_tolerance == Some(true) => {
                let weighed = rep
                    .reference_output_errors
                    .iter()
                    .filter(|o| o.rel_err > o.tolerance)
                    .count();
                if weighed == 0 {
                    format!("within {e:.2e} (relative) of")
                } else {
                    format!(
                        "within {e:.2e} (relative; {weighed} outputs over --device-tolerance                          are as accurate as its own against f64-accumulated contractions) of"
                    )
                }
            }
            _ => "DIFFER from".to_string(),
        };
        writeln!(
            out,
            "check: outputs {how} the run without decisions; checker proves a peak of {:.1} MiB",
            mib(rep.checker_peak_bytes.unwrap_or(0))
        )?;
    }
    if let Some(n) = &rep.numerics {
        write_numerics(&mut out, n)?;
    }
    if let Some(path) = timeline {
        writeln!(out, "timeline: {}", path.display())?;
    }
    Ok(out)
}

/// The GPU executor's lines: the lowered program and the hazard check (MiB = 2^20 bytes).
fn write_device(out: &mut String, d: &ebb_runtime::step::DeviceReport) -> Result<()> {
    let mib = |x: i64| x as f64 / 1048576.0;
    let p = &d.program;
    writeln!(
        out,
        "device {}: {} launches of {} kernels, {} GEMMs, {} copies, {} offloads/reloads, \
         {} ops on the host{}; scratch {:.1} MiB, host pool {:.1} MiB",
        d.run.device,
        p.launches,
        p.kernels,
        p.gemms,
        p.copies,
        p.swaps,
        p.host_calls,
        if p.host_ops.is_empty() {
            String::new()
        } else {
            let ops: Vec<String> = p.host_ops.iter().map(|(k, n)| format!("{k} {n}")).collect();
            format!(" ({})", ops.join(", "))
        },
        mib(p.scratch_bytes as i64),
        mib(p.pool_bytes as i64)
    )?;
    if let Some(h) = &d.hazards {
        writeln!(
            out,
            "hazard check: no race over {} compute and {} copy commands, {} events",
            h.commands[0], h.commands[1], h.records
        )?;
    }
    Ok(())
}

/// Fails when the outputs under the decisions differ from the run without them (`--check`) or
/// when an output fails the numerics comparison with the npz's outputs (naming each).
fn check_outputs(rep: &run::RunReport, tolerance: f64) -> Result<()> {
    if rep.outputs_match_reference == Some(false) && rep.outputs_within_tolerance != Some(true) {
        if rep.outputs_within_tolerance.is_some() {
            anyhow::bail!(
                "the outputs differ from the reference executor's beyond their tolerance \
                 (--device-tolerance):\n{}",
                ebb_pipeline::device_check::describe(&rep.reference_output_errors)
            );
        }
        anyhow::bail!("the outputs under the plan's decisions differ from the run without them");
    }
    if let Some(n) = rep.numerics.as_ref().filter(|n| !n.passed) {
        let why: Vec<String> = n
            .outputs
            .iter()
            .filter(|o| !o.passed)
            .map(|o| {
                let path = if o.path.is_empty() {
                    String::new()
                } else {
                    format!(" `{}`", o.path)
                };
                format!("{}{path}: {}", o.name, o.verdict)
            })
            .collect();
        anyhow::bail!(
            "{} of {} outputs differ from the npz's `out_i` (--tolerance {:e}, normwise):\n  {}",
            why.len(),
            n.outputs.len(),
            tolerance,
            why.join("\n  ")
        );
    }
    Ok(())
}

/// The numerics report against the npz's outputs (text): the rule, then one line per output.
fn write_numerics(out: &mut String, n: &pipeline::numerics::NumericsReport) -> Result<()> {
    writeln!(
        out,
        "numerics against the npz's out_i: {} of {} outputs pass (tolerance {:e} on the \
         normwise relative error; `update` compares x - x0 for an output that updates input x0{})",
        n.outputs.len() - n.failed.len(),
        n.outputs.len(),
        n.tolerance,
        if n.reran {
            "; sensitivity: the change under a one-unit round-off perturbation of the inputs"
        } else {
            ""
        }
    )?;
    let w = n
        .outputs
        .iter()
        .map(|o| o.path.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(4, 40);
    writeln!(
        out,
        "  {:<7} {:<w$} {:<16} {:<7} {:>9} {:>9} {:>9} {:>8} {:>9}  verdict",
        "output",
        "path",
        "shape",
        "compare",
        "max abs",
        "max rel",
        "normwise",
        "over tol",
        "sensitiv."
    )?;
    for o in &n.outputs {
        let shape = format!("{:?}", o.shape);
        let sens = o
            .sensitivity
            .map_or("-".to_string(), |s| format!("{s:.2e}"));
        let compared = match o.compared {
            pipeline::numerics::Compared::Value => "value",
            pipeline::numerics::Compared::Update => "update",
        };
        writeln!(
            out,
            "  {:<7} {:<w$} {:<16} {:<7} {:>9.2e} {:>9.2e} {:>9.2e} {:>8} {:>9}  {}{}",
            o.name,
            o.path,
            shape,
            compared,
            o.max_abs_err,
            o.max_rel_err,
            o.normwise_rel_err,
            o.over_tolerance,
            sens,
            if o.passed { "ok" } else { "FAIL" },
            if o.passed && o.sensitivity.is_none() {
                String::new()
            } else {
                format!(": {}", o.verdict)
            }
        )?;
    }
    Ok(())
}
