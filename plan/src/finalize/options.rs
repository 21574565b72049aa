//! The options of one finalize (a candidate and a kind it allows, with a non-empty window:
//! [`super::prepared::Slot`]) priced on the device at the bindings, each when first read.
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

use super::cover::Rank;
use super::prepared::{Prepared, Slot};
use super::segtree::PeakTree;
use super::FinalizeOptions;
use crate::cost::PointTimes;
use crate::format::{CandidateId, DecisionKind, Point};

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
    /// The candidate.
    pub fn candidate(&self) -> CandidateId {
        CandidateId::new(self.c as usize)
    }

    /// The option's cost for its score given `cost_us` (a swap's marginal or static exposed
    /// time): a swap costs at least `link_price` times its transfer time.
    pub fn priced(&self, cost_us: f64, link_price: f64) -> f64 {
        match self.kind {
            DecisionKind::Swap => cost_us.max(link_price * self.transfer_us),
            DecisionKind::Recompute => cost_us,
        }
    }

    /// Whether its window covers point `p`.
    pub fn covers(&self, p: Point) -> bool {
        self.l as usize <= p.index() && p.index() <= self.r as usize
    }

    /// Applies (`sign` = 1) or undoes (`sign` = −1) the option on `tree`.
    pub fn apply(&self, tree: &mut PeakTree, sign: i64) {
        tree.add(self.l as usize, self.r as usize, -sign * self.bytes);
        let t = self.r as usize + 1;
        tree.add(t, t, sign * self.transient);
    }
}

/// Not priced yet (in [`Options`]'s index).
const UNPRICED: u32 = u32::MAX;

/// The options of one finalize, priced when first read (see the module docs). Indexed like
/// [`Prepared`]'s slots.
pub(super) struct Options<'a> {
    prep: &'a Prepared,
    vals: &'a [i64],
    costs: &'a PointTimes,
    value_bytes: &'a [i64],
    /// Whether recomputes and swaps are allowed.
    recompute: bool,
    swap: bool,
    /// Per option, its place in `priced` ([`UNPRICED`] until read).
    at: Vec<u32>,
    /// The options read so far, each with its benefit ([`Options::benefit`]).
    priced: Vec<(Option_, f64)>,
    /// Per point `p`, the points before `p` over the budget before any decision
    /// ([`Options::benefit`]); `None`: scores that do not depend on the budget.
    over: Option<Vec<u32>>,
}

impl<'a> Options<'a> {
    /// The options of `prep` at interned values `vals`, timed by `costs`, with value sizes
    /// `value_bytes`; options of a kind `opts` does not allow, or of a value without bytes,
    /// are absent ([`Options::present`]).
    pub fn new(
        prep: &'a Prepared,
        vals: &'a [i64],
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
            at: vec![UNPRICED; prep.slots.len()],
            priced: Vec::new(),
            over: None,
        }
    }

    /// Option `i`'s candidate (index into `Plan::candidates`), without pricing it.
    pub fn candidate_of(&self, i: usize) -> u32 {
        self.prep.slots[i].c
    }

    /// Whether option `i` can be taken (its kind allowed, its value with bytes), without
    /// pricing it.
    pub fn present(&self, i: usize) -> bool {
        self.freed_bytes(&self.prep.slots[i]) > 0
    }

    /// The bytes slot `s` frees: its value's, or 0 when its kind is not allowed.
    fn freed_bytes(&self, s: &Slot) -> i64 {
        let allowed = match s.kind {
            DecisionKind::Recompute => self.recompute,
            DecisionKind::Swap => self.swap,
        };
        let bytes = self.value_bytes.get(s.value as usize).copied().unwrap_or(0);
        if allowed {
            bytes.max(0)
        } else {
            0
        }
    }

    /// The options of candidate `c` (indices, recompute before swap).
    pub fn of_candidate(&self, c: usize) -> std::ops::Range<usize> {
        self.prep.slots_of(c)
    }

    /// Option `i`, priced (once).
    pub fn get(&mut self, i: usize) -> Option_ {
        self.scored(i).1
    }

    /// Option `i`'s place among the options priced so far (a dense index for per-option state
    /// of the few options a run reads), the option and its benefit ([`Options::benefit`]),
    /// pricing it if not yet.
    pub fn scored(&mut self, i: usize) -> (usize, Option_, f64) {
        let at = self.at[i] as usize;
        if let Some(&(o, benefit)) = self.priced.get(at) {
            return (at, o, benefit);
        }
        let o = self.price(&self.prep.slots[i]);
        let benefit = self.benefit(&o);
        self.at[i] = self.priced.len() as u32;
        self.priced.push((o, benefit));
        (self.priced.len() - 1, o, benefit)
    }

    /// Prices slot `s` (the formulas of `crate::cost`).
    fn price(&self, s: &Slot) -> Option_ {
        let at = |i: u32| self.vals[i as usize];
        let e = &self.prep.candidates[s.c as usize];
        let (transient, cost_us, transfer_us, flops) = match s.kind {
            DecisionKind::Recompute => {
                let flops = at(e.recompute_flops);
                (
                    at(e.transient_bytes),
                    self.prep
                        .costs
                        .recompute_us(self.costs, s.c as usize, flops),
                    0.0,
                    flops,
                )
            }
            DecisionKind::Swap => {
                let moved = at(e.swap_bytes);
                let (l, r) = (Point::new(s.l as usize), Point::new(s.r as usize));
                let cost_us = self.costs.swap_over_us(l, Some(r), moved);
                (0, cost_us, self.costs.transfer_us(moved), 0)
            }
        };
        Option_ {
            c: s.c,
            kind: s.kind,
            l: s.l,
            r: s.r,
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
        let over = over_budget.map(|(resident, budget)| {
            let mut over = Vec::with_capacity(resident.len() + 1);
            over.push(0u32);
            let mut n = 0u32;
            for &x in resident {
                n += (x > budget) as u32;
                over.push(n);
            }
            over
        });
        self.over = over;
        for k in 0..self.priced.len() {
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
    fn benefit(&self, o: &Option_) -> f64 {
        let Some(over) = &self.over else {
            return o.bytes as f64 * (o.r - o.l + 1) as f64;
        };
        let last = over.len() - 1;
        let (l, r) = ((o.l as usize).min(last), (o.r as usize + 1).min(last));
        let k = over[r].saturating_sub(over[l]).max(1);
        o.bytes as f64 * f64::from((k as f32).sqrt())
    }

    /// Option `i`'s rank with swaps priced at least `link_price` times their transfer time:
    /// by static score, then larger values first, then candidate and kind (unique keys; the
    /// bits of a non-negative float order like its value).
    pub fn rank(&mut self, i: usize, link_price: f64) -> Rank {
        let (_, o, benefit) = self.scored(i);
        let score = o.priced(o.cost_us, link_price) / benefit;
        (
            (score + 0.0).to_bits(),
            u64::MAX - o.bytes as u64,
            o.c << 1 | (o.kind == DecisionKind::Swap) as u32,
        )
    }
}
