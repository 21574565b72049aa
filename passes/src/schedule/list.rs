//! Memory-pressure list scheduling (BladeDISC++ §3.1 "operation scheduling", arXiv
//! 2412.16985; XLA's `ListMemoryScheduler`): repeatedly run the ready op whose *effect* — bytes
//! its results allocate minus bytes freed by the operands it is the last user of — is
//! smallest, with sizes compared through their keys (`context.rs`) and ties broken by program
//! order.
//!
//! Two priorities:
//! * [`Priority::Greedy`]: smallest effect first (the classic rule);
//! * [`Priority::FreeFirst`]: ops whose effect is `<= 0` (they free at least what they allocate)
//!   first, smallest effect first; otherwise the earliest op in program order. This keeps the
//!   program order's overall shape and only hoists memory-releasing ops (a *freeing chain*:
//!   once a value's other users ran, its last user becomes free-first and runs at once).
//!
//! Inputs and outputs are persistent, so they are never "freed"; a result without users is
//! allocated and freed at its own point, so it does not count in the effect.
//!
//! Invariant: the result is a topological order of all ops (every op runs once, after the
//! producers of its operands). Cost: `O((ops + edges) log ops)` — the effect of an op changes
//! only when one of its operands drops to one remaining user, and stale heap entries are
//! skipped by a version check.

use super::context::Ctx;
use crate::memory::NONE;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Which ready op runs next (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Priority {
    /// Smallest effect first.
    Greedy,
    /// Effect `<= 0` first (smallest first), then program order.
    FreeFirst,
}

/// Effects within this distance of 0 (in key units, see `context.rs`) count as 0.
const EPS: f64 = 1e-12;

#[derive(Clone, Copy, Debug)]
struct Entry {
    class: u8,
    key: f64,
    rank: u32,
    op: u32,
    version: u32,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    /// Reversed, so that `BinaryHeap` pops the smallest `(class, key, rank, op)`.
    fn cmp(&self, o: &Self) -> Ordering {
        o.class
            .cmp(&self.class)
            .then(o.key.total_cmp(&self.key))
            .then(o.rank.cmp(&self.rank))
            .then(o.op.cmp(&self.op))
            .then(o.version.cmp(&self.version))
    }
}

/// A list schedule of all ops (op indices) under `priority`; `rank[op]` breaks ties (and
/// orders the allocating ops of [`Priority::FreeFirst`]): the op's position in a base
/// schedule, e.g. program order.
pub(crate) fn list_schedule(ctx: &Ctx, priority: Priority, rank: &[u32]) -> Vec<u32> {
    let info = &ctx.info;
    let n = ctx.num_ops();
    let mut remaining: Vec<u32> = (0..info.num_values())
        .map(|v| info.users.row(v).len() as u32)
        .collect();
    let mut pending: Vec<u32> = (0..n)
        .map(|op| {
            info.operands
                .row(op)
                .iter()
                .filter(|&&v| info.producer[v as usize] != NONE)
                .count() as u32
        })
        .collect();
    let mut version = vec![0u32; n];
    let mut done = vec![false; n];
    let effect = |op: usize, remaining: &[u32]| -> f64 {
        let alloc: f64 = info
            .results(op)
            .filter(|&r| info.persistent(r) || !info.users.row(r as usize).is_empty())
            .map(|r| ctx.value_key[r as usize])
            .sum();
        let freed: f64 = info
            .operands
            .row(op)
            .iter()
            .filter(|&&v| !info.persistent(v) && remaining[v as usize] == 1)
            .map(|&v| ctx.value_key[v as usize])
            .sum();
        alloc - freed
    };
    let entry = |op: usize, version: u32, remaining: &[u32]| -> Entry {
        let e = effect(op, remaining);
        let (class, key) = match priority {
            Priority::Greedy => (0, e),
            Priority::FreeFirst if e <= EPS => (0, e),
            Priority::FreeFirst => (1, 0.0),
        };
        Entry {
            class,
            key,
            rank: rank[op],
            op: op as u32,
            version,
        }
    };
    let mut heap = BinaryHeap::with_capacity(n);
    for (op, _) in pending.iter().enumerate().filter(|(_, &p)| p == 0) {
        heap.push(entry(op, 0, &remaining));
    }
    let mut order = Vec::with_capacity(n);
    while let Some(e) = heap.pop() {
        let op = e.op as usize;
        if done[op] || e.version != version[op] {
            continue;
        }
        done[op] = true;
        order.push(e.op);
        for &v in info.operands.row(op) {
            remaining[v as usize] -= 1;
            if remaining[v as usize] == 1 && !info.persistent(v) {
                // The last remaining user now frees `v`: its effect drops.
                if let Some(&u) = info
                    .users
                    .row(v as usize)
                    .iter()
                    .find(|&&u| !done[u as usize])
                {
                    let u = u as usize;
                    if pending[u] == 0 {
                        version[u] += 1;
                        heap.push(entry(u, version[u], &remaining));
                    }
                }
            }
        }
        for r in info.results(op) {
            for &u in info.users.row(r as usize) {
                let u = u as usize;
                pending[u] -= 1;
                if pending[u] == 0 {
                    heap.push(entry(u, version[u], &remaining));
                }
            }
        }
    }
    order
}
