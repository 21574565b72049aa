//! Greedy by size (TFLite's `GreedyBySize` offline planner; Pisarchyk & Lee, "Efficient Memory
//! Management for Deep Neural Net Inference", 2020, section 4.3; XLA's
//! `GlobalDecreasingSizeBestFitHeap` is the same family): intervals taken in one order, largest
//! first, each placed at a gap between the already placed intervals that overlap it in time
//! (the lowest gap that holds it, or the smallest), else above them. The anchored layout
//! (`arena/anchored.rs`) places its anchors, the largest intervals, by one such pass.
//!
//! How equal sizes tie decides whether their holes can be filled, so the orders come in
//! variants ([`VARIANTS`]: size, or size weighted by a small power of the lifetime, ties by
//! start or by end, first or best fit).
//!
//! # Cost
//! An order is a sort, O(n log n); where only its first k are placed by the pass (the
//! anchored layout's anchors, [`order_first`]), a selection and a sort of the k, O(n + k log k).
//! A pass keeps the placed intervals in one list sorted by
//! offset; each placement reads that list in offset order, skipping the intervals that do
//! not overlap it in time (two comparisons each), up to the first gap that holds it (first
//! fit) or to its end (best fit), and inserts itself at its offset's position (a move of at
//! most k entries). A pass over k intervals thus makes at most k²/2 reads and k²/2 moves of
//! 24 bytes, O(k²) with no heap or tree: on a training step most placed intervals overlap the
//! next one, so reading them all in order costs less than finding the overlapping ones first
//! (greedy by size over GPT-2 small's 1 553 intervals: 0.9 ms against 4.1 ms with two segment
//! trees and a heap, docs/results/2026-11-28-finalize-bounded.md).
//!
//! Invariant: two intervals overlapping in time never share a byte.

use super::ALIGN;
use crate::index::Window;
use std::sync::atomic::{AtomicBool, Ordering};

/// One interval to place: its resident points and its aligned size in bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Item {
    pub window: Window,
    pub need: i64,
}

/// How many placements a pass makes between two looks at its cancel flag.
const CANCEL_EVERY: usize = 512;

/// The orders tried, in this order: lifetime exponent `r` of the key
/// `need · (end − start + 1)^r`, ties by start (`false`) or by end, latest first (`true`), and
/// first fit (`true`) or best fit (the smallest gap that holds the interval). The first is
/// greedy by size with first fit; the fifth is TFLite's best fit.
pub const VARIANTS: [(f64, bool, bool); 8] = [
    (0.0, false, true),
    (0.25, true, true),
    (0.5, false, true),
    (0.1, false, true),
    (0.0, false, false),
    (0.0, true, true),
    (0.25, false, true),
    (0.5, true, true),
];

/// One pass of greedy by size over `order` (positions in `items`) above `base` (bytes), with
/// first fit or best fit: the offset of each (by rank) and the top, in bytes. Reads the
/// placed intervals once per placement, at most `order.len()`² / 2 reads in all. Abandoned once
/// the top reaches `beat` (bytes): then the offsets are empty and the top is at least `beat`.
/// `None` when `cancel` is set.
pub fn pass_in_order(
    items: &[Item],
    order: &[u32],
    base: i64,
    first_fit: bool,
    beat: i64,
    cancel: &AtomicBool,
) -> Option<(Vec<i64>, i64)> {
    let pass = Pass {
        items,
        order,
        base,
        first_fit,
        beat,
    };
    pass.place(cancel)
}

/// The intervals `rest` (positions in `items`) by descending `need · lifetime^r`, ties by
/// start (or by end, latest first), then by position.
pub fn order(items: &[Item], rest: &[u32], r: f64, by_end: bool) -> Vec<u32> {
    order_first(items, rest, r, by_end, rest.len())
}

/// As [`order`], but only the first `k` are in that order: they are the first `k` of
/// [`order`]'s, and the others follow in no particular order. A selection, then a sort of the
/// `k`: O(n + k log k) for n intervals (the order is total, so the `k` first are the same
/// set as [`order`]'s).
pub fn order_first(items: &[Item], rest: &[u32], r: f64, by_end: bool, k: usize) -> Vec<u32> {
    let tie = |i: u32| {
        let w = items[i as usize].window;
        if by_end {
            u32::MAX - w.end.raw()
        } else {
            w.start.raw()
        }
    };
    // Each interval's place in the order as one integer, compared as the tuple (key
    // descending, tie, position): the key's bits in an order-preserving form (`total_cmp`'s
    // for a float key), complemented, in the high 64 bits.
    let packed =
        |key: u64, i: u32| (u128::from(!key) << 64) | (u128::from(tie(i)) << 32) | u128::from(i);
    let mut ranked: Vec<u128> = if r == 0.0 {
        rest.iter()
            .map(|&i| packed(ordered_i64(items[i as usize].need), i))
            .collect()
    } else {
        // `points^r` once per distinct lifetime (intervals share few lengths).
        let longest = rest
            .iter()
            .map(|&i| items[i as usize].window.points())
            .max()
            .unwrap_or(0);
        let mut power = vec![f64::NAN; longest as usize + 1];
        rest.iter()
            .map(|&i| {
                let it = items[i as usize];
                let points = it.window.points();
                let p = &mut power[points as usize];
                if p.is_nan() {
                    *p = f64::from(points).powf(r);
                }
                let key = it.need as f64 * *p;
                packed(ordered_f64(key), i)
            })
            .collect()
    };
    sort_first(&mut ranked, k, |a, b| a.cmp(b));
    ranked.into_iter().map(|x| x as u32).collect()
}

