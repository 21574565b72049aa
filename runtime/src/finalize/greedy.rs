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
//!    peak point (scanning, in rank order, only the options whose window meets the peak's
//!    block of [`BLOCK`] points: [`CoverIndex`]). A swap's score uses its marginal cost given the swaps already taken (they
//!    share the link: [`ebb_ir::cost::exposed_transfer_us`]); marginal costs are never below
//!    the static ones, so the scan stops at the first static score above the best marginal
//!    one found (lazy evaluation, as in lazy greedy submodular maximization, Minoux 1978).
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

use super::segtree::PeakTree;
use super::FinalizeError;
use ebb_ir::cost::exposed_transfer_us;
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
    /// Static cost: recompute time, or a swap's exposure alone.
    pub cost_us: f64,
    /// One transfer of a swap, µs (0 for a recompute).
    pub transfer_us: f64,
    pub flops: i64,
    pub score: f64,
}

impl Option_ {
    fn window(&self) -> f64 {
        (self.r.index() - self.l.index() + 1) as f64
    }

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

/// Points per block of [`CoverIndex`].
const BLOCK: usize = 256;

/// For each block of [`BLOCK`] points, the options (indices in rank order) whose window meets
/// it: the scan for an option covering point `p` reads only `p`'s block (compressed rows).
struct CoverIndex {
    /// `entries[start[b]..start[b + 1]]`: the options meeting block `b`.
    start: Vec<u32>,
    entries: Vec<u32>,
}

impl CoverIndex {
    fn new(scan: &[(f64, u32, u32, u32)], points: usize) -> CoverIndex {
        let blocks = points.div_ceil(BLOCK).max(1);
        let block = |p: u32| (p as usize / BLOCK).min(blocks - 1);
        let mut start = vec![0u32; blocks + 1];
        for &(_, l, r, _) in scan {
            for b in block(l)..=block(r) {
                start[b + 1] += 1;
            }
        }
        for b in 0..blocks {
            start[b + 1] += start[b];
        }
        let mut fill = start.clone();
        let mut entries = vec![0u32; start[blocks] as usize];
        for (i, &(_, l, r, _)) in scan.iter().enumerate() {
            for b in block(l)..=block(r) {
                entries[fill[b] as usize] = i as u32;
                fill[b] += 1;
            }
        }
        CoverIndex { start, entries }
    }

    /// The options whose window meets the block of point `p`, in rank order.
    fn meeting(&self, p: usize) -> &[u32] {
        let b = (p / BLOCK).min(self.start.len() - 2);
        &self.entries[self.start[b] as usize..self.start[b + 1] as usize]
    }
}

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
    candidates: usize,
    tree: &mut PeakTree,
    budget: i64,
    step_us: f64,
) -> Result<Chosen, FinalizeError> {
    let mut link = Link {
        step_us,
        ..Link::default()
    };
    // By score, then larger values first, then candidate and kind. Keys are unique, so an
    // unstable sort is deterministic; the bits of a non-negative float order like its value.
    // Sorted as compact keys, then gathered: moving the options themselves costs more.
    let mut keys: Vec<(u64, u64, u32, u32)> = options
        .iter()
        .enumerate()
        .map(|(i, o)| {
            (
                (o.score + 0.0).to_bits(),
                u64::MAX - o.bytes as u64,
                (o.c.index() as u32) << 1 | (o.kind == DecisionKind::Swap) as u32,
                i as u32,
            )
        })
        .collect();
    keys.sort_unstable();
    let options: Vec<Option_> = keys.iter().map(|k| options[k.3 as usize]).collect();
    // Options of each candidate, for widening.
    let mut of_candidate: Vec<Vec<usize>> = vec![Vec::new(); candidates];
    for (i, o) in options.iter().enumerate() {
        of_candidate[o.c.index()].push(i);
    }
    // The option taken per candidate, and the candidates in the order first taken.
    let mut state: Vec<Option<usize>> = vec![None; candidates];
    let mut order: Vec<CandidateId> = Vec::new();
    // What the scan below reads, contiguous: (score, first point, last point, candidate).
    let scan: Vec<(f64, u32, u32, u32)> = options
        .iter()
        .map(|o| {
            (
                o.score,
                o.l.index() as u32,
                o.r.index() as u32,
                o.c.index() as u32,
            )
        })
        .collect();
    // `state[c].is_some()`, compact for the scan.
    let mut taken: Vec<bool> = vec![false; candidates];
    let blocks = CoverIndex::new(&scan, tree.len());
    let mut lowest = i64::MAX;
    loop {
        let (peak, p) = tree.argmax();
        let p = Point::new(p);
        lowest = lowest.min(peak);
        if peak <= budget {
            break;
        }
        // The best marginal score among untaken options covering `p` (lazy: marginal scores
        // are at least the static ones the options are sorted by).
        let mut pick: Option<(f64, usize)> = None;
        let at = p.index() as u32;
        for &i in blocks.meeting(p.index()) {
            let i = i as usize;
            let (static_score, l, r, c) = scan[i];
            if pick.is_some_and(|(best, _)| static_score >= best) {
                break;
            }
            if l <= at && at <= r && !taken[c as usize] {
                let o = &options[i];
                let score = link.marginal(o) / (o.bytes as f64 * o.window());
                if pick.is_none_or(|(best, _)| score < best) {
                    pick = Some((score, i));
                }
            }
        }
        if let Some((_, i)) = pick {
            options[i].apply(tree, 1);
            link.add(&options[i], 1.0);
            state[options[i].c.index()] = Some(i);
            taken[options[i].c.index()] = true;
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
        link.add(&options[old], -1.0);
        options[new].apply(tree, 1);
        link.add(&options[new], 1.0);
        state[options[new].c.index()] = Some(new);
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
        options[i].apply(tree, -1);
        if tree.argmax().0 <= budget {
            state[c.index()] = None;
            link.add(&options[i], -1.0);
            if options[i].kind == DecisionKind::Recompute {
                recompute_us -= options[i].cost_us;
            }
        } else {
            options[i].apply(tree, 1);
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
            for &j in &of_candidate[c.index()] {
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
                if tree.argmax().0 <= budget {
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
            candidate: o.c,
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
