//! Small-step fast paths: which steps run on the caller's thread
//! (`ebb_runtime::exec::no_kernel_splits`: no kernel splits its work at the bindings), and
//! `gather`'s windows copied with their extents checked once (one element or one slice each),
//! against the values the spec gives.

use crate::common;
use common::*;
use ebb_runtime::exec::no_kernel_splits;

/// `x * x` over `f32[B,N]`, and its sum over `N`.
const ELEMENTWISE: &str = "graph @t {
  symbols B in [1, inf), N in [1, inf)
  %0 = input {index = 0, name = \"x\"} : f32[B,N]
  %1 = multiply(%0, %0) : f32[B,N]
  %2 = constant {value = dense<0.0> : f32} : f32[]
  %3 = reduce(%1, %2) {dimensions = [1]} : f32[B] {
    region @body {
      %0 = input {index = 0, name = \"\"} : f32[]
      %1 = input {index = 1, name = \"\"} : f32[]
      %2 = add(%0, %1) : f32[]
      return %2
    }
  }
  return %3
}";

/// A `while` whose body makes an `f32[N,N]` from its `f32[N]` carry.
const LOOP_WITH_A_SQUARE: &str = "graph @t {
  symbols N in [1, inf)
  %0 = input {index = 0, name = \"x\"} : f32[N]
  %1 = constant {value = dense<0> : i32} : i32[]
  %2:2 = while(%1, %0) : i32[], f32[N] {
    region @cond {
      %0 = input {index = 0, name = \"\"} : i32[]
      %1 = input {index = 1, name = \"\"} : f32[N]
      %2 = constant {value = dense<3> : i32} : i32[]
      %3 = compare(%0, %2) {comparison_direction = \"LT\"} : i1[]
      return %3
    }
    region @body {
      %0 = input {index = 0, name = \"\"} : i32[]
      %1 = input {index = 1, name = \"\"} : f32[N]
      %2 = constant {value = dense<1> : i32} : i32[]
      %3 = add(%0, %2) : i32[]
      %4 = broadcast_in_dim(%1) {broadcast_dimensions = [1], shape = dims[N, N]} : f32[N,N]
      %5 = constant {value = dense<0.0> : f32} : f32[]
      %6 = reduce(%4, %5) {dimensions = [0]} : f32[N] {
        region @body {
          %0 = input {index = 0, name = \"\"} : f32[]
          %1 = input {index = 1, name = \"\"} : f32[]
          %2 = add(%0, %1) : f32[]
          return %2
        }
      }
      return %3, %6
    }
  }
  return %2#1
}";

/// A step runs on the caller's thread exactly while every value stays below the kernels'
/// split threshold (2^15 elements), nested regions included; a dimension that does not
/// evaluate counts as a split.
#[test]
fn steps_below_every_split_threshold_run_on_the_callers_thread() {
    let g = graph(ELEMENTWISE);
    assert!(no_kernel_splits(&g, &bind(&[("B", 8), ("N", 64)])));
    assert!(no_kernel_splits(&g, &bind(&[("B", 8), ("N", 4095)])));
    assert!(!no_kernel_splits(&g, &bind(&[("B", 8), ("N", 4096)])));
    assert!(!no_kernel_splits(&g, &bind(&[("B", 8)])));
    let l = graph(LOOP_WITH_A_SQUARE);
    assert!(no_kernel_splits(&l, &bind(&[("N", 181)])));
    // 182² = 33 124 elements in the loop body only.
    assert!(!no_kernel_splits(&l, &bind(&[("N", 182)])));
}

/// A `dot_general` splits from 2^18 multiply-adds even when each of its values is small;
/// a `reduce_window` from 2^15 elements times window size.
#[test]
fn gemms_and_windowed_reductions_count_their_work_not_their_values() {
    let dot = |m: usize| {
        graph(&format!(
            "graph @t {{
  %0 = input {{index = 0, name = \"l\"}} : f32[{m},64]
  %1 = input {{index = 1, name = \"r\"}} : f32[64,64]
  %2 = dot_general(%0, %1) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : f32[{m},64]
  return %2
}}"
        ))
    };
    // 63·64·64 = 258 048 multiply-adds; 64·64·64 = 2^18.
    assert!(no_kernel_splits(&dot(63), &bind(&[])));
    assert!(!no_kernel_splits(&dot(64), &bind(&[])));
    let cumsum = |s: usize| {
        graph(&format!(
            "graph @t {{
  %0 = input {{index = 0, name = \"x\"}} : f32[8,{s}]
  %1 = constant {{value = dense<0.0> : f32}} : f32[]
  %2 = reduce_window(%0, %1) {{padding = dims[0, 0, {p}, 0], window_dimensions = dims[1, {s}]}} : f32[8,{s}] {{
    region @body {{
      %0 = input {{index = 0, name = \"\"}} : f32[]
      %1 = input {{index = 1, name = \"\"}} : f32[]
      %2 = add(%0, %1) : f32[]
      return %2
    }}
  }}
  return %2
}}",
            p = s - 1
        ))
    };
    // 8·63·63 = 31 752 < 2^15 <= 8·64·64.
    assert!(no_kernel_splits(&cumsum(63), &bind(&[])));
    assert!(!no_kernel_splits(&cumsum(64), &bind(&[])));
}

/// `take_along_axis`: one-element windows with batching dimensions (each a single element
/// copied).
#[test]
fn gather_of_one_element_windows() {
    let src = "graph @t {
  %0 = input {index = 0, name = \"x\"} : f32[3,5]
  %1 = input {index = 1, name = \"i\"} : i32[3,4,1]
  %2 = gather(%0, %1) {collapsed_slice_dims = [1], index_vector_dim = 2, indices_are_sorted = false, offset_dims = [], operand_batching_dims = [0], slice_sizes = dims[1, 1], start_index_map = [1], start_indices_batching_dims = [0]} : f32[3,4]
  return %2
}";
    let x: Vec<f32> = (0..15).map(|v| v as f32 * 1.5).collect();
    // 7 and -2 are clamped to 4 and 0 (spec).
    let idx = [4, 0, 2, 7, 1, 1, 3, -2, 0, 4, 4, 2];
    let got = run1(src, &[], vec![f32t(&[3, 5], &x), i32t(&[3, 4, 1], &idx)]);
    let want: Vec<f64> = idx
        .iter()
        .enumerate()
        .map(|(k, &i)| f64::from(x[(k / 4) * 5 + i.clamp(0, 4) as usize]))
        .collect();
    assert_eq!(got.to_f64_vec(), want);
}

/// An embedding lookup (row windows, one slice each, indices clamped) and column windows
/// (not row-major in the operand: element by element), against the spec's values.
#[test]
fn gather_of_rows_and_of_strided_windows() {
    let rows = "graph @t {
  %0 = input {index = 0, name = \"table\"} : f32[10,3]
  %1 = input {index = 1, name = \"ids\"} : i32[4]
  %2 = gather(%0, %1) {collapsed_slice_dims = [0], index_vector_dim = 1, indices_are_sorted = false, offset_dims = [1], slice_sizes = dims[1, 3], start_index_map = [0]} : f32[4,3]
  return %2
}";
    let table: Vec<f32> = (0..30).map(|v| v as f32 - 7.25).collect();
    let ids = [3, 12, -1, 9];
    let got = run1(rows, &[], vec![f32t(&[10, 3], &table), i32t(&[4], &ids)]);
    let want: Vec<f64> = ids
        .iter()
        .flat_map(|&i| (0..3).map(move |j| (i.clamp(0, 9) as usize, j)))
        .map(|(r, j)| f64::from(table[r * 3 + j]))
        .collect();
    assert_eq!(got.to_f64_vec(), want);
    let cols = "graph @t {
  %0 = input {index = 0, name = \"x\"} : f32[4,6]
  %1 = input {index = 1, name = \"start\"} : i32[3,1]
  %2 = gather(%0, %1) {collapsed_slice_dims = [], index_vector_dim = 1, indices_are_sorted = false, offset_dims = [1, 2], slice_sizes = dims[4, 2], start_index_map = [1]} : f32[3,4,2]
  return %2
}";
    let x: Vec<f32> = (0..24).map(|v| v as f32 * 0.5).collect();
    let starts = [0, 5, 2];
    let got = run1(cols, &[], vec![f32t(&[4, 6], &x), i32t(&[3, 1], &starts)]);
    let mut want = Vec::new();
    for &s in &starts {
        for i in 0..4 {
            for j in 0..2 {
                want.push(f64::from(x[i * 6 + s.clamp(0, 4) as usize + j]));
            }
        }
    }
    assert_eq!(got.to_f64_vec(), want);
}
