//! The concrete instance the exact solver optimizes: the plan evaluated at one binding, its
//! 0/1 options (candidate × kind) with their costs and memory effects, the pairs of options
//! the plan checker rejects together, and the memory rows of the MILP.
//!
//! # Memory model (the plan checker's, `crate::plan::check`, at concrete bytes)
//! Let `base[p]` be the resident bytes at point `p` without decisions (values with
//! `def <= p <= last_use`, plus region transients), and `bound[t]` the bytes resident between
//! points `t − 1` and `t` (values with `def < t <= last_use`). Option `i` frees `s_i` bytes
//! after point `e_i` and brings them back before point `t_i` (`regenerate_before` for a
//! recompute, `prefetch_at` for a swap); `y_i ∈ {0, 1}`. Then, exactly as the checker counts:
//! * resident bytes at `p`: `base[p] − Σ_{i: e_i < p < t_i} s_i·y_i`;
//! * the regeneration of option `i` runs before the op at `t_i`, after the regenerations at
//!   `t_i` of smaller candidates, and holds `g_i` bytes on top of what is resident then
//!   (`Candidate::regen_peak_bytes`; the value's size for a reload), so its peak is
//!
//! ```text
//! bound[t_i] − Σ_{j: e_j < t_i < t_j} s_j·y_j − Σ_{j: t_j = t_i, cand_j > cand_i} s_j·y_j
//!            + (g_i − s_i)·y_i  <=  budget
//! ```
//!
//!   With `y_i = 0` this is the device bytes part-way through the regenerations at `t_i`, at
//!   most the resident bytes at `t_i`, so the row needs no big-M.
//!
//! # Row reduction (exact)
//! Decisions only subtract bytes, so a point with `base[p] <= budget` meets the budget under
//! every decision set: only points with `base[p] > budget` get a row. A regeneration row is
//! implied by the resident row at `t_i` unless `g_i > s_i` (a recompute with transients) and
//! `bound[t_i] + g_i − s_i > budget` (its largest value with `y_i = 1`): only those are emitted.
//!
//! # What the checker rejects, as constraints
//! Options on the same value whose windows `(e, t]` overlap (one would evict a value that is
//! not resident or regenerate one that is) are exclusive, the two kinds of one candidate among
//! them. A recompute reading `w` at `t_i` excludes every option that has `w` evicted at that
//! moment (`e_j < t_i < t_j`, or `t_j = t_i` with a larger candidate index); a recompute whose
//! read is not live at `t_i`, or a candidate whose window or claimed bytes the checker rejects,
//! gets no option at all. Options that free no point and reload nothing are kept: evicting a
//! value across a regeneration can lower that regeneration's peak.

// Stages, points and options are parallel index spaces; ranges read better than zips here.
#![allow(clippy::needless_range_loop)]

use super::ExactError;
use crate::cost::StepCosts;
use crate::device::DeviceProfile;
use crate::format::{CandidateId, DecisionKind, Plan, Point, ValueClass, ValueId};
use ebb_ir::dim::DimError;
use ebb_ir::{Bindings, DimExpr};
use std::collections::HashMap;

/// One 0/1 option: candidate `cand` taken as `kind`.
#[derive(Clone, Debug, PartialEq)]
pub struct Opt {
    /// Index into `Plan::candidates`.
    pub cand: CandidateId,
    /// Recompute or swap.
    pub kind: DecisionKind,
    /// The evicted value.
    pub value: ValueId,
    /// Its size in bytes.
    pub bytes: i64,
    /// Evicted after this point.
    pub evict_after: Point,
    /// Resident again before this point (regeneration or reload).
    pub back: Point,
    /// Device bytes the regeneration holds on top of what is resident before it.
    pub regen: i64,
    /// Overhead in µs (the cost model of `ExactOptions`): recompute time, or a swap's
    /// exposed transfer time alone (`crate::cost::StepCosts::swap_us`).
    pub cost_us: f64,
    /// One transfer of a swap over the link, µs (0 for a recompute).
    pub transfer_us: f64,
    /// Recompute FLOPs (0 for a swap).
    pub flops: i64,
}

