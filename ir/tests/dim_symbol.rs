//! Tests of `dim::symbol` (`ir/src/dim/symbol.rs`).

use ebb_ir::dim::*;

#[test]
fn symbols_are_equal_by_name() {
    let a = Symbol::new("B");
    assert_eq!(a, Symbol::new("B"));
    assert_ne!(a, Symbol::new("S"));
    assert!(Symbol::new("A") < Symbol::new("B"));
    assert_eq!(a.name(), "B");
    assert_eq!(a.to_string(), "B");
}

#[test]
fn identifiers() {
    assert!(Symbol::new("batch_size").is_identifier());
    assert!(Symbol::new("_x1").is_identifier());
    assert!(!Symbol::new("1x").is_identifier());
    assert!(!Symbol::new("seq len").is_identifier());
    assert!(!Symbol::new("").is_identifier());
}

#[test]
fn serde_as_name() {
    let s = Symbol::new("seq len");
    let j = serde_json::to_string(&s).unwrap();
    assert_eq!(j, "\"seq len\"");
    assert_eq!(serde_json::from_str::<Symbol>(&j).unwrap(), s);
}
