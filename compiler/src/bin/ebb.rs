//! `ebb`: the command-line tool. See `ebb --help`.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use ebb_compiler::flags::{DeviceFlags, ImportFlags, PipelineFlags};
use ebb_compiler::report;
use ebb_import::Format;
use ebb_pipeline::{self as pipeline, output};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// The process's allocator: mimalloc, or the system allocator for `ebb plan` (see `ebb/alloc.rs`).
#[global_allocator]
static GLOBAL: alloc::EbbAlloc = alloc::EbbAlloc;

#[path = "ebb/alloc.rs"]
mod alloc;

// Definitions that keep LLVM's other backends and MLIR's registry of everything out of the link.
#[path = "ebb/link.rs"]
mod link;

// `ebb run`; in `ebb/` beside this file (a file directly in `src/bin/` would be a binary).
#[path = "ebb/step.rs"]
mod step;
// `ebb plan --budget-curve`'s text.
#[path = "ebb/curve.rs"]
mod curve;

/// Ebb: a dynamic-shape compiler and memory optimizer for deep-learning training steps.
///
/// Ebb imports a training step (forward + backward + optimizer update) exported with symbolic
/// shapes (batch `B`, sequence `S`, ...) and plans its memory for every concrete shape it meets.
#[derive(Parser)]
#[command(name = "ebb", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Import a training step and print its IR or a summary.
    ///
    /// FILE is StableHLO in MLIR generic form, as printed by
    /// `module.operation.get_asm(print_generic_op_form=True)` from a `jax.export` with
    /// symbolic shapes (see examples/export/).
    Import(ImportArgs),
    /// List the ops each front end imports (StableHLO, ONNX `ai.onnx`, ONNX `com.microsoft`).
    ///
    /// The lists come from the importers' own dispatch tables; `--markdown` prints the block
    /// the README carries (a test checks that the two agree).
    Ops(OpsArgs),
    /// Compile a training step into a memory plan (JSON).
    ///
    /// Pipeline: import → canonicalize (unroll constant trip counts, fold, forward slices,
    /// CSE, DCE) → donation → e-graph rewrites → loop-invariant code motion → fusion → op
    /// scheduling with symbolic sizes → rematerialization/swap candidates → plan. The plan embeds the
    /// planned graph, so `ebb plan` and `ebb run` need only the plan file.
    Compile(CompileArgs),
    /// Report a plan's memory at concrete shapes, optionally finalized under a budget.
    ///
    /// Prints the peak in program order, with the plan's schedule, the lower bound and, with
    /// `--budget`, the peak after the runtime's evict/recompute/swap decisions.
    Plan(PlanArgs),
    /// Execute a training step on the CPU at concrete shapes under a memory budget.
    ///
    /// Finalizes the plan at `--bind` (evictions, recompute or swap, arena offsets), runs the
    /// step performing those decisions, and reports the planning figures of `ebb plan` with the
    /// measured peak, wall time and, with `--check`, whether the outputs are bit-identical to
    /// a run without decisions and the checker's proof of the peak.
    Run {
        /// A plan written by `ebb compile`, or a model (`.mlir`, `.onnx`) compiled first.
        plan: PathBuf,
        /// Symbol values, e.g. `B=8,S=256` (left out for a step without symbols).
        #[arg(long, default_value = "")]
        bind: String,
        #[command(flatten)]
        flags: step::RunFlags,
    },
    /// Sweep a training step over many shapes and compare memory figures.
    ///
    /// Per shape: program-order peak, the symbolic plan's scheduled peak against a plan compiled
    /// with `--bind` at that shape, the lower bound, the plan finalized under `--budget`,
    /// optionally XLA's memory analysis (`--xla`) and the exact optimum (`--exact`). Prints a
    /// markdown table; `--json` and `--plots` write the report and SVG plots.
    Bench(Box<ebb_compiler::bench::cli::BenchArgs>),
    /// Pack sequence lengths into batches that fit a device budget (a memory oracle).
    ///
    /// For each batch the runtime finalizes the plan at its (B, S) under the budget: Ebb's
    /// packing takes, longest first, as many sequences as fit, and is compared with token-budget
    /// batching and fixed-width length buckets at equal safety (every batch of every policy
    /// fits). Prints tokens per step, padding and the modelled time the decisions add.
    Pack(Box<ebb_compiler::pack::PackArgs>),
}

