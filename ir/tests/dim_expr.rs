//! Tests of `dim::expr` (`ir/src/dim/expr.rs`).

use ebb_ir::dim::*;

fn s(n: &str) -> DimExpr {
    DimExpr::sym(n)
}

#[test]
fn commutative_products_cancel() {
    let d = s("B")
        .checked_mul(&s("S"))
        .unwrap()
        .checked_sub(&s("S").checked_mul(&s("B")).unwrap());
    assert!(d.unwrap().is_zero());
}

#[test]
fn difference_of_squares() {
    let b = s("B");
    let l = b.checked_add(&DimExpr::constant(1)).unwrap();
    let r = b.checked_sub(&DimExpr::constant(1)).unwrap();
    let p = l.checked_mul(&r).unwrap();
    let want = b
        .checked_mul(&b)
        .unwrap()
        .checked_sub(&DimExpr::constant(1))
        .unwrap();
    assert_eq!(p, want);
    assert_eq!(b.checked_pow(2).unwrap(), b.checked_mul(&b).unwrap());
    assert_eq!(b.checked_pow(0).unwrap(), DimExpr::constant(1));
}

#[test]
fn accessors() {
    assert_eq!(DimExpr::constant(0).as_const(), Some(0));
    assert!(DimExpr::constant(0).is_zero());
    assert_eq!(DimExpr::constant(-3).as_const(), Some(-3));
    assert_eq!(s("B").as_symbol(), Some(&Symbol::new("B")));
    assert_eq!(s("B").checked_scale(2).unwrap().as_symbol(), None);
    assert_eq!(s("B").as_const(), None);
    assert!(s("B").is_polynomial());
}

#[test]
fn coefficient_overflow_is_an_error() {
    let big = DimExpr::constant(i64::MAX).checked_mul(&s("B")).unwrap();
    assert_eq!(big.checked_scale(2), Err(DimError::Overflow));
    assert_eq!(big.checked_add(&s("B")), Err(DimError::Overflow));
    assert_eq!(
        DimExpr::constant(i64::MIN).checked_neg(),
        Err(DimError::Overflow)
    );
    // Cancellation inside a product is exact even when partial sums are large.
    let x = big.checked_sub(&big).unwrap();
    assert!(x.is_zero());
}
