//! Verification of a plan read from a file: every command that loads a plan runs
//! [`verify_plan`] before trusting any of it, and [`check_variants_at`] at the bindings it is
//! about to report on or execute.
//!
//! A plan file is user input: its value table, peaks, costs and candidates could have been
//! edited, or its embedded graph changed after compilation. [`verify_plan`] proves that the
//! plan is the plan of its embedded graph:
//! 1. the embedded graph (`graph_ir`) has the digest recorded at compile time
//!    ([`ebb_plan::format::graph_digest`], SHA-256), parses, and passes the IR verifier (arity,
//!    typed attributes, result types equal to the shape rules');
//! 2. every schedule variant names the graph, its op count, its symbol scope (ranges,
//!    divisibility, equalities) and its shape assertions exactly as the graph re-derives them;
//! 3. every variant's value table has each value's size equal to its type's size as a symbolic
//!    expression and its class (input, donated, output, intermediate) as the graph implies; its
//!    per-point FLOPs, bytes accessed and compute units equal the cost model's
//!    (`crate::remat::cost`), its in-place writes equal [`ebb_ir::op::in_place_writes`], and
//!    its peak terms equal the pruned symbolic peak of its schedule (`crate::memory`);
//!    Every variant carries its per-point FLOPs, bytes and compute units (a variant without
//!    them would be priced as free);
//! 4. every candidate is well formed: a window `def <= evict_after < regenerate_before <=
//!    last_use` of an intermediate in which the schedule never reads it (and `evict_after <
//!    prefetch_at <= regenerate_before` for a swap), bytes equal to the value's size; a
//!    recompute's ops, reads, FLOPs, transient and peak bytes equal their re-derivation by the
//!    candidate search's own rules ([`crate::remat::candidates::rederive_recompute`]); and the
//!    candidates are sorted by (value, window) with no window listed twice;
//! 5. the independent checker ([`super::check()`]) accepts every variant without decisions at
//!    up to three representative bindings of the scope
//!    ([`ebb_ir::SymbolScope::representative_bindings`]): the schedule is a topological
//!    permutation, live ranges and region transients are the derived ones, and the maximum of
//!    the peak terms is the simulated peak;
//! 6. precomputed budget thresholds equal their recomputation from the peak terms;
//! 7. every value listed as placed on the host is a result of an `annotate_device_placement`
//!    to a host memory kind, and every forced swap is a swap candidate of such a value.
//!
//! Invariant: a plan that passes [`verify_plan`] and then [`check_variants_at`] at bindings
//! `b` reports, at `b`, the peaks the independent checker simulates for every variant, so a
//! runtime choosing a variant by [`Plan::best_variant`] chooses honestly. Decisions taken at
//! `b` are proven separately by [`super::check()`] with those decisions.

use super::check::{CheckError, Checker};
use crate::remat::cost;
use crate::remat::threshold::threshold_in_scope;
use ebb_ir::{Bindings, BindingsExt, DimExpr, Graph, NodeId, OpKind, ValueRef};
use ebb_plan::format::{graph_digest, DecisionKind, Plan, ValueClass};

/// Why a loaded plan is refused. Each variant names the schedule variant (0 is the plan
/// itself, `k` its `k`-th alternative) and the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanVerifyError {
    /// The plan has no `graph_ir` or no `graph_digest`.
    #[error("the plan does not embed its graph and its digest (`graph_ir`, `graph_digest`); re-run `ebb compile`")]
    NoGraph,
    /// The embedded graph's digest differs from the recorded one.
    #[error("the embedded graph was edited after the plan was made: its digest is {found}, the plan records {recorded} (re-run `ebb compile` on the edited graph's source)")]
    Digest {
        /// The digest in `graph_digest`.
        recorded: String,
        /// The digest of `graph_ir` as read.
        found: String,
    },
    /// The embedded graph does not parse or verify.
    #[error("embedded graph: {0}")]
    Graph(String),
    /// A field of a variant disagrees with what the graph implies.
    #[error("plan variant {variant}: `{field}` does not match the embedded graph: {problem}")]
    Mismatch {
        /// Variant index (0: the plan itself).
        variant: usize,
        /// The field (`symbols`, `values[3].bytes`, `candidates[7]`, ...).
        field: String,
        /// What disagrees.
        problem: String,
    },
    /// The independent checker rejects a variant at a binding.
    #[error("plan variant {variant} at {bindings}: {source}")]
    Check {
        /// Variant index.
        variant: usize,
        /// The bindings, `B=4,S=16`.
        bindings: String,
        /// The checker's finding.
        source: CheckError,
    },
    /// No binding of the scope lets the checker evaluate the plan's sizes.
    #[error("no binding of the plan's symbols evaluates its sizes without overflow: {0}")]
    NoBinding(String),
}

