//! Tests of the `licm` pass (`ebb_passes::licm`): before/after snapshots of a scan step shaped
//! like the trial RNN's backward scan (`dh·Wᵀ` with `W` carried unchanged) and of nested loops
//! with a `case`; the hoisted graph computes the same bits on the reference executor; the
//! planner charges a hoisted value across its loop (planned peak = checker's peak).

use crate::rewrite_util::eval::input_value;
use ebb_ir::{Bindings, DType, Graph, OpKind};
use ebb_passes::licm::Licm;
use ebb_passes::manager::PassResult;
use ebb_passes::memory::program_order;
use ebb_passes::plan::{build_plan, check, PlanOptions};
use ebb_runtime::{execute, program_schedule, Data, Tensor};
use ebb_testkit::before_after;

/// A scan over the rows of `x` (`S` steps) carrying `h`, with the weights `w`, `u`, `bias`
/// and an integer table `kk` carried unchanged. Hoisted: `transpose(u)`, `negate(w)` and
/// their sum (one carry, the chain's end), and the transpose of `w` that the two
/// `dot_general`s contracting `w` over its last dimension (as JAX's `dh·Wᵀ`) read (one
/// transpose for both; the one contracting `w` over its first dimension reads `w` itself).
/// Left in the body: the integer `divide` of the invariant `kk` (it could fault; its `convert`
/// then reads a body value), the `reshape` of the block argument `bias` (a view) and the
/// `broadcast_in_dim`s that grow an invariant (the size rule), the per-step `dynamic_slice`.
const SCAN: &str = r#"graph @main {
  symbols B in [1, inf), S in [1, inf)
  %x = input {index = 0, name = "x"} : f32[S,B,32]
  %w = input {index = 1, name = "w"} : f32[32,96]
  %u = input {index = 2, name = "u"} : f32[96,32]
  %bias = input {index = 3, name = "bias"} : f32[32]
  %kk = input {index = 4, name = "kk"} : i32[32]
  %h0 = input {index = 5, name = "h"} : f32[B,32]
  %zero = constant {value = dense<0> : i32} : i32[]
  %f:7 = while(%zero, %h0, %x, %w, %u, %bias, %kk) : i32[], f32[B,32], f32[S,B,32], f32[32,96], f32[96,32], f32[32], i32[32] {
    region @cond {
      %i = input {index = 0, name = ""} : i32[]
      %h = input {index = 1, name = ""} : f32[B,32]
      %xs = input {index = 2, name = ""} : f32[S,B,32]
      %ww = input {index = 3, name = ""} : f32[32,96]
      %uu = input {index = 4, name = ""} : f32[96,32]
      %bb = input {index = 5, name = ""} : f32[32]
      %k = input {index = 6, name = ""} : i32[32]
      %n = dim_constant {values = dims[S]} : i32[]
      %p = compare(%i, %n) {comparison_direction = "LT"} : i1[]
      return %p
    }
    region @body {
      %i = input {index = 0, name = ""} : i32[]
      %h = input {index = 1, name = ""} : f32[B,32]
      %xs = input {index = 2, name = ""} : f32[S,B,32]
      %ww = input {index = 3, name = ""} : f32[32,96]
      %uu = input {index = 4, name = ""} : f32[96,32]
      %bb = input {index = 5, name = ""} : f32[32]
      %k = input {index = 6, name = ""} : i32[32]
      %c0 = constant {value = dense<0> : i32} : i32[]
      %xi = dynamic_slice(%xs, %i, %c0, %c0) {slice_sizes = dims[1, B, 32]} : f32[1,B,32]
      %xr = reshape(%xi) {shape = dims[B, 32]} : f32[B,32]
      %ut = transpose(%uu) {permutation = [1, 0]} : f32[32,96]
      %wn = negate(%ww) : f32[32,96]
      %ws = add(%ut, %wn) : f32[32,96]
      %a = dot_general(%xr, %ws) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[B,96]
      %g1 = dot_general(%a, %ww) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]} : f32[B,32]
      %g2 = dot_general(%g1, %ww) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[B,96]
      %g = dot_general(%g2, %ww) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]} : f32[B,32]
      %kd = divide(%k, %k) : i32[32]
      %kf = convert(%kd) {dtype = f32} : f32[32]
      %kb = broadcast_in_dim(%kf) {broadcast_dimensions = [1], shape = dims[B, 32]} : f32[B,32]
      %br = reshape(%bb) {shape = dims[1, 32]} : f32[1,32]
      %bw = broadcast_in_dim(%br) {broadcast_dimensions = [0, 1], shape = dims[B, 32]} : f32[B,32]
      %s1 = add(%g, %kb) : f32[B,32]
      %s2 = add(%s1, %bw) : f32[B,32]
      %h2 = add(%s2, %h) : f32[B,32]
      %one = constant {value = dense<1> : i32} : i32[]
      %i2 = add(%i, %one) : i32[]
      return %i2, %h2, %xs, %ww, %uu, %bb, %k
    }
  }
  return %f#1
}"#;

