//! The decision heuristic of [`super::finalize`]: which candidates to evict, and how, until
//! the peak fits the budget.
//!
//! After DTR (Kirisame et al., "Dynamic Tensor Rematerialization", ICLR 2021, §3: evict by
//! `cost / (memory · staleness)`), adapted to a plan known ahead:
//! 1. Every (candidate, allowed kind) pair is an option priced on the device
//!    ([`crate::cost::StepCosts`]) and scored `cost_us / (bytes · √k)`, k = the points of
//!    its window (the points it frees) over the budget before any decision
//!    ([`Options::benefit`] gives the measurements behind the square root), each when the
//!    run first reads it ([`Options`]); the windows and which node of a segment tree over the
//!    points holds each are known ahead ([`super::Prepared`]).
//! 2. While the peak (a [`PeakTree`] over resident bytes per point, O(log n) per query) is
//!    over the budget, take the best option of an untaken candidate whose window covers the
//!    peak point ([`CoverHeaps`]: lazy heaps over a segment tree of the points). A swap's score
//!    uses its marginal cost given the swaps already taken (they share the link:
//!    [`crate::cost::exposed_transfer_us`]); marginal costs are never below the static ones and
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
//! 7. Each run's picks are kept ([`Trace`]): with the scores fixed, the run at a higher
//!    budget takes the same picks until the peak is within it, so the decisions at a higher
//!    target ([`replay`]) take that prefix of the picks and their own second look, without
//!    searching again. A run scored over the higher target and filled to the lower one
//!    ([`trace`]) thus gives the decisions at both targets for one search: at the higher one
//!    exactly those of a run there.
//!
//! Invariant: the tree holds, at every point, the resident bytes with the chosen decisions
//! and each recompute's transient bytes charged in full at its regeneration point (a bound
//! on the checker's count, which `super::exact_residency` computes afterwards).

use super::cover::{CoverHeaps, CoverNodes, Rank, ScoreKey, Scores};
pub(super) use super::options::{Options, PricedOption};
use super::segtree::PeakTree;
use super::FinalizeError;
use crate::cost::exposed_transfer_us;
use crate::format::{Decision, DecisionKind};
use crate::index::{CandidateIx, IndexVec, OptionIx, PointIx, PricedIx};

/// The decisions chosen, in the order taken (the order regenerations run in).
pub(super) struct Chosen {
    pub decisions: Vec<Decision>,
    /// The options taken, parallel to `decisions`.
    options: Vec<PricedOption>,
    pub recompute_flops: i64,
    pub swap_bytes: i64,
    pub recompute_us: f64,
    pub exposed_transfer_us: f64,
}

