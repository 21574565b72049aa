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

/// A count-down loop over an `i64` counter starting at `N`: the condition is
/// `compare(bound, counter)` with the bound first, `N - 3 < counter` (`{cond}` the bound's
/// value: `%3`, or `%4 = add(%3, 0)`, which the executor cannot evaluate without running the
/// region); the body adds 1.0 to an accumulator each turn.
fn count_down(direct: bool) -> String {
    let (extra, bound) = if direct {
        ("", "%3")
    } else {
        (
            "%5 = constant {value = dense<0> : i64} : i64[]\n      %4 = add(%3, %5) : i64[]",
            "%4",
        )
    };
    format!(
        "graph @t {{
  symbols N in [1, inf)
  %0 = dim_constant {{values = dims[N]}} : i64[]
  %1 = constant {{value = dense<0.0> : f32}} : f32[]
  %2:2 = while(%0, %1) : i64[], f32[] {{
    region @cond {{
      %0 = input {{index = 0, name = \"\"}} : i64[]
      %1 = input {{index = 1, name = \"\"}} : f32[]
      %3 = dim_constant {{values = dims[N - 3]}} : i64[]
      {extra}
      %6 = compare({bound}, %0) {{comparison_direction = \"LT\"}} : i1[]
      return %6
    }}
    region @body {{
      %0 = input {{index = 0, name = \"\"}} : i64[]
      %1 = input {{index = 1, name = \"\"}} : f32[]
      %2 = constant {{value = dense<1> : i64}} : i64[]
      %3 = subtract(%0, %2) : i64[]
      %4 = constant {{value = dense<1.0> : f32}} : f32[]
      %5 = add(%1, %4) : f32[]
      return %3, %5
    }}
  }}
  return %2#0, %2#1
}}"
    )
}

/// Tests a loop whose condition compares a symbolic bound (first operand) with an `i64`
/// counter: it takes three turns at every `N`, whether the condition is evaluated directly
/// or by running the region.
#[test]
fn while_condition_on_a_counter_takes_the_same_turns() {
    for n in [1, 3, 7] {
        for direct in [true, false] {
            let out = run(&count_down(direct), &[("N", n)], vec![]).unwrap();
            assert_eq!(
                out[0].data().to_i64_vec(),
                vec![n - 3],
                "N = {n}, direct {direct}"
            );
            assert_eq!(out[1].to_f64_vec(), vec![3.0], "N = {n}, direct {direct}");
        }
    }
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

/// `h' = h·x_t + x_t` over the rows of `xs`, each `h'` stacked into `ys` by a
/// `dynamic_update_slice` on the carried argument; the body's carried arguments are donated
/// (`{donate}`: as `ebb_passes::donate` marks them) or not (empty). Returns the stacked result
/// and the zeros it started from.
fn scan(donate: bool) -> String {
    let d = |i: usize| {
        if donate {
            format!("aliasing_output = {i}, ")
        } else {
            String::new()
        }
    };
    format!(
        r#"graph @scan {{
  symbols N in [1, inf), S in [1, inf)
  %xs = input {{index = 0, name = "xs"}} : f32[S,N]
  %i0 = constant {{value = dense<0> : i32}} : i32[]
  %z = constant {{value = dense<0.0> : f32}} : f32[]
  %h0 = broadcast_in_dim(%z) {{broadcast_dimensions = [], shape = dims[N]}} : f32[N]
  %ys0 = broadcast_in_dim(%z) {{broadcast_dimensions = [], shape = dims[S, N]}} : f32[S,N]
  %w:4 = while(%i0, %h0, %ys0, %xs) : i32[], f32[N], f32[S,N], f32[S,N] {{
    region @cond {{
      %0 = input {{index = 0}} : i32[]
      %1 = input {{index = 1}} : f32[N]
      %2 = input {{index = 2}} : f32[S,N]
      %3 = input {{index = 3}} : f32[S,N]
      %4 = dim_constant {{values = dims[S]}} : i32[]
      %5 = compare(%0, %4) {{comparison_direction = "LT"}} : i1[]
      return %5
    }}
    region @body {{
      %0 = input {{{}index = 0}} : i32[]
      %1 = input {{{}index = 1}} : f32[N]
      %2 = input {{{}index = 2}} : f32[S,N]
      %3 = input {{index = 3}} : f32[S,N]
      %4 = constant {{value = dense<0> : i32}} : i32[]
      %5 = dynamic_slice(%3, %0, %4) {{slice_sizes = dims[1, N]}} : f32[1,N]
      %6 = reshape(%5) {{shape = dims[N]}} : f32[N]
      %7 = multiply(%1, %6) : f32[N]
      %8 = add(%7, %6) : f32[N]
      %9 = broadcast_in_dim(%8) {{broadcast_dimensions = [1], shape = dims[1, N]}} : f32[1,N]
      %10 = dynamic_update_slice(%2, %9, %0, %4) : f32[S,N]
      %11 = constant {{value = dense<1> : i32}} : i32[]
      %12 = add(%0, %11) : i32[]
      return %12, %8, %10, %3
    }}
  }}
  return %w#2, %ys0
}}"#,
        d(0),
        d(1),
        d(2)
    )
}

/// Tests a scan over a symbolic length whose body updates the stacked result in place: the
/// rows are each step's state, the zeros the loop started from (still held by the graph
/// output) are left unchanged, the results equal the run without donation, and the loop is
/// charged one stacked result less (the `dynamic_update_slice` writes into its donated
/// argument instead of a second buffer) and one state less (the loop's state result takes
/// its operand's buffer, `ebb_ir::op::in_place_writes`).
#[test]
fn a_scan_updates_its_stacked_result_in_place() {
    let xs = f32t(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
    let b = [("N", 2), ("S", 3)];
    let (out, donated) = run_with_stats(&scan(true), &b, vec![xs.clone()]).unwrap();
    // h: [0,0] -> [1,2] -> [1·3+3, 2·4+4] = [6,12] -> [6·5+5, 12·6+6] = [35,78]
    assert_eq!(out[0].to_f64_vec(), vec![1., 2., 6., 12., 35., 78.]);
    assert_eq!(out[1].to_f64_vec(), vec![0.; 6]);
    let (plain, kept) = run_with_stats(&scan(false), &b, vec![xs]).unwrap();
    assert_eq!(plain[0].to_f64_vec(), out[0].to_f64_vec());
    // One stacked result less, and the state's result in its dying splat's buffer (the
    // zeros of the stacked result are a graph output: that result gets its own).
    assert_eq!(kept.peak_bytes - donated.peak_bytes, 4 * 2 * 3 + 4 * 2);
}
