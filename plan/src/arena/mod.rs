//! Arena offset assignment: every device-resident interval of every value (after evictions a
//! value can have several) gets a byte offset in one arena, such that intervals that are
//! resident at the same point never overlap in memory.
//!
//! Two layouts, each of a cost bounded by construction (no work cap), and the
//! smaller arena kept:
//! - the online scan (`arena/scan.rs`): program points in order, a free list sorted by address,
//!   best-fit placement — the policy of classic allocators, O(n + points + n·f) for f free
//!   blocks — with the small intervals in per-size slabs above the others;
//! - the anchored layout (`arena/anchored.rs`): the [`ANCHORS`] largest intervals placed first
//!   by greedy by size (TFLite's offline planner, the family of XLA's heap simulator;
//!   `arena/greedy.rs`), then the same scan around them; a plan of at most [`GREEDY_UP_TO`]
//!   intervals is placed by greedy by size alone (every interval an anchor). Run only when the
//!   scan's arena is more than [`SCAN_KEPT_WITHIN`] above the lower bound (the largest live
//!   bytes at a point, or the planned peak where that is larger), in at most
//!   [`ANCHOR_ORDERS`] orders of the anchors, stopped at the first order within it. Where the
//!   caller bounds the arena (finalize: the budget) and the scan is within [`SCAN_KEPT_WITHIN`]
//!   of the peak but over the bound, at most [`REPAIR_ORDERS`] orders are tried (in a plan of
//!   more than [`GREEDY_UP_TO`] intervals), stopped at the first within the bound: a repair of
//!   the offsets that keeps the decisions.
//!
//! # Cost, bounded by construction
//! For n intervals, f free blocks at a time and K = n if n ≤ [`GREEDY_UP_TO`] else
//! [`ANCHORS`]: one layout is the scan, O(n log n + points + n·f), plus at most
//! [`ANCHOR_ORDERS`] anchored orders of O(n log n + points + K² + n·(f + K)) each (the
//! anchors' greedy pass reads each pair of anchors at most once: at most K²/2 reads). There is no search and no work cap: a plan's layout does the same
//! work on every shape, whatever the arena it reaches.
//!
//! On the long-tail benchmark's plans (`bench/benches/finalize_longtail.rs`: GPT-2 small and
//! the 24-layer GPT, budgets from none to half the program-order peak) the anchored layout
//! lands within 4.1% of the planned peak where the scan leaves up to 29%
//! (docs/results/2026-11-28-finalize-bounded.md).
//!
//! An in-place write ([`Plan::in_place_writes`]: a result written into the buffer of an
//! operand that dies at its op) joins the operand's last interval and the result's first into
//! one interval placed once, so both values get the same offset, as the executor stores them.
//!
//! Offsets are aligned to [`ALIGN`] bytes. The arena size over the planned peak is the
//! fragmentation the layout costs (`Arena::fragmentation`; at most 1.03 on the fixtures'
//! plans, with and without budgets: `tests/tests/finalize.rs`).

#[doc(hidden)]
pub mod anchored;
#[doc(hidden)]
pub mod greedy;
mod intervals;
#[doc(hidden)]
pub mod scan;

use crate::csr::Csr;
use crate::format::{Decision, Plan, Point, ValueId};
use crate::index::{IndexVec, IntervalIx, PieceIx, PointIx, ValueIx, Window};
use anchored::{anchored_layout, anchored_layout_beside};
use greedy::Item;
use intervals::Piece;
use scan::{best_fit_scan_with, small_bytes, Placement};
use serde::Serialize;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

/// Alignment of every offset in bytes.
pub const ALIGN: i64 = 64;

/// One placed interval: `value` is resident at points `[start, end]` at `offset`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Allocation {
    /// Value id (index into `Plan::values`).
    pub value: ValueId,
    /// First point of residency.
    pub start: Point,
    /// Last point of residency (inclusive).
    pub end: Point,
    /// Byte offset in the arena.
    pub offset: i64,
    /// Size in bytes (unaligned).
    pub bytes: i64,
}

