//! Tests that bad input gets a clear error, never a panic: malformed MLIR (with line:col),
//! unsupported ops (with name and location), truncated files, and the CLI's exit code.

use ebb_import::stablehlo::{import_str, ImportError};
use ebb_testkit::jax_fixture;

fn mlp_text() -> String {
    std::fs::read_to_string(jax_fixture("mlp_sgd")).unwrap()
}

#[test]
fn malformed_text_reports_line_and_column() {
    let err = import_str(
        "\"builtin.module\"() ({\n  %0 = \"stablehlo.add\"(%x) : \n}) : () -> ()\n",
        "bad.mlir",
    )
    .unwrap_err();
    match &err {
        ImportError::Parse { line, col, .. } => assert!(*line >= 1 && *col >= 1, "{err}"),
        other => panic!("expected a parse error, got {other}"),
    }
    let msg = err.to_string();
    assert!(msg.starts_with("bad.mlir:"), "{msg}");
}

#[test]
fn unsupported_op_names_op_and_location() {
    let text = mlp_text().replacen("\"stablehlo.maximum\"", "\"stablehlo.fft\"", 1);
    let err = import_str(&text, "mlp.mlir").unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ImportError::UnsupportedOp { .. }), "{msg}");
    assert!(
        msg.contains("stablehlo.fft") && msg.contains(" at ") && msg.contains(".py:"),
        "{msg}"
    );
}

/// Without the name `h` (JAX's `jax.global_constant` tag removed), the image height is a
/// placeholder `_arg6_d1` and `8*floordiv(_arg6_d1, 8)` is not provably equal to it (the
/// divisibility assertion is kept as an assertion, not used as a fact): the error names the
/// file, the op, its source location and both shapes.
#[test]
fn an_unnamed_multiple_dimension_is_reported_at_the_op_with_its_location() {
    let text = std::fs::read_to_string(jax_fixture("cnn_poly_sgd"))
        .unwrap()
        .replace("jax.global_constant = \"h\"", "jax.global_constant = \"\"");
    let err = import_str(&text, "cnn.mlir").unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ImportError::Op { .. }), "{msg}");
    assert!(
        msg.starts_with("cnn.mlir")
            && msg.contains("stablehlo.")
            && msg.contains(".py:")
            && msg.contains("floordiv(_arg6_d1, 8)"),
        "{msg}"
    );
}

#[test]
fn module_without_main_is_a_structure_error() {
    let err = import_str(
        "\"builtin.module\"() ({\n^bb0:\n}) : () -> ()\n",
        "empty.mlir",
    )
    .unwrap_err();
    assert!(err.to_string().contains("no function @main"), "{err}");
}

#[test]
fn truncated_files_never_panic() {
    let text = mlp_text();
    let n = text.len();
    for k in 1..40 {
        let cut = n * k / 40;
        let cut = (0..=cut)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        // Any result is fine as long as it is not a panic.
        let _ = import_str(&text[..cut], "cut.mlir");
    }
}

/// MLIR does not verify StableHLO ops (the dialect is not registered), so a `constant` whose
/// value's type differs from its result type reaches the importer: an error at the op, not
/// an out-of-bounds read later (found by the `stablehlo_text` fuzz target).
#[test]
fn a_constant_whose_value_does_not_have_the_result_type_is_an_error() {
    for (from, to) in [
        ("dense<1> : tensor<i32>}>", "dense<1> : tensor<0xi32>}>"),
        (
            "dense<5.000000e-02> : tensor<f32>}>",
            "dense<5.000000e-02> : tensor<2xf32>}>",
        ),
    ] {
        let text = mlp_text().replacen(from, to, 1);
        let err = import_str(&text, "mlp.mlir").unwrap_err().to_string();
        assert!(
            err.contains("stablehlo.constant") && err.contains("does not have the result type"),
            "{err}"
        );
    }
}
