//! The anchored layout: greedy by size for the few largest intervals only (the anchors), then
//! the online best-fit scan for every other interval, around the anchors.
//!
//! Why: greedy by size (`arena/greedy.rs`) packs a training step's large activations well
//! because it places them first, but each placement reads every placed interval that overlaps
//! it in time, hundreds per interval on a 24-layer GPT, and a pass over every interval costs
//! millions of reads. The scan (`arena/scan.rs`) reads a few dozen free blocks per interval
//! but places online, in time order, so a large interval lands wherever the free list has
//! room at its start and fragments the arena. Here the K largest intervals (the caller's
//! [`ANCHORS`](super::ANCHORS), first in one of greedy by size's orders, [`VARIANTS`]) are
//! placed first by one greedy pass among themselves (the placements that matter most for the
//! arena), and the scan fills the space around them: each remaining interval goes into the
//! smallest free stretch that holds it at its start point and that no anchor starting within
//! its lifetime will need (a look ahead over the anchors only). Small intervals go to the
//! scan's slabs, above the rest, as in the plain scan.
//!
//! # Cost, bounded by construction
//! For n intervals, K anchors and f free blocks at a time: the anchors' order O(n + K log K) (a
//! selection of the K, then their sort; the others need no order); the anchors'
//! pass reads each pair of anchors at most once, at most K²/2 reads, O(K²); the scan's orders
//! by start and end are counting sorts over the points, O(n + points); each other interval
//! reads the free list (O(f)) and the m anchors starting within its lifetime, found by a binary
//! search and sorted by offset when few (O(m log m) for m ≤ K/8), else read from the anchors
//! not started yet, kept sorted by offset and shrunk as anchors start (O(K): at most one pass
//! to shrink and one to read per interval). So O(n + K log K + points + K² + n·(f + K)), with
//! no search and no work cap: the same work on every shape of a plan.
//!
//! Invariant: two intervals resident at a common point never share a byte (an anchor's bytes
//! are carved from the free list at its start, and no interval placed earlier overlaps them
//! during the anchor's lifetime).

use super::greedy::{order_first, pass_in_order, Item, VARIANTS};
use super::scan::slab_layout;
use crate::csr::Csr;
use crate::index::PointIx;
use std::sync::atomic::{AtomicBool, Ordering};

/// How many placements the scan makes between two looks at its cancel flag.
const CANCEL_EVERY: usize = 512;

/// An interval's forbidden ranges (the anchors starting within its lifetime) are gathered and
/// sorted when they are at most 1/this of the anchors, else read from all anchors by offset.
const SORT_FORBIDDEN_BELOW: usize = 8;

/// The anchored layout of `items` (see the module docs) with at most `anchors` anchors taken in
/// greedy by size's order `variant` (an index into [`VARIANTS`], modulo its length), the
/// intervals of at most `small` bytes (aligned) in slabs above the rest (none when there are
/// at most `anchors` intervals: then every interval is an anchor, and this is greedy by size):
/// an offset per interval (bytes, by position in `items`) and the top. Abandoned once the top
/// reaches `beat` (bytes; the caller's best so far): then the offsets are empty and the top is
/// at least `beat`. `None` when `cancel` is set.
///
/// `slabs`, when given, is the slabs' layout of the small intervals as the online scan made it
/// (each interval's offset above the bottom of the slabs, by position in `items`, and the
/// slabs' height; `scan::best_fit_scan` with the same `small`): the same as this layout's, so
/// it is not made again.
pub fn anchored_layout(
    items: &[Item],
    small: i64,
    anchors: usize,
    variant: usize,
    beat: i64,
    slabs: Option<(&[i64], i64)>,
    cancel: &AtomicBool,
) -> Option<(Vec<i64>, i64)> {
    let (small, large, small_ix) = split(items, small, anchors);
    let (above, height) = match slabs.filter(|_| small >= 0) {
        Some((above, height)) => (
            small_ix.iter().map(|&i| above[i as usize]).collect(),
            height,
        ),
        None => {
            let small_items: Vec<Item> = small_ix.iter().map(|&i| items[i as usize]).collect();
            slab_layout(&small_items, cancel)?
        }
    };
    // What the anchors and the scan around them must stay below, under the slabs.
    let limit = beat.saturating_sub(height);
    let (mut offsets, top) = match place_large(items, &large, anchors, variant, limit, cancel)? {
        Ok(placed) => placed,
        Err(top) => return Some((Vec::new(), top + height)),
    };
    // The slabs above.
    for (&i, a) in small_ix.iter().zip(above) {
        offsets[i as usize] = top + a;
    }
    Some((offsets, top + height))
}

