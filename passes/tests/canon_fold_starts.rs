//! Tests of rule 9 of the `fold` pass: the start indices of `dynamic_slice` and
//! `dynamic_update_slice` read through the index arithmetic JAX builds around a scan's loop
//! counter (before/after IR snapshot, the cases left alone, and bit-identical results at
//! every counter value, out-of-range ones included).

use ebb_ir::dim::BindingsExt;
use ebb_ir::{Bindings, Graph};
use ebb_passes::canon::Fold;
use ebb_passes::manager::{Pass, PassContext, PassResult};
use ebb_runtime::{execute, program_schedule, Data, Scalar, Tensor};
use ebb_testkit::{before_after, graph};

/// One step of a scan as JAX exports it: the start vector `[c, 0, 0]` clamped to
/// `[0, S - 1]` (`dynamic_index_in_dim`) split into scalars for a `dynamic_slice`, the
/// reversed scan's `S - 1 - c` through a clamp whose upper bound is computed
/// (`[S, B, 4] - [1, B, 4]`), and a `dynamic_update_slice` at `c`.
const SCAN_STEP: &str = r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[S,B,4]
  %c = input {index = 1, name = "c"} : i32[]
  %c1 = reshape(%c) {shape = dims[1]} : i32[1]
  %z1 = constant {value = dense<0> : i32} : i32[1]
  %v = concatenate(%c1, %z1, %z1) {dimension = 0} : i32[3]
  %hi = dim_constant {values = dims[S - 1, 0, 0]} : i32[3]
  %zero3 = constant {value = dense<0> : i32} : i32[3]
  %cl = clamp(%zero3, %v, %hi) : i32[3]
  %s0 = slice(%cl) {limit_indices = dims[1], start_indices = dims[0], strides = dims[1]} : i32[1]
  %i0 = reshape(%s0) {shape = dims[]} : i32[]
  %s1 = slice(%cl) {limit_indices = dims[2], start_indices = dims[1], strides = dims[1]} : i32[1]
  %i1 = reshape(%s1) {shape = dims[]} : i32[]
  %s2 = slice(%cl) {limit_indices = dims[3], start_indices = dims[2], strides = dims[1]} : i32[1]
  %i2 = reshape(%s2) {shape = dims[]} : i32[]
  %row = dynamic_slice(%x, %i0, %i1, %i2) {slice_sizes = dims[1, B, 4]} : f32[1,B,4]
  %n = dim_constant {values = dims[S]} : i32[]
  %one = constant {value = dense<1> : i32} : i32[]
  %nc = subtract(%n, %c) : i32[]
  %r = subtract(%nc, %one) : i32[]
  %r1 = reshape(%r) {shape = dims[1]} : i32[1]
  %w = concatenate(%r1, %z1, %z1) {dimension = 0} : i32[3]
  %n1 = reshape(%n) {shape = dims[1]} : i32[1]
  %b1 = dim_constant {values = dims[B]} : i32[1]
  %f1 = constant {value = dense<4> : i32} : i32[1]
  %dims = concatenate(%n1, %b1, %f1) {dimension = 0} : i32[3]
  %size = dim_constant {values = dims[1, B, 4]} : i32[3]
  %room = subtract(%dims, %size) : i32[3]
  %cw = clamp(%zero3, %w, %room) : i32[3]
  %t0 = slice(%cw) {limit_indices = dims[1], start_indices = dims[0], strides = dims[1]} : i32[1]
  %j0 = reshape(%t0) {shape = dims[]} : i32[]
  %t1 = slice(%cw) {limit_indices = dims[2], start_indices = dims[1], strides = dims[1]} : i32[1]
  %j1 = reshape(%t1) {shape = dims[]} : i32[]
  %t2 = slice(%cw) {limit_indices = dims[3], start_indices = dims[2], strides = dims[1]} : i32[1]
  %j2 = reshape(%t2) {shape = dims[]} : i32[]
  %back = dynamic_slice(%x, %j0, %j1, %j2) {slice_sizes = dims[1, B, 4]} : f32[1,B,4]
  %sum = add(%row, %back) : f32[1,B,4]
  %z = constant {value = dense<0> : i32} : i32[]
  %y = dynamic_update_slice(%x, %sum, %c, %z, %z) : f32[S,B,4]
  return %y, %row, %back
}"#;

