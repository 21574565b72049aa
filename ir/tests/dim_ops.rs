//! Tests of `dim::ops` (`ir/src/dim/ops.rs`).

use ebb_ir::dim::*;

#[test]
fn operators() {
    let b = DimExpr::sym("B");
    let s = DimExpr::sym("S");
    assert!((&b * &s - &s * &b).is_zero());
    assert_eq!((&b + 1) * (&b - 1), &b * &b - 1);
    assert_eq!(-(&b) + 3, DimExpr::constant(3) - &b);
    let mut x = b.clone();
    x += 2;
    x *= 3;
    x -= &b;
    assert_eq!(x, b.clone() * 2 + 6);
    let v = [b.clone(), s.clone(), DimExpr::from(4)];
    assert_eq!(v.iter().sum::<DimExpr>(), &b + &s + 4);
    assert_eq!(v.iter().product::<DimExpr>(), &b * &s * 4);
    assert_eq!(
        v.into_iter().product::<DimExpr>(),
        DimExpr::from(Symbol::new("B")) * &s * 4
    );
    assert_eq!(
        std::iter::empty::<DimExpr>().product::<DimExpr>(),
        DimExpr::from(1)
    );
}

#[test]
#[should_panic(expected = "overflow")]
fn operator_overflow_panics() {
    let _ = DimExpr::sym("B") * i64::MAX * 2;
}
