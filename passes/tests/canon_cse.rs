//! Tests of the `cse` pass: before/after IR snapshots on small graphs.

use ebb_ir::text::{parse, print};
use ebb_passes::canon::Cse;
use ebb_passes::manager::{Pass, PassContext, PassResult};
use ebb_testkit::before_after;

/// Tests that identical ops are merged into the first one in program order, transitively in
/// one sweep (a merge makes the users of the two copies identical too), graph outputs
/// included.
#[test]
fn merges_identical_ops_transitively() {
    let (s, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[B,S]
  %a1 = exponential(%x) : f32[B,S] loc("first")
  %a2 = exponential(%x) : f32[B,S] loc("second")
  %b1 = negate(%a1) : f32[B,S]
  %b2 = negate(%a2) : f32[B,S]
  %c = add(%b1, %b2) : f32[B,S]
  return %c, %b2 as "b2"
}"#,
        &Cse,
    );
    assert_eq!(r, PassResult::changes(2));
    insta::assert_snapshot!(s);
}

/// Tests that equal constants merge, while constants with different values (`0.0` and
/// `-0.0` differ by bits), types or operand order do not.
#[test]
fn merges_equal_constants_only() {
    let (s, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[4]
  %z1 = constant {value = dense<0.0> : f32} : f32[]
  %z2 = constant {value = dense<0.0> : f32} : f32[]
  %nz = constant {value = dense<-0.0> : f32} : f32[]
  %zv = constant {value = dense<0.0> : f32} : f32[4]
  %b1 = broadcast_in_dim(%z1) {broadcast_dimensions = [], shape = dims[4]} : f32[4]
  %b2 = broadcast_in_dim(%z2) {broadcast_dimensions = [], shape = dims[4]} : f32[4]
  %b3 = broadcast_in_dim(%nz) {broadcast_dimensions = [], shape = dims[4]} : f32[4]
  %s1 = subtract(%x, %b1) : f32[4]
  %s2 = subtract(%b2, %x) : f32[4]
  return %s1, %s2, %b3, %zv
}"#,
        &Cse,
    );
    assert_eq!(r, PassResult::changes(2), "z2 into z1, then b2 into b1");
    insta::assert_snapshot!(s);
}

/// Tests that CSE does not merge ops with different attributes.
#[test]
fn does_not_merge_ops_with_different_attributes() {
    let (s, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[4,4]
  %y = input {index = 1, name = "y"} : f32[4,4]
  %gt = compare(%x, %y) {compare_type = "FLOAT", comparison_direction = "GT"} : i1[4,4]
  %lt = compare(%x, %y) {compare_type = "FLOAT", comparison_direction = "LT"} : i1[4,4]
  %t1 = transpose(%x) {permutation = [1, 0]} : f32[4,4]
  %t2 = transpose(%x) {permutation = [0, 1]} : f32[4,4]
  %r1 = reshape(%x) {shape = dims[16]} : f32[16]
  %r2 = reshape(%x) {shape = dims[2, 8]} : f32[2,8]
  return %gt, %lt, %t1, %t2, %r1, %r2
}"#,
        &Cse,
    );
    assert_eq!(r, PassResult::unchanged());
    insta::assert_snapshot!(s);
}

/// Tests that CSE does not merge side-effecting `custom_call`s or `optimization_barrier`s,
/// but does merge pure `custom_call`s.
#[test]
fn does_not_merge_side_effects_or_barriers() {
    let (s, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[4]
  %p1 = custom_call(%x) {call_target_name = "host_callback"} : f32[4]
  %p2 = custom_call(%x) {call_target_name = "host_callback"} : f32[4]
  %o1:2 = optimization_barrier(%x, %p1) : f32[4], f32[4]
  %o2:2 = optimization_barrier(%x, %p1) : f32[4], f32[4]
  %s1 = custom_call(%x) {call_target_name = "Sharding"} : f32[4]
  %s2 = custom_call(%x) {call_target_name = "Sharding"} : f32[4]
  return %p2, %o1#0, %o2#1, %s1, %s2
}"#,
        &Cse,
    );
    assert_eq!(
        r,
        PassResult::changes(1),
        "only the pure Sharding calls merge"
    );
    insta::assert_snapshot!(s);
}

/// Tests that ops with structurally identical regions merge (locations ignored), ops whose
/// regions differ do not, and duplicates inside a region merge.
#[test]
fn merges_reductions_with_identical_bodies_only() {
    let (s, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[B,4]
  %zero = constant {value = dense<0.0> : f32} : f32[]
  %sum1 = reduce(%x, %zero) {dimensions = [1]} : f32[B] {
    region @body {
      %a = input {index = 0, name = ""} : f32[]
      %b = input {index = 1, name = ""} : f32[]
      %s = add(%a, %b) : f32[] loc("model.py:10")
      return %s
    }
  }
  %sum2 = reduce(%x, %zero) {dimensions = [1]} : f32[B] {
    region @body {
      %a = input {index = 0, name = ""} : f32[]
      %b = input {index = 1, name = ""} : f32[]
      %s = add(%a, %b) : f32[] loc("model.py:20")
      %t = add(%a, %b) : f32[] loc("model.py:21")
      return %t
    }
  }
  %max = reduce(%x, %zero) {dimensions = [1]} : f32[B] {
    region @body {
      %a = input {index = 0, name = ""} : f32[]
      %b = input {index = 1, name = ""} : f32[]
      %m = maximum(%a, %b) : f32[]
      return %m
    }
  }
  return %sum1, %sum2, %max
}"#,
        &Cse,
    );
    assert_eq!(
        r,
        PassResult::changes(3),
        "the duplicate add in sum2's body, then sum2 (with its add)"
    );
    insta::assert_snapshot!(s);
}

/// Tests that CSE is idempotent: a second run changes nothing.
#[test]
fn second_run_changes_nothing() {
    let mut g = parse(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[4]
  %a1 = exponential(%x) : f32[4]
  %a2 = exponential(%x) : f32[4]
  %c = add(%a1, %a2) : f32[4]
  return %c
}"#,
    )
    .unwrap();
    assert_eq!(
        Cse.run(&mut g, &mut PassContext::new()).unwrap(),
        PassResult::changes(1)
    );
    let once = print(&g);
    assert_eq!(
        Cse.run(&mut g, &mut PassContext::new()).unwrap(),
        PassResult::unchanged()
    );
    assert_eq!(print(&g), once);
}
