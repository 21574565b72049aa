//! The independent plan checker: proves, by simulating the schedule at concrete bindings, that
//! a plan with a set of evict/regenerate/offload/prefetch decisions computes every value
//! correctly and that the plan's memory accounting is what the schedule implies.
//!
//! In the spirit of regalloc2's `src/checker.rs`: the checker trusts nothing the planner
//! computed. It re-derives positions, value numbering, sizes, live ranges and region memory
//! from the graph and the schedule alone (`derive.rs`), shares no code with `crate::memory` or
//! `crate::remat`, and then runs the schedule on a model of device memory.
//!
//! # What is proven (each failure is a [`CheckError`] naming the point, value and problem)
//! 1. The schedule is a topological permutation of the graph's non-input ops, and the plan's
//!    value table (ids, sizes, live ranges) and region transients equal the derived ones; with
//!    no decision, the maximum of the plan's peak terms equals the simulated peak.
//! 2. Every decision names a candidate and a kind the candidate allows; its window is
//!    `def <= evict_after < regenerate_before <= last_use` (and
//!    `evict_after < prefetch_at <= regenerate_before` for a swap); its claimed bytes equal the
//!    value's size.
//! 3. Every operand read by a scheduled op is resident: defined, not freed, and not evicted
//!    (or regenerated / reloaded since).
//! 4. A recompute reruns pure ops only (no input, `while`, `custom_call`,
//!    `optimization_barrier`), ends with the value's producer, and reads only values produced
//!    earlier in the same recompute or resident at that moment and listed in
//!    `recompute_reads`; its transient results fit in the claimed `transient_bytes`. Then the
//!    regenerated value equals the original (same pure op on equal operands, by induction).
//! 5. Evictions hit resident values only, and a regeneration brings back a value that is not
//!    resident, so no value is used after its eviction without a regeneration and windows of
//!    the same value never overlap.
//!
//! # Memory model
//! Inputs are resident from the start. Before the op at point `p` runs, the regenerations and
//! reloads due at `p` happen in candidate order; then the op's results are allocated; the
//! resident bytes at `p` ([`CheckReport::resident`]) are counted with the op's region
//! transient memory; then values whose last use is `p` are freed and the evictions after `p`
//! happen (a swap moves the bytes to host memory until its reload). The transient results of a
//! recompute live only during its regeneration ([`CheckReport::regen_peak`]).

use super::derive::{derive, Derived};
pub use super::error::CheckError;
use ebb_ir::{Bindings, Graph, OpKind, Point, ProgPoint, ValueId};
use ebb_plan::format::{Decision, DecisionKind, Plan};

/// What the simulation measured (bytes, at the checked bindings).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckReport {
    /// Device bytes resident while the op at each point runs (region transients included).
    pub resident: Vec<i64>,
    /// Largest device bytes during the regenerations before each point (0 when none).
    pub regen_peak: Vec<i64>,
    /// Host bytes held by swaps at each point.
    pub host: Vec<i64>,
    /// Largest of `resident` and `regen_peak`.
    pub peak: i64,
    /// First point where `peak` is reached.
    pub peak_point: Point,
}

/// Whether the checker accepts rerunning ops of `kind` (rule 4 of the module docs).
pub(crate) fn pure(kind: OpKind) -> bool {
    !matches!(
        kind,
        OpKind::Input
            | OpKind::While
            | OpKind::Case
            | OpKind::CustomCall
            | OpKind::OptimizationBarrier
            | OpKind::AnnotateDevicePlacement
    )
}

/// The resident bytes at each point of `plan`'s schedule without decisions, as the checker
/// derives them (to compare with `crate::memory::Liveness::resident_bytes`).
///
/// # Errors
/// As [`check`].
pub fn resident_bytes(g: &Graph, plan: &Plan, b: &Bindings) -> Result<Vec<i64>, CheckError> {
    check(g, plan, &[], b).map(|r| r.resident)
}

/// Checks `plan` for `g` with `decisions` taken, at bindings `b` (see the module docs).
///
/// # Errors
/// The first failed rule, as a [`CheckError`].
pub fn check(
    g: &Graph,
    plan: &Plan,
    decisions: &[Decision],
    b: &Bindings,
) -> Result<CheckReport, CheckError> {
    Checker::new(g, plan, b)?.check(decisions)
}

/// The checker of one plan at one binding, its derivation done and its tables proven (rule 1):
/// [`Checker::check`] then proves any number of decision sets on that one derivation, each
/// exactly as [`check()`] would (the derivation depends on the graph, the schedule and the
/// bindings only).
pub struct Checker<'a> {
    g: &'a Graph,
    plan: &'a Plan,
    b: &'a Bindings,
    d: Derived,
}

