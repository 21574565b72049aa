//! Rule group `reassociate`: merges the reductions of a gradient-accumulation chain into one
//! reduction of a sum that the graph computes anyway, and removes the full-size negations
//! and reshapes that feed such chains.
//!
//! Why it lowers memory: JAX's backward pass reduces each gradient contribution separately
//! (`add(reduce_sum(dx1), reduce_sum(dx2))`) while also materializing `dx1 + dx2` for the
//! main gradient. Reducing that sum instead drops one reduction result and ends the live
//! ranges of `dx1` and `dx2` at the add; `reduce_sum(negate(x)) -> negate(reduce_sum(x))`
//! replaces a full-size negation by a reduced-size one.
//!
//! Exactness: negation is exact and rounding is symmetric, so `-a + -b == -(a + b)`,
//! `a + -b == a - b` and `sum(-x) == -sum(x)` (same order of additions) hold bit for bit.
//! `sum(x) + sum(y) -> sum(x + y)` reassociates floating-point additions: it is exact in
//! real arithmetic, not bit for bit (as XLA's reduction reassociation).
//!
//! Rules (one direction only, no commutativity; `reduce_k` is a `reduce` whose body is a
//! sum and whose init value is a zero constant):
//! * `reassociate/sum-of-reductions`: `add(reduce_k(x, 0), reduce_k(y, 0)) ->
//!   reduce_k(add(x, y), 0)`, guarded: only when `add(x, y)` or `add(y, x)` is already in
//!   the e-graph (no new full-size tensor is ever created).
//! * `reassociate/reduction-of-negate`: `reduce_k(negate(x), 0) -> negate(reduce_k(x, 0))`.
//! * `reassociate/factor-negate`: `add(negate(x), negate(y)) -> negate(add(x, y))`.
//! * `reassociate/add-negate-rhs`: `add(x, negate(y)) -> subtract(x, y)`; `-lhs` mirrors it.
//! * `reassociate/sink-reshape-add`: `add(reshape_s(x), reshape_s(y)) -> reshape_s(add(x, y))`
//!   when `x` and `y` have the same type (lets the first rule see through JAX's
//!   `reshape(reduce_sum(..))` pairs).
//!
//! Not rewritten: reductions over different dimensions or with other bodies (`max`),
//! non-zero init values, and sums of reductions whose operand sum is not already computed.

use super::lang::{
    is_zero_constant, payload_entry, union_if_same_type, EbbEGraph, EbbNode, TypeAnalysis,
};
use super::rules::{always, rule, rule_with, same_type_xy, var, Rule};
use ebb_ir::OpKind;
use egg::{Applier, Id, PatternAst, Subst, Symbol, Var};

/// Whether `?k` is a sum-reduction body and `?z` a zero constant.
fn sum_from_zero(eg: &EbbEGraph, s: &Subst) -> bool {
    payload_entry(eg, s[var("?k")]).is_some_and(|e| e.is_sum_body)
        && is_zero_constant(eg, s[var("?z")])
}

/// The rules of this group (see the module docs).
pub fn rules() -> Vec<Rule> {
    vec![
        rule_with(
            "reassociate/sum-of-reductions",
            "(add (reduce ?k ?x ?z) (reduce ?k ?y ?z))",
            SumOfReductions,
        ),
        rule(
            "reassociate/reduction-of-negate",
            "(reduce ?k (negate ?x) ?z)",
            "(negate (reduce ?k ?x ?z))",
            sum_from_zero,
        ),
        rule(
            "reassociate/factor-negate",
            "(add (negate ?x) (negate ?y))",
            "(negate (add ?x ?y))",
            always,
        ),
        rule(
            "reassociate/add-negate-rhs",
            "(add ?x (negate ?y))",
            "(subtract ?x ?y)",
            always,
        ),
        rule(
            "reassociate/add-negate-lhs",
            "(add (negate ?y) ?x)",
            "(subtract ?x ?y)",
            always,
        ),
        rule(
            "reassociate/sink-reshape-add",
            "(add (reshape ?s ?x) (reshape ?s ?y))",
            "(reshape ?s (add ?x ?y))",
            same_type_xy,
        ),
    ]
}

/// `add(reduce_k(x, 0), reduce_k(y, 0)) -> reduce_k(s, 0)` where `s` is the existing class
/// of `add(x, y)` or `add(y, x)`.
struct SumOfReductions;

impl Applier<EbbNode, TypeAnalysis> for SumOfReductions {
    fn apply_one(
        &self,
        eg: &mut EbbEGraph,
        eclass: Id,
        s: &Subst,
        _: Option<&PatternAst<EbbNode>>,
        _: Symbol,
    ) -> Vec<Id> {
        if !sum_from_zero(eg, s) || !same_type_xy(eg, s) {
            return Vec::new();
        }
        let (k, x, y, z) = (s[var("?k")], s[var("?x")], s[var("?y")], s[var("?z")]);
        let add = |a, b| EbbNode::Op {
            kind: OpKind::Add,
            copy: 0,
            children: vec![a, b],
        };
        let Some(sum) = eg.lookup(add(x, y)).or_else(|| eg.lookup(add(y, x))) else {
            return Vec::new();
        };
        union_if_same_type(
            eg,
            eclass,
            EbbNode::Op {
                kind: OpKind::Reduce,
                copy: 0,
                children: vec![k, sum, z],
            },
        )
    }

    fn vars(&self) -> Vec<Var> {
        ["?k", "?x", "?y", "?z"].into_iter().map(var).collect()
    }
}
