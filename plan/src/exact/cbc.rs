//! Solving a `good_lp` model with COIN-OR CBC (the Debian package `coinor-libcbc-dev`, linked
//! through `coin_cbc`): time limit, relative MIP gap, optional start, quiet log, and the
//! outcome mapped onto [`ExactStatus`] with the solution's columns.
//!
//! Invariant: a solution is returned only with an incumbent (CBC's objective is finite); a solve
//! stopped by the time limit without one is [`ExactStatus::TimedOut`] with no columns.

use super::{ExactError, ExactStatus};
use coin_cbc::raw::SecondaryStatus;
use good_lp::solvers::coin_cbc::CoinCbcProblem;
use good_lp::solvers::{SolutionStatus, WithInitialSolution, WithMipGap};
use good_lp::{ResolutionError, SolverModel, Variable};
use std::time::Instant;

/// CBC's objective value when it has no solution (its `COIN_DBL_MAX`-like sentinel is 1e50).
const NO_SOLUTION: f64 = 1e49;

/// What one CBC solve gave.
pub struct Solved {
    /// Optimal (within the gap), feasible at the time limit, infeasible or timed out.
    pub status: ExactStatus,
    /// The value of every column (in the order the variables were added); empty unless the
    /// status is optimal or feasible.
    pub columns: Vec<f64>,
    /// Wall time of the solve, ms.
    pub solve_ms: f64,
}

impl Solved {
    /// An outcome without a solution (infeasible, timed out).
    fn without_columns(status: ExactStatus, solve_ms: f64) -> Solved {
        Solved {
            status,
            columns: Vec::new(),
            solve_ms,
        }
    }
}

/// Solves `problem` within `time_limit_s` seconds (CBC takes whole seconds: rounded up, at
/// least 1), stopping as optimal at relative gap `mip_gap`, from `start` when given: the
/// problem's variables in column order (all of them) and their values, a hint CBC may drop,
/// which must be feasible in the model.
///
/// Errors: [`ExactError::Solver`] when CBC abandons the solve or reports the model unbounded.
pub fn solve(
    mut problem: CoinCbcProblem,
    time_limit_s: f64,
    mip_gap: Option<f64>,
    start: Option<(&[Variable], Vec<f64>)>,
) -> Result<Solved, ExactError> {
    problem.set_log_level(0);
    // CBC 2.10's integer preprocessing returned a wrong "proven optimal" on small models of
    // this kind (a proptest case in proptest-regressions/exact/tests.txt: 20 µs where 18 µs
    // is feasible); the models are small enough to solve without it.
    problem.set_parameter("preprocess", "off");
    let secs = time_limit_s.ceil().max(1.0);
    problem.set_parameter("sec", &format!("{secs}"));
    if let Some(gap) = mip_gap {
        problem = problem
            .with_mip_gap(gap as f32)
            .map_err(|e| ExactError::Solver(format!("MIP gap {gap}: {e}")))?;
    }
    let mut start_columns = None;
    if let Some((vars, x)) = start {
        problem = problem.with_initial_solution(vars.iter().copied().zip(x.iter().copied()));
        start_columns = Some(x);
    }
    let t0 = Instant::now();
    let outcome = problem.solve();
    let solve_ms = t0.elapsed().as_secs_f64() * 1e3;
    let sol = match outcome {
        Ok(sol) => sol,
        Err(ResolutionError::Infeasible) => {
            return Ok(Solved::without_columns(ExactStatus::Infeasible, solve_ms))
        }
        Err(e) => return Err(ExactError::Solver(format!("CBC: {e}"))),
    };
    let raw = sol.model();
    // CBC 2.10 reports "no solution better than the cutoff" as a finished, "optimal" solve
    // with this secondary status (good_lp's mapping misses it): the root relaxation is
    // infeasible, or — with a start, which sets the cutoff — nothing beats the start, which is
    // then the optimum (callers pass only starts feasible in the model).
    let no_better = raw.secondary_status() == SecondaryStatus::LinearRelaxationInfeasible;
    if no_better || raw.is_proven_infeasible() {
        return Ok(match start_columns {
            Some(columns) if no_better => Solved {
                status: ExactStatus::Optimal,
                columns,
                solve_ms,
            },
            _ => Solved::without_columns(ExactStatus::Infeasible, solve_ms),
        });
    }
    let objective = raw.obj_value();
    let incumbent = objective.is_finite() && objective.abs() < NO_SOLUTION;
    let status = match good_lp::Solution::status(&sol) {
        SolutionStatus::Optimal | SolutionStatus::GapLimit => ExactStatus::Optimal,
        SolutionStatus::TimeLimit if incumbent => {
            let bound = raw.best_possible_value();
            let gap = if objective.abs() > 0.0 && bound.is_finite() {
                ((objective - bound) / objective.abs()).clamp(0.0, 1.0)
            } else {
                1.0
            };
            ExactStatus::Feasible { gap }
        }
        SolutionStatus::TimeLimit => {
            return Ok(Solved::without_columns(ExactStatus::TimedOut, solve_ms))
        }
    };
    if !incumbent {
        return Err(ExactError::Solver(format!(
            "CBC finished without a solution (objective {objective})"
        )));
    }
    Ok(Solved {
        status,
        columns: raw.col_solution().to_vec(),
        solve_ms,
    })
}
