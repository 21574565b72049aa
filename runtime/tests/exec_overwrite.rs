//! Tests of the zero-initializations a scan overwrites (`ebb_runtime::exec::unfilled_inits`,
//! `overwritten_carries`): a stack that a counted loop writes row by row (forward, or
//! reversed through a fused index as `lax.scan(reverse=True)` exports it) is left unfilled,
//! and the outputs are those of the filled run; a stack the loop reads before writing it, or
//! writes only partly, or at an index that is not a function of the counter, keeps its fill.

use crate::common;
use common::*;
use ebb_ir::OpKind;
use ebb_runtime::exec::{overwritten_carries, unfilled_inits};

/// A scan over the rows of `xs` (`[S, N]`): `h' = h·x_t + x_t` stacked into `ys` at row
/// `{index}` (an expression of the counter `%0` and `%4 = 0`, `%13 = S`, `%11 = 1` defined in
/// the body), the loop running `{bound}` times from `{start}`; `{extra}` adds body ops before
/// the update (`%ys_read` may read the stack). Returns the stacked result.
fn scan(index: &str, bound: &str, start: i32, extra: &str) -> String {
    format!(
        r#"graph @scan {{
  symbols N in [1, inf), S in [1, inf)
  %xs = input {{index = 0, name = "xs"}} : f32[S,N]
  %i0 = constant {{value = dense<{start}> : i32}} : i32[]
  %z = constant {{value = dense<0.0> : f32}} : f32[]
  %h0 = broadcast_in_dim(%z) {{broadcast_dimensions = [], shape = dims[N]}} : f32[N]
  %ys0 = broadcast_in_dim(%z) {{broadcast_dimensions = [], shape = dims[S, N]}} : f32[S,N]
  %w:4 = while(%i0, %h0, %ys0, %xs) : i32[], f32[N], f32[S,N], f32[S,N] {{
    region @cond {{
      %0 = input {{index = 0}} : i32[]
      %1 = input {{index = 1}} : f32[N]
      %2 = input {{index = 2}} : f32[S,N]
      %3 = input {{index = 3}} : f32[S,N]
      %4 = dim_constant {{values = dims[{bound}]}} : i32[]
      %5 = compare(%0, %4) {{comparison_direction = "LT"}} : i1[]
      return %5
    }}
    region @body {{
      %0 = input {{aliasing_output = 0, index = 0}} : i32[]
      %1 = input {{aliasing_output = 1, index = 1}} : f32[N]
      %2 = input {{aliasing_output = 2, index = 2}} : f32[S,N]
      %3 = input {{index = 3}} : f32[S,N]
      %4 = constant {{value = dense<0> : i32}} : i32[]
      %11 = constant {{value = dense<1> : i32}} : i32[]
      %13 = dim_constant {{values = dims[S]}} : i32[]
      %5 = dynamic_slice(%3, %0, %4) {{slice_sizes = dims[1, N]}} : f32[1,N]
      %6 = reshape(%5) {{shape = dims[N]}} : f32[N]
      %7 = multiply(%1, %6) : f32[N]
      {extra}
      %8 = add(%7, %6) : f32[N]
      %9 = broadcast_in_dim(%8) {{broadcast_dimensions = [1], shape = dims[1, N]}} : f32[1,N]
      %10 = dynamic_update_slice(%2, %9, {index}, %4) : f32[S,N]
      %12 = add(%0, %11) : i32[]
      return %12, %8, %10, %3
    }}
  }}
  return %w#2
}}"#
    )
}

/// The reversed row index `S - counter - 1` as one loop fusion (as `ebb_passes::fuse` leaves
/// `lax.scan(reverse=True)`'s index), defined before the update.
const REVERSED: &str = r#"%14 = fusion(%13, %0, %11) {kind = "loop"} : i32[] {
        region @rev {
          %0 = input {index = 0, name = "in0"} : i32[]
          %1 = input {index = 1, name = "in1"} : i32[]
          %2 = input {index = 2, name = "in2"} : i32[]
          %3 = subtract(%0, %1) : i32[]
          %4 = subtract(%3, %2) : i32[]
          return %4
        }
      }"#;

/// The number of broadcasts left unfilled in `src` at `b`.
fn unfilled(src: &str, b: &[(&str, i64)]) -> usize {
    let g = graph(src);
    let ids = unfilled_inits(&g, &bind(b));
    for &id in &ids {
        assert_eq!(g.node(id).kind(), OpKind::BroadcastInDim);
    }
    ids.len()
}

