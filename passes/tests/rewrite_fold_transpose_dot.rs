//! Tests of the `fold_transpose_dot` rule group: proofs on small graphs (`rule_test!`),
//! before/after IR snapshots, negative cases, and the dimension arithmetic.

use crate::rewrite_util;

use ebb_passes::rewrite::fold_transpose_dot::{fold_dims, swap_dims};
use ebb_passes::rewrite::RuleGroup;
use rewrite_util::eval::eval;
use rewrite_util::{before_after, graph, run};

const G: [RuleGroup; 1] = [RuleGroup::FoldTransposeDot];

/// The tied embedding of GPT-2: logits = h . transpose(wte), and the input gradient uses
/// the same transpose (two users).
const TIED_EMBEDDING: &str = r#"
  %0 = input {index = 0, name = "wte"} : f32[256,64]
  %1 = input {index = 1, name = "h"} : f32[B,S,64]
  %2 = input {index = 2, name = "dlogits"} : f32[B,S,256]
  %3 = transpose(%0) {permutation = [1, 0]} : f32[64,256]
  %4 = dot_general(%1, %3) {lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [0]} : f32[B,S,256]
  %5 = dot_general(%2, %3) {lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]} : f32[B,S,64]
  return %4, %5"#;

/// Attention backward (JAX, `bhqk,bkhd->bqhd` transposed): the heads of `k` are transposed
/// to `[B,4,16,S]` before a batched matmul.
const ATTENTION: &str = r#"
  %0 = input {index = 0, name = "k"} : f32[B,S,4,16]
  %1 = input {index = 1, name = "p"} : f32[B,4,S,16]
  %2 = transpose(%0) {permutation = [0, 2, 3, 1]} : f32[B,4,16,S]
  %3 = dot_general(%2, %1) {lhs_batching_dimensions = [0, 1], lhs_contracting_dimensions = [3], rhs_batching_dimensions = [0, 1], rhs_contracting_dimensions = [2]} : f32[B,4,16,16]
  return %3"#;

/// A transpose that swaps the lhs free dimensions `S` and `B`: folding it would produce
/// `[S,B,32]` instead of `[B,S,32]`.
const LAYOUT_CHANGING: &str = r#"
  %0 = input {index = 0, name = "x"} : f32[S,B,64]
  %1 = input {index = 1, name = "w"} : f32[64,32]
  %2 = transpose(%0) {permutation = [1, 0, 2]} : f32[B,S,64]
  %3 = dot_general(%2, %1) {lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [0]} : f32[B,S,32]
  return %3"#;

rule_test!(
    /// Tests that a transposed rhs is read in place with a renumbered contracting dimension.
    folds_a_transposed_rhs, G, TIED_EMBEDDING
    => "(dot_general ?d input:1 input:0)"
);

rule_test!(
    /// Tests that batching and contracting dimensions of a transposed lhs are renumbered.
    folds_a_transposed_lhs_with_batching_dimensions, G, ATTENTION
    => "(dot_general ?d input:0 input:1)"
);

rule_test!(
    /// Tests that both operands are folded when both are transposed.
    folds_both_operands, G, r#"
  %0 = input {index = 0, name = "a"} : f32[64,B]
  %1 = input {index = 1, name = "b"} : f32[32,64]
  %2 = transpose(%0) {permutation = [1, 0]} : f32[B,64]
  %3 = transpose(%1) {permutation = [1, 0]} : f32[64,32]
  %4 = dot_general(%2, %3) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[B,32]
  return %4"#
    => "(dot_general ?d input:0 input:1)"
);

rule_test!(
    /// Tests that the rules do not fold a transpose that changes the result layout.
    does_not_fold_a_transpose_that_changes_the_result_layout, G, LAYOUT_CHANGING
    =>; not "(dot_general ?d input:0 input:1)"
);

/// A weight gradient as JAX emits it: `dW^T = dy^T x` as `[out, in]`, then transposed to the
/// parameter's `[in, out]`.
const WEIGHT_GRADIENT: &str = r#"
  %0 = input {index = 0, name = "x"} : f32[B,S,64]
  %1 = input {index = 1, name = "dy"} : f32[B,S,32]
  %2 = dot_general(%1, %0) {lhs_contracting_dimensions = [0, 1], rhs_contracting_dimensions = [0, 1]} : f32[32,64]
  %3 = transpose(%2) {permutation = [1, 0]} : f32[64,32]
  return %3"#;

