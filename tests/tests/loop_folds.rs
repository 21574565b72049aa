//! The folds that shrink a scan's body over a symbolic length (`ebb_passes::canon::fold`,
//! rules 10-12): the loop-invariant column offsets an RNN cell carries become constants in the
//! body, its `gather`s of one gate at those offsets become `slice`s, and the backward pass's
//! sum of `scatter`-adds of the gate cotangents into zeros becomes one `concatenate`. The folded
//! loop gives the bits of the original on the executor, `-0` and NaN inputs included.

use ebb_ir::{Graph, OpKind};
use ebb_runtime::{execute, program_schedule, Tensor};

/// A scan over the `S` rows of `xs` in the shape of an RNN cell: the body gathers three
/// 2-column gates of `w` at the carried (loop-invariant) offsets 0, 2 and 4, combines each with
/// the row, and scatter-adds the three pieces into zeros at the same offsets (summed in another
/// order than the windows'), accumulated into a state that starts at `-0`.
const CELL: &str = r#"graph @cell {
  symbols N in [1, inf), S in [1, inf)
  %w = input {index = 0, name = "w"} : f32[N,6]
  %xs = input {index = 1, name = "xs"} : f32[S,N,2]
  %i0 = constant {value = dense<0> : i32} : i32[]
  %o0 = constant {value = dense<0> : i32} : i32[1]
  %o1 = constant {value = dense<2> : i32} : i32[1]
  %o2 = constant {value = dense<4> : i32} : i32[1]
  %m = constant {value = dense<-0.0> : f32} : f32[]
  %h0 = broadcast_in_dim(%m) {broadcast_dimensions = [], shape = dims[N, 6]} : f32[N,6]
  %r:7 = while(%i0, %h0, %w, %o0, %o1, %o2, %xs) : i32[], f32[N,6], f32[N,6], i32[1], i32[1], i32[1], f32[S,N,2] {
    region @cond {
      %0 = input {index = 0} : i32[]
      %1 = input {index = 1} : f32[N,6]
      %2 = input {index = 2} : f32[N,6]
      %3 = input {index = 3} : i32[1]
      %4 = input {index = 4} : i32[1]
      %5 = input {index = 5} : i32[1]
      %6 = input {index = 6} : f32[S,N,2]
      %7 = dim_constant {values = dims[S]} : i32[]
      %8 = compare(%0, %7) {comparison_direction = "LT"} : i1[]
      return %8
    }
    region @body {
      %0 = input {index = 0} : i32[]
      %1 = input {index = 1} : f32[N,6]
      %2 = input {index = 2} : f32[N,6]
      %3 = input {index = 3} : i32[1]
      %4 = input {index = 4} : i32[1]
      %5 = input {index = 5} : i32[1]
      %6 = input {index = 6} : f32[S,N,2]
      %7 = constant {value = dense<0> : i32} : i32[]
      %8 = dynamic_slice(%6, %0, %7, %7) {slice_sizes = dims[1, N, 2]} : f32[1,N,2]
      %9 = reshape(%8) {shape = dims[N, 2]} : f32[N,2]
      %10 = gather(%2, %3) {index_vector_dim = 0, indices_are_sorted = true, offset_dims = [0, 1], slice_sizes = dims[N, 2], start_index_map = [1]} : f32[N,2]
      %11 = gather(%2, %4) {index_vector_dim = 0, indices_are_sorted = true, offset_dims = [0, 1], slice_sizes = dims[N, 2], start_index_map = [1]} : f32[N,2]
      %12 = gather(%2, %5) {index_vector_dim = 0, indices_are_sorted = true, offset_dims = [0, 1], slice_sizes = dims[N, 2], start_index_map = [1]} : f32[N,2]
      %13 = multiply(%10, %9) : f32[N,2]
      %14 = add(%11, %9) : f32[N,2]
      %15 = subtract(%12, %9) : f32[N,2]
      %16 = constant {value = dense<0.0> : f32} : f32[]
      %17 = broadcast_in_dim(%16) {broadcast_dimensions = [], shape = dims[N, 6]} : f32[N,6]
      %18 = scatter(%17, %3, %13) {index_vector_dim = 0, indices_are_sorted = true, scatter_dims_to_operand_dims = [1], unique_indices = true, update_window_dims = [0, 1]} : f32[N,6] {
        region @add {
          %0 = input {index = 0} : f32[]
          %1 = input {index = 1} : f32[]
          %2 = add(%0, %1) : f32[]
          return %2
        }
      }
      %19 = scatter(%17, %4, %14) {index_vector_dim = 0, indices_are_sorted = true, scatter_dims_to_operand_dims = [1], unique_indices = true, update_window_dims = [0, 1]} : f32[N,6] {
        region @add {
          %0 = input {index = 0} : f32[]
          %1 = input {index = 1} : f32[]
          %2 = add(%1, %0) : f32[]
          return %2
        }
      }
      %20 = scatter(%17, %5, %15) {index_vector_dim = 0, indices_are_sorted = true, scatter_dims_to_operand_dims = [1], unique_indices = true, update_window_dims = [0, 1]} : f32[N,6] {
        region @add {
          %0 = input {index = 0} : f32[]
          %1 = input {index = 1} : f32[]
          %2 = add(%0, %1) : f32[]
          return %2
        }
      }
      %21 = add(%18, %20) : f32[N,6]
      %22 = add(%19, %21) : f32[N,6]
      %23 = add(%1, %22) : f32[N,6]
      %24 = constant {value = dense<1> : i32} : i32[]
      %25 = add(%0, %24) : i32[]
      return %25, %23, %2, %3, %4, %5, %6
    }
  }
  return %r#1
}"#;