/// The evaluated plan, its options and the exclusions between them.
#[derive(Clone, Debug)]
pub struct Instance {
    /// Number of points.
    pub points: usize,
    /// Resident bytes per point without decisions.
    pub base: Vec<i64>,
    /// Bytes resident between points `t − 1` and `t` (index `t`; `bound[0] = 0`).
    pub bound: Vec<i64>,
    /// The 0/1 options, sorted by (candidate, kind).
    pub opts: Vec<Opt>,
    /// Pairs of option indices that may not be taken together (`a < b`).
    pub conflicts: Vec<(usize, usize)>,
    /// The step's modelled time, µs: what each direction of the link overlaps with
    /// (`crate::cost::exposed_transfer_us`).
    pub step_us: f64,
}

/// A linear row `Σ coef·y ≤ rhs` over option indices.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// (option index, coefficient in bytes).
    pub terms: Vec<(usize, f64)>,
    /// Right-hand side in bytes.
    pub rhs: f64,
}

/// Memoized evaluation (sizes repeat a lot).
struct Eval<'a> {
    b: &'a Bindings,
    memo: HashMap<&'a DimExpr, i64>,
}

impl<'a> Eval<'a> {
    fn eval(&mut self, what: &str, e: &'a DimExpr) -> Result<i64, ExactError> {
        if let Some(v) = e.as_const() {
            return Ok(v);
        }
        if let Some(&v) = self.memo.get(e) {
            return Ok(v);
        }
        let v = e
            .eval(self.b)
            .map_err(|source: DimError| ExactError::Eval {
                what: what.to_string(),
                expr: e.to_string(),
                source,
            })?;
        self.memo.insert(e, v);
        Ok(v)
    }
}

/// Cost parameters (see `ExactOptions`).
#[derive(Clone, Debug)]
pub struct Prices {
    /// The device whose modelled times price the options.
    pub device: DeviceProfile,
    /// Allowed kinds.
    pub kinds: Vec<DecisionKind>,
}

impl Instance {
    /// Added step time of the options `taken`, µs: their recompute time plus the exposed
    /// transfer time of their swaps, which share the link
    /// ([`crate::cost::exposed_transfer_us`]).
    pub fn overhead_us(&self, taken: &[bool]) -> f64 {
        let (mut recompute, mut alone, mut transfers) = (0.0, 0.0, 0.0);
        for (o, _) in self.opts.iter().zip(taken).filter(|(_, &t)| t) {
            match o.kind {
                DecisionKind::Recompute => recompute += o.cost_us,
                DecisionKind::Swap => {
                    alone += o.cost_us;
                    transfers += o.transfer_us;
                }
            }
        }
        recompute + crate::cost::exposed_transfer_us(alone, transfers, self.step_us)
    }

