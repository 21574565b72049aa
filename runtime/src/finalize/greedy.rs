//! The decision heuristic of [`super::finalize`]: which candidates to evict, and how, until
//! the peak fits the budget.
//!
//! After DTR (Kirisame et al., "Dynamic Tensor Rematerialization", ICLR 2021, §3: evict by
//! `cost / (memory · staleness)`), adapted to a plan known ahead:
//! 1. Every (candidate, allowed kind) pair is an option priced on the device
//!    ([`ebb_ir::cost::StepCosts`]) and scored `cost_us / (bytes · √k)`, k = the points of
//!    its window (the points it frees) over the budget before any decision (`benefits`
//!    gives the measurements behind the square root); the windows and which node of a
//!    segment tree over the points holds each are known ahead ([`super::Prepared`]).
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
//! 3. When neither exists the budget is not met (step 6).
//! 4. A second look (as Checkmate's rounding and MONeT's pruning tidy a relaxed solution):
//!    the chosen decisions, most expensive first, are dropped one at a time when the peak
//!    stays within the budget without them; then a local search switches each decision to
//!    its candidate's other kind where the peak stays within the budget and the total added
//!    time falls (a swap taken early while the link was free may cost more than its
//!    recompute once later swaps load the link), for at most [`SWITCH_PASSES`] passes.
//! 5. While the link is idle a swap hidden by compute is free, so the first peaks are
//!    covered by swaps; when the swaps end up moving more than the step's compute hides
//!    (Σ transfers > step time), the greedy runs again with every swap priced at least its
//!    transfer time (its cost on a saturated link, the link's price in a Lagrangian sense)
//!    and the run that adds less time is kept (GPT-2 small B=8 S=1024 on `h100-sxm-pcie5`
//!    at 98% of half the scheduled peak: 12.1% → 7.8%, the ILP optimum).
//! 6. When the budget is not met, the greedy runs once more with the budget-independent
//!    score `cost_us / (bytes · window)`: its choices are the same at every budget down to
//!    the lowest peak it reaches, which is then the smallest budget reported.
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

    /// The option's cost for its score given `cost_us` (a swap's marginal or static exposed
    /// time): a swap costs at least `link_price` times its transfer time.
    fn priced(&self, cost_us: f64, link_price: f64) -> f64 {
        match self.kind {
            DecisionKind::Swap => cost_us.max(link_price * self.transfer_us),
            DecisionKind::Recompute => cost_us,
        }
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
    /// The options taken, parallel to `decisions`.
    options: Vec<usize>,
    pub recompute_flops: i64,
    pub swap_bytes: i64,
    pub recompute_us: f64,
    pub exposed_transfer_us: f64,
}

impl Chosen {
    /// Charges the chosen `options` (those [`choose`] was given) to `resident`, the bytes per
    /// point before any decision: each frees its bytes over its window and adds its transient
    /// at the point after — what [`Option_::apply`] does on the tree, as one difference array
    /// (O(points + decisions)).
    pub fn charge(&self, options: &[Option_], resident: &mut [i64]) {
        let n = resident.len();
        let mut diff = vec![0i64; n + 1];
        for &i in &self.options {
            let o = &options[i];
            let (l, t) = (o.l as usize, o.r as usize + 1);
            if l < n && o.l <= o.r {
                diff[l] -= o.bytes;
                diff[t.min(n)] += o.bytes;
            }
            if t < n {
                diff[t] += o.transient;
                diff[t + 1] -= o.transient;
            }
        }
        let mut acc = 0i64;
        for (x, d) in resident.iter_mut().zip(&diff) {
            acc += d;
            *x += acc;
        }
    }