/// The arguments of `ebb import`.
#[derive(clap::Args)]
struct ImportArgs {
    /// The module to import (`.mlir` or `.onnx`).
    file: PathBuf,
    /// Input format; by default from the extension (`.mlir` StableHLO, `.onnx` ONNX).
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// What to print: the textual IR or a summary (op counts, symbols, sizes).
    #[arg(long, value_enum, default_value_t = Emit::Stats)]
    emit: Emit,
    /// Print one JSON object instead of text (with `--emit stats`).
    #[arg(long)]
    json: bool,
    /// Write the output to this file instead of standard output.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// An ONNX Runtime optimizer model's training model: its trainable parameters (inputs
    /// with a `<param>_grad.accumulation.buffer` input, in input order) are the elements of
    /// the optimizer's `params`, `gradients` and moment sequences.
    #[arg(long, value_name = "TRAINING.onnx")]
    params_from: Option<PathBuf>,
    /// Triage: when the model has ops this build cannot import, list every one (op, count,
    /// first location or node) instead of failing at the first, and exit 0 (with
    /// `--json`: `{"file", "imported": false, "unsupported_ops": [...]}`). A model
    /// without such ops imports as usual.
    #[arg(long)]
    allow_unsupported: bool,
}

/// The arguments of `ebb ops`.
#[derive(clap::Args)]
struct OpsArgs {
    /// Print one JSON array of `{front_end, ops}` objects.
    #[arg(long, conflicts_with = "markdown")]
    json: bool,
    /// Print the README's generated op table.
    #[arg(long)]
    markdown: bool,
}

/// The arguments of `ebb compile`.
#[derive(clap::Args)]
struct CompileArgs {
    /// The module to compile (`.mlir` or `.onnx`).
    file: PathBuf,
    /// Input format; by default from the extension (`.mlir` StableHLO, `.onnx` ONNX).
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// An ONNX Runtime optimizer model's training model: its trainable parameters (inputs
    /// with a `<param>_grad.accumulation.buffer` input, in input order) are the elements of
    /// the optimizer's `params`, `gradients` and moment sequences.
    #[arg(long, value_name = "TRAINING.onnx")]
    params_from: Option<PathBuf>,
    /// Where to write the plan.
    #[arg(short, long)]
    output: PathBuf,
    /// Fix symbols at compile time, e.g. `B=8,S=512` (the precise-shape baseline).
    #[arg(long)]
    bind: Option<String>,
    /// Shapes the schedule must not be worse than program order at, e.g. `B=4,S=128;B=4,S=1024`.
    #[arg(long)]
    sweep: Option<String>,
    /// Stop after N pass runs (to bisect a pass bug), or after a pass or group: one of
    /// canonicalize, unroll, fold, forward_slices, cse, dce, donate, rewrite, licm,
    /// dot_accumulate, fuse, schedule, plan. When the pipeline stops
    /// before the plan, the graph at that point (textual IR) is written to `--output`.
    #[arg(long, value_name = "N|PASS")]
    stop_after: Option<ebb_passes::manager::StopAfter>,
    /// Print the graph (textual IR) to standard error after each run of these passes
    /// (comma-separated: unroll, fold, forward_slices, cse, dce, donate, rewrite, licm,
    /// dot_accumulate, fuse, schedule, plan; `all` for every one).
    #[arg(long, value_delimiter = ',')]
    print_after: Vec<String>,
    #[command(flatten)]
    pipeline: PipelineFlags,
    /// Print the fusion groups and the reasons for producer-consumer pairs not fused to
    /// standard error (with `--fusion on`).
    #[arg(long)]
    emit_groups: bool,
    /// Print the compile report as JSON on standard output.
    #[arg(long)]
    json: bool,
    /// Record this device in the plan: `ebb plan`/`run`/`bench` and the runtime price
    /// decisions on it unless given another `--device` (names as in `ebb plan --help`).
    #[arg(long, value_name = "NAME")]
    device: Option<String>,
    /// Also store machine code with the plan: `cuda` stores the PTX of every GPU kernel the
    /// planned graph lowers to (at the shapes of `--kernel-shapes`), which
    /// `ebb run --executor cuda` loads instead of generating.
    #[arg(long, value_enum)]
    target: Option<TargetFlag>,
    /// With `--target`: shapes to lower the graph at to find its kernels (a kernel serves
    /// every shape, but unit dimensions can change which one an op needs), e.g.
    /// `B=4,S=128;B=1,S=1`. Default: every symbol 3, clamped to its range.
    #[arg(long, value_name = "SHAPES")]
    kernel_shapes: Option<String>,
    /// The plan file's form: `json`, or `binary`, which loads without parsing text and is
    /// stamped as verified once its read-back passes the full verification, so that loading
    /// it does not re-derive the plan (`ebb_plan::binary`).
    #[arg(long, value_enum, default_value = "json")]
    plan_format: PlanFormatFlag,
}

