//! Tests of `stablehlo::mlir_text` (`import/src/stablehlo/mlir_text.rs`).

use ebb_import::stablehlo::mlir_text::*;
use ebb_ir::DType;

#[test]
fn huge_static_dimensions_are_errors() {
    for t in [
        "tensor<4611686018427387904x8xf32>",
        "tensor<9223372036854775807xf32>",
        "tensor<?x4294967296x4294967296xf32>",
    ] {
        let e = parse_tensor_type(t).unwrap_err();
        assert!(e.contains("overflows 64-bit integers"), "{e}");
    }
    assert!(parse_tensor_type("tensor<1073741824x2xf32>").is_ok());
}

#[test]
fn tensor_types() {
    let t = parse_tensor_type("tensor<?x16xf32>").unwrap();
    assert_eq!(t.dims, vec![None, Some(16)]);
    assert_eq!(t.dtype, DType::F32);
    assert_eq!(parse_tensor_type("tensor<i1>").unwrap().dims, vec![]);
    assert!(parse_tensor_type("tensor<4xcomplex<f32>>").is_err());
    assert!(parse_tensor_type("memref<4xf32>").is_err());
}

#[test]
fn attributes() {
    assert_eq!(parse_int("0 : i64"), Some(0));
    assert_eq!(parse_dense_array("array<i64: 1, 0>"), Some(vec![1, 0]));
    assert_eq!(parse_dense_array("array<i64>"), Some(vec![]));
    assert_eq!(
        parse_enum("#stablehlo<comparison_direction GE>").as_deref(),
        Some("GE")
    );
    let s = parse_struct(
        "#stablehlo.dot<lhs_batching_dimensions = [0], lhs_contracting_dimensions = [2, 1]>",
        "dot",
    )
    .unwrap();
    assert_eq!(
        s,
        vec![
            ("lhs_batching_dimensions".into(), vec![0]),
            ("lhs_contracting_dimensions".into(), vec![2, 1])
        ]
    );
    assert_eq!(parse_string(r#""a\"b\0A""#).as_deref(), Some("a\"b\n"));
}

#[test]
fn dense_literals() {
    let (l, t) = parse_dense("dense<1.000000e-01> : tensor<f32>").unwrap();
    assert!(l.splat);
    assert_eq!(l.get_f64(0), Some(0.1f32 as f64));
    assert_eq!(t.dims, vec![]);
    let (l, _) = parse_dense("dense<0xFF800000> : tensor<f32>").unwrap();
    assert_eq!(l.get_f64(0), Some(f64::NEG_INFINITY));
    let (l, _) = parse_dense("dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>").unwrap();
    assert!(!l.splat);
    assert_eq!(l.get_i64(3), Some(3));
    let (l, _) = parse_dense("dense<\"0x0000803F00000040\"> : tensor<2xf32>").unwrap();
    assert_eq!(l.get_f64(1), Some(2.0));
    let (l, _) = parse_dense("dense<true> : tensor<i1>").unwrap();
    assert_eq!(l.get_i64(0), Some(1));
}