    /// Evaluates `plan` at `b` and lists its options (see the module docs).
    ///
    /// # Errors
    /// [`ExactError::Eval`] when a size, cost or claim does not evaluate; [`ExactError::Plan`]
    /// when an index is out of range.
    pub fn new(plan: &Plan, b: &Bindings, prices: &Prices) -> Result<Instance, ExactError> {
        plan.validate_indices()
            .map_err(|e| ExactError::Plan(e.to_string()))?;
        let mut ev = Eval {
            b,
            memo: HashMap::new(),
        };
        let points = plan.schedule.len().max(1);
        let mut sizes = Vec::with_capacity(plan.values.len());
        let mut diff = vec![0i128; points + 1];
        let mut bdiff = vec![0i128; points + 2];
        for (v, pv) in plan.values.iter().enumerate() {
            let s = ev.eval(&format!("values[{v}].bytes"), &pv.bytes)?;
            sizes.push(s);
            let (def, last_use) = (pv.def.index(), pv.last_use.index());
            diff[def] += i128::from(s);
            diff[last_use + 1] -= i128::from(s);
            // Resident across the boundary before `t` for def < t <= last_use.
            bdiff[def + 1] += i128::from(s);
            bdiff[last_use + 1] -= i128::from(s);
        }
        let fit = |x: i128| i64::try_from(x).map_err(|_| ExactError::Overflow);
        let (mut base, mut bound) = (Vec::with_capacity(points), Vec::with_capacity(points));
        let (mut acc, mut bacc) = (0i128, 0i128);
        for p in 0..points {
            acc += diff[p];
            bacc += bdiff[p];
            base.push(fit(acc)?);
            bound.push(fit(bacc)?);
        }
        for (i, t) in plan.region_transients.iter().enumerate() {
            let x = ev.eval(&format!("region_transients[{i}]"), &t.bytes)?;
            let slot = &mut base[t.point.index()];
            *slot = slot.checked_add(x).ok_or(ExactError::Overflow)?;
        }
        let costs = StepCosts::new(plan, &prices.device, |e| ev.eval("point costs", e))?;
        let mut opts = Vec::new();
        for (ci, c) in CandidateId::all(plan.candidates.len()).zip(&plan.candidates) {
            let v = c.value;
            let pv = plan.value(v);
            let s = sizes[v.index()];
            let (e, r) = (c.evict_after, c.regenerate_before);
            let claims_ok = ev.eval("bytes_saved", &c.bytes_saved)? == s
                && ev.eval("swap_bytes", &c.swap_bytes)? == s;
            if s <= 0 || !claims_ok || !(pv.def <= e && e < r && r <= pv.last_use) {
                continue;
            }
            let mut kinds = prices.kinds.clone();
            kinds.sort();
            kinds.dedup();
            for kind in kinds {
                if !c.allows(kind) {
                    continue;
                }
                let opt = match kind {
                    DecisionKind::Recompute => {
                        if c.recompute.is_empty()
                            || c.recompute_reads.iter().any(|&w| {
                                let w = plan.value(w);
                                w.class != ValueClass::Input && !(w.def < r && r <= w.last_use)
                            })
                        {
                            continue;
                        }
                        let flops = ev.eval("recompute_flops", &c.recompute_flops)?;
                        let regen = match &c.regen_peak_bytes {
                            Some(x) => ev.eval("regen_peak_bytes", x)?.max(s),
                            None => s
                                .checked_add(ev.eval("transient_bytes", &c.transient_bytes)?)
                                .ok_or(ExactError::Overflow)?,
                        };
                        Opt {
                            cand: ci,
                            kind,
                            value: v,
                            bytes: s,
                            evict_after: e,
                            back: r,
                            regen,
                            cost_us: costs.recompute_us(ci, flops),
                            transfer_us: 0.0,
                            flops,
                        }
                    }
                    DecisionKind::Swap => {
                        let t = c.prefetch_at;
                        if !(e < t && t <= r) {
                            continue;
                        }
                        Opt {
                            cand: ci,
                            kind,
                            value: v,
                            bytes: s,
                            evict_after: e,
                            back: t,
                            regen: s,
                            cost_us: costs.swap_us(c, s),
                            transfer_us: costs.transfer_us(s),
                            flops: 0,
                        }
                    }
                };
                opts.push(opt);
            }
        }
        let conflicts = conflicts(plan, &opts);
        Ok(Instance {
            points,
            base,
            bound,
            opts,
            conflicts,
            step_us: costs.step_us(),
        })
    }