/// The arena layout.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Arena {
    /// Arena size in bytes.
    pub arena_bytes: i64,
    /// `arena_bytes / peak resident bytes` (1.0 = no fragmentation).
    pub fragmentation: f64,
    /// Placed intervals, by start point.
    pub allocations: Vec<Allocation>,
    /// In-place writes placed at one offset: `(operand, result)`; the operand's interval ends
    /// at the point the result's starts.
    pub shared: Vec<(ValueId, ValueId)>,
}

/// `x` bytes rounded up to a multiple of [`ALIGN`].
#[doc(hidden)]
pub fn align(x: i64) -> i64 {
    (x + ALIGN - 1) / ALIGN * ALIGN
}

/// Device residency intervals of every value under `decisions` (offsets 0), in value order.
pub fn residency_intervals(
    plan: &Plan,
    value_bytes: &[i64],
    decisions: &[Decision],
) -> Vec<Allocation> {
    let pieces = intervals::pieces(plan, &live_windows(plan), value_bytes, decisions);
    pieces
        .all()
        .iter()
        .map(|p| allocation(p, value_bytes, 0))
        .collect()
}

/// The points `[def, last_use]` of every value of `plan`.
pub(crate) fn live_windows(plan: &Plan) -> IndexVec<ValueIx, Window> {
    plan.values
        .iter()
        .map(|v| Window::new(v.def.into(), v.last_use.into()))
        .collect()
}

/// Piece `p` placed at `offset`.
fn allocation(p: &Piece, value_bytes: &[i64], offset: i64) -> Allocation {
    Allocation {
        value: p.value.into(),
        start: p.window.start.into(),
        end: p.window.end.into(),
        offset,
        bytes: value_bytes.get(p.value.index()).copied().unwrap_or(0),
    }
}

/// A layout within this fraction of the lower bound (the largest live bytes at a point, or the
/// planned peak where that is larger) is good enough: the online scan's is kept without the
/// anchored layouts, and the anchored layouts end at the first order within it.
pub const SCAN_KEPT_WITHIN: f64 = 0.02;

/// How many of the largest intervals the anchored layout places first by greedy by size, in a
/// plan of more than [`GREEDY_UP_TO`] intervals. Its anchors cost at most ANCHORS²/2 reads of
/// placed anchors; on the long-tail benchmark's plans 512 leave the arena within 4.1% of the planned
/// peak where 128 leave up to 20% and 2048 gain nothing over 512
/// (docs/results/2026-11-28-finalize-bounded.md).
pub const ANCHORS: usize = 512;

/// A plan of at most this many intervals is laid out by greedy by size over all of them (every
/// interval an anchor, no slabs): at most GREEDY_UP_TO²/2 = 2 M reads of placed intervals per
/// order. Small
/// plans tie many equal sizes, which the scan around 512 anchors packs less well (the unfused
/// `torch_gpt2_tiny_ce_adam`, 1 133 intervals, under half its program-order peak on
/// `h100-sxm-pcie5`: 1.0506 of the planned peak with 512 anchors, 1.0490 with all).
pub const GREEDY_UP_TO: usize = 2048;

/// How many of the largest intervals the layout of one fixed order
/// ([`assign_offsets_order`]) places first: half of [`ANCHORS`], a quarter of the anchors'
/// pairs to read. On the 24-layer GPT (B=8, the long-tail benchmark's 64 lengths under
/// `fixed-mid-median` on `h100-sxm-pcie5`, each in the order that packs best at a
/// neighbouring sample) 256 anchors pack within the budget wherever 512 do, with the same
/// decisions to within 0.02 points of the step; 128 need a second layout at two more
/// lengths (S=250, 256).
pub const ORDER_ANCHORS: usize = ANCHORS / 2;

/// The anchors of the layout of one fixed order in a plan of `n` intervals: all of them up
/// to [`GREEDY_UP_TO`], else [`ORDER_ANCHORS`].
fn order_anchors_of(n: usize) -> usize {
    if n <= GREEDY_UP_TO {
        n
    } else {
        ORDER_ANCHORS
    }
}

/// The anchors of a plan of `n` intervals: all of them up to [`GREEDY_UP_TO`], else
/// [`ANCHORS`].
fn anchors_of(n: usize) -> usize {
    if n <= GREEDY_UP_TO {
        n
    } else {
        ANCHORS
    }
}

