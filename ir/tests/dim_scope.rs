//! Tests of [`SymbolScope`] facts (`ir/src/dim/scope.rs`): declarations, ranges, checks, the
//! solved form of equalities, sampling and serde.

use ebb_ir::dim::*;
use ebb_ir::BindingsExt;

#[test]
fn declare_and_ranges() {
    let mut sc = SymbolScope::new();
    let b = sc.declare("B");
    assert_eq!(sc.declare("B"), b);
    assert_eq!(sc.range(&b), (Some(1), None));
    sc.set_range(&b, Some(0), Some(64));
    sc.set_range(&b, None, Some(128));
    assert_eq!(sc.range(&b), (Some(1), Some(64)));
    let x = sc.declare_range("X", None, Some(3));
    assert_eq!(sc.range(&x), (None, Some(3)));
    assert_eq!(sc.symbols(), vec![b, x]);
    assert_eq!(sc.range(&Symbol::new("nope")), (None, None));
}

#[test]
fn check_names_symbol_and_fact() {
    let mut sc = SymbolScope::new();
    let s = sc.declare("S");
    let t = sc.declare("T");
    sc.set_range(&s, None, Some(4096));
    sc.add_divisible(&s, 8);
    sc.add_divisible(&s, -4);
    sc.add_equality(&t, DimExpr::symbol(&s).floor_div(2).unwrap());
    assert_eq!(sc.divisor_of(&s), 8);
    assert_eq!(
        sc.check(&Bindings::from_pairs(&[("S", 16), ("T", 8)])),
        Ok(())
    );
    let err = |v: &[(&str, i64)]| match sc.check(&Bindings::from_pairs(v)) {
        Err(DimError::FactViolated {
            symbol,
            fact,
            value,
        }) => (symbol, fact, value),
        other => panic!("{other:?}"),
    };
    assert_eq!(err(&[("S", 0)]), ("S".into(), "S >= 1".into(), 0));
    assert_eq!(err(&[("S", 8192)]), ("S".into(), "S <= 4096".into(), 8192));
    assert_eq!(err(&[("S", 12)]), ("S".into(), "S % 8 == 0".into(), 12));
    assert_eq!(
        err(&[("S", 16), ("T", 9)]),
        ("T".into(), "T == floordiv(S, 2)".into(), 9)
    );
    assert_eq!(
        sc.complete(&Bindings::from_pairs(&[("S", 16)])),
        Ok(Bindings::from_pairs(&[("S", 16), ("T", 8)]))
    );
}

#[test]
fn solved_form_chains_equalities() {
    let mut sc = SymbolScope::new();
    let (a, b, c) = (sc.declare("A"), sc.declare("B"), sc.declare("C"));
    sc.add_equality(&a, "2*B".parse().unwrap());
    sc.add_equality(&b, "C + 1".parse().unwrap());
    sc.add_equality(&c, "A".parse().unwrap()); // cyclic: checked, not solved
    assert_eq!(sc.solved().get(&a), Some(&"2*C + 2".parse().unwrap()));
    assert!(!sc.solved().contains_key(&c));
    sc.set_range(&c, Some(5), Some(5));
    assert_eq!(sc.solved().get(&a), Some(&DimExpr::constant(12)));
    assert_eq!(sc.complete(&Bindings::new()).map(|b| b.len()), Ok(3));
}

#[test]
fn solved_form_depends_only_on_the_facts() {
    let mut x = SymbolScope::new();
    let s = x.declare("S");
    x.declare("T");
    x.add_equality(&s, "T + 1".parse().unwrap());
    x.set_range(&s, Some(5), Some(5));
    let mut y = SymbolScope::new();
    y.declare("S");
    y.declare("T");
    y.set_range(&s, Some(5), Some(5));
    y.add_equality(&s, "T + 1".parse().unwrap());
    assert_eq!(x, y);
    assert_eq!(x.solved().get(&s), Some(&"T + 1".parse().unwrap()));
    let back: SymbolScope = serde_json::from_str(&serde_json::to_string(&x).unwrap()).unwrap();
    assert_eq!(back, x);
    assert_eq!(
        x.check(&Bindings::from_pairs(&[("S", 5), ("T", 4)])),
        Ok(())
    );
    assert!(x
        .check(&Bindings::from_pairs(&[("S", 5), ("T", 3)]))
        .is_err());
}

#[test]
fn representative_points_satisfy_facts() {
    let mut sc = SymbolScope::new();
    let b = sc.declare("B");
    let s = sc.declare("S");
    let t = sc.declare("T");
    sc.set_range(&b, None, Some(32));
    sc.add_divisible(&s, 64);
    sc.add_equality(&t, "2*S".parse().unwrap());
    let pts = sc.representative_bindings(8);
    assert!(pts.len() >= 4, "{pts:?}");
    assert_eq!(
        pts[0],
        Bindings::from_pairs(&[("B", 1), ("S", 64), ("T", 128)])
    );
    assert_eq!(
        pts[1],
        Bindings::from_pairs(&[("B", 32), ("S", 65536), ("T", 131072)])
    );
    for p in &pts {
        assert_eq!(sc.check(p), Ok(()));
    }
    assert_eq!(pts, sc.representative_bindings(8));
    let mut empty = SymbolScope::new();
    let e = empty.declare("E");
    empty.set_range(&e, Some(5), Some(7));
    empty.add_divisible(&e, 8);
    assert!(empty.representative_bindings(4).is_empty());
}

#[test]
fn serde_round_trip() {
    let mut sc = SymbolScope::new();
    let s = sc.declare("S");
    sc.declare_range("X", None, None);
    sc.add_divisible(&s, 8);
    sc.add_equality(&Symbol::new("T"), "floordiv(S, 2)".parse().unwrap());
    let j = serde_json::to_string(&sc).unwrap();
    assert_eq!(
        j,
        r#"{"symbols":[{"name":"S","lo":1,"divisible_by":[8]},{"name":"X"},{"name":"T","lo":1}],"equalities":[{"symbol":"T","expr":"floordiv(S, 2)"}]}"#
    );
    let back: SymbolScope = serde_json::from_str(&j).unwrap();
    assert_eq!(back, sc);
}
