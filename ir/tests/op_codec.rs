//! Tests of `op::codec` (`ir/src/op/codec.rs`).

use ebb_ir::op::*;
use ebb_ir::DimExpr;

#[test]
fn conv_dimension_numbers_round_trip() {
    for s in ["[b,0,1,f]x[0,1,i,o]->[b,0,1,f]", "[b,f,0]x[o,i,0]->[b,f,0]"] {
        let d = ConvDimensionNumbers::parse(s).unwrap();
        assert_eq!(d.to_string(), s);
    }
    assert!(ConvDimensionNumbers::parse("[b,0,0,f]x[0,1,i,o]->[b,0,1,f]").is_none());
    assert!(ConvDimensionNumbers::parse("[b,0,1]x[0,1,i,o]->[b,0,1,f]").is_none());
}

#[test]
fn unknown_and_missing_attributes_are_errors() {
    let mut a = Attrs::new();
    a.insert("permutation".into(), Attr::Ints(vec![1, 0]));
    a.insert("bogus".into(), Attr::I64(1));
    let e = Op::from_attrs(OpKind::Transpose, a).unwrap_err();
    assert_eq!(e.name, "bogus");
    let e = Op::from_attrs(OpKind::Transpose, Attrs::new()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "op `transpose`: attribute `permutation` is missing"
    );
    let mut a = Attrs::new();
    a.insert("comparison_direction".into(), Attr::Str("XX".into()));
    assert!(Op::from_attrs(OpKind::Compare, a).is_err());
}

#[test]
fn window_defaults_are_filled_and_left_out_again() {
    let mut a = Attrs::new();
    a.insert("window_dimensions".into(), Attr::Ints(vec![1, 2, 2, 1]));
    a.insert("window_strides".into(), Attr::Ints(vec![1, 2, 2, 1]));
    let op = Op::from_attrs(OpKind::ReduceWindow, a.clone()).unwrap();
    let Op::ReduceWindow(w) = &op else { panic!() };
    assert_eq!(w.static_padding(), Some(vec![(0, 0); 4]));
    assert_eq!(w.base_dilations, vec![1; 4]);
    assert_eq!(op.to_attrs(), a);
    assert_eq!(
        Op::from_attrs(OpKind::ReduceWindow, op.to_attrs()).unwrap(),
        op
    );
}

/// Tests that a symbolic window (sizes and padding as `dims[..]`) round-trips, that a
/// constant one still prints as integer lists, and that a padding list of the wrong
/// length is an error.
#[test]
fn symbolic_windows_round_trip() {
    let s = DimExpr::symbol(&ebb_ir::Symbol::new("S"));
    let one = DimExpr::constant(1);
    let mut w = Window::symbolic(vec![one.clone(), s.clone()]);
    w.padding[1] = (s.checked_sub(&one).unwrap(), DimExpr::zero());
    let op = Op::ReduceWindow(w);
    let a = op.to_attrs();
    assert!(matches!(a.get("window_dimensions"), Some(Attr::Dims(_))));
    assert!(matches!(a.get("padding"), Some(Attr::Dims(v)) if v.len() == 4));
    assert_eq!(Op::from_attrs(OpKind::ReduceWindow, a).unwrap(), op);
    let c = Op::ReduceWindow(Window::new(vec![2, 2]).with_padding(&[(1, 0), (0, 1)]));
    let a = c.to_attrs();
    assert_eq!(a.get("padding"), Some(&Attr::Ints(vec![1, 0, 0, 1])));
    assert_eq!(Op::from_attrs(OpKind::ReduceWindow, a).unwrap(), c);
    let mut bad = Attrs::new();
    bad.insert("window_dimensions".into(), Attr::Dims(vec![s.clone()]));
    bad.insert("padding".into(), Attr::Dims(vec![s]));
    assert!(Op::from_attrs(OpKind::ReduceWindow, bad).is_err());
}
