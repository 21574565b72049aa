//! `while` bodies fused and their carried arguments donated: a scan over a symbolic length
//! (`lax.scan` as JAX lowers it) writes each step's state into the stacked result with a
//! `dynamic_update_slice` on the carried argument, which the body may then update in place
//! (`ebb_passes::donate::donate_into_branches`, `ebb_ir::op::in_place_writes`); the loop is
//! charged one copy of the stacked result, not two, and the checker agrees with the plan.

use ebb_ir::op::{in_place_writes, InPlace};
use ebb_ir::{Graph, OpKind};
use ebb_passes::donate::donate_into_branches;
use ebb_passes::fuse::{FusePass, FusionReport};
use ebb_passes::manager::{Pass, PassContext};
use ebb_passes::memory::{liveness, program_order};
use ebb_passes::plan::{build_plan, check, PlanOptions};

/// `h' = h·x_t + x_t` over the `S` rows `x_t` of `xs`, each `h'` stacked into `ys` (returned);
/// `xs` is carried through unchanged, as a scan carries its inputs.
const SCAN: &str = r#"graph @scan {
  symbols N in [1, inf), S in [1, inf)
  %xs = input {index = 0, name = "xs"} : f32[S,N]
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
      %4 = constant {value = dense<0> : i32} : i32[]
      %5 = dynamic_slice(%3, %0, %4) {slice_sizes = dims[1, N]} : f32[1,N]
      %6 = reshape(%5) {shape = dims[N]} : f32[N]
      %7 = multiply(%1, %6) : f32[N]
      %8 = add(%7, %6) : f32[N]
      %9 = reshape(%8) {shape = dims[1, N]} : f32[1,N]
      %10 = dynamic_update_slice(%2, %9, %0, %4) : f32[S,N]
      %11 = constant {value = dense<1> : i32} : i32[]
      %12 = add(%0, %11) : i32[]
      return %12, %8, %10, %3
    }
  }
  return %w#2
}"#;

fn while_node(g: &Graph) -> ebb_ir::NodeId {
    *g.order()
        .iter()
        .find(|&&n| g.node(n).kind() == OpKind::While)
        .expect("a while op")
}

/// The block arguments' donations of region `r` of the loop.
fn donated(g: &Graph, r: usize) -> Vec<Option<usize>> {
    let region = &g.node(while_node(g)).regions[r];
    region
        .inputs()
        .iter()
        .map(|&a| region.aliasing_output(a))
        .collect()
}

/// The planned peak (program order, no decisions), the checker's, and the planned resident
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

/// Tests that the body's carried arguments are donated to their next values (not `xs`, which
/// the body returns unchanged, nor the condition's), that the stacked result's
/// `dynamic_update_slice` then writes into its argument, and that the loop is charged the
/// stacked result once less: the plan and the checker agree before and after.
#[test]
fn a_scan_body_updates_its_stacked_result_in_place() {
    let plain = ebb_testkit::graph(SCAN);
    let mut g = plain.clone();
    assert_eq!(donate_into_branches(&mut g), 3);
    ebb_ir::verify::verify(&g).unwrap();
    assert_eq!(donated(&g, 0), [None; 4]);
    assert_eq!(donated(&g, 1), [Some(0), Some(1), Some(2), None]);
    let body = &g.node(while_node(&g)).regions[1];
    let dus = *body
        .order()
        .iter()
        .find(|&&n| body.node(n).kind() == OpKind::DynamicUpdateSlice)
        .unwrap();
    assert_eq!(
        in_place_writes(body).remove(&dus),
        Some(vec![InPlace {
            operand: 0,
            result: 0
        }])
    );
    assert!(in_place_writes(plain.node(while_node(&plain)).regions.get(1).unwrap()).is_empty());
    let (n, s) = (1000, 64);
    let (planned, checked, at_loop) = peaks(&g, n, s);
    assert_eq!(planned, checked);
    let (planned0, checked0, at_loop0) = peaks(&plain, n, s);
    assert_eq!(planned0, checked0);
    // The body's stacked result updated in place (4·N·S), and the loop's results for the
    // stacked result and the state taking their dying splats' buffers (4·N·S + 4·N).
    assert_eq!(at_loop0 - at_loop, 8 * n * s + 4 * n);
}