/// How many orders of the anchors (greedy by size's [`VARIANTS`](greedy::VARIANTS), in order)
/// the anchored layout tries at most, ending at the first within [`SCAN_KEPT_WITHIN`]. On the
/// long-tail benchmark's plans the first alone leaves up to 8.5% over the planned peak, the
/// first two 4.1%; later orders matter on small plans whose sizes tie (the unfused
/// `torch_gpt2_tiny_ce_adam` at half its program-order peak, with 512 anchors: the sixth order
/// packs best, 1.0506 of the planned peak where the first two leave 1.066).
pub const ANCHOR_ORDERS: usize = 8;

/// How many orders of the anchors the anchored layout tries to bring a scan that is within
/// [`SCAN_KEPT_WITHIN`] of the peak under the caller's bound ([`assign_offsets_within`]), in a
/// plan of more than [`GREEDY_UP_TO`] intervals (a smaller plan is not repaired). One:
/// each order costs about a third of a layout, and where the first does not fit the bound
/// finalize decides again (docs/results/2026-11-29-finalize-one-layout.md).
pub const REPAIR_ORDERS: usize = 1;

/// As [`assign_offsets`], and where the arena exceeds `fit` bytes while the scan is within
/// [`SCAN_KEPT_WITHIN`] of the peak, at most [`REPAIR_ORDERS`] anchored orders are tried to
/// bring it within `fit` (see the module docs). The arena is never larger than
/// [`assign_offsets`]'s.
pub fn assign_offsets_within(
    plan: &Plan,
    value_bytes: &[i64],
    decisions: &[Decision],
    peak: i64,
    fit: i64,
) -> Arena {
    lay_out_now(plan, value_bytes, decisions, peak, Some(fit))
}

/// Assigns offsets to all residency intervals (see the module docs): the online best-fit scan,
/// and where it is not within [`SCAN_KEPT_WITHIN`] of the lower bound the anchored layouts,
/// the smallest arena kept. `peak` (bytes)
/// is the planned peak that `Arena::fragmentation` divides by.
pub fn assign_offsets(
    plan: &Plan,
    value_bytes: &[i64],
    decisions: &[Decision],
    peak: i64,
) -> Arena {
    lay_out_now(plan, value_bytes, decisions, peak, None)
}

/// [`assign_offsets_live`] with the plan's live windows, never cancelled.
fn lay_out_now(
    plan: &Plan,
    value_bytes: &[i64],
    decisions: &[Decision],
    peak: i64,
    fit: Option<i64>,
) -> Arena {
    let never = AtomicBool::new(false);
    assign_offsets_live(
        plan,
        &live_windows(plan),
        value_bytes,
        decisions,
        peak,
        fit,
        &AtomicBool::new(false),
        &never,
    )
    .unwrap_or_default()
}

/// As [`assign_offsets`], with each value's `[def, last_use]` points given (`live`; the
/// finalizer holds them prepared) and the caller's bound on the arena, if any (`fit`, bytes:
/// [`assign_offsets_within`]); `None` when `cancel` is set before the layout is done (a
/// speculative layout no longer needed).
///
/// `futile` carries what a caller's earlier layouts of the same plan at the same shape learnt
/// about the repair: set once a repair's anchored order did not come below the scan (the
/// anchored layout of these intervals packs no tighter than the scan; decisions a few
/// candidates apart lay out alike), and while set no repair is tried, so a finalize that lays
/// out several decisions pays for at most one futile repair.
#[allow(clippy::too_many_arguments)]
pub(crate) fn assign_offsets_live(
    plan: &Plan,
    live: &IndexVec<ValueIx, Window>,
    value_bytes: &[i64],
    decisions: &[Decision],
    peak: i64,
    fit: Option<i64>,
    futile: &AtomicBool,
    cancel: &AtomicBool,
) -> Option<Arena> {
    lay_out(
        plan,
        live,
        value_bytes,
        decisions,
        peak,
        fit,
        futile,
        cancel,
        None,
    )
}

