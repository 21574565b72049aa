//! A plan prepared for repeated finalize: every symbolic size and cost of the plan interned
//! into a table of distinct expressions, so finalize at new bindings evaluates each distinct
//! expression once (GPT-2 medium's plan has about 50 000 size and cost expressions but 133
//! distinct ones) and reads the rest by index, with no hashing on the finalize path.
//!
//! Invariant: every index held here is an index into [`Prepared::exprs`], and the per-value,
//! per-candidate and per-point vectors are indexed like the plan's own (`Plan::values`,
//! `Plan::candidates`, the schedule's points) of the plan variant it was prepared from.

use super::cover::CoverNodes;
use super::FinalizeError;
use crate::cost::CostTables;
use crate::format::{DecisionKind, Plan};
use ebb_ir::{Bindings, DimExpr};
use std::collections::HashMap;

/// The expressions of one candidate, as indices into [`Prepared::exprs`].
#[derive(Clone, Copy, Debug)]
pub(super) struct CandidateExprs {
    pub recompute_flops: u32,
    pub transient_bytes: u32,
    pub swap_bytes: u32,
    /// `None` when the plan does not record it (then `value + transient`).
    pub regen_peak_bytes: Option<u32>,
}

/// A (candidate, kind) pair the candidate allows whose window is not empty: an option finalize
/// may price. Its window, the points `[l, r]` it frees, does not depend on the shapes: a
/// recompute's ends before `regenerate_before` (so `r + 1` is where its transients are
/// charged), a swap's before `prefetch_at` (its transfers may overlap the compute of `[l, r]`).
/// With the value, these are all of the candidate that pricing reads.
#[derive(Clone, Copy, Debug)]
pub(super) struct Slot {
    /// Index into `Plan::candidates`.
    pub c: u32,
    pub kind: DecisionKind,
    pub l: u32,
    pub r: u32,
    /// The candidate's value (index into `Plan::values`).
    pub value: u32,
}

/// One plan variant's expressions, interned (see the module docs). Built once per plan
/// variant by [`Prepared::new`] (tens of milliseconds on GPT-2 medium), then shared by every
/// finalize of that variant.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The distinct expressions.
    exprs: Vec<DimExpr>,
    /// Bytes of each value.
    pub(super) value_bytes: Vec<u32>,
    /// `(def, last_use)` points of each value.
    pub(super) value_live: Vec<(u32, u32)>,
    /// CSR per point `p`: the values its op produces (not inputs or donated ones) are
    /// `produced[produced_first[p]..produced_first[p + 1]]` (up to the last point with one).
    produced_first: Vec<u32>,
    produced: Vec<u32>,
    /// `(point, bytes)` of each region transient.
    pub(super) region_transients: Vec<(usize, u32)>,
    /// The step's FLOPs as `(expression, how many points have it)` (empty when the plan has
    /// no per-point FLOPs): a sum over the distinct expressions rather than the points.
    pub(super) step_flops: Vec<(u32, i64)>,
    /// Per candidate.
    pub(super) candidates: Vec<CandidateExprs>,
    /// Every option finalize may price, by candidate, recompute before swap.
    pub(super) slots: Vec<Slot>,
    /// CSR per candidate `c`: its slots are `slots[slot_first[c]..slot_first[c + 1]]`.
    slot_first: Vec<u32>,
    /// The slots by the canonical nodes of their windows.
    pub(super) cover: CoverNodes,
    /// The shape-independent part of the step times.
    pub(super) costs: CostTables,
}

