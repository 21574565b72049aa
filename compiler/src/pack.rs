//! The `ebb pack` subcommand: batches of given sequence lengths that fit a device budget after
//! the runtime's decisions ([`ebb_plan::pack`]), against token-budget and bucket batching.

use crate::bench::shapes::{self, BatchRule, LongTail};
use crate::flags::DeviceFlags;
use anyhow::{bail, Context, Result};
use ebb_import::Format;
use ebb_ir::Symbol;
use ebb_pipeline as pipeline;
use ebb_plan::pack::{PackOptions, PackReport, Policy};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Arguments of `ebb pack`.
#[derive(Clone, Debug, clap::Args)]
#[command(after_long_help = "\
Examples:
  ebb compile tests/fixtures/jax/gpt2_small.mlir -o gpt2_small.plan.json
  ebb pack gpt2_small.plan.json --device h100-sxm-pcie5 --budget 40GiB --dist longtail --samples 10000
  ebb pack gpt2_small.plan.json --device h100-sxm-pcie5 --budget 40GiB --lengths lengths.txt --json

A batch fits when the runtime, finalizing the plan at its (B, S) under --budget, reaches a peak
at most the budget with decisions whose modelled added time is at most --max-added of the
modelled step. Every batch is padded to its longest sequence. Ebb's packing takes, longest
first, as many sequences as fit at the first one's S; the baselines are token-budget batching
(B*S <= T with the largest T at which every batch of this data fits) and fixed-width length
buckets with one batch size (the capacity at the longest bucket). Every batch of every policy is
finalized at its own binding and fits.")]
pub struct PackArgs {
    /// A plan written by `ebb compile`, or a model (`.mlir`, `.onnx`) compiled first.
    pub plan: PathBuf,
    /// Input format of a model file; by default from the extension.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Sequence lengths: a file of integers separated by whitespace or commas (`-` for
    /// standard input), or a JSON array.
    #[arg(long, conflicts_with = "dist", value_name = "FILE")]
    pub lengths: Option<PathBuf>,
    /// Draw the lengths from the long-tail distribution of `ebb bench --dist longtail`.
    #[arg(long, value_enum)]
    pub dist: Option<crate::bench::cli::Dist>,
    /// Number of draws.
    #[arg(long, default_value_t = 10_000, allow_hyphen_values = true, value_parser = crate::flags::count)]
    pub samples: usize,
    /// Seed of the draws.
    #[arg(long, default_value_t = 7, allow_hyphen_values = true, value_parser = crate::flags::seed)]
    pub seed: u64,
    /// Smallest drawn length.
    #[arg(long, default_value_t = 32)]
    pub s_min: i64,
    /// Largest drawn length (clipped to the symbol's range).
    #[arg(long, default_value_t = 1024)]
    pub s_max: i64,
    /// Device memory budget: `40GiB`, `512MiB`, bytes.
    #[arg(long)]
    pub budget: String,
    /// Largest modelled time the decisions may add to a step, as a fraction of the step
    /// (`0.1`) or a percentage (`10%`).
    #[arg(long, default_value = "10%", value_name = "FRACTION")]
    pub max_added: String,
    /// Bucket width of the bucket baseline, tokens.
    #[arg(long, default_value_t = 64)]
    pub bucket_width: i64,
    /// The batch symbol.
    #[arg(long, default_value = "B")]
    pub batch_symbol: String,
    /// The sequence symbol.
    #[arg(long, default_value = "S")]
    pub seq_symbol: String,
    /// Values of the plan's other symbols, e.g. `H=12`.
    #[arg(long)]
    pub bind: Option<String>,
    /// The device that prices the decisions and the kinds allowed (`--device`, `--kinds`).
    #[command(flatten)]
    pub device: DeviceFlags,
    /// For a model file: how to compile it.
    #[command(flatten)]
    pub pipeline: crate::flags::PipelineFlags,
    /// For a model file: how to import it.
    #[command(flatten)]
    pub import: crate::flags::ImportFlags,
    /// Print the whole report (every batch's indices, binding and cost) as JSON.
    #[arg(long)]
    pub json: bool,
}

