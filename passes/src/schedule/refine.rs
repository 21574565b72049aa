//! Peak-directed local search: improves a schedule by moving single ops away from the peak
//! point of the sampled binding where it does worst, keeping only *Pareto* moves — the peak
//! drops at one sample and rises at none.
//!
//! Moves, at the peak point `p` of the target sample (the one with the highest peak relative
//! to the reference schedule, usually program order):
//! * *sink*: an op before `p` whose results are all first used after `p` (or are outputs)
//!   and that allocates more than it frees moves to just before its first user (outputs: to
//!   the end), so its results are no longer resident at `p` (the rematerialization-free half
//!   of "delay allocations to their use", as in XLA's post-order heuristics);
//! * *hoist*: an op after `p` that is the last user of values resident at `p`, whose operands
//!   are all produced before `p`, and that frees more than it allocates moves to just before
//!   `p`, so those values are freed before the peak (a *freeing chain* cut short).
//!
//! Candidate moves are ranked by their gain at the target sample and evaluated exactly (all
//! samples) with [`Evaluator`], a lean re-implementation of the liveness sweep on
//! position-indexed arrays (`O(values + edges + samples * points)` per evaluation).
//!
//! Invariant: the result is a topological order, and at every sample its peak is at most the
//! input schedule's. The number of evaluations is capped ([`MAX_EVALS`]), so the cost is
//! bounded by `MAX_EVALS` sweeps of the graph.

use super::context::Ctx;
use crate::memory::NONE;
use ebb_ir::Point;

/// Most schedule evaluations per call.
pub(crate) const MAX_EVALS: usize = 400;
/// Moves evaluated per target point before giving up on it.
const MOVES_PER_POINT: usize = 8;

/// Peaks of position-indexed schedules at every sample (see the module docs).
pub(crate) struct Evaluator<'a> {
    ctx: &'a Ctx,
    /// `value_bytes[k][v]`: bytes of value `v` at sample `k`.
    value_bytes: Vec<Vec<i64>>,
    /// `transient_bytes[k][op]`.
    transient_bytes: Vec<Vec<i64>>,
}

/// Per-sample `(peak, point)` plus the def and end point of every value.
pub(crate) struct Eval {
    pub peaks: Vec<(i64, Point)>,
    pub def: Vec<Point>,
    pub end: Vec<Point>,
    pub point_of_op: Vec<Point>,
}

impl<'a> Evaluator<'a> {
    pub(crate) fn new(ctx: &'a Ctx) -> Self {
        let info = &ctx.info;
        let value_bytes = ctx
            .samples
            .iter()
            .map(|s| info.value_size.iter().map(|&id| s[id as usize]).collect())
            .collect();
        let transient_bytes = ctx
            .samples
            .iter()
            .map(|s| {
                info.transient
                    .iter()
                    .map(|&t| if t == NONE { 0 } else { s[t as usize] })
                    .collect()
            })
            .collect();
        Evaluator {
            ctx,
            value_bytes,
            transient_bytes,
        }
    }

    /// Evaluates the schedule `order` (op indices), same model as [`crate::memory::Liveness`].
    pub(crate) fn eval(&self, order: &[u32]) -> Eval {
        let info = &self.ctx.info;
        let n = order.len().max(1);
        let mut point_of_op = vec![Point::new(0); order.len()];
        for (p, &op) in Point::all(order.len()).zip(order) {
            point_of_op[op as usize] = p;
        }
        let nv = info.num_values();
        let mut def = vec![Point::new(0); nv];
        let mut end = vec![Point::new(0); nv];
        for v in 0..nv {
            let prod = info.producer[v];
            let d = if prod == NONE {
                Point::new(0)
            } else {
                point_of_op[prod as usize]
            };
            def[v] = d;
            end[v] = if info.persistent(v as u32) {
                Point::new(n - 1)
            } else {
                info.users
                    .row(v)
                    .iter()
                    .map(|&u| point_of_op[u as usize])
                    .max()
                    .unwrap_or(d)
                    .max(d)
            };
        }
        let mut delta = vec![0i64; n + 1];
        let peaks = (0..self.value_bytes.len())
            .map(|k| {
                delta.iter_mut().for_each(|d| *d = 0);
                let vb = &self.value_bytes[k];
                for v in 0..nv {
                    let (d, e) = (def[v].index(), end[v].index());
                    delta[d] = delta[d].saturating_add(vb[v]);
                    delta[e + 1] = delta[e + 1].saturating_sub(vb[v]);
                }
                for (op, &t) in self.transient_bytes[k].iter().enumerate() {
                    let p = point_of_op[op].index();
                    delta[p] = delta[p].saturating_add(t);
                    delta[p + 1] = delta[p + 1].saturating_sub(t);
                }
                let (mut acc, mut best) = (0i64, (i64::MIN, Point::new(0)));
                for (p, d) in Point::all(n).zip(&delta[..n]) {
                    acc = acc.saturating_add(*d);
                    if acc > best.0 {
                        best = (acc, p);
                    }
                }
                best
            })
            .collect();
        Eval {
            peaks,
            def,
            end,
            point_of_op,
        }
    }
}