/// Nested loops: the outer loop (over `j < 2`) carries `w` unchanged into an inner scan (over
/// `i < S`) whose body reads `transpose(w)`, and a `case` in the outer body negates `w` in one
/// branch. The transpose leaves the inner loop for the outer body, then the outer loop; the
/// `negate` in the branch stays (a branch may not run).
const NESTED: &str = r#"graph @main {
  symbols B in [1, inf), S in [1, inf)
  %w = input {index = 0, name = "w"} : f32[32,32]
  %h0 = input {index = 1, name = "h"} : f32[B,32]
  %sel = input {index = 2, name = "sel"} : i32[]
  %zero = constant {value = dense<0> : i32} : i32[]
  %o:4 = while(%zero, %h0, %w, %sel) : i32[], f32[B,32], f32[32,32], i32[] {
    region @cond {
      %j = input {index = 0, name = ""} : i32[]
      %h = input {index = 1, name = ""} : f32[B,32]
      %ww = input {index = 2, name = ""} : f32[32,32]
      %s = input {index = 3, name = ""} : i32[]
      %two = constant {value = dense<2> : i32} : i32[]
      %p = compare(%j, %two) {comparison_direction = "LT"} : i1[]
      return %p
    }
    region @body {
      %j = input {index = 0, name = ""} : i32[]
      %h = input {index = 1, name = ""} : f32[B,32]
      %ww = input {index = 2, name = ""} : f32[32,32]
      %s = input {index = 3, name = ""} : i32[]
      %c:1 = case(%s, %h, %ww) : f32[B,32] {
        region {
          %0 = input {index = 0} : f32[B,32]
          %1 = input {index = 1} : f32[32,32]
          %2 = negate(%1) : f32[32,32]
          %3 = dot_general(%0, %2) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[B,32]
          return %3
        }
        region {
          %0 = input {index = 0} : f32[B,32]
          %1 = input {index = 1} : f32[32,32]
          return %0
        }
      }
      %zi = constant {value = dense<0> : i32} : i32[]
      %in:3 = while(%zi, %c#0, %ww) : i32[], f32[B,32], f32[32,32] {
        region @cond {
          %i = input {index = 0, name = ""} : i32[]
          %g = input {index = 1, name = ""} : f32[B,32]
          %v = input {index = 2, name = ""} : f32[32,32]
          %n = dim_constant {values = dims[S]} : i32[]
          %p = compare(%i, %n) {comparison_direction = "LT"} : i1[]
          return %p
        }
        region @body {
          %i = input {index = 0, name = ""} : i32[]
          %g = input {index = 1, name = ""} : f32[B,32]
          %v = input {index = 2, name = ""} : f32[32,32]
          %vt = transpose(%v) {permutation = [1, 0]} : f32[32,32]
          %g2 = dot_general(%g, %vt) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[B,32]
          %one = constant {value = dense<1> : i32} : i32[]
          %i2 = add(%i, %one) : i32[]
          return %i2, %g2, %v
        }
      }
      %one = constant {value = dense<1> : i32} : i32[]
      %j2 = add(%j, %one) : i32[]
      return %j2, %in#1, %ww, %s
    }
  }
  return %o#1
}"#;