rule_test!(
    /// Tests that a transpose of the dot's result swapping its free blocks is the dot with
    /// its operands swapped.
    folds_a_transpose_of_the_result, G, WEIGHT_GRADIENT
    => "(dot_general ?d input:0 input:1)"
);

rule_test!(
    /// Tests that batching dimensions stay first when the result's free blocks are swapped.
    folds_a_transposed_batched_result, G, r#"
  %0 = input {index = 0, name = "a"} : f32[B,8,16]
  %1 = input {index = 1, name = "b"} : f32[B,16,4]
  %2 = dot_general(%0, %1) {lhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_batching_dimensions = [0], rhs_contracting_dimensions = [1]} : f32[B,8,4]
  %3 = transpose(%2) {permutation = [0, 2, 1]} : f32[B,4,8]
  return %3"#
    => "(dot_general ?d input:1 input:0)"
);

rule_test!(
    /// Tests that a transpose of the result that is not a swap of its free blocks stays.
    does_not_fold_other_transposes_of_the_result, G, r#"
  %0 = input {index = 0, name = "a"} : f32[B,S,64]
  %1 = input {index = 1, name = "b"} : f32[64,32]
  %2 = dot_general(%0, %1) {lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [0]} : f32[B,S,32]
  %3 = transpose(%2) {permutation = [1, 0, 2]} : f32[S,B,32]
  return %3"#
    =>; not "(dot_general ?d ?x ?y)"
);

#[test]
fn tests_that_a_transpose_shared_by_two_dots_is_removed() {
    let g = graph(TIED_EMBEDDING);
    let (out, rep) = run(&g, &G);
    assert!(!out
        .order()
        .iter()
        .any(|id| out.node(*id).kind() == ebb_ir::OpKind::Transpose));
    assert_eq!(rep.classes_changed, 2);
    insta::assert_snapshot!(before_after(&g, &G));
}

#[test]
fn tests_that_attention_heads_are_read_in_place() {
    insta::assert_snapshot!(before_after(&graph(ATTENTION), &G));
}

#[test]
fn tests_that_a_layout_changing_transpose_is_left_alone() {
    insta::assert_snapshot!(before_after(&graph(LAYOUT_CHANGING), &G));
}

#[test]
fn tests_that_a_weight_gradient_is_computed_in_the_parameter_layout() {
    insta::assert_snapshot!(before_after(&graph(WEIGHT_GRADIENT), &G));
}

#[test]
fn tests_the_result_swap_arithmetic() {
    let d = |lb: &[i64], lc: &[i64], rb: &[i64], rc: &[i64]| ebb_ir::op::DotDims {
        lhs_batch: lb.to_vec(),
        rhs_batch: rb.to_vec(),
        lhs_contract: lc.to_vec(),
        rhs_contract: rc.to_vec(),
        result_dtype: None,
    };
    // [B,S,64] . [64,32] -> [B,S,32]; [2,0,1] puts the rhs free block first.
    let s = swap_dims(&d(&[], &[2], &[], &[0]), &[2, 0, 1], 3, 2).unwrap();
    assert_eq!((s.lhs_contract, s.rhs_contract), (vec![0], vec![2]));
    assert_eq!(swap_dims(&d(&[], &[2], &[], &[0]), &[1, 0, 2], 3, 2), None);
    // Batched: [B,8,16] . [B,16,4] -> [B,8,4]; [0,2,1] keeps the batch first.
    let s = swap_dims(&d(&[0], &[2], &[0], &[1]), &[0, 2, 1], 3, 3).unwrap();
    assert_eq!(
        (s.lhs_batch, s.lhs_contract, s.rhs_contract),
        (vec![0], vec![1], vec![2])
    );
    assert_eq!(
        swap_dims(&d(&[0], &[2], &[0], &[1]), &[2, 1, 0], 3, 3),
        None
    );
}

#[test]
fn tests_the_dimension_arithmetic() {
    // T = transpose(x, [0, 2, 3, 1]): T dim i is x dim perm[i].
    assert_eq!(
        fold_dims(&[0, 2, 3, 1], &[0, 1], &[3]),
        Some((vec![0, 2], vec![1]))
    );
    assert_eq!(fold_dims(&[1, 0], &[], &[0]), Some((vec![], vec![1])));
    // Free dims 0 and 1 of T come from x dims 1 and 0: the layout would change.
    assert_eq!(fold_dims(&[1, 0, 2], &[], &[2]), None);
    // Out-of-range attributes are refused, not indexed.
    assert_eq!(fold_dims(&[1, 0], &[], &[2]), None);
    assert_eq!(fold_dims(&[1, 0], &[-1], &[]), None);
}

