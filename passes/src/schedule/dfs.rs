//! Depth-first post-order scheduling (XLA's `DFSMemoryScheduler`, after Sethi–Ullman): emit
//! each op right after its operands, visiting the operand subtrees that are *heavier* first —
//! more extra users (values that stay live for other consumers), then more cumulative bytes —
//! so that large subtrees are finished and released before small ones start.
//!
//! Statistics per op, in program order: `extra_users` = (users of its results − 1) plus its
//! producers' `extra_users`; `total` = its results' size keys plus its producers' `total`.
//! Both over-count shared subgraphs, as XLA's do (saturating, as `f64`). Roots are the ops
//! whose results have no users (graph outputs and dead ops), visited in the same order.
//!
//! Invariant: the result is a topological order of all ops. Iterative (no recursion), linear
//! apart from sorting each op's producers.

use super::context::Ctx;
use crate::memory::NONE;
use std::cmp::Ordering;

/// A depth-first post-order schedule of all ops (op indices).
pub(crate) fn dfs_schedule(ctx: &Ctx) -> Vec<u32> {
    let info = &ctx.info;
    let n = ctx.num_ops();
    let mut extra = vec![0f64; n];
    let mut total = vec![0f64; n];
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut has_users = vec![false; n];
    for op in 0..n {
        let mut users = 0usize;
        for r in info.results(op) {
            users += info.users.row(r as usize).len();
            total[op] += ctx.value_key[r as usize];
        }
        extra[op] = users.saturating_sub(1) as f64;
        let mut p: Vec<u32> = info
            .operands
            .row(op)
            .iter()
            .map(|&v| info.producer[v as usize])
            .filter(|&q| q != NONE)
            .collect();
        p.sort_unstable();
        p.dedup();
        for &q in &p {
            extra[op] += extra[q as usize];
            total[op] += total[q as usize];
            has_users[q as usize] = true;
        }
        preds[op] = p;
    }
    let heavier_first = |a: &u32, b: &u32| -> Ordering {
        let (a, b) = (*a as usize, *b as usize);
        extra[b]
            .total_cmp(&extra[a])
            .then(total[b].total_cmp(&total[a]))
            .then(a.cmp(&b))
    };
    for p in preds.iter_mut() {
        p.sort_by(heavier_first);
    }
    let mut roots: Vec<u32> = (0..n as u32)
        .filter(|&op| !has_users[op as usize])
        .collect();
    roots.sort_by(heavier_first);
    let mut done = vec![false; n];
    let mut order = Vec::with_capacity(n);
    let mut stack: Vec<(u32, usize)> = Vec::new();
    for root in roots {
        if done[root as usize] {
            continue;
        }
        done[root as usize] = true;
        stack.push((root, 0));
        while let Some((op, next)) = stack.last_mut() {
            let ps = &preds[*op as usize];
            while *next < ps.len() && done[ps[*next] as usize] {
                *next += 1;
            }
            if let Some(&q) = ps.get(*next) {
                *next += 1;
                // Marked on entry: a producer reachable twice is visited once (the graph is
                // acyclic, so nothing below `q` can reach `q` again).
                done[q as usize] = true;
                stack.push((q, 0));
            } else {
                order.push(*op);
                stack.pop();
            }
        }
    }
    order
}