/// Verifies a loaded plan against its embedded graph (see the module docs) and returns the
/// graph.
///
/// # Errors
/// The first failed rule as a [`PlanVerifyError`].
pub fn verify_plan(plan: &Plan) -> Result<Graph, PlanVerifyError> {
    let (Some(text), Some(recorded)) = (&plan.graph_ir, &plan.graph_digest) else {
        return Err(PlanVerifyError::NoGraph);
    };
    let found = graph_digest(text);
    if &found != recorded {
        return Err(PlanVerifyError::Digest {
            recorded: recorded.clone(),
            found,
        });
    }
    let g = ebb_ir::text::parse(text).map_err(|e| PlanVerifyError::Graph(e.to_string()))?;
    ebb_ir::verify::verify(&g).map_err(|e| PlanVerifyError::Graph(e.to_string()))?;
    if let Some(b) = &plan.bound {
        g.scope
            .check(b)
            .map_err(|e| mismatch(0, "bound", e.to_string()))?;
    }
    let expected = Expected::of(&g);
    for (i, v) in variants(plan) {
        if i > 0
            && (v.graph_ir.is_some()
                || v.graph_digest.is_some()
                || !v.alternatives.is_empty()
                || v.bound != plan.bound)
        {
            return Err(mismatch(
                i,
                "alternatives",
                "an alternative carries a graph, alternatives or bindings of its own".into(),
            ));
        }
        verify_variant(&g, &expected, i, v)?;
    }
    verify_thresholds(&g, plan)?;
    check_at_samples(&g, plan)?;
    Ok(g)
}

/// Runs the independent checker on every variant of `plan` without decisions at `b`: after
/// it, each variant's peak at `b` ([`Plan::peak_at`]) is the simulated one.
///
/// # Errors
/// [`PlanVerifyError::Check`] naming the variant and the checker's finding.
pub fn check_variants_at(g: &Graph, plan: &Plan, b: &Bindings) -> Result<(), PlanVerifyError> {
    check_variants_keeping(g, plan, b, 0).map(|_| ())
}

/// [`check_variants_at`], returning the checker of variant `keep` (variant 0 when the plan has
/// no such variant) at `b`, its derivation done: the decisions finalized at `b` for that
/// variant are then proven with [`Checker::check`] without deriving the graph again.
///
/// # Errors
/// As [`check_variants_at`].
pub fn check_variants_keeping<'a>(
    g: &'a Graph,
    plan: &'a Plan,
    b: &'a Bindings,
    keep: usize,
) -> Result<Checker<'a>, PlanVerifyError> {
    let keep = if plan.variant(keep).is_some() {
        keep
    } else {
        0
    };
    let mut kept = None;
    for (i, v) in variants(plan) {
        let c = check_variant(g, i, v, b)?;
        if i == keep {
            kept = Some(c);
        }
    }
    // `variants` yields variant 0 and every alternative, `keep` among them.
    kept.ok_or_else(|| mismatch(keep, "alternatives", "no such variant".into()))
}

/// [`check_variants_at`], returning every variant's checker at `b` (element `i` is variant
/// `i`'s), each derivation done: for a caller that checks the variants before it knows which
/// one its decisions will use (`ebb plan` checks them while it finalizes).
///
/// # Errors
/// As [`check_variants_at`].
pub fn check_variants_each<'a>(
    g: &'a Graph,
    plan: &'a Plan,
    b: &'a Bindings,
) -> Result<Vec<Checker<'a>>, PlanVerifyError> {
    variants(plan)
        .map(|(i, v)| check_variant(g, i, v, b))
        .collect()
}

/// The checker of variant `i` (`v`) at `b`, after it accepted the variant without decisions.
fn check_variant<'a>(
    g: &'a Graph,
    i: usize,
    v: &'a Plan,
    b: &'a Bindings,
) -> Result<Checker<'a>, PlanVerifyError> {
    Checker::new(g, v, b)
        .and_then(|c| c.check(&[]).map(|_| c))
        .map_err(|source| PlanVerifyError::Check {
            variant: i,
            bindings: b.to_text(),
            source,
        })
}

