//! Op scheduling: a topological order of the ops that lowers peak memory, decided on symbolic
//! shapes (BladeDISC++ §3.1 "operation scheduling", arXiv 2412.16985; XLA's
//! `DefaultMemoryScheduler`, which likewise runs several schedulers and keeps the best).
//!
//! [`schedule`] builds candidate schedules ([`Strategy`]):
//! * the memory-pressure list scheduler (`list.rs`): each ready op's *effect* is the bytes its
//!   results allocate minus the bytes freed by the operands it is the last user of; either
//!   smallest effect first ([`Strategy::MemoryGreedy`]) or "ops that free at least what they
//!   allocate first, otherwise program order" ([`Strategy::FreeFirst`]);
//! * a depth-first post-order, heavier operand subtrees first (`dfs.rs`,
//!   [`Strategy::DepthFirst`]), and free-first list scheduling with ties broken by it
//!   ([`Strategy::DepthFirstFreeFirst`]);
//! * a peak-directed local search (`refine.rs`) that sinks allocating ops past the peak and
//!   hoists freeing ops before it, applied to program order ([`Strategy::LocalSearch`]) and to
//!   the best [`ScheduleOptions::refine`] heuristic schedules.
//!
//! Each candidate's peak ([`crate::memory`]) is evaluated at representative bindings of the
//! graph's scope (plus [`ScheduleOptions::bindings`]); [`schedule`] returns the candidate with
//! the smallest mean peak relative to program order *among those no worse than program order
//! at any of those bindings* — program order itself when none is better, so a graph is
//! reordered only when that pays. [`schedule_checked`] also guarantees, on a caller's sweep of
//! bindings, that the result's peak is never above program order's, falling back to the next
//! candidate and finally to program order.
//!
//! # Comparing symbolic sizes
//! Effects are symbolic. They are compared through keys that agree with every ordering
//! [`SymbolScope::compare`] can prove, and resolve `Unknown` comparisons by the sum over
//! representative bindings, each normalized by its total bytes (`context.rs` explains why
//! this is exact for proven orderings and costs O(1) per comparison instead of a proof per
//! pair of ready ops). Ties go to program order.
//!
//! Dependencies are dataflow only: `optimization_barrier` and `while` ops are scheduled like
//! any op (after their operands, before their users).
//!
//! Invariant: every schedule returned is a topological permutation of the graph's non-input
//! ops. Cost: `O(strategies * (ops + edges) * log(ops))` for the heuristics, plus at most
//! `(1 + refine) * refine::MAX_EVALS` evaluations of `O(values + edges + samples * ops)` for
//! the local search (well under a second on the 24-layer GPT-2 fixture).
//!
//! [`SymbolScope::compare`]: ebb_ir::SymbolScope::compare

#[doc(hidden)]
pub mod context;
mod dfs;
mod list;
mod pass;
mod placement;
mod refine;

use crate::memory::{lower_bound_of, validate_schedule, Liveness, Schedule, ScheduleError};
use context::Ctx;
use ebb_ir::{Bindings, Graph, OpKind, Symbol};
use list::Priority;
pub use pass::{SchedulePass, Scheduled};
pub use placement::pin_placements;
use serde::Serialize;
use std::collections::HashSet;
use std::fmt;

/// A scheduling heuristic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Strategy {
    /// The graph's program order, unchanged.
    ProgramOrder,
    /// List scheduling, smallest effect (allocated − freed bytes) first.
    MemoryGreedy,
    /// List scheduling, ops that free at least what they allocate first, otherwise program
    /// order.
    FreeFirst,
    /// Depth-first post-order, heavier operand subtrees first.
    DepthFirst,
    /// [`Strategy::FreeFirst`] over the depth-first order: depth-first, but every op that
    /// frees at least what it allocates runs as soon as it is ready.
    DepthFirstFreeFirst,
    /// Program order improved by the peak-directed local search (`refine.rs`).
    LocalSearch,
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Strategy::ProgramOrder => "program-order",
            Strategy::MemoryGreedy => "memory-greedy",
            Strategy::FreeFirst => "free-first",
            Strategy::DepthFirst => "depth-first",
            Strategy::DepthFirstFreeFirst => "depth-first+free-first",
            Strategy::LocalSearch => "local-search",
        })
    }
}

