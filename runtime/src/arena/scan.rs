//! The online layout: a linear scan over program points with a free list sorted by address and
//! best-fit placement (smallest free block that holds the interval, lowest address among
//! equals; the online policy of classic allocators, cf. XLA's heap simulator). At each point,
//! intervals ending before it are freed (coalescing neighbours), then intervals starting at it
//! are placed, largest first.
//!
//! Invariant: two intervals resident at a common point never share a byte; the arena grows only
//! when no free block holds the interval (reusing a free block that ends at the top).

use super::{align, order_by_point, Allocation};

/// The online scan: intervals by start point, each in the best-fitting free block (see the
/// module docs). Returns the allocations (by start point, largest first at each point) and the
/// arena size.
pub(super) fn best_fit_scan(allocs: Vec<Allocation>) -> (Vec<Allocation>, i64) {
    let mut by_start = order_by_point(&allocs, |a| a.start.index());
    // Largest first among the intervals starting at one point (runs are short).
    let mut lo = 0;
    while lo < by_start.len() {
        let start = allocs[by_start[lo] as usize].start;
        let mut hi = lo + 1;
        while hi < by_start.len() && allocs[by_start[hi] as usize].start == start {
            hi += 1;
        }
        if hi - lo > 1 {
            by_start[lo..hi].sort_unstable_by(|&x, &y| {
                let (a, b) = (&allocs[x as usize], &allocs[y as usize]);
                b.bytes.cmp(&a.bytes).then(a.value.cmp(&b.value))
            });
        }
        lo = hi;
    }
    let mut allocs: Vec<Allocation> = by_start
        .iter()
        .map(|&i| allocs[i as usize].clone())
        .collect();
    // Ends, to free intervals in point order.
    let by_end = order_by_point(&allocs, |a| a.end.index());
    let mut free = FreeList::default();
    let mut top = 0i64;
    let mut next_end = 0;
    for i in 0..allocs.len() {
        let start = allocs[i].start;
        while next_end < by_end.len() && allocs[by_end[next_end] as usize].end < start {
            let a = &allocs[by_end[next_end] as usize];
            free.release(a.offset, align(a.bytes));
            next_end += 1;
        }
        let need = align(allocs[i].bytes);
        let offset = match free.take_best_fit(need) {
            Some(o) => o,
            None => {
                // Grow the arena, reusing a free block that ends at the top.
                match free.take_at_top(top) {
                    Some(o) => {
                        top = o + need;
                        o
                    }
                    None => {
                        let o = top;
                        top += need;
                        o
                    }
                }
            }
        };
        allocs[i].offset = offset;
    }
    (allocs, top)
}

/// Free blocks `(offset, size)` sorted by offset. The scan keeps few free blocks at a time
/// (they coalesce), so a linear best-fit search over a contiguous vector beats the
/// logarithmic trees of a general allocator here.
#[derive(Default)]
struct FreeList {
    blocks: Vec<(i64, i64)>,
}

impl FreeList {
    /// Frees `[offset, offset + size)`, coalescing with free neighbours.
    fn release(&mut self, offset: i64, size: i64) {
        let i = self.blocks.partition_point(|&(o, _)| o < offset);
        let joins_prev = i > 0 && {
            let (po, ps) = self.blocks[i - 1];
            po + ps == offset
        };
        let joins_next = i < self.blocks.len() && self.blocks[i].0 == offset + size;
        match (joins_prev, joins_next) {
            (true, true) => {
                let next = self.blocks.remove(i).1;
                self.blocks[i - 1].1 += size + next;
            }
            (true, false) => self.blocks[i - 1].1 += size,
            (false, true) => self.blocks[i] = (offset, size + self.blocks[i].1),
            (false, false) => self.blocks.insert(i, (offset, size)),
        }
    }

    /// Takes `need` bytes from the smallest free block that holds them (lowest offset among
    /// equals); returns the offset.
    fn take_best_fit(&mut self, need: i64) -> Option<i64> {
        let mut best: Option<(i64, usize)> = None;
        for (i, &(_, size)) in self.blocks.iter().enumerate() {
            if size >= need && best.is_none_or(|(s, _)| size < s) {
                best = Some((size, i));
                if size == need {
                    break;
                }
            }
        }
        let (size, i) = best?;
        let offset = self.blocks[i].0;
        if size > need {
            self.blocks[i] = (offset + need, size - need);
        } else {
            self.blocks.remove(i);
        }
        Some(offset)
    }

    /// Takes the free block that ends at `top`, if any; returns its offset.
    fn take_at_top(&mut self, top: i64) -> Option<i64> {
        let &(o, s) = self.blocks.last()?;
        (o + s == top).then(|| {
            self.blocks.pop();
            o
        })
    }
}
