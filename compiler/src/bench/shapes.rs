//! The shapes `ebb bench` sweeps: an explicit list (`--shapes 'B=8,S=128;B=8,S=256'`) or a
//! seeded long-tail sequence-length distribution (`--dist longtail`).
//!
//! # The long-tail distribution
//! Sequence lengths in long-context fine-tuning data are mostly short with a few very long
//! samples. We model them as log-normal, `ln S ~ Normal(μ, σ)` over the requested range
//! `[s_min, s_max]` with ratio `r = s_max / s_min`:
//! - median `e^μ = s_min · r^0.3` (e.g. 90 for 32..1024),
//! - `σ = 0.35 · ln r` (1.21 for 32..1024: about 8% of the samples above `s_max / 2`, mean about
//!   twice the median).
//!
//! A draw is clipped to `[s_min, s_max]` intersected with the symbol's range facts (e.g.
//! `S <= 512` from the export's constraints), then rounded to the nearest multiple of the
//! symbol's proven divisor that lies in range. The batch is either fixed (`--batch 8`) or set
//! from a token budget (`--tokens 4096`: `B = tokens / S`, clipped and rounded the same way), as
//! in token-budget batching. The generator is PCG-64 (MCG, `rand_pcg::Pcg64Mcg`) seeded with
//! `--seed`, whose output is specified and portable: the same seed gives the same shapes on every
//! platform and release.
//!
//! Invariant: every returned binding satisfies the plan's symbol facts
//! ([`SymbolScope::check`]) after [`SymbolScope::complete`].

use anyhow::{bail, Context, Result};
use ebb_ir::dim::{SymbolScope, ValueGrid};
use ebb_ir::{Bindings, Symbol};
use rand::SeedableRng;
use rand_distr::{Distribution, LogNormal};
use serde::Serialize;

/// How the batch dimension of a long-tail sample is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchRule {
    /// The same batch for every sample.
    Fixed(i64),
    /// `B = tokens / S` (token-budget batching), at least the symbol's lower bound.
    Tokens(i64),
}

/// Parameters of the long-tail sequence-length distribution (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LongTail {
    /// Number of draws.
    pub samples: usize,
    /// Seed of the PCG-64 generator.
    pub seed: u64,
    /// Batch rule.
    pub batch: BatchRule,
    /// Smallest sequence length requested (clipped to the symbol's range).
    pub s_min: i64,
    /// Largest sequence length requested (clipped to the symbol's range).
    pub s_max: i64,
    /// Name of the sequence symbol (`S`).
    pub seq_symbol: String,
    /// Name of the batch symbol (`B`).
    pub batch_symbol: String,
}

impl LongTail {
    /// The distribution the finalize benchmark (`bench/benches/finalize_longtail.rs`) and the
    /// committed `golden_atlas` test draw from: 64 samples, seed 7, `B = 8`, sequence lengths
    /// 32..1024 over the symbols `S` and `B`.
    pub fn finalize_benchmark() -> Self {
        LongTail {
            samples: 64,
            seed: 7,
            batch: BatchRule::Fixed(8),
            s_min: 32,
            s_max: 1024,
            seq_symbol: "S".into(),
            batch_symbol: "B".into(),
        }
    }
}

/// Where the swept shapes come from.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ShapeSource {
    /// Explicit bindings, in order.
    List {
        /// The bindings as given.
        shapes: Vec<String>,
    },
    /// Seeded long-tail draws.
    Longtail(LongTail),
}

/// Parses `B=8,S=128;B=8,S=256` (`;`-separated bindings); `''` is the one shape of a model
/// without symbols (an ONNX Runtime optimizer model, a static export).
///
/// # Errors
/// A list of separators only, or a part that is not `NAME=VALUE,...`.
pub fn parse_shape_list(s: &str) -> Result<Vec<Bindings>> {
    if s.trim().is_empty() {
        return Ok(vec![Bindings::new()]);
    }
    let out = s
        .split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| ebb_pipeline::parse_bindings(p).with_context(|| format!("--shapes `{p}`")))
        .collect::<Result<Vec<_>>>()?;
    if out.is_empty() {
        bail!("--shapes `{s}` names no shape (expected e.g. `B=8,S=128;B=8,S=256`)");
    }
    Ok(out)
}

/// The bindings of `src` for a plan with symbols `scope`, completed and checked against its
/// facts, in source order (duplicates kept).
///
/// # Errors
/// A listed shape that names a symbol the plan does not have, breaks a fact (range,
/// divisibility, equality) or leaves a symbol unbound;
/// a long-tail request whose symbols the plan does not declare, or whose range is empty.
pub fn resolve(src: &ShapeSource, scope: &SymbolScope) -> Result<Vec<Bindings>> {
    let raw = match src {
        ShapeSource::List { shapes } => shapes
            .iter()
            .map(|s| ebb_pipeline::parse_bindings(s))
            .collect::<Result<Vec<_>>>()?,
        ShapeSource::Longtail(lt) => sample_longtail(lt, scope)?,
    };
    raw.into_iter()
        .map(|b| {
            let show = match show_bindings(&b) {
                s if s.is_empty() => "`` (no symbols)".to_string(),
                s => s,
            };
            scope
                .check_known(&b)
                .map_err(|e| anyhow::anyhow!("shape {show}: {e}"))?;
            let full = scope
                .complete(&b)
                .map_err(|e| anyhow::anyhow!("shape {show}: {e}"))?;
            scope
                .check(&full)
                .map_err(|e| anyhow::anyhow!("shape {show}: {e}"))?;
            for s in scope.symbols() {
                if !full.contains_key(&s) {
                    bail!("shape {show} leaves symbol {} unbound", s.name());
                }
            }
            Ok(full)
        })
        .collect()
}