/// Options of [`schedule`].
#[derive(Clone, Debug)]
pub struct ScheduleOptions {
    /// Number of representative bindings of the scope to sample (size keys and the choice
    /// between candidates). Default 8.
    pub samples: usize,
    /// Further bindings to optimize for (e.g. the shapes expected in training); those that
    /// break a fact of the scope are ignored.
    pub bindings: Vec<Bindings>,
    /// Heuristics to try besides program order. Default: all.
    pub strategies: Vec<Strategy>,
    /// How many of the best heuristic schedules (by mean peak at the samples) the local
    /// search of `refine.rs` then improves. Default 2; 0 switches it off.
    pub refine: usize,
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        ScheduleOptions {
            samples: 8,
            bindings: Vec::new(),
            strategies: vec![
                Strategy::FreeFirst,
                Strategy::MemoryGreedy,
                Strategy::DepthFirst,
                Strategy::DepthFirstFreeFirst,
                Strategy::LocalSearch,
            ],
            refine: 2,
        }
    }
}

/// Peaks of program order and of the returned schedule at one binding of a sweep (bytes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SweepPoint {
    /// The binding, as `{symbol: value}` text (`B=4, S=128`).
    pub bindings: String,
    /// Peak of program order (`None` when it cannot be evaluated there).
    pub program_order: Option<i64>,
    /// Peak of the returned schedule.
    pub scheduled: Option<i64>,
    /// [`crate::memory::lower_bound`] there.
    pub lower_bound: Option<i64>,
}

/// What [`schedule_checked`] did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScheduleReport {
    /// The heuristic whose schedule was returned.
    pub strategy: Strategy,
    /// The heuristic [`schedule`] preferred (on its samples).
    pub preferred: Strategy,
    /// True when the preferred schedule was rejected because its peak was above program
    /// order's at some binding of the sweep.
    pub fell_back: bool,
    /// Peaks at each binding of the sweep.
    pub sweep: Vec<SweepPoint>,
    /// Each candidate's peak relative to program order's at the samples.
    pub candidates: Vec<CandidateReport>,
}

/// A candidate schedule's peak relative to program order's (1.0 = same) at the sampled
/// bindings; a candidate with `max_ratio > 1` is never returned.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CandidateReport {
    /// The heuristic.
    pub strategy: Strategy,
    /// Mean of the ratios (the ranking key).
    pub mean_ratio: f64,
    /// Largest ratio.
    pub max_ratio: f64,
    /// Whether the local search (`refine.rs`) was applied to it.
    pub refined: bool,
}

impl fmt::Display for ScheduleReport {
    /// A readable table of the report (bytes).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "strategy: {} (preferred {}, fell back: {})",
            self.strategy, self.preferred, self.fell_back
        )?;
        for c in &self.candidates {
            writeln!(
                f,
                "candidate {}{}: peak {:.4} x program order on average, {:.4} x at worst",
                c.strategy,
                if c.refined { " (refined)" } else { "" },
                c.mean_ratio,
                c.max_ratio
            )?;
        }
        let opt = |x: Option<i64>| x.map_or_else(|| "-".to_string(), |v| v.to_string());
        for p in &self.sweep {
            writeln!(
                f,
                "{}: program order {}, scheduled {}, lower bound {}",
                p.bindings,
                opt(p.program_order),
                opt(p.scheduled),
                opt(p.lower_bound)
            )?;
        }
        Ok(())
    }
}

