//! The full Checkmate MILP for tiny graphs, to measure how far the plan's candidate space is
//! from the true rematerialization optimum (recompute only, schedule fixed).
//!
//! Jain et al., "Checkmate: Breaking the Memory Wall with Optimal Tensor Rematerialization"
//! (MLSys 2020), §4.1–4.4, in its fixed-schedule ("partitioned") form: stage `t` runs the
//! schedule's op `t` (`R[t,t] = 1`) and may first recompute any earlier op; every op except
//! a graph input may be recomputed (costs from `crate::remat::cost`, µs = FLOPs /
//! `flops_per_us`). Variables: `R[t,i]` (op `i` computed in stage `t`, `i <= t`), `S[t,i]`
//! (op `i`'s results kept from stage `t − 1` into `t`, `i < t`), `FREE[t,i,k]` (op `i`'s
//! results freed after op `k` of stage `t`, for `k = i` or `k` a user of `i`) and `U[t,k]`
//! (bytes after op `k` of stage `t`). Constraints (§4.2, §4.4):
//! * dependencies: `R[t,i] <= R[t,j] + S[t,j]` for every operand producer `j` of `i`;
//! * `S[t+1,i] <= R[t,i] + S[t,i]`; graph outputs are kept to the end;
//! * `FREE[t,i,k] <= R[t,k]`, `<= 1 − S[t+1,i]`, `<= 1 − R[t,j]` for users `j > k` of `i`
//!   (freeing is only allowed after the last use in the stage; the optimizer frees whenever it
//!   may, so the lower bounds of Checkmate's linearization are not needed to minimize);
//! * `U[t,0] = inputs + Σ_i S[t,i]·m_i + R[t,0]·m_0`,
//!   `U[t,k] = U[t,k−1] + R[t,k]·m_k − Σ_{i} m_i·FREE[t,i,k−1]`, `U[t,k] <= budget`.
//!
//! Differences from Ebb's model (`super::model`): an op's results are kept or freed together
//! (`m_i` = all its results), region transients of `while` ops are not counted, and opaque ops
//! (`custom_call`, `while`) are recomputable here; with single-result pure ops and no regions
//! (the MLP fixture) the accounting is the plan checker's. Size: `O(n²)` binaries and
//! `O(n · edges)` free variables for `n` ops, so only for graphs of a few hundred ops.

// Stages, points and options are parallel index spaces; ranges read better than zips here.
#![allow(clippy::needless_range_loop)]

use crate::remat::cost;
use ebb_ir::{Bindings, Graph, NodeId, OpKind};
use ebb_plan::exact::{cbc, ExactError, ExactStatus};
use good_lp::solvers::coin_cbc::{coin_cbc, CoinCbcProblem};
use good_lp::{variable, Expression, ProblemVariables, SolverModel, Variable};
use std::collections::HashMap;

/// Options of [`solve_checkmate`].
#[derive(Clone, Debug)]
pub struct CheckmateOptions {
    /// Device memory budget in bytes.
    pub budget: i64,
    /// Wall-clock limit of the solve in seconds.
    pub time_limit_s: f64,
    /// Compute throughput in FLOPs per µs.
    pub flops_per_us: f64,
}

/// The answer of [`solve_checkmate`].
#[derive(Clone, Debug)]
pub struct CheckmateResult {
    /// How the solve ended.
    pub status: ExactStatus,
    /// Recompute time in µs (ops run more than once).
    pub overhead_us: f64,
    /// Largest `U[t,k]` of the solution, bytes.
    pub peak_bytes: i64,
    /// Ops recomputed (counted once per extra run).
    pub recomputes: usize,
    /// Variables of the MILP.
    pub variables: usize,
    /// Constraints of the MILP.
    pub constraints: usize,
    /// Wall-clock solve time in ms.
    pub solve_ms: f64,
}