/// Tests that fusion groups the body's elementwise chain (`multiply`, `add`) into a loop
/// fusion named after the loop, that the donations are made again on the fused body, and that
/// the plan and the checker still agree.
#[test]
fn a_scan_body_is_fused_and_stays_donated() {
    let mut g = ebb_testkit::graph(SCAN);
    let mut cx = PassContext::new();
    FusePass.run(&mut g, &mut cx).unwrap();
    ebb_ir::verify::verify(&g).unwrap();
    let report = cx.get::<FusionReport>().unwrap();
    let names: Vec<&str> = report.groups.iter().map(|gr| gr.name.as_str()).collect();
    assert_eq!(names, ["while0_fusion0"]);
    let body = &g.node(while_node(&g)).regions[1];
    assert!(body
        .order()
        .iter()
        .any(|&n| matches!(body.node(n).op, ebb_ir::Op::Fusion(_))));
    assert_eq!(donated(&g, 1), [Some(0), Some(1), Some(2), None]);
    let (planned, checked, _) = peaks(&g, 1000, 64);
    assert_eq!(planned, checked);
}

/// [`SCAN`] with `xs` computed (`negate`) rather than a graph input, and read again after the
/// loop (as a backward scan reads a forward scan's inputs) by `%after`; `unordered` adds a
/// reader of `xs` that neither precedes nor follows the loop.
fn scan_read_after(unordered: bool) -> Graph {
    let (extra, ret) = if unordered {
        ("  %u = exponential(%x) : f32[S,N]\n", ", %u")
    } else {
        ("", "")
    };
    let body = SCAN
        .split_once("  %w:4")
        .unwrap()
        .1
        .split_once("  return %w#2")
        .unwrap()
        .0;
    ebb_testkit::graph(&format!(
        r#"graph @scan {{
  symbols N in [1, inf), S in [1, inf)
  %xs = input {{index = 0, name = "xs"}} : f32[S,N]
  %x = negate(%xs) : f32[S,N]
  %i0 = constant {{value = dense<0> : i32}} : i32[]
  %z = constant {{value = dense<0.0> : f32}} : f32[]
  %h0 = broadcast_in_dim(%z) {{broadcast_dimensions = [], shape = dims[N]}} : f32[N]
  %ys0 = broadcast_in_dim(%z) {{broadcast_dimensions = [], shape = dims[S, N]}} : f32[S,N]
  %w:4{}{extra}  %after = multiply(%x, %w#2) : f32[S,N]
  return %after{ret}
}}"#,
        body.replace("(%i0, %h0, %ys0, %xs)", "(%i0, %h0, %ys0, %x)")
    ))
}

/// Tests that a reader after the loop of a carry the body returns unchanged is handed the
/// loop's result (`ebb_passes::carry::hand_over_carries`), that the result then takes the
/// operand's buffer (`in_place_writes`: operand 3 into result 3), and that the loop is charged
/// `xs` once, not twice: the plan and the checker agree before and after. With a reader that
/// may run on either side of the loop, nothing changes.
#[test]
fn a_carry_returned_unchanged_takes_its_operand_buffer() {
    let mut plain = scan_read_after(false);
    donate_into_branches(&mut plain);
    let mut g = plain.clone();
    assert_eq!(ebb_passes::carry::hand_over_carries(&mut g), 1);
    ebb_ir::verify::verify(&g).unwrap();
    let w = while_node(&g);
    // The state and the stacked result (dying splats, donated to their next values) before
    // and after; `xs` only once the reader after the loop reads the result.
    let carried = vec![
        InPlace {
            operand: 1,
            result: 1,
        },
        InPlace {
            operand: 2,
            result: 2,
        },
    ];
    let mut handed = carried.clone();
    handed.push(InPlace {
        operand: 3,
        result: 3,
    });
    assert_eq!(in_place_writes(&g).remove(&w), Some(handed));
    assert_eq!(
        in_place_writes(&plain).remove(&while_node(&plain)),
        Some(carried)
    );
    let (n, s) = (1000, 64);
    let (planned, checked, at_loop) = peaks(&g, n, s);
    assert_eq!(planned, checked);
    let (planned0, checked0, at_loop0) = peaks(&plain, n, s);
    assert_eq!(planned0, checked0);
    assert_eq!(at_loop0 - at_loop, 4 * n * s);

    let mut unordered = scan_read_after(true);
    assert_eq!(ebb_passes::carry::hand_over_carries(&mut unordered), 0);
    let w = while_node(&unordered);
    assert!(in_place_writes(&unordered)
        .remove(&w)
        .unwrap_or_default()
        .iter()
        .all(|x| x.operand != 3));
}