impl<'a> Checker<'a> {
    /// Derives `g` under `plan`'s schedule at `b` and proves rule 1 (the schedule, the value
    /// table and the region transients).
    ///
    /// # Errors
    /// As [`check()`], for rule 1.
    pub fn new(g: &'a Graph, plan: &'a Plan, b: &'a Bindings) -> Result<Self, CheckError> {
        if plan.graph_name != g.name || plan.ops != g.order().len() {
            return Err(CheckError::GraphMismatch {
                plan: plan.graph_name.clone(),
                plan_ops: plan.ops,
                graph: g.name.clone(),
                graph_ops: g.order().len(),
            });
        }
        g.scope.check(b).map_err(CheckError::Bindings)?;
        let d = derive(g, &plan.schedule, b)?;
        check_tables(plan, &d, b)?;
        Ok(Checker { g, plan, b, d })
    }

    /// Rules 2–5 with `decisions` taken, and with none, the plan's peak terms against the
    /// simulated peak (see the module docs).
    ///
    /// # Errors
    /// The first failed rule, as a [`CheckError`].
    pub fn check(&self, decisions: &[Decision]) -> Result<CheckReport, CheckError> {
        let Checker { g, plan, b, d } = self;
        let events = events(plan, decisions, d, b)?;
        let report = simulate(g, plan, decisions, d, &events, b)?;
        if decisions.is_empty() && !plan.peak_terms.is_empty() {
            let planned = plan.peak_at(b).map_err(|source| CheckError::Claim {
                what: "peak_terms".into(),
                source,
            })?;
            if planned != report.peak {
                return Err(CheckError::Peak {
                    planned,
                    derived: report.peak,
                    point: report.peak_point,
                });
            }
        }
        Ok(report)
    }
}

/// Rule 1: the value table and region transients equal the derived ones.
fn check_tables(plan: &Plan, d: &Derived, b: &Bindings) -> Result<(), CheckError> {
    if plan.values.len() != d.bytes.len() {
        let problem = format!(
            "the plan lists {} values, the graph has {}",
            plan.values.len(),
            d.bytes.len()
        );
        return Err(CheckError::ValueTable {
            value: ValueId::new(plan.values.len().min(d.bytes.len())),
            problem,
        });
    }
    for (v, pv) in plan.values.iter().enumerate() {
        let id = ValueId::new(v);
        let pos = d.producer[v];
        let out = (v - d.base[pos.index()]) as u32;
        if (pv.node, pv.output) != (pos, out) {
            let problem = format!(
                "planned as result {} of position {}, is result {out} of position {pos}",
                pv.output, pv.node
            );
            return Err(CheckError::ValueTable { value: id, problem });
        }
        let planned = pv
            .bytes
            .eval(b)
            .map_err(|source| CheckError::Size { value: id, source })?;
        if planned != d.bytes[v] {
            let problem = format!(
                "planned size {} = {planned} bytes, the type gives {}",
                pv.bytes, d.bytes[v]
            );
            return Err(CheckError::ValueTable { value: id, problem });
        }
        if (pv.def, pv.last_use) != (d.def[v], d.last_use[v]) {
            return Err(CheckError::LiveRange {
                value: id,
                planned_def: pv.def,
                planned_last_use: pv.last_use,
                def: d.def[v],
                last_use: d.last_use[v],
            });
        }
    }
    let mut planned = vec![0i64; d.points];
    for (i, t) in plan.region_transients.iter().enumerate() {
        let x = t.bytes.eval(b).map_err(|source| CheckError::Claim {
            what: format!("region_transients[{i}]"),
            source,
        })?;
        let slot = planned
            .get_mut(t.point.index())
            .ok_or(CheckError::Transient {
                point: t.point,
                planned: x,
                derived: 0,
            })?;
        *slot = slot.checked_add(x).ok_or(CheckError::Overflow)?;
    }
    for (p, (&planned, &derived)) in Point::all(d.points).zip(planned.iter().zip(&d.transient)) {
        if planned != derived {
            return Err(CheckError::Transient {
                point: p,
                planned,
                derived,
            });
        }
    }
    Ok(())
}

/// Indices into the decisions, bucketed by program point: entry [`ProgPoint::index`] lists the
/// decisions whose eviction (after a point) or regeneration / reload (before a point) happens
/// there, in candidate order.
type Events = Vec<Vec<usize>>;

