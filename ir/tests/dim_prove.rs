//! Tests of the prover (`ir/src/dim/prove.rs`): normalization, bounds and comparisons under facts.

use ebb_ir::dim::DimOrdering::*;
use ebb_ir::dim::*;

fn p(s: &str) -> DimExpr {
    s.parse().unwrap()
}

/// `B, S >= 1` (S divisible by 8, at most 4096), `X` unconstrained, `W` in `-4..=4`.
fn scope() -> SymbolScope {
    let mut sc = SymbolScope::new();
    sc.declare("B");
    let s = sc.declare("S");
    sc.set_range(&s, None, Some(4096));
    sc.add_divisible(&s, 8);
    sc.declare_range("X", None, None);
    sc.declare_range("W", Some(-4), Some(4));
    sc
}

fn cmp(a: &str, b: &str) -> DimOrdering {
    scope().compare(&p(a), &p(b))
}

#[test]
fn structural_and_constant_comparisons() {
    assert_eq!(cmp("B*S", "S*B"), Equal);
    assert_eq!(cmp("(B+1)*(B-1)", "B*B - 1"), Equal);
    assert_eq!(cmp("B + 1", "B"), Greater);
    assert_eq!(cmp("B", "B + 1"), Less);
    assert_eq!(cmp("3", "5"), Less);
}

#[test]
fn comparisons_from_ranges() {
    assert_eq!(cmp("B", "0"), Greater);
    assert_eq!(cmp("B", "1"), GreaterEq);
    assert_eq!(cmp("768*B*S", "3072*B*S"), Less);
    assert_eq!(cmp("S", "4096"), LessEq);
    assert_eq!(cmp("S", "8"), GreaterEq); // divisibility tightens S >= 1 to S >= 8
    assert_eq!(cmp("S", "7"), Greater);
    assert_eq!(cmp("B", "S"), Unknown);
    assert_eq!(cmp("X", "0"), Unknown);
    assert_eq!(cmp("W*W", "0"), GreaterEq);
    assert_eq!(cmp("W*W", "16"), LessEq);
}

#[test]
fn shift_certificate_proves_products() {
    assert_eq!(cmp("B*S", "S"), GreaterEq);
    assert_eq!(cmp("B*S + 1", "S"), Greater);
    assert_eq!(cmp("B*B*S", "B*S"), GreaterEq);
    assert_eq!(cmp("4*B*S*768 + 2*B*S", "S*768"), Greater);
    assert_eq!(cmp("B*S", "B + S - 1"), GreaterEq); // (B-1)(S-1) >= 0
    assert_eq!(cmp("B*S", "B + S"), Unknown);
    assert_eq!(cmp("4096*B", "B*S"), GreaterEq); // S <= 4096
}

#[test]
fn min_max_floordiv_mod() {
    assert_eq!(cmp("min(B, S)", "B"), LessEq);
    assert_eq!(cmp("max(B, S)", "S"), GreaterEq);
    assert_eq!(cmp("min(B, S)", "max(B, S)"), LessEq);
    assert_eq!(cmp("B*min(S, 512)", "B*S"), LessEq);
    assert_eq!(cmp("min(B, S) + 1", "B + S"), Less); // S >= 8
    assert_eq!(cmp("min(B, S) + 1", "B + B"), LessEq);
    assert_eq!(cmp("floordiv(B, 2)", "B"), Less);
    assert_eq!(cmp("2*floordiv(B, 2)", "B"), LessEq);
    assert_eq!(cmp("2*floordiv(B, 2) + 1", "B"), GreaterEq);
    assert_eq!(cmp("mod(B, 8)", "8"), Less);
    assert_eq!(cmp("mod(B, 8)", "B"), LessEq);
    assert_eq!(cmp("mod(B, 8) + 8*floordiv(B, 8)", "B"), Equal);
    assert_eq!(cmp("floordiv(B + 7, 8)*8", "B"), GreaterEq);
    assert_eq!(cmp("floordiv(S, 8)*8", "S"), Equal); // S % 8 == 0
}

