//! `ebb`: the command-line tool. See `ebb --help`.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use ebb_compiler::report;
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
        /// The module to import (`.mlir`).
        file: PathBuf,
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
        Command::Import { file, emit, json, output } => {
            let t0 = std::time::Instant::now();
            let (g, stats) = ebb_compiler::stablehlo::import_file(&file)?;
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
            std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
            std::fs::rename(&tmp, p).with_context(|| format!("cannot write {}", p.display()))
        }
    }
}
