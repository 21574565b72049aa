//! Names `@main`'s dynamic dimensions by solving JAX's shape checks.
//!
//! A `jax.export` with symbolic shapes computes each dimension variable in `@main` from the
//! input dimensions (`get_dimension_size`, scalar arithmetic, JAX's `@divmod` helper), passes
//! it to a parameter of `@_wrapped_jax_export_main` tagged `jax.global_constant = "B"`, and
//! checks the other input dimensions against their specification with `shape_assertion`
//! custom calls on `EQ` comparisons. Only one dimension carries each variable: with the
//! specifications `x: (4*m, 8)`, `y: (4*m,)`, `m` is `divmod(x.shape[0], 4)` and `y.shape[0]`
//! is only asserted equal to `4*m`; with `tokens: (B, S+1)`, `S` is `tokens.shape[1] - 1`.
//!
//! The scan follows `@main`'s scalar integer computations as [`DimExpr`]s over one unknown
//! per dynamic input dimension, and collects equations (expressions equal to zero):
//! * `divmod(x, k)` with `k > 0` a constant gives a fresh quotient `q` and remainder `r`, with
//!   `x - k*q - r = 0` (the same `(x, k)` gives the same pair);
//! * a value passed to a parameter named `n` gives `n - value = 0`;
//! * an `EQ` comparison that a `shape_assertion` checks gives `lhs - rhs = 0` (the assertion
//!   holds whenever the module runs at all; it is also imported as an assertion and checked).
//!
//! Then, until nothing changes, every equation in exactly one unknown in which that unknown
//! has degree 1 and coefficient ±1, after substituting what is solved, is solved for it: `m`
//! from `m - q = 0`, then the remainder from `r = 0`, then `x = 4*m` from `x - 4*q - r = 0`
//! and `y = 4*m` from `y - 4*q = 0`; `S + 1` from `S - (d - 1) = 0`. Every solution is an
//! expression over the named symbols only.
//!
//! Invariant: every dimension in the result has been derived from equations that hold for
//! every run the module accepts; a dimension the equations do not determine is left out
//! (the importer names it with a placeholder and counts it as unresolved).