/// One candidate schedule with its peaks at the samples.
struct Candidate {
    strategy: Strategy,
    order: Vec<u32>,
    peaks: Vec<i64>,
    /// Mean of `peaks[k] / program_order_peaks[k]`.
    score: f64,
    /// Whether the local search improved it.
    refined: bool,
}

/// The candidates of `opts.strategies` (program order first), scored at the samples.
fn candidates(ctx: &Ctx, opts: &ScheduleOptions) -> Vec<Candidate> {
    let program: Vec<u32> = (0..ctx.num_ops() as u32).collect();
    let base = ctx.sample_peaks(&program);
    let mut out = vec![Candidate {
        strategy: Strategy::ProgramOrder,
        order: program.clone(),
        peaks: base.clone(),
        score: 1.0,
        refined: false,
    }];
    for &strategy in &opts.strategies {
        if out.iter().any(|c| c.strategy == strategy) {
            continue;
        }
        let order = match strategy {
            Strategy::ProgramOrder => continue,
            Strategy::MemoryGreedy => list::list_schedule(ctx, Priority::Greedy, &program),
            Strategy::FreeFirst => list::list_schedule(ctx, Priority::FreeFirst, &program),
            Strategy::DepthFirst => dfs::dfs_schedule(ctx),
            Strategy::DepthFirstFreeFirst => {
                list::list_schedule(ctx, Priority::FreeFirst, &rank_of(&dfs::dfs_schedule(ctx)))
            }
            Strategy::LocalSearch => refine::refine(ctx, program.clone(), &base),
        };
        debug_assert_eq!(order.len(), ctx.num_ops());
        let peaks = ctx.sample_peaks(&order);
        let score = relative(&peaks, &base);
        out.push(Candidate {
            strategy,
            order,
            peaks,
            score,
            refined: false,
        });
    }
    // Local search on the best few heuristic schedules (not on program order, which
    // `Strategy::LocalSearch` covers).
    let mut best: Vec<usize> = (1..out.len())
        .filter(|&i| out[i].strategy != Strategy::LocalSearch)
        .collect();
    best.sort_by(|&a, &b| out[a].score.total_cmp(&out[b].score));
    for i in best.into_iter().take(opts.refine) {
        let order = refine::refine(ctx, std::mem::take(&mut out[i].order), &base);
        let peaks = ctx.sample_peaks(&order);
        out[i].score = relative(&peaks, &base);
        out[i].order = order;
        out[i].peaks = peaks;
        out[i].refined = true;
    }
    out
}

/// `rank[op]` = position of `op` in `order`.
fn rank_of(order: &[u32]) -> Vec<u32> {
    let mut rank = vec![0u32; order.len()];
    for (i, &op) in order.iter().enumerate() {
        rank[op as usize] = i as u32;
    }
    rank
}

/// Mean of `a[k] / b[k]` (1.0 for no samples).
fn relative(a: &[i64], b: &[i64]) -> f64 {
    if a.is_empty() {
        return 1.0;
    }
    a.iter()
        .zip(b)
        .map(|(&x, &y)| x as f64 / (y.max(1)) as f64)
        .sum::<f64>()
        / a.len() as f64
}

/// Candidate indices that are no worse than program order at every sample, best score
/// first (program order, index 0, breaks ties: it comes first and the sort is stable).
fn ranked(cands: &[Candidate]) -> Vec<usize> {
    let base = &cands[0].peaks;
    let mut ok: Vec<usize> = (0..cands.len())
        .filter(|&i| cands[i].peaks.iter().zip(base).all(|(a, b)| a <= b))
        .collect();
    ok.sort_by(|&a, &b| cands[a].score.total_cmp(&cands[b].score));
    ok
}

