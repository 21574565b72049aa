//! The offline layouts: greedy by size and its variants (TFLite's `GreedyBySize` offline
//! planner; Pisarchyk & Lee, "Efficient Memory Management for Deep Neural Net Inference", 2020,
//! section 4.3; XLA's `GlobalDecreasingSizeBestFitHeap` is the same family). The intervals are
//! taken in one order, largest first, each placed at a gap between the already placed intervals
//! that overlap it in time (the lowest gap that holds it, or the smallest), else above them.
//!
//! Why this family: a training step's activations share few sizes, placing the large ones
//! first leaves holes the small ones fill, and the order is all there is to choose. On the
//! long-tail benchmark's budgeted plans (GPT-2 small, the 24-layer GPT; evictions cut many
//! values into short pieces) the online best-fit scan lands up to 16% above the planned peak and
//! the best of greedy by size's orders within 4.3%. How equal sizes tie decides whether their holes can be filled, so
//! several orders are tried ([`VARIANTS`]: size, or size weighted by a small power of the
//! lifetime, ties by start or by end, first or best fit), a pass is abandoned once it exceeds
//! the best so far, and the passes end once a layout is within the caller's target. Where none
//! is within the caller's acceptable bound (small plans whose ties no fixed order packs well,
//! e.g. the unfused GPT block under half its scheduled peak), a local search moves a few
//! intervals of the best order a short way forward at a time (a deterministic generator),
//! keeping any order whose layout is no larger.
//!
//! Intervals that overlap every other interval in time (parameters and other values resident
//! throughout) share no byte with any other interval in any layout, so they are stacked at the
//! bottom first: removing one from any layout and shifting what lies above it down frees its
//! bytes, so this costs nothing.
//!
//! # Cost, bounded by construction
//! An order is a sort, O(n log n). Each placement visits exactly the already placed intervals
//! that overlap it in time, found in two segment trees over the points whose node lists are
//! sorted by placement rank (`arena/ranked.rs`), so a query reads O(log points) node prefixes
//! and nothing that is not placed; first fit then pops them from a heap (built in O(k)) in
//! offset order only up to the first gap that holds the interval, best fit sorts them. The
//! visits of a pass are the overlapping pairs, at most n · w (w the most intervals resident at
//! one point: a pair is resident together at the later start), plus the trees' build (charged
//! as n · levels). Their total over all passes of one layout (the orders and the local search)
//! is capped by [`work_cap`]: [`VISITS_PER_INTERVAL`] per interval, at least [`VISITS_FLOOR`];
//! a pass that would exceed it is abandoned and the best layout so far kept (else the caller's
//! scan). So one layout costs at most O(n log n · |VARIANTS| + V log V) with
//! V = max(c · n, floor), whatever the plan: no step is a search of unbounded length.
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

/// How many overlapping intervals the passes of one layout may visit in all, per interval
/// placed (with [`VISITS_FLOOR`] below it): the cap grows with the plan, never with the search.
pub const VISITS_PER_INTERVAL: usize = 512;

/// The fewest overlap visits a layout may make in all, whatever its size: the work budget of
/// the search this layout replaced, so that small plans (whose equal sizes tie in ways no fixed
/// order packs well) keep their local search and their arenas. Plans up to ~20 000 intervals
/// (GPT-2 small, the 24-layer GPT: about 11 500) stay under it. Where the old search spent it
/// visiting every overlapping interval, placed or not, a pass here visits only placed ones, so
/// the same budget completes passes it used to abandon.
pub const VISITS_FLOOR: usize = 10_000_000;

/// How many placements a pass makes between two looks at its cancel flag.
const CANCEL_EVERY: usize = 512;

/// The orders tried, in this order: lifetime exponent `r` of the key
/// `need · (end − start + 1)^r`, ties by start (`false`) or by end, latest first (`true`), and
/// first fit (`true`) or best fit (the smallest gap that holds the interval). The first is
/// greedy by size with first fit; the fifth is TFLite's best fit.
const VARIANTS: [(f64, bool, bool); 8] = [
    (0.0, false, true),
    (0.25, true, true),
    (0.5, false, true),
    (0.1, false, true),
    (0.0, false, false),
    (0.0, true, true),
    (0.25, false, true),
    (0.5, true, true),
];

/// A greedy layout: per interval (by position in the items) its offset in bytes, the top
/// (bytes), and the work it cost.
pub struct Layout {
    pub offsets: Vec<i64>,
    pub top: i64,
    /// Overlap visits (and tree builds) spent by all passes, at most [`work_cap`].
    pub visits: usize,
}

