//! `ebb`: the command-line tool. See `ebb --help`.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use ebb_compiler::frontend::Format;
use ebb_compiler::{output, pipeline, report};
use std::fmt::Write as _;

use ebb_compiler::flags::{DeviceFlags, ImportFlags, PipelineFlags};
use std::path::PathBuf;
use std::process::ExitCode;

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
    Import {
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
    },
    /// List the ops each front end imports (StableHLO, ONNX `ai.onnx`, ONNX `com.microsoft`).
    ///
    /// The lists come from the importers' own dispatch tables; `--markdown` prints the block
    /// the README carries (a test checks that the two agree).
    Ops {
        /// Print one JSON array of `{front_end, ops}` objects.
        #[arg(long, conflicts_with = "markdown")]
        json: bool,
        /// Print the README's generated op table.
        #[arg(long)]
        markdown: bool,
    },
    /// Compile a training step into a memory plan (JSON).
    ///
    /// Pipeline: import → canonicalize (fold, CSE, DCE) → [e-graph rewrites] → op scheduling
    /// with symbolic sizes → rematerialization/swap candidates → plan. The plan embeds the
    /// planned graph, so `ebb plan` and `ebb run` need only the plan file.
    Compile {
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
        /// canonicalize, unroll, fold, forward_slices, cse, dce, donate, rewrite, fuse,
        /// schedule, plan. When the pipeline stops
        /// before the plan, the graph at that point (textual IR) is written to `--output`.
        #[arg(long, value_name = "N|PASS")]
        stop_after: Option<ebb_passes::manager::StopAfter>,
        /// Print the graph (textual IR) to standard error after each run of these passes
        /// (comma-separated: unroll, fold, forward_slices, cse, dce, donate, rewrite, fuse,
        /// schedule, plan; `all` for every one).
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
    },
    /// Report a plan's memory at concrete shapes, optionally finalized under a budget.
    ///
    /// Prints the peak in program order, with the plan's schedule, the lower bound and, with
    /// `--budget`, the peak after the runtime's evict/recompute/swap decisions.
    Plan {
        /// A plan written by `ebb compile`, or a `.mlir` module (compiled first, in memory).
        plan: PathBuf,
        /// Symbol values, e.g. `B=8,S=512`.
        #[arg(long)]
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
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Execute a training step on the CPU at concrete shapes under a memory budget.
    ///
    /// Finalizes the plan at `--bind` (evictions, recompute or swap, arena offsets), runs the
    /// step performing those decisions, and reports the planning figures of `ebb plan` with the
    /// measured peak, wall time and, with `--check`, whether the outputs are bit-identical to
    /// a run without decisions and the checker's proof of the peak.
    Run {
        /// A plan written by `ebb compile`, or a model (`.mlir`, `.onnx`) compiled first.
        plan: PathBuf,
        /// Symbol values, e.g. `B=8,S=256`.
        #[arg(long)]
        bind: String,
        #[command(flatten)]
        flags: RunFlags,
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

/// `ebb compile --target`.
#[derive(Clone, Copy, ValueEnum)]
enum TargetFlag {
    /// NVIDIA GPUs: PTX for `sm_80` (Ampere and later).
    Cuda,
}

#[derive(Clone, Copy, ValueEnum)]
enum Emit {
    /// The imported graph in Ebb's textual IR.
    Ir,
    /// A summary: op counts, symbols, unresolved dimensions, parameter and input bytes.
    Stats,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
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
        Command::Run { plan, bind, flags } => run_step(&plan, &bind, flags),
        Command::Ops { json, markdown } => {
            use ebb_compiler::frontend::op_table;
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
        Command::Import {
            file,
            emit,
            json,
            output,
            format,
            allow_unsupported,
            params_from,
        } => {
            if let Some(o) = &output {
                output::check_target(o)?;
            }
            if allow_unsupported {
                let missing = ebb_compiler::frontend::unsupported_ops(&file, format)?;
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
            let (g, stats) =
                ebb_compiler::frontend::import_file_with(&file, format, params_from.as_deref())?;
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
        Command::Compile {
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
        } => {
            if let Some(p) = print_after
                .iter()
                .find(|p| *p != "all" && !ebb_passes::registry::KNOWN_PASSES.contains(&p.as_str()))
            {
                anyhow::bail!(
                    "--print-after: unknown pass `{p}` ({}, all)",
                    ebb_passes::registry::KNOWN_PASSES.join(", ")
                );
            }
            output::check_target(&output)?;
            let (g, stats) =
                ebb_compiler::frontend::import_file_with(&file, format, params_from.as_deref())?;
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
            let opts = flags.apply(pipeline::CompileOptions {
                bind,
                sweep,
                stop_after,
                print_after,
                device: device
                    .as_deref()
                    .map(ebb_compiler::flags::resolve_device)
                    .transpose()?,
                ..pipeline::CompileOptions::default()
            })?;
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
                    write_output(Some(&output), &plan.to_json())?;
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
        Command::Plan {
            plan,
            bind,
            budget,
            pipeline: flags,
            import,
            device,
            json,
        } => {
            let p = load_plan(&plan, None, &flags, &import)?;
            let pricing = device.pricing(&p)?;
            let b = pipeline::parse_bindings(&bind)?;
            let budget = budget
                .as_deref()
                .map(pipeline::parse_budget)
                .transpose()
                .context("--budget")?;
            let r = pipeline::plan_report_proven(&p, &b, budget, &pricing)?.0;
            let mut out = String::new();
            if json {
                out = serde_json::to_string_pretty(&r)? + "\n";
            } else {
                let mib = |x: i64| x as f64 / 1048576.0;
                writeln!(out, "bind: {bind}")?;
                writeln!(
                    out,
                    "peak, program order: {:>10.1} MiB",
                    mib(r.peak_bytes_program_order)
                )?;
                writeln!(
                    out,
                    "peak, scheduled:     {:>10.1} MiB",
                    mib(r.peak_bytes_scheduled)
                )?;
                writeln!(
                    out,
                    "lower bound:         {:>10.1} MiB",
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
}

/// The flags of `ebb run` besides the plan and the bindings.
#[derive(clap::Args)]
struct RunFlags {
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
    /// With `--check` and a GPU executor: the largest relative error (per output, max
    /// |x - y| over max |y|) accepted against the reference executor where the outputs are
    /// not bit-identical (the GPU's `log`/`exp`/`pow` round differently from the C library's
    /// on rare inputs; cuBLAS sums in another order).
    #[arg(long, value_name = "REL", default_value_t = 1e-5)]
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
    /// Host memory the run may use (`16GiB`, bytes, ...); by default `MemAvailable` of
    /// /proc/meminfo. The run is refused before executing when the finalized arena and the
    /// host pool for swapped values need more.
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
    #[arg(long, value_name = "N", default_value_t = 0)]
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

/// A plan file, or a model file imported with `import` (`--params-from`) and compiled with `flags`
/// (see [`PipelineFlags::options_for`]).
fn load_plan(
    path: &std::path::Path,
    format: Option<Format>,
    flags: &PipelineFlags,
    import: &ImportFlags,
) -> Result<ebb_ir::plan::Plan> {
    ebb_compiler::api::load_or_compile_with(
        path,
        format,
        import.params_from_for(path, format)?,
        &flags.options_for(path, format)?,
    )
}

/// Every symbol of `plan` at 3, clamped to its range (the shape `--kernel-shapes` defaults
/// to).
fn default_kernel_shape(plan: &ebb_ir::plan::Plan) -> ebb_ir::Bindings {
    let mut b = ebb_ir::Bindings::new();
    for s in plan.symbols.symbols() {
        let (lo, hi) = plan.symbols.range(&s);
        let v = 3i64.max(lo.unwrap_or(3)).min(hi.unwrap_or(3));
        b.insert(s, v);
    }
    b
}

/// `ebb run` (see `ebb run --help`).
fn run_step(plan: &std::path::Path, bind: &str, f: RunFlags) -> Result<()> {
    use ebb_compiler::run;
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
    let opts = run::RunOptions {
        pricing: Some(f.device.pricing(&p)?),
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
    };
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("executing {bar:40} {pos}/{len} points {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let r = run::run(p, &opts, &mut |i, n| {
        if i == 0 {
            bar.set_length(n as u64);
        }
        bar.set_position(i as u64 + 1);
    });
    bar.finish_and_clear();
    let r = r?;
    if let Some(path) = &f.timeline {
        run::write_timeline(&r, path)?;
    }
    if let Some(path) = &f.save_outputs {
        let named: Vec<(String, &ebb_runtime::Tensor)> = r
            .step
            .outputs
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("out_{i}"), t))
            .collect();
        let bytes = ebb_runtime::npz::npz_bytes(&named, &path.display().to_string())?;
        output::write_file(path, &bytes).context("--save-outputs")?;
    }
    let rep = &r.report;
    let mut out = String::new();
    if f.json {
        out = serde_json::to_string_pretty(rep)? + "\n";
    } else {
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
        if let Some(d) = &rep.device {
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
                    let ops: Vec<String> =
                        p.host_ops.iter().map(|(k, n)| format!("{k} {n}")).collect();
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
        }
        if let Some(m) = rep.outputs_match_reference {
            let how = match (m, rep.reference_max_rel_err) {
                (true, _) => "bit-identical to".to_string(),
                (false, Some(e)) if rep.outputs_within_tolerance == Some(true) => {
                    format!("within {e:.2e} (relative) of")
                }
                _ => "DIFFER from".to_string(),
            };
            writeln!(
                out,
                "check: outputs {how} the run without decisions; checker proves a peak of {:.1} MiB",
                mib(rep.checker_peak_bytes.unwrap_or(0))
            )?;
        }
        if let Some(e) = rep.npz_max_rel_err {
            writeln!(
                out,
                "largest relative error against the npz outputs: {e:.2e}"
            )?;
        }
        if let Some(path) = &f.timeline {
            writeln!(out, "timeline: {}", path.display())?;
        }
    }
    output::print_stdout(&out)?;
    if rep.outputs_match_reference == Some(false) && rep.outputs_within_tolerance != Some(true) {
        anyhow::bail!("the outputs under the plan's decisions differ from the run without them");
    }
    if let Some(e) = rep.npz_max_rel_err {
        // A NaN error fails too.
        if e.is_nan() || e > f.tolerance {
            anyhow::bail!(
                "the outputs differ from the npz's `out_i`: largest relative error {e:.3e} > --tolerance {:e}",
                f.tolerance
            );
        }
    }
    Ok(())
}

/// The budget, planned peak, decisions and their modelled cost of a plan report (text).
fn write_decisions(out: &mut String, r: &pipeline::PlanReport) -> Result<()> {
    let mib = |x: i64| x as f64 / 1048576.0;
    if let (Some(b), Some(pp)) = (r.budget_bytes, r.peak_bytes_planned) {
        writeln!(out, "budget:               {:>10.1} MiB", mib(b))?;
        writeln!(out, "peak, planned:        {:>10.1} MiB", mib(pp))?;
        writeln!(
            out,
            "decisions: {} recompute, {} swap; recompute {:.2}% of step FLOPs; swap {:.1} MiB",
            r.recompute_decisions,
            r.swap_decisions,
            100.0 * r.recompute_flops as f64 / r.step_flops.max(1) as f64,
            mib(r.swap_bytes)
        )?;
        writeln!(
            out,
            "added step time on {}: {:.1} us of {:.1} us modelled ({:.2}%: recompute {:.1} us, \
             exposed transfers {:.1} us)",
            r.device,
            r.added_us,
            r.step_us_modelled,
            100.0 * r.added_fraction,
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
