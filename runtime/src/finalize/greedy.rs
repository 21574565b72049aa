//! The decision heuristic of [`super::finalize`]: which candidates to evict, and how, until
//! the peak fits the budget.
//!
//! After DTR (Kirisame et al., "Dynamic Tensor Rematerialization", ICLR 2021, §3: evict by
//! `cost / (memory · staleness)`), adapted to a plan known ahead:
//! 1. Every (candidate, allowed kind) pair is an option priced on the device
//!    ([`ebb_ir::cost::StepCosts`]) and scored `cost_us / (bytes · window)`, window = the
//!    points it frees; the windows and which node of a segment tree over the points holds each
//!    are known ahead ([`super::Prepared`]).
//! 2. While the peak (a [`PeakTree`] over resident bytes per point, O(log n) per query) is
//!    over the budget, take the best option of an untaken candidate whose window covers the
//!    peak point ([`CoverHeaps`]: lazy heaps over a segment tree of the points). A swap's score
//!    uses its marginal cost given the swaps already taken (they share the link:
//!    [`ebb_ir::cost::exposed_transfer_us`]); marginal costs are never below the static ones and
//!    only grow as swaps are taken, so a score evaluated earlier bounds the current one from
//!    below and only the options that could win are evaluated again (lazy evaluation, as in
//!    lazy greedy submodular maximization, Minoux 1978). Ties go to the better rank: static
//!    score, then larger values, then candidate and kind.
//!    When no option covers the point, *widen* a taken candidate instead: replace its option
//!    by one of the same candidate whose window strictly contains the old one and covers the
//!    point (a swap's window, which ends at its prefetch, becomes the recompute's, which ends
//!    at the next use), at the least added cost. Windows only grow, so this terminates.
//! 3. When neither exists the budget is infeasible; the lowest peak seen is the smallest
//!    budget this greedy meets (its choices do not depend on the budget).
//! 4. A second look (as Checkmate's rounding and MONeT's pruning tidy a relaxed solution):
//!    the chosen decisions, most expensive first, are dropped one at a time when the peak
//!    stays within the budget without them; then a local search switches each decision to
//!    its candidate's other kind where the peak stays within the budget and the total added
//!    time falls (a swap taken early while the link was free may cost more than its
//!    recompute once later swaps load the link), for at most [`SWITCH_PASSES`] passes.
//!
//! Invariant: the tree holds, at every point, the resident bytes with the chosen decisions
//! and each recompute's transient bytes charged in full at its regeneration point (a bound
//! on the checker's count, which `super::exact_residency` computes afterwards).

use super::cover::{CoverHeaps, CoverNodes, Rank};
use super::segtree::PeakTree;
use super::FinalizeError;
use ebb_ir::cost::exposed_transfer_us;
use ebb_ir::plan::{CandidateId, Decision, DecisionKind, Point};

/// One priced option: candidate `c` taken as `kind`, freeing `bytes` over points `[l, r]`,
/// adding `transient` bytes at point `r + 1` (a recompute's regeneration point; 0 for a swap),
/// at `cost_us`. Compact (64 bytes): the greedy reads options at random.
#[derive(Clone, Copy, Debug)]
pub(super) struct Option_ {
    /// Index into `Plan::candidates`.
    pub c: u32,
    pub kind: DecisionKind,
    pub l: u32,
    pub r: u32,
    pub bytes: i64,
    pub transient: i64,
    /// Static cost: recompute time, or a swap's exposure alone.
    pub cost_us: f64,
    /// One transfer of a swap, µs (0 for a recompute).
    pub transfer_us: f64,
    pub flops: i64,
    pub score: f64,
}

impl Option_ {
    /// Whether the option can be taken (an absent one is a placeholder: a kind not allowed, or
    /// a value without bytes).
    pub fn present(&self) -> bool {
        self.bytes > 0
    }

    /// The candidate.
    fn candidate(&self) -> CandidateId {
        CandidateId::new(self.c as usize)
    }

    fn window(&self) -> f64 {
        (self.r - self.l + 1) as f64
    }

    fn covers(&self, p: Point) -> bool {
        self.l as usize <= p.index() && p.index() <= self.r as usize
    }

