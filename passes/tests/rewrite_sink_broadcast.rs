//! Tests of the `sink_broadcast` rule group: proofs on small graphs (`rule_test!`), and
//! before/after IR snapshots of the extracted result, negative cases included.

use crate::rewrite_util;

use ebb_passes::rewrite::RuleGroup;
use rewrite_util::{before_after, graph, run, saturate};

const G: [RuleGroup; 1] = [RuleGroup::SinkBroadcast];

/// `add(broadcast(x), broadcast(y))` with `x`, `y` of the same type, nothing else using the
/// broadcasts.
const ADD_OF_BROADCASTS: &str = r#"
  %0 = input {index = 0, name = "x"} : f32[64]
  %1 = input {index = 1, name = "y"} : f32[64]
  %2 = broadcast_in_dim(%0) {broadcast_dimensions = [2], shape = dims[B, S, 64]} : f32[B,S,64]
  %3 = broadcast_in_dim(%1) {broadcast_dimensions = [2], shape = dims[B, S, 64]} : f32[B,S,64]
  %4 = add(%2, %3) : f32[B,S,64]
  return %4"#;

/// A row statistic divided by a broadcast scalar (JAX's mean: `sum / n`).
const DIVIDE_BY_SCALAR: &str = r#"
  %0 = input {index = 0, name = "sum"} : f32[B,S]
  %1 = input {index = 1, name = "n"} : f32[]
  %2 = broadcast_in_dim(%0) {broadcast_dimensions = [0, 1], shape = dims[B, S, 64]} : f32[B,S,64]
  %3 = broadcast_in_dim(%1) {broadcast_dimensions = [], shape = dims[B, S, 64]} : f32[B,S,64]
  %4 = divide(%2, %3) : f32[B,S,64]
  return %4"#;

/// A broadcast consumed by a `dot_general`.
const DOT_OF_BROADCAST: &str = r#"
  %0 = input {index = 0, name = "x"} : f32[64]
  %1 = input {index = 1, name = "w"} : f32[64,32]
  %2 = broadcast_in_dim(%0) {broadcast_dimensions = [2], shape = dims[B, S, 64]} : f32[B,S,64]
  %3 = dot_general(%2, %1) {lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [0]} : f32[B,S,32]
  return %3"#;

/// Broadcasts with equal attributes but operands of different shapes (`[1]` and `[64]`).
const DIFFERENT_OPERAND_SHAPES: &str = r#"
  %0 = input {index = 0, name = "x"} : f32[1]
  %1 = input {index = 1, name = "y"} : f32[64]
  %2 = broadcast_in_dim(%0) {broadcast_dimensions = [2], shape = dims[B, S, 64]} : f32[B,S,64]
  %3 = broadcast_in_dim(%1) {broadcast_dimensions = [2], shape = dims[B, S, 64]} : f32[B,S,64]
  %4 = multiply(%2, %3) : f32[B,S,64]
  return %4"#;

/// The broadcasts are shared by later elementwise ops that can all be sunk: the whole chain
/// runs on the small tensors.
const SHARED_IN_A_CHAIN: &str = r#"
  %0 = input {index = 0, name = "x"} : f32[64]
  %1 = input {index = 1, name = "y"} : f32[64]
  %2 = broadcast_in_dim(%0) {broadcast_dimensions = [2], shape = dims[B, S, 64]} : f32[B,S,64]
  %3 = broadcast_in_dim(%1) {broadcast_dimensions = [2], shape = dims[B, S, 64]} : f32[B,S,64]
  %4 = add(%2, %3) : f32[B,S,64]
  %5 = multiply(%4, %2) : f32[B,S,64]
  %6 = multiply(%5, %3) : f32[B,S,64]
  return %6"#;

/// The broadcasts are also used by ops that cannot take a small operand (a `dot_general`,
/// an add with a full-size tensor): sinking would add bytes and free none.
const SHARED_BROADCASTS: &str = r#"
  %0 = input {index = 0, name = "x"} : f32[64]
  %1 = input {index = 1, name = "y"} : f32[64]
  %2 = input {index = 2, name = "w"} : f32[64,32]
  %3 = input {index = 3, name = "z"} : f32[B,S,64]
  %4 = broadcast_in_dim(%0) {broadcast_dimensions = [2], shape = dims[B, S, 64]} : f32[B,S,64]
  %5 = broadcast_in_dim(%1) {broadcast_dimensions = [2], shape = dims[B, S, 64]} : f32[B,S,64]
  %6 = add(%4, %5) : f32[B,S,64]
  %7 = dot_general(%4, %2) {lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [0]} : f32[B,S,32]
  %8 = add(%5, %3) : f32[B,S,64]
  return %6, %7, %8"#;

rule_test!(
    /// Tests that `add(bcast(x), bcast(y))` is proven equal to `bcast(add(x, y))`.
    sinks_a_broadcast_below_add, G, ADD_OF_BROADCASTS
    => "(broadcast_in_dim ?a (add input:0 input:1))"
);

rule_test!(
    /// Tests that a scalar broadcast is re-broadcast to the other operand's small shape.
    sinks_a_scalar_broadcast_below_divide, G, DIVIDE_BY_SCALAR
    => "(broadcast_in_dim ?a (divide input:0 (broadcast_in_dim ?s input:1)))"
);