impl Prepared {
    /// Interns the expressions of `plan` (one variant; see [`Plan::variant`]).
    pub fn new(plan: &Plan) -> Prepared {
        let mut table = Interner::default();
        let mut intern = |e| table.intern(e);
        let value_bytes = plan.values.iter().map(|v| intern(&v.bytes)).collect();
        let value_live = crate::arena::live_points(plan);
        let points = plan.schedule.len().max(1);
        // The values ops produce (not inputs or donated ones), grouped by their point.
        let made: Vec<(u32, u32)> = plan
            .values
            .iter()
            .enumerate()
            .filter(|(_, v)| {
                !matches!(
                    v.class,
                    crate::format::ValueClass::Input | crate::format::ValueClass::Donated
                ) && v.def.index() < points
            })
            .map(|(i, v)| (i as u32, v.def.index() as u32))
            .collect();
        let (produced_first, order) = crate::arena::group_by_point(&made, |m| m.1 as usize);
        let produced = order.into_iter().map(|k| made[k as usize].0).collect();
        let region_transients = plan
            .region_transients
            .iter()
            .map(|t| (t.point.index(), intern(&t.bytes)))
            .collect();
        let point_flops: Vec<u32> = plan.point_flops.iter().flatten().map(&mut intern).collect();
        let point_bytes: Vec<u32> = plan.point_bytes.iter().flatten().map(&mut intern).collect();
        let candidates = plan
            .candidates
            .iter()
            .map(|c| CandidateExprs {
                recompute_flops: intern(&c.recompute_flops),
                transient_bytes: intern(&c.transient_bytes),
                swap_bytes: intern(&c.swap_bytes),
                regen_peak_bytes: c.regen_peak_bytes.as_ref().map(&mut intern),
            })
            .collect();
        let mut slots = Vec::new();
        let mut slot_first = Vec::with_capacity(plan.candidates.len() + 1);
        for (c, cand) in plan.candidates.iter().enumerate() {
            slot_first.push(slots.len() as u32);
            for kind in [DecisionKind::Recompute, DecisionKind::Swap] {
                let r = match kind {
                    DecisionKind::Recompute => cand.regenerate_before.prev(),
                    DecisionKind::Swap => cand.prefetch_at.prev(),
                };
                let l = cand.evict_after.next();
                // An empty window frees nothing.
                if let Some(r) = r.filter(|&r| cand.allows(kind) && l <= r) {
                    slots.push(Slot {
                        c: c as u32,
                        kind,
                        l: l.index() as u32,
                        r: r.index() as u32,
                        value: cand.value.index() as u32,
                    });
                }
            }
        }
        slot_first.push(slots.len() as u32);
        let cover = CoverNodes::new(plan.schedule.len().max(1), slots.iter().map(|s| (s.l, s.r)));
        let costs = CostTables::new(plan, &point_flops, &point_bytes);
        let mut points_of: HashMap<u32, i64> = HashMap::new();
        for &e in &point_flops {
            *points_of.entry(e).or_default() += 1;
        }
        let mut step_flops: Vec<(u32, i64)> = points_of.into_iter().collect();
        step_flops.sort_unstable();
        Prepared {
            costs,
            slots,
            slot_first,
            cover,
            exprs: table.exprs,
            value_bytes,
            value_live,
            produced_first,
            produced,
            region_transients,
            step_flops,
            candidates,
        }
    }

    /// The slots (options) of candidate `c`, as indices into [`Prepared::slots`].
    pub(super) fn slots_of(&self, c: usize) -> std::ops::Range<usize> {
        match (self.slot_first.get(c), self.slot_first.get(c + 1)) {
            (Some(&lo), Some(&hi)) => lo as usize..hi as usize,
            _ => 0..0,
        }
    }

    /// The values the op at point `p` produces (indices into `Plan::values`; not inputs or
    /// donated values), in value order.
    pub(super) fn produced_at(&self, p: usize) -> &[u32] {
        match (self.produced_first.get(p), self.produced_first.get(p + 1)) {
            (Some(&lo), Some(&hi)) => &self.produced[lo as usize..hi as usize],
            _ => &[],
        }
    }

    /// Every distinct expression evaluated at `b`, indexed like the table.
    ///
    /// # Errors
    /// [`FinalizeError::Eval`] naming the first expression that does not evaluate.
    pub(super) fn eval(&self, b: &Bindings) -> Result<Vec<i64>, FinalizeError> {
        self.exprs
            .iter()
            .map(|e| {
                e.eval(b).map_err(|source| FinalizeError::Eval {
                    expr: e.to_string(),
                    source,
                })
            })
            .collect()
    }
}

/// Distinct expressions in first-seen order, and the index of each.
#[derive(Default)]
struct Interner<'p> {
    index: HashMap<&'p DimExpr, u32>,
    exprs: Vec<DimExpr>,
}

impl<'p> Interner<'p> {
    fn intern(&mut self, e: &'p DimExpr) -> u32 {
        *self.index.entry(e).or_insert_with(|| {
            self.exprs.push(e.clone());
            (self.exprs.len() - 1) as u32
        })
    }
}
