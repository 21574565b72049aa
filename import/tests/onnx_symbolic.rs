//! Tests of `onnx::ops::symbolic` (`import/src/onnx/ops/symbolic.rs`).

use ebb_import::onnx::internals::{binary, concat, gather, slice_indices};
use ebb_import::sym::{Elems, SymVal};
use ebb_ir::{DType, DimExpr, SymbolScope};

fn v(xs: &[i64]) -> SymVal {
    SymVal {
        dtype: DType::I64,
        shape: vec![xs.len() as i64],
        elems: Elems::Int(xs.iter().map(|&k| DimExpr::constant(k)).collect()),
    }
}

#[test]
fn slicing_follows_onnx_clamping() {
    assert_eq!(slice_indices(5, 1, i64::MAX, 1), vec![1, 2, 3, 4]);
    assert_eq!(slice_indices(5, -2, i64::MAX, 1), vec![3, 4]);
    assert_eq!(slice_indices(5, -1, i64::MIN, -1), vec![4, 3, 2, 1, 0]);
    assert_eq!(slice_indices(5, 0, -1, 2), vec![0, 2]);
}

#[test]
fn broadcasting_arithmetic_and_gather() {
    let scope = SymbolScope::new();
    let s = SymVal::scalar(DType::I64, DimExpr::sym("B"));
    let r = binary("multiply", &v(&[2, 3]), &s, &scope).unwrap();
    assert_eq!(
        r.ints().unwrap(),
        &[
            DimExpr::sym("B") * DimExpr::constant(2),
            DimExpr::sym("B") * DimExpr::constant(3)
        ]
    );
    let g = gather(&v(&[4, 5, 6]), &[-1], &[], 0).unwrap();
    assert_eq!(g.shape, Vec::<i64>::new());
    assert_eq!(g.ints().unwrap(), &[DimExpr::constant(6)]);
    let c = concat(&[v(&[1]), v(&[2, 3])]).unwrap();
    assert_eq!(c.shape, vec![3]);
}
