//! Memory oracle for batch packing: which batches of given sequence lengths fit a device budget
//! after the runtime's decisions, and at what modelled added time.
//!
//! A trainer with a long-tail length distribution (ChunkFlow, Skrull and ByteScale report the
//! same shape of data) asks one question per step: how many of these sequences fit at once?
//! A symbolic plan answers it for every `(B, S)` by finalizing there
//! ([`crate::finalize`]): the batch fits when the finalized peak is at most the budget and the
//! decisions' modelled added time is at most a cap (a fraction of the modelled step time).
//! The oracle finalizes without arena offsets but under the target a finalize with offsets
//! decides under (the budget less [`crate::finalize::ARENA_ALLOWANCE`]), so the trainer's
//! finalize at a packed batch's shape agrees with it.
//!
//! # Policies
//! Every policy pads each batch to its longest sequence (`S` rounded up to the symbol's
//! divisor) and reports the padding it costs; none concatenates sequences (the step would need
//! segment masks to keep packed sequences apart).
//! - [`Policy::Ebb`]: lengths sorted longest first; each batch takes as many of the next
//!   sequences as fit at the first one's `S` (the largest fitting `B`, found by galloping
//!   search from the capacity of the previous, longer batch). With a capacity that does not
//!   grow with `S` this greedy uses the fewest batches of any partition into fitting batches
//!   (exchange argument: a batch holding a shorter sequence in place of a longer one never
//!   fits fewer), so it gives the most tokens per step.
//! - [`Policy::FixedTokens`]: token-budget batching (fairseq's `max_tokens`): lengths sorted
//!   longest first, each batch takes sequences while `B · S ≤ T`. `T` is the largest budget
//!   found by lowering from the longest sequence's capacity until every batch fits, so the
//!   baseline is as safe as [`Policy::Ebb`] and tuned to this very data.
//! - [`Policy::Buckets`]: what users of static-shape compilers do: each sequence padded to the
//!   upper edge of its bucket of `width` tokens, one batch size for every bucket (the capacity
//!   at the longest bucket), each bucket cut into batches of that size in length order.
//!
//! Capacity is assumed not to grow with `S` and fitting to be monotone in `B`; neither is
//! trusted: every returned batch is finalized at its own binding and shrunk until it fits.
//!
//! Invariant: every batch of every [`Packing`] fits (`peak_bytes ≤ budget`, added fraction
//! ≤ the cap), each length index appears in exactly one batch, and `seq` is at least the
//! longest length of the batch.

use crate::device::{DeviceId, DeviceProfile};
use crate::finalize::{arena_target, FinalizeError, FinalizeOptions, Finalizer};
use crate::format::{DecisionKind, Plan};
use ebb_ir::dim::ValueGrid;
use ebb_ir::{Bindings, BindingsExt, Symbol};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// What [`pack`] packs for and under.
#[derive(Clone, Debug)]
pub struct PackOptions {
    /// The batch symbol (`B`).
    pub batch_symbol: Symbol,
    /// The sequence symbol (`S`).
    pub seq_symbol: Symbol,
    /// Values of the plan's other symbols, fixed for every batch.
    pub fixed: Bindings,
    /// Device memory budget, bytes.
    pub budget: i64,
    /// The device whose roofline times price recompute and swap.
    pub device: DeviceProfile,
    /// Decision kinds the runtime may choose.
    pub kinds: Vec<DecisionKind>,
    /// Largest modelled time the decisions may add to a step, as a fraction of that step's
    /// modelled time (`0.1` = 10%).
    pub max_added_fraction: f64,
    /// Bucket width of [`Policy::Buckets`], tokens.
    pub bucket_width: i64,
}

/// A batch-forming policy (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Largest fitting batch per length, from the plan.
    Ebb,
    /// Token-budget batching with the largest safe token budget.
    FixedTokens,
    /// Fixed-width length buckets, one batch size.
    Buckets,
}

