//! Arena offset assignment: every device-resident interval of every value (after evictions a
//! value can have several) gets a byte offset in one arena, such that intervals that are
//! resident at the same point never overlap in memory.
//!
//! Algorithm: a linear scan over program points with a free list indexed by address and by
//! size, and best-fit placement (smallest free block that holds the interval, lowest address
//! among equals; the online policy of classic allocators, cf. TFLite's greedy-by-size and XLA's
//! heap simulator for alternatives), O(log n) per interval. At each point, intervals ending before it are
//! freed (coalescing neighbours), then intervals starting at it are placed, largest first.
//! Offsets are aligned to [`ALIGN`] bytes. The arena size over the planned peak is the
//! fragmentation the layout costs.

use ebb_ir::plan::{Decision, Plan, Point, ValueId};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

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
}

fn align(x: i64) -> i64 {
    (x + ALIGN - 1) / ALIGN * ALIGN
}

/// Device residency intervals of every value under `decisions`.
pub fn residency_intervals(
    plan: &Plan,
    value_bytes: &[i64],
    decisions: &[Decision],
) -> Vec<Allocation> {
    // Per value: (first point it is not resident, point it is resident again).
    let mut gaps: Vec<Vec<(Point, Point)>> = vec![Vec::new(); plan.values.len()];
    for d in decisions {
        let Some(c) = plan.candidate(d.candidate) else {
            continue;
        };
        let back = c.back_point(d.kind).point();
        if let Some(g) = gaps.get_mut(c.value.index()) {
            g.push((c.evict_after.next(), back));
        }
    }
    let mut out = Vec::with_capacity(plan.values.len());
    for (i, v) in plan.values.iter().enumerate() {
        let bytes = value_bytes.get(i).copied().unwrap_or(0);
        if bytes <= 0 {
            continue;
        }
        let g = &mut gaps[i];
        g.sort_unstable();
        let mut start = v.def;
        for &(l, back) in g.iter() {
            if l > start {
                out.push(Allocation {
                    value: ValueId::new(i),
                    start,
                    // The last resident point before the gap (`l > start`, so `l > 0`).
                    end: Point::new(l.index() - 1),
                    offset: 0,
                    bytes,
                });
            }
            start = back;
        }
        if start <= v.last_use {
            out.push(Allocation {
                value: ValueId::new(i),
                start,
                end: v.last_use,
                offset: 0,
                bytes,
            });
        }
    }
    out
}

/// Assigns offsets to all residency intervals (see the module docs).
pub fn assign_offsets(
    plan: &Plan,
    value_bytes: &[i64],
    decisions: &[Decision],
    peak: i64,
) -> Arena {
    let mut allocs = residency_intervals(plan, value_bytes, decisions);
    allocs.sort_unstable_by(|a, b| {
        a.start
            .cmp(&b.start)
            .then(b.bytes.cmp(&a.bytes))
            .then(a.value.cmp(&b.value))
    });
    // Ends, to free intervals in point order.
    let mut by_end: Vec<usize> = (0..allocs.len()).collect();
    by_end.sort_unstable_by_key(|&i| (allocs[i].end, i));
    let mut free = FreeList::default();
    let mut top = 0i64;
    let mut next_end = 0;
    for i in 0..allocs.len() {
        let start = allocs[i].start;
        while next_end < by_end.len() && allocs[by_end[next_end]].end < start {
            let a = &allocs[by_end[next_end]];
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
    let fragmentation = if peak > 0 {
        top as f64 / peak as f64
    } else {
        1.0
    };
    Arena {
        arena_bytes: top,
        fragmentation,
        allocations: allocs,
    }
}

/// Free blocks, indexed by offset (for coalescing) and by (size, offset) (for best fit), so
/// every operation is O(log n).
#[derive(Default)]
struct FreeList {
    by_offset: BTreeMap<i64, i64>,
    by_size: BTreeSet<(i64, i64)>,
}

impl FreeList {
    fn insert(&mut self, offset: i64, size: i64) {
        self.by_offset.insert(offset, size);
        self.by_size.insert((size, offset));
    }

    fn remove(&mut self, offset: i64) -> Option<i64> {
        let size = self.by_offset.remove(&offset)?;
        self.by_size.remove(&(size, offset));
        Some(size)
    }

    /// Frees `[offset, offset + size)`, coalescing with free neighbours.
    fn release(&mut self, mut offset: i64, mut size: i64) {
        if let Some((&po, &ps)) = self.by_offset.range(..offset).next_back() {
            if po + ps == offset {
                self.remove(po);
                offset = po;
                size += ps;
            }
        }
        if let Some(ns) = self.remove(offset + size) {
            size += ns;
        }
        self.insert(offset, size);
    }

    /// Takes `need` bytes from the smallest free block that holds them (lowest offset among
    /// equals); returns the offset.
    fn take_best_fit(&mut self, need: i64) -> Option<i64> {
        let &(size, offset) = self.by_size.range((need, i64::MIN)..).next()?;
        self.remove(offset);
        if size > need {
            self.insert(offset + need, size - need);
        }
        Some(offset)
    }

    /// Takes the free block that ends at `top`, if any; returns its offset.
    fn take_at_top(&mut self, top: i64) -> Option<i64> {
        let (&o, &s) = self.by_offset.iter().next_back()?;
        (o + s == top).then(|| {
            self.remove(o);
            o
        })
    }
}

/// Checks that no two intervals resident at a common point overlap in memory (for tests).
pub fn check_layout(arena: &Arena) -> Result<(), String> {
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
            if a.start <= b.end && b.start <= a.end {
                return Err(format!(
                    "values {} and {} overlap in memory and in time",
                    a.value, b.value
                ));
            }
        }
    }
    Ok(())
}
