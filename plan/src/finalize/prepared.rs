//! A plan prepared for repeated finalize: every symbolic size and cost of the plan interned
//! into a table of distinct expressions, so finalize at new bindings evaluates each distinct
//! expression once (GPT-2 medium's plan has about 50 000 size and cost expressions but 133
//! distinct ones) and reads the rest by index, with no hashing on the finalize path.
//!
//! Invariant: every [`ExprIx`] held here indexes [`Prepared::exprs`], and the per-value,
//! per-candidate and per-point vectors are indexed like the plan's own (`Plan::values`,
//! `Plan::candidates`, the schedule's points) of the plan variant it was prepared from.

use super::cover::CoverNodes;
use super::FinalizeError;
use crate::cost::CostTables;
use crate::csr::Csr;
use crate::format::{DecisionKind, Plan, Point};
use crate::index::{CandidateIx, ExprIx, ExprValues, IndexVec, OptionIx, PointIx, ValueIx, Window};
use ebb_ir::{Bindings, DimExpr};
use rustc_hash::FxHashMap;
use std::collections::HashMap;

/// The expressions of one candidate.
#[derive(Clone, Copy, Debug)]
pub(super) struct CandidateExprs {
    pub recompute_flops: ExprIx,
    pub transient_bytes: ExprIx,
    pub swap_bytes: ExprIx,
    /// `None` when the plan does not record it (then `value + transient`).
    pub regen_peak_bytes: Option<ExprIx>,
}

/// An option finalize may price: a candidate and a kind it allows whose window is not empty.
/// Its window, the points it frees, does not depend on the shapes: a recompute's ends before
/// `regenerate_before` (so the point after it is where its transients are charged), a swap's
/// before `prefetch_at` (its transfers may overlap the compute of the window). With the
/// value, these are all of the candidate that pricing reads.
#[derive(Clone, Copy, Debug)]
pub(super) struct OptionSpec {
    pub candidate: CandidateIx,
    pub kind: DecisionKind,
    pub window: Window,
    /// The candidate's value.
    pub value: ValueIx,
}