/// The runtime's figures for one `(B, S)`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShapeCost {
    /// Peak bytes with the decisions under the budget.
    pub peak_bytes: i64,
    /// Peak bytes of the schedule without decisions.
    pub peak_bytes_scheduled: i64,
    /// Recompute decisions.
    pub recompute_decisions: usize,
    /// Swap decisions.
    pub swap_decisions: usize,
    /// Modelled time the decisions add, µs.
    pub added_us: f64,
    /// Modelled step time without decisions, µs.
    pub step_us: f64,
}

impl ShapeCost {
    /// `added_us / step_us` (0 for an empty step).
    pub fn added_fraction(&self) -> f64 {
        if self.step_us > 0.0 {
            self.added_us / self.step_us
        } else {
            0.0
        }
    }
}

/// One batch: which lengths, at which binding, at what cost.
#[derive(Clone, Debug, Serialize)]
pub struct Batch {
    /// Indices into the lengths, longest first.
    pub indices: Vec<usize>,
    /// The batch symbol's value (`indices.len()`).
    pub batch: i64,
    /// The sequence symbol's value: the longest length, padded up to a valid value.
    pub seq: i64,
    /// Real tokens (sum of the lengths).
    pub tokens: i64,
    /// Padding tokens: `batch · seq − tokens`.
    pub padding_tokens: i64,
    /// The runtime's figures at this binding.
    pub cost: ShapeCost,
}

/// The batches of one policy and their totals.
#[derive(Clone, Debug, Serialize)]
pub struct Packing {
    /// The policy.
    pub policy: Policy,
    /// Whether the runtime's decisions (recompute, swap) were allowed.
    pub decisions: bool,
    /// Steps (batches).
    pub steps: usize,
    /// Real tokens per step, on average.
    pub tokens_per_step: f64,
    /// Padding tokens over all tokens computed (real + padding).
    pub padding_fraction: f64,
    /// The largest peak of any batch, bytes.
    pub max_peak_bytes: i64,
    /// Modelled added time over modelled step time, summed over the steps.
    pub added_fraction: f64,
    /// Distinct `(B, S)` bindings.
    pub distinct_shapes: usize,
    /// [`Policy::FixedTokens`]: the token budget `T`; [`Policy::Buckets`]: the batch size.
    pub parameter: Option<i64>,
    /// The batches, in order.
    pub batches: Vec<Batch>,
}

/// Why lengths cannot be packed.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// No lengths were given.
    #[error("no sequence lengths to pack")]
    Empty,
    /// A length is not positive.
    #[error("length #{index} is {length}: lengths must be positive")]
    BadLength {
        /// Its index.
        index: usize,
        /// The length.
        length: i64,
    },
    /// A symbol is missing from the plan or fixed twice.
    #[error("{0}")]
    Symbol(String),
    /// A length exceeds the largest value the sequence symbol may take.
    #[error("length #{index} is {length}: the plan's {symbol} takes at most {max}")]
    TooLong {
        /// Its index.
        index: usize,
        /// The length.
        length: i64,
        /// The symbol.
        symbol: String,
        /// Its largest valid value.
        max: i64,
    },
    /// Even alone, the longest sequence does not fit.
    #[error(
        "a batch of one sequence of length {length} (bound {symbol}={seq}) does not fit: {reason}"
    )]
    DoesNotFit {
        /// The length.
        length: i64,
        /// The sequence symbol.
        symbol: String,
        /// Its padded value.
        seq: i64,
        /// The finalize error, or the added time over the cap.
        reason: String,
    },
    /// Finalize failed for a reason other than the budget.
    #[error("finalize at {bind}: {source}")]
    Finalize {
        /// The bindings, as text.
        bind: String,
        /// Why.
        source: FinalizeError,
    },
}