    /// The time the decisions add, µs.
    fn added_us(&self) -> f64 {
        self.recompute_us + self.exposed_transfer_us
    }
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
    /// Whether the swaps move more than the step's compute hides (each further µs of
    /// transfer is exposed).
    fn saturated(&self) -> bool {
        self.transfers > self.step_us
    }

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

/// The state of one greedy run (see the module docs): the options, which one each candidate
/// has taken, the link's load and the peak tree with the taken options applied.
struct Greedy<'a> {
    options: &'a [Option_],
    /// Options of each candidate (at most one per kind), in rank order.
    of_candidate: Vec<[u32; 2]>,
    /// The option taken per candidate.
    state: Vec<Option<usize>>,
    /// The candidates in the order first taken.
    order: Vec<CandidateId>,
    /// `state[c].is_some()` at some time: candidates that may not be picked.
    taken: Vec<bool>,
    heaps: CoverHeaps<'a>,
    /// A swap's score evaluated at link state `epoch` (bumped whenever the link changes).
    fresh: Vec<(u32, u64)>,
    epoch: u32,
    link: Link,
    tree: &'a mut PeakTree,
    budget: i64,
    /// The lowest peak seen by [`Greedy::fill`].
    lowest: i64,
    /// Per option, the denominator of its score ([`benefits`]).
    benefit: &'a [f64],
    /// A swap is priced at least this times its transfer time ([`Option_::priced`]).
    link_price: f64,
}

impl<'a> Greedy<'a> {
    /// A run with nothing taken: `options` ranked by `rank` (static scores from `benefit`
    /// and `link_price`), stabbed through `cover`, over `tree` (the bytes per point).
    #[allow(clippy::too_many_arguments)]
    fn new(
        options: &'a [Option_],
        benefit: &'a [f64],
        link_price: f64,
        rank: &'a [Rank],
        cover: &'a CoverNodes,
        candidates: usize,
        tree: &'a mut PeakTree,
        budget: i64,
        step_us: f64,
    ) -> Self {
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
        Greedy {
            options,
            of_candidate,
            state: vec![None; candidates],
            order: Vec::new(),
            taken: vec![false; candidates],
            heaps: CoverHeaps::new(cover, rank),
            fresh: vec![(0, 0); options.len()],
            epoch: 1,
            link: Link {
                step_us,
                ..Link::default()
            },
            tree,
            budget,
            lowest: i64::MAX,
            benefit,
            link_price,
        }
    }

    /// The options of candidate `c`, in rank order (a copy: `self` stays free to change).
    fn of(&self, c: usize) -> impl Iterator<Item = usize> {
        let slots = self.of_candidate[c];
        slots.into_iter().filter(|&i| i != NONE).map(|i| i as usize)
    }

    /// Replaces candidate `c`'s option by `new` on the tree and the link.
    fn set(&mut self, c: usize, new: usize) {
        if let Some(o) = self.state[c] {
            self.options[o].apply(self.tree, -1);
            self.link.add(&self.options[o], -1.0);
        } else {
            self.order.push(CandidateId::new(c));
        }
        self.options[new].apply(self.tree, 1);
        self.link.add(&self.options[new], 1.0);
        self.state[c] = Some(new);
        self.taken[c] = true;
    }