/// One plan variant's expressions, interned (see the module docs). Built once per plan
/// variant by [`Prepared::new`] (tens of milliseconds on GPT-2 medium), then shared by every
/// finalize of that variant.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The distinct expressions.
    exprs: IndexVec<ExprIx, DimExpr>,
    /// Bytes of each value.
    pub(super) value_bytes: IndexVec<ValueIx, ExprIx>,
    /// The points `[def, last_use]` of each value.
    pub(super) value_live: IndexVec<ValueIx, Window>,
    /// Per point, the values its op produces (not inputs or donated ones), in value order (up
    /// to the last point with one).
    pub(super) produced: Csr<PointIx, ValueIx>,
    /// `(point, bytes)` of each region transient.
    pub(super) region_transients: Vec<(Point, ExprIx)>,
    /// The step's FLOPs as `(expression, how many points have it)` (empty when the plan has
    /// no per-point FLOPs): a sum over the distinct expressions rather than the points.
    pub(super) step_flops: Vec<(ExprIx, i64)>,
    /// Per candidate.
    pub(super) candidates: IndexVec<CandidateIx, CandidateExprs>,
    /// Per candidate, every option finalize may price, recompute before swap; an option's
    /// [`OptionIx`] is its position in [`Csr::entries`].
    pub(super) options: Csr<CandidateIx, OptionSpec>,
    /// The options by the canonical nodes of their windows.
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
        let value_live = crate::arena::live_windows(plan);
        let points = plan.schedule.len().max(1);
        // The values ops produce (not inputs or donated ones), grouped by their point.
        let made: Vec<(ValueIx, PointIx)> = plan
            .values
            .iter()
            .enumerate()
            .filter(|(_, v)| {
                !matches!(
                    v.class,
                    crate::format::ValueClass::Input | crate::format::ValueClass::Donated
                ) && v.def.index() < points
            })
            .map(|(i, v)| (ValueIx::new(i), PointIx::from(v.def)))
            .collect();
        let produced = Csr::from_pairs(
            made.iter().map(|m| m.1.index() + 1).max().unwrap_or(0),
            || made.iter().map(|&(v, p)| (p, v)),
        );
        let region_transients = plan
            .region_transients
            .iter()
            .map(|t| (t.point, intern(&t.bytes)))
            .collect();
        let point_flops: Vec<ExprIx> = plan.point_flops.iter().flatten().map(&mut intern).collect();
        let point_bytes: Vec<ExprIx> = plan.point_bytes.iter().flatten().map(&mut intern).collect();
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
        let mut options = Csr::with_capacity(plan.candidates.len(), 2 * plan.candidates.len());
        for (c, cand) in plan.candidates.iter().enumerate() {
            for kind in [DecisionKind::Recompute, DecisionKind::Swap] {
                let r = match kind {
                    DecisionKind::Recompute => cand.regenerate_before.prev(),
                    DecisionKind::Swap => cand.prefetch_at.prev(),
                };
                let l = cand.evict_after.next();
                // An empty window frees nothing.
                if let Some(r) = r.filter(|&r| cand.allows(kind) && l <= r) {
                    options.push(OptionSpec {
                        candidate: CandidateIx::new(c),
                        kind,
                        window: Window::new(l.into(), r.into()),
                        value: cand.value.into(),
                    });
                }
            }
            options.end_row();
        }
        let cover = CoverNodes::new(
            plan.schedule.len().max(1),
            options.entries().iter().map(|o| o.window),
        );
        let costs = CostTables::new(plan, &point_flops, &point_bytes);
        let mut points_of: HashMap<ExprIx, i64> = HashMap::new();
        for &e in &point_flops {
            *points_of.entry(e).or_default() += 1;
        }
        let mut step_flops: Vec<(ExprIx, i64)> = points_of.into_iter().collect();
        step_flops.sort_unstable();
        Prepared {
            costs,
            options,
            cover,
            exprs: table.exprs,
            value_bytes,
            value_live,
            produced,
            region_transients,
            step_flops,
            candidates,
        }
    }

    /// The option `i`.
    #[inline(always)]
    pub(super) fn option(&self, i: OptionIx) -> &OptionSpec {
        &self.options.entries()[i.index()]
    }

    /// How many options.
    pub(super) fn option_count(&self) -> usize {
        self.options.entries().len()
    }

    /// The options of candidate `c`, recompute before swap.
    #[inline]
    pub(super) fn options_of(&self, c: CandidateIx) -> impl Iterator<Item = OptionIx> {
        self.options.row_range(c).map(OptionIx::new)
    }

    /// Every distinct expression evaluated at `b`, indexed like the table.
    ///
    /// # Errors
    /// [`FinalizeError::Eval`] naming the first expression that does not evaluate.
    pub(super) fn eval(&self, b: &Bindings) -> Result<ExprValues, FinalizeError> {
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

/// Distinct expressions in first-seen order, and the index of each (hashed with FxHash: the
/// map is only looked up, never iterated, and SipHash of each expression's terms was most of
/// a cold preparation).
///
/// `by_addr` finds an expression by the address of its shared terms first
/// ([`DimExpr::terms_addr`]): a decoded plan's expressions are clones of one table entry each,
/// so most are found without hashing their terms. The expressions are borrowed for `'p`, so
/// no address is reused while the interner lives.
#[derive(Default)]
struct Interner<'p> {
    index: FxHashMap<&'p DimExpr, ExprIx>,
    by_addr: FxHashMap<usize, ExprIx>,
    exprs: IndexVec<ExprIx, DimExpr>,
}

impl<'p> Interner<'p> {
    fn intern(&mut self, e: &'p DimExpr) -> ExprIx {
        let addr = e.terms_addr();
        if let Some(&i) = self.by_addr.get(&addr) {
            return i;
        }
        let i = *self
            .index
            .entry(e)
            .or_insert_with(|| self.exprs.push(e.clone()));
        self.by_addr.insert(addr, i);
        i
    }
}