/// The outputs of `g` at `B = 8, S = 5` on the reference executor (inputs as [`run_at`]
/// makes them).
pub(crate) fn run(g: &Graph) -> Vec<Vec<u64>> {
    run_at(g, &ebb_testkit::bind(&[("B", 8), ("S", 5)])).0
}

/// `g` run on the reference executor at `b` (deterministic inputs; integer inputs made by
/// hand: `kk` all ones, `sel` 0): the outputs' bits and the measured peak.
pub(crate) fn run_at(g: &Graph, b: &Bindings) -> (Vec<Vec<u64>>, u64) {
    let inputs = g
        .inputs()
        .iter()
        .enumerate()
        .map(|(k, &id)| {
            let t = &g.node(id).outputs[0];
            let shape: Vec<usize> = t
                .shape
                .iter()
                .map(|d| d.eval(b).unwrap() as usize)
                .collect();
            match t.dtype {
                DType::I32 => {
                    let n = shape.iter().product::<usize>();
                    let v = if t.rank() == 0 { 0 } else { 1 };
                    Tensor::new(shape, Data::I32(vec![v; n].into())).unwrap()
                }
                d => input_value(k, shape, d),
            }
        })
        .collect();
    let (outs, stats) = execute(g, &program_schedule(g), b, inputs).unwrap();
    let bits = outs
        .iter()
        .map(|t| t.to_f64_vec().iter().map(|v| v.to_bits()).collect())
        .collect();
    (bits, stats.peak_bytes)
}

fn parse(text: &str) -> Graph {
    ebb_testkit::graph(text)
}

/// Tests what the scan step hoists and leaves (see [`SCAN`]).
#[test]
fn hoists_invariant_chains_and_the_transposed_weight_of_a_scan_step() {
    let (s, r) = before_after(SCAN, &Licm);
    // Four hoisted; then `u`, read by the hoisted `transpose(u)` only, is a dead carry.
    assert_eq!(r, PassResult::changes(4 + 1));
    insta::assert_snapshot!(s);
}

/// Tests that nothing leaves a `case` branch, and that a value hoisted out of an inner loop is
/// hoisted again out of the outer one (see [`NESTED`]).
#[test]
fn hoists_through_nested_loops_but_not_out_of_a_case_branch() {
    let (s, r) = before_after(NESTED, &Licm);
    // The inner loop's transpose, then its copy in the outer body; then the carry the
    // inner loop no longer reads.
    assert_eq!(r, PassResult::changes(2 + 1));
    insta::assert_snapshot!(s);
}

/// Tests that the hoisted graphs compute the same bits as the originals.
#[test]
fn hoisted_loops_compute_the_same_bits() {
    for text in [SCAN, NESTED] {
        let g = parse(text);
        let mut h = g.clone();
        ebb_passes::licm::hoist_loop_invariants(&mut h);
        ebb_ir::verify::verify(&h).unwrap();
        assert_eq!(run(&g), run(&h));
    }
}

/// Tests that the planner charges a hoisted value from its op before the loop to the loop's
/// end, like any value the loop reads, and that the checker proves the planned peak. At
/// `B = 8, S = 5` the hoisted `[32, 96]` sum and transpose (12 KiB each) are held across the
/// loop, but the body no longer makes its three 12 KiB temporaries (`transpose(u)`,
/// `negate(w)`, their sum) at every iteration, so the peak drops by 9 KiB.
#[test]
fn the_plan_charges_hoisted_values_across_the_loop() {
    let b = ebb_testkit::bind(&[("B", 8), ("S", 5)]);
    let peak = |g: &Graph| {
        let order = program_order(g);
        let plan = build_plan(g, &order, &PlanOptions::default()).unwrap();
        let checked = check(g, &plan, &[], &b).unwrap();
        let planned = plan.peak_at(&b).unwrap();
        assert_eq!(planned, checked.peak);
        planned
    };
    let g = parse(SCAN);
    let mut h = g.clone();
    assert_eq!(ebb_passes::licm::hoist_loop_invariants(&mut h), 4);
    assert_eq!((peak(&g), peak(&h)), (99_848, 90_632));
    let w = h
        .order()
        .iter()
        .find(|&&n| h.node(n).kind() == OpKind::While)
        .copied()
        .unwrap();
    assert_eq!(h.node(w).outputs.len(), 9);
}

