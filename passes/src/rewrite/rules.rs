//! Building blocks shared by the rule groups: a guarded pattern applier that unions only
//! classes of equal type, pattern and variable helpers.

use super::lang::{union_ids_if_same_type, EbbEGraph, EbbNode, TypeAnalysis};
use ebb_ir::TensorType;
use egg::{Applier, Id, Pattern, PatternAst, Rewrite, Searcher, Subst, Symbol, Var};

/// A rewrite rule of the Ebb language.
pub type Rule = Rewrite<EbbNode, TypeAnalysis>;

/// A guard on a match: the e-graph and the substitution of the left-hand side's variables.
pub type Guard = fn(&EbbEGraph, &Subst) -> bool;

/// Parses a pattern written in this crate (a static string).
///
/// Panics if `s` is not a pattern: rule patterns are constants of this crate, and every
/// group's `rules()` is exercised by the tests.
pub fn pat(s: &str) -> Pattern<EbbNode> {
    s.parse()
        .unwrap_or_else(|e| panic!("rule pattern `{s}` does not parse: {e:?}"))
}

/// The pattern variable `s` (`?x`). Panics on a malformed name (constants of this crate).
pub fn var(s: &str) -> Var {
    s.parse()
        .unwrap_or_else(|e| panic!("pattern variable `{s}` does not parse: {e:?}"))
}

/// Instantiates `rhs` when `guard` holds and unions it with the matched class when both
/// have the same type.
pub struct Guarded {
    rhs: Pattern<EbbNode>,
    guard: Guard,
}

impl Applier<EbbNode, TypeAnalysis> for Guarded {
    fn apply_one(
        &self,
        eg: &mut EbbEGraph,
        eclass: Id,
        subst: &Subst,
        _: Option<&PatternAst<EbbNode>>,
        _: Symbol,
    ) -> Vec<Id> {
        if !(self.guard)(eg, subst) {
            return Vec::new();
        }
        let id = eg.add_instantiation(&self.rhs.ast, subst);
        union_ids_if_same_type(eg, eclass, id)
    }

    fn vars(&self) -> Vec<Var> {
        self.rhs.vars()
    }
}

/// A named rule `lhs => rhs` applied where `guard` holds.
pub fn rule(name: &str, lhs: &str, rhs: &str, guard: Guard) -> Rule {
    rule_with(
        name,
        lhs,
        Guarded {
            rhs: pat(rhs),
            guard,
        },
    )
}

/// A named rule with a custom applier.
pub fn rule_with(
    name: &str,
    lhs: &str,
    applier: impl Applier<EbbNode, TypeAnalysis> + Send + Sync + 'static,
) -> Rule {
    let lhs = pat(lhs);
    debug_assert!(!Searcher::<EbbNode, TypeAnalysis>::vars(&lhs).is_empty() || lhs.ast.len() == 1);
    Rewrite::new(name, lhs, applier).unwrap_or_else(|e| panic!("rule `{name}`: {e}"))
}

/// A guard that always holds.
pub fn always(_: &EbbEGraph, _: &Subst) -> bool {
    true
}

/// The tensor type bound to variable `v`.
pub fn ty<'a>(eg: &'a EbbEGraph, s: &Subst, v: &str) -> Option<&'a TensorType> {
    super::lang::tensor(eg, s[var(v)])
}

/// Whether `?x` and `?y` are tensors of the same type.
pub fn same_type_xy(eg: &EbbEGraph, s: &Subst) -> bool {
    matches!((ty(eg, s, "?x"), ty(eg, s, "?y")), (Some(a), Some(b)) if a == b)
}
