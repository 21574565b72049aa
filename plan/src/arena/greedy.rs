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
//! An order is a sort, O(n log n). Each placement visits exactly the already placed intervals
//! that overlap it in time, found in two segment trees over the points whose node lists are
//! sorted by placement rank (`arena/ranked.rs`), so a query reads O(log points) node prefixes
//! and nothing that is not placed; first fit then pops them from a heap (built in O(k)) in
//! offset order only up to the first gap that holds the interval, best fit sorts them. A pass
//! over k intervals visits each overlapping pair once: at most k²/2 visits, O(k² log k) in all.
//!
//! Invariant: two intervals overlapping in time never share a byte.

use super::ranked::RankedTrees;
use super::ALIGN;
use crate::index::Window;
use std::collections::BinaryHeap;
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
/// first fit or best fit: the offset of each (by rank) and the top, in bytes. Visits the
/// placed intervals overlapping each one, at most `order.len()`² / 2 in all. Abandoned once
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
    let mut order = rest.to_vec();
    let tie = |i: u32| {
        let w = items[i as usize].window;
        if by_end {
            u32::MAX - w.end.raw()
        } else {
            w.start.raw()
        }
    };
    if r == 0.0 {
        order.sort_unstable_by_key(|&i| (std::cmp::Reverse(items[i as usize].need), tie(i), i));
    } else {
        let key: Vec<f64> = items
            .iter()
            .map(|it| it.need as f64 * f64::from(it.window.points()).powf(r))
            .collect();
        order.sort_unstable_by(|&a, &b| {
            key[b as usize]
                .total_cmp(&key[a as usize])
                .then(tie(a).cmp(&tie(b)))
                .then(a.cmp(&b))
        });
    }
    order
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
        let windows: Vec<Window> = order.iter().map(|&i| items[i as usize].window).collect();
        // Sizes and offsets in units of `ALIGN` (every size and offset placed here is aligned),
        // so that a placed interval's `(offset, end)` packs into one `u64` sort key where the
        // pool stays below 2^32 units (256 GiB); else the pairs are sorted as they are.
        let need: Vec<i64> = order
            .iter()
            .map(|&i| items[i as usize].need / ALIGN)
            .collect();
        let base = base / ALIGN;
        let narrow = base + need.iter().sum::<i64>() < i64::from(u32::MAX);
        let trees = RankedTrees::new(&windows);
        let mut offsets = vec![0i64; order.len()];
        let mut top = base;
        // The placed intervals overlapping the one being placed: `!(offset << 32 | end)` (narrow:
        // a max-heap of these pops the lowest offset first), or `(offset, end)`.
        let mut packed: Vec<u64> = Vec::new();
        let mut pairs: Vec<(i64, i64)> = Vec::new();
        for r in 0..order.len() {
            if r % CANCEL_EVERY == 0 && cancel.load(Ordering::Relaxed) {
                return None;
            }
            packed.clear();
            pairs.clear();
            if narrow {
                trees.for_each_placed(r, |j| {
                    packed.push(!((offsets[j] as u64) << 32 | (offsets[j] + need[j]) as u64))
                });
            } else {
                trees.for_each_placed(r, |j| pairs.push((offsets[j], offsets[j] + need[j])));
            }
            let at = if narrow && first_fit {
                // A heap (O(k) to build), popped in offset order only up to the first gap that
                // holds the interval: the ranges above it are never ordered.
                let mut heap = BinaryHeap::from(std::mem::take(&mut packed));
                let unpacked = std::iter::from_fn(|| {
                    heap.pop()
                        .map(|k| ((!k >> 32) as i64, (!k & 0xffff_ffff) as i64))
                });
                let at = fit(unpacked, base, need[r], true);
                packed = heap.into_vec();
                at
            } else {
                pairs.extend(
                    packed
                        .drain(..)
                        .map(|k| ((!k >> 32) as i64, (!k & 0xffff_ffff) as i64)),
                );
                pairs.sort_unstable();
                fit(pairs.iter().copied(), base, need[r], first_fit)
            };
            offsets[r] = at;
            top = top.max(at + need[r]);
            if top * ALIGN >= beat {
                return Some((Vec::new(), top * ALIGN));
            }
        }
        let offsets = offsets.into_iter().map(|o| o * ALIGN).collect();
        let top = top * ALIGN;
        Some((offsets, top))
    }
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
