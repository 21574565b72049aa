//! The online layout: a linear scan over program points with free lists sorted by address and
//! best-fit placement (smallest free block that holds the interval, lowest address among
//! equals; the online policy of classic allocators, cf. XLA's heap simulator). At each point,
//! intervals ending before it are freed (coalescing neighbours), then intervals starting at it
//! are placed, largest first.
//!
//! Small intervals (at most [`small_bytes`] aligned) are not placed in the free list but in
//! slabs, as size-segregated allocators keep small objects apart: one slab per aligned size,
//! each a run of equal slots reused last-freed first, the slabs stacked above the large
//! intervals. A training step holds thousands of small intervals (biases, norms, per-row
//! statistics, in few distinct sizes) that would otherwise fill the free list with slivers
//! that every placement scans. On GPT-2 medium (B=8, S=1024; 11 600 intervals, 5 900 small in
//! 6 sizes) the slabs cost 0.02% of arena and make the scan 1.75 times faster; the threshold
//! scales with the planned peak so that on small plans the slabs stay a small part of the
//! arena.
//!
//! Invariant: two intervals resident at a common point never share a byte; a pool grows only
//! when no free block holds the interval (reusing a free block that ends at its top).

use super::{greedy::Item, ALIGN};
use crate::csr::Csr;
use crate::index::{IndexVec, IntervalIx, PointIx};
use std::sync::atomic::{AtomicBool, Ordering};

/// Where the online scan put an interval, before the size of the large intervals' pool (the
/// bottom of the slabs) is known; [`Scan::offset`] resolves it to an offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// The large interval at this position among the large ones (its offset is in
    /// [`Scan`]'s table).
    Large(IntervalIx),
    /// A small interval, at this many bytes above the bottom of the slabs.
    Slab(i64),
}

/// Where the online scan placed each interval, resolved to an offset by [`Scan::offset`].
pub struct Scan {
    /// Offset (bytes) of each large interval, by its position among the large ones.
    large_offsets: IndexVec<IntervalIx, i64>,
    /// The large intervals' pool size, bytes: where the slabs start.
    large_top: i64,
    /// The arena size, bytes (the pool and the slabs).
    pub top: i64,
}

impl Scan {
    /// The slabs' height, bytes: the arena above the large intervals' pool.
    pub fn slab_height(&self) -> i64 {
        self.top - self.large_top
    }

    /// The offset (bytes) of the interval placed at `placement`.
    #[inline]
    pub fn offset(&self, placement: Placement) -> i64 {
        match placement {
            Placement::Large(k) => self.large_offsets[k],
            Placement::Slab(above) => self.large_top + above,
        }
    }
}

/// The online scan: intervals by start point, each in the best-fitting free block (see the
/// module docs), largest first at each point (then in index order). Returns the placements with
/// the arena size, and what `also` returns given the placement of every interval (a
/// [`Placement`] for [`Scan::offset`]).
///
/// `peak` (bytes, the planned peak) sets which intervals are small ([`small_bytes`]). The
/// large intervals' pool and the slabs do not interact: the large ones are scanned while a
/// helper thread scans the small ones, then records every placement and runs `also` (the
/// slabs' offsets depend on the pool's size only by a shift, which [`Scan::offset`] adds).
/// `None` when `cancel` is set before the scans end (checked every [`CANCEL_EVERY`]
/// placements).
pub fn best_fit_scan<R: Send>(
    items: &IndexVec<IntervalIx, Item>,
    peak: i64,
    cancel: &AtomicBool,
    also: impl FnOnce(&IndexVec<IntervalIx, Placement>) -> R + Send,
) -> Option<(Scan, R)> {
    best_fit_scan_with(items, peak, true, cancel, also)
}