/// The structural rules of [`verify_plan`] that cost no derivation, for a plan whose file
/// carries a matching verification stamp (`ebb_plan::binary`): the plan and its graph were
/// fully verified together when the file was written, and these checks keep a loader from
/// indexing past the graph should a stamped file be inconsistent anyway. Each variant names
/// the graph, its op count, its symbol scope and its shape assertions, and lists as many
/// values as the graph has results; a bound plan's bindings satisfy the scope.
///
/// Not a verification: a stamped file is trusted for everything else (see
/// `ebb_plan::binary`'s docs); the checker at the bindings a command reports on
/// ([`check_variants_at`]) still proves every reported peak.
///
/// # Errors
/// The first failed rule as a [`PlanVerifyError::Mismatch`].
pub fn check_stamped_structure(g: &Graph, plan: &Plan) -> Result<(), PlanVerifyError> {
    if let Some(b) = &plan.bound {
        g.scope
            .check(b)
            .map_err(|e| mismatch(0, "bound", e.to_string()))?;
    }
    let results: usize = g.order().iter().map(|&id| g.node(id).outputs.len()).sum();
    for (i, v) in variants(plan) {
        check_graph_identity(g, i, v)?;
        if v.symbols != g.scope || v.assertions != g.assertions {
            return Err(mismatch(
                i,
                "symbols/assertions",
                "the symbol facts or shape assertions differ from the graph's".into(),
            ));
        }
        if v.values.len() != results {
            return Err(mismatch(
                i,
                "values",
                format!("{} values listed, the graph has {results}", v.values.len()),
            ));
        }
    }
    Ok(())
}

/// The plan (variant 0) and its alternatives, numbered.
fn variants(plan: &Plan) -> impl Iterator<Item = (usize, &Plan)> {
    std::iter::once(plan).chain(&plan.alternatives).enumerate()
}

fn mismatch(variant: usize, field: impl Into<String>, problem: String) -> PlanVerifyError {
    PlanVerifyError::Mismatch {
        variant,
        field: field.into(),
        problem,
    }
}

/// The value table's schedule-independent columns as the graph implies them.
struct Expected {
    /// Per value: producer position, result index, size, class (live ranges aside).
    values: Vec<(usize, u32, DimExpr, ValueClass)>,
    /// Program-order position → first value id.
    base: Vec<usize>,
    /// Node → program-order position.
    pos_of: std::collections::HashMap<NodeId, usize>,
}

impl Expected {
    fn of(g: &Graph) -> Expected {
        let order = g.order();
        let mut values = Vec::new();
        let mut base = Vec::with_capacity(order.len() + 1);
        for (pos, &id) in order.iter().enumerate() {
            base.push(values.len());
            let n = g.node(id);
            let class = match (n.kind() == OpKind::Input, g.aliasing_output(id).is_some()) {
                (true, true) => ValueClass::Donated,
                (true, false) => ValueClass::Input,
                (false, _) => ValueClass::Intermediate,
            };
            for (k, t) in n.outputs.iter().enumerate() {
                values.push((pos, k as u32, t.size_bytes(), class));
            }
        }
        base.push(values.len());
        let pos_of: std::collections::HashMap<NodeId, usize> =
            order.iter().enumerate().map(|(p, &id)| (id, p)).collect();
        for o in g.outputs() {
            if let Some(&p) = pos_of.get(&o.node) {
                let v = &mut values[base[p] + o.output as usize];
                if v.3 == ValueClass::Intermediate {
                    v.3 = ValueClass::Output;
                }
            }
        }
        Expected {
            values,
            base,
            pos_of,
        }
    }

    fn value_id(&self, pos: usize, output: u32) -> usize {
        self.base[pos] + output as usize
    }
}

/// Variant `i` is a plan for `g`: the graph's name and op count.
fn check_graph_identity(g: &Graph, i: usize, v: &Plan) -> Result<(), PlanVerifyError> {
    if v.graph_name != g.name || v.ops != g.order().len() {
        return Err(mismatch(
            i,
            "graph_name/ops",
            format!(
                "plan is for `{}` with {} ops, the graph is `{}` with {}",
                v.graph_name,
                v.ops,
                g.name,
                g.order().len()
            ),
        ));
    }
    Ok(())
}