/// `ebb compile --plan-format`.
#[derive(Clone, Copy, ValueEnum)]
enum PlanFormatFlag {
    /// Pretty-printed JSON with the graph as textual IR.
    Json,
    /// The binary form (`ebb_plan::binary`).
    Binary,
}

/// `ebb compile --target`.
#[derive(Clone, Copy, ValueEnum)]
enum TargetFlag {
    /// NVIDIA GPUs: PTX for `sm_80` (Ampere and later).
    Cuda,
}

/// The arguments of `ebb plan`.
#[derive(clap::Args)]
struct PlanArgs {
    /// A plan written by `ebb compile`, or a `.mlir` module (compiled first, in memory).
    plan: PathBuf,
    /// Symbol values, e.g. `B=8,S=512` (left out for a step without symbols).
    #[arg(long, default_value = "")]
    bind: String,
    /// Device memory budget: `2GiB`, `512MiB`, `1.5GB`, bytes, `50%` of the
    /// program-order peak at these shapes, or `50%scheduled` of the plan's scheduled peak.
    #[arg(long, allow_hyphen_values = true)]
    budget: Option<String>,
    /// For a model file: how to compile it (a plan file was compiled already).
    #[command(flatten)]
    pipeline: PipelineFlags,
    /// For a model file: how to import it.
    #[command(flatten)]
    import: ImportFlags,
    #[command(flatten)]
    device: DeviceFlags,
    /// Print the budget curve instead of one budget: N budgets (default 16) from the smallest
    /// feasible to the scheduled peak, each with its planned peak, arena and modelled added
    /// time (made monotone: a budget runs the decisions found at the budget B' <= it that add
    /// the least time among those whose arena fits, and says which B').
    #[arg(long, value_name = "N", num_args = 0..=1,
          default_missing_value = DEFAULT_CURVE_POINTS_TEXT, conflicts_with = "budget")]
    budget_curve: Option<usize>,
    /// With `--budget-curve`: also plot the curve (added time and arena against the budget)
    /// to this SVG file.
    #[arg(long, value_name = "FILE.svg", requires = "budget_curve")]
    plot: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// [`pipeline::DEFAULT_CURVE_POINTS`] as clap's default text (a test checks they agree).
const DEFAULT_CURVE_POINTS_TEXT: &str = "16";

#[derive(Clone, Copy, ValueEnum)]
enum Emit {
    /// The imported graph in Ebb's textual IR.
    Ir,
    /// A summary: op counts, symbols, unresolved dimensions, parameter and input bytes.
    Stats,
}

/// Set before `main` when descriptor 1 is closed (`ebb ... >&-`): Rust's runtime reopens it on
/// `/dev/null` before `main`, so it can only be seen this early.
static STDOUT_WAS_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static PROBE_STDOUT: extern "C" fn() = probe_stdout;