/// A schedule of `g`'s non-input ops with low peak memory (see the module docs). Never worse
/// than program order at the sampled bindings; program order when no heuristic is better.
pub fn schedule(g: &Graph, opts: &ScheduleOptions) -> Schedule {
    let ctx = Ctx::new(g, opts.samples, &valid(g, &opts.bindings));
    let cands = candidates(&ctx, opts);
    let best = ranked(&cands)[0];
    ctx.to_schedule(&cands[best].order)
}

/// [`schedule`], checked on `sweep`: the peak of the returned schedule is at most program
/// order's at every binding of `sweep` where program order's can be evaluated. When the
/// preferred schedule is higher somewhere, the next-best candidate that passes is returned,
/// else program order (`fell_back` in the report).
pub fn schedule_checked(
    g: &Graph,
    opts: &ScheduleOptions,
    sweep: &[Bindings],
) -> (Schedule, ScheduleReport) {
    let ctx = Ctx::new(g, opts.samples, &valid(g, &opts.bindings));
    let cands = candidates(&ctx, opts);
    let ranking = ranked(&cands);
    let preferred = ranking[0];
    let sweep_sizes: Vec<Option<Vec<i64>>> =
        sweep.iter().map(|b| ctx.info.sizes.eval(b).ok()).collect();
    let peaks_on_sweep = |order: &[u32]| -> Vec<Option<i64>> {
        let live = Liveness::from_info(&ctx.info, &ctx.to_schedule(order));
        sweep_sizes
            .iter()
            .map(|v| {
                v.as_ref()
                    .and_then(|v| live.resident_from_sizes(v).ok())
                    .map(|r| crate::memory::argmax(&r).0)
            })
            .collect()
    };
    let base = peaks_on_sweep(&cands[0].order);
    let mut chosen = 0;
    let mut chosen_peaks = base.clone();
    for &i in &ranking {
        let peaks = if i == 0 {
            base.clone()
        } else {
            peaks_on_sweep(&cands[i].order)
        };
        let passes = peaks.iter().zip(&base).all(|(p, b)| match (p, b) {
            (_, None) => true,
            (Some(p), Some(b)) => p <= b,
            (None, Some(_)) => false,
        });
        if passes {
            chosen = i;
            chosen_peaks = peaks;
            break;
        }
    }
    let sweep_points = sweep
        .iter()
        .zip(&sweep_sizes)
        .enumerate()
        .map(|(k, (b, v))| SweepPoint {
            bindings: binding_text(b),
            program_order: base[k],
            scheduled: chosen_peaks[k],
            lower_bound: v.as_ref().and_then(|v| lower_bound_of(&ctx.info, v).ok()),
        })
        .collect();
    let report = ScheduleReport {
        strategy: cands[chosen].strategy,
        preferred: cands[preferred].strategy,
        fell_back: chosen != preferred,
        sweep: sweep_points,
        candidates: cands
            .iter()
            .map(|c| CandidateReport {
                strategy: c.strategy,
                mean_ratio: c.score,
                max_ratio: c
                    .peaks
                    .iter()
                    .zip(&cands[0].peaks)
                    .map(|(&a, &b)| a as f64 / b.max(1) as f64)
                    .reduce(f64::max)
                    .unwrap_or(1.0),
                refined: c.refined,
            })
            .collect(),
    };
    (ctx.to_schedule(&cands[chosen].order), report)
}