use super::func::{key, op_name};
use super::mlir_text::{parse_dense, parse_int, parse_string};
use ebb_ir::{DimExpr, Symbol};
use melior::ir::block::BlockLike;
use melior::ir::operation::OperationLike;
use melior::ir::{BlockRef, OperationRef, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The name of the unknown for dimension `j` of `@main`'s argument `i`. Unknowns' names are
/// not identifiers (they start with a NUL), so they never meet a JAX dimension variable.
fn dim_unknown(i: usize, j: usize) -> Symbol {
    Symbol::new(&format!("\0d{i}_{j}"))
}

fn is_unknown(s: &Symbol) -> bool {
    s.name().starts_with('\0')
}

/// `jax.global_constant` names of the parameters of `func` (None where absent).
pub(super) fn global_constant_args(func: &OperationRef) -> Vec<Option<String>> {
    let Ok(a) = func.attribute("arg_attrs") else {
        return Vec::new();
    };
    a.to_string()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split("}, {")
        .map(|part| {
            let p = part.find("jax.global_constant = ")?;
            let rest = part[p + 22..].trim_end_matches('}');
            let end = rest.find(['}', ','].as_ref()).unwrap_or(rest.len());
            parse_string(&rest[..end])
        })
        .collect()
}

/// Scalar integer values of `@main` and the equations found so far.
#[derive(Default)]
struct Scan {
    vals: HashMap<usize, DimExpr>,
    /// `(dividend, divisor)` -> (quotient, remainder) unknowns of `divmod` calls.
    divmods: BTreeMap<(DimExpr, i64), (DimExpr, DimExpr)>,
    /// `EQ` comparisons not yet seen under a `shape_assertion`: result -> `lhs - rhs`.
    compares: HashMap<usize, DimExpr>,
    equations: Vec<DimExpr>,
}

impl Scan {
    fn get(&self, v: Option<Value>) -> Option<DimExpr> {
        self.vals.get(&key(v?)).cloned()
    }

    fn set(&mut self, o: &OperationRef, k: usize, e: DimExpr) {
        if let Ok(r) = o.result(k) {
            self.vals.insert(key(Value::from(r)), e);
        }
    }
}

/// The dimensions of `@main`'s arguments that JAX's shape checks determine:
/// (argument, dimension) -> an expression over the dimension variables (see the module docs).
/// `funcs` are the module's functions by name (for the callees' `jax.global_constant`s).
pub(super) fn name_dimensions(
    body: &BlockRef,
    funcs: &HashMap<String, OperationRef>,
) -> HashMap<(usize, usize), DimExpr> {
    let mut arg_of: HashMap<usize, usize> = HashMap::new();
    for i in 0..body.argument_count() {
        if let Ok(a) = body.argument(i) {
            arg_of.insert(key(Value::from(a)), i);
        }
    }
    let mut scan = Scan::default();
    let mut op = body.first_operation();
    while let Some(o) = op {
        scan_op(&mut scan, &o, &arg_of, funcs);
        op = o.next_in_block();
    }
    let solved = solve(&scan.equations);
    let mut out = HashMap::new();
    for (u, e) in solved {
        let Some((i, j)) = u
            .name()
            .strip_prefix("\0d")
            .and_then(|s| s.split_once('_'))
            .and_then(|(i, j)| Some((i.parse().ok()?, j.parse().ok()?)))
        else {
            continue;
        };
        out.insert((i, j), e);
    }
    out
}

/// Follows one op of `@main` (see the module docs); ops it does not know leave their results
/// unknown.
fn scan_op(
    scan: &mut Scan,
    o: &OperationRef,
    arg_of: &HashMap<usize, usize>,
    funcs: &HashMap<String, OperationRef>,
) {
    let operand = |k: usize| o.operand(k).ok();
    match op_name(o).as_str() {
        "stablehlo.get_dimension_size" => {
            let d = o
                .attribute("dimension")
                .ok()
                .and_then(|a| parse_int(&a.to_string()));
            if let (Some(&i), Some(d)) = (operand(0).and_then(|v| arg_of.get(&key(v))), d) {
                scan.set(o, 0, DimExpr::symbol(&dim_unknown(i, d as usize)));
            }
        }
        "stablehlo.constant" => {
            let k = o
                .attribute("value")
                .ok()
                .and_then(|a| parse_dense(&a.to_string()))
                .filter(|(_, ty)| ty.dims.iter().all(|d| *d == Some(1)))
                .and_then(|(lit, _)| lit.get_i64(0));
            if let Some(k) = k {
                scan.set(o, 0, DimExpr::constant(k));
            }
        }
        "stablehlo.convert" | "stablehlo.reshape" => {
            if let Some(e) = scan.get(operand(0)) {
                scan.set(o, 0, e);
            }
        }
        "stablehlo.add" | "stablehlo.subtract" | "stablehlo.multiply" => {
            let (Some(a), Some(b)) = (scan.get(operand(0)), scan.get(operand(1))) else {
                return;
            };
            let r = match op_name(o).as_str() {
                "stablehlo.add" => a.checked_add(&b),
                "stablehlo.subtract" => a.checked_sub(&b),
                _ => a.checked_mul(&b),
            };
            if let Ok(r) = r {
                scan.set(o, 0, r);
            }
        }
        "stablehlo.compare" => {
            let dir = o
                .attribute("comparison_direction")
                .map(|a| a.to_string())
                .unwrap_or_default();
            if let (true, Some(a), Some(b), Ok(r)) = (
                dir.contains("EQ"),
                scan.get(operand(0)),
                scan.get(operand(1)),
                o.result(0),
            ) {
                if let Ok(d) = a.checked_sub(&b) {
                    scan.compares.insert(key(Value::from(r)), d);
                }
            }
        }
        "stablehlo.custom_call" => {
            let target = o
                .attribute("call_target_name")
                .ok()
                .and_then(|a| parse_string(&a.to_string()));
            if target.as_deref() == Some("shape_assertion") {
                if let Some(d) = operand(0).and_then(|v| scan.compares.get(&key(v))) {
                    scan.equations.push(d.clone());
                }
            }
        }
        "func.call" => {
            let callee = o
                .attribute("callee")
                .map(|a| a.to_string())
                .unwrap_or_default();
            let callee = callee.trim_start_matches('@');
            if callee == "divmod" {
                let k = scan.get(operand(1)).and_then(|k| k.as_const());
                if let (Some(x), Some(k)) = (scan.get(operand(0)), k.filter(|&k| k > 0)) {
                    let n = scan.divmods.len();
                    let (q, r) = scan
                        .divmods
                        .entry((x.clone(), k))
                        .or_insert_with(|| {
                            let q = DimExpr::symbol(&Symbol::new(&format!("\0q{n}")));
                            let r = DimExpr::symbol(&Symbol::new(&format!("\0r{n}")));
                            (q, r)
                        })
                        .clone();
                    let eq = q
                        .checked_scale(k)
                        .and_then(|kq| x.checked_sub(&kq))
                        .and_then(|e| e.checked_sub(&r));
                    if let Ok(eq) = eq {
                        if !scan.equations.contains(&eq) {
                            scan.equations.push(eq);
                        }
                    }
                    scan.set(o, 0, q);
                    scan.set(o, 1, r);
                }
                return;
            }
            let Some(f) = funcs.get(callee) else {
                return;
            };
            for (i, n) in global_constant_args(f).into_iter().enumerate() {
                // JAX's helpers tag their parameters `jax.global_constant = ""`: no name.
                let (Some(n), Some(v)) = (n.filter(|n| !n.is_empty()), scan.get(operand(i))) else {
                    continue;
                };
                if let Ok(eq) = DimExpr::symbol(&Symbol::new(&n)).checked_sub(&v) {
                    scan.equations.push(eq);
                }
            }
        }
        _ => {}
    }
}

/// Solves `equations` (each equal to zero) for their unknowns, one equation in one unknown
/// of degree 1 with coefficient ±1 at a time, until nothing changes (see the module docs).
/// Every solution mentions named symbols only. Deterministic: the equations are tried in
/// order.
pub fn solve(equations: &[DimExpr]) -> BTreeMap<Symbol, DimExpr> {
    let mut solved: BTreeMap<Symbol, DimExpr> = BTreeMap::new();
    let mut changed = true;
    while changed {
        changed = false;
        for eq in equations {
            let Ok(e) = eq.try_substitute(&solved) else {
                continue;
            };
            let unknowns: BTreeSet<Symbol> = e.symbols().into_iter().filter(is_unknown).collect();
            let Some(u) = unknowns.first().filter(|_| unknowns.len() == 1) else {
                continue;
            };
            let Some(c) = e.poly_coeffs_in(u) else {
                continue;
            };
            let [c0, c1] = c.as_slice() else {
                continue;
            };
            // c0 + c1*u = 0 with c1 = ±1: u = -c1*c0.
            let Some(value) = c1
                .as_const()
                .filter(|k| k.abs() == 1)
                .and_then(|k| c0.checked_scale(-k).ok())
            else {
                continue;
            };
            solved.insert(u.clone(), value);
            changed = true;
        }
    }
    solved
}