#[test]
fn normalize_uses_facts() {
    let mut sc = scope();
    let n = |sc: &SymbolScope, s: &str| sc.normalize(&p(s)).to_string();
    assert_eq!(n(&sc, "floordiv(2*S, 2)"), "S");
    assert_eq!(n(&sc, "mod(S, 4)"), "0");
    assert_eq!(n(&sc, "mod(B, 4)"), "mod(B, 4)");
    assert_eq!(n(&sc, "2*floordiv(S, 2)"), "S");
    assert_eq!(n(&sc, "floordiv(S + 8*B, 8)*8"), "8*B + S");
    assert_eq!(n(&sc, "min(B, B + 1)"), "B");
    assert_eq!(n(&sc, "min(B*S, S)"), "S");
    assert_eq!(n(&sc, "max(B*S, S, 1)"), "B*S");
    assert_eq!(n(&sc, "min(S, 4096)"), "S");
    assert_eq!(n(&sc, "floordiv(S, 8192)"), "0");
    assert_eq!(n(&sc, "mod(W + 4, 9)"), "W + 4");
    assert_eq!(n(&sc, "min(B, S)"), "min(B, S)");
    let t = sc.declare("T");
    sc.add_equality(&t, p("2*B"));
    assert_eq!(n(&sc, "T*S - B*S"), "B*S");
    assert_eq!(sc.compare(&p("T"), &p("B")), Greater);
    assert!(sc.prove_eq(&p("floordiv(T, 2)"), &p("B")));
}

#[test]
fn bounds_are_tight_for_simple_cases() {
    let sc = scope();
    assert_eq!(sc.bounds(&p("S")), (Some(8), Some(4096)));
    assert_eq!(sc.bounds(&p("2*S + 1")), (Some(17), Some(8193)));
    assert_eq!(sc.bounds(&p("B")), (Some(1), None));
    assert_eq!(sc.bounds(&p("-B")), (None, Some(-1)));
    assert_eq!(sc.bounds(&p("mod(B, 8)")), (Some(0), Some(7)));
    assert_eq!(sc.bounds(&p("W*W - 2*W")), (Some(-8), Some(24)));
    assert_eq!(sc.bounds(&p("X")), (None, None));
    assert_eq!(sc.bounds(&p("min(B, 3)")), (Some(1), Some(3)));
}

#[test]
fn prove_helpers() {
    let sc = scope();
    assert!(sc.prove_le(&p("B"), &p("B*S")));
    assert!(sc.prove_lt(&p("B"), &p("B*S"))); // S >= 8
    assert!(sc.prove_le(&p("B"), &p("B*B")));
    assert!(!sc.prove_lt(&p("B"), &p("B*B")));
    assert!(sc.prove_lt(&p("B"), &p("B*S + 1")));
    assert!(sc.prove_eq(&p("B*S"), &p("S*B")));
    assert!(!sc.prove_eq(&p("B"), &p("S")));
}

#[test]
fn undeclared_symbols_are_unconstrained() {
    let sc = SymbolScope::new();
    assert_eq!(sc.compare(&p("Q"), &p("0")), Unknown);
    assert_eq!(sc.compare(&p("Q*Q"), &p("0")), GreaterEq);
    assert_eq!(sc.compare(&p("Q*Q + 1"), &p("0")), Greater);
}

#[test]
fn contradictory_facts_do_not_panic() {
    let mut sc = SymbolScope::new();
    let b = sc.declare("B");
    sc.set_range(&b, Some(10), Some(2));
    let _ = sc.compare(&p("B*B - B"), &p("3"));
    let _ = sc.bounds(&p("floordiv(B, 3) + mod(B, 4)"));
    assert!(sc.check(&[(b, 5)].into_iter().collect()).is_err());
}

#[test]
fn huge_coefficients_do_not_panic() {
    let sc = scope();
    let big = p("9223372036854775807*B");
    assert_eq!(sc.compare(&big, &p("-9223372036854775807*S")), Greater);
    assert_eq!(sc.compare(&big, &p("-9223372036854775807*B - 5")), Unknown); // difference overflows
    let _ = sc.bounds(&p("9223372036854775807*B*B*S*S - 9223372036854775807*S"));
    let _ = sc.normalize(&p("min(9223372036854775807*B, -9223372036854775807*B)"));
}