/// Rules 2–4 of the module docs for variant `i`.
fn verify_variant(g: &Graph, e: &Expected, i: usize, v: &Plan) -> Result<(), PlanVerifyError> {
    verify_placed(g, i, v)?;
    check_graph_identity(g, i, v)?;
    if v.symbols != g.scope {
        return Err(mismatch(
            i,
            "symbols",
            "the symbol ranges, divisibility or equalities differ from the graph's".into(),
        ));
    }
    if v.assertions != g.assertions {
        return Err(mismatch(
            i,
            "assertions",
            "the shape assertions differ from the graph's".into(),
        ));
    }
    if v.values.len() != e.values.len() {
        return Err(mismatch(
            i,
            "values",
            format!(
                "{} values listed, the graph has {}",
                v.values.len(),
                e.values.len()
            ),
        ));
    }
    for (k, (pv, (pos, out, bytes, class))) in v.values.iter().zip(&e.values).enumerate() {
        if (pv.node.index(), pv.output) != (*pos, *out) || &pv.bytes != bytes || pv.class != *class
        {
            return Err(mismatch(
                i,
                format!("values[{k}]"),
                format!(
                    "listed as result {} of op #{}, {} bytes, {:?}; the graph has result {out} of op #{pos}, {bytes} bytes, {class:?}",
                    pv.output, pv.node, pv.bytes, pv.class
                ),
            ));
        }
    }
    // The schedule as nodes; its validity (a topological permutation) is the checker's rule 1,
    // run below at sample bindings, so here it only has to be in range.
    let order = g.order();
    let schedule: Vec<NodeId> = v.schedule.iter().map(|p| order[p.index()]).collect();
    let per_point = |f: fn(&Graph, NodeId) -> DimExpr| -> Vec<DimExpr> {
        schedule.iter().map(|&id| f(g, id)).collect()
    };
    let missing = |field: &str| {
        mismatch(
            i,
            field,
            "missing; `ebb compile` writes it for every variant (the time model prices the \
             variant with it)"
                .into(),
        )
    };
    let f = v
        .point_flops
        .as_ref()
        .ok_or_else(|| missing("point_flops"))?;
    same_list(
        i,
        "point_flops",
        f,
        &per_point(cost::flops),
        DimExpr::to_string,
    )?;
    let b = v
        .point_bytes
        .as_ref()
        .ok_or_else(|| missing("point_bytes"))?;
    let want = per_point(cost::bytes_accessed);
    same_list(i, "point_bytes", b, &want, DimExpr::to_string)?;
    let k = v
        .point_kinds
        .as_ref()
        .ok_or_else(|| missing("point_kinds"))?;
    let want: Vec<_> = schedule
        .iter()
        .map(|&id| cost::compute_kind(g, id))
        .collect();
    same_list(i, "point_kinds", k, &want, |x| format!("{x:?}"))?;
    let in_place = super::in_place_writes(g, &schedule, |r: ValueRef| {
        e.pos_of
            .get(&r.node)
            .map_or(usize::MAX, |&p| e.value_id(p, r.output))
    });
    let listed: Vec<(usize, usize)> = v
        .in_place_writes
        .iter()
        .map(|w| (w.operand.index(), w.result.index()))
        .collect();
    same_list(i, "in_place_writes", &listed, &in_place, |(o, r)| {
        format!("value {o} into value {r}")
    })?;
    let reads = reads_by_value(g, e, &schedule);
    // The index derives live ranges from the schedule; a schedule that is not a topological
    // permutation is the checker's finding (rule 5), so recomputes are re-derived only for a
    // valid one.
    let idx = crate::remat::ScheduleIndex::new(g, &schedule).ok();
    for (k, c) in v.candidates.iter().enumerate() {
        verify_candidate(g, v, c, &reads[c.value.index()])
            .and_then(|()| match &idx {
                Some(idx) => verify_recompute(g, idx, c),
                None => Ok(()),
            })
            .map_err(|p| mismatch(i, format!("candidates[{k}]"), p))?;
        if let Some(prev) = k.checked_sub(1).map(|j| &v.candidates[j]) {
            let key =
                |c: &ebb_plan::format::Candidate| (c.value, c.evict_after, c.regenerate_before);
            if key(prev) >= key(c) {
                return Err(mismatch(
                    i,
                    format!("candidates[{k}]"),
                    format!(
                        "value {} evicted after {} until {} is listed out of order or twice \
                         (candidates are sorted by value and window, each window once)",
                        c.value, c.evict_after, c.regenerate_before
                    ),
                ));
            }
        }
    }
    let terms: Vec<DimExpr> = crate::memory::liveness(g, &schedule)
        .symbolic_peak(&g.scope)
        .terms
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    same_list(i, "peak_terms", &v.peak_terms, &terms, DimExpr::to_string)?;
    Ok(())
}