/// As [`best_fit_scan`], or, without `large`, the slabs alone: the large intervals are not
/// placed (each at offset 0, the pool empty), for a layout that places them otherwise (the
/// anchored layout of one order, `super::assign_offsets_order`).
pub(super) fn best_fit_scan_with<R: Send>(
    items: &IndexVec<IntervalIx, Item>,
    peak: i64,
    large: bool,
    cancel: &AtomicBool,
    also: impl FnOnce(&IndexVec<IntervalIx, Placement>) -> R + Send,
) -> Option<(Scan, R)> {
    let scan_large = large;
    let small = small_bytes(peak);
    // Large intervals first, then small ones, each in index order: a branch-free partition
    // (whether an interval is small follows no pattern a branch predictor could learn).
    let n_large = items.iter().filter(|it| it.need > small).count();
    let mut parts = vec![Item::default(); items.len()];
    let mut origin = vec![IntervalIx::default(); items.len()];
    let (mut l, mut s) = (0, n_large);
    for (i, it) in items.iter_enumerated() {
        let is_small = usize::from(it.need <= small);
        let to = if is_small == 1 { s } else { l };
        parts[to] = *it;
        origin[to] = i;
        s += is_small;
        l += 1 - is_small;
    }
    let (large_items, small_items) = parts.split_at(n_large);
    let (large_origin, small_origin) = origin.split_at(n_large);
    // The pool counts in units of ALIGN, in 32 bits where the large intervals' total allows
    // (half the bytes to search and move).
    let units: i64 = large_items.iter().map(|it| it.need / ALIGN).sum();
    let slabs = || {
        let (slots, slabs) = scan_with(small_items, Slabs::default(), cancel)?;
        let mut placement = IndexVec::from_elem(Placement::Slab(0), items.len());
        for (k, &i) in large_origin.iter().enumerate() {
            placement[i] = Placement::Large(IntervalIx::new(k));
        }
        // The slabs sit on top of the large intervals, by size.
        let (slab_bottom, height) = slabs.stack(0);
        for ((&i, &slot), it) in small_origin.iter().zip(slots.iter()).zip(small_items) {
            let above = slab_bottom[slab_class(it.need)] + slot * it.need;
            placement[i] = Placement::Slab(above);
        }
        Some((height, also(&placement)))
    };
    // Without the large intervals the slabs are the only work: on the calling thread (a
    // helper would only be woken to run it while the caller waits).
    let (large, small) = if scan_large {
        crate::helpers::join(
            || {
                if units <= i64::from(u32::MAX) {
                    scan_pool::<u32>(large_items, cancel)
                } else {
                    scan_pool::<i64>(large_items, cancel)
                }
            },
            slabs,
        )
    } else {
        (
            Some((IndexVec::from_elem(0i64, large_items.len()), 0)),
            slabs(),
        )
    };
    let ((large_offsets, large_top), (height, extra)) = (large?, small?);
    let scan = Scan {
        large_offsets,
        large_top,
        top: large_top + height,
    };
    Some((scan, extra))
}

/// The scan of the large intervals `items` into a [`Pool`] counting in `U`: the offset of each
/// and the pool's size in bytes.
fn scan_pool<U: Unit>(
    items: &[Item],
    cancel: &AtomicBool,
) -> Option<(IndexVec<IntervalIx, i64>, i64)> {
    let (offsets, pool) = scan_with(items, Pool::<U>::default(), cancel)?;
    Some((offsets, pool.top.bytes()))
}

/// Where a scan places intervals: the large intervals' [`Pool`] (offsets) or the [`Slabs`]
/// (slot numbers).
pub trait Placer {
    /// Places `need` (aligned) bytes; returns where.
    fn place(&mut self, need: i64) -> i64;
    /// Frees `placed`, what [`Placer::place`] returned for `need` bytes.
    fn release(&mut self, need: i64, placed: i64);
}

