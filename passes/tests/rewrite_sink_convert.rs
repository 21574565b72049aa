//! Tests of the `sink_convert` rule group: proofs on small graphs (`rule_test!`), and
//! before/after IR snapshots, negative cases included.

use crate::rewrite_util;

use ebb_passes::rewrite::RuleGroup;
use rewrite_util::{before_after, graph, run};

const G: [RuleGroup; 1] = [RuleGroup::SinkConvert];

/// A bf16 activation widened to f32, then transposed and reshaped (e.g. heads split for
/// attention in a mixed-precision model).
const WIDEN_THEN_MOVE: &str = r#"
  %0 = input {index = 0, name = "x"} : bf16[B,S,64]
  %1 = convert(%0) {dtype = f32} : f32[B,S,64]
  %2 = transpose(%1) {permutation = [1, 0, 2]} : f32[S,B,64]
  %3 = reshape(%2) {shape = dims[S, B, 4, 16]} : f32[S,B,4,16]
  return %3"#;

/// A narrowing convert (f32 to bf16) before a transpose.
const NARROW_THEN_TRANSPOSE: &str = r#"
  %0 = input {index = 0, name = "x"} : f32[B,S,64]
  %1 = convert(%0) {dtype = bf16} : bf16[B,S,64]
  %2 = transpose(%1) {permutation = [1, 0, 2]} : bf16[S,B,64]
  return %2"#;

rule_test!(
    /// Tests that a widening convert is moved below a transpose and a reshape.
    sinks_a_widening_convert_below_data_movement, G, WIDEN_THEN_MOVE
    => "(convert ?t (reshape ?r (transpose ?p input:0)))"
);

rule_test!(
    /// Tests that a widening convert is moved below a slice (only the slice is widened).
    sinks_a_widening_convert_below_a_slice, G, r#"
  %0 = input {index = 0, name = "x"} : bf16[B,S,64]
  %1 = convert(%0) {dtype = f32} : f32[B,S,64]
  %2 = slice(%1) {limit_indices = dims[B, S, 32], start_indices = dims[0, 0, 0], strides = dims[1, 1, 1]} : f32[B,S,32]
  return %2"#
    => "(convert ?t (slice ?s input:0))"
);

rule_test!(
    /// Tests that the rules do not sink a narrowing convert.
    does_not_sink_a_narrowing_convert, G, NARROW_THEN_TRANSPOSE
    =>; not "(convert ?t (transpose ?p input:0))"
);

rule_test!(
    /// Tests that the rules do not move a widening convert below a broadcast (the expanded
    /// tensor would then be materialized twice).
    does_not_sink_a_convert_below_a_broadcast, G, r#"
  %0 = input {index = 0, name = "x"} : bf16[64]
  %1 = convert(%0) {dtype = f32} : f32[64]
  %2 = broadcast_in_dim(%1) {broadcast_dimensions = [2], shape = dims[B, S, 64]} : f32[B,S,64]
  return %2"#
    =>; not "(convert ?t (broadcast_in_dim ?a input:0))"
);

#[test]
fn tests_that_the_wide_copy_is_no_longer_materialized() {
    let g = graph(WIDEN_THEN_MOVE);
    let (_, rep) = run(&g, &G);
    assert!(
        rep.bytes_after
            .iter()
            .zip(&rep.bytes_before)
            .all(|(a, b)| a < b),
        "{rep:?}"
    );
    insta::assert_snapshot!(before_after(&g, &G));
}

#[test]
fn tests_that_a_narrowing_convert_is_left_alone() {
    insta::assert_snapshot!(before_after(&graph(NARROW_THEN_TRANSPOSE), &G));
}