/// Tests that every start of the scan step resolves: the forward slice and the update read
/// the counter, the reversed slice reads `S - 1 - c`, and the other starts are the constant
/// 0 (the clamps to `[0, S - 1]` are the ops' own clamping).
#[test]
fn scan_starts_read_the_counter() {
    let (s, r) = before_after(SCAN_STEP, &Fold::default());
    // Three starts of each `dynamic_slice`; the update's starts are already scalars.
    assert_eq!(r, PassResult::changes(6));
    let after = s.split("// after").nth(1).unwrap();
    assert!(
        after.contains("dynamic_slice(%0, %1, "),
        "the forward slice reads the counter: {after}"
    );
    insta::assert_snapshot!(s);
}

/// Tests the cases left alone: a clamp narrower than the op's own (`[0, S - 2]`), a lower
/// bound above 0, and a start computed from data.
#[test]
fn narrower_clamps_and_data_dependent_starts_stay() {
    let (_, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[S,4]
  %c = input {index = 1, name = "c"} : i32[]
  %k = input {index = 2, name = "k"} : i32[2]
  %c1 = reshape(%c) {shape = dims[1]} : i32[1]
  %z1 = constant {value = dense<0> : i32} : i32[1]
  %v = concatenate(%c1, %z1) {dimension = 0} : i32[2]
  %hi = dim_constant {values = dims[S - 2, 0]} : i32[2]
  %lo = constant {value = dense<1> : i32} : i32[2]
  %zero2 = constant {value = dense<0> : i32} : i32[2]
  %narrow = clamp(%zero2, %v, %hi) : i32[2]
  %a = slice(%narrow) {limit_indices = dims[1], start_indices = dims[0], strides = dims[1]} : i32[1]
  %a0 = reshape(%a) {shape = dims[]} : i32[]
  %raised = clamp(%lo, %v, %hi) : i32[2]
  %b = slice(%raised) {limit_indices = dims[1], start_indices = dims[0], strides = dims[1]} : i32[1]
  %b0 = reshape(%b) {shape = dims[]} : i32[]
  %d = slice(%k) {limit_indices = dims[1], start_indices = dims[0], strides = dims[1]} : i32[1]
  %d0 = reshape(%d) {shape = dims[]} : i32[]
  %z = constant {value = dense<0> : i32} : i32[]
  %p = dynamic_slice(%x, %a0, %z) {slice_sizes = dims[1, 4]} : f32[1,4]
  %q = dynamic_slice(%x, %b0, %z) {slice_sizes = dims[1, 4]} : f32[1,4]
  %u = dynamic_slice(%x, %d0, %z) {slice_sizes = dims[1, 4]} : f32[1,4]
  return %p, %q, %u
}"#,
        &Fold::default(),
    );
    assert_eq!(r, PassResult::unchanged());
}

/// The outputs of `g` at `S = 5, B = 2` and loop counter `c`, `x` holding distinct values.
fn run(g: &Graph, c: i32) -> Vec<Tensor> {
    let b = Bindings::from_pairs(&[("S", 5), ("B", 2)]);
    let x: Vec<f32> = (0..5 * 2 * 4).map(|i| i as f32 * 0.5 - 3.0).collect();
    let inputs = vec![
        Tensor::new(vec![5, 2, 4], Data::F32(x.into())).unwrap(),
        Tensor::scalar(Scalar::I32(c)),
    ];
    execute(g, &program_schedule(g), &b, inputs).unwrap().0
}

/// Tests that the folded scan step computes bit-identical results to the original at every
/// counter value, those outside `[0, S)` included (where the dropped clamps would matter if
/// the ops did not clamp their starts), and that folding again changes nothing.
#[test]
fn folded_starts_are_bit_identical_at_every_counter() {
    let before = graph(SCAN_STEP);
    let mut after = before.clone();
    let r = Fold::default()
        .run(&mut after, &mut PassContext::new())
        .unwrap();
    assert!(r.changes > 0);
    for c in -3..9 {
        let (p, q) = (run(&before, c), run(&after, c));
        assert_eq!(p.len(), q.len());
        for (k, (a, b)) in p.iter().zip(&q).enumerate() {
            assert_eq!(a.shape(), b.shape(), "c = {c}, output {k}");
            assert_eq!(a.to_le_bytes(), b.to_le_bytes(), "c = {c}, output {k}");
        }
    }
    let again = Fold::default()
        .run(&mut after, &mut PassContext::new())
        .unwrap();
    assert_eq!(again, PassResult::unchanged());
}
