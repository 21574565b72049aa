//! Tests of `dim::eval` (`ir/src/dim/eval.rs`).

use ebb_ir::dim::*;
use std::collections::BTreeMap;

use ebb_ir::BindingsExt;

fn p(s: &str) -> DimExpr {
    s.parse().unwrap()
}

#[test]
fn eval_values() {
    let b = Bindings::from_pairs(&[("B", 3), ("S", 10)]);
    assert_eq!(p("4*B*S + 12").eval(&b), Ok(132));
    assert_eq!(p("floordiv(S - 13, 4)").eval(&b), Ok(-1));
    assert_eq!(p("mod(S - 13, 4)").eval(&b), Ok(1));
    assert_eq!(p("min(B, S, 5) + max(B, 2)").eval(&b), Ok(6));
    assert_eq!(p("B*T").eval(&b), Err(DimError::Unbound("T".into())));
}

#[test]
fn eval_overflow_is_an_error() {
    let b = Bindings::from_pairs(&[("B", i64::MAX)]);
    assert_eq!(p("B + 1").eval(&b), Err(DimError::Overflow));
    assert_eq!(p("B*B*B*B*B").eval(&b), Err(DimError::Overflow));
    // Intermediates may exceed i64 as long as the result fits.
    assert_eq!(p("2*B - B").eval(&b), Ok(i64::MAX));
}

#[test]
fn symbols_and_substitution() {
    let e = p("B*S + floordiv(T, 2)");
    let names: Vec<_> = e.symbols().iter().map(|s| s.name().to_string()).collect();
    assert_eq!(names, ["B", "S", "T"]);
    let map = BTreeMap::from([(Symbol::new("T"), p("2*B")), (Symbol::new("S"), p("B"))]);
    assert_eq!(e.substitute(&map), p("B*B + B"));
    let big = BTreeMap::from([(Symbol::new("B"), p("9223372036854775807*S"))]);
    assert_eq!(p("2*B").try_substitute(&big), Err(DimError::Overflow));
}

#[test]
fn polynomial_structure() {
    let b = Symbol::new("B");
    let e = p("3*B*B*S + B + S + 1");
    assert_eq!(e.degree_in(&b), Some(2));
    assert_eq!(
        e.poly_coeffs_in(&b),
        Some(vec![p("S + 1"), p("1"), p("3*S")])
    );
    assert_eq!(p("S").poly_coeffs_in(&b), Some(vec![p("S")]));
    assert_eq!(p("floordiv(B, 2) + S").degree_in(&b), None);
    assert_eq!(p("floordiv(B, 2) + S").poly_coeffs_in(&b), None);
    assert_eq!(p("floordiv(S, 2)*B").degree_in(&b), Some(1));
}