/// The three policies' packings and how they were computed.
#[derive(Clone, Debug, Serialize)]
pub struct PackReport {
    /// Lengths packed.
    pub lengths: usize,
    /// Real tokens in all.
    pub tokens: i64,
    /// Budget, bytes.
    pub budget_bytes: i64,
    /// The device profile (serialized as its name).
    pub device: DeviceId,
    /// Added-time cap, fraction of the step.
    pub max_added_fraction: f64,
    /// Ebb's packing, then the baselines with the runtime's decisions, then the baselines
    /// without decisions (left out when the longest sequence does not fit without them).
    pub packings: Vec<Packing>,
    /// Ebb's tokens per step over the fixed-token baseline's.
    pub gain_vs_fixed_tokens: f64,
    /// Ebb's tokens per step over the bucket baseline's.
    pub gain_vs_buckets: f64,
    /// Ebb's tokens per step over the fixed-token baseline's without decisions (`None` when
    /// the longest sequence does not fit without them).
    pub gain_vs_fixed_tokens_without_decisions: Option<f64>,
    /// Finalizes run (each `(B, S)` at most once).
    pub finalizes: usize,
    /// Wall time of Ebb's packing, ms.
    pub ebb_ms: f64,
    /// Wall time of all three, ms.
    pub total_ms: f64,
}

/// Packs `lengths` with every policy (see the module docs).
///
/// # Errors
/// [`PackError`]: empty or non-positive lengths, symbols the plan does not have, a length
/// above the sequence symbol's range, a sequence that does not fit alone, or a finalize
/// error other than an infeasible budget.
pub fn pack(plan: &Plan, lengths: &[i64], opts: &PackOptions) -> Result<PackReport, PackError> {
    let t0 = Instant::now();
    let finalizer = Finalizer::new(plan);
    let mut o = Oracle::new(plan, &finalizer, lengths, opts)?;
    let ebb = o.ebb()?;
    let ebb_ms = t0.elapsed().as_secs_f64() * 1e3;
    let fixed = o.fixed_tokens()?;
    let buckets = o.buckets()?;
    // The baselines as a trainer without Ebb's runtime runs them: no decisions, the
    // scheduled peak must fit.
    let mut bare = o.without_decisions();
    let (bare_fixed, bare_buckets) = match bare.fixed_tokens() {
        Ok(f) => (Some(f), Some(bare.buckets()?)),
        Err(PackError::DoesNotFit { .. }) => (None, None),
        Err(e) => return Err(e),
    };
    let finalizes = o.finalizes + bare.finalizes;
    let gain = |p: &Packing| ebb.tokens_per_step / p.tokens_per_step.max(f64::MIN_POSITIVE);
    Ok(PackReport {
        lengths: lengths.len(),
        tokens: lengths.iter().sum(),
        budget_bytes: opts.budget,
        device: opts.device.name.clone(),
        max_added_fraction: opts.max_added_fraction,
        gain_vs_fixed_tokens: gain(&fixed),
        gain_vs_buckets: gain(&buckets),
        gain_vs_fixed_tokens_without_decisions: bare_fixed.as_ref().map(gain),
        packings: [
            Some(ebb),
            Some(fixed),
            Some(buckets),
            bare_fixed,
            bare_buckets,
        ]
        .into_iter()
        .flatten()
        .collect(),
        finalizes,
        ebb_ms,
        total_ms: t0.elapsed().as_secs_f64() * 1e3,
    })
}

/// Memoized finalizes and capacities of one plan at one budget.
#[derive(Clone)]
struct Oracle<'p> {
    finalizer: &'p Finalizer<&'p Plan>,
    opts: &'p PackOptions,
    /// Budget, device and decision kinds of every finalize (no offsets).
    finalize: FinalizeOptions,
    lengths: &'p [i64],
    /// Indices, longest first (ties by index).
    order: Vec<usize>,
    b_valid: ValueGrid,
    s_valid: ValueGrid,
    /// `(B, S)` → the cost when it fits, `None` when it does not.
    memo: HashMap<(i64, i64), Option<ShapeCost>>,
    /// `S` → the largest fitting `B` (0: none).
    capacity: BTreeMap<i64, i64>,
    finalizes: usize,
}

