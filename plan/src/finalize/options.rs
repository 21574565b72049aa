//! The options of one finalize (a candidate and a kind it allows, with a non-empty window:
//! [`super::prepared::OptionSpec`]) priced on the device at the bindings, each when first read.
//!
//! A plan holds thousands of options (GPT-2 medium: 10 900) but a greedy run reads few of them
//! (the heaps of the nodes its peak points stab, the options of the candidates it takes: about
//! 1 000), so pricing, scoring and ranking all of them ahead cost more than the run's search
//! (on GPT-2 medium at B=8, S=1024: 100 of 300 µs). [`Options`] prices an option the first
//! time it is read and keeps it with its score's denominator ([`Options::benefit`]); its rank
//! ([`Options::rank`]) is computed from them when asked.
//!
//! Invariant: an option's price does not depend on when it is read: [`Options::get`] returns
//! what pricing every option ahead returned, so the greedy's choices do not change.

use super::cover::{OptionTag, Rank, ScoreKey};
use super::prepared::{OptionSpec, Prepared};
use super::segtree::PeakTree;
use super::FinalizeOptions;
use crate::cost::PointTimes;
use crate::format::DecisionKind;
use crate::index::ExprValues;
use crate::index::{CandidateIx, IndexVec, OptionIx, PointIx, PricedIx, Window};

/// One priced option: candidate `candidate` taken as `kind`, freeing `bytes` over its
/// `window`, adding `transient` bytes at the point after it (a recompute's regeneration point;
/// 0 for a swap), at `cost_us`. Compact (56 bytes): the greedy reads options at random.
#[derive(Clone, Copy, Debug)]
pub(super) struct PricedOption {
    pub candidate: CandidateIx,
    pub kind: DecisionKind,
    pub window: Window,
    pub bytes: i64,
    pub transient: i64,
    /// Static cost: recompute time, or a swap's exposure alone.
    pub cost_us: f64,
    /// One transfer of a swap, µs (0 for a recompute).
    pub transfer_us: f64,
    pub flops: i64,
}

impl PricedOption {
    /// The option's cost for its score given `cost_us` (a swap's marginal or static exposed
    /// time): a swap costs at least `link_price` times its transfer time.
    #[inline]
    pub fn priced(&self, cost_us: f64, link_price: f64) -> f64 {
        match self.kind {
            DecisionKind::Swap => cost_us.max(link_price * self.transfer_us),
            DecisionKind::Recompute => cost_us,
        }
    }

    /// Whether its window covers point `p`.
    #[inline]
    pub fn covers(&self, p: PointIx) -> bool {
        self.window.contains(p)
    }

    /// The range adds ([`PeakTree::add`]'s arguments) that apply (`sign` = 1) or undo
    /// (`sign` = −1) the option: what [`PricedOption::apply`] adds.
    #[inline]
    pub fn adds(&self, sign: i64) -> [(usize, usize, i64); 2] {
        let w = self.window;
        let t = w.after();
        [
            (w.start.index(), w.end.index(), -sign * self.bytes),
            (t, t, sign * self.transient),
        ]
    }

    /// Applies (`sign` = 1) or undoes (`sign` = −1) the option on `tree`.
    #[inline]
    pub fn apply(&self, tree: &mut PeakTree, sign: i64) {
        let w = self.window;
        tree.add(w.start.index(), w.end.index(), -sign * self.bytes);
        let t = w.after();
        tree.add(t, t, sign * self.transient);
    }
}

/// Not priced yet (in [`Options`]'s index).
const UNPRICED: PricedIx = PricedIx::from_raw(u32::MAX);