    /// Takes options until the peak is within the budget (steps 2 and 3 of the module docs);
    /// `false` when neither an option nor a widening covers the peak point (the lowest peak
    /// seen is then [`Greedy::lowest`]).
    fn fill(&mut self) -> bool {
        loop {
            let (peak, p) = self.tree.argmax();
            let p = Point::new(p);
            self.lowest = self.lowest.min(peak);
            if peak <= self.budget {
                return true;
            }
            // The best marginal score among untaken options covering `p` (lazy: marginal
            // scores are at least the static ones, and only grow while the link only gains
            // swaps).
            let (benefit, link_price) = (self.benefit, self.link_price);
            let (options, taken, fresh, link, epoch) = (
                self.options,
                &self.taken,
                &mut self.fresh,
                &self.link,
                self.epoch,
            );
            let pick = self.heaps.best(
                p.index(),
                |i| !options[i].present() || taken[options[i].c as usize],
                |c| taken[c as usize],
                |i, key| {
                    let o = &options[i];
                    let f = &mut fresh[i];
                    if f.0 != epoch {
                        let score = o.priced(link.marginal(o), link_price) / benefit[i];
                        *f = (epoch, (score + 0.0).to_bits());
                    }
                    (f.1 != key).then_some(f.1)
                },
            );
            if let Some((_, i)) = pick {
                self.set(options[i].c as usize, i);
                if options[i].kind == DecisionKind::Swap {
                    self.epoch += 1;
                }
                continue;
            }
            // Widen a taken candidate's window over `p`, at the least added cost.
            let Some((old, new)) = self.widening(p) else {
                return false;
            };
            self.set(options[new].c as usize, new);
            // Scores may have fallen (a swap left the link): back to the static bounds.
            self.epoch += 1;
            if options[old].kind == DecisionKind::Swap {
                self.heaps.reset();
            }
        }
    }

    /// The widening of least added cost that covers `p`: `(old option, new option)`.
    fn widening(&self, p: Point) -> Option<(usize, usize)> {
        let mut best: Option<(f64, usize, usize)> = None;
        for &c in &self.order {
            let Some(old) = self.state[c.index()] else {
                continue;
            };
            let o = &self.options[old];
            if o.covers(p) {
                continue;
            }
            for j in self.of(c.index()) {
                let n = &self.options[j];
                if n.covers(p) && n.l <= o.l && o.r <= n.r {
                    let delta = n.cost_us - o.cost_us;
                    if best.is_none_or(|(d, _, _)| delta < d) {
                        best = Some((delta, old, j));
                    }
                }
            }
        }
        best.map(|(_, old, new)| (old, new))
    }

    /// Removes every taken option from the tree (left as before the run); the lowest peak
    /// seen.
    fn give_back(self) -> i64 {
        for i in self.state.iter().flatten() {
            self.options[*i].apply(self.tree, -1);
        }
        self.lowest
    }

    /// Σ modelled time of the taken recomputes, µs (in the order taken).
    fn recompute_us(&self) -> f64 {
        self.order
            .iter()
            .filter_map(|c| self.state[c.index()])
            .filter(|&i| self.options[i].kind == DecisionKind::Recompute)
            .map(|i| self.options[i].cost_us)
            .sum()
    }