/// `listed` equals `want` entry by entry; `show` prints an entry for the error.
fn same_list<T: PartialEq>(
    i: usize,
    field: &str,
    listed: &[T],
    want: &[T],
    show: impl Fn(&T) -> String,
) -> Result<(), PlanVerifyError> {
    if listed.len() != want.len() {
        return Err(mismatch(
            i,
            field,
            format!("{} entries, the graph gives {}", listed.len(), want.len()),
        ));
    }
    match listed.iter().zip(want).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(k) => Err(mismatch(
            i,
            format!("{field}[{k}]"),
            format!(
                "listed {}, the graph gives {}",
                show(&listed[k]),
                show(&want[k])
            ),
        )),
    }
}

/// Per value id, the points of `schedule` whose op reads it, ascending.
fn reads_by_value(g: &Graph, e: &Expected, schedule: &[NodeId]) -> Vec<Vec<usize>> {
    let mut reads = vec![Vec::new(); e.values.len()];
    for (p, &id) in schedule.iter().enumerate() {
        for r in g.operands(id) {
            if let Some(&pos) = e.pos_of.get(&r.node) {
                let list: &mut Vec<usize> = &mut reads[e.value_id(pos, r.output)];
                if list.last() != Some(&p) {
                    list.push(p);
                }
            }
        }
    }
    reads
}

/// Rule 4 for one candidate whose value is read at the points `reads`; the problem in words.
fn verify_candidate(
    g: &Graph,
    v: &Plan,
    c: &ebb_plan::format::Candidate,
    reads: &[usize],
) -> Result<(), String> {
    let val = &v.values[c.value.index()];
    if val.class != ValueClass::Intermediate {
        return Err(format!("value {} is not an intermediate", c.value));
    }
    if c.kinds.is_empty() || (c.kinds.len() == 2 && c.kinds[0] == c.kinds[1]) || c.kinds.len() > 2 {
        return Err(format!("kinds {:?}", c.kinds));
    }
    if !(val.def <= c.evict_after
        && c.evict_after < c.regenerate_before
        && c.regenerate_before <= val.last_use)
    {
        return Err(format!(
            "window: evict after {} and regenerate before {} must lie in the live range [{}, {}]",
            c.evict_after, c.regenerate_before, val.def, val.last_use
        ));
    }
    let (from, to) = (c.evict_after.index(), c.regenerate_before.index());
    if let Some(p) = reads.iter().find(|&&p| from < p && p < to) {
        return Err(format!(
            "the value is read at point {p}, inside the window ({from}, {to}) it is evicted for"
        ));
    }
    if c.allows(DecisionKind::Swap)
        && !(c.evict_after < c.prefetch_at && c.prefetch_at <= c.regenerate_before)
    {
        return Err(format!(
            "prefetch at {} outside ({}, {}]",
            c.prefetch_at, c.evict_after, c.regenerate_before
        ));
    }
    if c.bytes_saved != val.bytes || c.swap_bytes != val.bytes {
        return Err(format!(
            "bytes saved {} / swapped {}, the value has {}",
            c.bytes_saved, c.swap_bytes, val.bytes
        ));
    }
    if c.allows(DecisionKind::Recompute) {
        let order = g.order();
        if c.recompute.last().map(|p| p.index()) != Some(val.node.index()) {
            return Err("the recompute does not end with the value's producer".into());
        }
        let mut flops = DimExpr::zero();
        for p in &c.recompute {
            let id = order[p.index()];
            let kind = g.node(id).kind();
            if !super::check::pure(kind) {
                return Err(format!("the recompute reruns `{}`", kind.name()));
            }
            flops = flops
                .checked_add(&cost::flops(g, id))
                .map_err(|e| format!("recompute FLOPs: {e}"))?;
        }
        if c.recompute_flops != flops {
            return Err(format!(
                "recompute FLOPs {}, the cost model gives {flops}",
                c.recompute_flops
            ));
        }
    }
    Ok(())
}

