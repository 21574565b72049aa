//! A scan's stacked output takes the buffer of a stacked input that dies at the loop
//! (`ebb_passes::stack_reuse::reuse_stacks`): the reversed scan of a backward pass reads slice
//! `S - 1 - c` of `xs` and writes slice `S - 1 - c` of `ys`, so `ys` may start as `xs`; the
//! loop then holds one stack instead of two, and the plan and the checker agree. A value whose
//! transpose the loop carries dies at the transpose (`ebb_passes::carry::hand_back_transposes`).

use ebb_ir::{Graph, Op, OpKind};
use ebb_passes::donate::donate_into_branches;
use ebb_passes::memory::{liveness, program_order};
use ebb_passes::plan::{build_plan, check, PlanOptions};
use ebb_passes::stack_reuse::reuse_stacks;

/// A reversed scan over the `S` rows of `xs = exp(x)`: step `c` reads row `i = S - 1 - c`
/// (JAX's index arithmetic: `clamp` of the start indices) and writes `UPDATE` into row `i` of
/// `ys`; `h` is the state, `h' = h·x_i + x_i`. `AFTER` is added after the loop, `RET` to the
/// outputs.
const RSCAN: &str = r#"graph @rscan {
  symbols N in [1, inf), S in [1, inf)
  %x = input {index = 0, name = "x"} : f32[S,N]
  %xs = exponential(%x) : f32[S,N]
  %i0 = constant {value = dense<0> : i32} : i32[]
  %z = constant {value = dense<0.0> : f32} : f32[]
  %h0 = broadcast_in_dim(%z) {broadcast_dimensions = [], shape = dims[N]} : f32[N]
  %ys0 = broadcast_in_dim(%z) {broadcast_dimensions = [], shape = dims[S, N]} : f32[S,N]
  %w:4 = while(%i0, %h0, %ys0, %xs) : i32[], f32[N], f32[S,N], f32[S,N] {
    region @cond {
      %0 = input {index = 0} : i32[]
      %1 = input {index = 1} : f32[N]
      %2 = input {index = 2} : f32[S,N]
      %3 = input {index = 3} : f32[S,N]
      %4 = dim_constant {values = dims[S]} : i32[]
      %5 = compare(%0, %4) {comparison_direction = "LT"} : i1[]
      return %5
    }
    region @body {
      %0 = input {index = 0} : i32[]
      %1 = input {index = 1} : f32[N]
      %2 = input {index = 2} : f32[S,N]
      %3 = input {index = 3} : f32[S,N]
      %4 = dim_constant {values = dims[S]} : i32[]
      %5 = subtract(%4, %0) : i32[]
      %6 = constant {value = dense<1> : i32} : i32[]
      %7 = subtract(%5, %6) : i32[]
      %8 = constant {value = dense<0> : i32} : i32[]
      %9 = reshape(%7) {shape = dims[1]} : i32[1]
      %9b = reshape(%8) {shape = dims[1]} : i32[1]
      %10 = concatenate(%9, %9b) {dimension = 0} : i32[2]
      %11 = dim_constant {values = dims[S, N]} : i32[2]
      %12 = dim_constant {values = dims[1, N]} : i32[2]
      %13 = subtract(%11, %12) : i32[2]
      %14 = constant {value = dense<0> : i32} : i32[2]
      %15 = clamp(%14, %10, %13) : i32[2]
      %16 = slice(%15) {limit_indices = dims[1], start_indices = dims[0], strides = dims[1]} : i32[1]
      %17 = reshape(%16) {shape = dims[]} : i32[]
      %18 = slice(%15) {limit_indices = dims[2], start_indices = dims[1], strides = dims[1]} : i32[1]
      %19 = reshape(%18) {shape = dims[]} : i32[]
      %20 = dynamic_slice(%3, %17, %19) {slice_sizes = dims[1, N]} : f32[1,N]
      %21 = reshape(%20) {shape = dims[N]} : f32[N]
      %22 = multiply(%1, %21) : f32[N]
      %23 = add(%22, %21) : f32[N]
      %24 = reshape(UPDATE) {shape = dims[1, N]} : f32[1,N]
      %25 = dynamic_update_slice(%2, %24, %7, %8) : f32[S,N]
      %26 = add(%0, %6) : i32[]
      return %26, %23, %25, %3
    }
  }
AFTER  return %w#2, %w#1RET
}"#;

/// [`RSCAN`] writing `update` (a body value) into `ys`, with `after` and `ret` spliced in.
fn rscan(update: &str, after: &str, ret: &str) -> Graph {
    let text = RSCAN
        .replace("UPDATE", update)
        .replace("AFTER", after)
        .replace("RET", ret);
    ebb_testkit::graph(&text)
}

fn while_node(g: &Graph) -> ebb_ir::NodeId {
    *g.order()
        .iter()
        .find(|&&n| g.node(n).kind() == OpKind::While)
        .expect("a while op")
}

/// The planned peak and the checker's (program order, no decisions), and the planned resident
/// bytes at the loop, at `N = n`, `S = s`.
fn peaks(g: &Graph, n: i64, s: i64) -> (i64, i64, i64) {
    let bind = ebb_testkit::bind(&[("N", n), ("S", s)]);
    let order = program_order(g);
    let plan = build_plan(g, &order, &PlanOptions::default()).unwrap();
    let checked = check(g, &plan, &[], &bind).unwrap();
    let at = order.iter().position(|&id| id == while_node(g)).unwrap();
    let at_loop = liveness(g, &order).resident_bytes(&bind).unwrap()[at];
    (plan.peak_at(&bind).unwrap(), checked.peak, at_loop)
}

