//! Tests of `while`, `sort` and `optimization_barrier`, including the memory the executor
//! charges for a loop's regions.

use crate::common;
use common::*;
use ebb_runtime::{Data, Tensor};

const SUM_LOOP: &str = "graph @t {
  symbols N in [1, inf)
  %0 = input {index = 0, name = \"x\"} : f32[N]
  %1 = constant {value = dense<0> : i32} : i32[]
  %2 = constant {value = dense<0.0> : f32} : f32[N]
  %3:3 = while(%1, %2, %0) : i32[], f32[N], f32[N] {
    region @cond {
      %0 = input {index = 0, name = \"\"} : i32[]
      %1 = input {index = 1, name = \"\"} : f32[N]
      %2 = input {index = 2, name = \"\"} : f32[N]
      %3 = constant {value = dense<3> : i32} : i32[]
      %4 = compare(%0, %3) {comparison_direction = \"LT\"} : i1[]
      return %4
    }
    region @body {
      %0 = input {index = 0, name = \"\"} : i32[]
      %1 = input {index = 1, name = \"\"} : f32[N]
      %2 = input {index = 2, name = \"\"} : f32[N]
      %3 = constant {value = dense<1> : i32} : i32[]
      %4 = add(%0, %3) : i32[]
      %5 = add(%1, %2) : f32[N]
      %6 = multiply(%5, %2) : f32[N]
      return %4, %6, %2
    }
  }
  return %3#0, %3#1
}";

/// Tests a `while` loop run three times (acc = (acc + x) * x), with the loop-invariant
/// value passed through, and the memory charged at the loop: the body's peak minus its inputs
/// (at `%6`: the new counter `%4`, 4 bytes, plus `%5` and `%6`, 4N bytes each).
#[test]
fn while_loop_iterates_and_charges_its_body() {
    let (out, stats) =
        run_with_stats(SUM_LOOP, &[("N", 2)], vec![f32t(&[2], &[1.0, 2.0])]).unwrap();
    assert_eq!(out[0].as_i32(), Some(&[3][..]));
    // x = 1: acc 0 -> 1 -> 2 -> 3; x = 2: 0 -> 4 -> 12 -> 28
    assert_eq!(out[1].to_f64_vec(), vec![3.0, 28.0]);
    // points: constant (4), constant (8), while (results 4 + 8 + 8, body transient 20);
    // graph inputs 8 bytes
    let at_while = 8 + 4 + 8 + (4 + 8 + 8) + 20;
    assert_eq!(stats.resident_bytes, vec![8 + 4, 8 + 4 + 8, at_while]);
    assert_eq!(stats.peak_bytes, at_while);
}

/// Tests sort with a `GT` comparator (descending) on the keys, carrying a second operand
/// along (argsort), stable for equal keys.
#[test]
fn sort_descending_with_payload_is_stable() {
    let src = "graph @t {
  %0 = input {index = 0, name = \"k\"} : f32[2,4]
  %1 = iota {dtype = i32, iota_dimension = 1, shape = dims[2, 4]} : i32[2,4]
  %2:2 = sort(%0, %1) {dimension = 1, is_stable = true} : f32[2,4], i32[2,4] {
    region @comparator {
      %0 = input {index = 0, name = \"\"} : f32[]
      %1 = input {index = 1, name = \"\"} : f32[]
      %2 = input {index = 2, name = \"\"} : i32[]
      %3 = input {index = 3, name = \"\"} : i32[]
      %4 = compare(%0, %1) {comparison_direction = \"GT\"} : i1[]
      return %4
    }
  }
  return %2#0, %2#1
}";
    let out = run(
        src,
        &[],
        vec![f32t(&[2, 4], &[1., 3., 2., 3., 0., -1., 5., 0.])],
    )
    .unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![3., 3., 2., 1., 5., 0., 0., -1.]);
    assert_eq!(out[1].as_i32(), Some(&[1, 3, 2, 0, 2, 0, 3, 1][..]));
}

/// Tests sort along dimension 0 with a comparator that is not a plain key comparison
/// (ascending by absolute value), which runs through the region.
#[test]
fn sort_with_a_general_comparator() {
    let src = "graph @t {
  %0 = input {index = 0, name = \"k\"} : f32[4,2]
  %1 = sort(%0) {dimension = 0, is_stable = true} : f32[4,2] {
    region @comparator {
      %0 = input {index = 0, name = \"\"} : f32[]
      %1 = input {index = 1, name = \"\"} : f32[]
      %2 = abs(%0) : f32[]
      %3 = abs(%1) : f32[]
      %4 = compare(%2, %3) {comparison_direction = \"LT\"} : i1[]
      return %4
    }
  }
  return %1
}";
    let got = run1(
        src,
        &[],
        vec![f32t(&[4, 2], &[-3., 1., 2., -4., -1., 0., 4., 2.])],
    );
    assert_eq!(got.to_f64_vec(), vec![-1., 0., 2., 1., -3., 2., 4., -4.]);
}

/// Tests that optimization_barrier passes its operands through unchanged.
#[test]
fn optimization_barrier_is_the_identity() {
    let src = "graph @t {
  %0 = input {index = 0, name = \"a\"} : f32[2]
  %1 = input {index = 1, name = \"b\"} : i1[]
  %2:2 = optimization_barrier(%0, %1) : f32[2], i1[]
  return %2#1, %2#0
}";
    let b = Tensor::new(vec![], Data::I1(vec![true].into())).unwrap();
    let out = run(src, &[], vec![f32t(&[2], &[1., 2.]), b]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![1.0]);
    assert_eq!(out[1].to_f64_vec(), vec![1.0, 2.0]);
}
