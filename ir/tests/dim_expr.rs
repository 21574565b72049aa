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

#[test]
fn clones_share_their_terms_and_compare_hash_and_print_as_expressions_built_apart() {
    use std::hash::BuildHasher;
    let a: DimExpr = "4*B*S + floordiv(S, 2) - 3".parse().unwrap();
    let b = a.clone();
    let c: DimExpr = "4*B*S + floordiv(S, 2) - 3".parse().unwrap();
    assert_eq!(a.terms_addr(), b.terms_addr());
    assert_ne!(a.terms_addr(), c.terms_addr());
    assert_eq!(a, c);
    assert_eq!(a.cmp(&c), std::cmp::Ordering::Equal);
    let h = std::collections::hash_map::RandomState::new();
    assert_eq!(h.hash_one(&a), h.hash_one(&c));
    assert_eq!(format!("{a:?}"), format!("{c:?}"));
    assert_eq!(a.to_string(), c.to_string());
    // An expression built from a clone leaves the clone's terms as they were.
    let d = b.checked_add(&DimExpr::constant(3)).unwrap();
    assert_eq!(b, a);
    assert_eq!(d, "4*B*S + floordiv(S, 2)".parse::<DimExpr>().unwrap());
}