/// The layout of one fixed order, chosen ahead (`finalize/atlas.rs` keeps the order that
/// packed best at a neighbouring shape): the online best-fit scan (`order` `None`), of cost
/// O(n log n + points + n·f), or the anchored layout in greedy by size's order `order` (an
/// index of [`VARIANTS`](greedy::VARIANTS)) alone with at most [`ORDER_ANCHORS`] anchors, its
/// slabs placed as the scan places them, on a helper thread beside the large intervals (a plan
/// of at most [`GREEDY_UP_TO`] intervals: greedy by size over all), of cost O(n log n + points
/// + K² + n·(f + K)); whatever arena it reaches. `live` and `peak` as in [`assign_offsets_live`].
pub(crate) fn assign_offsets_order(
    plan: &Plan,
    live: &IndexVec<ValueIx, Window>,
    value_bytes: &[i64],
    decisions: &[Decision],
    peak: i64,
    order: Option<usize>,
) -> Arena {
    assign_offsets_order_within(plan, live, value_bytes, decisions, peak, order, None)
}

/// As [`assign_offsets_order`], and where the scan (`order` `None`) exceeds `fallback`'s bound
/// (bytes), the anchored layout in `fallback`'s order (an index of
/// [`VARIANTS`](greedy::VARIANTS), [`ORDER_ANCHORS`] anchors) of the same intervals, its slabs
/// the scan's (not made again), abandoned once its top exceeds the bound: kept where it fits
/// the bound, else the scan's arena is returned. One layout of the decisions in place of a
/// second decision and layout (`finalize/atlas.rs`'s fast path where a shape's scan fragments
/// more than its neighbours'); at most O(K² + n·(f + K)) more than the scan.
pub(crate) fn assign_offsets_order_within(
    plan: &Plan,
    live: &IndexVec<ValueIx, Window>,
    value_bytes: &[i64],
    decisions: &[Decision],
    peak: i64,
    order: Option<usize>,
    fallback: Option<(usize, i64)>,
) -> Arena {
    let never = AtomicBool::new(false);
    lay_out(
        plan,
        live,
        value_bytes,
        decisions,
        peak,
        fallback.map(|f| f.1),
        &AtomicBool::new(true),
        &never,
        Some(match order {
            Some(order) => Fixed::Anchored(order),
            None => Fixed::Scan(fallback.map(|f| f.0)),
        }),
    )
    .unwrap_or_default()
}

/// Whether the layout of these intervals ([`assign_offsets_live`]: `live` and `peak` as there)
/// is surely at least `beat` bytes: the online best-fit scan exceeds `fit` and reaches `beat`,
/// and so does the anchored layout in each of the [`ANCHOR_ORDERS`] orders that layout tries
/// (each abandoned there), so every arena it can keep does. `false` at the first that stays
/// below `beat`, where the scan fits `fit`, or when `cancel` is set. Of cost at most that
/// layout's, and about one scan where the scan or the first order stays below `beat`: what
/// finalize's comparison of plan variants screens a result with before laying it out in full
/// (`finalize/variants.rs`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn every_order_reaches(
    plan: &Plan,
    live: &IndexVec<ValueIx, Window>,
    value_bytes: &[i64],
    decisions: &[Decision],
    peak: i64,
    fit: i64,
    beat: i64,
    cancel: &AtomicBool,
) -> bool {
    let pieces = intervals::pieces(plan, live, value_bytes, decisions);
    let items = intervals::group_items(plan, &pieces, value_bytes).items;
    let slabs = |placement: &IndexVec<IntervalIx, Placement>| slab_offsets(placement);
    let Some((scan, slab_above)) = best_fit_scan_with(&items, peak, true, cancel, slabs) else {
        return false;
    };
    if scan.top <= fit || scan.top < beat {
        return false;
    }
    (0..ANCHOR_ORDERS).all(|order| {
        anchored_layout(
            items.raw(),
            small_bytes(peak),
            anchors_of(items.len()),
            order,
            beat,
            Some((&slab_above, scan.slab_height())),
            cancel,
        )
        .is_some_and(|(_, top)| top >= beat)
    })
}

/// The one order a layout is fixed to ([`assign_offsets_order_within`]).
#[derive(Clone, Copy)]
enum Fixed {
    /// That anchored order (an index of [`VARIANTS`](greedy::VARIANTS)) alone.
    Anchored(usize),
    /// The scan, then, where it exceeds the layout's `fit`, this anchored order (if any) with
    /// the scan's slabs.
    Scan(Option<usize>),
}

