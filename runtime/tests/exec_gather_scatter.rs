//! Tests of `gather` and `scatter`: the StableHLO spec's own examples (batching dimensions,
//! `index_vector_dim`, out-of-bounds indices), embedding lookups and their gradients, and the
//! recognized and general update bodies.

use crate::common;
use common::*;

const SPEC_INDICES: [i64; 24] = [
    0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 0, 9, 0, 0, 2, 1, 2, 2, 1, 2, 0, 1, 1, 0,
];

fn operand_1_to_48() -> ebb_runtime::Tensor {
    i64t(&[2, 3, 4, 2], &(1..=48).collect::<Vec<i64>>())
}

/// Tests the gather example of the StableHLO spec (operand and start-indices batching
/// dimensions, a two-component index vector, clamping of the out-of-range index 9).
#[test]
fn gather_spec_example() {
    let src = "graph @t {
  %0 = input {index = 0, name = \"operand\"} : i64[2,3,4,2]
  %1 = input {index = 1, name = \"start_indices\"} : i64[2,2,3,2]
  %2 = gather(%0, %1) {collapsed_slice_dims = [1], index_vector_dim = 3, indices_are_sorted = false, offset_dims = [3, 4], operand_batching_dims = [0], slice_sizes = dims[1, 1, 2, 2], start_index_map = [2, 1], start_indices_batching_dims = [1]} : i64[2,2,3,2,2]
  return %2
}";
    let got = run1(
        src,
        &[],
        vec![operand_1_to_48(), i64t(&[2, 2, 3, 2], &SPEC_INDICES)],
    );
    #[rustfmt::skip]
    let want: Vec<f64> = [
        1, 2, 3, 4,   3, 4, 5, 6,   13, 14, 15, 16,
        33, 34, 35, 36,   35, 36, 37, 38,   41, 42, 43, 44,
        1, 2, 3, 4,   13, 14, 15, 16,   21, 22, 23, 24,
        43, 44, 45, 46,   33, 34, 35, 36,   27, 28, 29, 30,
    ].iter().map(|&v| v as f64).collect();
    assert_eq!(got.to_f64_vec(), want);
}

/// Tests the scatter example of the StableHLO spec: add-combining with batching dimensions;
/// the window at index [0, 9] is out of bounds and skipped element by element (no clamping).
#[test]
fn scatter_spec_example() {
    let src = "graph @t {
  %0 = input {index = 0, name = \"input\"} : i64[2,3,4,2]
  %1 = input {index = 1, name = \"scatter_indices\"} : i64[2,2,3,2]
  %2 = input {index = 2, name = \"update\"} : i64[2,2,3,2,2]
  %3 = scatter(%0, %1, %2) {index_vector_dim = 3, indices_are_sorted = false, input_batching_dims = [0], inserted_window_dims = [1], scatter_dims_to_operand_dims = [2, 1], scatter_indices_batching_dims = [1], unique_indices = false, update_window_dims = [3, 4]} : i64[2,3,4,2] {
    region @body {
      %0 = input {index = 0, name = \"\"} : i64[]
      %1 = input {index = 1, name = \"\"} : i64[]
      %2 = add(%0, %1) : i64[]
      return %2
    }
  }
  return %3
}";
    let got = run1(
        src,
        &[],
        vec![
            operand_1_to_48(),
            i64t(&[2, 2, 3, 2], &SPEC_INDICES),
            i64t(&[2, 2, 3, 2, 2], &[1; 48]),
        ],
    );
    #[rustfmt::skip]
    let want: Vec<f64> = [
        3, 4, 6, 7, 6, 7, 7, 8,   9, 10, 11, 12, 15, 16, 17, 18,   17, 18, 19, 20, 22, 23, 24, 25,
        25, 26, 28, 29, 30, 31, 31, 32,   35, 36, 38, 39, 38, 39, 39, 40,   41, 42, 44, 45, 46, 47, 47, 48,
    ].iter().map(|&v| v as f64).collect();
    assert_eq!(got.to_f64_vec(), want);
}

const EMBED: &str = "graph @t {
  %0 = input {index = 0, name = \"table\"} : f32[5,3]
  %1 = input {index = 1, name = \"ids\"} : i32[2,2,1]
  %2 = gather(%0, %1) {collapsed_slice_dims = [0], index_vector_dim = 2, indices_are_sorted = false, offset_dims = [2], slice_sizes = dims[1, 3], start_index_map = [0]} : f32[2,2,3]
  %3 = constant {value = dense<0.0> : f32} : f32[5,3]
  %4 = scatter(%3, %1, %2) {index_vector_dim = 2, indices_are_sorted = false, inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], unique_indices = false, update_window_dims = [2]} : f32[5,3] {
    region @body {
      %0 = input {index = 0, name = \"\"} : f32[]
      %1 = input {index = 1, name = \"\"} : f32[]
      %2 = add(%0, %1) : f32[]
      return %2
    }
  }
  return %2, %4
}";

/// Tests an embedding lookup and its gradient (scatter-add with a repeated id accumulates).
#[test]
fn embedding_gather_and_scatter_add() {
    let out = run(
        EMBED,
        &[],
        vec![arange(&[5, 3]), i32t(&[2, 2, 1], &[4, 0, 4, 2])],
    )
    .unwrap();
    assert_eq!(
        out[0].to_f64_vec(),
        vec![12., 13., 14., 0., 1., 2., 12., 13., 14., 6., 7., 8.]
    );
    assert_eq!(
        out[1].to_f64_vec(),
        vec![0., 1., 2., 0., 0., 0., 6., 7., 8., 0., 0., 0., 24., 26., 28.]
    );
}

/// Tests that a scatter whose body returns the update overwrites (last update wins), and
/// that a body that is neither recognized pattern runs through the region (`a - b`).
#[test]
fn scatter_overwrite_and_general_bodies() {
    let body = |ret: &str, ops: &str| {
        format!(
            "graph @t {{
  %0 = input {{index = 0, name = \"x\"}} : f32[4]
  %1 = input {{index = 1, name = \"i\"}} : i32[3,1]
  %2 = input {{index = 2, name = \"u\"}} : f32[3]
  %3 = scatter(%0, %1, %2) {{index_vector_dim = 1, indices_are_sorted = false, inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], unique_indices = false}} : f32[4] {{
    region @body {{
      %0 = input {{index = 0, name = \"\"}} : f32[]
      %1 = input {{index = 1, name = \"\"}} : f32[]
      {ops}
      return {ret}
    }}
  }}
  return %3
}}"
        )
    };
    let inputs = || {
        vec![
            f32t(&[4], &[10., 20., 30., 40.]),
            i32t(&[3, 1], &[1, 3, 1]),
            f32t(&[3], &[1., 2., 3.]),
        ]
    };
    assert_eq!(
        run1(&body("%1", ""), &[], inputs()).to_f64_vec(),
        vec![10., 3., 30., 2.]
    );
    let sub = body("%2", "%2 = subtract(%0, %1) : f32[]");
    assert_eq!(
        run1(&sub, &[], inputs()).to_f64_vec(),
        vec![10., 16., 30., 38.]
    );
}

/// Tests a gather with an implicit index vector (`index_vector_dim` = rank of the indices)
/// and a symbolic slice size, as JAX's `wpe[:S]` slices come in.
#[test]
fn gather_with_implicit_index_vector_and_symbolic_slice() {
    let src = "graph @t {
  symbols S in [1, 4]
  %0 = input {index = 0, name = \"wpe\"} : f32[4,2]
  %1 = input {index = 1, name = \"start\"} : i32[1]
  %2 = gather(%0, %1) {index_vector_dim = 0, indices_are_sorted = true, offset_dims = [0, 1], slice_sizes = dims[S, 2], start_index_map = [0]} : f32[S,2]
  return %2
}";
    let got = run1(src, &[("S", 3)], vec![arange(&[4, 2]), i32t(&[1], &[0])]);
    assert_eq!(got.to_f64_vec(), vec![0., 1., 2., 3., 4., 5.]);
    // a start of 3 is clamped to 4 - 3 = 1
    let got = run1(src, &[("S", 3)], vec![arange(&[4, 2]), i32t(&[1], &[3])]);
    assert_eq!(got.to_f64_vec(), vec![2., 3., 4., 5., 6., 7.]);
}

/// Tests a scatter-add of one whole 3-D window along the last dimension, as JAX's gradient of
/// a channel slice comes in (`update_window_dims = [0, 1, 2]`, one index): every operand
/// element inside the window is `x + u` and every other is `x`, at an index inside the
/// operand and at one where the window sticks out (its elements past the end skipped).
#[test]
fn scatter_add_of_a_whole_window() {
    let src = "graph @t {
  %0 = input {index = 0, name = \"x\"} : f32[2,3,5]
  %1 = input {index = 1, name = \"i\"} : i32[1]
  %2 = input {index = 2, name = \"u\"} : f32[2,3,2]
  %3 = scatter(%0, %1, %2) {index_vector_dim = 0, indices_are_sorted = true, scatter_dims_to_operand_dims = [2], unique_indices = true, update_window_dims = [0, 1, 2]} : f32[2,3,5] {
    region @body {
      %0 = input {index = 0, name = \"\"} : f32[]
      %1 = input {index = 1, name = \"\"} : f32[]
      %2 = add(%0, %1) : f32[]
      return %2
    }
  }
  return %3
}";
    let x: Vec<f32> = (0..30).map(|v| v as f32 * 0.5).collect();
    let u: Vec<f32> = (0..12).map(|v| 100.0 + v as f32).collect();
    for at in [2usize, 4] {
        let out = run1(
            src,
            &[],
            vec![
                f32t(&[2, 3, 5], &x),
                i32t(&[1], &[at as i32]),
                f32t(&[2, 3, 2], &u),
            ],
        );
        let mut want: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        for a in 0..2 {
            for b in 0..3 {
                for c in 0..2 {
                    if at + c < 5 {
                        want[(a * 3 + b) * 5 + at + c] =
                            f64::from(x[(a * 3 + b) * 5 + at + c] + u[(a * 3 + b) * 2 + c]);
                    }
                }
            }
        }
        assert_eq!(out.to_f64_vec(), want, "index {at}");
    }
}

/// Tests that a gather whose windows are consecutive in the operand and the result (two whole
/// rows of a table: each window is copied as one slice) gives the bits of the same gather with
/// the window's dimensions split around the batch dimension in the result (copied element by
/// element through the window's strides) transposed back, at indices inside the table, past
/// its end and negative (both clamped).
#[test]
fn consecutive_gather_windows_match_the_strided_copy() {
    let src = "graph @t {
  %0 = input {index = 0, name = \"table\"} : f32[6,4]
  %1 = input {index = 1, name = \"ids\"} : i32[5,1]
  %2 = gather(%0, %1) {index_vector_dim = 1, indices_are_sorted = false, offset_dims = [1, 2], slice_sizes = dims[2, 4], start_index_map = [0]} : f32[5,2,4]
  %3 = gather(%0, %1) {index_vector_dim = 1, indices_are_sorted = false, offset_dims = [0, 2], slice_sizes = dims[2, 4], start_index_map = [0]} : f32[2,5,4]
  %4 = transpose(%3) {permutation = [1, 0, 2]} : f32[5,2,4]
  return %2, %4
}";
    let ids = [3, 0, 9, -2, 4];
    let out = run(src, &[], vec![arange(&[6, 4]), i32t(&[5, 1], &ids)]).unwrap();
    assert_bits(&out[..1], &out[1..], "gather windows");
    // Row r of window k is table row clamp(ids[k], 0, 4) + r.
    let want: Vec<f64> = ids
        .iter()
        .flat_map(|&i| {
            let r0 = i.clamp(0, 4) as usize;
            (r0 * 4..r0 * 4 + 8).map(|v| v as f64)
        })
        .collect();
    assert_eq!(out[0].to_f64_vec(), want);
}