/// Rule 4's re-derivation of a candidate's recompute (ops, reads, FLOPs, transient and peak
/// bytes) by the candidate search's rules; the problem in words.
fn verify_recompute(
    g: &Graph,
    idx: &crate::remat::ScheduleIndex,
    c: &ebb_plan::format::Candidate,
) -> Result<(), String> {
    if !c.allows(DecisionKind::Recompute) {
        return if c.recompute.is_empty() && c.recompute_reads.is_empty() {
            Ok(())
        } else {
            Err("a candidate without the recompute kind lists a recompute".into())
        };
    }
    let want = crate::remat::candidates::rederive_recompute(g, idx, c.value, c.regenerate_before)
        .map_err(|e| format!("recompute: {e}"))?
        .ok_or("recompute is listed, but the value cannot be recomputed at this point")?;
    let show = |ops: &[ebb_plan::format::OpPos]| {
        ops.iter()
            .map(|p| format!("#{p}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    if c.recompute != want.ops {
        return Err(format!(
            "recompute reruns ops [{}]; the search derives [{}]",
            show(&c.recompute),
            show(&want.ops)
        ));
    }
    if c.recompute_reads != want.reads {
        return Err(format!(
            "recompute reads values {:?}; the search derives {:?}",
            c.recompute_reads
                .iter()
                .map(|v| v.index())
                .collect::<Vec<_>>(),
            want.reads.iter().map(|v| v.index()).collect::<Vec<_>>()
        ));
    }
    if c.transient_bytes != want.transient_bytes {
        return Err(format!(
            "transient bytes {}, the search derives {}",
            c.transient_bytes, want.transient_bytes
        ));
    }
    if c.regen_peak_bytes.is_some() && c.regen_peak_bytes != want.peak_bytes {
        return Err(format!(
            "regeneration peak {}, the search derives {}",
            c.regen_peak_bytes
                .as_ref()
                .map_or("none".into(), |e| e.to_string()),
            want.peak_bytes
                .as_ref()
                .map_or("none".into(), |e| e.to_string())
        ));
    }
    Ok(())
}

/// Rule 6: thresholds recomputed from variant 0's peak terms.
fn verify_thresholds(g: &Graph, plan: &Plan) -> Result<(), PlanVerifyError> {
    for (k, t) in plan.thresholds.iter().enumerate() {
        let want = threshold_in_scope(&g.scope, &plan.peak_terms, &t.symbol, &t.fixed, t.budget)
            .map_err(|e| mismatch(0, format!("thresholds[{k}]"), e.to_string()))?;
        if &want != t {
            return Err(mismatch(
                0,
                format!("thresholds[{k}]"),
                format!("over {:?}, recomputed {:?}", t.over, want.over),
            ));
        }
    }
    Ok(())
}

/// Rule 5: the checker on every variant at up to three representative bindings; bindings at
/// which a size overflows are skipped, but at least one must be checked.
fn check_at_samples(g: &Graph, plan: &Plan) -> Result<(), PlanVerifyError> {
    let mut checked = 0;
    let mut last_skip = String::from("the scope has no satisfiable binding");
    for b in g.scope.representative_bindings(3) {
        match check_variants_at(g, plan, &b) {
            Ok(()) => checked += 1,
            Err(PlanVerifyError::Check {
                source: CheckError::Overflow | CheckError::Size { .. },
                bindings,
                ..
            }) => last_skip = format!("at {bindings}"),
            Err(e) => return Err(e),
        }
    }
    if checked == 0 {
        return Err(PlanVerifyError::NoBinding(last_skip));
    }
    Ok(())
}

/// Rule 4's host placements: every value of `host_placed` is a result of an
/// `annotate_device_placement` to a host memory kind, and every forced swap names a candidate
/// of such a value that allows a swap.
fn verify_placed(g: &Graph, i: usize, v: &Plan) -> Result<(), PlanVerifyError> {
    let placed = |k: usize| {
        v.values
            .get(k)
            .and_then(|pv| g.order().get(pv.node.index()))
            .is_some_and(|&id| {
                matches!(g.node(id).op, ebb_ir::Op::AnnotateDevicePlacement(m) if m.is_host())
            })
    };
    for (k, val) in v.host_placed.iter().enumerate() {
        if !placed(val.index()) {
            return Err(mismatch(
                i,
                format!("host_placed[{k}]"),
                format!("value {val} is not placed on the host by the graph"),
            ));
        }
    }
    for (k, c) in v.forced_swaps.iter().enumerate() {
        let ok = v.candidates.get(c.index()).is_some_and(|cand| {
            cand.allows(DecisionKind::Swap) && v.host_placed.contains(&cand.value)
        });
        if !ok {
            return Err(mismatch(
                i,
                format!("forced_swaps[{k}]"),
                format!("candidate {c} is not a swap of a value placed on the host"),
            ));
        }
    }
    Ok(())
}
