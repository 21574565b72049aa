//! Candidate search: the gaps in which an intermediate value is resident but unused, and for
//! each gap how the value can be brought back (recompute and/or swap).
//!
//! Follows BladeDISC++ (arXiv 2412.16985, §3.2 "rematerialization candidates": tensors whose
//! next use is far away, with a recompute subgraph over tensors that stay resident), in the
//! spirit of XLA's `HloRematerialization` (bounded recompute of a value from live operands).
//!
//! # Rules
//! 1. *Gaps.* For an intermediate value (not a graph input or output, not proven smaller than
//!    `min_bytes`) with definition point `d`, read points `u1 < u2 < ...` and *pins* `q1, ...`
//!    (rule 3), every pair of consecutive touch points `(t, t')` of `d, u.., q..` with more
//!    than `min_gap` points strictly between them is a *window*: the value may be evicted
//!    after `t` and must be back before `t'`.
//! 2. *Recompute subgraph.* Starting at the value's producer, an operand whose baseline live
//!    range covers the regeneration point `r` (`def < r <= last_use`: inputs, parameters and
//!    values still in use) is read; any other operand is recomputed as well, up to
//!    `max_recompute_ops` ops. Inputs, `while`, `custom_call` and `optimization_barrier` are
//!    never recomputed (no producer, unknown cost, opaque effects, a scheduling fence).
//! 3. *Pins.* A value read by a recompute at `r` must be resident at `r` whatever else is
//!    decided, so `r` becomes one of its touch points: its windows never contain `r`, and a
//!    window that ends at `r` regenerates it before the reader (regenerations at the same
//!    point run in candidate order, and a read value has a smaller id than its reader).
//! 4. *No memory expansion.* The recompute's transient bytes (the most bytes of results of the
//!    recomputed ops other than the value itself that are live at once, each freed after its
//!    last reader in the recompute) must be provably at most the bytes the eviction saves;
//!    otherwise, e.g. for a `slice` of a large `broadcast_in_dim` that is no longer resident,
//!    the regeneration would need more memory than the eviction frees.
//! 5. *Swap* is allowed for every window (it reads nothing). The reload is issued
//!    `prefetch_distance` points before the next use (never before `evict_after + 1`).
//! 6. *Placed on the host.* A result of an `annotate_device_placement` to a host memory kind
//!    (the user's offload policy) is a candidate whatever its size, in every window with at
//!    least one point strictly between its ends, unless [`OffloadPolicy::Ignore`]; under
//!    [`OffloadPolicy::Force`] its swap options are *forced* ([`Found::forced`]): the plan
//!    must take them (swap is offered for them even when `allow_swap` is off).
//!
//! Invariant: every subset of the returned candidates, each taken as any of its allowed kinds,
//! is a valid plan (checked independently by `crate::plan::check`). Candidates are sorted by
//! (value, window). Cost: one pass over the values in decreasing id order, with at most
//! `max_recompute_ops` ops visited per window.

use super::cost;
use super::index::ScheduleIndex;
use super::{CandidateOptions, OffloadPolicy, RematError};
use ebb_ir::{DimExpr, Graph, NodeId, Op, OpKind};
use ebb_plan::format::{Candidate, DecisionKind, OpPos, Point, ValueClass, ValueId};

/// Why a window has no recompute option.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// The producer (or an op it would need) cannot be recomputed (input, `while`,
    /// `custom_call`, `optimization_barrier`); names the op's position in program order.
    NotRecomputable(OpPos),
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
    /// The values the user placed on the host (rule 6), in id order; empty under
    /// [`OffloadPolicy::Ignore`].
    pub placed: Vec<ValueId>,
    /// Indices into `candidates` of the swaps the plan must take (rule 6 under
    /// [`OffloadPolicy::Force`]), ascending.
    pub forced: Vec<usize>,
}

/// Whether the value `v` (of `idx`) is a result of an `annotate_device_placement` to a host
/// memory kind.
pub fn placed_on_host(g: &Graph, idx: &ScheduleIndex, v: ValueId) -> bool {
    let node = g.order()[idx.values()[v.index()].node.index()];
    matches!(g.node(node).op, Op::AnnotateDevicePlacement(k) if k.is_host())
}

