//! Arena offset assignment: every device-resident interval of every value (after evictions a
//! value can have several) gets a byte offset in one arena, such that intervals that are
//! resident at the same point never overlap in memory.
//!
//! Algorithm: a linear scan over program points with an address-ordered free list and
//! first-fit placement (the online policy of classic allocators; cf. TFLite's greedy-by-size
//! and XLA's heap simulator for alternatives). At each point, intervals ending before it are
//! freed (coalescing neighbours), then intervals starting at it are placed, largest first.
//! Offsets are aligned to [`ALIGN`] bytes. The arena size over the planned peak is the
//! fragmentation the layout costs.

use ebb_ir::plan::{Decision, DecisionKind, Plan};
use serde::Serialize;
use std::collections::BTreeMap;

/// Alignment of every offset in bytes.
pub const ALIGN: i64 = 64;

/// One placed interval: `value` is resident at points `[start, end]` at `offset`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Allocation {
    /// Value id (index into `Plan::values`).
    pub value: usize,
    /// First point of residency.
    pub start: usize,
    /// Last point of residency (inclusive).
    pub end: usize,
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
    let mut gaps: Vec<Vec<(usize, usize)>> = vec![Vec::new(); plan.values.len()];
    for d in decisions {
        let Some(c) = plan.candidates.get(d.candidate) else {
            continue;
        };
        let back = match d.kind {
            DecisionKind::Recompute => c.regenerate_before,
            DecisionKind::Swap => c.prefetch_at,
        };
        if let Some(g) = gaps.get_mut(c.value) {
            g.push((c.evict_after + 1, back));
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
                    value: i,
                    start,
                    end: l - 1,
                    offset: 0,
                    bytes,
                });
            }
            start = back;
        }
        if start <= v.last_use {
            out.push(Allocation {
                value: i,
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
    allocs.sort_by(|a, b| {
        a.start
            .cmp(&b.start)
            .then(b.bytes.cmp(&a.bytes))
            .then(a.value.cmp(&b.value))
    });
    // Ends, to free intervals in point order.
    let mut by_end: Vec<usize> = (0..allocs.len()).collect();
    by_end.sort_by_key(|&i| allocs[i].end);
    let mut free: BTreeMap<i64, i64> = BTreeMap::new(); // offset -> size
    let mut top = 0i64;
    let mut next_end = 0;
    for i in 0..allocs.len() {
        let start = allocs[i].start;
        while next_end < by_end.len() && allocs[by_end[next_end]].end < start {
            let a = &allocs[by_end[next_end]];
            release(&mut free, a.offset, align(a.bytes));
            next_end += 1;
        }
        let need = align(allocs[i].bytes);
        let slot = free.iter().find(|(_, &s)| s >= need).map(|(&o, &s)| (o, s));
        let offset = match slot {
            Some((o, s)) => {
                free.remove(&o);
                if s > need {
                    free.insert(o + need, s - need);
                }
                o
            }
            None => {
                // Grow the arena, reusing a free block that ends at the top.
                match free.iter().next_back().map(|(&o, &s)| (o, s)) {
                    Some((o, s)) if o + s == top => {
                        free.remove(&o);
                        top = o + need;
                        o
                    }
                    _ => {
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

fn release(free: &mut BTreeMap<i64, i64>, mut offset: i64, mut size: i64) {
    if let Some((&po, &ps)) = free.range(..offset).next_back() {
        if po + ps == offset {
            free.remove(&po);
            offset = po;
            size += ps;
        }
    }
    if let Some(ns) = free.remove(&(offset + size)) {
        size += ns;
    }
    free.insert(offset, size);
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
