//! Tests of `onnx::ops::shape` (`import/src/onnx/ops/shape.rs`).

use ebb_import::onnx::internals::exact_div;
use ebb_ir::DimExpr;

#[test]
fn exact_division_of_symbolic_products() {
    let b = DimExpr::sym("B");
    let s = DimExpr::sym("S");
    let bs64 = b.clone() * s.clone() * DimExpr::constant(64);
    assert_eq!(
        exact_div(&bs64, &DimExpr::constant(64)),
        Some(b.clone() * s.clone())
    );
    assert_eq!(
        exact_div(&bs64, &(s.clone() * DimExpr::constant(64))),
        Some(b.clone())
    );
    assert_eq!(exact_div(&bs64, &DimExpr::constant(128)), None);
    assert_eq!(exact_div(&(b.clone() + DimExpr::constant(1)), &b), None);
}