/// [`assign_offsets_live`] (`fixed`: `None`), or the one order `fixed` names
/// ([`assign_offsets_order_within`]).
#[allow(clippy::too_many_arguments)]
fn lay_out(
    plan: &Plan,
    live: &IndexVec<ValueIx, Window>,
    value_bytes: &[i64],
    decisions: &[Decision],
    peak: i64,
    fit: Option<i64>,
    futile: &AtomicBool,
    cancel: &AtomicBool,
    fixed: Option<Fixed>,
) -> Option<Arena> {
    let pieces = intervals::pieces(plan, live, value_bytes, decisions);
    let intervals::Intervals {
        items,
        interval_of,
        shared,
    } = intervals::group_items(plan, &pieces, value_bytes);
    // (The anchored layout of a fixed order places the large intervals itself: the scan's
    // placements go unread.)
    let scanned = !matches!(fixed, Some(Fixed::Anchored(_)));
    // (The scan of a fixed order without a fallback order is the whole layout: no anchored
    // layout reads the slabs.)
    let anchors_possible = !matches!(fixed, Some(Fixed::Scan(None)));
    // The output (one allocation per piece, by start point), made meanwhile, its offsets
    // assigned below, with the scan's placement of each allocation's interval.
    let output = |placement: &IndexVec<IntervalIx, Placement>| {
        let by_start: Vec<PieceIx> =
            Csr::<PointIx, PieceIx>::group(pieces.all(), |p| p.window.start).into_entries();
        let allocations: Vec<Allocation> = by_start
            .iter()
            .map(|&i| allocation(pieces.get(i), value_bytes, 0))
            .collect();
        let intervals: Vec<IntervalIx> = by_start.iter().map(|&i| interval_of[i]).collect();
        let placements: Vec<Placement> = if scanned {
            intervals.iter().map(|&k| placement[k]).collect()
        } else {
            Vec::new()
        };
        // Each small interval's place in the slabs (the anchored layout's too; none for the
        // scan alone).
        let slab_above: Vec<i64> = if anchors_possible {
            slab_offsets(&placement)
        } else {
            Vec::new()
        };
        (allocations, placements, intervals, slab_above)
    };
    if let Some(Fixed::Anchored(order)) = fixed {
        // The anchored layout alone, never abandoned, the slabs made beside it (the scan of
        // the small intervals alone).
        let ((offsets, top), (mut allocations, intervals)) = anchored_layout_beside(
            items.raw(),
            small_bytes(peak),
            order_anchors_of(items.len()),
            order,
            cancel,
            || {
                let (scan, (allocations, _, intervals, slab_above)) =
                    best_fit_scan_with(&items, peak, false, cancel, output)?;
                Some((slab_above, scan.slab_height(), (allocations, intervals)))
            },
        )?;
        for (a, &k) in allocations.iter_mut().zip(&intervals) {
            a.offset = offsets[k.index()];
        }
        return Some(Arena {
            arena_bytes: top,
            fragmentation: if peak > 0 {
                top as f64 / peak as f64
            } else {
                1.0
            },
            allocations,
            shared,
        });
    }
    let (mut scan, (mut allocations, placements, intervals, slab_above)) =
        best_fit_scan_with(&items, peak, scanned, cancel, output)?;
    let slabs = (slab_above.as_slice(), scan.slab_height());
    // Fragmentation is measured against the planned peak, which can exceed the intervals'
    // live bytes (it also counts region and regeneration transients): the target is the
    // larger. The live bytes are only counted when the scan is not within reach of the peak.
    let within = |bound: i64, f: f64| (bound as f64 * (1.0 + f)) as i64;
    // The anchored layout's offsets of every interval, where it beats the scan.
    let mut anchored: Option<Vec<i64>> = None;
    // Within reach of the peak but over `fit`: the anchored layout tries to repair that,
    // where its order is of [`ANCHORS`] anchors (over all intervals of a smaller plan, an
    // order costs several layouts: GPT-2 small under half its program-order peak).
    let repair = fit.filter(|&f| {
        items.len() > GREEDY_UP_TO
            && scan.top > f
            && scan.top <= within(peak, SCAN_KEPT_WITHIN)
            && !futile.load(Ordering::Relaxed)
    });
    // The scan of a fixed order over `fit`: its fallback order, kept where it fits `fit`.
    if let (Some(Fixed::Scan(Some(order))), Some(fit)) = (fixed, fit) {
        if scan.top > fit {
            let (offsets, top) = anchored_layout(
                items.raw(),
                small_bytes(peak),
                order_anchors_of(items.len()),
                order,
                fit.saturating_add(1),
                Some(slabs),
                cancel,
            )?;
            if top <= fit {
                (scan.top, anchored) = (top, Some(offsets));
            }
        }
    }
    // (The scan of a fixed order is the layout, whatever arena it reaches.)
    if fixed.is_none() && (scan.top > within(peak, SCAN_KEPT_WITHIN) || repair.is_some()) {
        let good_enough = match repair {
            Some(f) => f,
            None => within(live_max(&items).max(peak), SCAN_KEPT_WITHIN),
        };
        let anchors = anchors_of(items.len());
        let orders = if repair.is_some() {
            REPAIR_ORDERS
        } else {
            ANCHOR_ORDERS
        };
        for order in 0..orders {
            if scan.top <= good_enough {
                break;
            }
            // Abandoned (no offsets) once it reaches the smallest top so far.
            let (offsets, top) = anchored_layout(
                items.raw(),
                small_bytes(peak),
                anchors,
                order,
                scan.top,
                Some(slabs),
                cancel,
            )?;
            if top < scan.top {
                (scan.top, anchored) = (top, Some(offsets));
            }
        }
        if repair.is_some() && anchored.is_none() {
            futile.store(true, Ordering::Relaxed);
        }
    }
    match &anchored {
        Some(offsets) => {
            for (a, &k) in allocations.iter_mut().zip(&intervals) {
                a.offset = offsets[k.index()];
            }
        }
        None => {
            for (a, &placed) in allocations.iter_mut().zip(&placements) {
                a.offset = scan.offset(placed);
            }
        }
    }
    let top = scan.top;
    let fragmentation = if peak > 0 {
        top as f64 / peak as f64
    } else {
        1.0
    };
    Some(Arena {
        arena_bytes: top,
        fragmentation,
        allocations,
        shared,
    })
}