/// Tests that two loops sharing their zero-initialized carries (one splat each for `h0` and
/// `ys0`, as common-subexpression elimination leaves them) each get their own splats
/// (`ebb_passes::carry::own_splats`), the shared ones are removed, and each loop's computed
/// carries then take their operands' buffers (results 1 and 2; not the counter, a constant,
/// nor `xs`, a graph input the caller keeps); the plan and the checker agree.
#[test]
fn loops_sharing_a_zero_stack_get_their_own() {
    let (head, tail) = SCAN.split_once("  return %w#2").unwrap();
    let second = head
        .split_once("  %w:4")
        .unwrap()
        .1
        .replace(" = while", "  %v:4 = while");
    let text = format!("{head}{second}  return %w#2, %v#2{tail}");
    let mut g = ebb_testkit::graph(&text);
    assert_eq!(ebb_passes::carry::own_splats(&mut g), 4);
    donate_into_branches(&mut g);
    ebb_ir::verify::verify(&g).unwrap();
    let splats = g
        .order()
        .iter()
        .filter(|&&n| g.node(n).kind() == OpKind::BroadcastInDim)
        .count();
    assert_eq!(splats, 4);
    let writes = in_place_writes(&g);
    let loops: Vec<_> = g
        .order()
        .iter()
        .copied()
        .filter(|&n| g.node(n).kind() == OpKind::While)
        .collect();
    assert_eq!(loops.len(), 2);
    for w in loops {
        assert_eq!(writes.get(&w).cloned(), Some(computed_carries_in_place()));
    }
    plan_matches_checker(&g);
}

/// The in-place writes of [`SCAN`]'s loop once its computed carries (the state `h` and the
/// stacked `ys`) take their operands' buffers: operand 1 into result 1, 2 into 2.
fn computed_carries_in_place() -> Vec<InPlace> {
    vec![
        InPlace {
            operand: 1,
            result: 1,
        },
        InPlace {
            operand: 2,
            result: 2,
        },
    ]
}

/// The plan's peak of `g` in program order at N=1000, S=64 is the checker's.
fn plan_matches_checker(g: &Graph) {
    let bind = ebb_testkit::bind(&[("N", 1000), ("S", 64)]);
    let order = program_order(g);
    let plan = build_plan(g, &order, &PlanOptions::default()).unwrap();
    assert_eq!(
        plan.peak_at(&bind).unwrap(),
        check(g, &plan, &[], &bind).unwrap().peak
    );
}

/// Splat `constant` carries (what constant folding makes of the zero stacks when the shapes
/// are static, as in a plan compiled for one shape) are made anew as broadcasts right before
/// the loop, even when only the loop reads them (a constant's buffer is never written in
/// place), so the loop's computed carries take their operands' buffers as in the symbolic
/// plan; the plan and the checker agree.
#[test]
fn splat_constant_carries_are_made_anew_before_their_loop() {
    let text = SCAN
        .replace(
            "%h0 = broadcast_in_dim(%z) {broadcast_dimensions = [], shape = dims[N]} : f32[N]",
            "%h0 = constant {value = dense<0.0> : f32} : f32[N]",
        )
        .replace(
            "%ys0 = broadcast_in_dim(%z) {broadcast_dimensions = [], shape = dims[S, N]} : f32[S,N]",
            "%ys0 = constant {value = dense<0.0> : f32} : f32[S,N]",
        );
    let mut g = ebb_testkit::graph(&text);
    assert!(in_place_writes(&g)
        .get(&while_node(&g))
        .is_none_or(|w| w.is_empty()));
    assert_eq!(ebb_passes::carry::own_splats(&mut g), 2);
    donate_into_branches(&mut g);
    ebb_ir::verify::verify(&g).unwrap();
    let w = while_node(&g);
    let order = g.order().to_vec();
    let at = order.iter().position(|&n| n == w).unwrap();
    for v in &g.operands(w)[1..3] {
        assert_eq!(g.node(v.node).kind(), OpKind::BroadcastInDim);
        assert!(order.iter().position(|&n| n == v.node).unwrap() < at);
    }
    assert_eq!(
        in_place_writes(&g).get(&w).cloned(),
        Some(computed_carries_in_place())
    );
    plan_matches_checker(&g);
}
