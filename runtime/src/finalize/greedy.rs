//! The decision heuristic of [`super::finalize`]: which candidates to evict, and how, until
//! the peak fits the budget.
//!
//! After DTR (Kirisame et al., "Dynamic Tensor Rematerialization", ICLR 2021, §3: evict by
//! `cost / (memory · staleness)`), adapted to a plan known ahead:
//! 1. Every (candidate, allowed kind) pair is an option priced on the device
//!    ([`ebb_ir::cost::StepCosts`]) and scored `cost_us / (bytes · window)`, window = the
//!    points it frees. Options are sorted best first.
//! 2. While the peak (a [`PeakTree`] over resident bytes per point, O(log n) per query) is
//!    over the budget, take the best option of an untaken candidate whose window covers the
//!    peak point. When none covers it, *widen* a taken candidate instead: replace its option
//!    by one of the same candidate whose window strictly contains the old one and covers the
//!    point (a swap's window, which ends at its prefetch, becomes the recompute's, which ends
//!    at the next use), at the least added cost. Windows only grow, so this terminates.
//! 3. When neither exists the budget is infeasible; the lowest peak seen is the smallest
//!    budget this greedy meets (its choices do not depend on the budget).
//! 4. A second look (as Checkmate's rounding and MONeT's pruning tidy a relaxed solution):
//!    the chosen decisions, most expensive first, are dropped one at a time when the peak
//!    stays within the budget without them.
//!
//! Invariant: the tree holds, at every point, the resident bytes with the chosen decisions
//! and each recompute's transient bytes charged in full at its regeneration point (a bound
//! on the checker's count, which `super::exact_residency` computes afterwards).

use super::segtree::PeakTree;
use super::FinalizeError;
use ebb_ir::plan::{CandidateId, Decision, DecisionKind, Point};

/// One priced option: candidate `c` taken as `kind`, freeing `bytes` over `[l, r]`, adding
/// `transient` bytes at point `transient.0` (recompute), at `cost_us`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Option_ {
    pub c: CandidateId,
    pub kind: DecisionKind,
    pub l: Point,
    pub r: Point,
    pub bytes: i64,
    pub transient: (Point, i64),
    pub cost_us: f64,
    pub flops: i64,
    pub score: f64,
}

impl Option_ {
    fn covers(&self, p: Point) -> bool {
        self.l <= p && p <= self.r
    }

    /// Applies (`sign` = 1) or undoes (`sign` = −1) the option on `tree`.
    fn apply(&self, tree: &mut PeakTree, sign: i64) {
        tree.add(self.l.index(), self.r.index(), -sign * self.bytes);
        let t = self.transient.0.index();
        tree.add(t, t, sign * self.transient.1);
    }
}

/// The decisions chosen, in the order taken (the order regenerations run in).
pub(super) struct Chosen {
    pub decisions: Vec<Decision>,
    pub recompute_flops: i64,
    pub swap_bytes: i64,
    pub recompute_us: f64,
    pub exposed_transfer_us: f64,
}

/// Chooses decisions until `tree`'s peak is at most `budget` (see the module docs); `tree`
/// is left with the chosen decisions applied.
///
/// # Errors
/// [`FinalizeError::Infeasible`] with the smallest budget this greedy meets.
pub(super) fn choose(
    mut options: Vec<Option_>,
    candidates: usize,
    tree: &mut PeakTree,
    budget: i64,
) -> Result<Chosen, FinalizeError> {
    options.sort_by(|a, b| {
        a.score
            .total_cmp(&b.score)
            .then(b.bytes.cmp(&a.bytes))
            .then(a.c.cmp(&b.c))
            .then(a.kind.cmp(&b.kind))
    });
    // Options of each candidate, for widening.
    let mut of_candidate: Vec<Vec<usize>> = vec![Vec::new(); candidates];
    for (i, o) in options.iter().enumerate() {
        of_candidate[o.c.index()].push(i);
    }
    // The option taken per candidate, and the candidates in the order first taken.
    let mut state: Vec<Option<usize>> = vec![None; candidates];
    let mut order: Vec<CandidateId> = Vec::new();
    let mut lowest = i64::MAX;
    loop {
        let (peak, p) = tree.argmax();
        let p = Point::new(p);
        lowest = lowest.min(peak);
        if peak <= budget {
            break;
        }
        if let Some(i) = options
            .iter()
            .position(|o| state[o.c.index()].is_none() && o.covers(p))
        {
            options[i].apply(tree, 1);
            state[options[i].c.index()] = Some(i);
            order.push(options[i].c);
            continue;
        }
        // Widen a taken candidate's window over `p`, at the least added cost.
        let mut best: Option<(f64, usize, usize)> = None;
        for &c in &order {
            let Some(old) = state[c.index()] else {
                continue;
            };
            let o = &options[old];
            if o.covers(p) {
                continue;
            }
            for &j in &of_candidate[c.index()] {
                let n = &options[j];
                if n.covers(p) && n.l <= o.l && o.r <= n.r {
                    let delta = n.cost_us - o.cost_us;
                    if best.is_none_or(|(d, _, _)| delta < d) {
                        best = Some((delta, old, j));
                    }
                }
            }
        }
        let Some((_, old, new)) = best else {
            return Err(FinalizeError::Infeasible {
                budget,
                smallest: lowest,
                smallest_mib: lowest as f64 / 1048576.0,
            });
        };
        options[old].apply(tree, -1);
        options[new].apply(tree, 1);
        state[options[new].c.index()] = Some(new);
    }
    // Second look: drop decisions the budget does not need, most expensive first.
    let mut by_cost: Vec<CandidateId> = order.clone();
    by_cost.sort_by(|a, b| {
        let cost = |c: &CandidateId| state[c.index()].map_or(0.0, |i| options[i].cost_us);
        cost(b).total_cmp(&cost(a)).then(a.cmp(b))
    });
    for c in by_cost {
        let Some(i) = state[c.index()] else { continue };
        options[i].apply(tree, -1);
        if tree.argmax().0 <= budget {
            state[c.index()] = None;
        } else {
            options[i].apply(tree, 1);
        }
    }
    let mut chosen = Chosen {
        decisions: Vec::new(),
        recompute_flops: 0,
        swap_bytes: 0,
        recompute_us: 0.0,
        exposed_transfer_us: 0.0,
    };
    for c in order {
        let Some(i) = state[c.index()] else { continue };
        let o = &options[i];
        chosen.decisions.push(Decision {
            candidate: o.c,
            kind: o.kind,
        });
        match o.kind {
            DecisionKind::Recompute => {
                chosen.recompute_flops += o.flops;
                chosen.recompute_us += o.cost_us;
            }
            DecisionKind::Swap => {
                chosen.swap_bytes += o.bytes;
                chosen.exposed_transfer_us += o.cost_us;
            }
        }
    }
    Ok(chosen)
}