/// Solves the full fixed-schedule Checkmate MILP of `g` under `schedule` (non-input ops in
/// execution order) at bindings `b`.
///
/// # Errors
/// [`ExactError::Eval`] when a size or cost does not evaluate; [`ExactError::Plan`] when the
/// schedule is not a topological order of the non-input ops; [`ExactError::Solver`].
pub fn solve_checkmate(
    g: &Graph,
    schedule: &[NodeId],
    b: &Bindings,
    opts: &CheckmateOptions,
) -> Result<CheckmateResult, ExactError> {
    let n = schedule.len();
    let stage: HashMap<NodeId, usize> = schedule
        .iter()
        .enumerate()
        .map(|(i, &id)| (id, i))
        .collect();
    let eval = |what: &str, e: &ebb_ir::DimExpr| {
        e.eval(b).map_err(|source| ExactError::Eval {
            what: what.to_string(),
            expr: e.to_string(),
            source,
        })
    };
    // Inputs are resident throughout, donated ones too: this formulation frees no input, so
    // with donation its optimum bounds the true one from above.
    let mut inputs = 0i64;
    for &id in g.order() {
        if g.node(id).kind() == OpKind::Input {
            for t in &g.node(id).outputs {
                inputs += eval("input size", &t.size_bytes())?;
            }
        }
    }
    let (mut m, mut c) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut deps: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, &id) in schedule.iter().enumerate() {
        let node = g.node(id);
        let mut bytes = 0i64;
        for t in &node.outputs {
            bytes += eval("result size", &t.size_bytes())?;
        }
        m.push(bytes as f64);
        let flops = cost::try_flops(g, id).map_err(|e| ExactError::Plan(e.to_string()))?;
        c.push(eval("flops", &flops)? as f64 / opts.flops_per_us);
        for v in g.operands(id) {
            if g.node(v.node).kind() == OpKind::Input {
                continue;
            }
            let j = *stage.get(&v.node).ok_or_else(|| {
                ExactError::Plan(format!("op at point {i} reads an op outside the schedule"))
            })?;
            if j >= i {
                return Err(ExactError::Plan(format!(
                    "op at point {i} reads the op at point {j}: not a topological order"
                )));
            }
            if !deps[i].contains(&j) {
                deps[i].push(j);
                users[j].push(i);
            }
        }
    }
    let mut is_output = vec![false; n];
    for v in g.outputs() {
        if let Some(&i) = stage.get(&v.node) {
            is_output[i] = true;
        }
    }
    let mut vars = ProblemVariables::new();
    let one = || Expression::from(1.0);
    // R[t][i], i < t (R[t][t] = 1); S[t][i], i < t.
    let r: Vec<Vec<Variable>> = (0..n)
        .map(|t| (0..t).map(|_| vars.add(variable().binary())).collect())
        .collect();
    let s: Vec<Vec<Variable>> = (0..n)
        .map(|t| (0..t).map(|_| vars.add(variable().binary())).collect())
        .collect();
    let rr = |t: usize, i: usize| -> Expression {
        if i == t {
            one()
        } else {
            r[t][i].into()
        }
    };
    // S[t+1][i] with the end of the schedule keeping exactly the outputs.
    let s_next = |t: usize, i: usize| -> Expression {
        if t + 1 == n {
            Expression::from(if is_output[i] { 1.0 } else { 0.0 })
        } else {
            s[t + 1][i].into()
        }
    };
    let mut free: Vec<(usize, usize, usize, Variable)> = Vec::new();
    for t in 0..n {
        for k in 0..=t {
            for i in deps[k].iter().copied().chain([k]) {
                free.push((t, i, k, vars.add(variable().binary())));
            }
        }
    }
    // Columns are numbered in the order variables are added: R, S, FREE, then U.
    let first_u = 2 * (n * n.saturating_sub(1) / 2) + free.len();
    let u: Vec<Vec<Variable>> = (0..n)
        .map(|t| {
            (0..=t)
                .map(|_| vars.add(variable().min(0.0).max(opts.budget as f64)))
                .collect()
        })
        .collect();
    let variables = first_u + n * (n + 1) / 2;
    let mut objective = Expression::from(0.0);
    for t in 0..n {
        for i in 0..t {
            objective += c[i] * r[t][i];
        }
    }
    let mut problem = vars.minimise(objective).using(coin_cbc);
    let mut rows = 0usize;
    let mut add = |p: &mut CoinCbcProblem, cons: good_lp::Constraint| {
        p.add_constraint(cons);
        rows += 1;
    };
    for t in 0..n {
        for i in 0..=t {
            for &j in &deps[i] {
                // j < i <= t, so S[t][j] exists.
                add(&mut problem, rr(t, i).leq(rr(t, j) + s[t][j]));
            }
        }
        for i in 0..t {
            if t + 1 < n {
                add(
                    &mut problem,
                    Expression::from(s[t + 1][i]).leq(rr(t, i) + s[t][i]),
                );
            }
            if is_output[i] {
                add(&mut problem, Expression::from(s[t][i]).eq(1.0));
            }
        }
    }
    for (t, i, k, f) in &free {
        let (t, i, k, f) = (*t, *i, *k, *f);
        add(&mut problem, Expression::from(f).leq(rr(t, k)));
        add(&mut problem, (f + s_next(t, i)).leq(1.0));
        for &j in users[i].iter().filter(|&&j| j > k && j <= t) {
            add(&mut problem, (f + rr(t, j)).leq(1.0));
        }
    }
    let mut freed_after: HashMap<(usize, usize), Expression> = HashMap::new();
    for (t, i, k, f) in &free {
        *freed_after.entry((*t, *k)).or_default() += m[*i] * *f;
    }
    for t in 0..n {
        let mut first = Expression::from(inputs as f64) + m[0] * rr(t, 0);
        for i in 0..t {
            first += m[i] * s[t][i];
        }
        add(&mut problem, Expression::from(u[t][0]).eq(first));
        for k in 1..=t {
            let freed = freed_after.remove(&(t, k - 1)).unwrap_or_default();
            add(
                &mut problem,
                Expression::from(u[t][k]).eq(u[t][k - 1] + m[k] * rr(t, k) - freed),
            );
        }
    }
    let solved = cbc::solve(problem, opts.time_limit_s, None, None)?;
    let mut result = CheckmateResult {
        status: solved.status,
        overhead_us: 0.0,
        peak_bytes: 0,
        recomputes: 0,
        variables,
        constraints: rows,
        solve_ms: solved.solve_ms,
    };
    if solved.columns.is_empty() {
        return Ok(result);
    }
    let col = &solved.columns;
    let at = |k: usize| col.get(k).copied().unwrap_or(0.0);
    let (mut r_col, mut u_col) = (0, first_u);
    for t in 0..n {
        for &ci in &c[..t] {
            if at(r_col) > 0.5 {
                result.overhead_us += ci;
                result.recomputes += 1;
            }
            r_col += 1;
        }
        for _ in 0..=t {
            result.peak_bytes = result.peak_bytes.max(at(u_col).round() as i64);
            u_col += 1;
        }
    }
    Ok(result)
}
