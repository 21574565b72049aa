//! Candidate search: the gaps in which an intermediate value is resident but unused, and for
//! each gap how the value can be brought back (recompute and/or swap).
//!
//! Follows BladeDISC++ (arXiv 2412.16985, §3.2 "rematerialization candidates": tensors whose
//! next use is far away, with a recompute subgraph over tensors that stay resident), in the
//! spirit of XLA's `HloRematerialization` (bounded recompute of a value from live operands).
//!
//! # Rules
//! 1. *Gaps.* For an intermediate value with definition point `d` and read points
//!    `u1 < u2 < ...`, every pair of consecutive touch points `(t, t')` of `d, u1, u2, ...`
//!    with at least `min_gap` points strictly between them is a *window*: the value may be
//!    evicted after `t` and must be back before `t'`. Values proven smaller than `min_bytes`
//!    are skipped. Graph inputs and outputs are not candidates.
//! 2. *Availability.* A value `w` is *available* at point `r` when its live range covers `r`
//!    (`def(w) < r <= last_use(w)`) and no window of `w` has `evict_after < r <=
//!    regenerate_before`. Windows of every value count, whether or not their candidate is
//!    taken later, so an available value is resident before `r` under *any* set of decisions.
//! 3. *Recompute subgraph.* Starting at the value's producer, operands that are available at
//!    `regenerate_before` are read; the others are recomputed too, up to `max_recompute_ops`
//!    ops. Inputs, `while`, `custom_call` and `optimization_barrier` are never recomputed (no
//!    producer, unknown cost, opaque effects, or a scheduling fence).
//! 4. *No memory expansion.* The recompute's transient bytes (all results of the recomputed
//!    ops except the value itself) must be provably at most the bytes the eviction saves;
//!    otherwise, e.g. a `slice` of a large `broadcast_in_dim` that is no longer resident, the
//!    regeneration would need more memory than the eviction frees.
//! 5. *Swap* is allowed for every window (no operands needed). The reload is issued
//!    `prefetch_distance` points before the next use (never before `evict_after + 1`).
//!
//! Invariant: every subset of the returned candidates, each taken as any of its allowed kinds,
//! is a valid plan (checked independently by `crate::plan::check`).

use super::cost;
use super::index::ScheduleIndex;
use super::{CandidateOptions, RematError};
use ebb_ir::plan::{Candidate, DecisionKind, ValueClass, ValueId};
use ebb_ir::{DimExpr, Graph, NodeId, OpKind};

/// Why a window has no recompute option.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// The producer (or an op it would need) cannot be recomputed (input, `while`,
    /// `custom_call`, `optimization_barrier`); names the op's position in program order.
    NotRecomputable(usize),
    /// More than `max_recompute_ops` ops would be needed.
    TooManyOps,
    /// The transient bytes are not proven to be at most the bytes saved.
    MemoryExpanding,
    /// Recompute is disabled by the options.
    Disabled,
}

/// The candidates of a schedule, and for each the reason it has no recompute option (if so).
#[derive(Clone, Debug, Default)]
pub struct Found {
    /// The candidates, sorted by (value, window).
    pub candidates: Vec<Candidate>,
    /// Parallel to `candidates`: `Some(reason)` when recompute is not offered.
    pub rejections: Vec<Option<Rejection>>,
    /// Windows dropped because neither recompute nor swap is possible or allowed.
    pub dropped: Vec<(ValueId, Rejection)>,
}

/// Whether ops of `kind` may be recomputed (rule 3).
pub fn recomputable(kind: OpKind) -> bool {
    !matches!(kind, OpKind::Input | OpKind::While | OpKind::CustomCall | OpKind::OptimizationBarrier)
}