impl<'p> Oracle<'p> {
    fn new(
        plan: &'p Plan,
        finalizer: &'p Finalizer<&'p Plan>,
        lengths: &'p [i64],
        opts: &'p PackOptions,
    ) -> Result<Oracle<'p>, PackError> {
        if lengths.is_empty() {
            return Err(PackError::Empty);
        }
        if let Some((index, &length)) = lengths.iter().enumerate().find(|(_, &l)| l < 1) {
            return Err(PackError::BadLength { index, length });
        }
        let known = plan.symbols.symbols();
        let names = known
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", ");
        for s in [&opts.batch_symbol, &opts.seq_symbol] {
            if !known.contains(s) {
                return Err(PackError::Symbol(format!(
                    "the plan has no symbol `{}` (it has {names})",
                    s.name(),
                )));
            }
            if opts.fixed.contains_key(s) {
                return Err(PackError::Symbol(format!(
                    "`{}` is packed, it cannot also be fixed",
                    s.name()
                )));
            }
        }
        // A fixed value of a symbol the plan does not have would be silently ignored (and the
        // plan's own symbol left at its default).
        if let Some(s) = opts.fixed.keys().find(|s| !known.contains(s)) {
            return Err(PackError::Symbol(format!(
                "fixed symbol `{}` is not a symbol of the plan (it has {names})",
                s.name(),
            )));
        }
        let grid = |s: &Symbol| {
            plan.symbols.grid(s).ok_or_else(|| {
                PackError::Symbol(format!("no value of `{}` satisfies its facts", s.name()))
            })
        };
        let (b_valid, s_valid) = (grid(&opts.batch_symbol)?, grid(&opts.seq_symbol)?);
        if let Some((index, &length)) = lengths
            .iter()
            .enumerate()
            .find(|(_, &l)| s_valid.up(l).is_none())
        {
            return Err(PackError::TooLong {
                index,
                length,
                symbol: opts.seq_symbol.name().to_string(),
                max: s_valid.hi,
            });
        }
        let mut order: Vec<usize> = (0..lengths.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(lengths[i]), i));
        Ok(Oracle {
            finalizer,
            opts,
            // Without offsets (faster), under the target the trainer's finalize with offsets
            // decides under, so that both agree.
            finalize: FinalizeOptions {
                budget: Some(arena_target(opts.budget)),
                device: opts.device.clone(),
                kinds: opts.kinds.clone(),
                offsets: false,
            },
            lengths,
            order,
            b_valid,
            s_valid,
            memo: HashMap::new(),
            capacity: BTreeMap::new(),
            finalizes: 0,
        })
    }

    /// The same oracle with no decisions allowed (nothing memoized yet).
    fn without_decisions(&self) -> Oracle<'p> {
        let mut bare = self.clone();
        bare.finalize.kinds.clear();
        bare.memo.clear();
        bare.capacity.clear();
        bare.finalizes = 0;
        bare
    }

    fn bindings(&self, b: i64, s: i64) -> Bindings {
        let mut bind = self.opts.fixed.clone();
        bind.insert(self.opts.batch_symbol.clone(), b);
        bind.insert(self.opts.seq_symbol.clone(), s);
        bind
    }

    /// The padded sequence value of length index `i` (valid by [`Oracle::new`]'s check).
    fn seq_of(&self, i: usize) -> i64 {
        self.s_valid.up(self.lengths[i]).unwrap_or(self.s_valid.hi)
    }

    /// Finalizes at `(b, s)` once: the cost when the batch fits.
    fn fits(&mut self, b: i64, s: i64) -> Result<Option<ShapeCost>, PackError> {
        if let Some(c) = self.memo.get(&(b, s)) {
            return Ok(c.clone());
        }
        let bind = self.bindings(b, s);
        self.finalizes += 1;
        let cost = match self.finalizer.finalize(&bind, &self.finalize) {
            Ok(c) => {
                let cost = ShapeCost {
                    peak_bytes: c.peak_bytes_planned,
                    peak_bytes_scheduled: c.peak_bytes_scheduled,
                    recompute_decisions: count(&c.decisions, DecisionKind::Recompute),
                    swap_decisions: count(&c.decisions, DecisionKind::Swap),
                    added_us: c.overhead_us,
                    step_us: c.step_us,
                };
                (cost.peak_bytes <= self.opts.budget
                    && cost.added_fraction() <= self.opts.max_added_fraction)
                    .then_some(cost)
            }
            Err(FinalizeError::Infeasible { .. }) => None,
            Err(source) => {
                return Err(PackError::Finalize {
                    bind: bind.to_text(),
                    source,
                })
            }
        };
        self.memo.insert((b, s), cost.clone());
        Ok(cost)
    }

    /// The largest fitting valid `B ≤ limit` at `s` (0 when none): galloping search from the
    /// capacity at the next longer `S` known (which fits at `s` when capacity does not grow
    /// with `S`), bounded by the capacity at the next shorter `S` known.
    fn capacity(&mut self, s: i64) -> Result<i64, PackError> {
        let limit = self.lengths.len() as i64;
        if let Some(&c) = self.capacity.get(&s) {
            return Ok(c);
        }
        let mut lo = self.capacity.range(s + 1..).next().map_or(0, |(_, &c)| c);
        let mut hi = self
            .capacity
            .range(..s)
            .next_back()
            .map_or(limit, |(_, &c)| c)
            .min(limit);
        hi = self.b_valid.down(hi).unwrap_or(0);
        if lo == 0 {
            match self.b_valid.up(1) {
                Some(b1) if b1 <= hi && self.fits(b1, s)?.is_some() => lo = b1,
                _ => hi = 0,
            }
        }
        // Galloping: lo fits, try lo + d for d = 1, 2, 4, … until one fails or passes hi.
        let mut step = 1;
        while lo < hi {
            let Some(next) = self.b_valid.up(lo + step).filter(|&v| v <= hi) else {
                break;
            };
            if self.fits(next, s)?.is_some() {
                lo = next;
                step *= 2;
            } else {
                hi = self.b_valid.down(next - 1).unwrap_or(lo);
                break;
            }
        }
        // Binary search in (lo, hi].
        while lo < hi {
            let mid = self
                .b_valid
                .up(lo + (hi - lo + 1) / 2)
                .unwrap_or(hi)
                .min(hi);
            if self.fits(mid, s)?.is_some() {
                lo = mid;
            } else {
                hi = self.b_valid.down(mid - 1).unwrap_or(lo);
            }
        }
        self.capacity.insert(s, lo);
        Ok(lo)
    }

    /// A batch of the sorted lengths `order[from..from + n]` at `s`, shrunk until it fits.
    fn batch(&mut self, from: usize, n: i64, s: i64) -> Result<Batch, PackError> {
        let mut n = n.max(1);
        loop {
            let b = self.b_valid.up(n).unwrap_or(n);
            if let Some(cost) = self.fits(b, s)? {
                let indices: Vec<usize> = self.order[from..from + n as usize].to_vec();
                let tokens: i64 = indices.iter().map(|&i| self.lengths[i]).sum();
                return Ok(Batch {
                    indices,
                    batch: b,
                    seq: s,
                    tokens,
                    padding_tokens: b * s - tokens,
                    cost,
                });
            }
            if n == 1 {
                return Err(self.does_not_fit(from, s));
            }
            n -= 1;
        }
    }

    fn does_not_fit(&self, from: usize, s: i64) -> PackError {
        let length = self.lengths[self.order[from]];
        let b = self.b_valid.up(1).unwrap_or(1);
        let reason = match self
            .finalizer
            .finalize(&self.bindings(b, s), &self.finalize)
        {
            Err(e) => e.to_string(),
            Ok(c) => format!(
                "the decisions add {:.1}% to the modelled step, above the cap of {:.1}%",
                100.0 * c.overhead_us / c.step_us.max(f64::MIN_POSITIVE),
                100.0 * self.opts.max_added_fraction
            ),
        };
        PackError::DoesNotFit {
            length,
            symbol: self.opts.seq_symbol.name().to_string(),
            seq: s,
            reason,
        }
    }

    fn totals(&self, policy: Policy, batches: Vec<Batch>, parameter: Option<i64>) -> Packing {
        totals(policy, !self.finalize.kinds.is_empty(), batches, parameter)
    }

    /// [`Policy::Ebb`].
    fn ebb(&mut self) -> Result<Packing, PackError> {
        let mut batches = Vec::new();
        let mut from = 0;
        while from < self.order.len() {
            let s = self.seq_of(self.order[from]);
            let cap = self.capacity(s)?;
            if cap == 0 {
                return Err(self.does_not_fit(from, s));
            }
            let n = cap.min((self.order.len() - from) as i64);
            let batch = self.batch(from, n, s)?;
            from += batch.indices.len();
            batches.push(batch);
        }
        Ok(self.totals(Policy::Ebb, batches, None))
    }

    /// Batches of the sorted lengths with `B · S ≤ t`, or the first batch head whose count
    /// does not fit, with its `S`.
    fn token_batches(&mut self, t: i64) -> Result<Result<Vec<Batch>, i64>, PackError> {
        let mut batches = Vec::new();
        let mut from = 0;
        while from < self.order.len() {
            let s = self.seq_of(self.order[from]);
            let n = (t / s).clamp(1, (self.order.len() - from) as i64);
            let b = self.b_valid.up(n).unwrap_or(n);
            if self.fits(b, s)?.is_none() {
                return Ok(Err(s));
            }
            let batch = self.batch(from, n, s)?;
            from += batch.indices.len();
            batches.push(batch);
        }
        Ok(Ok(batches))
    }

    /// [`Policy::FixedTokens`]: `T` lowered from the longest sequence's capacity until every
    /// batch fits.
    fn fixed_tokens(&mut self) -> Result<Packing, PackError> {
        let s_max = self.seq_of(self.order[0]);
        let mut t = (self.capacity(s_max)? + 1) * s_max - 1;
        loop {
            match self.token_batches(t)? {
                Ok(batches) => return Ok(self.totals(Policy::FixedTokens, batches, Some(t))),
                Err(s) => {
                    let cap = self.capacity(s)?;
                    if cap == 0 || t <= s {
                        let from = self.order.iter().position(|&i| self.seq_of(i) == s);
                        return Err(self.does_not_fit(from.unwrap_or(0), s));
                    }
                    // The largest T whose count at this S fits: T / S ≤ cap.
                    t = ((cap + 1) * s - 1).min(t - 1).max(s);
                }
            }
        }
    }

    /// [`Policy::Buckets`].
    fn buckets(&mut self) -> Result<Packing, PackError> {
        let w = self.opts.bucket_width.max(1);
        let edge = |o: &Self, i: usize| {
            let l = o.lengths[i];
            o.s_valid
                .up((l + w - 1) / w * w)
                .unwrap_or_else(|| o.seq_of(i))
        };
        let s_top = edge(self, self.order[0]);
        let size = self.capacity(s_top)?.max(1);
        let mut batches = Vec::new();
        let mut from = 0;
        while from < self.order.len() {
            let s = edge(self, self.order[from]);
            let mut n = 0usize;
            while from + n < self.order.len()
                && (n as i64) < size
                && edge(self, self.order[from + n]) == s
            {
                n += 1;
            }
            let batch = self.batch(from, n as i64, s)?;
            from += batch.indices.len();
            batches.push(batch);
        }
        Ok(self.totals(Policy::Buckets, batches, Some(size)))
    }
}

