//! Tests of `onnx::dims` (`import/src/onnx/dims.rs`).

use ebb_import::onnx::dims::*;
use ebb_ir::{DimExpr, SymbolScope};

#[test]
fn derived_expressions_parse() {
    let b = DimExpr::sym("batch");
    let s = DimExpr::sym("seq");
    assert_eq!(
        parse_dim_param("4*batch").unwrap(),
        b.clone() * DimExpr::constant(4)
    );
    assert_eq!(parse_dim_param("batch*seq").unwrap(), b.clone() * s.clone());
    assert_eq!(parse_dim_param("(seq + 1) - 1").unwrap(), s.clone());
    assert_eq!(
        parse_dim_param("batch // 2").unwrap(),
        b.floor_div(2).unwrap()
    );
    assert!(parse_dim_param("batch +").is_err());
    assert!(parse_dim_param("batch // seq").is_err());
}

#[test]
fn unknown_names_bind_once_and_are_checked_after() {
    let mut scope = SymbolScope::new();
    scope.declare("seq");
    let seq = DimExpr::sym("seq");
    let mut a = Aliases::default();
    let decl = parse_dim_param("s0 + 1").unwrap();
    // `s0 + 1` first seen for a value inferred as `seq`: binds s0 = seq - 1.
    assert_eq!(a.check(&scope, &decl, &seq), DimCheck::Agree);
    let s0 = parse_dim_param("s0").unwrap();
    assert_eq!(
        a.check(&scope, &s0, &(seq.clone() - DimExpr::constant(1))),
        DimCheck::Agree
    );
    assert_eq!(a.check(&scope, &s0, &seq), DimCheck::Contradict);
    assert_eq!(
        a.check(&scope, &parse_dim_param("u*v").unwrap(), &seq),
        DimCheck::Unchecked
    );
}