rule_test!(
    /// Tests that unary ops and converts run before the broadcast.
    sinks_a_broadcast_below_unary_ops_and_convert, G, r#"
  %0 = input {index = 0, name = "x"} : bf16[S]
  %1 = broadcast_in_dim(%0) {broadcast_dimensions = [1], shape = dims[B, S]} : bf16[B,S]
  %2 = convert(%1) {dtype = f32} : f32[B,S]
  %3 = exponential(%2) : f32[B,S]
  %4 = negate(%3) : f32[B,S]
  return %4"#
    => "(broadcast_in_dim ?a (negate (exponential (convert ?t input:0))))"
);

rule_test!(
    /// Tests that `reduce_precision` (with its format payload) runs before the broadcast.
    sinks_a_broadcast_below_reduce_precision, G, r#"
  %0 = input {index = 0, name = "x"} : f32[S]
  %1 = broadcast_in_dim(%0) {broadcast_dimensions = [1], shape = dims[B, S]} : f32[B,S]
  %2 = reduce_precision(%1) {exponent_bits = 5, mantissa_bits = 10} : f32[B,S]
  return %2"#
    => "(broadcast_in_dim ?a (reduce_precision ?t input:0))"
);

rule_test!(
    /// Tests that a select with a scalar predicate and broadcast branches is sunk.
    sinks_a_broadcast_below_select_with_a_scalar_predicate, G, r#"
  %0 = input {index = 0, name = "p"} : i1[]
  %1 = input {index = 1, name = "x"} : f32[S]
  %2 = input {index = 2, name = "y"} : f32[S]
  %3 = broadcast_in_dim(%1) {broadcast_dimensions = [1], shape = dims[B, S]} : f32[B,S]
  %4 = broadcast_in_dim(%2) {broadcast_dimensions = [1], shape = dims[B, S]} : f32[B,S]
  %5 = select(%0, %3, %4) : f32[B,S]
  return %5"#
    => "(broadcast_in_dim ?a (select input:0 input:1 input:2))"
);

rule_test!(
    /// Tests that the rules do not sink a broadcast whose consumer is a `dot_general`.
    does_not_sink_a_broadcast_whose_consumer_is_a_dot_general, G, DOT_OF_BROADCAST
    =>; not "(broadcast_in_dim ?a ?z)"
);

rule_test!(
    /// Tests that equal broadcast attributes alone do not allow sinking (`f32[1]` and
    /// `f32[64]` cannot be multiplied).
    does_not_sink_broadcasts_of_operands_with_different_shapes, G, DIFFERENT_OPERAND_SHAPES
    =>; not "(broadcast_in_dim ?a ?z)"
);

rule_test!(
    /// Tests that a broadcast next to a full-size operand stays.
    does_not_sink_a_broadcast_next_to_a_full_size_operand, G, r#"
  %0 = input {index = 0, name = "x"} : f32[64]
  %1 = input {index = 1, name = "y"} : f32[B,S,64]
  %2 = broadcast_in_dim(%0) {broadcast_dimensions = [2], shape = dims[B, S, 64]} : f32[B,S,64]
  %3 = add(%2, %1) : f32[B,S,64]
  return %3"#
    =>; not "(broadcast_in_dim ?a ?z)"
);

#[test]
fn tests_that_the_dot_general_consumer_is_left_alone() {
    let g = graph(DOT_OF_BROADCAST);
    assert_eq!(saturate(&g, &G).applied.values().sum::<usize>(), 0);
    insta::assert_snapshot!(before_after(&g, &G));
}

#[test]
fn tests_that_sinking_below_add_frees_both_expanded_operands() {
    let g = graph(ADD_OF_BROADCASTS);
    let (out, rep) = run(&g, &G);
    assert_eq!(
        out.op_count(),
        2,
        "add on the small tensors, then one broadcast"
    );
    assert!(rep
        .bytes_after
        .iter()
        .zip(&rep.bytes_before)
        .all(|(a, b)| a < b));
    insta::assert_snapshot!(before_after(&g, &G));
}

#[test]
fn tests_that_a_scalar_divisor_is_rebroadcast_to_the_small_shape() {
    insta::assert_snapshot!(before_after(&graph(DIVIDE_BY_SCALAR), &G));
}

#[test]
fn tests_that_a_chain_sharing_its_broadcasts_is_sunk_whole() {
    let g = graph(SHARED_IN_A_CHAIN);
    let (out, _) = run(&g, &G);
    let bcasts = out
        .order()
        .iter()
        .filter(|id| out.node(**id).kind() == ebb_ir::OpKind::BroadcastInDim)
        .count();
    assert_eq!(bcasts, 1, "a compound move frees both shared broadcasts");
    insta::assert_snapshot!(before_after(&g, &G));
}

#[test]
fn tests_that_shared_broadcasts_are_not_sunk() {
    let g = graph(SHARED_BROADCASTS);
    let x = saturate(&g, &G);
    assert!(
        x.applied["sink-broadcast/add"] > 0,
        "the rule proves the form"
    );
    let (out, rep) = run(&g, &G);
    assert_eq!(
        rep.classes_changed, 0,
        "extraction keeps the original: sinking adds bytes"
    );
    assert_eq!(ebb_ir::text::print(&out), ebb_ir::text::print(&g));
    insta::assert_snapshot!(before_after(&g, &G));
}

#[test]
fn tests_that_different_operand_shapes_are_left_alone() {
    insta::assert_snapshot!(before_after(&graph(DIFFERENT_OPERAND_SHAPES), &G));
}

#[test]
fn tests_that_every_rule_is_named_after_the_group() {
    for r in ebb_passes::rewrite::sink_broadcast::rules() {
        assert!(r.name.as_str().starts_with("sink-broadcast/"), "{}", r.name);
    }
}