/// Whether ops of `kind` may be recomputed (rule 2).
pub fn recomputable(kind: OpKind) -> bool {
    !matches!(
        kind,
        OpKind::Input
            | OpKind::While
            | OpKind::Case
            | OpKind::CustomCall
            | OpKind::OptimizationBarrier
            | OpKind::AnnotateDevicePlacement
    )
}

/// Finds the candidates of `g` under the schedule indexed by `idx` (see the module docs).
///
/// # Errors
/// [`RematError::Dim`] when a size or cost overflows.
pub fn find(g: &Graph, idx: &ScheduleIndex, opts: &CandidateOptions) -> Result<Found, RematError> {
    let values = idx.values();
    let placed: Vec<bool> = ValueId::all(values.len())
        .map(|v| {
            opts.offload != OffloadPolicy::Ignore
                && values[v.index()].class == ValueClass::Intermediate
                && placed_on_host(g, idx, v)
        })
        .collect();
    let eligible: Vec<bool> = values
        .iter()
        .zip(&placed)
        .map(|(val, &placed)| {
            placed
                || (val.class == ValueClass::Intermediate
                    && !too_small(g, &val.bytes, opts.min_bytes))
        })
        .collect();
    // Rule 3's pins: points at which a recompute of a later value reads this one. Recompute
    // reads are ancestors, with smaller ids, so one pass in decreasing id order sees every pin
    // of a value before windowing it.
    let mut pins: Vec<Vec<Point>> = vec![Vec::new(); values.len()];
    let mut out: Vec<(Candidate, Option<Rejection>)> = Vec::new();
    let mut found = Found::default();
    let mut touches: Vec<Point> = Vec::new();
    for v in ValueId::all(values.len()).rev() {
        if !eligible[v.index()] {
            continue;
        }
        let val = &values[v.index()];
        touches.clear();
        touches.push(val.def);
        touches.extend_from_slice(idx.uses(v));
        touches.append(&mut pins[v.index()]);
        touches.sort_unstable();
        touches.dedup();
        let mut here: Vec<(Candidate, Option<Rejection>)> = Vec::new();
        let (min_gap, swap) = if placed[v.index()] {
            (1, opts.allow_swap || opts.offload == OffloadPolicy::Force)
        } else {
            (opts.min_gap.max(1), opts.allow_swap)
        };
        for pair in touches.windows(2) {
            let (e, r) = (pair[0], pair[1]);
            if r.index() - e.index() <= min_gap {
                continue;
            }
            let recompute = if opts.allow_recompute {
                regenerate(g, idx, v, r, opts)?
            } else {
                Err(Rejection::Disabled)
            };
            let mut kinds = Vec::new();
            if recompute.is_ok() {
                kinds.push(DecisionKind::Recompute);
            }
            if swap {
                kinds.push(DecisionKind::Swap);
            }
            let (sub, rejection) = match recompute {
                Ok(sub) => (sub, None),
                Err(why) if kinds.is_empty() => {
                    found.dropped.push((v, why));
                    continue;
                }
                Err(why) => (Regen::default(), Some(why)),
            };
            for &w in &sub.reads {
                if eligible[w.index()] {
                    pins[w.index()].push(r);
                }
            }
            let candidate = Candidate {
                value: v,
                evict_after: e,
                regenerate_before: r,
                prefetch_at: Point::new(r.index().saturating_sub(opts.prefetch_distance))
                    .max(e.next()),
                recompute: sub.ops,
                recompute_reads: sub.reads,
                bytes_saved: val.bytes.clone(),
                recompute_flops: sub.flops,
                transient_bytes: sub.transient,
                swap_bytes: val.bytes.clone(),
                regen_peak_bytes: sub.peak,
                kinds,
            };
            here.push((candidate, rejection));
        }
        out.extend(here.into_iter().rev());
    }
    found.dropped.reverse();
    for (c, r) in out.into_iter().rev() {
        if placed[c.value.index()]
            && opts.offload == OffloadPolicy::Force
            && c.allows(DecisionKind::Swap)
        {
            found.forced.push(found.candidates.len());
        }
        found.candidates.push(c);
        found.rejections.push(r);
    }
    found.placed = ValueId::all(values.len())
        .filter(|v| placed[v.index()])
        .collect();
    Ok(found)
}