/// `order` improved by local search against the reference peaks `reference` (one per sample;
/// the target sample is the one where `peak / reference` is highest). See the module docs.
pub(crate) fn refine(ctx: &Ctx, mut order: Vec<u32>, reference: &[i64]) -> Vec<u32> {
    let ev = Evaluator::new(ctx);
    let k_count = ctx.samples.len();
    if k_count == 0 || order.len() < 3 {
        return order;
    }
    let mut cur = ev.eval(&order);
    let mut evals = 1;
    let mut stuck = vec![false; k_count];
    while evals < MAX_EVALS {
        // Target: the sample with the highest peak relative to the reference, not stuck.
        let target = (0..k_count).filter(|&k| !stuck[k]).max_by(|&a, &b| {
            ratio(cur.peaks[a].0, reference[a]).total_cmp(&ratio(cur.peaks[b].0, reference[b]))
        });
        let Some(k) = target else { break };
        let moves = moves_at(ctx, &ev, &cur, k, &order);
        let mut improved = false;
        for mv in moves.into_iter().take(MOVES_PER_POINT) {
            if evals >= MAX_EVALS {
                break;
            }
            let next = apply(&order, mv);
            let e = ev.eval(&next);
            evals += 1;
            let no_worse = e.peaks.iter().zip(&cur.peaks).all(|(a, b)| a.0 <= b.0);
            if no_worse && e.peaks[k].0 < cur.peaks[k].0 {
                order = next;
                cur = e;
                improved = true;
                stuck.iter_mut().for_each(|s| *s = false);
                break;
            }
        }
        if !improved {
            stuck[k] = true;
        }
    }
    order
}

fn ratio(a: i64, b: i64) -> f64 {
    a as f64 / b.max(1) as f64
}

/// A move: take the op at position `from` and insert it so that it ends at position `to`
/// (positions in the schedule before the move).
#[derive(Clone, Copy, Debug)]
struct Move {
    from: Point,
    to: Point,
}

fn apply(order: &[u32], mv: Move) -> Vec<u32> {
    let mut next = order.to_vec();
    let op = next.remove(mv.from.index());
    let to = if mv.to > mv.from {
        mv.to.index() - 1
    } else {
        mv.to.index()
    };
    next.insert(to, op);
    next
}

/// Sink and hoist moves at the peak point of sample `k`, best estimated gain first.
fn moves_at(ctx: &Ctx, ev: &Evaluator, cur: &Eval, k: usize, order: &[u32]) -> Vec<Move> {
    let info = &ctx.info;
    let p = cur.peaks[k].1;
    let vb = &ev.value_bytes[k];
    let end_of_schedule = Point::new(order.len());
    let mut moves: Vec<(i64, Move)> = Vec::new();
    let mut seen_ops = std::collections::HashSet::new();
    for v in 0..info.num_values() {
        if cur.def[v] > p || cur.end[v] < p {
            continue;
        }
        // Sink the producer of a value defined before p and first used after it.
        let prod = info.producer[v];
        if prod != NONE && cur.def[v] < p && seen_ops.insert((0u8, prod)) {
            let op = prod as usize;
            let mut first_use: Option<Point> = None;
            let mut alloc = 0i64;
            for r in info.results(op) {
                alloc += vb[r as usize];
                let fu = info
                    .users
                    .row(r as usize)
                    .iter()
                    .map(|&u| cur.point_of_op[u as usize])
                    .min();
                let fu = fu.unwrap_or(if info.persistent(r) {
                    end_of_schedule
                } else {
                    cur.def[r as usize]
                });
                first_use = Some(first_use.map_or(fu, |x| x.min(fu)));
            }
            let freed: i64 = info
                .operands
                .row(op)
                .iter()
                .filter(|&&o| !info.persistent(o) && cur.end[o as usize] == cur.def[v])
                .map(|&o| vb[o as usize])
                .sum();
            if let Some(first_use) = first_use.filter(|&f| f > p && alloc > freed) {
                moves.push((
                    alloc - freed,
                    Move {
                        from: cur.def[v],
                        to: first_use.min(end_of_schedule),
                    },
                ));
            }
        }
        // Hoist the last user of a value resident at p, if it can run before p.
        if !info.persistent(v as u32) && cur.end[v] > p {
            let y_at = cur.end[v];
            let y = order[y_at.index()];
            if !seen_ops.insert((1u8, y)) {
                continue;
            }
            let ready = info
                .operands
                .row(y as usize)
                .iter()
                .all(|&o| cur.def[o as usize] < p);
            if !ready {
                continue;
            }
            let freed: i64 = info
                .operands
                .row(y as usize)
                .iter()
                .filter(|&&o| !info.persistent(o) && cur.end[o as usize] == y_at)
                .map(|&o| vb[o as usize])
                .sum();
            let alloc: i64 = info.results(y as usize).map(|r| vb[r as usize]).sum();
            if freed > alloc {
                moves.push((freed - alloc, Move { from: y_at, to: p }));
            }
        }
    }
    moves.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.from.cmp(&b.1.from)));
    moves.into_iter().map(|(_, m)| m).collect()
}
