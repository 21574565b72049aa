//! The `ebb bench` subcommand: arguments (clap), progress on stderr (a bar on a terminal, lines
//! otherwise) and outputs (markdown on stdout, `--json FILE`, `--plots DIR`).

use super::shapes::{self, BatchRule, LongTail, ShapeSource};
use super::{BenchOptions, Progress};
use anyhow::{bail, Context, Result};
use ebb_import::Format;
use std::path::PathBuf;

/// Shape distributions for `--dist`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Dist {
    /// Log-normal sequence lengths: median s_min·(s_max/s_min)^0.3, σ = 0.35·ln(s_max/s_min),
    /// clipped to [s-min, s-max] and the symbol's range facts, rounded to its divisibility.
    Longtail,
}

/// Arguments of `ebb bench`.
#[derive(Clone, Debug, clap::Args)]
#[command(after_long_help = "\
Examples:
  ebb bench tests/fixtures/jax/gpt2_tiny_adamw.mlir --shapes 'B=8,S=64;B=8,S=128;B=8,S=512' --budget 50%
  EBB_PYTHON=$(bash examples/export/make_env.sh) ebb bench tests/fixtures/jax/gpt2_small.mlir \\
      --dist longtail --samples 12 --seed 7 --batch 8 --s-min 32 --s-max 1024 \\
      --budget 50% --xla --json docs/results/gpt2_small.json --plots docs/results

Long-tail shapes (--dist longtail): ln S ~ Normal(mu, sigma) with median
s_min*(s_max/s_min)^0.3 and sigma = 0.35*ln(s_max/s_min) (most samples short, a few long, as in
long-context fine-tuning data), clipped to [--s-min, --s-max] and to the symbol's range facts
(e.g. S <= 512), rounded to a multiple of its proven divisor; PCG-64 seeded by --seed, so the
same seed gives the same shapes. Duplicate shapes are swept once.

XLA (--xla): runs examples/export/xla_peer.py with $EBB_PYTHON (default python3; the script:
$EBB_XLA_PEER) on the fixture named in the .json next to the .mlir; without JAX the column is
left out and the reason printed. XLA is compiled twice per shape, without and with every
argument donated (`donate_argnums`; parameters and optimizer state updated in place); compare
the donated column with Ebb's `--donate auto`. --xla-time-runs N also runs XLA's step N times per shape (after a warm-up)
and reports the median (`step ms`): `export EBB_PYTHON=$(bash examples/export/make_env.sh)`
creates the pinned JAX environment.")]
pub struct BenchArgs {
    /// The module (`.mlir`, `.onnx`) or a plan JSON written by `ebb compile`.
    pub file: PathBuf,
    /// Input format; by default from the extension.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Shapes to sweep, `;`-separated: `B=8,S=128;B=8,S=256`; `''` for a model without
    /// symbols (one shape).
    #[arg(long, conflicts_with = "dist")]
    pub shapes: Option<String>,
    /// Draw the shapes from a distribution instead (see below).
    #[arg(long, value_enum)]
    pub dist: Option<Dist>,
    /// Number of draws (at most 100000; duplicate shapes are swept once).
    #[arg(long, default_value_t = 12, allow_hyphen_values = true, value_parser = crate::flags::count)]
    pub samples: usize,
    /// Seed of the draws.
    #[arg(long, default_value_t = 7, allow_hyphen_values = true, value_parser = crate::flags::seed)]
    pub seed: u64,
    /// Fixed batch size of the draws.
    #[arg(long, default_value_t = 8, conflicts_with = "tokens")]
    pub batch: i64,
    /// Token-budget batching instead of a fixed batch: B = TOKENS / S.
    #[arg(long)]
    pub tokens: Option<i64>,
    /// Smallest sequence length of the draws.
    #[arg(long, default_value_t = 32)]
    pub s_min: i64,
    /// Largest sequence length of the draws (clipped to the symbol's range).
    #[arg(long, default_value_t = 1024)]
    pub s_max: i64,
    /// Name of the sequence symbol.
    #[arg(long, default_value = "S")]
    pub seq_symbol: String,
    /// Name of the batch symbol.
    #[arg(long, default_value = "B")]
    pub batch_symbol: String,
    /// Device memory budget: `2GiB`, `512MiB`, bytes, `50%` of the program-order peak at
    /// each shape, or `50%scheduled` of the plan's scheduled peak there.
    #[arg(long, allow_hyphen_values = true)]
    pub budget: Option<String>,
    /// How to compile a model file (the symbolic plan and the per-shape precise ones).
    #[command(flatten)]
    pub pipeline: crate::flags::PipelineFlags,
    /// How to import a model file.
    #[command(flatten)]
    pub import: crate::flags::ImportFlags,
    /// Add XLA's memory analysis of the same JAX step, without and with donation of the
    /// arguments (needs JAX, see below).
    #[arg(long)]
    pub xla: bool,
    /// With --xla: also run XLA's step on concrete inputs this many times per shape and report
    /// the median time (0: memory only).
    #[arg(long, value_name = "N", default_value_t = 0, requires = "xla",
          allow_hyphen_values = true, value_parser = crate::flags::count)]
    pub xla_time_runs: usize,
    /// Also execute Ebb's step (the JIT executor, random inputs, no budget) this many times
    /// per shape after one warm-up step and report the median wall time, next to XLA's with
    /// `--xla --xla-time-runs` (0: memory only).
    #[arg(long, value_name = "N", default_value_t = 0, allow_hyphen_values = true,
          value_parser = crate::flags::count)]
    pub exec: usize,
    /// Solve the exact ILP per shape with this time limit (seconds) and report the greedy's
    /// gap to the optimum (needs --budget, and ebb built with the `exact` feature:
    /// `cargo build --release -p ebb-compiler --features exact`).
    #[arg(long, value_name = "SECONDS")]
    pub exact: Option<f64>,
    /// Shape of the memory timeline plot, e.g. `B=8,S=256` (default: the largest shape whose
    /// budget is met).
    #[arg(long)]
    pub timeline_at: Option<String>,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write SVG plots into this directory (`<stem>_peak.svg`, `<stem>_timeline.svg`).
    #[arg(long)]
    pub plots: Option<PathBuf>,
    /// The device that prices the decisions and the kinds allowed (`--device`, `--kinds`).
    #[command(flatten)]
    pub device: crate::flags::DeviceFlags,
}