    /// Second look: drops decisions the budget does not need, most expensive first (a swap's
    /// transfer time counts: it loads the shared link); `recompute_us` follows.
    fn drop_unneeded(&mut self, recompute_us: &mut f64) {
        // Each cost read once (not per comparison).
        let mut by_cost: Vec<(f64, CandidateId)> = self
            .order
            .iter()
            .map(|&c| {
                let cost = self.state[c.index()].map_or(0.0, |i| {
                    self.options[i].cost_us.max(self.options[i].transfer_us)
                });
                (cost, c)
            })
            .collect();
        by_cost.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, c) in by_cost {
            let Some(i) = self.state[c.index()] else {
                continue;
            };
            // Undoing it raises its window by its bytes and lowers only its transient's point
            // (after the window): the peak stays within the budget when the window's does.
            let o = &self.options[i];
            if self.tree.max_in(o.l as usize, o.r as usize) + o.bytes <= self.budget {
                o.apply(self.tree, -1);
                self.state[c.index()] = None;
                self.link.add(o, -1.0);
                if o.kind == DecisionKind::Recompute {
                    *recompute_us -= o.cost_us;
                }
            }
        }
    }

    /// Local search: switches a decision's kind where that lowers the total and keeps the
    /// budget, for at most [`SWITCH_PASSES`] passes; `recompute_us` follows.
    fn switch_kinds(&mut self, recompute_us: &mut f64) {
        let recompute_of = |o: &Option_| match o.kind {
            DecisionKind::Recompute => o.cost_us,
            DecisionKind::Swap => 0.0,
        };
        for _ in 0..SWITCH_PASSES {
            let mut improved = false;
            for k in 0..self.order.len() {
                let c = self.order[k].index();
                let Some(i) = self.state[c] else { continue };
                for j in self.of(c) {
                    if j == i {
                        continue;
                    }
                    let (oi, oj) = (&self.options[i], &self.options[j]);
                    let before = *recompute_us + self.link.exposed();
                    let mut next = self.link;
                    next.add(oi, -1.0);
                    next.add(oj, 1.0);
                    let rec = *recompute_us - recompute_of(oi) + recompute_of(oj);
                    if rec + next.exposed() >= before - 1e-9 * before.max(1.0) {
                        continue;
                    }
                    oi.apply(self.tree, -1);
                    oj.apply(self.tree, 1);
                    if self.tree.max() <= self.budget {
                        self.state[c] = Some(j);
                        self.link = next;
                        *recompute_us = rec;
                        improved = true;
                        break;
                    }
                    oj.apply(self.tree, -1);
                    oi.apply(self.tree, 1);
                }
            }
            if !improved {
                break;
            }
        }
    }

    /// The decisions taken, in the order first taken, with their totals.
    fn chosen(&self) -> Chosen {
        let mut chosen = Chosen {
            decisions: Vec::new(),
            options: Vec::new(),
            recompute_flops: 0,
            swap_bytes: 0,
            recompute_us: 0.0,
            exposed_transfer_us: 0.0,
        };
        let mut swaps = Link {
            step_us: self.link.step_us,
            ..Link::default()
        };
        for c in &self.order {
            let Some(i) = self.state[c.index()] else {
                continue;
            };
            let o = &self.options[i];
            chosen.decisions.push(Decision {
                candidate: o.candidate(),
                kind: o.kind,
            });
            chosen.options.push(i);
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
        chosen
    }
}

/// Chooses decisions until `tree`'s peak is at most `budget` (see the module docs); `tree`
/// (over `resident`, the bytes per point before any decision) is left with the chosen
/// decisions applied. `step_us` is the step's modelled time.
///
/// Runs the greedy with swaps priced by their marginal exposed time; when its swaps saturate
/// the link, runs it again with every swap priced at least its transfer time (what it costs
/// on a saturated link) and keeps the run that adds less time (the first on a tie).
///
/// # Errors
/// [`FinalizeError::Infeasible`] with the smallest budget this greedy meets.
pub(super) fn choose(
    options: &[Option_],
    cover: &CoverNodes,
    candidates: usize,
    tree: &mut PeakTree,
    resident: &[i64],
    budget: i64,
    step_us: f64,
) -> Result<Chosen, FinalizeError> {
    let run = Run {
        options,
        cover,
        candidates,
        budget,
        step_us,
    };
    let over = benefits(options, Some((resident, budget)));
    let first = match run.decide(tree, &over, 0.0) {
        Ok(first) => first,
        // Scores that do not depend on the budget: this run's choices are the same at every
        // budget down to the lowest peak it reaches, so that peak is a budget it meets.
        Err(_) => {
            let window = benefits(options, None);
            return run
                .decide(tree, &window, 0.0)
                .map(|c| c.0)
                .map_err(|lowest| FinalizeError::Infeasible {
                    budget,
                    smallest: lowest,
                    smallest_mib: lowest as f64 / 1048576.0,
                });
        }
    };
    if !first.1 {
        return Ok(first.0);
    }
    run.undo(tree, &first.0);
    let Ok(second) = run.decide(tree, &over, 1.0) else {
        run.redo(tree, &first.0);
        return Ok(first.0);
    };
    if second.0.added_us() < first.0.added_us() {
        return Ok(second.0);
    }
    run.undo(tree, &second.0);
    run.redo(tree, &first.0);
    Ok(first.0)
}