/// As [`anchored_layout`] never abandoned, with the slabs' layout made by `slabs` beside the
/// large intervals' (on a helper thread, or after them where none is free:
/// `crate::helpers::join`), as the online scan makes its slabs beside its pool. `slabs` gives
/// the slabs' layout of the intervals of at most `small` bytes as [`anchored_layout`] takes it
/// (each interval's offset above the bottom of the slabs, by position in `items`, and the
/// slabs' height), with what else the caller computes there (`R`); `None` when `cancel` is
/// set (by either).
pub fn anchored_layout_beside<R: Send>(
    items: &[Item],
    small: i64,
    anchors: usize,
    variant: usize,
    cancel: &AtomicBool,
    slabs: impl FnOnce() -> Option<(Vec<i64>, i64, R)> + Send,
) -> Option<((Vec<i64>, i64), R)> {
    let (small, large, small_ix) = split(items, small, anchors);
    let (placed, slabs) = crate::helpers::join(
        || place_large(items, &large, anchors, variant, i64::MAX, cancel),
        slabs,
    );
    let (above, height, extra) = slabs?;
    // (Never abandoned below `i64::MAX`.)
    let (mut offsets, top) = placed?.ok()?;
    if small < 0 {
        // Every interval an anchor: no slabs.
        return Some(((offsets, top), extra));
    }
    for &i in &small_ix {
        offsets[i as usize] = top + above[i as usize];
    }
    Some(((offsets, top + height), extra))
}

/// The threshold of the slabs of a layout of `items` with at most `anchors` anchors (`-1`,
/// none, when every interval is an anchor; else `small`), and the positions of the large and
/// the small intervals.
fn split(items: &[Item], small: i64, anchors: usize) -> (i64, Vec<u32>, Vec<u32>) {
    let n = items.len();
    // A plan of at most `anchors` intervals is placed by greedy by size alone, no slabs.
    let small = if n <= anchors { -1 } else { small };
    let (mut large, mut small_ix) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n as u32 {
        if items[i as usize].need > small {
            large.push(i);
        } else {
            small_ix.push(i);
        }
    }
    (small, large, small_ix)
}

/// The large intervals `large` (positions in `items`) laid out by [`anchored_layout`]: an
/// offset per interval (bytes, by position in `items`; 0 for the others) and the top, or
/// `Err` with a top at least `limit` (bytes) once it reaches that. `None` when `cancel` is
/// set.
fn place_large(
    items: &[Item],
    large: &[u32],
    anchors: usize,
    variant: usize,
    limit: i64,
    cancel: &AtomicBool,
) -> Option<Result<(Vec<i64>, i64), i64>> {
    let mut offsets = vec![0i64; items.len()];
    // Intervals overlapping every other large one: stacked at the bottom (as greedy by size
    // does: they share no byte with any other interval in any layout).
    let (min_end, max_start) = large.iter().fold(
        (PointIx::from_raw(u32::MAX), PointIx::default()),
        |(lo, hi), &i| {
            let w = items[i as usize].window;
            (lo.min(w.end), hi.max(w.start))
        },
    );
    let mut base = 0i64;
    let mut rest: Vec<u32> = Vec::with_capacity(large.len());
    for &i in large {
        let it = items[i as usize];
        if it.window.start <= min_end && it.window.end >= max_start {
            offsets[i as usize] = base;
            base += it.need;
        } else {
            rest.push(i);
        }
    }
    // The anchors: the first `anchors` in the order of `variant`.
    let (r, by_end, first_fit) = VARIANTS[variant % VARIANTS.len()];
    // (Only the anchors' order matters: the scan places the others by start point.)
    let k = anchors.min(rest.len());
    let rest = order_first(items, &rest, r, by_end, k);
    let order = &rest[..k];
    let (placed, anchors_top) = pass_in_order(items, order, base, first_fit, limit, cancel)?;
    if anchors_top >= limit {
        return Some(Err(anchors_top));
    }
    let fixed: Vec<(u32, i64)> = order.iter().copied().zip(placed).collect();
    let top = scan_around(items, &rest[k..], &fixed, base, limit, &mut offsets, cancel)?;
    if top >= limit {
        return Some(Err(top));
    }
    Some(Ok((offsets, top)))
}