/// Progress on stderr ([`crate::progress::Progress`]: a bar on a terminal, lines otherwise).
struct Bars(crate::progress::Progress);

impl Progress for Bars {
    fn start(&mut self, phase: &str, len: u64) {
        self.0.start(phase, len);
    }
    fn tick(&mut self, msg: &str) {
        self.0.inc(msg);
    }
    fn finish(&mut self) {
        self.0.finish();
    }
}

impl BenchArgs {
    /// The library options these arguments ask for.
    ///
    /// # Errors
    /// Neither `--shapes` nor `--dist`; a malformed shape list or `--timeline-at`.
    pub fn options(&self) -> Result<BenchOptions> {
        let shapes = match (&self.shapes, self.dist) {
            (Some(s), _) => ShapeSource::List {
                shapes: shapes::parse_shape_list(s)?
                    .iter()
                    .map(shapes::show_bindings)
                    .collect(),
            },
            (None, Some(Dist::Longtail)) => ShapeSource::Longtail(LongTail {
                samples: self.samples,
                seed: self.seed,
                batch: match self.tokens {
                    Some(t) => BatchRule::Tokens(t),
                    None => BatchRule::Fixed(self.batch),
                },
                s_min: self.s_min,
                s_max: self.s_max,
                seq_symbol: self.seq_symbol.clone(),
                batch_symbol: self.batch_symbol.clone(),
            }),
            (None, None) => bail!(
                "give the shapes: --shapes 'B=8,S=128;...' (--shapes '' for a model without \
                 symbols) or --dist longtail"
            ),
        };
        Ok(BenchOptions {
            compile: self.pipeline.options_for(&self.file, self.format)?,
            params_from: self
                .import
                .params_from_for(&self.file, self.format)?
                .map(std::path::Path::to_path_buf),
            input: self.file.clone(),
            format: self.format,
            shapes,
            budget: self.budget.clone(),
            xla: self.xla,
            xla_time_runs: self.xla_time_runs,
            exec_runs: self.exec,
            exact_time_limit_s: self.exact,
            timeline_at: self
                .timeline_at
                .as_deref()
                .map(ebb_pipeline::parse_bindings)
                .transpose()
                .context("--timeline-at")?,
            device: self.device.clone(),
        })
    }

    /// Runs the sweep and writes the outputs.
    ///
    /// # Errors
    /// Those of [`super::run`], and unwritable output files.
    pub fn run(&self) -> Result<()> {
        let opts = self.options()?;
        if let Some(p) = &self.json {
            // Fail before the sweep, not after it (a missing directory is created later).
            if p.exists() || p.is_symlink() {
                ebb_pipeline::output::check_target(p).context("--json")?;
            }
        }
        if self.xla {
            super::xla::check_python().map_err(anyhow::Error::msg)?;
        }
        let report = super::run(
            &opts,
            &mut Bars(crate::progress::Progress::new("ebb bench")),
        )?;
        ebb_pipeline::output::print_stdout(&super::render::markdown(&report))?;
        if let Some(p) = &self.json {
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            let text = serde_json::to_string_pretty(&report)? + "\n";
            ebb_pipeline::output::write_file(p, text.as_bytes())?;
        }
        if let Some(dir) = &self.plots {
            let stem = report
                .fixture
                .clone()
                .or_else(|| {
                    self.file
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                })
                .unwrap_or_else(|| "bench".into());
            for p in super::plot::write_plots(&report, dir, &stem)? {
                eprintln!("wrote {}", p.display());
            }
        }
        if let Some(note) = report.xla.note.as_ref().filter(|_| self.xla) {
            anyhow::bail!("--xla: no XLA column: {note}");
        }
        Ok(())
    }
}