/// Schedules for the runtime to choose from per shape, the first what [`schedule`] returns.
///
/// No single order is best at every shape (short sequences favour one order, long ones
/// another), so a plan carries several and the runtime picks, at the actual shape, the one
/// with the lowest evaluated peak. They are chosen to cover the symbol space
/// ([`variant_points`]): at each point the graph is scheduled as for that shape alone (the
/// candidates of [`schedule`] with sizes evaluated there only, what `--bind` gets), every
/// candidate found anywhere is evaluated at every point, and, after the first, the schedules
/// that bring the most points within [`VARIANT_TOLERANCE`] of the best candidate there are
/// added greedily (set cover), at most `max` in all.
///
/// Cost: one [`schedule`] per point (at most [`VARIANT_POINTS`]) plus the evaluation of each
/// distinct candidate at every point.
pub fn schedule_variants(
    g: &Graph,
    opts: &ScheduleOptions,
    max: usize,
) -> Vec<(Strategy, Schedule)> {
    let mut ctx = Ctx::new(g, opts.samples, &valid(g, &opts.bindings));
    let cands = candidates(&ctx, opts);
    let first = ranked(&cands)[0];
    let max = max.max(1);
    let mut pool: Vec<(Strategy, Vec<u32>)> = Vec::new();
    let mut seen: HashSet<Vec<u32>> = HashSet::new();
    let mut add = |pool: &mut Vec<(Strategy, Vec<u32>)>, strategy, order: Vec<u32>| {
        if seen.insert(order.clone()) {
            pool.push((strategy, order));
        }
    };
    add(&mut pool, cands[first].strategy, cands[first].order.clone());
    for i in ranked(&cands) {
        add(&mut pool, cands[i].strategy, cands[i].order.clone());
    }
    if max == 1 {
        return vec![(pool[0].0, ctx.to_schedule(&pool[0].1))];
    }
    let points = variant_points(g);
    let mut eval = ctx.bindings.clone();
    for b in &points {
        ctx.rebind(vec![b.clone()]);
        if ctx.samples.is_empty() {
            continue;
        }
        eval.push(ctx.bindings[0].clone());
        for c in candidates(&ctx, opts) {
            add(&mut pool, c.strategy, c.order);
        }
    }
    ctx.rebind(eval);
    let peaks: Vec<Vec<i64>> = pool.iter().map(|(_, o)| ctx.sample_peaks(o)).collect();
    let n = ctx.samples.len();
    let best: Vec<i64> = (0..n)
        .map(|k| peaks.iter().map(|p| p[k]).min().unwrap_or(0))
        .collect();
    let good =
        |c: usize, k: usize| peaks[c][k] as f64 <= best[k] as f64 * (1.0 + VARIANT_TOLERANCE);
    let mut covered: Vec<bool> = (0..n).map(|k| good(0, k)).collect();
    let mut kept = vec![0];
    while kept.len() < max {
        // The candidate covering most points not yet covered; ties: lowest mean peak
        // relative to the best there.
        let rel = |c: usize| {
            (0..n)
                .map(|k| peaks[c][k] as f64 / best[k].max(1) as f64)
                .sum::<f64>()
        };
        let Some((c, gain)) = (0..pool.len())
            .filter(|c| !kept.contains(c))
            .map(|c| (c, (0..n).filter(|&k| !covered[k] && good(c, k)).count()))
            .filter(|&(_, gain)| gain > 0)
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| rel(b.0).total_cmp(&rel(a.0))))
        else {
            break;
        };
        debug_assert!(gain > 0);
        for (k, cov) in covered.iter_mut().enumerate() {
            *cov |= good(c, k);
        }
        kept.push(c);
    }
    kept.into_iter()
        .map(|c| (pool[c].0, ctx.to_schedule(&pool[c].1)))
        .collect()
}

/// A kept variant covers a point when its peak there is within this fraction of the best
/// candidate's.
pub const VARIANT_TOLERANCE: f64 = 0.005;

/// At most this many points of the symbol space are scheduled for by [`schedule_variants`].
pub const VARIANT_POINTS: usize = 32;

/// Largest value [`variant_points`] gives a symbol without an upper bound.
const VARIANT_CAP: i64 = 256;