/// The options of one finalize, priced when first read (see the module docs).
pub(super) struct Options<'a> {
    prep: &'a Prepared,
    vals: &'a ExprValues,
    costs: &'a PointTimes,
    value_bytes: &'a [i64],
    /// Whether recomputes and swaps are allowed.
    recompute: bool,
    swap: bool,
    /// Per option, its place in `priced` ([`UNPRICED`] until read).
    place: IndexVec<OptionIx, PricedIx>,
    /// The options read so far, each with its benefit ([`Options::benefit`]).
    priced: IndexVec<PricedIx, (PricedOption, f64)>,
    /// Per point position `p` (`0..=points`), how many points before `p` are over the budget
    /// before any decision ([`Options::benefit`]); `None`: scores that do not depend on the
    /// budget.
    over_before: Option<Vec<u32>>,
    /// Candidates taken before the greedy (forced swaps, `super::forced`), whose options are
    /// absent; empty when there are none.
    taken_before: Vec<bool>,
}

impl<'a> Options<'a> {
    /// The options of `prep` at interned values `vals`, timed by `costs`, with value sizes
    /// `value_bytes`; options of a kind `opts` does not allow, or of a value without bytes,
    /// are absent ([`Options::present`]).
    pub fn new(
        prep: &'a Prepared,
        vals: &'a ExprValues,
        costs: &'a PointTimes,
        value_bytes: &'a [i64],
        opts: &FinalizeOptions,
    ) -> Self {
        Options {
            prep,
            vals,
            costs,
            value_bytes,
            recompute: opts.kinds.contains(&DecisionKind::Recompute),
            swap: opts.kinds.contains(&DecisionKind::Swap),
            place: IndexVec::from_elem(UNPRICED, prep.option_count()),
            priced: IndexVec::new(),
            over_before: None,
            taken_before: Vec::new(),
        }
    }

    /// Makes the options of candidate `c` absent ([`Options::present`]): it was taken before
    /// the greedy.
    pub fn take_before(&mut self, c: CandidateIx) {
        if self.taken_before.is_empty() {
            self.taken_before = vec![false; self.prep.candidates.len()];
        }
        if let Some(t) = self.taken_before.get_mut(c.index()) {
            *t = true;
        }
    }

    /// Option `i`'s candidate, without pricing it.
    #[inline]
    pub fn candidate_of(&self, i: OptionIx) -> CandidateIx {
        self.prep.option(i).candidate
    }

    /// Whether option `i` can be taken (its kind allowed, its value with bytes), without
    /// pricing it.
    #[inline]
    pub fn present(&self, i: OptionIx) -> bool {
        let s = self.prep.option(i);
        !self
            .taken_before
            .get(s.candidate.index())
            .copied()
            .unwrap_or(false)
            && self.freed_bytes(s) > 0
    }

    /// The bytes option `s` frees: its value's, or 0 when its kind is not allowed.
    #[inline]
    fn freed_bytes(&self, s: &OptionSpec) -> i64 {
        let allowed = match s.kind {
            DecisionKind::Recompute => self.recompute,
            DecisionKind::Swap => self.swap,
        };
        let bytes = self.value_bytes.get(s.value.index()).copied().unwrap_or(0);
        if allowed {
            bytes.max(0)
        } else {
            0
        }
    }

    /// Option `i`'s kind, without pricing it.
    #[inline]
    pub fn kind_of(&self, i: OptionIx) -> DecisionKind {
        self.prep.option(i).kind
    }

    /// Option `i`'s window (the points it frees), without pricing it.
    #[inline]
    pub fn window_of(&self, i: OptionIx) -> Window {
        self.prep.option(i).window
    }

    /// The bytes option `i` frees over its window (0 where it is not [`Options::present`]
    /// for its kind), without pricing it.
    #[inline]
    pub fn bytes_of(&self, i: OptionIx) -> i64 {
        self.freed_bytes(self.prep.option(i))
    }

    /// The options of candidate `c` (recompute before swap).
    pub fn of_candidate(&self, c: CandidateIx) -> impl Iterator<Item = OptionIx> {
        self.prep.options_of(c)
    }

    /// Option `i`, priced (once).
    #[inline]
    pub fn get(&mut self, i: OptionIx) -> PricedOption {
        self.scored(i).1
    }

