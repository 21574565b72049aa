//! The exact (optimal) mode: the least-overhead set of evict/regenerate decisions that meets a
//! memory budget, as a mixed-integer linear program (MILP) solved by COIN-OR CBC (through
//! `good_lp`; `exact/cbc.rs`).
//!
//! # Formulation
//! After Checkmate (Jain et al., "Checkmate: Breaking the Memory Wall with Optimal Tensor
//! Rematerialization", MLSys 2020, §4 "Optimal rematerialization"): binary decisions, a linear
//! cost of the recomputation, and one memory constraint per program point bounding the resident
//! bytes by the budget. Ebb's version differs in three ways:
//! 1. *Fixed schedule.* Checkmate's `R[t, i]` (recompute op `i` in stage `t`) and `S[t, i]`
//!    (keep `i` resident into stage `t`) range over every (stage, op) pair and choose the
//!    recomputation schedule too. Here the schedule is the plan's, and every value keeps its
//!    baseline live range unless a decision evicts it.
//! 2. *Candidate space.* The only choices are the plan's candidates (`crate::format::Candidate`:
//!    one window between two consecutive touches of a value, with a fixed recompute
//!    subgraph over values that stay resident), so there is one binary per (candidate, kind)
//!    instead of `O(n²)`; the optimum is the optimum *over the candidates*, the same decision
//!    space as the runtime's greedy finalize, not over all rematerialization schedules.
//! 3. *Swap.* A candidate can also be offloaded to host memory and prefetched back (Checkmate
//!    only recomputes), priced as the transfer time the window's compute cannot hide.
//!
//! The memory rows count exactly what the independent plan checker (`ebb_passes::plan::check`)
//! counts, regeneration peaks included, so the optimum's peak is the checker's peak; pairs of
//! decisions the checker rejects together are excluded. See [`model`] for the rows, their
//! reduction to the points over budget (exact, since decisions only subtract bytes) and the
//! exclusions; [`milp`] for the solver call. `ebb_passes::exact::checkmate` is the full
//! fixed-schedule Checkmate MILP (every op recomputable), for tiny graphs only, to measure what
//! the candidate restriction costs; the tests of this module, which build plans with the
//! passes' plan builder, are in `ebb_passes::exact` too.
//!
//! Costs use finalize's model, the roofline time model of [`crate::cost`] on
//! [`ExactOptions::device`]: recompute µs = the modelled time of the ops it reruns; swap µs =
//! max(0, 2 · bytes / link bandwidth − modelled µs of the points the value is off the device),
//! i.e. offload plus reload minus the compute that hides them.

pub mod cbc;
pub mod milp;
pub mod model;

use crate::device::DeviceProfile;
use crate::format::{Decision, DecisionKind, Plan};
use ebb_ir::dim::DimError;
use ebb_ir::Bindings;

/// Options of the exact solver. Costs use the same model as finalize (the
/// roofline model of `crate::cost` on `device`).
#[derive(Clone, Debug)]
pub struct ExactOptions {
    /// Device memory budget in bytes.
    pub budget: i64,
    /// Wall-clock limit of the MILP solve in seconds.
    pub time_limit_s: f64,
    /// The device whose modelled times price the decisions.
    pub device: DeviceProfile,
    /// Decision kinds that may be chosen.
    pub kinds: Vec<DecisionKind>,
}

/// How the solve ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ExactStatus {
    /// Proven optimal (relative MIP gap at most [`milp::MIP_REL_GAP`]).
    Optimal,
    /// The time limit was hit with an incumbent; `gap` = (incumbent − bound) / incumbent.
    Feasible {
        /// Relative MIP gap of the incumbent.
        gap: f64,
    },
    /// No set of decisions over the plan's candidates meets the budget.
    Infeasible,
    /// The time limit was hit without any incumbent.
    TimedOut,
}

/// The solver's answer.
#[derive(Clone, Debug)]
pub struct ExactResult {
    /// How the solve ended.
    pub status: ExactStatus,
    /// The chosen decisions, in candidate order (empty unless `Optimal` / `Feasible`).
    pub decisions: Vec<Decision>,
    /// Overhead of the decisions in µs (the cost model of [`ExactOptions`]).
    pub overhead_us: f64,
    /// FLOPs spent recomputing.
    pub recompute_flops: i64,
    /// Bytes offloaded (each also reloaded).
    pub swap_bytes: i64,
    /// Peak device bytes with the decisions, as the plan checker counts them (regeneration
    /// peaks included); the peak without decisions when there is no incumbent.
    pub peak_bytes: i64,
    /// Binary variables of the MILP.
    pub variables: usize,
    /// Constraints (rows) of the MILP.
    pub constraints: usize,
    /// Wall-clock time of the MILP solve in ms (model building excluded).
    pub solve_ms: f64,
}

/// Why the exact solver could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExactError {
    /// A size, cost or claim of the plan does not evaluate at the bindings.
    #[error("cannot evaluate {what} `{expr}`: {source}")]
    Eval {
        /// The plan field.
        what: String,
        /// The expression.
        expr: String,
        /// Why.
        source: DimError,
    },
    /// A byte count overflows `i64`.
    #[error("byte count overflows i64")]
    Overflow,
    /// The plan is malformed (an index out of range).
    #[error("invalid plan: {0}")]
    Plan(String),
    /// Invalid options (non-positive throughput or time limit).
    #[error("invalid options: {0}")]
    Options(String),
    /// CBC failed (abandoned the solve, or found the model unbounded) or returned a solution that does not
    /// meet the model's rows after rounding.
    #[error("MILP solver: {0}")]
    Solver(String),
}

/// Solves for the least-overhead set of decisions at concrete bindings `b` on plan `plan`
/// (a variant already chosen: pass `plan.variant(i)`), exactly in the model the checker uses.
///
/// # Errors
/// [`ExactError::Eval`] / [`ExactError::Overflow`] / [`ExactError::Plan`] for a plan that does
/// not evaluate at `b`, [`ExactError::Options`], [`ExactError::Solver`]. An infeasible budget
/// or a time-out is a status, not an error.
pub fn solve(plan: &Plan, b: &Bindings, opts: &ExactOptions) -> Result<ExactResult, ExactError> {
    solve_with_start(plan, b, opts, &[])
}

/// [`solve`] with a warm start: `start` (e.g. the greedy finalize's decisions) is offered to
/// CBC as the first incumbent when it is feasible in the model, so a time-limited solve is
/// never worse than it. Decisions naming options the model does not have are ignored.
///
/// # Errors
/// As [`solve`].
pub fn solve_with_start(
    plan: &Plan,
    b: &Bindings,
    opts: &ExactOptions,
    start: &[Decision],
) -> Result<ExactResult, ExactError> {
    if !opts.device.is_valid() {
        return Err(ExactError::Options(format!(
            "device `{}`: every throughput must be positive and finite",
            opts.device.name
        )));
    }
    if opts.time_limit_s.is_nan() || opts.time_limit_s < 0.0 {
        return Err(ExactError::Options(format!(
            "time limit {} s",
            opts.time_limit_s
        )));
    }
    let prices = model::Prices {
        device: opts.device.clone(),
        kinds: opts.kinds.clone(),
    };
    let inst = model::Instance::new(plan, b, &prices)?;
    milp::solve(&inst, opts.budget, opts.time_limit_s, start)
}