/// The best layout of the variants of greedy by size over `items` (see the module docs): an
/// offset per interval (bytes, aligned as the sizes) and the top. A layout of at most
/// `good_enough` bytes ends the passes; the local search runs while none is within
/// `acceptable` bytes; `beat` is an arena size to beat (a pass that reaches it is abandoned).
/// All within [`work_cap`]. `None` when no pass completes below `beat` within the cap, or when
/// `cancel` is set.
pub fn best_layout(
    items: &[Item],
    good_enough: i64,
    acceptable: i64,
    beat: i64,
    cancel: &AtomicBool,
) -> Option<Layout> {
    let n = items.len();
    let (min_end, max_start) = items.iter().fold(
        (
            crate::index::PointIx::from_raw(u32::MAX),
            crate::index::PointIx::default(),
        ),
        |(lo, hi), it| (lo.min(it.window.end), hi.max(it.window.start)),
    );
    // Intervals overlapping every other one: stacked at the bottom.
    let mut offsets = vec![-1i64; n];
    let mut base = 0i64;
    let mut rest: Vec<u32> = Vec::with_capacity(n);
    for (i, it) in items.iter().enumerate() {
        if it.window.start <= min_end && it.window.end >= max_start {
            offsets[i] = base;
            base += it.need;
        } else {
            rest.push(i as u32);
        }
    }
    let cap = work_cap(n);
    let mut left = cap;
    // (order, first fit, offsets by rank, top) of the best layout so far.
    let mut best: Option<(Vec<u32>, bool, Vec<i64>, i64)> = None;
    for &(r, by_end, first_fit) in &VARIANTS {
        let limit = best.as_ref().map_or(beat, |b| b.3.min(beat));
        let order = order(items, &rest, r, by_end);
        let pass = Pass {
            items,
            order: &order,
            base,
            first_fit,
            limit,
        };
        if let Some((placed, top)) = pass.place(&mut left, cancel) {
            best = Some((order, first_fit, placed, top));
        }
        if cancel.load(Ordering::Relaxed)
            || left == 0
            || best.as_ref().is_some_and(|b| b.3 <= good_enough)
        {
            break;
        }
    }
    // Local search from the best order while no layout is acceptable, on what is left of the
    // cap: move a few intervals a short way forward; keep an order whose layout is no larger
    // (plateaus are crossed), remember the smallest.
    if let Some((start, first_fit, _, top)) = best.as_ref().filter(|b| b.3 > acceptable) {
        let (mut current, first_fit, mut current_top) = (start.clone(), *first_fit, *top);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let m = current.len();
        while m > 1 && left > 0 && !cancel.load(Ordering::Relaxed) {
            let mut candidate = current.clone();
            for _ in 0..1 + rng.below(3) {
                let i = rng.below(m);
                let j = i.saturating_sub(1 + rng.below(30));
                let x = candidate.remove(i);
                candidate.insert(j, x);
            }
            let pass = Pass {
                items,
                order: &candidate,
                base,
                first_fit,
                limit: current_top + 1,
            };
            if let Some((placed, top)) = pass.place(&mut left, cancel) {
                current = candidate;
                current_top = top;
                if best.as_ref().is_none_or(|b| top < b.3) {
                    best = Some((current.clone(), first_fit, placed, top));
                    if top <= acceptable {
                        break;
                    }
                }
            }
        }
    }
    if cancel.load(Ordering::Relaxed) {
        return None;
    }
    let (order, _, placed, top) = best?;
    for (&i, &o) in order.iter().zip(&placed) {
        offsets[i as usize] = o;
    }
    Some(Layout {
        offsets,
        top: top.max(base),
        visits: cap - left,
    })
}

/// A small deterministic generator (xorshift64*) for the local search: layouts must not depend
/// on anything but the plan and the shapes.
struct Rng(u64);

impl Rng {
    /// A number in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// The overlap visits all passes of one layout of `n` intervals may make:
/// [`VISITS_PER_INTERVAL`] per interval, and at least [`VISITS_FLOOR`].
pub fn work_cap(n: usize) -> usize {
    VISITS_PER_INTERVAL.saturating_mul(n).max(VISITS_FLOOR)
}

/// The intervals `rest` (positions in `items`) by descending `need · lifetime^r`, ties by
/// start (or by end, latest first), then by position.
fn order(items: &[Item], rest: &[u32], r: f64, by_end: bool) -> Vec<u32> {
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
/// `limit` (bytes).
struct Pass<'a> {
    items: &'a [Item],
    order: &'a [u32],
    base: i64,
    first_fit: bool,
    limit: i64,
}

impl Pass<'_> {
    /// The offset of each interval (by rank) and the top, in bytes. `None` once the top reaches
    /// the limit, the visits exceed `left` (which is then spent) or `cancel` is set.
    fn place(&self, left: &mut usize, cancel: &AtomicBool) -> Option<(Vec<i64>, i64)> {
        let Pass {
            items,
            order,
            base,
            first_fit,
            limit,
        } = *self;
        if base >= limit {
            return None;
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
        // Building the trees is charged to the cap as one visit per interval and tree level.
        let Some(rest) = left.checked_sub(order.len() * (trees.levels() + 1)) else {
            *left = 0;
            return None;
        };
        *left = rest;
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
            let Some(rest) = left.checked_sub(packed.len() + pairs.len()) else {
                *left = 0;
                return None;
            };
            *left = rest;
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
            if top * ALIGN >= limit {
                return None;
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