/// Each option's benefit, the denominator of its score. With `(resident, budget)` (bytes per
/// point before any decision): its bytes times the square root of the number of points of
/// its window over the budget (at least one); without: its bytes times its window's points
/// (the score does not depend on the budget).
///
/// Bytes alone price the memory freed at the peak point only and overrate short windows of
/// large values; bytes times the points over the budget (a covering greedy's "elements
/// covered", Chvátal 1979) overrates long windows, whose points are mostly covered by other
/// options by the time they matter. GPT-2 small, B=8, S = 250/379/1024, `h100-sxm-pcie5`,
/// decisions for 98% of half the scheduled peak, each with step 5's second run: bytes alone
/// 14.5/12.1/8.9% added, bytes × points 11.1/18.8/7.8%, the square root 11.1/5.5/7.8%, the
/// ILP optimum 11.1/5.2/7.8%; the previous score (bytes × the whole window, no second run)
/// 17.6/20.7/26.9%.
fn benefits(options: &[Option_], over_budget: Option<(&[i64], i64)>) -> Vec<f64> {
    let Some((resident, budget)) = over_budget else {
        return options
            .iter()
            .map(|o| o.bytes as f64 * (o.r - o.l + 1) as f64)
            .collect();
    };
    // over[p] = points before p over the budget.
    let mut over = Vec::with_capacity(resident.len() + 1);
    over.push(0u32);
    let mut n = 0u32;
    for &x in resident {
        n += (x > budget) as u32;
        over.push(n);
    }
    let last = over.len() - 1;
    options
        .iter()
        .map(|o| {
            let (l, r) = ((o.l as usize).min(last), (o.r as usize + 1).min(last));
            let k = over[r].saturating_sub(over[l]).max(1);
            o.bytes as f64 * f64::from((k as f32).sqrt())
        })
        .collect()
}

/// What every greedy run of one [`choose`] reads.
struct Run<'a> {
    options: &'a [Option_],
    cover: &'a CoverNodes,
    candidates: usize,
    budget: i64,
    step_us: f64,
}

impl Run<'_> {
    /// One greedy run with options scored by `benefit` ([`benefits`]) and swaps priced at
    /// least `link_price` times their transfer time: the decisions and whether their swaps
    /// saturate the link, or the lowest peak it reached when the budget is infeasible (then
    /// `tree` is left as it was).
    fn decide(
        &self,
        tree: &mut PeakTree,
        benefit: &[f64],
        link_price: f64,
    ) -> Result<(Chosen, bool), i64> {
        // Rank order: by score, then larger values first, then candidate and kind (unique
        // keys; the bits of a non-negative float order like its value).
        let rank: Vec<Rank> = self
            .options
            .iter()
            .zip(benefit)
            .map(|(o, benefit)| {
                let score = o.priced(o.cost_us, link_price) / benefit;
                (
                    (score + 0.0).to_bits(),
                    u64::MAX - o.bytes as u64,
                    o.c << 1 | (o.kind == DecisionKind::Swap) as u32,
                )
            })
            .collect();
        let mut g = Greedy::new(
            self.options,
            benefit,
            link_price,
            &rank,
            self.cover,
            self.candidates,
            tree,
            self.budget,
            self.step_us,
        );
        if !g.fill() {
            return Err(g.give_back());
        }
        let mut recompute_us = g.recompute_us();
        g.drop_unneeded(&mut recompute_us);
        g.switch_kinds(&mut recompute_us);
        Ok((g.chosen(), g.link.saturated()))
    }

    /// Removes `chosen`'s options from `tree`.
    fn undo(&self, tree: &mut PeakTree, chosen: &Chosen) {
        for &i in &chosen.options {
            self.options[i].apply(tree, -1);
        }
    }

    /// Applies `chosen`'s options to `tree` again.
    fn redo(&self, tree: &mut PeakTree, chosen: &Chosen) {
        for &i in &chosen.options {
            self.options[i].apply(tree, 1);
        }
    }
}