/// The trial RNN's backward scan (`tests/data/rnn_backward_scan.ebb`).
const RNN: &str = include_str!("data/rnn_backward_scan.ebb");

/// Tests the pass on a real export's loop, the trial RNN's backward scan: the two weights the
/// body contracts over their last dimension (`dh·Wᵀ`) are transposed once before the loop
/// (two changes, nothing else is invariant there), the scan computes the same bits, and the
/// planned peak, which the checker proves, holds the two 12 KiB transposes across the loop.
#[test]
fn transposes_the_rnn_backward_scans_weights_once() {
    let (s, r) = before_after(RNN, &Licm);
    assert_eq!(r, PassResult::changes(2));
    insta::assert_snapshot!(s);
    let g = parse(RNN);
    let mut h = g.clone();
    ebb_passes::licm::hoist_loop_invariants(&mut h);
    assert_eq!(run(&g), run(&h));
    let b = ebb_testkit::bind(&[("B", 8), ("S", 5)]);
    let peak = |g: &Graph| {
        let order = program_order(g);
        let plan = build_plan(g, &order, &PlanOptions::default()).unwrap();
        assert_eq!(
            plan.peak_at(&b).unwrap(),
            check(g, &plan, &[], &b).unwrap().peak
        );
        plan.peak_at(&b).unwrap()
    };
    assert_eq!(peak(&h) - peak(&g), 2 * 32 * 96 * 4);
}

/// [`RNN`] with only the loop results a step reads after a backward scan as its outputs (the
/// weight gradients and the input gradients' stack): the weights and integer constants it
/// carries unchanged are not graph outputs.
pub(crate) fn rnn_gradients_only() -> String {
    let ret = "  return %w#0, %w#1, %w#2, %w#3, %w#4, %w#5, %w#6, %w#7, %w#8, %w#9, %w#10, %w#11, \
               %w#12, %w#13, %w#14, %w#15, %w#16, %w#17, %w#18, %w#19, %w#20, %w#21";
    assert!(RNN.contains(ret));
    RNN.replace(ret, "  return %w#18, %w#19, %w#21")
}

/// Tests that the carries the backward scan no longer reads once `transpose(W)` is hoisted
/// (the weights `wx`, `wh`) and the integer constants it never read are removed with their
/// block arguments, loop operands and results (snapshot), that the scan computes the same
/// bits, and that the planned peak, which the checker proves, is not higher.
#[test]
fn drops_the_carries_the_rnn_backward_scan_no_longer_reads() {
    let text = rnn_gradients_only();
    let (s, r) = before_after(&text, &Licm);
    // Two transposes hoisted; eight carries removed.
    assert_eq!(r, PassResult::changes(2 + 8));
    insta::assert_snapshot!(s);
    let g = parse(&text);
    let mut h = g.clone();
    let mut cx = ebb_passes::manager::PassContext::default();
    ebb_passes::manager::Pass::run(&Licm, &mut h, &mut cx).unwrap();
    ebb_ir::verify::verify(&h).unwrap();
    assert_eq!(run(&g), run(&h));
    let w = h
        .order()
        .iter()
        .find(|&&n| h.node(n).kind() == OpKind::While)
        .copied()
        .unwrap();
    assert_eq!(h.node(w).outputs.len(), 22 + 2 - 8);
    let b = ebb_testkit::bind(&[("B", 8), ("S", 5)]);
    let peak = |g: &Graph| {
        let order = program_order(g);
        let plan = build_plan(g, &order, &PlanOptions::default()).unwrap();
        assert_eq!(
            plan.peak_at(&b).unwrap(),
            check(g, &plan, &[], &b).unwrap().peak
        );
        plan.peak_at(&b).unwrap()
    };
    assert!(peak(&h) <= peak(&g), "{} > {}", peak(&h), peak(&g));
}
