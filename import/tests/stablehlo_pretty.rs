//! Tests of `stablehlo::pretty` (`import/src/stablehlo/pretty.rs`).

use ebb_import::stablehlo::pretty::*;

fn one(line: &str) -> String {
    to_generic(line, "t.mlir").unwrap().trim_end().to_string()
}

#[test]
fn custom_forms_become_generic() {
    assert_eq!(
        one("%5 = stablehlo.add %0, %4 : tensor<?x256xf32> loc(#loc3)"),
        "%5 = \"stablehlo.add\"(%0, %4) : (tensor<?x256xf32>, tensor<?x256xf32>) -> \
         (tensor<?x256xf32>) loc(#loc3)"
    );
    assert_eq!(
        one("%c = stablehlo.constant dense<1> : tensor<i32>"),
        "%c = \"stablehlo.constant\"() <{value = dense<1> : tensor<i32>}> : () -> tensor<i32>"
    );
    assert_eq!(
        one("%2 = stablehlo.compare GE, %0, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>"),
        "%2 = \"stablehlo.compare\"(%0, %c) <{compare_type = #stablehlo<comparison_type \
         SIGNED>, comparison_direction = #stablehlo<comparison_direction GE>}> : \
         (tensor<i32>, tensor<i32>) -> (tensor<i1>)"
    );
    assert_eq!(
        one("%1 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<4xf32>"),
        "%1 = \"stablehlo.broadcast_in_dim\"(%arg1) <{broadcast_dimensions = array<i64>}> : \
         (tensor<f32>) -> (tensor<4xf32>)"
    );
    assert_eq!(
        one("%2 = stablehlo.slice %1 [0:1, 2:8:2] : (tensor<2x8xui32>) -> tensor<1x3xui32>"),
        "%2 = \"stablehlo.slice\"(%1) <{start_indices = array<i64: 0, 2>, limit_indices = \
         array<i64: 1, 8>, strides = array<i64: 1, 2>}> : (tensor<2x8xui32>) -> \
         (tensor<1x3xui32>)"
    );
    assert_eq!(
        one("%13 = stablehlo.select %9, %cst_18, %cst_17 : tensor<4x8xi1>, tensor<4x8xf32>"),
        "%13 = \"stablehlo.select\"(%9, %cst_18, %cst_17) : (tensor<4x8xi1>, tensor<4x8xf32>, \
         tensor<4x8xf32>) -> (tensor<4x8xf32>)"
    );
}

#[test]
fn the_compact_reduce_gets_its_region() {
    let g = one(
        "%14 = stablehlo.reduce(%6 init: %cst_0) applies stablehlo.add across dimensions = \
         [0, 1] : (tensor<?x4xf32>, tensor<f32>) -> tensor<f32> loc(#loc33)",
    );
    assert!(g.starts_with(
        "%14 = \"stablehlo.reduce\"(%6, %cst_0) <{dimensions = array<i64: 0, 1>}> ({\n\
         ^bb0(%__ebb_l1: tensor<f32>, %__ebb_r1: tensor<f32>):"
    ));
    assert!(g.ends_with("}) : (tensor<?x4xf32>, tensor<f32>) -> (tensor<f32>) loc(#loc33)"));
}

#[test]
fn while_regions_get_their_block_arguments() {
    let text = "%1:2 = stablehlo.while(%iterArg = %c, %iterArg_1 = %x) : tensor<i32>, tensor<4xf32>\n\
                cond {\n\
                %2 = stablehlo.compare LT, %iterArg, %c : (tensor<i32>, tensor<i32>) -> tensor<i1>\n\
                stablehlo.return %2 : tensor<i1>\n\
                } do {\n\
                stablehlo.return %iterArg, %iterArg_1 : tensor<i32>, tensor<4xf32>\n\
                } loc(#loc9)";
    let g = to_generic(text, "t.mlir").unwrap();
    assert!(g.contains("\"stablehlo.while\"(%c, %x) ({\n^bb0(%iterArg: tensor<i32>, %iterArg_1: tensor<4xf32>):"), "{g}");
    assert!(g.contains("}, {\n^bb0(%iterArg: tensor<i32>"), "{g}");
    assert!(
        g.trim_end().ends_with(
            "}) : (tensor<i32>, tensor<4xf32>) -> (tensor<i32>, tensor<4xf32>) loc(#loc9)"
        ),
        "{g}"
    );
}

#[test]
fn an_unknown_custom_form_is_a_located_error() {
    let e = to_generic(
        "module {\n  %0 = stablehlo.frobnicate %x {q} : tensor<f32>\n}",
        "m.mlir",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("m.mlir:2:") && e.contains("stablehlo.frobnicate"),
        "{e}"
    );
}

#[test]
fn the_generic_form_is_not_pretty() {
    assert!(!is_pretty(
        "#loc = loc(unknown)\n\"builtin.module\"() ({\n}) : () -> ()"
    ));
    assert!(is_pretty("#loc = loc(unknown)\nmodule @jit_f {\n}"));
}