/// The best-fit scan of `rest` (positions in `items`) around the anchors `fixed` (position,
/// offset), above `base`: writes each interval's offset (bytes) to `offsets` and returns the
/// top; abandoned once the top reaches `limit` (bytes; the top returned is then at least it).
/// `None` when `cancel` is set.
fn scan_around(
    items: &[Item],
    rest: &[u32],
    fixed: &[(u32, i64)],
    base: i64,
    limit: i64,
    offsets: &mut [i64],
    cancel: &AtomicBool,
) -> Option<i64> {
    for &(i, o) in fixed {
        offsets[i as usize] = o;
    }
    let window = |i: u32| items[i as usize].window;
    let need = |i: u32| items[i as usize].need;
    let mut anchors: Vec<u32> = fixed.iter().map(|x| x.0).collect();
    anchors.sort_unstable_by_key(|&i| (window(i).start, i));
    // The anchors' bytes `(offset, end, start point)`, by offset.
    let mut by_offset: Vec<(i64, i64, PointIx)> = fixed
        .iter()
        .map(|&(i, o)| (o, o + need(i), window(i).start))
        .collect();
    by_offset.sort_unstable();
    // `rest` by start point, largest first at a point, then by position; `rest` and the
    // anchors by end point (in no particular order at a point: frees between two placements
    // leave the same coalesced free list in any order): counting sorts over the points.
    let points = items
        .iter()
        .map(|it| it.window.end.index() + 1)
        .max()
        .unwrap_or(0);
    let mut order: Csr<PointIx, u32> =
        Csr::from_pairs(points, || rest.iter().map(|&i| (window(i).start, i)));
    let key = |i: u32| (std::cmp::Reverse(need(i)), i);
    for p in 0..order.rows() {
        match order.row_mut(PointIx::new(p)) {
            [] | [_] => {}
            [x, y] => {
                if key(*y) < key(*x) {
                    std::mem::swap(x, y);
                }
            }
            run => run.sort_unstable_by_key(|&i| key(i)),
        }
    }
    let order = order.into_entries();
    let ends = Csr::<PointIx, u32>::from_pairs(points, || {
        rest.iter()
            .chain(fixed.iter().map(|x| &x.0))
            .map(|&i| (window(i).end, i))
    })
    .into_entries();
    // The anchors' space is the pool's from the start; each anchor carves its bytes at its
    // start and frees them at its end.
    let anchor_top = fixed
        .iter()
        .map(|&(i, o)| o + need(i))
        .max()
        .unwrap_or(base);
    let mut free = Free::default();
    if anchor_top > base {
        free.blocks.push((base, anchor_top - base));
    }
    let mut top = anchor_top.max(base);
    let (mut e, mut a) = (0usize, 0usize);
    let mut started = vec![false; items.len()];
    let mut forbidden: Vec<(i64, i64)> = Vec::new();
    // The anchors not started yet (start after the last interval's start), by offset: the
    // anchors read for a long lifetime, shrunk to those starting after its start when
    // anchors have started since it was last shrunk.
    let sort_below = by_offset.len() / SORT_FORBIDDEN_BELOW;
    let mut pending = by_offset;
    let mut pending_from = 0usize;
    for (n, &i) in order.iter().enumerate() {
        if n % CANCEL_EVERY == 0 && cancel.load(Ordering::Relaxed) {
            return None;
        }
        let w = window(i);
        // Free what ended before this start (placed intervals and started anchors).
        while let Some(&j) = ends.get(e) {
            if window(j).end >= w.start {
                break;
            }
            if started[j as usize] {
                free.release(offsets[j as usize], need(j));
            }
            e += 1;
        }
        // Carve the anchors starting at or before this start.
        while let Some(&j) = anchors.get(a) {
            if window(j).start > w.start {
                break;
            }
            // (One that ended already never holds its bytes.)
            if window(j).end >= w.start {
                free.carve(offsets[j as usize], need(j));
                started[j as usize] = true;
            }
            a += 1;
        }
        // The anchors starting within this interval's lifetime: their bytes are off limits.
        // Few: sorted by offset here; many (a long lifetime): read from the anchors not
        // started yet, by offset, which costs no more than the sort.
        let within = anchors[a..].partition_point(|&j| window(j).start <= w.end);
        forbidden.clear();
        if within <= sort_below {
            forbidden.extend(
                anchors[a..a + within]
                    .iter()
                    .map(|&j| (offsets[j as usize], offsets[j as usize] + need(j))),
            );
            forbidden.sort_unstable();
        } else {
            if pending_from != a {
                pending.retain(|x| x.2 > w.start);
                pending_from = a;
            }
            if a + within == anchors.len() {
                // Every anchor not started starts within the lifetime.
                forbidden.extend(pending.iter().map(|x| (x.0, x.1)));
            } else {
                forbidden.extend(pending.iter().filter(|x| x.2 <= w.end).map(|x| (x.0, x.1)));
            }
        }
        let at = free.best_fit_avoiding(need(i), &forbidden, &mut top);
        offsets[i as usize] = at;
        started[i as usize] = true;
        if top >= limit {
            return Some(top);
        }
    }
    Some(top)
}