/// A `lax.scan` backward step over a symbolic length: each iteration adds the weight gradient
/// `transpose(dot_general(dy_t, x_t))` (`[96,32]` computed, then transposed to the
/// parameter's `[32,96]`) to the carried accumulator.
const SCAN_WEIGHT_GRADIENT: &str = r#"
  %xs = input {index = 0, name = "xs"} : f32[S,B,32]
  %dys = input {index = 1, name = "dys"} : f32[S,B,96]
  %i0 = constant {value = dense<0> : i32} : i32[]
  %z = constant {value = dense<0.0> : f32} : f32[]
  %g0 = broadcast_in_dim(%z) {broadcast_dimensions = [], shape = dims[32, 96]} : f32[32,96]
  %w:4 = while(%i0, %g0, %xs, %dys) : i32[], f32[32,96], f32[S,B,32], f32[S,B,96] {
    region @cond {
      %0 = input {index = 0} : i32[]
      %1 = input {index = 1} : f32[32,96]
      %2 = input {index = 2} : f32[S,B,32]
      %3 = input {index = 3} : f32[S,B,96]
      %4 = dim_constant {values = dims[S]} : i32[]
      %5 = compare(%0, %4) {comparison_direction = "LT"} : i1[]
      return %5
    }
    region @body {
      %0 = input {index = 0} : i32[]
      %1 = input {index = 1} : f32[32,96]
      %2 = input {index = 2} : f32[S,B,32]
      %3 = input {index = 3} : f32[S,B,96]
      %4 = constant {value = dense<0> : i32} : i32[]
      %5 = dynamic_slice(%2, %0, %4, %4) {slice_sizes = dims[1, B, 32]} : f32[1,B,32]
      %6 = reshape(%5) {shape = dims[B, 32]} : f32[B,32]
      %7 = dynamic_slice(%3, %0, %4, %4) {slice_sizes = dims[1, B, 96]} : f32[1,B,96]
      %8 = reshape(%7) {shape = dims[B, 96]} : f32[B,96]
      %9 = dot_general(%8, %6) {lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]} : f32[96,32]
      %10 = transpose(%9) {permutation = [1, 0]} : f32[32,96]
      %11 = add(%1, %10) : f32[32,96]
      %12 = constant {value = dense<1> : i32} : i32[]
      %13 = add(%0, %12) : i32[]
      return %13, %11, %2, %3
    }
  }
  return %w#1"#;

#[test]
fn tests_that_the_pass_folds_a_transposed_dot_result_inside_a_loop_body() {
    use ebb_passes::manager::{Pass, PassContext};
    use ebb_passes::rewrite::RewritePass;
    let g = graph(SCAN_WEIGHT_GRADIENT);
    let mut out = g.clone();
    let pass = RewritePass {
        groups: G.to_vec(),
        limits: Default::default(),
    };
    let res = pass
        .run(&mut out, &mut PassContext::new())
        .expect("rewrite pass");
    assert_eq!(res.changes, 1, "the body's transpose of the dot result");
    let w = *out
        .order()
        .iter()
        .find(|&&id| out.node(id).kind() == ebb_ir::OpKind::While)
        .expect("the while");
    let body = &out.node(w).regions[1];
    let kinds: Vec<_> = body
        .order()
        .iter()
        .map(|&id| body.node(id).kind())
        .collect();
    assert!(!kinds.contains(&ebb_ir::OpKind::Transpose), "{kinds:?}");
    assert_eq!(
        body.scope.symbols(),
        g.node(w).regions[1].scope.symbols(),
        "own scope kept"
    );
    // The swapped dot computes every element from the same products in the same order: the
    // reference executor gives the same bits, with a contraction short enough for the
    // unpacked kernel (B = 3) and one that packs (B = 40).
    for b in [ebb_testkit::bs(3, 2), ebb_testkit::bs(40, 3)] {
        let (x, y) = (eval(&g, &b), eval(&out, &b));
        let bits = |t: &[ebb_runtime::Tensor]| -> Vec<u32> {
            t[0].as_f32()
                .expect("f32")
                .iter()
                .map(|v| v.to_bits())
                .collect()
        };
        assert_eq!(bits(&x), bits(&y));
    }
    insta::assert_snapshot!(ebb_ir::text::print(&out));
}