/// Rule 2, and the decisions bucketed by program point ([`Events`]).
fn events(
    plan: &Plan,
    decisions: &[Decision],
    d: &Derived,
    b: &Bindings,
) -> Result<Events, CheckError> {
    let mut at: Events = vec![Vec::new(); 2 * d.points];
    for (i, dec) in decisions.iter().enumerate() {
        let bad = |problem: String| CheckError::Decision {
            decision: i,
            candidate: dec.candidate,
            problem,
        };
        let c = plan
            .candidate(dec.candidate)
            .ok_or_else(|| bad("no such candidate".into()))?;
        if !c.allows(dec.kind) {
            return Err(bad(format!("kind {:?} is not allowed", dec.kind)));
        }
        let v = c.value;
        if v.index() >= d.bytes.len() {
            return Err(bad(format!("value {v} does not exist")));
        }
        let (def, last_use) = (d.def[v.index()], d.last_use[v.index()]);
        let (e, r) = (c.evict_after, c.regenerate_before);
        if !(def <= e && e < r && r <= last_use) {
            let problem = format!(
                "window ({e}, {r}) is not within the live range [{def}, {last_use}] of value {v} with evict < regenerate"
            );
            return Err(bad(problem));
        }
        let size = d.bytes[v.index()];
        let claims = [
            ("bytes_saved", &c.bytes_saved),
            ("swap_bytes", &c.swap_bytes),
        ];
        for (what, claim) in claims {
            match claim.eval(b) {
                Ok(x) if x == size => {}
                Ok(x) => {
                    return Err(bad(format!(
                        "claims {what} = {claim} = {x} bytes, value {v} has {size}"
                    )))
                }
                Err(e) => {
                    return Err(bad(format!(
                        "claims {what} = {claim}, which does not evaluate: {e}"
                    )))
                }
            }
        }
        if dec.kind == DecisionKind::Swap && !(e < c.prefetch_at && c.prefetch_at <= r) {
            return Err(bad(format!(
                "prefetch point {} is not in ({e}, {r}]",
                c.prefetch_at
            )));
        }
        at[c.evict_point().index()].push(i);
        at[c.back_point(dec.kind).index()].push(i);
    }
    for list in &mut at {
        list.sort_by_key(|&i| (decisions[i].candidate, i));
    }
    Ok(at)
}

/// Residency state of the simulation, indexed by value id.
struct State {
    resident: Vec<bool>,
    /// Value → decision that evicted it (while evicted).
    evicted_by: Vec<Option<usize>>,
    /// Value → freed after its last use.
    freed: Vec<bool>,
    cur: i128,
    host: i128,
}

impl State {
    fn is_resident(&self, v: ValueId) -> bool {
        self.resident[v.index()]
    }

    fn why_not(&self, v: ValueId, d: &Derived, decisions: &[Decision], plan: &Plan) -> String {
        if self.freed[v.index()] {
            format!(
                "freed after its last use at point {}",
                d.last_use[v.index()]
            )
        } else if let Some(i) = self.evicted_by[v.index()] {
            let c = decisions[i].candidate;
            format!(
                "evicted after point {} by candidate {c}",
                plan.candidates[c.index()].evict_after
            )
        } else {
            format!("not yet defined (defined at point {})", d.def[v.index()])
        }
    }
}

/// Rules 3–5: runs the schedule.
fn simulate(
    g: &Graph,
    plan: &Plan,
    decisions: &[Decision],
    d: &Derived,
    events: &Events,
    b: &Bindings,
) -> Result<CheckReport, CheckError> {
    let nv = d.bytes.len();
    let mut st = State {
        resident: vec![false; nv],
        evicted_by: vec![None; nv],
        freed: vec![false; nv],
        cur: 0,
        host: 0,
    };
    for v in 0..nv {
        if d.is_input[d.producer[v].index()] {
            st.resident[v] = true;
            st.cur += i128::from(d.bytes[v]);
        }
    }
    let order = g.order();
    let mut freed_after: Vec<Vec<ValueId>> = vec![Vec::new(); d.points];
    for v in ValueId::all(nv) {
        freed_after[d.last_use[v.index()].index()].push(v);
    }
    let fit = |x: i128| i64::try_from(x).map_err(|_| CheckError::Overflow);
    let mut report = CheckReport {
        resident: Vec::with_capacity(d.points),
        regen_peak: vec![0; d.points],
        host: Vec::with_capacity(d.points),
        peak: 0,
        peak_point: Point::new(0),
    };
    for p in Point::all(d.points) {
        for &i in &events[ProgPoint::before(p).index()] {
            let peak = regenerate(g, plan, decisions, (i, p), d, &mut st, b)?;
            let slot = &mut report.regen_peak[p.index()];
            *slot = (*slot).max(fit(peak)?);
        }
        if let Some(&pos) = plan.schedule.get(p.index()) {
            for &w in d.operands_at(p) {
                if !st.is_resident(w) {
                    let why = st.why_not(w, d, decisions, plan);
                    return Err(CheckError::UseNotResident {
                        point: p,
                        op: g.node(order[pos.index()]).kind().name().into(),
                        value: w,
                        why,
                    });
                }
            }
            for u in d.results(pos) {
                st.resident[u.index()] = true;
                st.cur += i128::from(d.bytes[u.index()]);
            }
        }
        report
            .resident
            .push(fit(st.cur + i128::from(d.transient[p.index()]))?);
        report.host.push(fit(st.host)?);
        for &v in &freed_after[p.index()] {
            if st.is_resident(v) {
                st.resident[v.index()] = false;
                st.cur -= i128::from(d.bytes[v.index()]);
            }
            st.freed[v.index()] = true;
        }
        for &i in &events[ProgPoint::after(p).index()] {
            let c = decisions[i].candidate;
            let v = plan.candidates[c.index()].value;
            if !st.is_resident(v) {
                let why = st.why_not(v, d, decisions, plan);
                return Err(CheckError::EvictNotResident {
                    point: p,
                    value: v,
                    candidate: c,
                    why,
                });
            }
            let bytes = i128::from(d.bytes[v.index()]);
            st.resident[v.index()] = false;
            st.evicted_by[v.index()] = Some(i);
            st.cur -= bytes;
            if decisions[i].kind == DecisionKind::Swap {
                st.host += bytes;
            }
        }
    }
    for (p, (&r, &q)) in Point::all(d.points).zip(report.resident.iter().zip(&report.regen_peak)) {
        let x = r.max(q);
        if p.index() == 0 || x > report.peak {
            report.peak = x;
            report.peak_point = p;
        }
    }
    Ok(report)
}