/// The free blocks below the top, sorted by offset, as `(offset, size)` in bytes.
#[derive(Default)]
struct Free {
    blocks: Vec<(i64, i64)>,
}

impl Free {
    /// Frees `[offset, offset + size)`, coalescing with free neighbours.
    fn release(&mut self, offset: i64, size: i64) {
        let i = self.blocks.partition_point(|b| b.0 < offset);
        let joins_prev = i > 0 && self.blocks[i - 1].0 + self.blocks[i - 1].1 == offset;
        let joins_next = i < self.blocks.len() && self.blocks[i].0 == offset + size;
        match (joins_prev, joins_next) {
            (true, true) => {
                let next = self.blocks.remove(i).1;
                self.blocks[i - 1].1 += size + next;
            }
            (true, false) => self.blocks[i - 1].1 += size,
            (false, true) => self.blocks[i] = (offset, self.blocks[i].1 + size),
            (false, false) => self.blocks.insert(i, (offset, size)),
        }
    }

    /// Takes `[offset, offset + size)`, which lies inside one free block.
    fn carve(&mut self, offset: i64, size: i64) {
        let i = self.blocks.partition_point(|b| b.0 + b.1 <= offset);
        let (bo, bs) = self.blocks[i];
        debug_assert!(
            bo <= offset && offset + size <= bo + bs,
            "carved bytes not free"
        );
        let mut parts = [(bo, offset - bo), (offset + size, bo + bs - offset - size)]
            .into_iter()
            .filter(|p| p.1 > 0);
        match (parts.next(), parts.next()) {
            (Some(x), Some(y)) => {
                self.blocks[i] = x;
                self.blocks.insert(i + 1, y);
            }
            (Some(x), None) => self.blocks[i] = x,
            _ => {
                self.blocks.remove(i);
            }
        }
    }

    /// Places `need` bytes avoiding the `forbidden` ranges (sorted by start): the smallest
    /// free stretch (a free block less the forbidden ranges) that holds it, lowest offset among
    /// equals; else at the top (from the free block that ends there, past the forbidden
    /// ranges), raising `top`. Returns the offset.
    fn best_fit_avoiding(&mut self, need: i64, forbidden: &[(i64, i64)], top: &mut i64) -> i64 {
        let mut best: Option<(i64, i64)> = None; // (stretch size, offset)
        let mut consider = |size: i64, at: i64| {
            if size >= need && best.is_none_or(|(b, _)| size < b) {
                best = Some((size, at));
            }
            size == need
        };
        let mut f = 0usize;
        'blocks: for &(bo, bs) in &self.blocks {
            let be = bo + bs;
            while forbidden.get(f).is_some_and(|r| r.1 <= bo) {
                f += 1;
            }
            let mut from = bo;
            for &(s, e) in &forbidden[f..] {
                if s >= be {
                    break;
                }
                if e <= from {
                    continue;
                }
                if s > from && consider(s - from, from) {
                    break 'blocks;
                }
                from = e;
                if from >= be {
                    break;
                }
            }
            if from < be && consider(be - from, from) {
                break;
            }
        }
        if let Some((_, at)) = best {
            self.carve(at, need);
            return at;
        }
        // At the top: from the free block that ends there (else the top), past the forbidden
        // ranges (all below the top: anchors lie below it).
        let tail = match self.blocks.last() {
            Some(&(bo, bs)) if bo + bs == *top => Some(bo),
            _ => None,
        };
        let mut at = tail.unwrap_or(*top);
        for &(s, e) in forbidden {
            if e > at && s < at + need {
                at = e;
            }
        }
        // Below the top only when starting in the tail block: it is taken, less what stays
        // free below `at`.
        if let Some(bo) = tail.filter(|_| at < *top) {
            self.blocks.pop();
            if bo < at {
                self.blocks.push((bo, at - bo));
            }
        }
        *top = (*top).max(at + need);
        at
    }
}