/// The largest sum of aligned sizes resident at one point (bytes): no layout is smaller.
#[doc(hidden)]
pub fn live_max(items: &IndexVec<IntervalIx, Item>) -> i64 {
    let points = items
        .iter()
        .map(|it| it.window.after() + 1)
        .max()
        .unwrap_or(0);
    let mut delta = vec![0i64; points];
    for it in items.iter() {
        delta[it.window.start.index()] += it.need;
        delta[it.window.after()] -= it.need;
    }
    let mut live = 0i64;
    delta
        .iter()
        .map(|d| {
            live += d;
            live
        })
        .max()
        .unwrap_or(0)
}

/// Checks that no two intervals resident at a common point overlap in memory (for tests),
/// except the two intervals of a pair in [`Arena::shared`], which touch at one point at one
/// offset.
pub fn check_layout(arena: &Arena) -> Result<(), String> {
    let shared: HashSet<(ValueId, ValueId)> = arena.shared.iter().copied().collect();
    let joined = |a: &Allocation, b: &Allocation| {
        a.offset == b.offset
            && ((a.end == b.start && shared.contains(&(a.value, b.value)))
                || (b.end == a.start && shared.contains(&(b.value, a.value))))
    };
    let mut v: Vec<&Allocation> = arena.allocations.iter().collect();
    v.sort_by_key(|a| a.offset);
    for (i, a) in v.iter().enumerate() {
        if a.offset % ALIGN != 0 || a.offset + a.bytes > arena.arena_bytes {
            return Err(format!(
                "value {} at {} does not fit the arena",
                a.value, a.offset
            ));
        }
        for b in &v[i + 1..] {
            if b.offset >= a.offset + a.bytes {
                break;
            }
            if a.start <= b.end && b.start <= a.end && !joined(a, b) {
                return Err(format!(
                    "values {} and {} overlap in memory and in time",
                    a.value, b.value
                ));
            }
        }
    }
    Ok(())
}

/// Each small interval's place in the slabs (0 for a large one), by interval.
fn slab_offsets(placement: &IndexVec<IntervalIx, Placement>) -> Vec<i64> {
    placement
        .iter()
        .map(|&p| match p {
            Placement::Slab(above) => above,
            Placement::Large(_) => 0,
        })
        .collect()
}
