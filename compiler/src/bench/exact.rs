//! `ebb bench --exact`: the least-overhead set of decisions meeting the budget at one shape,
//! found by the ILP of `ebb_plan::exact` on the variant the greedy finalized, and the greedy's
//! gap to it.
//!
//! Both sides are priced by the same model, the roofline times of `ebb_plan::cost` on the bench's
//! `--device`: recompute µs = the modelled time of the ops rerun, swap µs = the part of the
//! offload and prefetch that the modelled compute cannot hide (the link shared by all swaps).
//! The step's time is the greedy's modelled step time.
//!
//! Gaps: `greedy_gap` = (greedy overhead − optimum overhead) / (step compute µs + optimum
//! overhead), the greedy's step-time loss against the optimum (target ≤ 0.05);
//! `greedy_over_optimum` = greedy overhead / optimum overhead (absent when the optimum is free).

use ebb_ir::Bindings;
use ebb_pipeline::Pricing;
#[cfg(feature = "exact")]
use ebb_plan::exact::{self, ExactOptions, ExactStatus};
use ebb_plan::finalize::ConcretePlan;
use ebb_plan::format::Plan;
use serde::Serialize;

/// The exact optimum at one shape and the greedy against it.
#[derive(Clone, Debug, Serialize)]
pub struct ExactRow {
    /// `optimal`, `feasible` (time limit hit with an incumbent), `infeasible` or `timed_out`.
    pub status: String,
    /// Relative MIP gap of a `feasible` incumbent.
    pub mip_gap: Option<f64>,
    /// Overhead of the optimum (or incumbent), µs.
    pub optimum_overhead_us: Option<f64>,
    /// `optimum_overhead_us / modelled step µs`.
    pub optimum_overhead_fraction: Option<f64>,
    /// Recompute FLOPs of the optimum.
    pub optimum_recompute_flops: Option<i64>,
    /// Swap bytes of the optimum.
    pub optimum_swap_bytes: Option<i64>,
    /// Peak bytes of the optimum.
    pub optimum_peak_bytes: Option<i64>,
    /// Overhead of the greedy's decisions, µs (absent when the greedy is infeasible).
    pub greedy_overhead_us: Option<f64>,
    /// Step-time gap of the greedy to the optimum (see the module docs).
    pub greedy_gap: Option<f64>,
    /// Greedy overhead / optimum overhead.
    pub greedy_over_optimum: Option<f64>,
    /// ILP size: variables.
    pub variables: usize,
    /// ILP size: constraints.
    pub constraints: usize,
    /// Solve time, ms.
    pub solve_ms: f64,
}

/// Solves at `b` under `budget` bytes on variant `variant` of `plan` and compares with the
/// greedy's finalized plan (`None` when the greedy found the budget infeasible), both priced
/// by `pricing` (device and allowed kinds).
///
/// # Errors
/// The solver's errors (a plan that does not evaluate at `b`, CBC failures), and an unknown
/// variant.
#[cfg(feature = "exact")]
#[allow(clippy::too_many_arguments)]
pub fn exact_row(
    plan: &Plan,
    variant: usize,
    b: &Bindings,
    budget: i64,
    greedy: Option<&ConcretePlan>,
    pricing: &Pricing,
    time_limit_s: f64,
) -> anyhow::Result<ExactRow> {
    let p = plan
        .variant(variant)
        .ok_or_else(|| anyhow::anyhow!("plan variant {variant} does not exist"))?;
    let opts = ExactOptions {
        budget,
        time_limit_s,
        device: pricing.device.clone(),
        kinds: pricing.kinds.clone(),
    };
    // Warm-started from the greedy's decisions, so a time-limited solve is never worse.
    let start = greedy.map(|g| g.decisions.as_slice()).unwrap_or(&[]);
    let r = exact::solve_with_start(p, b, &opts, start)
        .map_err(|e| anyhow::anyhow!("exact solver: {e}"))?;
    let (status, mip_gap, has) = match r.status {
        ExactStatus::Optimal => ("optimal", None, true),
        ExactStatus::Feasible { gap } => ("feasible", Some(gap), true),
        ExactStatus::Infeasible => ("infeasible", None, false),
        ExactStatus::TimedOut => ("timed_out", None, false),
    };
    let step_us = match greedy {
        Some(g) => g.step_us,
        None => ebb_plan::finalize::finalize(plan, b, &pricing.finalize_options(None, false))
            .map_or(0.0, |c| c.step_us),
    };
    let opt = has.then_some(r.overhead_us);
    let greedy_us = greedy.map(|g| g.overhead_us);
    let (greedy_gap, greedy_over_optimum) = match (opt, greedy_us) {
        (Some(o), Some(g)) => (
            Some((g - o) / (step_us + o).max(f64::MIN_POSITIVE)),
            (o > 0.0).then(|| g / o),
        ),
        _ => (None, None),
    };
    Ok(ExactRow {
        status: status.to_string(),
        mip_gap,
        optimum_overhead_us: opt,
        optimum_overhead_fraction: opt.map(|o| o / step_us.max(f64::MIN_POSITIVE)),
        optimum_recompute_flops: has.then_some(r.recompute_flops),
        optimum_swap_bytes: has.then_some(r.swap_bytes),
        optimum_peak_bytes: has.then_some(r.peak_bytes),
        greedy_overhead_us: greedy_us,
        greedy_gap,
        greedy_over_optimum,
        variables: r.variables,
        constraints: r.constraints,
        solve_ms: r.solve_ms,
    })
}

/// Ok when this build has the `exact` feature (CBC); otherwise an error saying how to build
/// `ebb` with it.
pub fn available() -> anyhow::Result<()> {
    if cfg!(feature = "exact") {
        Ok(())
    } else {
        Err(missing())
    }
}

/// The error saying that this build has no ILP solver and how to build one that has.
fn missing() -> anyhow::Error {
    anyhow::anyhow!(
        "--exact needs the ILP solver, which this build of ebb leaves out; rebuild with the \
         `exact` feature (links COIN-OR CBC, Debian's `coinor-libcbc-dev`, which \
         `scripts/setup-debian.sh` installs): \
         `cargo build --release -p ebb-compiler --features exact`"
    )
}

/// Without the `exact` feature: the error of [`available`].
#[cfg(not(feature = "exact"))]
#[allow(clippy::too_many_arguments)]
pub fn exact_row(
    _plan: &Plan,
    _variant: usize,
    _b: &Bindings,
    _budget: i64,
    _greedy: Option<&ConcretePlan>,
    _pricing: &Pricing,
    _time_limit_s: f64,
) -> anyhow::Result<ExactRow> {
    Err(missing())
}
