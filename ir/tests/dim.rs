//! Tests of `dim` (`ir/src/dim/mod.rs`).

use ebb_ir::dim::*;

#[test]
fn ordering_helpers() {
    assert_eq!(DimOrdering::Less.reverse(), DimOrdering::Greater);
    assert_eq!(DimOrdering::Unknown.reverse(), DimOrdering::Unknown);
    assert!(DimOrdering::Equal.is_le() && DimOrdering::Equal.is_ge());
    assert!(!DimOrdering::Unknown.is_le());
}

#[test]
fn error_messages_name_the_problem() {
    let e = DimError::FactViolated {
        symbol: "S".into(),
        fact: "S % 8 == 0".into(),
        value: 7,
    };
    assert_eq!(
        e.to_string(),
        "symbol `S` = 7 violates the fact `S % 8 == 0`"
    );
    assert_eq!(
        DimError::Unbound("B".into()).to_string(),
        "symbol `B` is not bound"
    );
}