/// Rule 4 (and the reload of a swap): brings decision `i`'s value back before point `p`.
/// Returns the largest device bytes during the regeneration.
fn regenerate(
    g: &Graph,
    plan: &Plan,
    decisions: &[Decision],
    (i, p): (usize, Point),
    d: &Derived,
    st: &mut State,
    b: &Bindings,
) -> Result<i128, CheckError> {
    let ci = decisions[i].candidate;
    let c = &plan.candidates[ci.index()];
    let v = c.value;
    if st.is_resident(v) {
        return Err(CheckError::RegenerateResident {
            point: p,
            value: v,
            candidate: ci,
        });
    }
    let bad = |problem: String| CheckError::BadRecompute {
        point: p,
        value: v,
        candidate: ci,
        problem,
    };
    if st.evicted_by[v.index()] != Some(i) {
        let why = st.why_not(v, d, decisions, plan);
        return Err(bad(format!(
            "the value is not evicted by this decision: it is {why}"
        )));
    }
    let bytes = i128::from(d.bytes[v.index()]);
    let mut peak = st.cur + bytes;
    if decisions[i].kind == DecisionKind::Swap {
        st.host -= bytes;
    } else {
        let producer = d.producer[v.index()];
        if c.recompute.last() != Some(&producer) {
            return Err(bad(format!(
                "does not end with the producer at position {producer}"
            )));
        }
        // (value, index of its last reader in the list); a result nobody reads is freed at once.
        let mut produced: Vec<(ValueId, usize)> = Vec::new();
        for (k, &pos) in c.recompute.iter().enumerate() {
            if pos.index() >= d.is_input.len() || !pure(g.node(g.order()[pos.index()]).kind()) {
                return Err(bad(format!("position {pos} is not a pure op")));
            }
            for w in g.operands(g.order()[pos.index()]) {
                let wid = d.value_of(w);
                if let Some(slot) = produced.iter_mut().find(|(x, _)| *x == wid) {
                    slot.1 = k;
                } else if !st.is_resident(wid) {
                    let why = st.why_not(wid, d, decisions, plan);
                    return Err(CheckError::RegenRead {
                        point: p,
                        value: v,
                        candidate: ci,
                        read: wid,
                        why,
                    });
                } else if !c.recompute_reads.contains(&wid) {
                    let why = "resident but not listed in recompute_reads".to_string();
                    return Err(CheckError::RegenRead {
                        point: p,
                        value: v,
                        candidate: ci,
                        read: wid,
                        why,
                    });
                }
            }
            produced.extend(d.results(pos).map(|u| (u, k)));
        }
        let (mut live, mut transient) = (0i128, 0i128);
        for (k, &pos) in c.recompute.iter().enumerate() {
            for u in d.results(pos) {
                live += i128::from(d.bytes[u.index()]);
            }
            transient = transient.max(
                live - if d.results(pos).any(|u| u == v) {
                    bytes
                } else {
                    0
                },
            );
            peak = peak.max(st.cur + live);
            for &(u, last) in &produced {
                if last == k && u != v {
                    live -= i128::from(d.bytes[u.index()]);
                }
            }
        }
        let claimed = c
            .transient_bytes
            .eval(b)
            .map_err(|e| bad(format!("transient_bytes does not evaluate: {e}")))?;
        if transient > i128::from(claimed) {
            return Err(bad(format!(
                "transient results peak at {transient} bytes, more than the claimed {claimed}"
            )));
        }
    }
    st.resident[v.index()] = true;
    st.evicted_by[v.index()] = None;
    st.cur += bytes;
    Ok(peak)
}