    /// Option `i`'s place among the options priced so far (a dense index for per-option state
    /// of the few options a run reads), the option and its benefit ([`Options::benefit`]),
    /// pricing it if not yet.
    pub fn scored(&mut self, i: OptionIx) -> (PricedIx, PricedOption, f64) {
        let place = self.place[i];
        if let Some(&(o, benefit)) = self.priced.get(place) {
            return (place, o, benefit);
        }
        let o = self.price(self.prep.option(i));
        let benefit = self.benefit(&o);
        let place = self.priced.push((o, benefit));
        self.place[i] = place;
        (place, o, benefit)
    }

    /// Prices option `s` (the formulas of `crate::cost`).
    fn price(&self, s: &OptionSpec) -> PricedOption {
        let vals = self.vals;
        let e = &self.prep.candidates[s.candidate];
        let (transient, cost_us, transfer_us, flops) = match s.kind {
            DecisionKind::Recompute => {
                let flops = vals[e.recompute_flops];
                (
                    vals[e.transient_bytes],
                    self.prep
                        .costs
                        .recompute_us(self.costs, s.candidate.into(), flops),
                    0.0,
                    flops,
                )
            }
            DecisionKind::Swap => {
                let moved = vals[e.swap_bytes];
                let w = s.window;
                let cost_us = self
                    .costs
                    .swap_over_us(w.start.into(), Some(w.end.into()), moved);
                (0, cost_us, self.costs.transfer_us(moved), 0)
            }
        };
        PricedOption {
            candidate: s.candidate,
            kind: s.kind,
            window: s.window,
            bytes: self.freed_bytes(s),
            transient,
            cost_us,
            transfer_us,
            flops,
        }
    }

    /// Scores from now on with the points over `budget` given `resident` (the bytes per point
    /// before any decision), or, with `None`, by whole windows ([`Options::benefit`]).
    pub fn score_over(&mut self, over_budget: Option<(&[i64], i64)>) {
        let over_before = over_budget.map(|(resident, budget)| {
            let mut over = Vec::with_capacity(resident.len() + 1);
            over.push(0u32);
            let mut n = 0u32;
            for &x in resident {
                n += u32::from(x > budget);
                over.push(n);
            }
            over
        });
        self.over_before = over_before;
        for k in 0..self.priced.len() {
            let k = PricedIx::new(k);
            self.priced[k].1 = self.benefit(&self.priced[k].0);
        }
    }

    /// The denominator of option `o`'s score. Scoring over the budget
    /// ([`Options::score_over`]): its bytes times the square root of the number of points of
    /// its window over the budget (at least one); else its bytes times its window's points
    /// (the score does not depend on the budget).
    ///
    /// Bytes alone price the memory freed at the peak point only and overrate short windows
    /// of large values; bytes times the points over the budget (a covering greedy's "elements
    /// covered", Chvátal 1979) overrates long windows, whose points are mostly covered by
    /// other options by the time they matter. GPT-2 small, B=8, S = 250/379/1024,
    /// `h100-sxm-pcie5`, decisions for 98% of half the scheduled peak, each with the greedy's
    /// second run: bytes alone 14.5/12.1/8.9% added, bytes × points 11.1/18.8/7.8%, the square
    /// root 11.1/5.5/7.8%, the ILP optimum 11.1/5.2/7.8%; the previous score (bytes × the
    /// whole window, no second run) 17.6/20.7/26.9%.
    fn benefit(&self, o: &PricedOption) -> f64 {
        let Some(over) = &self.over_before else {
            return o.bytes as f64 * f64::from(o.window.points());
        };
        let last = over.len() - 1;
        let (l, r) = (o.window.start.index().min(last), o.window.after().min(last));
        let k = over[r].saturating_sub(over[l]).max(1);
        o.bytes as f64 * f64::from((k as f32).sqrt())
    }

    /// Option `i`'s rank with swaps priced at least `link_price` times their transfer time:
    /// by static score, then larger values first, then candidate and kind (unique keys).
    pub fn rank(&mut self, i: OptionIx, link_price: f64) -> Rank {
        let (_, o, benefit) = self.scored(i);
        let score = o.priced(o.cost_us, link_price) / benefit;
        Rank {
            score: ScoreKey::of(score),
            larger_first: u64::MAX - o.bytes as u64,
            tag: OptionTag::new(o.candidate, o.kind),
        }
    }
}