/// Op kinds of `g`'s `while` body.
fn body_kinds(g: &Graph) -> Vec<OpKind> {
    let w = g
        .order()
        .iter()
        .copied()
        .find(|&id| g.node(id).kind() == OpKind::While)
        .expect("a while");
    let body = &g.node(w).regions[1];
    body.order().iter().map(|&n| body.node(n).kind()).collect()
}

fn run(g: &Graph, inputs: &[Tensor]) -> Vec<Tensor> {
    let b = ebb_testkit::bind(&[("N", 3), ("S", 4)]);
    execute(g, &program_schedule(g), &b, inputs.to_vec())
        .unwrap()
        .0
}

/// Tests that folding turns the body's gathers into slices and its scatter sum into one
/// concatenate, and that the folded loop gives the original's bits (inputs with `-0`, NaN
/// and products that underflow to `-0`, into a state that starts at `-0`).
#[test]
fn folded_rnn_cell_body_gives_the_same_bits() {
    let plain = ebb_testkit::graph(CELL);
    let mut g = plain.clone();
    let max = ebb_passes::canon::fold::MAX_FOLD_ELEMENTS;
    assert!(ebb_passes::canon::fold::fold_constants(&mut g, max) > 0);
    ebb_passes::canon::dce::eliminate_dead_code(&mut g);
    ebb_ir::verify::verify(&g).unwrap();
    // Idempotent: nothing left to fold.
    assert_eq!(ebb_passes::canon::fold::fold_constants(&mut g, max), 0);
    let kinds = body_kinds(&g);
    let count = |k: OpKind| kinds.iter().filter(|&&x| x == k).count();
    assert_eq!(count(OpKind::Gather), 0, "{kinds:?}");
    assert_eq!(count(OpKind::Scatter), 0, "{kinds:?}");
    assert_eq!(count(OpKind::Slice), 3, "{kinds:?}");
    assert_eq!(count(OpKind::Concatenate), 1, "{kinds:?}");
    let w: Vec<f32> = (0..18)
        .map(|i| match i {
            0 => -0.0,
            5 => f32::NAN,
            7 => 1e-30,
            _ => (i as f32 - 9.0) / 4.0,
        })
        .collect();
    let xs: Vec<f32> = (0..24)
        .map(|i| match i {
            3 => -0.0,
            8 => -1e-30,
            _ => (i as f32 - 11.0) / 8.0,
        })
        .collect();
    let inputs = [
        Tensor::from_f32(vec![3, 6], w).unwrap(),
        Tensor::from_f32(vec![4, 3, 2], xs).unwrap(),
    ];
    let (want, got) = (run(&plain, &inputs), run(&g, &inputs));
    assert_eq!(want.len(), got.len());
    for (a, b) in want.iter().zip(&got) {
        assert!(a.bits_eq(b));
    }
}

/// Tests that a scatter sum whose windows leave a gap, or that scatters into a non-zero
/// operand, is left alone (its result is not a concatenation of the updates).
#[test]
fn scatter_sums_that_do_not_tile_zeros_are_kept() {
    for (from, to) in [
        (
            "dense<4> : i32} : i32[1]\n  %m",
            "dense<3> : i32} : i32[1]\n  %m",
        ),
        ("dense<0.0> : f32} : f32[]", "dense<-0.0> : f32} : f32[]"),
    ] {
        let text = CELL.replace(from, to);
        assert_ne!(text, CELL);
        let mut g = ebb_testkit::graph(&text);
        let max = ebb_passes::canon::fold::MAX_FOLD_ELEMENTS;
        ebb_passes::canon::fold::fold_constants(&mut g, max);
        ebb_passes::canon::dce::eliminate_dead_code(&mut g);
        let kinds = body_kinds(&g);
        assert_eq!(kinds.iter().filter(|&&k| k == OpKind::Scatter).count(), 3);
        assert!(!kinds.contains(&OpKind::Concatenate));
    }
}
