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
/// module docs), largest first at each point. Returns the offset of every interval (indexed
/// like `allocs`) and the arena size in bytes.
pub(super) fn best_fit_scan(allocs: &[Allocation]) -> (Vec<i64>, i64) {
    let mut by_start = order_by_point(allocs, |a| a.start.index());
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
    // Ends, to free intervals in point order (the order of frees between two placements does
    // not matter: free blocks are always coalesced, so the free list after them is the same).
    let by_end = order_by_point(allocs, |a| a.end.index());
    let mut offsets = vec![0i64; allocs.len()];
    let mut free = FreeList::default();
    let mut top = 0i64;
    let mut next_end = 0;
    for &i in &by_start {
        let a = &allocs[i as usize];
        while let Some(&j) = by_end.get(next_end) {
            let e = &allocs[j as usize];
            if e.end >= a.start {
                break;
            }
            free.release(offsets[j as usize], align(e.bytes));
            next_end += 1;
        }
        let need = align(a.bytes);
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
        offsets[i as usize] = offset;
    }
    (offsets, top)
}

/// Free blocks sorted by offset, as two parallel vectors (`offsets[i]`, `sizes[i]`). The scan
/// keeps few free blocks at a time (they coalesce), so a linear best-fit search over
/// contiguous sizes beats the logarithmic trees of a general allocator here.
#[derive(Default)]
struct FreeList {
    offsets: Vec<i64>,
    sizes: Vec<i64>,
}

impl FreeList {
    /// Frees `[offset, offset + size)`, coalescing with free neighbours.
    fn release(&mut self, offset: i64, size: i64) {
        let i = self.offsets.partition_point(|&o| o < offset);
        let joins_prev = i > 0 && self.offsets[i - 1] + self.sizes[i - 1] == offset;
        let joins_next = i < self.offsets.len() && self.offsets[i] == offset + size;
        match (joins_prev, joins_next) {
            (true, true) => {
                self.offsets.remove(i);
                let next = self.sizes.remove(i);
                self.sizes[i - 1] += size + next;
            }
            (true, false) => self.sizes[i - 1] += size,
            (false, true) => {
                self.offsets[i] = offset;
                self.sizes[i] += size;
            }
            (false, false) => {
                self.offsets.insert(i, offset);
                self.sizes.insert(i, size);
            }
        }
    }

    /// Takes `need` bytes from the smallest free block that holds them (lowest offset among
    /// equals); returns the offset.
    fn take_best_fit(&mut self, need: i64) -> Option<i64> {
        // Branch-free over the blocks: too small ones count as `i64::MAX`; the first smallest
        // wins (an exact fit is the smallest possible).
        let (mut best, mut at) = (i64::MAX, usize::MAX);
        for (i, &size) in self.sizes.iter().enumerate() {
            let key = if size >= need { size } else { i64::MAX };
            let better = key < best;
            best = if better { key } else { best };
            at = if better { i } else { at };
        }
        if at == usize::MAX {
            return None;
        }
        let offset = self.offsets[at];
        if best > need {
            self.offsets[at] = offset + need;
            self.sizes[at] = best - need;
        } else {
            self.offsets.remove(at);
            self.sizes.remove(at);
        }
        Some(offset)
    }

    /// Takes the free block that ends at `top`, if any; returns its offset.
    fn take_at_top(&mut self, top: i64) -> Option<i64> {
        let (&o, &s) = (self.offsets.last()?, self.sizes.last()?);
        (o + s == top).then(|| {
            self.offsets.pop();
            self.sizes.pop();
            o
        })
    }
}