    /// Applies (`sign` = 1) or undoes (`sign` = −1) the option on `tree`.
    fn apply(&self, tree: &mut PeakTree, sign: i64) {
        tree.add(self.l as usize, self.r as usize, -sign * self.bytes);
        let t = self.r as usize + 1;
        tree.add(t, t, sign * self.transient);
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

/// No option (in [`choose`]'s per-candidate table).
const NONE: u32 = u32::MAX;

/// Passes of the kind-switching local search.
pub(super) const SWITCH_PASSES: usize = 3;

/// The swaps taken so far, for marginal link costs.
#[derive(Clone, Copy, Default)]
struct Link {
    /// Σ exposure alone.
    alone: f64,
    /// Σ one-way transfer time.
    transfers: f64,
    /// The step's modelled time (what each direction of the link overlaps with).
    step_us: f64,
}

impl Link {
    fn exposed(&self) -> f64 {
        exposed_transfer_us(self.alone, self.transfers, self.step_us)
    }

    fn add(&mut self, o: &Option_, sign: f64) {
        if o.kind == DecisionKind::Swap {
            self.alone += sign * o.cost_us;
            self.transfers += sign * o.transfer_us;
        }
    }

    /// Added cost of taking `o` now.
    fn marginal(&self, o: &Option_) -> f64 {
        match o.kind {
            DecisionKind::Recompute => o.cost_us,
            DecisionKind::Swap => {
                let mut next = *self;
                next.add(o, 1.0);
                next.exposed() - self.exposed()
            }
        }
    }
}

/// Chooses decisions until `tree`'s peak is at most `budget` (see the module docs); `tree`
/// is left with the chosen decisions applied. `step_us` is the step's modelled time.
///
/// # Errors
/// [`FinalizeError::Infeasible`] with the smallest budget this greedy meets.
pub(super) fn choose(
    options: Vec<Option_>,
    cover: &CoverNodes,
    candidates: usize,
    tree: &mut PeakTree,
    budget: i64,
    step_us: f64,
) -> Result<Chosen, FinalizeError> {
    let mut link = Link {
        step_us,
        ..Link::default()
    };
    // Rank order: by score, then larger values first, then candidate and kind (unique keys;
    // the bits of a non-negative float order like its value).
    let rank: Vec<Rank> = options
        .iter()
        .map(|o| {
            (
                (o.score + 0.0).to_bits(),
                u64::MAX - o.bytes as u64,
                o.c << 1 | (o.kind == DecisionKind::Swap) as u32,
            )
        })
        .collect();
    // Options of each candidate (at most one per kind), in rank order, for widening and
    // switching.
    let mut of_candidate: Vec<[u32; 2]> = vec![[NONE; 2]; candidates];
    for (i, o) in options.iter().enumerate().filter(|(_, o)| o.present()) {
        let slot = &mut of_candidate[o.c as usize];
        if slot[0] == NONE {
            slot[0] = i as u32;
        } else if rank[i] < rank[slot[0] as usize] {
            *slot = [i as u32, slot[0]];
        } else {
            slot[1] = i as u32;
        }
    }
    let of = |c: usize| of_candidate[c].into_iter().filter(|&i| i != NONE);
    // The option taken per candidate, and the candidates in the order first taken.
    let mut state: Vec<Option<usize>> = vec![None; candidates];
    let mut order: Vec<CandidateId> = Vec::new();
    // `state[c].is_some()`, compact for the queries.
    let mut taken: Vec<bool> = vec![false; candidates];
    let mut heaps = CoverHeaps::new(cover, &rank);
    // A swap's score evaluated at link state `epoch` (bumped whenever the link changes).
    let mut fresh: Vec<(u32, u64)> = vec![(0, 0); options.len()];
    let mut epoch = 1u32;
    let mut lowest = i64::MAX;
    loop {
        let (peak, p) = tree.argmax();
        let p = Point::new(p);
        lowest = lowest.min(peak);
        if peak <= budget {
            break;
        }
        // The best marginal score among untaken options covering `p` (lazy: marginal scores
        // are at least the static ones, and only grow while the link only gains swaps).
        let pick = heaps.best(
            p.index(),
            |i| !options[i].present() || taken[options[i].c as usize],
            |i, key| {
                let o = &options[i];
                if o.kind == DecisionKind::Recompute {
                    return None;
                }
                let f = &mut fresh[i];
                if f.0 != epoch {
                    let score = link.marginal(o) / (o.bytes as f64 * o.window());
                    *f = (epoch, (score + 0.0).to_bits());
                }
                (f.1 != key).then_some(f.1)
            },
        );
        if let Some((_, i)) = pick {
            options[i].apply(tree, 1);
            if options[i].kind == DecisionKind::Swap {
                link.add(&options[i], 1.0);
                epoch += 1;
            }
            state[options[i].c as usize] = Some(i);
            taken[options[i].c as usize] = true;
            order.push(options[i].candidate());
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
            for j in of(c.index()) {
                let j = j as usize;
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
        link.add(&options[old], -1.0);
        options[new].apply(tree, 1);
        link.add(&options[new], 1.0);
        state[options[new].c as usize] = Some(new);
        // Scores may have fallen (a swap left the link): back to the static bounds.
        epoch += 1;
        if options[old].kind == DecisionKind::Swap {
            heaps.reset();
        }
    }
    let mut recompute_us: f64 = order
        .iter()
        .filter_map(|c| state[c.index()])
        .filter(|&i| options[i].kind == DecisionKind::Recompute)
        .map(|i| options[i].cost_us)
        .sum();
    // Second look: drop decisions the budget does not need, most expensive first (a swap's
    // transfer time counts: it loads the shared link).
    let mut by_cost: Vec<CandidateId> = order.clone();
    let cost = |c: &CandidateId| {
        state[c.index()].map_or(0.0, |i| options[i].cost_us.max(options[i].transfer_us))
    };
    by_cost.sort_by(|a, b| cost(b).total_cmp(&cost(a)).then(a.cmp(b)));
    for c in by_cost {
        let Some(i) = state[c.index()] else { continue };
        // Undoing it raises its window by its bytes and lowers only its transient's point
        // (after the window): the peak stays within the budget when the window's does.
        let o = &options[i];
        if tree.max_in(o.l as usize, o.r as usize) + o.bytes <= budget {
            o.apply(tree, -1);
            state[c.index()] = None;
            link.add(o, -1.0);
            if o.kind == DecisionKind::Recompute {
                recompute_us -= o.cost_us;
            }
        }
    }
    // Local search: switch a decision's kind where that lowers the total and keeps the budget.
    let recompute_of = |o: &Option_| match o.kind {
        DecisionKind::Recompute => o.cost_us,
        DecisionKind::Swap => 0.0,
    };
    for _ in 0..SWITCH_PASSES {
        let mut improved = false;
        for &c in &order {
            let Some(i) = state[c.index()] else { continue };
            for j in of(c.index()) {
                let j = j as usize;
                if j == i {
                    continue;
                }
                let before = recompute_us + link.exposed();
                let mut next = link;
                next.add(&options[i], -1.0);
                next.add(&options[j], 1.0);
                let rec = recompute_us - recompute_of(&options[i]) + recompute_of(&options[j]);
                if rec + next.exposed() >= before - 1e-9 * before.max(1.0) {
                    continue;
                }
                options[i].apply(tree, -1);
                options[j].apply(tree, 1);
                if tree.max() <= budget {
                    state[c.index()] = Some(j);
                    link = next;
                    recompute_us = rec;
                    improved = true;
                    break;
                }
                options[j].apply(tree, -1);
                options[i].apply(tree, 1);
            }
        }
        if !improved {
            break;
        }
    }
    let mut chosen = Chosen {
        decisions: Vec::new(),
        recompute_flops: 0,
        swap_bytes: 0,
        recompute_us: 0.0,
        exposed_transfer_us: 0.0,
    };
    let mut swaps = Link {
        step_us,
        ..Link::default()
    };
    for c in order {
        let Some(i) = state[c.index()] else { continue };
        let o = &options[i];
        chosen.decisions.push(Decision {
            candidate: o.candidate(),
            kind: o.kind,
        });
        swaps.add(o, 1.0);
        match o.kind {
            DecisionKind::Recompute => {
                chosen.recompute_flops += o.flops;
                chosen.recompute_us += o.cost_us;
            }
            DecisionKind::Swap => chosen.swap_bytes += o.bytes,
        }
    }
    chosen.exposed_transfer_us = swaps.exposed();
    Ok(chosen)
}
