//! The exact (optimal) mode: a MILP over the plan's eviction candidates (work in progress).

use ebb_ir::plan::{Decision, DecisionKind, Plan};
use ebb_ir::Bindings;

/// Options of the exact solver. Costs use the same model as the runtime's finalize
/// (`ebb_runtime::finalize::CostModel`): recompute µs = FLOPs / `flops_per_us`; swap µs =
/// max(0, 2 · bytes / `link_bytes_per_us` − compute µs of the eviction window that can
/// overlap the transfers).
#[derive(Clone, Debug)]
pub struct ExactOptions {
    /// Device memory budget in bytes.
    pub budget: i64,
    /// Wall-clock limit of the MILP solve in seconds.
    pub time_limit_s: f64,
    /// Compute throughput in FLOPs per µs.
    pub flops_per_us: f64,
    /// Host link bandwidth in bytes per µs.
    pub link_bytes_per_us: f64,
    /// Decision kinds that may be chosen.
    pub kinds: Vec<DecisionKind>,
}

/// How the solve ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ExactStatus {
    /// Proven optimal (within HiGHS's default relative MIP gap, 1e-4).
    Optimal,
    /// The time limit was hit with an incumbent; `gap` = (incumbent − bound) / incumbent.
    Feasible {
        /// Relative MIP gap of the incumbent.
        gap: f64,
    },
    /// No set of decisions meets the budget.
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
    /// Peak device bytes with the decisions (regeneration transients included).
    pub peak_bytes: i64,
    /// Binary variables of the MILP.
    pub variables: usize,
    /// Constraints of the MILP.
    pub constraints: usize,
    /// Wall-clock time of the MILP solve in ms.
    pub solve_ms: f64,
}

/// Why the exact solver could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExactError {
    /// Not implemented yet.
    #[error("the exact solver is not implemented yet")]
    NotImplemented,
}

/// Solves for the least-overhead set of decisions at concrete bindings `b` on plan `plan`
/// (a variant already chosen: pass `plan.variant(i)`), exactly in the model the checker uses.
///
/// # Errors
/// [`ExactError`].
pub fn solve(_plan: &Plan, _b: &Bindings, _opts: &ExactOptions) -> Result<ExactResult, ExactError> {
    Err(ExactError::NotImplemented)
}