    /// The memory rows for `budget` (see the module docs for which are emitted).
    pub fn rows(&self, budget: i64) -> Vec<Row> {
        let mut rows = Vec::new();
        // Options freeing each point, by a sweep over the windows.
        let mut covering: Vec<Vec<usize>> = vec![Vec::new(); self.points];
        for (i, o) in self.opts.iter().enumerate() {
            for cell in &mut covering[o.evict_after.next().index()..o.back.index()] {
                cell.push(i);
            }
        }
        for p in 0..self.points {
            if self.base[p] > budget {
                rows.push(Row {
                    terms: covering[p]
                        .iter()
                        .map(|&i| (i, -(self.opts[i].bytes as f64)))
                        .collect(),
                    rhs: (budget - self.base[p]) as f64,
                });
            }
        }
        for (i, o) in self.opts.iter().enumerate() {
            let t = o.back;
            let extra = o.regen - o.bytes;
            if extra <= 0 || self.bound[t.index()].saturating_add(extra) <= budget {
                continue;
            }
            let mut terms: Vec<(usize, f64)> = covering[t.index()]
                .iter()
                .filter(|&&j| self.opts[j].back > t)
                .map(|&j| (j, -(self.opts[j].bytes as f64)))
                .collect();
            terms.extend(
                self.opts
                    .iter()
                    .enumerate()
                    .filter(|(_, q)| q.back == t && q.cand > o.cand)
                    .map(|(j, q)| (j, -(q.bytes as f64))),
            );
            terms.push((i, extra as f64));
            rows.push(Row {
                terms,
                rhs: (budget - self.bound[t.index()]) as f64,
            });
        }
        rows
    }

    /// The checker's peak (resident and regeneration bytes) with the options `taken`, and
    /// whether `taken` respects every exclusion.
    pub fn peak(&self, taken: &[bool]) -> (i64, bool) {
        let ok = self.conflicts.iter().all(|&(a, b)| !(taken[a] && taken[b]));
        let mut diff = vec![0i64; self.points + 1];
        let mut at: Vec<Vec<usize>> = vec![Vec::new(); self.points];
        for (i, o) in self.opts.iter().enumerate().filter(|(i, _)| taken[*i]) {
            diff[o.evict_after.next().index()] -= o.bytes;
            diff[o.back.index()] += o.bytes;
            at[o.back.index()].push(i);
        }
        let (mut peak, mut acc) = (i64::MIN, 0i64);
        for p in 0..self.points {
            acc += diff[p];
            peak = peak.max(self.base[p] + acc);
            // Before the op at p: the boundary bytes less what is still evicted, then the
            // regenerations in candidate order.
            let mut cur = self.bound[p] + acc;
            for &i in &at[p] {
                cur -= self.opts[i].bytes;
            }
            at[p].sort_by_key(|&i| self.opts[i].cand);
            for &i in &at[p] {
                peak = peak.max(cur + self.opts[i].regen);
                cur += self.opts[i].bytes;
            }
        }
        (peak, ok)
    }
}

/// Pairs the checker rejects together (see the module docs).
fn conflicts(plan: &Plan, opts: &[Opt]) -> Vec<(usize, usize)> {
    let mut by_value: HashMap<ValueId, Vec<usize>> = HashMap::new();
    for (i, o) in opts.iter().enumerate() {
        by_value.entry(o.value).or_default().push(i);
    }
    let mut out = Vec::new();
    for list in by_value.values() {
        for (k, &a) in list.iter().enumerate() {
            for &b in &list[k + 1..] {
                let (x, y) = (&opts[a], &opts[b]);
                if !(x.back <= y.evict_after || y.back <= x.evict_after) {
                    out.push((a.min(b), a.max(b)));
                }
            }
        }
    }
    for (i, o) in opts.iter().enumerate() {
        if o.kind != DecisionKind::Recompute {
            continue;
        }
        let t = o.back;
        for &w in &plan.candidates[o.cand.index()].recompute_reads {
            for &j in by_value.get(&w).map(Vec::as_slice).unwrap_or(&[]) {
                let q = &opts[j];
                if q.evict_after < t && (q.back > t || (q.back == t && q.cand > o.cand)) {
                    out.push((i.min(j), i.max(j)));
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}