impl Chosen {
    /// Charges the chosen options to `resident`, the bytes per point before any decision:
    /// each frees its bytes over its window and adds its transient at the point after — what
    /// [`PricedOption::apply`] does on the tree, as one difference array (O(points +
    /// decisions)).
    pub fn charge(&self, resident: &mut [i64]) {
        let n = resident.len();
        let mut diff = vec![0i64; n + 1];
        for o in &self.options {
            let (l, t) = (o.window.start.index(), o.window.after());
            if l < n && !o.window.is_empty() {
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

    /// Σ exposed transfer time alone and Σ one-way transfer time of the swaps taken, µs (the
    /// arguments of [`exposed_transfer_us`]).
    pub fn link_sums(&self) -> (f64, f64) {
        self.options
            .iter()
            .filter(|o| o.kind == DecisionKind::Swap)
            .fold((0.0, 0.0), |(a, t), o| (a + o.cost_us, t + o.transfer_us))
    }

    /// The time the decisions add, µs.
    fn added_us(&self) -> f64 {
        self.recompute_us + self.exposed_transfer_us
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
    /// Whether the swaps move more than the step's compute hides (each further µs of
    /// transfer is exposed).
    fn saturated(&self) -> bool {
        self.transfers > self.step_us
    }

    fn exposed(&self) -> f64 {
        exposed_transfer_us(self.alone, self.transfers, self.step_us)
    }

    fn add(&mut self, o: &PricedOption, sign: f64) {
        if o.kind == DecisionKind::Swap {
            self.alone += sign * o.cost_us;
            self.transfers += sign * o.transfer_us;
        }
    }

    /// Added cost of taking `o` now.
    fn marginal(&self, o: &PricedOption) -> f64 {
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
struct Greedy<'a, 'o> {
    options: &'a mut Options<'o>,
    /// The option taken per candidate.
    state: IndexVec<CandidateIx, Option<OptionIx>>,
    /// The candidates in the order first taken.
    order: Vec<CandidateIx>,
    /// `state[c].is_some()` at some time: candidates that may not be picked.
    taken: IndexVec<CandidateIx, bool>,
    heaps: CoverHeaps<'a>,
    /// Per option (by its place, [`Options::scored`]), a swap's score evaluated at link state
    /// `epoch` (bumped whenever the link changes).
    fresh: IndexVec<PricedIx, (u32, ScoreKey)>,
    epoch: u32,
    link: Link,
    tree: &'a mut PeakTree,
    budget: i64,
    /// The lowest peak seen by [`Greedy::fill`].
    lowest: i64,
    /// A swap is priced at least this times its transfer time ([`PricedOption::priced`]).
    link_price: f64,
    /// Every option set by [`Greedy::set`], in order: the run's [`Trace`] (kept where
    /// `logging`).
    log: Vec<OptionIx>,
    /// Whether [`Greedy::set`] keeps `log` (not in a replay, whose log goes unused).
    logging: bool,
}

/// What the cover heaps ask of one greedy run's options ([`Scores`]): the run's fields they
/// read, borrowed apart from the heaps.
struct RunScores<'g, 'o> {
    options: &'g mut Options<'o>,
    taken: &'g IndexVec<CandidateIx, bool>,
    fresh: &'g mut IndexVec<PricedIx, (u32, ScoreKey)>,
    link: &'g Link,
    epoch: u32,
    link_price: f64,
}

impl Scores for RunScores<'_, '_> {
    fn dead(&mut self, i: OptionIx) -> bool {
        !self.options.present(i) || self.taken[self.options.candidate_of(i)]
    }

    fn rank(&mut self, i: OptionIx) -> Rank {
        self.options.rank(i, self.link_price)
    }

    fn taken(&self, candidate: CandidateIx) -> bool {
        self.taken[candidate]
    }

    fn refresh(&mut self, i: OptionIx, key: ScoreKey) -> Option<ScoreKey> {
        let (k, o, benefit) = self.options.scored(i);
        if k.index() >= self.fresh.len() {
            self.fresh.resize(k.index() + 1, (0, ScoreKey::default()));
        }
        if self.fresh[k].0 != self.epoch {
            let score = o.priced(self.link.marginal(&o), self.link_price) / benefit;
            self.fresh[k] = (self.epoch, ScoreKey::of(score));
        }
        (self.fresh[k].1 != key).then_some(self.fresh[k].1)
    }
}

impl<'a, 'o> Greedy<'a, 'o> {
    /// A run with nothing taken over `options` (scored as [`Options::score_over`] set them,
    /// swaps priced at least `link_price` times their transfer time), stabbed through `cover`,
    /// over `tree` (the bytes per point).
    fn new(
        options: &'a mut Options<'o>,
        link_price: f64,
        cover: &'a CoverNodes,
        candidates: usize,
        tree: &'a mut PeakTree,
        budget: i64,
        step_us: f64,
    ) -> Self {
        Greedy {
            options,
            state: IndexVec::from_elem(None, candidates),
            order: Vec::with_capacity(candidates),
            taken: IndexVec::from_elem(false, candidates),
            heaps: CoverHeaps::new(cover),
            fresh: IndexVec::new(),
            epoch: 1,
            link: Link {
                step_us,
                ..Link::default()
            },
            tree,
            budget,
            lowest: i64::MAX,
            link_price,
            log: Vec::new(),
            logging: true,
        }
    }

    /// The options of candidate `c` that can be taken, in rank order (at most one per kind).
    fn of(&mut self, c: CandidateIx) -> impl Iterator<Item = OptionIx> {
        // A candidate has one option per kind at most (`Prepared`'s options).
        let mut of = [OptionIx::default(); 2];
        let mut n = 0;
        for i in self.options.of_candidate(c) {
            if n < 2 && self.options.present(i) {
                of[n] = i;
                n += 1;
            }
        }
        if n == 2
            && self.options.rank(of[1], self.link_price) < self.options.rank(of[0], self.link_price)
        {
            of.swap(0, 1);
        }
        of.into_iter().take(n)
    }

    /// Replaces candidate `c`'s option by `new` on the tree and the link.
    fn set(&mut self, c: CandidateIx, new: OptionIx) {
        if let Some(o) = self.state[c] {
            let o = self.options.get(o);
            o.apply(self.tree, -1);
            self.link.add(&o, -1.0);
        } else {
            self.order.push(c);
        }
        if self.logging {
            self.log.push(new);
        }
        let n = self.options.get(new);
        n.apply(self.tree, 1);
        self.link.add(&n, 1.0);
        self.state[c] = Some(new);
        self.taken[c] = true;
    }

    /// Takes options until the peak is within the budget (steps 2 and 3 of the module docs);
    /// `false` when neither an option nor a widening covers the peak point (the lowest peak
    /// seen is then [`Greedy::lowest`]).
    fn fill(&mut self) -> bool {
        loop {
            let (peak, p) = self.tree.argmax();
            let p = PointIx::new(p);
            self.lowest = self.lowest.min(peak);
            if peak <= self.budget {
                return true;
            }
            // The best marginal score among untaken options covering `p` (lazy: marginal
            // scores are at least the static ones, and only grow while the link only gains
            // swaps).
            let pick = self.heaps.best(
                p,
                &mut RunScores {
                    options: self.options,
                    taken: &self.taken,
                    fresh: &mut self.fresh,
                    link: &self.link,
                    epoch: self.epoch,
                    link_price: self.link_price,
                },
            );
            if let Some((_, i)) = pick {
                let o = self.options.get(i);
                self.set(o.candidate, i);
                if o.kind == DecisionKind::Swap {
                    self.epoch += 1;
                }
                continue;
            }
            // Widen a taken candidate's window over `p`, at the least added cost.
            let Some((old, new)) = self.widening(p) else {
                return false;
            };
            let (o, n) = (self.options.get(old), self.options.get(new));
            self.set(n.candidate, new);
            // Scores may have fallen (a swap left the link): back to the static bounds.
            self.epoch += 1;
            if o.kind == DecisionKind::Swap {
                self.heaps.reset();
            }
        }
    }

    /// The widening of least added cost that covers `p`: `(old option, new option)`.
    fn widening(&mut self, p: PointIx) -> Option<(OptionIx, OptionIx)> {
        let mut best: Option<(f64, OptionIx, OptionIx)> = None;
        for k in 0..self.order.len() {
            let c = self.order[k];
            let Some(old) = self.state[c] else {
                continue;
            };
            let o = self.options.get(old);
            if o.covers(p) {
                continue;
            }
            for j in self.of(c) {
                let n = self.options.get(j);
                if n.covers(p) && n.window.contains_window(o.window) {
                    let delta = n.cost_us - o.cost_us;
                    if best.is_none_or(|(d, _, _)| delta < d) {
                        best = Some((delta, old, j));
                    }
                }
            }
        }
        best.map(|(_, old, new)| (old, new))
    }

    /// Σ modelled time of the taken recomputes, µs (in the order taken).
    fn recompute_us(&mut self) -> f64 {
        let mut sum = 0.0;
        for k in 0..self.order.len() {
            if let Some(i) = self.state[self.order[k]] {
                let o = self.options.get(i);
                if o.kind == DecisionKind::Recompute {
                    sum += o.cost_us;
                }
            }
        }
        sum
    }

    /// Second look: drops decisions the budget does not need, most expensive first (a swap's
    /// transfer time counts: it loads the shared link); `recompute_us` follows.
    fn drop_unneeded(&mut self, recompute_us: &mut f64) {
        // Each cost read once (not per comparison).
        // Sorted as integers: (cost descending in `total_cmp`'s order, candidate), with the
        // option taken (its place in `taken`; none is dropped before its turn).
        let mut by_cost: Vec<(u64, CandidateIx, u32)> = Vec::with_capacity(self.order.len());
        let mut taken: Vec<PricedOption> = Vec::with_capacity(self.order.len());
        for k in 0..self.order.len() {
            let c = self.order[k];
            let Some(i) = self.state[c] else {
                by_cost.push((!crate::arena::greedy::ordered_f64(0.0), c, u32::MAX));
                continue;
            };
            let o = self.options.get(i);
            by_cost.push((
                !crate::arena::greedy::ordered_f64(o.cost_us.max(o.transfer_us)),
                c,
                taken.len() as u32,
            ));
            taken.push(o);
        }
        by_cost.sort_unstable();
        for (_, c, t) in by_cost {
            let Some(&o) = taken.get(t as usize) else {
                continue;
            };
            // Undoing it raises its window by its bytes and lowers only its transient's point
            // (after the window): the peak stays within the budget when the window's does.
            if self
                .tree
                .max_in(o.window.start.index(), o.window.end.index())
                + o.bytes
                <= self.budget
            {
                o.apply(self.tree, -1);
                self.state[c] = None;
                self.link.add(&o, -1.0);
                if o.kind == DecisionKind::Recompute {
                    *recompute_us -= o.cost_us;
                }
            }
        }
    }

    /// Local search: switches a decision's kind where that lowers the total and keeps the
    /// budget, for at most [`SWITCH_PASSES`] passes; `recompute_us` follows.
    fn switch_kinds(&mut self, recompute_us: &mut f64) {
        let recompute_of = |o: &PricedOption| match o.kind {
            DecisionKind::Recompute => o.cost_us,
            DecisionKind::Swap => 0.0,
        };
        // Per decision whose candidate has another option present (one per kind at most),
        // in the order taken: the candidate, the option taken and the other, each with its
        // index; swapped when the decision switches (the passes only switch kinds).
        let mut pairs: Vec<(CandidateIx, [(OptionIx, PricedOption); 2])> =
            Vec::with_capacity(self.order.len());
        for k in 0..self.order.len() {
            let c = self.order[k];
            let Some(i) = self.state[c] else { continue };
            let options = &*self.options;
            let Some(j) = options
                .of_candidate(c)
                .find(|&j| j != i && options.present(j))
            else {
                continue;
            };
            let (oi, oj) = (self.options.get(i), self.options.get(j));
            pairs.push((c, [(i, oi), (j, oj)]));
        }
        let mut exposed = self.link.exposed();
        for _ in 0..SWITCH_PASSES {
            let mut improved = false;
            for (c, pair) in &mut pairs {
                let [(_, oi), (j, oj)] = *pair;
                let before = *recompute_us + exposed;
                let mut next = self.link;
                next.add(&oi, -1.0);
                next.add(&oj, 1.0);
                let rec = *recompute_us - recompute_of(&oi) + recompute_of(&oj);
                let next_exposed = next.exposed();
                if rec + next_exposed >= before - 1e-9 * before.max(1.0) {
                    continue;
                }
                // Probed without touching the tree (most improving switches miss the budget).
                let [a, b] = oi.adds(-1);
                let [x, y] = oj.adds(1);
                if self.tree.fits_with(&[a, b, x, y], self.budget) {
                    oi.apply(self.tree, -1);
                    oj.apply(self.tree, 1);
                    self.state[*c] = Some(j);
                    self.link = next;
                    exposed = next_exposed;
                    *recompute_us = rec;
                    pair.swap(0, 1);
                    improved = true;
                }
            }
            if !improved {
                break;
            }
        }
    }

    /// The decisions taken, in the order first taken, with their totals.
    fn chosen(&mut self) -> Chosen {
        let mut chosen = Chosen {
            decisions: Vec::with_capacity(self.order.len()),
            options: Vec::with_capacity(self.order.len()),
            recompute_flops: 0,
            swap_bytes: 0,
            recompute_us: 0.0,
            exposed_transfer_us: 0.0,
        };
        let mut swaps = Link {
            step_us: self.link.step_us,
            ..Link::default()
        };
        for k in 0..self.order.len() {
            let Some(i) = self.state[self.order[k]] else {
                continue;
            };
            let o = self.options.get(i);
            chosen.decisions.push(Decision {
                candidate: o.candidate.into(),
                kind: o.kind,
            });
            chosen.options.push(o);
            swaps.add(&o, 1.0);
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

/// How one [`choose`] reached its decisions: its target and, per greedy run (the link price
/// it priced swaps at), the options [`Greedy::fill`] set, in order. Scores fixed, a run's fill
/// at a higher target is a prefix of this one (the same picks until the peak is within it), so
/// [`replay`] decides at any target from `target` up without searching again.
#[derive(Clone, Debug)]
pub(super) struct Trace {
    /// The target the runs filled to, bytes.
    pub target: i64,
    /// The target the options were scored over ([`Options::score_over`]), bytes.
    pub scored_over: i64,
    runs: Vec<(f64, Vec<OptionIx>)>,
    /// Where a run's log runs out before the peak is within the budget, [`replay`] goes on
    /// searching from the state the log reached (a log kept from other bindings,
    /// [`Trace::retargeted`]); else it gives `None`.
    searches_on: bool,
}

impl Trace {
    /// The same picks for [`replay`] at any target (`target` the lowest possible; the replay
    /// ends where its log runs out) with the options scored over `scored_over` bytes: a log
    /// kept from other bindings (`finalize/atlas.rs`), replayed as the order of its picks.
    pub fn retargeted(&self, scored_over: i64) -> Trace {
        Trace {
            target: i64::MIN,
            scored_over,
            runs: self.runs.clone(),
            searches_on: true,
        }
    }

    /// As [`Trace::retargeted`] in place: the options scored over `scored_over` bytes.
    pub fn retarget(&mut self, scored_over: i64) {
        self.scored_over = scored_over;
    }

    /// Each run's log replaced by `deep(its link price, scored over)` where that extends it
    /// (the same picks first: [`deepest_log`] with the options scored over
    /// [`Trace::scored_over`]), and the log of [`choose`]'s second run (swaps priced at least
    /// their transfer time, link price 1, scored over the larger of
    /// [`Trace::scored_over`] and [`Trace::target`]) added where the trace lacks it:
    /// [`replay`] then replays that run where the first run's swaps saturate the link (else
    /// it runs that search), and each run's log goes on where a shape needs more picks than
    /// the run took.
    pub fn deepen(&mut self, mut deep: impl FnMut(f64, i64) -> Vec<OptionIx>) {
        for (price, log) in &mut self.runs {
            let more = deep(*price, self.scored_over);
            if more.len() > log.len() && more.starts_with(log) {
                *log = more;
            }
        }
        if self.runs.len() == 1 {
            let log = deep(1.0, self.scored_over.max(self.target));
            self.runs.push((1.0, log));
        }
    }
}

/// The options one greedy run of [`choose`] (swaps priced at least `link_price` times their
/// transfer time) sets, in order, from `resident` with the options scored over `scored_over`
/// bytes, filled as deep as the greedy goes (until neither an option nor a widening covers
/// the peak point). The fill at any budget takes a prefix of these picks (the budget only
/// decides where a fill stops), so the log of that run at the same scores is a prefix of this
/// one: a kept log ([`crate::finalize`]'s atlas) deepened so ([`Trace::deepen`]) replays
/// rather than searches where a shape needs more picks than its sample did.
pub(super) fn deepest_log(
    options: &mut Options<'_>,
    cover: &CoverNodes,
    candidates: usize,
    resident: &[i64],
    scored_over: i64,
    link_price: f64,
    step_us: f64,
) -> Vec<OptionIx> {
    let run = Run {
        cover,
        candidates,
        budget: i64::MIN,
        step_us,
    };
    options.score_over(Some((resident, scored_over)));
    let mut tree = PeakTree::new(resident);
    let mut g = run.greedy(options, &mut tree, link_price);
    g.fill();
    std::mem::take(&mut g.log)
}

/// Chooses decisions until `tree`'s peak is at most `budget` (see the module docs); `tree`
/// is over `resident`, the bytes per point before any decision, and is used up (the caller
/// charges the chosen decisions to `resident` itself, [`Chosen::charge`]). `step_us` is the
/// step's modelled time; `options` are priced as read.
///
/// Runs the greedy with swaps priced by their marginal exposed time; when its swaps saturate
/// the link, runs it again with every swap priced at least its transfer time (what it costs
/// on a saturated link) and keeps the run that adds less time (the first on a tie). With the
/// decisions, the [`Trace`] of the runs (`None` when the budget-independent scores decided).
/// With `unscored` (a run traced at this budget did not meet it), the budget-independent run
/// decides at once.
///
/// # Errors
/// [`FinalizeError::Infeasible`] with the smallest budget this greedy meets.
#[allow(clippy::too_many_arguments)]
pub(super) fn choose(
    options: &mut Options<'_>,
    cover: &CoverNodes,
    candidates: usize,
    mut tree: PeakTree,
    resident: &[i64],
    budget: i64,
    step_us: f64,
    unscored: bool,
) -> Result<(Chosen, Option<Trace>), FinalizeError> {
    let run = Run {
        cover,
        candidates,
        budget,
        step_us,
    };
    let scored = if unscored {
        Err(0)
    } else {
        options.score_over(Some((resident, budget)));
        run.decide(options, &mut tree, 0.0)
    };
    let first = match scored {
        Ok(first) => first,
        // Scores that do not depend on the budget: this run's choices are the same at every
        // budget down to the lowest peak it reaches, so that peak is a budget it meets.
        Err(_) => {
            // Each later run starts from the bytes before any decision: the tree built again
            // (a pass over the points costs less than undoing each decision; the tree is not
            // needed after).
            tree = PeakTree::new(resident);
            options.score_over(None);
            return run
                .decide(options, &mut tree, 0.0)
                .map(|c| (c.0, None))
                .map_err(|lowest| FinalizeError::Infeasible {
                    budget,
                    smallest: lowest,
                    smallest_mib: lowest as f64 / 1048576.0,
                });
        }
    };
    let mut trace = Trace {
        target: budget,
        scored_over: budget,
        runs: vec![(0.0, first.2)],
        searches_on: false,
    };
    if !first.1 {
        return Ok((first.0, Some(trace)));
    }
    // The second run from the bytes before any decision, as above.
    tree = PeakTree::new(resident);
    match run.decide(options, &mut tree, 1.0) {
        Ok(second) => {
            trace.runs.push((1.0, second.2));
            if second.0.added_us() < first.0.added_us() {
                Ok((second.0, Some(trace)))
            } else {
                Ok((first.0, Some(trace)))
            }
        }
        _ => Ok((first.0, Some(trace))),
    }
}

/// The [`Trace`] of [`choose`]'s first run filled to `budget` with the options scored over
/// `scored_over` bytes (at least `budget`): what [`replay`] needs to
/// decide at any budget from `budget` up, and at `scored_over` exactly what [`choose`] decides
/// there; with [`replay`]'s decisions at `budget` itself (the run's second look) where its
/// swaps do not saturate the link. `Err` where that run does not meet `budget`, with the trace of its picks up to where
/// it stopped, whose `target` is the lowest peak it reached: the fill at any budget from that
/// peak up takes a prefix of the same picks (the budget only decides where a fill stops), so
/// [`replay`] decides there from it as from a trace that met its target.
pub(super) fn trace(
    options: &mut Options<'_>,
    cover: &CoverNodes,
    candidates: usize,
    resident: &[i64],
    budget: i64,
    scored_over: i64,
    step_us: f64,
) -> Result<(Trace, Option<Chosen>), Trace> {
    let run = Run {
        cover,
        candidates,
        budget,
        step_us,
    };
    options.score_over(Some((resident, scored_over)));
    let mut tree = PeakTree::new(resident);
    let mut g = run.greedy(options, &mut tree, 0.0);
    let met = g.fill();
    let trace = Trace {
        target: if met { budget } else { g.lowest },
        scored_over,
        runs: vec![(0.0, std::mem::take(&mut g.log))],
        searches_on: false,
    };
    if !met {
        return Err(trace);
    }
    // The run's state is what a replay of its whole log at `budget` rebuilds (the same
    // options set in the same order): its second look is that replay's, where the swaps leave
    // the link unsaturated (else the replay runs a second greedy).
    let (chosen, saturated) = g.second_look();
    Ok((trace, (!saturated).then_some(chosen)))
}

/// What [`choose`] decides at `budget` ≥ `trace.target` with the options scored over
/// `trace.scored_over` (at `budget = trace.scored_over`, exactly what [`choose`] decides):
/// each run's fill replayed from `trace` until the peak is within `budget` (no search), then
/// its second look at `budget`; a second run the trace lacks is run in full. `None` when the trace does not reach `budget` (a lower budget, or
/// not the same options), where the caller decides in full.
pub(super) fn replay(
    options: &mut Options<'_>,
    cover: &CoverNodes,
    candidates: usize,
    resident: &[i64],
    trace: &Trace,
    budget: i64,
    step_us: f64,
) -> Option<Chosen> {
    if budget < trace.target {
        return None;
    }
    let run = Run {
        cover,
        candidates,
        budget,
        step_us,
    };
    options.score_over(Some((resident, trace.scored_over)));
    let mut tree = PeakTree::new(resident);
    let on = trace.searches_on;
    let first = run.replayed(options, &mut tree, 0.0, &trace.runs.first()?.1, on)?;
    if !first.1 {
        return Some(first.0);
    }
    tree = PeakTree::new(resident);
    let second = match trace.runs.get(1) {
        Some((price, log)) => run.replayed(options, &mut tree, *price, log, on),
        None => run.decide(options, &mut tree, 1.0).ok(),
    };
    match second {
        Some(second) if second.0.added_us() < first.0.added_us() => Some(second.0),
        _ => Some(first.0),
    }
}

/// What every greedy run of one [`choose`] reads.
struct Run<'a> {
    cover: &'a CoverNodes,
    candidates: usize,
    budget: i64,
    step_us: f64,
}

impl Run<'_> {
    /// One greedy run over `options` with swaps priced at least `link_price` times their
    /// transfer time: the decisions, whether their swaps saturate the link and the options the
    /// fill set (its [`Trace`]), or the lowest peak it reached when the budget is infeasible.
    /// `tree` is left with the run's options applied.
    fn decide(
        &self,
        options: &mut Options<'_>,
        tree: &mut PeakTree,
        link_price: f64,
    ) -> Result<(Chosen, bool, Vec<OptionIx>), i64> {
        let mut g = self.greedy(options, tree, link_price);
        if !g.fill() {
            return Err(g.lowest);
        }
        let (chosen, saturated) = g.second_look();
        Ok((chosen, saturated, std::mem::take(&mut g.log)))
    }

    /// As [`Run::decide`] with the fill replayed from `log` (the options a fill at a budget
    /// no larger set) until the peak is within the budget; where `log` runs out first, `None`,
    /// or with `search_on` the greedy's fill from there (`None` where it does not meet the
    /// budget).
    fn replayed(
        &self,
        options: &mut Options<'_>,
        tree: &mut PeakTree,
        link_price: f64,
        log: &[OptionIx],
        search_on: bool,
    ) -> Option<(Chosen, bool, Vec<OptionIx>)> {
        let mut g = self.greedy(options, tree, link_price);
        g.logging = false;
        let mut next = log.iter();
        while g.tree.max() > self.budget {
            let Some(&i) = next.next() else {
                if search_on && g.fill() {
                    break;
                }
                return None;
            };
            // (An option absent at these bindings: a log kept from other bindings, an atlas's.)
            if !g.options.present(i) {
                continue;
            }
            let c = g.options.candidate_of(i);
            g.set(c, i);
        }
        let (chosen, saturated) = g.second_look();
        Some((chosen, saturated, Vec::new()))
    }

    fn greedy<'g, 'o>(
        &self,
        options: &'g mut Options<'o>,
        tree: &'g mut PeakTree,
        link_price: f64,
    ) -> Greedy<'g, 'o>
    where
        Self: 'g,
    {
        Greedy::new(
            options,
            link_price,
            self.cover,
            self.candidates,
            tree,
            self.budget,
            self.step_us,
        )
    }
}

impl Greedy<'_, '_> {
    /// Steps 4 of the module docs on a filled run: the decisions and whether their swaps
    /// saturate the link.
    fn second_look(&mut self) -> (Chosen, bool) {
        let mut recompute_us = self.recompute_us();
        self.drop_unneeded(&mut recompute_us);
        self.switch_kinds(&mut recompute_us);
        (self.chosen(), self.link.saturated())
    }
}