/// `x` as a `u64` whose unsigned order is `x`'s order.
#[inline]
fn ordered_i64(x: i64) -> u64 {
    (x as u64) ^ (1 << 63)
}

/// `x`'s bits as a `u64` whose unsigned order is [`f64::total_cmp`]'s order of `x` (sort keys
/// packed into integers, here and in the finalize's second look).
#[inline]
pub(crate) fn ordered_f64(x: f64) -> u64 {
    let bits = x.to_bits() as i64;
    // `total_cmp`'s key (a signed order), then made unsigned.
    ordered_i64(bits ^ (((bits >> 63) as u64) >> 1) as i64)
}

/// Puts the `k` least of `v` under the total order `cmp` first, in that order (the rest after
/// them, in no particular order).
fn sort_first<T>(v: &mut [T], k: usize, cmp: impl Fn(&T, &T) -> std::cmp::Ordering) {
    let k = k.min(v.len());
    if k == 0 {
        return;
    }
    if k < v.len() {
        v.select_nth_unstable_by(k - 1, &cmp);
    }
    v[..k].sort_unstable_by(cmp);
}

/// One pass: `order` (positions in `items`) placed in that order above `base`, each at the
/// lowest gap between the placed intervals overlapping it in time that holds it (or the
/// smallest such gap, without `first_fit`), else above them; abandoned once the top reaches
/// `beat` (bytes).
struct Pass<'a> {
    items: &'a [Item],
    order: &'a [u32],
    base: i64,
    first_fit: bool,
    beat: i64,
}

impl Pass<'_> {
    /// The offset of each interval (by rank) and the top, in bytes; no offsets once the top
    /// reaches `beat`. `None` when `cancel` is set.
    ///
    /// The placed intervals are kept in one list sorted by offset; each placement reads it in
    /// that order, skipping those that do not overlap in time (two comparisons each), up to
    /// the first gap that holds the interval (first fit) or to its end (best fit), then inserts
    /// the interval at its offset's position.
    fn place(&self, cancel: &AtomicBool) -> Option<(Vec<i64>, i64)> {
        let Pass {
            items,
            order,
            base,
            first_fit,
            beat,
        } = *self;
        if base >= beat {
            return Some((Vec::new(), base));
        }
        // Placed intervals by offset: `[offset, end)` in units of ALIGN and their first and
        // last points, in one list (read in order at each placement).
        let mut placed: Vec<Placed> = Vec::with_capacity(order.len());
        let mut offsets = vec![0i64; order.len()];
        let base = base / ALIGN;
        let mut top = base;
        for (r, &i) in order.iter().enumerate() {
            if r % CANCEL_EVERY == 0 && cancel.load(Ordering::Relaxed) {
                return None;
            }
            let it = items[i as usize];
            let (s, e) = (it.window.start.raw(), it.window.end.raw());
            let need = it.need / ALIGN;
            let overlapping = placed
                .iter()
                .filter(|p| p.first <= e && s <= p.last)
                .map(|p| (p.offset, p.end));
            let at = fit(overlapping, base, need, first_fit);
            let k = placed.partition_point(|p| p.offset <= at);
            placed.insert(
                k,
                Placed {
                    offset: at,
                    end: at + need,
                    first: s,
                    last: e,
                },
            );
            offsets[r] = at;
            top = top.max(at + need);
            if top * ALIGN >= beat {
                return Some((Vec::new(), top * ALIGN));
            }
        }
        let offsets = offsets.into_iter().map(|o| o * ALIGN).collect();
        Some((offsets, top * ALIGN))
    }
}

/// A placed interval in [`Pass::place`]: its bytes `[offset, end)` in units of [`ALIGN`] and
/// its first and last points.
#[derive(Clone, Copy)]
struct Placed {
    offset: i64,
    end: i64,
    first: u32,
    last: u32,
}

/// Where `need` goes between the occupied ranges `(offset, end)` (sorted by offset) above
/// `base`: the lowest gap that holds it (`first_fit`) or the smallest (lowest among equals),
/// else above them all.
#[inline]
fn fit(occupied: impl Iterator<Item = (i64, i64)>, base: i64, need: i64, first_fit: bool) -> i64 {
    let mut free_from = base;
    let mut best: Option<(i64, i64)> = None; // (gap, offset)
    for (o, e) in occupied {
        let gap = o - free_from;
        if gap >= need && best.is_none_or(|(g, _)| gap < g) {
            best = Some((gap, free_from));
            if first_fit {
                break;
            }
        }
        free_from = free_from.max(e);
    }
    best.map_or(free_from, |(_, o)| o)
}
