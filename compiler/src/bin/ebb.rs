//! `ebb`: the command-line tool. See `ebb --help`.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use ebb_compiler::frontend::Format;
use ebb_compiler::{pipeline, report};
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
        /// Where to write the plan.
        #[arg(short, long)]
        output: PathBuf,
        /// Fix symbols at compile time, e.g. `B=8,S=512` (the precise-shape baseline).
        #[arg(long)]
        bind: Option<String>,
        /// e-graph rule groups to run (comma-separated: sink_broadcast, fold_transpose_dot, reassociate).
        #[arg(long, value_delimiter = ',')]
        rewrite: Vec<String>,
        /// Shapes the schedule must not be worse than program order at, e.g. `B=4,S=128;B=4,S=1024`.
        #[arg(long)]
        sweep: Option<String>,
        /// Stop canonicalization after N pass runs (to bisect a pass bug).
        #[arg(long)]
        stop_after: Option<usize>,
        /// Print the compile report as JSON on standard output.
        #[arg(long)]
        json: bool,
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
        /// Device memory budget: `2GiB`, `512MiB`, `1.5GB`, bytes, or `50%` of the
        /// program-order peak at these shapes.
        #[arg(long)]
        budget: Option<String>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Sweep a training step over many shapes and compare memory figures.
    ///
    /// Per shape: program-order peak, the symbolic plan's scheduled peak against a plan compiled
    /// with `--bind` at that shape, the lower bound, the plan finalized under `--budget`,
    /// optionally XLA's memory analysis (`--xla`) and the exact optimum (`--exact`). Prints a
    /// markdown table; `--json` and `--plots` write the report and SVG plots.
    Bench(Box<ebb_compiler::bench::cli::BenchArgs>),
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
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Bench(args) => args.run(),
        Command::Import {
            file,
            emit,
            json,
            output,
            format,
        } => {
            let t0 = std::time::Instant::now();
            let (g, stats) = ebb_compiler::frontend::import_file(&file, format)?;
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
            rewrite,
            sweep,
            stop_after,
            json,
            format,
        } => {
            let (g, stats) = ebb_compiler::frontend::import_file(&file, format)?;
            if stats.unresolved_dims > 0 {
                eprintln!(
                    "warning: {} dimensions are not expressions over named symbols",
                    stats.unresolved_dims
                );
            }
            let groups = rewrite
                .iter()
                .map(|n| {
                    ebb_passes::rewrite::RuleGroup::from_name(n)
                        .with_context(|| format!("unknown rule group `{n}` (sink_broadcast, fold_transpose_dot, reassociate)"))
                })
                .collect::<Result<Vec<_>>>()?;
            let sweep = match sweep {
                Some(s) => s
                    .split(';')
                    .map(pipeline::parse_bindings)
                    .collect::<Result<Vec<_>>>()?,
                None => Vec::new(),
            };
            let bind = bind.as_deref().map(pipeline::parse_bindings).transpose()?;
            let opts = pipeline::CompileOptions {
                bind,
                rewrite_groups: groups,
                sweep,
                stop_after,
                max_variants: None,
            };
            let c = pipeline::compile(g, &opts)?;
            write_output(Some(&output), &c.plan.to_json())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&c.report)?);
            } else {
                let total: f64 = c.report.stage_ms.values().sum();
                eprintln!(
                    "compiled {}: {} ops, {} candidates, {:.0} ms -> {}",
                    file.display(),
                    c.report.ops,
                    c.report.candidates,
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
            json,
        } => {
            let p = load_or_compile(&plan)?;
            let b = pipeline::parse_bindings(&bind)?;
            let budget = budget.as_deref().map(pipeline::parse_budget).transpose()?;
            let r = pipeline::plan_report(&p, &b, budget)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                let mib = |x: i64| x as f64 / 1048576.0;
                println!("bind: {bind}");
                println!(
                    "peak, program order: {:>10.1} MiB",
                    mib(r.peak_bytes_program_order)
                );
                println!(
                    "peak, scheduled:     {:>10.1} MiB",
                    mib(r.peak_bytes_scheduled)
                );
                println!(
                    "lower bound:         {:>10.1} MiB",
                    mib(r.lower_bound_bytes)
                );
                if let (Some(b), Some(pp)) = (r.budget_bytes, r.peak_bytes_planned) {
                    println!("budget:              {:>10.1} MiB", mib(b));
                    println!("peak, planned:       {:>10.1} MiB", mib(pp));
                    println!(
                        "decisions: {} recompute, {} swap; recompute {:.2}% of step FLOPs; swap {:.1} MiB",
                        r.recompute_decisions,
                        r.swap_decisions,
                        100.0 * r.recompute_flops as f64 / (r.step_flops.max(1)) as f64,
                        mib(r.swap_bytes)
                    );
                }
                println!(
                    "candidates: {}, finalize: {:.0} us",
                    r.candidates, r.finalize_us
                );
            }
            Ok(())
        }
    }
}

/// Reads a plan file, or imports and compiles a `.mlir` module.
fn load_or_compile(path: &PathBuf) -> Result<ebb_ir::plan::Plan> {
    if ebb_compiler::frontend::Format::from_path(path).is_some() {
        let (g, _) = ebb_compiler::frontend::import_file(path, None)?;
        return Ok(pipeline::compile(g, &pipeline::CompileOptions::default())?.plan);
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    ebb_ir::plan::Plan::from_json(&text).with_context(|| format!("{}", path.display()))
}

/// Writes `text` to `path` atomically (temporary file + rename), or to standard output.
fn write_output(path: Option<&PathBuf>, text: &str) -> Result<()> {
    match path {
        None => {
            print!("{text}");
            Ok(())
        }
        Some(p) => {
            let tmp = p.with_extension("tmp~");
            std::fs::write(&tmp, text)
                .with_context(|| format!("cannot write {}", tmp.display()))?;
            std::fs::rename(&tmp, p).with_context(|| format!("cannot write {}", p.display()))
        }
    }
}
