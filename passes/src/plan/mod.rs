//! Plan building and the independent plan checker.
//!
//! * [`build_plan`]: assembles the [`Plan`] of a graph under a schedule: the value table and
//!   candidates of [`crate::remat`], the region transients and pruned symbolic peak terms of
//!   [`crate::memory`], and the requested budget thresholds.
//! * [`mod@check`]: the independent checker (see its module docs); `derive.rs` is its own
//!   dataflow, shared with nothing else.
//! * [`mod@verify`]: verification of a plan read from a file against its embedded graph.
//!
//! Invariant: a plan from [`build_plan`] passes [`check::check`] at every binding that
//! satisfies the graph's facts, with no decision and with any subset of its candidates taken
//! as any kind they allow.

pub mod check;
mod derive;
mod error;
mod pass;
pub mod verify;

pub use check::{check, resident_bytes, CheckError, CheckReport, Checker};
pub use pass::PlanPass;
pub use verify::{
    check_stamped_structure, check_variants_at, check_variants_each, check_variants_keeping,
    verify_plan, PlanVerifyError,
};

use crate::memory::{self, Schedule};
use crate::remat::threshold::{threshold_in_scope, ThresholdError};
use crate::remat::OffloadPolicy;
use crate::remat::{self, CandidateOptions, RematError};
use crate::schedule::pin_placements;
use ebb_ir::{Bindings, Graph, NodeId, Symbol, ValueId, ValueRef};
use ebb_plan::format::{CandidateId, InPlaceWrite, Plan, PointBytes, PLAN_VERSION};

/// A budget threshold to precompute: where the peak exceeds `budget` bytes as a function of
/// `symbol`, the other symbols fixed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThresholdQuery {
    /// The free symbol.
    pub symbol: Symbol,
    /// Values of the other symbols.
    pub fixed: Bindings,
    /// Budget in bytes.
    pub budget: i64,
}

/// Options of [`build_plan`].
#[derive(Clone, Debug, Default)]
pub struct PlanOptions {
    /// Candidate search knobs.
    pub candidates: CandidateOptions,
    /// Bindings the plan is specialized for (recorded in [`Plan::bound`]).
    pub bind: Option<Bindings>,
    /// Thresholds to precompute.
    pub thresholds: Vec<ThresholdQuery>,
}

/// Errors of [`build_plan`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    /// Invalid schedule or overflow in the candidate search.
    #[error(transparent)]
    Remat(#[from] RematError),
    /// A requested threshold cannot be computed.
    #[error("threshold: {0}")]
    Threshold(#[from] ThresholdError),
}

/// The in-place writes ([`ebb_ir::op::in_place_writes`]) of the ops of `schedule` in its
/// order, as (operand, result) value ids under the numbering `value_id`.
pub(crate) fn in_place_writes(
    g: &Graph,
    schedule: &[NodeId],
    value_id: impl Fn(ValueRef) -> usize,
) -> Vec<(usize, usize)> {
    let in_place = ebb_ir::op::in_place_writes(g);
    let mut out = Vec::new();
    for &id in schedule {
        let ins = g.operands(id);
        for w in in_place.get(&id).into_iter().flatten() {
            if let Some(&v) = ins.get(w.operand) {
                out.push((value_id(v), value_id(ValueRef::new(id, w.result as u32))));
            }
        }
    }
    out
}

/// Builds the plan of `g` under `schedule` (non-input ops in execution order), with the
/// user's placements pinned in it ([`pin_placements`]) unless the offload policy ignores them.
///
/// # Errors
/// [`BuildError::Remat`] for an invalid schedule or overflow; [`BuildError::Threshold`] when a
/// requested threshold's terms are not polynomial in its symbol or leave a symbol unbound.
pub fn build_plan(g: &Graph, schedule: &Schedule, opts: &PlanOptions) -> Result<Plan, BuildError> {
    let pinned;
    let schedule = if opts.candidates.offload == OffloadPolicy::Ignore {
        schedule
    } else {
        pinned = pin_placements(g, schedule);
        &pinned
    };
    let (idx, found) = remat::find_candidates(g, schedule, &opts.candidates)?;
    let live = memory::liveness(g, schedule);
    let peak_terms: Vec<_> = live
        .symbolic_peak(&g.scope)
        .terms
        .into_iter()
        .map(|(e, _)| e)
        .collect();
    let region_transients = live
        .transients
        .iter()
        .map(|t| PointBytes {
            point: t.point,
            bytes: t.bytes.clone(),
        })
        .collect();
    let thresholds = opts
        .thresholds
        .iter()
        .map(|q| threshold_in_scope(&g.scope, &peak_terms, &q.symbol, &q.fixed, q.budget))
        .collect::<Result<Vec<_>, _>>()?;
    let in_place_writes = in_place_writes(g, schedule, |v| idx.value_id(v).index())
        .into_iter()
        .map(|(operand, result)| InPlaceWrite {
            operand: ValueId::new(operand),
            result: ValueId::new(result),
        })
        .collect();
    Ok(Plan {
        version: PLAN_VERSION,
        graph_name: g.name.clone(),
        symbols: g.scope.clone(),
        assertions: g.assertions.clone(),
        ops: g.order().len(),
        schedule: idx.schedule_positions(),
        graph_ir: None,
        graph_digest: None,
        alternatives: Vec::new(),
        kernels: Vec::new(),
        point_flops: Some(
            schedule
                .iter()
                .map(|&id| remat::cost::flops(g, id))
                .collect(),
        ),
        point_bytes: Some(
            schedule
                .iter()
                .map(|&id| remat::cost::bytes_accessed(g, id))
                .collect(),
        ),
        point_kinds: Some(
            schedule
                .iter()
                .map(|&id| remat::cost::compute_kind(g, id))
                .collect(),
        ),
        device: None,
        values: idx.values().to_vec(),
        region_transients,
        in_place_writes,
        candidates: found.candidates,
        forced_swaps: found.forced.into_iter().map(CandidateId::new).collect(),
        host_placed: found.placed,
        bound: opts.bind.clone(),
        peak_terms,
        thresholds,
    })
}
