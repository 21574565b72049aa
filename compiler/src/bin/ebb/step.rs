//! `ebb run`: finalize a plan at one binding, execute the step under the decisions and report
//! the planning figures with the measured ones.

use super::{load_plan, write_decisions};
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
    /// With an `.npz` holding `out_i`: the largest relative error (per output, max |x - y|
    /// over max |y|) accepted against those outputs; the run fails (exit code 1) above it.
    /// AdamW's parameter updates and bf16 steps reach about 0.7% against JAX on the CPU.
    #[arg(
        long,
        value_name = "REL",
        default_value_t = 0.02,
        allow_hyphen_values = true
    )]
    tolerance: f64,
    /// Also run without decisions: outputs must be bit-identical and the plan checker
    /// must prove the measured peak (exit code 1 otherwise).
    #[arg(long)]
    check: bool,
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
    /// `reference` (the chunked interpreter, the numerics oracle). With `--check`, the run
    /// without decisions always uses the reference executor.
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
        },
        repeat: f.repeat,
        arena_backed: f.storage == StorageFlag::Arena,
    })
}

/// Runs the step with a progress bar on standard error (points executed).
fn execute_with_progress(p: ebb_plan::format::Plan, opts: &RunOptions) -> Result<RunResult> {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("executing {bar:40} {pos}/{len} points {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let r = run::run(p, opts, &mut |i, n| {
        if i == 0 {
            bar.set_length(n as u64);
        }
        bar.set_position(i as u64 + 1);
    });
    bar.finish_and_clear();
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
    writeln!(
        out,
        "peak, program order:  {:>10.1} MiB",
        mib(pr.peak_bytes_program_order)
    )?;
    writeln!(
        out,
        "peak, scheduled:      {:>10.1} MiB",
        mib(pr.peak_bytes_scheduled)
    )?;
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
    if rep.kernels_compiled + rep.kernels_reused > 0 {
        writeln!(
            out,
            "fusion kernels: {} compiled ({:.0} ms), {} reused",
            rep.kernels_compiled, rep.jit_compile_ms, rep.kernels_reused
        )?;
    }
    if let Some(m) = rep.wall_ms_median {
        writeln!(out, "step after warm-up: {m:.1} ms (median)")?;
    }
    if rep.arena_backed {
        writeln!(
            out,
            "arena: {:.1} MiB, {:.1} MiB used (high water), {:.1} MiB held at most; results \
             {:.1} MiB written in place, {:.1} MiB copied in",
            mib(pr.arena_bytes.unwrap_or(0)),
            mib(rep.arena_high_water_bytes as i64),
            mib(rep.arena_peak_live_bytes as i64),
            mib(rep.arena_direct_bytes as i64),
            mib(rep.arena_copied_bytes as i64)
        )?;
    }
    writeln!(
        out,
        "results in recycled buffers: {:.1} MiB",
        mib(rep.recycled_bytes as i64)
    )?;
    if let Some(m) = rep.outputs_match_reference {
        writeln!(
            out,
            "check: outputs {} the run without decisions; checker proves a peak of {:.1} MiB",
            if m { "bit-identical to" } else { "DIFFER from" },
            mib(rep.checker_peak_bytes.unwrap_or(0))
        )?;
    }
    if let Some(e) = rep.npz_max_rel_err {
        writeln!(
            out,
            "largest relative error against the npz outputs: {e:.2e}"
        )?;
    }
    if let Some(path) = timeline {
        writeln!(out, "timeline: {}", path.display())?;
    }
    Ok(out)
}

/// Fails when the outputs under the decisions differ from the run without them (`--check`) or
/// from the npz's outputs by more than `tolerance` (relative; a NaN error fails too).
fn check_outputs(rep: &run::RunReport, tolerance: f64) -> Result<()> {
    if rep.outputs_match_reference == Some(false) {
        anyhow::bail!("the outputs under the plan's decisions differ from the run without them");
    }
    if let Some(e) = rep.npz_max_rel_err {
        if e.is_nan() || e > tolerance {
            anyhow::bail!(
                "the outputs differ from the npz's `out_i`: largest relative error {e:.3e} > --tolerance {:e}",
                tolerance
            );
        }
    }
    Ok(())
}