/// The carried values of the graph's one `while` that it overwrites whole.
fn overwritten(src: &str, b: &[(&str, i64)]) -> Vec<usize> {
    let g = graph(src);
    let w = g
        .order()
        .iter()
        .copied()
        .find(|&id| g.node(id).kind() == OpKind::While)
        .unwrap();
    overwritten_carries(&g, w, &bind(b))
}

const B: [(&str, i64); 2] = [("N", 2), ("S", 3)];

fn xs() -> Vec<ebb_runtime::Tensor> {
    vec![f32t(&[3, 2], &[1., 2., 3., 4., 5., 6.])]
}

/// Tests that a stack written at the counter's row over `0..S` is left unfilled (only it:
/// the state `h` is read by the body) and that the stacked rows are each step's state.
#[test]
fn a_forward_scan_leaves_its_stack_unfilled() {
    let src = scan("%0", "S", 0, "");
    assert_eq!(overwritten(&src, &B), vec![2]);
    assert_eq!(unfilled(&src, &B), 1);
    let out = run1(&src, &B, xs());
    // h: [0,0] -> [1,2] -> [6,12] -> [35,78]
    assert_eq!(out.to_f64_vec(), vec![1., 2., 6., 12., 35., 78.]);
}

/// Tests that a stack written at row `S - 1 - counter` (a fused index) is left unfilled, and
/// that its rows are the states in reverse order.
#[test]
fn a_reversed_scan_leaves_its_stack_unfilled() {
    let src = scan("%14", "S", 0, REVERSED);
    assert_eq!(overwritten(&src, &B), vec![2]);
    assert_eq!(unfilled(&src, &B), 1);
    let out = run1(&src, &B, xs());
    assert_eq!(out.to_f64_vec(), vec![35., 78., 6., 12., 1., 2.]);
}

/// Tests that a loop running fewer turns than the stack has rows, or starting past row 0,
/// keeps the fill, whose zeros the unwritten rows then hold.
#[test]
fn a_stack_written_in_part_keeps_its_fill() {
    let short = scan("%0", "S - 1", 0, "");
    assert!(overwritten(&short, &B).is_empty());
    assert_eq!(unfilled(&short, &B), 0);
    assert_eq!(
        run1(&short, &B, xs()).to_f64_vec(),
        vec![1., 2., 6., 12., 0., 0.]
    );
    let late = scan("%0", "S", 1, "");
    assert!(overwritten(&late, &B).is_empty());
    assert_eq!(
        run1(&late, &B, xs()).to_f64_vec(),
        vec![0., 0., 3., 4., 20., 30.]
    );
    // A constant index writes one row only.
    let fixed = scan("%4", "S", 0, "");
    assert!(overwritten(&fixed, &B).is_empty());
    assert_eq!(
        run1(&fixed, &B, xs()).to_f64_vec(),
        vec![35., 78., 0., 0., 0., 0.]
    );
}

/// Tests that a stack the body reads before the update (a `dynamic_slice` of it) keeps its
/// fill, and that the zeros it reads are the fill's.
#[test]
fn a_stack_read_before_it_is_written_keeps_its_fill() {
    let extra = "%15 = dynamic_slice(%2, %0, %4) {slice_sizes = dims[1, N]} : f32[1,N]\n      \
                 %16 = reshape(%15) {shape = dims[N]} : f32[N]\n      \
                 %17 = add(%7, %16) : f32[N]";
    let src = scan("%0", "S", 0, extra).replace("%8 = add(%7, %6)", "%8 = add(%17, %6)");
    assert!(overwritten(&src, &B).is_empty());
    assert_eq!(unfilled(&src, &B), 0);
    assert_eq!(
        run1(&src, &B, xs()).to_f64_vec(),
        vec![1., 2., 6., 12., 35., 78.]
    );
}

/// Tests that a broadcast that is also a graph output, or read by another op, keeps its fill
/// even when the loop overwrites the carried value it initializes.
#[test]
fn an_initialization_read_elsewhere_keeps_its_fill() {
    let src = scan("%0", "S", 0, "").replace("return %w#2\n", "return %w#2, %ys0\n");
    assert_eq!(overwritten(&src, &B), vec![2]);
    assert_eq!(unfilled(&src, &B), 0);
    let out = run(&src, &B, xs()).unwrap();
    assert_eq!(out[1].to_f64_vec(), vec![0.; 6]);
}