fn count(d: &[crate::format::Decision], kind: DecisionKind) -> usize {
    d.iter().filter(|d| d.kind == kind).count()
}

/// A packing's totals.
fn totals(policy: Policy, decisions: bool, batches: Vec<Batch>, parameter: Option<i64>) -> Packing {
    let steps = batches.len();
    let tokens: i64 = batches.iter().map(|b| b.tokens).sum();
    let padding: i64 = batches.iter().map(|b| b.padding_tokens).sum();
    let added: f64 = batches.iter().map(|b| b.cost.added_us).sum();
    let step: f64 = batches.iter().map(|b| b.cost.step_us).sum();
    let mut shapes: Vec<(i64, i64)> = batches.iter().map(|b| (b.batch, b.seq)).collect();
    shapes.sort_unstable();
    shapes.dedup();
    Packing {
        policy,
        decisions,
        steps,
        tokens_per_step: tokens as f64 / steps.max(1) as f64,
        padding_fraction: padding as f64 / (tokens + padding).max(1) as f64,
        max_peak_bytes: batches.iter().map(|b| b.cost.peak_bytes).max().unwrap_or(0),
        added_fraction: if step > 0.0 { added / step } else { 0.0 },
        distinct_shapes: shapes.len(),
        parameter,
        batches,
    }
}
