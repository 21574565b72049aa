//! Builds the MILP of an [`Instance`] with `good_lp` and solves it with CBC (`exact/cbc.rs`): one
//! binary
//! `y_i` per option and one continuous `z` (the exposed transfer time of the swaps, which
//! share the link): minimize `Σ_recompute cost_i·y_i + z` subject to `z ≥ Σ_swap cost_i·y_i`,
//! `z ≥ Σ_swap transfer_i·y_i − step µs` (`crate::cost::exposed_transfer_us`), the memory
//! rows of [`Instance::rows`] and `y_a + y_b <= 1` for every exclusion. The rounded solution is
//! re-checked against the model ([`Instance::peak`]) before it is returned, and zero-cost
//! options that the budget does not need are dropped (the objective cannot tell them apart).

use super::cbc;
use super::model::Instance;
use super::{ExactError, ExactResult, ExactStatus};
use crate::format::{Decision, DecisionKind};
use good_lp::solvers::coin_cbc::coin_cbc;
use good_lp::{variable, Expression, ProblemVariables, SolverModel, Variable};

/// Relative MIP gap at which CBC stops as optimal (tight, so that the optimum is never above a
/// greedy solution by rounding of the gap).
pub const MIP_REL_GAP: f64 = 1e-7;

/// Solves `inst` under `budget` bytes within `time_limit_s` seconds, with `start` as a warm
/// start when it is feasible in the model.
///
/// # Errors
/// [`ExactError::Solver`] when CBC fails or its rounded solution breaks a row.
pub fn solve(
    inst: &Instance,
    budget: i64,
    time_limit_s: f64,
    start: &[Decision],
) -> Result<ExactResult, ExactError> {
    let rows = inst.rows(budget);
    let n = inst.opts.len();
    let none = vec![false; n];
    let empty = |status, variables, constraints, solve_ms| ExactResult {
        status,
        decisions: Vec::new(),
        overhead_us: 0.0,
        recompute_flops: 0,
        swap_bytes: 0,
        peak_bytes: inst.peak(&none).0,
        variables,
        constraints,
        solve_ms,
    };
    if rows.is_empty() {
        return Ok(empty(ExactStatus::Optimal, n, 0, 0.0));
    }
    // A row that stays violated with every option freeing it taken is infeasible outright
    // (CBC would say so too; this also covers models without variables).
    if rows.iter().any(|r| {
        let best: f64 = r.terms.iter().map(|&(_, c)| c.min(0.0)).sum();
        best > r.rhs
    }) {
        return Ok(empty(ExactStatus::Infeasible, n, rows.len(), 0.0));
    }
    let mut vars = ProblemVariables::new();
    let y: Vec<Variable> = (0..n).map(|_| vars.add(variable().binary())).collect();
    let z = vars.add(variable().min(0.0));
    let swaps = || {
        inst.opts
            .iter()
            .zip(&y)
            .filter(|(o, _)| o.kind == DecisionKind::Swap)
    };
    let recompute: Expression = inst
        .opts
        .iter()
        .zip(&y)
        .filter(|(o, _)| o.kind == DecisionKind::Recompute)
        .map(|(o, &v)| o.cost_us * v)
        .sum();
    let alone: Expression = swaps().map(|(o, &v)| o.cost_us * v).sum();
    let transfers: Expression = swaps().map(|(o, &v)| o.transfer_us * v).sum();
    let mut problem = vars.minimise(recompute + z).using(coin_cbc);
    problem.add_constraint(alone.leq(z));
    problem.add_constraint((transfers - inst.step_us).leq(z));
    for r in &rows {
        let lhs: Expression = r.terms.iter().map(|&(i, c)| c * y[i]).sum();
        problem.add_constraint(lhs.leq(r.rhs));
    }
    for &(a, b) in &inst.conflicts {
        problem.add_constraint((y[a] + y[b]).leq(1.0));
    }
    let constraints = rows.len() + inst.conflicts.len() + 2;
    // A start CBC rejects is only a lost hint.
    let start = warm_start(inst, budget, start).map(|x| (y.as_slice(), x));
    let solved = cbc::solve(problem, time_limit_s, Some(MIP_REL_GAP), start)?;
    let (status, solve_ms) = (solved.status, solved.solve_ms);
    match status {
        ExactStatus::Infeasible | ExactStatus::TimedOut => {
            return Ok(empty(status, n, constraints, solve_ms))
        }
        ExactStatus::Optimal | ExactStatus::Feasible { .. } => {}
    }
    let mut taken: Vec<bool> = solved.columns.iter().map(|&x| x > 0.5).collect();
    taken.resize(n, false);
    let (peak, ok) = inst.peak(&taken);
    if !ok || peak > budget {
        return Err(ExactError::Solver(format!(
            "the rounded solution breaks the model (peak {peak} bytes, budget {budget}, exclusions respected: {ok})"
        )));
    }
    drop_free_extras(inst, budget, &mut taken);
    Ok(result(inst, &taken, status, constraints, solve_ms))
}

/// The decisions and totals of `taken`.
fn result(
    inst: &Instance,
    taken: &[bool],
    status: ExactStatus,
    constraints: usize,
    solve_ms: f64,
) -> ExactResult {
    let mut r = ExactResult {
        status,
        decisions: Vec::new(),
        overhead_us: 0.0,
        recompute_flops: 0,
        swap_bytes: 0,
        peak_bytes: inst.peak(taken).0,
        variables: inst.opts.len() + 1,
        constraints,
        solve_ms,
    };
    r.overhead_us = inst.overhead_us(taken);
    for (o, _) in inst.opts.iter().zip(taken).filter(|(_, &t)| t) {
        r.decisions.push(Decision {
            candidate: o.cand,
            kind: o.kind,
        });
        match o.kind {
            DecisionKind::Recompute => r.recompute_flops += o.flops,
            DecisionKind::Swap => r.swap_bytes += o.bytes,
        }
    }
    r
}

/// Drops zero-cost options (swaps hidden behind compute) whose removal keeps the budget: the
/// optimum is not worse (one swap less on the link) and the plan does no needless transfers.
fn drop_free_extras(inst: &Instance, budget: i64, taken: &mut [bool]) {
    for i in 0..taken.len() {
        if taken[i] && inst.opts[i].cost_us == 0.0 {
            taken[i] = false;
            if inst.peak(taken).0 > budget {
                taken[i] = true;
            }
        }
    }
}

/// `start` as a column vector, when it names known options and is feasible in the model.
fn warm_start(inst: &Instance, budget: i64, start: &[Decision]) -> Option<Vec<f64>> {
    if start.is_empty() {
        return None;
    }
    let mut taken = vec![false; inst.opts.len()];
    for d in start {
        let i = inst
            .opts
            .iter()
            .position(|o| o.cand == d.candidate && o.kind == d.kind)?;
        taken[i] = true;
    }
    let (peak, ok) = inst.peak(&taken);
    (ok && peak <= budget).then(|| taken.iter().map(|&t| f64::from(u8::from(t))).collect())
}