fn barriers(g: &Graph) -> usize {
    let body = &g.node(while_node(g)).regions[1];
    body.order()
        .iter()
        .filter(|&&n| body.node(n).op == Op::OptimizationBarrier)
        .count()
}

/// Tests that `ys` starts as `xs` (the loop's operand 2), that `xs`'s own carry is gone, that
/// the body's update of `ys` is still written in place, and that the loop is charged one stack
/// less: plan and checker agree before and after.
#[test]
fn a_reversed_scan_writes_its_stack_over_the_input_it_reads() {
    let mut plain = rscan("%23", "", "");
    donate_into_branches(&mut plain);
    let mut g = plain.clone();
    assert_eq!(reuse_stacks(&mut g), 1);
    donate_into_branches(&mut g);
    ebb_ir::verify::verify(&g).unwrap();
    let w = while_node(&g);
    assert_eq!(g.operands(w).len(), 3);
    assert_eq!(g.node(w).outputs.len(), 3);
    let xs = g.operands(w)[2];
    assert_eq!(g.node(xs.node).kind(), OpKind::Exponential);
    // The update reads the slice: no ordering needed.
    assert_eq!(barriers(&g), 0);
    let body = &g.node(w).regions[1];
    let writes = ebb_ir::op::in_place_writes(body);
    assert!(writes
        .values()
        .any(|w| w.iter().any(|p| p.operand == 0 && p.result == 0)));
    // The splat `ys` started from is gone.
    assert!(!g.order().iter().any(|&n| {
        g.node(n).kind() == OpKind::BroadcastInDim && g.node(n).outputs[0].rank() == 2
    }));
    let (n, s) = (1000, 64);
    let (planned, checked, at_loop) = peaks(&g, n, s);
    assert_eq!(planned, checked);
    let (planned0, checked0, at_loop0) = peaks(&plain, n, s);
    assert_eq!(planned0, checked0);
    assert_eq!(at_loop0 - at_loop, 4 * n * s);
    assert_eq!(planned0 - planned, 4 * n * s);
}

/// Tests that an update that does not read the slice (the state before the step, as a scan
/// stacks its residuals) is ordered after the slice by an `optimization_barrier`, so that it
/// still writes the stack in place, and that the plan and the checker agree.
#[test]
fn an_update_that_does_not_read_the_slice_is_ordered_after_it() {
    let mut g = rscan("%1", "", "");
    assert_eq!(reuse_stacks(&mut g), 1);
    donate_into_branches(&mut g);
    ebb_ir::verify::verify(&g).unwrap();
    assert_eq!(barriers(&g), 1);
    let (planned, checked, _) = peaks(&g, 100, 16);
    assert_eq!(planned, checked);
}

/// Tests that nothing changes when `xs` is read after the loop, when the loop's result for it
/// is, or when the stack is written at another row than the one read.
#[test]
fn a_stack_read_later_or_written_elsewhere_is_left_alone() {
    for g in [
        rscan("%23", "  %a = negate(%xs) : f32[S,N]\n", ", %a"),
        rscan("%23", "", ", %w#3"),
    ] {
        let mut h = g.clone();
        assert_eq!(reuse_stacks(&mut h), 0);
        assert_eq!(h.operands(while_node(&h)).len(), 4);
    }
    // Row `c` read, row `S - 1 - c` written.
    let text = RSCAN
        .replace(
            "      %10 = concatenate(%9, %9b)",
            "      %9c = reshape(%0) {shape = dims[1]} : i32[1]\n      %10 = concatenate(%9c, %9b)",
        )
        .replace("UPDATE", "%23")
        .replace("AFTER", "")
        .replace("RET", "");
    let mut g = ebb_testkit::graph(&text);
    assert_eq!(reuse_stacks(&mut g), 0);
}

/// Tests that `exp(x)`, read after the loop (by a reader of the loop's results) that carries
/// its transpose unchanged, is read there as the loop's result transposed back, so that it
/// dies at the transpose.
#[test]
fn a_value_whose_transpose_a_loop_carries_dies_at_the_transpose() {
    let text = RSCAN
        .replace(
            "  %xs = exponential(%x) : f32[S,N]\n",
            "  %e = exponential(%x) : f32[N,S]\n  %xs = transpose(%e) {permutation = [1, 0]} : f32[S,N]\n",
        )
        .replace("%x = input {index = 0, name = \"x\"} : f32[S,N]", "%x = input {index = 0, name = \"x\"} : f32[N,S]")
        .replace("UPDATE", "%23")
        .replace(
            "AFTER",
            "  %t = transpose(%w#2) {permutation = [1, 0]} : f32[N,S]\n  %a = add(%e, %t) : f32[N,S]\n",
        )
        .replace("RET", ", %a");
    let mut g = ebb_testkit::graph(&text);
    assert_eq!(ebb_passes::carry::hand_back_transposes(&mut g), 1);
    ebb_ir::verify::verify(&g).unwrap();
    let a = *g.outputs().last().unwrap();
    let back = g.operands(a.node)[0];
    assert_eq!(g.node(back.node).op, Op::Transpose(vec![1, 0]));
    assert_eq!(
        g.operands(back.node)[0],
        ebb_ir::ValueRef::new(while_node(&g), 3)
    );
    // The loop's result for `xs` is read now: its stack is not handed to `ys`.
    assert_eq!(reuse_stacks(&mut g), 0);
}