/// The scan of `items` (named by their positions, as [`IntervalIx`]) into `placer`: by start
/// point, largest first at a point (then in index order), each freed once the scan passes its
/// end. Returns where each was placed and the placer.
pub fn scan_with<P: Placer>(
    items: &[Item],
    mut placer: P,
    cancel: &AtomicBool,
) -> Option<(IndexVec<IntervalIx, i64>, P)> {
    let mut by_start: Csr<PointIx, IntervalIx> = Csr::group(items, |a| a.window.start);
    // Largest first among the intervals starting at one point, then in index order (runs are
    // short, most of one or two, and each in index order already).
    for p in 0..by_start.rows() {
        match by_start.row_mut(PointIx::new(p)) {
            [] | [_] => {}
            [x, y] => {
                if items[y.index()].need > items[x.index()].need {
                    std::mem::swap(x, y);
                }
            }
            run => run.sort_unstable_by_key(|&x| (-items[x.index()].need, x)),
        }
    }
    // Ends, to free intervals in point order (the order of frees between two placements does
    // not matter for the pool, whose free blocks are always coalesced; the slabs free in this
    // order).
    let by_end = Csr::<PointIx, IntervalIx>::group(items, |a| a.window.end).into_entries();
    let mut placed = IndexVec::from_elem(0i64, items.len());
    let mut next_end = 0;
    for (n, &i) in by_start.entries().iter().enumerate() {
        if n % CANCEL_EVERY == 0 && cancel.load(Ordering::Relaxed) {
            return None;
        }
        let a = &items[i.index()];
        while let Some(&j) = by_end.get(next_end) {
            let e = &items[j.index()];
            if e.window.end >= a.window.start {
                break;
            }
            placer.release(e.need, placed[j]);
            next_end += 1;
        }
        placed[i] = placer.place(a.need);
    }
    Some((placed, placer))
}

/// The slabs of `items` alone (see the module docs): each one's offset above the bottom of
/// the slabs (bytes, by position) and the slabs' height. `None` when `cancel` is set.
pub(super) fn slab_layout(items: &[Item], cancel: &AtomicBool) -> Option<(Vec<i64>, i64)> {
    let (slots, slabs) = scan_with(items, Slabs::default(), cancel)?;
    let (bottom, height) = slabs.stack(0);
    let above = items
        .iter()
        .zip(slots.iter())
        .map(|(it, &slot)| bottom[slab_class(it.need)] + slot * it.need)
        .collect();
    Some((above, height))
}

/// How many placements a scan makes between two looks at its cancel flag.
const CANCEL_EVERY: usize = 512;

/// Intervals of at most this many bytes (aligned) are placed in slabs (see the module docs):
/// 64 KiB, or 1/4096 of the planned `peak` where that is less.
pub(super) fn small_bytes(peak: i64) -> i64 {
    (64 << 10).min(peak / 4096)
}

/// An offset or size in the large intervals' pool, in units of [`ALIGN`] bytes (every size
/// placed there is aligned): `u32` where the pool stays below 2^32 units (256 GiB), else `i64`.
pub trait Unit:
    Copy + Ord + Default + std::ops::Add<Output = Self> + std::ops::Sub<Output = Self>
{
    /// Larger than any size.
    const MAX: Self;
    /// `bytes` (aligned) in units.
    fn units(bytes: i64) -> Self;
    /// In bytes.
    fn bytes(self) -> i64;
}

impl Unit for u32 {
    const MAX: Self = u32::MAX;
    fn units(bytes: i64) -> Self {
        (bytes / ALIGN) as u32
    }
    fn bytes(self) -> i64 {
        i64::from(self) * ALIGN
    }
}

impl Unit for i64 {
    const MAX: Self = i64::MAX;
    fn units(bytes: i64) -> Self {
        bytes / ALIGN
    }
    fn bytes(self) -> i64 {
        self * ALIGN
    }
}

/// The large intervals' pool: its free blocks and its top (its size so far), in units.
#[derive(Default)]
pub struct Pool<U> {
    free: FreeList<U>,
    /// The pool's size so far, in units.
    pub top: U,
}

impl<U: Unit> Placer for Pool<U> {
    /// Places `need` (aligned) bytes: the best-fitting free block, else at the top (reusing a
    /// free block that ends there). Returns the offset in bytes.
    fn place(&mut self, need: i64) -> i64 {
        let need = U::units(need);
        if let Some(o) = self.free.take_best_fit(need) {
            return o.bytes();
        }
        let o = self.free.take_at_top(self.top).unwrap_or(self.top);
        self.top = o + need;
        o.bytes()
    }

    fn release(&mut self, need: i64, offset: i64) {
        self.free.release(U::units(offset), U::units(need));
    }
}

/// The slab of intervals of `need` (aligned) bytes: `need / ALIGN`.
#[inline(always)]
fn slab_class(need: i64) -> usize {
    (need / ALIGN) as usize
}