/// Points of `g`'s symbol space to schedule for: for every free symbol (one not solved by an
/// equality) a ladder of valid values from its smallest up to its largest (capped at
/// `VARIANT_CAP`), each twice the last, and their cross product; the longest ladder is
/// coarsened (each value 4, 8, ... times the last) until at most [`VARIANT_POINTS`] points
/// remain.
/// Points that break a fact of the scope are dropped; none when the scope declares no symbol.
pub fn variant_points(g: &Graph) -> Vec<Bindings> {
    let solved: HashSet<Symbol> = g
        .scope
        .equalities()
        .iter()
        .map(|(s, _)| s.clone())
        .collect();
    let free: Vec<Symbol> = g
        .scope
        .symbols()
        .into_iter()
        .filter(|s| !solved.contains(s))
        .collect();
    if free.is_empty() {
        return Vec::new();
    }
    let mut factors = vec![2; free.len()];
    let ladders = loop {
        let ladders: Vec<Vec<i64>> = free
            .iter()
            .zip(&factors)
            .map(|(s, &f)| ladder(&g.scope, s, f))
            .collect();
        let n = ladders
            .iter()
            .map(Vec::len)
            .fold(1usize, usize::saturating_mul);
        // Coarsen the longest ladder.
        let longest = (0..free.len()).max_by_key(|&i| (ladders[i].len(), usize::MAX - i));
        match longest {
            Some(i) if n > VARIANT_POINTS && factors[i] < 1 << 20 => factors[i] *= 2,
            _ => break ladders,
        }
    };
    let mut points = vec![Bindings::new()];
    for (s, values) in free.iter().zip(&ladders) {
        points = points
            .into_iter()
            .flat_map(|b| {
                values.iter().map(move |&v| {
                    let mut b = b.clone();
                    b.insert(s.clone(), v);
                    b
                })
            })
            .collect();
    }
    points.truncate(VARIANT_POINTS);
    valid(g, &points)
}

/// Valid values of `s` from its smallest to its largest (capped), each at least `factor`
/// times the last (the largest always included).
fn ladder(scope: &ebb_ir::SymbolScope, s: &Symbol, factor: i64) -> Vec<i64> {
    let Some(grid) = scope.grid(s) else {
        return Vec::new();
    };
    let Some(hi) = grid.down(grid.hi.min(VARIANT_CAP.max(grid.lo))) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut x = grid.lo;
    while let Some(v) = grid.up(x).filter(|&v| v < hi) {
        out.push(v);
        x = v.saturating_mul(factor).max(v + 1);
    }
    out.push(hi);
    out
}

/// The bindings of `bs` that satisfy `g.scope`'s facts.
fn valid(g: &Graph, bs: &[Bindings]) -> Vec<Bindings> {
    bs.iter()
        .filter_map(|b| {
            g.scope
                .complete(b)
                .ok()
                .filter(|b| g.scope.check(b).is_ok())
        })
        .collect()
}

/// `B=4, S=128`.
pub fn binding_text(b: &Bindings) -> String {
    b.iter()
        .map(|(s, v)| format!("{}={v}", s.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Sets `g`'s program order to its inputs (in their current order) followed by `s`.
///
/// # Errors
/// [`ScheduleError`] when `s` is not a topological permutation of the non-input ops.
pub fn apply_schedule(g: &mut Graph, s: &Schedule) -> Result<(), ScheduleError> {
    validate_schedule(g, s)?;
    let mut order: Vec<_> = g
        .order()
        .iter()
        .copied()
        .filter(|&id| g.node(id).kind() == OpKind::Input)
        .collect();
    order.extend_from_slice(s);
    g.set_order(order);
    Ok(())
}

/// The raw schedule of heuristic `strategy` on `g` (default options), without the comparison
/// with program order; for tests and experiments.
pub fn candidate_schedule(g: &Graph, strategy: Strategy) -> Schedule {
    let opts = ScheduleOptions {
        strategies: vec![strategy],
        ..Default::default()
    };
    let ctx = Ctx::new(g, opts.samples, &[]);
    let cands = candidates(&ctx, &opts);
    let c = cands
        .iter()
        .find(|c| c.strategy == strategy)
        .unwrap_or(&cands[0]);
    ctx.to_schedule(&c.order)
}