/// The recompute fields of a candidate for value `v` regenerated before `r`, as [`find`]
/// derives them (rules 2–4) whatever the cap on the subgraph's size: the plan verifier's
/// re-derivation of a loaded candidate. `None` when `v` cannot be recomputed at `r`.
///
/// # Errors
/// [`RematError::Dim`] when a size or cost overflows.
pub fn rederive_recompute(
    g: &Graph,
    idx: &ScheduleIndex,
    v: ValueId,
    r: Point,
) -> Result<Option<Recompute>, RematError> {
    let opts = CandidateOptions {
        max_recompute_ops: usize::MAX,
        ..CandidateOptions::default()
    };
    Ok(regenerate(g, idx, v, r, &opts)?.ok().map(|sub| Recompute {
        ops: sub.ops,
        reads: sub.reads,
        flops: sub.flops,
        transient_bytes: sub.transient,
        peak_bytes: sub.peak,
    }))
}

/// A candidate's recompute as [`rederive_recompute`] derives it (the fields of
/// [`Candidate`] of the same names).
#[derive(Clone, Debug, PartialEq)]
pub struct Recompute {
    /// `Candidate::recompute`.
    pub ops: Vec<OpPos>,
    /// `Candidate::recompute_reads`.
    pub reads: Vec<ValueId>,
    /// `Candidate::recompute_flops`.
    pub flops: DimExpr,
    /// `Candidate::transient_bytes`.
    pub transient_bytes: DimExpr,
    /// `Candidate::regen_peak_bytes`.
    pub peak_bytes: Option<DimExpr>,
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
    ops: Vec<OpPos>,
    reads: Vec<ValueId>,
    flops: DimExpr,
    transient: DimExpr,
    /// Largest live bytes during the recompute, the value included (`None` when recompute is
    /// not possible).
    peak: Option<DimExpr>,
}

/// Rules 3 and 4 for value `v` regenerated before point `r`.
fn regenerate(
    g: &Graph,
    idx: &ScheduleIndex,
    v: ValueId,
    r: Point,
    opts: &CandidateOptions,
) -> Result<Result<Regen, Rejection>, RematError> {
    let values = idx.values();
    let available = |w: ValueId| values[w.index()].def < r && r <= values[w.index()].last_use;
    let value = &values[v.index()];
    let root = g.order()[value.node.index()];
    if !recomputable(g.node(root).kind()) {
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
            if available(wid) {
                reads.push(wid);
                continue;
            }
            if !recomputable(g.node(w.node).kind()) {
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
    // Replay the recompute: each transient result lives from its op to its last reader in the
    // set (only at its op when nothing in the set reads it).
    let mut last_reader: Vec<(ValueId, usize)> = Vec::new();
    for (k, &n) in set.iter().enumerate() {
        last_reader.extend(idx.results(n).filter(|&w| w != v).map(|w| (w, k)));
        for w in g.operands(n) {
            let wid = idx.value_id(w);
            if let Some(slot) = last_reader.iter_mut().find(|(x, _)| *x == wid) {
                slot.1 = k;
            }
        }
    }
    let mut flops = DimExpr::zero();
    let mut live = DimExpr::zero();
    let mut steps: Vec<DimExpr> = Vec::new();
    // Live bytes after each op with the value counted once produced (by the last op).
    let mut peaks: Vec<DimExpr> = Vec::new();
    for (k, &n) in set.iter().enumerate() {
        flops = flops.checked_add(&cost::try_flops(g, n)?)?;
        for w in idx.results(n).filter(|&w| w != v) {
            live = live.checked_add(&values[w.index()].bytes)?;
        }
        let with_value = if k + 1 == set.len() {
            live.checked_add(&value.bytes)?
        } else {
            live.clone()
        };
        if !peaks.contains(&with_value) {
            peaks.push(with_value);
        }
        if !live.is_zero() && !steps.contains(&live) {
            if !g.scope.prove_le(&live, &value.bytes) {
                return Ok(Err(Rejection::MemoryExpanding));
            }
            steps.push(live.clone());
        }
        for &(w, last) in &last_reader {
            if last == k {
                live = live.checked_sub(&values[w.index()].bytes)?;
            }
        }
    }
    let transient = match DimExpr::max_of(&steps) {
        None => DimExpr::zero(),
        Some(e) => e?,
    };
    let peak = match DimExpr::max_of(&peaks) {
        None => value.bytes.clone(),
        Some(e) => e?,
    };
    reads.sort_unstable();
    let ops = set.iter().map(|&n| idx.position(n)).collect();
    Ok(Ok(Regen {
        ops,
        reads,
        flops,
        transient,
        peak: Some(peak),
    }))
}