/// Finds the candidates of `g` under the schedule indexed by `idx` (see the module docs).
///
/// # Errors
/// [`RematError::Dim`] when a size or cost overflows.
pub fn find(g: &Graph, idx: &ScheduleIndex, opts: &CandidateOptions) -> Result<Found, RematError> {
    let values = idx.values();
    // Rule 1: windows, per value (CSR).
    let mut win_start = vec![0usize; values.len() + 1];
    let mut windows: Vec<(usize, usize)> = Vec::new();
    for (v, val) in values.iter().enumerate() {
        if val.class == ValueClass::Intermediate && !too_small(g, &val.bytes, opts.min_bytes) {
            let mut prev = val.def;
            for &u in idx.uses(v) {
                if u > prev && u - prev > opts.min_gap.max(1) {
                    windows.push((prev, u));
                }
                prev = u;
            }
        }
        win_start[v + 1] = windows.len();
    }
    let wins = |v: ValueId| &windows[win_start[v]..win_start[v + 1]];
    // Rule 2.
    let available = |w: ValueId, r: usize| {
        let val = &values[w];
        val.def < r && r <= val.last_use && !wins(w).iter().any(|&(e, rr)| e < r && r <= rr)
    };
    let mut found = Found::default();
    for (v, val) in values.iter().enumerate() {
        for &(e, r) in wins(v) {
            let recompute = if opts.allow_recompute {
                regenerate(g, idx, v, r, opts, &available)?
            } else {
                Err(Rejection::Disabled)
            };
            let mut kinds = Vec::new();
            if recompute.is_ok() {
                kinds.push(DecisionKind::Recompute);
            }
            if opts.allow_swap {
                kinds.push(DecisionKind::Swap);
            }
            if kinds.is_empty() {
                found.dropped.push((v, recompute.err().unwrap_or(Rejection::Disabled)));
                continue;
            }
            let prefetch_at = r.saturating_sub(opts.prefetch_distance).max(e + 1);
            let (sub, rejection) = match recompute {
                Ok(sub) => (sub, None),
                Err(why) => (Regen::default(), Some(why)),
            };
            found.candidates.push(Candidate {
                value: v,
                evict_after: e,
                regenerate_before: r,
                prefetch_at,
                recompute: sub.ops,
                recompute_reads: sub.reads,
                bytes_saved: val.bytes.clone(),
                recompute_flops: sub.flops,
                transient_bytes: sub.transient,
                swap_bytes: val.bytes.clone(),
                kinds,
            });
            found.rejections.push(rejection);
        }
    }
    Ok(found)
}

/// True when `bytes` is proven below `min_bytes`.
fn too_small(g: &Graph, bytes: &DimExpr, min_bytes: i64) -> bool {
    if let Some(c) = bytes.as_const() {
        return c < min_bytes;
    }
    matches!(g.scope.bounds(bytes).1, Some(hi) if hi < min_bytes)
}

/// A recompute subgraph: ops (positions, in execution order), the values it reads, its FLOPs
/// and transient bytes.
#[derive(Default)]
struct Regen {
    ops: Vec<usize>,
    reads: Vec<ValueId>,
    flops: DimExpr,
    transient: DimExpr,
}

/// Rules 3 and 4 for value `v` regenerated before point `r`.
fn regenerate(
    g: &Graph,
    idx: &ScheduleIndex,
    v: ValueId,
    r: usize,
    opts: &CandidateOptions,
    available: &dyn Fn(ValueId, usize) -> bool,
) -> Result<Result<Regen, Rejection>, RematError> {
    let root = g.order()[idx.values()[v].node];
    if !recomputable(g.node(root).kind) {
        return Ok(Err(Rejection::NotRecomputable(idx.position(root))));
    }
    let mut set: Vec<NodeId> = vec![root];
    let mut reads: Vec<ValueId> = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        for w in g.operands(n) {
            let wid = idx.value_id(w);
            if set.contains(&w.node) || reads.contains(&wid) {
                continue;
            }
            if available(wid, r) {
                reads.push(wid);
                continue;
            }
            if !recomputable(g.node(w.node).kind) {
                return Ok(Err(Rejection::NotRecomputable(idx.position(w.node))));
            }
            if set.len() >= opts.max_recompute_ops {
                return Ok(Err(Rejection::TooManyOps));
            }
            set.push(w.node);
            stack.push(w.node);
        }
    }
    set.sort_unstable_by_key(|&n| idx.point(n));
    let values = idx.values();
    let mut transient = DimExpr::zero();
    let mut flops = DimExpr::zero();
    for &n in &set {
        flops = flops.checked_add(&cost::try_flops(g, n)?)?;
        for w in idx.results(n) {
            if w != v {
                transient = transient.checked_add(&values[w].bytes)?;
            }
        }
    }
    if !transient.is_zero() && !g.scope.prove_le(&transient, &values[v].bytes) {
        return Ok(Err(Rejection::MemoryExpanding));
    }
    reads.sort_unstable();
    let ops = set.iter().map(|&n| idx.position(n)).collect();
    Ok(Ok(Regen { ops, reads, flops, transient }))
}