/// `B=8,S=128`.
pub fn show_bindings(b: &Bindings) -> String {
    ebb_ir::BindingsExt::to_text(b)
}

/// The values of `sym` (its range and divisibility facts, [`SymbolScope::grid`]) in
/// `[want_lo, want_hi]`.
fn clipped_range(
    scope: &SymbolScope,
    sym: &Symbol,
    want_lo: i64,
    want_hi: i64,
) -> Result<ValueGrid> {
    if !scope.contains(sym) {
        bail!(
            "the plan has no symbol {} (its symbols: {})",
            sym.name(),
            scope
                .symbols()
                .iter()
                .map(|s| s.name().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let grid = scope.grid(sym).and_then(|g| g.clip(want_lo, want_hi));
    grid.ok_or_else(|| {
        anyhow::anyhow!(
            "symbol {}: no value in [{want_lo}, {want_hi}] satisfies its facts (range {}, multiple of {})",
            sym.name(),
            show_range(scope.range(sym)),
            scope.divisor_of(sym).max(1)
        )
    })
}

/// A symbol's range as the textual IR writes it: `[1, 4096]`, `[1, inf)`, `(-inf, 8]`.
fn show_range((lo, hi): (Option<i64>, Option<i64>)) -> String {
    let lo = lo.map_or_else(|| "(-inf".to_string(), |v| format!("[{v}"));
    let hi = hi.map_or_else(|| "inf)".to_string(), |v| format!("{v}]"));
    format!("{lo}, {hi}")
}

/// `x` rounded to the nearest value of `g`.
fn round_to(x: f64, g: ValueGrid) -> i64 {
    let k = (x / g.div as f64).round() as i64;
    k.saturating_mul(g.div).clamp(g.lo, g.hi)
}

/// Most draws `--samples` may ask for: the draws are de-duplicated, so more cannot add a shape
/// that this many do not already give with near certainty, while each draw holds memory.
pub const MAX_SAMPLES: usize = 100_000;

/// Draws `lt.samples` shapes (see the module docs), in draw order.
///
/// # Errors
/// Unknown symbols, an empty range, zero or more than [`MAX_SAMPLES`] samples,
/// `s_min > s_max` or a non-positive batch rule.
pub fn sample_longtail(lt: &LongTail, scope: &SymbolScope) -> Result<Vec<Bindings>> {
    if lt.samples == 0 {
        bail!("--samples must be at least 1");
    }
    if lt.samples > MAX_SAMPLES {
        bail!(
            "--samples {} is more than {MAX_SAMPLES}: the draws are de-duplicated, and \
             {MAX_SAMPLES} already cover every shape of the range that the distribution reaches",
            lt.samples
        );
    }
    if lt.s_min < 1 || lt.s_min > lt.s_max {
        bail!(
            "--s-min {} / --s-max {}: need 1 <= s-min <= s-max",
            lt.s_min,
            lt.s_max
        );
    }
    let seq = Symbol::new(&lt.seq_symbol);
    let s_grid = clipped_range(scope, &seq, lt.s_min, lt.s_max)?;
    let batch = Symbol::new(&lt.batch_symbol);
    let b_grid = clipped_range(scope, &batch, 1, i64::MAX)?;
    let r = lt.s_max as f64 / lt.s_min as f64;
    let mu = (lt.s_min as f64).ln() + 0.3 * r.ln();
    let sigma = (0.35 * r.ln()).max(1e-6);
    let dist = LogNormal::new(mu, sigma)
        .map_err(|e| anyhow::anyhow!("log-normal parameters mu={mu}, sigma={sigma}: {e}"))?;
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(lt.seed);
    let mut out = Vec::with_capacity(lt.samples);
    for _ in 0..lt.samples {
        let s = round_to(dist.sample(&mut rng), s_grid);
        let b = match lt.batch {
            BatchRule::Fixed(v) if v >= 1 => v,
            // Fewer tokens than one sequence holds: no batch keeps to the budget (rounding
            // B = 0 up to 1 would exceed it silently).
            BatchRule::Tokens(t) if (1..s).contains(&t) => bail!(
                "--tokens {t} is less than the sequence length {}={s} drawn: a batch must hold \
                 at least one sequence; give --tokens at least {} (the largest sequence \
                 length, --s-max) or lower --s-max",
                lt.seq_symbol,
                lt.s_max
            ),
            BatchRule::Tokens(t) if t >= 1 => round_to((t / s) as f64, b_grid),
            BatchRule::Fixed(v) => bail!("--batch {v} must be positive"),
            BatchRule::Tokens(t) => bail!("--tokens {t} must be positive"),
        };
        let mut bind = Bindings::new();
        bind.insert(batch.clone(), b);
        bind.insert(seq.clone(), s);
        out.push(bind);
    }
    Ok(out)
}
