//! Tests of the `dce` pass: before/after IR snapshots on small graphs.

use ebb_ir::text::{parse, print};
use ebb_passes::canon::Dce;
use ebb_passes::manager::{Pass, PassContext, PassResult};
use ebb_testkit::before_after;

/// Tests that ops not reaching the outputs are removed transitively, and inputs are kept.
#[test]
fn removes_unused_chains_and_keeps_inputs() {
    let (s, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[B,4]
  %unused = input {index = 1, name = "unused"} : f32[4]
  %a = exponential(%x) : f32[B,4]
  %b = negate(%a) : f32[B,4]
  %c = add(%b, %a) : f32[B,4]
  %d = sqrt(%x) : f32[B,4]
  return %d as "out"
}"#,
        &Dce,
    );
    assert_eq!(r, PassResult::changes(3));
    insta::assert_snapshot!(s);
}

/// Tests that DCE does not remove a side-effecting `custom_call` (nor what it reads), but
/// removes an unused pure one.
#[test]
fn does_not_remove_a_side_effecting_custom_call() {
    let (s, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[4]
  %a = exponential(%x) : f32[4]
  %p:0 = custom_call(%a) {call_target_name = "print_tensor"} : ()
  %q = custom_call(%x) {call_target_name = "Sharding"} : f32[4]
  %f:0 = custom_call(%x) {call_target_name = "Sharding", has_side_effect = true} : ()
  return %x
}"#,
        &Dce,
    );
    assert_eq!(
        r,
        PassResult::changes(1),
        "only the pure Sharding call goes"
    );
    insta::assert_snapshot!(s);
}

/// Tests that a multi-result op stays when only one of its results is used.
#[test]
fn keeps_multi_result_ops_with_one_used_result() {
    let (s, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[4]
  %y = input {index = 1, name = "y"} : f32[4]
  %s:2 = sort(%x, %y) {dimension = 0, is_stable = true} : f32[4], f32[4] {
    region @cmp {
      %a = input {index = 0, name = ""} : f32[]
      %b = input {index = 1, name = ""} : f32[]
      %c = input {index = 2, name = ""} : f32[]
      %d = input {index = 3, name = ""} : f32[]
      %e = negate(%c) : f32[]
      %lt = compare(%a, %b) {compare_type = "FLOAT", comparison_direction = "LT"} : i1[]
      return %lt
    }
  }
  %t = exponential(%s#0) : f32[4]
  return %s#1
}"#,
        &Dce,
    );
    assert_eq!(
        r,
        PassResult::changes(2),
        "the exponential, and the dead negate inside the comparator"
    );
    insta::assert_snapshot!(s);
}

/// Tests that dead ops inside a region are removed (the region's returned values are its
/// roots) and that ops with regions are removed whole when unused, inner ops counted.
#[test]
fn cleans_regions_and_removes_unused_region_ops() {
    let (s, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[B,4]
  %zero = constant {value = dense<0.0> : f32} : f32[]
  %sum = reduce(%x, %zero) {dimensions = [1]} : f32[B] {
    region @body {
      %a = input {index = 0, name = ""} : f32[]
      %b = input {index = 1, name = ""} : f32[]
      %dead = multiply(%a, %b) : f32[]
      %s = add(%a, %b) : f32[]
      return %s
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
  return %sum
}"#,
        &Dce,
    );
    assert_eq!(
        r,
        PassResult::changes(3),
        "the unused reduce and its maximum, and the dead multiply"
    );
    insta::assert_snapshot!(s);
}

/// Tests that DCE does not change a graph whose ops are all live, and that it is idempotent.
#[test]
fn does_not_change_a_fully_live_graph() {
    let text = r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[4]
  %a = exponential(%x) : f32[4]
  %b = add(%a, %x) : f32[4]
  return %b, %a
}"#;
    let mut g = parse(text).unwrap();
    let before = print(&g);
    assert_eq!(
        Dce.run(&mut g, &mut PassContext::new()).unwrap(),
        PassResult::unchanged()
    );
    assert_eq!(print(&g), before);
}