/// The slabs of the small intervals: per aligned size (by [`slab_class`]), the slots made so
/// far and the free ones, last freed on top.
#[derive(Default)]
struct Slabs {
    slots: Vec<i64>,
    free: Vec<Vec<i64>>,
}

impl Placer for Slabs {
    /// A slot of the slab of `need` bytes (aligned): the last freed, else a new one.
    fn place(&mut self, need: i64) -> i64 {
        let c = slab_class(need);
        if c >= self.slots.len() {
            self.slots.resize(c + 1, 0);
            self.free.resize_with(c + 1, Vec::new);
        }
        self.free[c].pop().unwrap_or_else(|| {
            self.slots[c] += 1;
            self.slots[c] - 1
        })
    }

    /// Frees `slot` of the slab of `need` bytes (aligned; placed by [`Slabs::place`]).
    fn release(&mut self, need: i64, slot: i64) {
        if let Some(free) = self.free.get_mut(slab_class(need)) {
            free.push(slot);
        }
    }
}

impl Slabs {
    /// The offset of each slab (indexed by [`slab_class`]) when they are stacked from
    /// `bottom`, and the end of the stack.
    fn stack(&self, bottom: i64) -> (Vec<i64>, i64) {
        let mut end = bottom;
        let base = self
            .slots
            .iter()
            .enumerate()
            .map(|(c, &n)| {
                let base = end;
                end += c as i64 * ALIGN * n;
                base
            })
            .collect();
        (base, end)
    }
}

/// Free blocks sorted by offset, as `(offset, size)` pairs in units. The scan keeps few free
/// blocks at a time (GPT-2 medium: 25 on average, at most 53), so linear searches over one
/// contiguous vector (a single move per insertion or removal) beat the logarithmic trees of a
/// general allocator here.
#[derive(Default)]
pub struct FreeList<U> {
    blocks: Vec<(U, U)>,
}

impl<U: Unit> FreeList<U> {
    /// Frees `[offset, offset + size)`, coalescing with free neighbours.
    fn release(&mut self, offset: U, size: U) {
        // The blocks before `offset`: a count rather than a binary search (no mispredicted
        // branches over so few blocks).
        let i: usize = self.blocks.iter().map(|b| usize::from(b.0 < offset)).sum();
        let joins_prev = i > 0 && self.blocks[i - 1].0 + self.blocks[i - 1].1 == offset;
        let joins_next = i < self.blocks.len() && self.blocks[i].0 == offset + size;
        match (joins_prev, joins_next) {
            (true, true) => {
                let next = self.blocks.remove(i).1;
                self.blocks[i - 1].1 = self.blocks[i - 1].1 + size + next;
            }
            (true, false) => self.blocks[i - 1].1 = self.blocks[i - 1].1 + size,
            (false, true) => self.blocks[i] = (offset, self.blocks[i].1 + size),
            (false, false) => self.blocks.insert(i, (offset, size)),
        }
    }

    /// Takes `need` units from the smallest free block that holds them (lowest offset among
    /// equals); returns the offset.
    fn take_best_fit(&mut self, need: U) -> Option<U> {
        // Branch-free over the blocks (too small ones count as `MAX`; the first smallest wins)
        // until an exact fit, the smallest possible.
        let (mut best, mut block) = (U::MAX, usize::MAX);
        for (i, &(_, size)) in self.blocks.iter().enumerate() {
            if size == need {
                (best, block) = (size, i);
                break;
            }
            let key = if size >= need { size } else { U::MAX };
            let better = key < best;
            best = if better { key } else { best };
            block = if better { i } else { block };
        }
        if block == usize::MAX {
            return None;
        }
        let offset = self.blocks[block].0;
        if best > need {
            self.blocks[block] = (offset + need, best - need);
        } else {
            self.blocks.remove(block);
        }
        Some(offset)
    }

    /// Takes the free block that ends at `top`, if any; returns its offset.
    fn take_at_top(&mut self, top: U) -> Option<U> {
        let &(o, s) = self.blocks.last()?;
        (o + s == top).then(|| {
            self.blocks.pop();
            o
        })
    }
}
