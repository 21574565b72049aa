//! Tests of `dim::atoms` (`ir/src/dim/atoms.rs`).

use ebb_ir::dim::*;

fn p(s: &str) -> DimExpr {
    s.parse().unwrap()
}

#[test]
fn floordiv_rules() {
    assert_eq!(p("4*B + 2").floor_div(2).unwrap(), p("2*B + 1"));
    assert_eq!(
        p("S + 3").floor_div(2).unwrap(),
        p("floordiv(S + 1, 2) + 1")
    );
    assert_eq!(p("2*S").floor_div(4).unwrap(), p("floordiv(S, 2)"));
    assert_eq!(
        p("floordiv(S, 2)").floor_div(3).unwrap(),
        p("floordiv(S, 6)")
    );
    assert_eq!(p("7").floor_div(2).unwrap(), p("3"));
    assert_eq!(p("-7").floor_div(2).unwrap(), p("-4"));
    assert_eq!(p("S").floor_div(1).unwrap(), p("S"));
    assert_eq!(p("mod(S, 4)").floor_div(4).unwrap(), p("0"));
    assert_eq!(p("S").floor_div(0), Err(DimError::NonPositiveDivisor(0)));
    assert_eq!(p("S").floor_div(-2), Err(DimError::NonPositiveDivisor(-2)));
}

#[test]
fn mod_rules() {
    assert_eq!(p("4*B").rem(2).unwrap(), p("0"));
    assert_eq!(p("4*B + 3").rem(2).unwrap(), p("1"));
    assert_eq!(p("-7").rem(3).unwrap(), p("2"));
    assert_eq!(p("2*S").rem(4).unwrap(), p("2*mod(S, 2)"));
    assert_eq!(p("mod(S, 8)").rem(4).unwrap(), p("mod(S, 4)"));
    assert_eq!(p("S + 9").rem(8).unwrap(), p("mod(S + 1, 8)"));
    assert_eq!(p("S").rem(1).unwrap(), p("0"));
    assert_eq!(p("S").rem(0), Err(DimError::NonPositiveDivisor(0)));
}

#[test]
fn min_max_rules() {
    let b = p("B");
    assert_eq!(DimExpr::min(&b, &b), b);
    assert_eq!(DimExpr::min(&b, &p("B + 1")), b);
    assert_eq!(DimExpr::max(&b, &p("B + 1")), p("B + 1"));
    assert_eq!(DimExpr::min(&p("B + 1"), &p("S + 1")), p("min(B, S) + 1"));
    assert_eq!(
        DimExpr::min(&p("B + S"), &p("2*B + S")),
        p("min(B, 2*B) + S")
    );
    assert_eq!(DimExpr::min(&p("min(B, S)"), &p("T")), p("min(B, S, T)"));
    assert_eq!(p("min(B, S)"), p("min(S, B)"));
    assert_eq!(p("max(3, 5, 4)"), p("5"));
    assert_eq!(p("min(B, 4)").to_string(), "min(B, 4)");
    assert!(DimExpr::min_of(&[]).is_none());
}