#[cfg(target_os = "linux")]
extern "C" fn probe_stdout() {
    // SAFETY: F_GETFD on descriptor 1 only reads its flags (EBADF when it is closed).
    if unsafe { libc::fcntl(1, libc::F_GETFD) } == -1 {
        STDOUT_WAS_CLOSED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn main() -> ExitCode {
    if STDOUT_WAS_CLOSED.load(std::sync::atomic::Ordering::Relaxed) {
        output::mark_stdout_closed();
    }
    output::install_signal_cleanup();
    let cli = Cli::parse();
    // A step runs on rayon's global pool (`ebb_runtime::step`): its threads get the main
    // thread's 8 MiB of stack instead of the 2 MiB of a spawned thread (the first step's LLVM
    // compiles, nested regions). Fails only when the pool exists already; then it is kept.
    // `ebb plan` and `ebb ops` run nothing on it, so they do not start its threads.
    if !matches!(cli.command, Command::Plan(_) | Command::Ops(_)) {
        let _ = rayon::ThreadPoolBuilder::new()
            .stack_size(8 << 20)
            .build_global();
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // `ebb ... | head -1`: the reader has what it wanted; end quietly, as Unix filters do.
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", output::error_message(&e));
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Bench(args) => args.run(),
        Command::Pack(args) => Ok(output::print_stdout(&args.run()?)?),
        Command::Run { plan, bind, flags } => step::run_step(&plan, &bind, flags),
        Command::Ops(args) => args.run(),
        Command::Import(args) => args.run(),
        Command::Compile(args) => args.run(),
        Command::Plan(args) => args.run(),
    }
}

impl OpsArgs {
    /// `ebb ops`: the op lists of the front ends.
    fn run(self) -> Result<()> {
        let OpsArgs { json, markdown } = self;
        use ebb_import::op_table;
        let lists = op_table::op_lists();
        let text = if json {
            serde_json::to_string_pretty(&lists)? + "\n"
        } else if markdown {
            op_table::markdown(&lists)
        } else {
            lists
                .iter()
                .map(|l| {
                    format!(
                        "{} ({} ops):\n  {}\n",
                        l.front_end,
                        l.ops.len(),
                        l.ops.join(" ")
                    )
                })
                .collect()
        };
        Ok(output::print_stdout(&text)?)
    }
}

impl ImportArgs {
    /// `ebb import`: the IR or a summary of a model, or its unsupported ops.
    fn run(self) -> Result<()> {
        let ImportArgs {
            file,
            emit,
            json,
            output,
            format,
            allow_unsupported,
            params_from,
        } = self;
        if let Some(o) = &output {
            output::check_target(o)?;
        }
        if allow_unsupported {
            let missing = ebb_import::unsupported_ops(&file, format)?;
            if !missing.is_empty() {
                let text = if json {
                    serde_json::to_string_pretty(&serde_json::json!({
                        "file": file.display().to_string(),
                        "imported": false,
                        "unsupported_ops": missing,
                    }))? + "\n"
                } else {
                    let mut t = format!(
                        "{}: {} unsupported op kind(s), not imported:\n",
                        file.display(),
                        missing.len()
                    );
                    for u in &missing {
                        t += &format!("  {:>6}  {}  (first: {})\n", u.count, u.op, u.first);
                    }
                    t
                };
                return write_output(output.as_ref(), &text);
            }
        }
        let t0 = std::time::Instant::now();
        let (g, stats) = ebb_import::import_file_with(&file, format, params_from.as_deref())?;
        let elapsed = t0.elapsed();
        let text = match emit {
            Emit::Ir => ebb_ir::text::print(&g),
            Emit::Stats => {
                let s = report::import_summary(&g, &stats, elapsed);
                if json {
                    serde_json::to_string_pretty(&s)? + "\n"
                } else {
                    s.to_text()
                }
            }
        };
        write_output(output.as_ref(), &text)
    }
}

impl CompileArgs {
    /// `ebb compile`: runs the pipeline and writes the plan (or the graph where it stopped).
    fn run(self) -> Result<()> {
        let CompileArgs {
            file,
            output,
            bind,
            sweep,
            stop_after,
            print_after,
            pipeline: flags,
            emit_groups,
            json,
            format,
            device,
            params_from,
            target,
            kernel_shapes,
            plan_format,
        } = self;
        if let Some(p) = print_after
            .iter()
            .find(|p| *p != "all" && ebb_passes::PassId::from_name(p).is_none())
        {
            anyhow::bail!(
                "--print-after: unknown pass `{p}` ({}, all)",
                ebb_passes::PassId::known()
            );
        }
        output::check_target(&output)?;
        let (g, stats) = ebb_import::import_file_with(&file, format, params_from.as_deref())?;
        if stats.unresolved_dims > 0 {
            eprintln!(
                "warning: {} dimensions are not expressions over named symbols",
                stats.unresolved_dims
            );
        }
        let sweep = match sweep {
            Some(s) => s
                .split(';')
                .map(pipeline::parse_bindings)
                .collect::<Result<Vec<_>>>()?,
            None => Vec::new(),
        };
        let bind = bind.as_deref().map(pipeline::parse_bindings).transpose()?;
        let opts = flags
            .builder()
            .bind(bind)
            .sweep(sweep)
            .stop_after(stop_after)
            .print_after(print_after)
            .device(
                device
                    .as_deref()
                    .map(pipeline::resolve_device)
                    .transpose()?,
            )
            .build();
        let c = pipeline::run_pipeline(g, &opts)?;
        for d in &c.dumps {
            eprintln!(
                "// ----- IR after {} (pass run {}) -----\n{}",
                d.pass, d.run, d.ir
            );
        }
        if let Some(u) = &c.report.unroll {
            for k in &u.kept {
                eprintln!(
                    "note: the `while` loop at {} is kept as a loop and planned whole: {}",
                    k.loc.as_deref().unwrap_or("an unknown location"),
                    k.reason
                );
            }
        }
        if emit_groups {
            match &c.report.fusion {
                Some(f) => eprint!("{}", f.to_text()),
                None => eprintln!("--emit-groups: fusion did not run (add --fusion on)"),
            }
        }
        let what = match &c.plan {
            Some(plan) => {
                let mut plan = plan.clone();
                let mut ptx = String::new();
                if let Some(TargetFlag::Cuda) = target {
                    let shapes = match &kernel_shapes {
                        Some(s) => s
                            .split(';')
                            .map(pipeline::parse_bindings)
                            .collect::<Result<Vec<_>>>()
                            .context("--kernel-shapes")?,
                        None => vec![default_kernel_shape(&plan)],
                    };
                    plan.kernels = ebb_runtime::step::plan_kernels(&plan, &shapes)?;
                    let bytes: usize = plan.kernels.iter().map(|k| k.ptx.len()).sum();
                    ptx = format!(
                        ", {} GPU kernels ({:.1} KiB of PTX)",
                        plan.kernels.len(),
                        bytes as f64 / 1024.0
                    );
                }
                match plan_format {
                    PlanFormatFlag::Json => write_output(Some(&output), &plan.to_json())?,
                    PlanFormatFlag::Binary => {
                        let bytes = pipeline::plan_file::plan_file_bytes(
                            &plan,
                            pipeline::plan_file::PlanFormat::Binary,
                        )?;
                        output::write_file(&output, &bytes)?;
                    }
                }
                format!("{} candidates{ptx}", c.report.candidates)
            }
            None => {
                write_output(Some(&output), &ebb_ir::text::print(&c.graph))?;
                let last = c.report.passes.runs.last();
                format!(
                    "stopped after {} (pass run {}); wrote the graph (textual IR), no plan",
                    last.map_or("nothing", |r| r.pass),
                    last.map_or(0, |r| r.run)
                )
            }
        };
        if json {
            output::print_stdout(&(serde_json::to_string_pretty(&c.report)? + "\n"))?;
        } else {
            let total: f64 = c.report.stage_ms.values().sum();
            eprintln!(
                "compiled {}: {} ops, {what}, {:.0} ms -> {}",
                file.display(),
                c.report.ops,
                total,
                output.display()
            );
        }
        Ok(())
    }
}

impl PlanArgs {
    /// `ebb plan`: the memory report of a plan at one binding.
    fn run(self) -> Result<()> {
        let PlanArgs {
            plan,
            bind,
            budget,
            pipeline: flags,
            import,
            device,
            json,
            budget_curve,
            plot,
        } = self;
        if let Some(path) = &plot {
            output::check_target(path)?;
        }
        // One command, then the process exits: the plan and its graph (tens of thousands of
        // small allocations) are left to the exit rather than freed one by one.
        // The report alone reads a stamped binary plan without its fusion regions' ops.
        let loaded = std::mem::ManuallyDrop::new(load_plan_and_graph(
            &plan,
            None,
            &flags,
            &import,
            budget_curve.is_none(),
        )?);
        let (p, g) = (&loaded.0, &loaded.1);
        let pricing = device.pricing(p)?;
        let b = pipeline::parse_bindings(&bind)?;
        if let Some(n) = budget_curve {
            let curve = pipeline::budget_curve(p, g, &b, &pricing, n)?;
            if let Some(path) = &plot {
                ebb_compiler::bench::plot::budget_curve(&curve, path)?;
            }
            let out = if json {
                serde_json::to_string_pretty(&curve)? + "\n"
            } else {
                curve::curve_text(&bind, &curve)?
            };
            return Ok(output::print_stdout(&out)?);
        }
        let budget = budget
            .as_deref()
            .map(pipeline::parse_budget)
            .transpose()
            .context("--budget")?;
        let r = pipeline::plan_report_proven_on(p, g, &b, budget, &pricing)?.0;
        let mut out = String::new();
        if json {
            out = serde_json::to_string_pretty(&r)? + "\n";
        } else {
            let mib = |x: i64| x as f64 / 1048576.0;
            writeln!(out, "bind: {bind}")?;
            write_peaks(&mut out, &r)?;
            writeln!(
                out,
                "lower bound:          {:>10.1} MiB",
                mib(r.lower_bound_bytes)
            )?;
            write_decisions(&mut out, &r)?;
            writeln!(
                out,
                "candidates: {}, finalize: {:.0} us (plan variant prepared in {:.0} us)",
                r.candidates, r.finalize_us, r.prepare_us
            )?;
        }
        output::print_stdout(&out)?;
        Ok(())
    }
}

/// A plan file, or a model file imported with `import` (`--params-from`) and compiled with `flags`
/// (see [`PipelineFlags::options_for`]).
fn load_plan(
    path: &std::path::Path,
    format: Option<Format>,
    flags: &PipelineFlags,
    import: &ImportFlags,
) -> Result<ebb_plan::format::Plan> {
    ebb_pipeline::api::load_or_compile_with(
        path,
        format,
        import.params_from_for(path, format)?,
        &flags.options_for(path, format)?,
    )
}

/// [`load_plan`], with the plan's graph (the one its verification parsed); for a `report`
/// alone, a stamped binary plan's graph without its fusion regions' ops
/// ([`ebb_pipeline::api::load_or_compile_for_report`]).
fn load_plan_and_graph(
    path: &std::path::Path,
    format: Option<Format>,
    flags: &PipelineFlags,
    import: &ImportFlags,
    report: bool,
) -> Result<(ebb_plan::format::Plan, ebb_ir::Graph)> {
    let load = if report {
        ebb_pipeline::api::load_or_compile_for_report
    } else {
        ebb_pipeline::api::load_or_compile_graph_with
    };
    load(
        path,
        format,
        import.params_from_for(path, format)?,
        &flags.options_for(path, format)?,
    )
}

/// Every symbol of `plan` at 3, clamped to its range (the shape `--kernel-shapes` defaults
/// to).
fn default_kernel_shape(plan: &ebb_plan::format::Plan) -> ebb_ir::Bindings {
    let mut b = ebb_ir::Bindings::new();
    for s in plan.symbols.symbols() {
        let (lo, hi) = plan.symbols.range(&s);
        let v = 3i64.max(lo.unwrap_or(3)).min(hi.unwrap_or(3));
        b.insert(s, v);
    }
    b
}

/// The program-order and scheduled peaks of a plan report (text), with the schedule variant
/// and why, where the schedule peaks above program order or above the best variant.
fn write_peaks(out: &mut String, r: &pipeline::PlanReport) -> Result<()> {
    let mib = |x: i64| x as f64 / 1048576.0;
    writeln!(
        out,
        "peak, program order:  {:>10.1} MiB",
        mib(r.peak_bytes_program_order)
    )?;
    let variant = if r.schedule_variants > 1 {
        format!(
            " (schedule variant {} of {}{})",
            r.schedule_variant,
            r.schedule_variants,
            if r.peak_bytes_scheduled > r.peak_bytes_scheduled_best {
                format!(
                    "; the lowest peaks at {:.1} MiB",
                    mib(r.peak_bytes_scheduled_best)
                )
            } else {
                String::new()
            }
        )
    } else {
        String::new()
    };
    writeln!(
        out,
        "peak, scheduled:      {:>10.1} MiB{variant}",
        mib(r.peak_bytes_scheduled)
    )?;
    if let Some(note) = &r.schedule_note {
        writeln!(out, "note: {note}")?;
    }
    Ok(())
}

/// The budget, planned peak, decisions and their modelled cost of a plan report (text).
fn write_decisions(out: &mut String, r: &pipeline::PlanReport) -> Result<()> {
    use ebb_compiler::units::{bytes, flops, percent};
    let mib = |x: i64| x as f64 / 1048576.0;
    if r.host_placed_values > 0 {
        writeln!(
            out,
            "placed on the host:   {} values, {} by the model's offload policy ({} forced swaps \
             taken)",
            r.host_placed_values,
            bytes(r.host_placed_bytes),
            r.forced_swaps
        )?;
    }
    let Some(pp) = r.peak_bytes_planned else {
        return Ok(());
    };
    if let Some(b) = r.budget_bytes {
        let basis = match (r.budget_fraction, r.budget_fraction_of) {
            (Some(f), Some(of)) => {
                let (what, x) = if of == "peak_bytes_scheduled" {
                    ("the scheduled peak", r.peak_bytes_scheduled)
                } else {
                    ("the program-order peak", r.peak_bytes_program_order)
                };
                format!(
                    " = {} of {what} at these shapes ({})",
                    percent(f, 1.0),
                    bytes(x)
                )
            }
            _ => String::new(),
        };
        writeln!(
            out,
            "budget:               {:>10.1} MiB ({b} bytes{basis})",
            mib(b)
        )?;
    }
    {
        writeln!(out, "peak, planned:        {:>10.1} MiB", mib(pp))?;
        writeln!(
            out,
            "decisions: {} recompute ({} recomputed, {} of the step's {}), {} swap ({} \
             offloaded and reloaded)",
            r.recompute_decisions,
            flops(r.recompute_flops),
            percent(r.recompute_flops as f64, r.step_flops as f64),
            flops(r.step_flops),
            r.swap_decisions,
            bytes(r.swap_bytes)
        )?;
        writeln!(
            out,
            "added step time on {}: {:.1} us of {:.1} us modelled ({}: recompute {:.1} us, \
             exposed transfers {:.1} us; an op's time is the larger of its FLOPs and its bytes \
             moved at the device's rates)",
            r.device,
            r.added_us,
            r.step_us_modelled,
            percent(r.added_us, r.step_us_modelled),
            r.recompute_us,
            r.exposed_transfer_us
        )?;
    }
    Ok(())
}

/// Writes `text` to `path` or, without a path, to standard output (see
/// [`output::write_file`]: atomic, refuses to replace anything but a regular file, writes
/// through symbolic links).
fn write_output(path: Option<&PathBuf>, text: &str) -> Result<()> {
    match path {
        None => output::print_stdout(text)?,
        Some(p) => output::write_file(p, text.as_bytes())?,
    }
    Ok(())
}
