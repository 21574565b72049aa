//! Tests of `dim::bindings` (`ir/src/dim/bindings.rs`).

use ebb_ir::dim::*;

#[test]
fn parses_and_builds_the_same_bindings() {
    let b = Bindings::parse(" B=8, S = 512,").unwrap();
    assert_eq!(b, Bindings::from_pairs(&[("B", 8), ("S", 512)]));
    assert_eq!(
        Bindings::parse("B=8,B=9").unwrap_err(),
        BindingsError::Repeated("B".into())
    );
    assert!(matches!(
        Bindings::parse("B"),
        Err(BindingsError::NotAssignment(_))
    ));
    assert!(matches!(
        Bindings::parse("B=x"),
        Err(BindingsError::NotInteger { .. })
    ));
    assert!(matches!(
        Bindings::parse("=3"),
        Err(BindingsError::EmptyName(_))
    ));
}