impl PackArgs {
    /// Runs `ebb pack`: the report as text or JSON.
    ///
    /// # Errors
    /// Unreadable lengths or plan, bad flags, and [`ebb_plan::pack::PackError`].
    pub fn run(&self) -> Result<String> {
        if self.bucket_width < 1 {
            bail!("--bucket-width {} must be positive", self.bucket_width);
        }
        let options = self.pipeline.options_for(&self.plan, self.format)?;
        let params_from = self.import.params_from_for(&self.plan, self.format)?;
        let plan = ebb_pipeline::api::load_or_compile_with(
            &self.plan,
            self.format,
            params_from,
            &options,
        )?;
        let lengths = match (&self.lengths, self.dist) {
            (Some(p), _) => read_lengths(p)?,
            (None, Some(_)) => {
                let lt = LongTail {
                    samples: self.samples,
                    seed: self.seed,
                    batch: BatchRule::Fixed(1),
                    s_min: self.s_min,
                    s_max: self.s_max,
                    seq_symbol: self.seq_symbol.clone(),
                    batch_symbol: self.batch_symbol.clone(),
                };
                let seq = Symbol::new(&self.seq_symbol);
                shapes::sample_longtail(&lt, &plan.symbols)?
                    .iter()
                    .map(|b| b.get(&seq).copied().unwrap_or(1))
                    .collect()
            }
            (None, None) => bail!("give the lengths: --lengths FILE or --dist longtail"),
        };
        let pricing = self.device.pricing(&plan)?;
        let opts = PackOptions {
            batch_symbol: Symbol::new(&self.batch_symbol),
            seq_symbol: Symbol::new(&self.seq_symbol),
            fixed: match &self.bind {
                Some(b) => pipeline::parse_bindings(b)?,
                None => Default::default(),
            },
            budget: ebb_pipeline::size::parse_bytes(&self.budget)
                .with_context(|| format!("--budget {}", self.budget))?,
            device: pricing.device,
            kinds: pricing.kinds,
            max_added_fraction: parse_fraction(&self.max_added)?,
            bucket_width: self.bucket_width,
        };
        let report = ebb_plan::pack::pack(&plan, &lengths, &opts)?;
        Ok(if self.json {
            serde_json::to_string_pretty(&report)? + "\n"
        } else {
            render(&report, &opts)
        })
    }
}

/// `0.1` or `10%` as a fraction.
fn parse_fraction(s: &str) -> Result<f64> {
    let t = s.trim();
    let x = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .ok()
    .filter(|v| v.is_finite() && *v >= 0.0);
    x.with_context(|| format!("--max-added `{s}`: a fraction ≥ 0 (0.1) or a percentage (10%)"))
}

/// Lengths from a file (`-`: standard input): integers separated by whitespace or commas,
/// or a JSON array.
///
/// # Errors
/// An unreadable file, or a token that is not an integer (with its position).
pub fn read_lengths(path: &Path) -> Result<Vec<i64>> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading lengths from standard input")?
    } else {
        ebb_import::text::read(path)?
    };
    let body = text.trim();
    let body = body
        .strip_prefix('[')
        .and_then(|b| b.strip_suffix(']'))
        .unwrap_or(body);
    body.split(|c: char| c.is_whitespace() || c == ',')
        .filter(|t| !t.is_empty())
        .enumerate()
        .map(|(i, t)| {
            t.parse::<i64>()
                .with_context(|| format!("{}: length #{i} `{t}` is not an integer", path.display()))
        })
        .collect()
}

/// The text report: one row per policy and the gains.
fn render(r: &PackReport, opts: &PackOptions) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{} lengths, {} tokens; budget {} ({} bytes) on {}; decisions may add at most {:.1}% to \
         a step",
        r.lengths,
        r.tokens,
        crate::units::bytes(r.budget_bytes),
        r.budget_bytes,
        r.device,
        100.0 * r.max_added_fraction
    );
    let _ = writeln!(
        t,
        "\n| policy | steps | tokens/step | padding | max peak | added | shapes | parameter |"
    );
    let _ = writeln!(t, "|---|---:|---:|---:|---:|---:|---:|---|");
    for p in &r.packings {
        let bare = if p.decisions { "" } else { ", no decisions" };
        let (name, param) = match p.policy {
            Policy::Ebb => ("ebb", String::new()),
            Policy::FixedTokens => ("fixed tokens", format!("T = {}", p.parameter.unwrap_or(0))),
            Policy::Buckets => (
                "buckets",
                format!(
                    "width {}, {} = {}",
                    opts.bucket_width,
                    opts.batch_symbol.name(),
                    p.parameter.unwrap_or(0)
                ),
            ),
        };
        let _ = writeln!(
            t,
            "| {name}{bare} | {} | {:.0} | {:.1}% | {} | {:.1}% | {} | {param} |",
            p.steps,
            p.tokens_per_step,
            100.0 * p.padding_fraction,
            crate::units::bytes(p.max_peak_bytes),
            100.0 * p.added_fraction,
            p.distinct_shapes
        );
    }
    let _ = writeln!(
        t,
        "\ntokens/step: {:.2}x the fixed-token baseline, {:.2}x the bucket baseline (both with the runtime's decisions)",
        r.gain_vs_fixed_tokens, r.gain_vs_buckets
    );
    match r.gain_vs_fixed_tokens_without_decisions {
        Some(g) => {
            let _ = writeln!(
                t,
                "tokens/step: {g:.2}x the fixed-token baseline without decisions"
            );
        }
        None => {
            let _ = writeln!(
                t,
                "without decisions the longest sequence does not fit alone"
            );
        }
    }
    let _ = writeln!(
        t,
        "{} finalizes; Ebb's packing {:.0} ms, all three {:.0} ms",
        r.finalizes, r.ebb_ms, r.total_ms
    );
    t
}
