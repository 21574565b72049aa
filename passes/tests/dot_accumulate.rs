//! Tests of the `dot_accumulate` pass (`ebb_passes::dot_accumulate`) on the trial RNN's
//! backward scan after `licm`: the two weight-gradient updates `dW = add(dW, xᵀ·dG)` become
//! dot-accumulates written in place into their carries (snapshot), the scan computes the same
//! bits on the reference executor, and the planned peak, which the checker proves, drops; on
//! a small scan, what is rewritten and what is not.

use crate::licm::{rnn_gradients_only, run, run_at};
use ebb_ir::Graph;
use ebb_passes::dot_accumulate::DotAccumulate;
use ebb_passes::licm::Licm;
use ebb_passes::manager::{Pass, PassContext, PassResult};
use ebb_passes::memory::program_order;
use ebb_passes::plan::{build_plan, check, PlanOptions};
use ebb_testkit::before_after;

/// The RNN's backward scan after `licm`, as textual IR.
fn after_licm() -> String {
    let mut g = ebb_testkit::graph(&rnn_gradients_only());
    Licm.run(&mut g, &mut PassContext::new()).unwrap();
    ebb_ir::text::print(&g)
}

/// The planned peak of `g` at `B = 8, S = 5` in program order, equal to the checker's.
fn peak(g: &Graph) -> i64 {
    let b = ebb_testkit::bind(&[("B", 8), ("S", 5)]);
    let plan = build_plan(g, &program_order(g), &PlanOptions::default()).unwrap();
    let planned = plan.peak_at(&b).unwrap();
    assert_eq!(planned, check(g, &plan, &[], &b).unwrap().peak);
    planned
}

/// Tests that both weight-gradient accumulations of the backward scan become
/// dot-accumulates, with the same bits and a lower planned peak: the body no longer holds
/// the product (12 KiB at these shapes) and the new sum beside the carry.
#[test]
fn accumulates_the_rnn_weight_gradients_in_place() {
    let text = after_licm();
    let (s, r) = before_after(&text, &DotAccumulate);
    assert_eq!(r, PassResult::changes(2));
    insta::assert_snapshot!(s);
    let g = ebb_testkit::graph(&text);
    let mut h = g.clone();
    DotAccumulate.run(&mut h, &mut PassContext::new()).unwrap();
    assert_eq!(run(&g), run(&h));
    let (before, after) = (peak(&g), peak(&h));
    assert!(after < before, "{after} >= {before}");
}

/// Tests the RNN's backward scan rewritten, at batch sizes whose weight-gradient products
/// (contracted over the batch) take the shallow kernel (`B = 8`), the packing GEMM adding
/// into the carry with β = 1 (`B = 64`, 256) and the product apart (`B = 257`, deeper than
/// one depth block, `ebb_ir::op::accumulate`): the scan computes the unrewritten scan's bits on
/// the reference executor, and its measured peak equals the planned one, which the checker
/// proves; the product apart is charged, and only there.
#[test]
fn the_rnn_scan_is_measured_as_planned_at_every_depth() {
    let g = ebb_testkit::graph(&after_licm());
    let mut h = g.clone();
    DotAccumulate.run(&mut h, &mut PassContext::new()).unwrap();
    let plan = build_plan(&h, &program_order(&h), &PlanOptions::default()).unwrap();
    let w = *h
        .order()
        .iter()
        .find(|&&n| h.node(n).kind() == ebb_ir::OpKind::While)
        .unwrap();
    let body = &h.node(w).regions[1];
    let accumulates: Vec<_> = body
        .order()
        .iter()
        .copied()
        .filter(|&n| {
            body.operands(n).len() == 3 && body.node(n).kind() == ebb_ir::OpKind::DotGeneral
        })
        .collect();
    assert_eq!(accumulates.len(), 2);
    let writes = ebb_ir::op::in_place_writes(body);
    for batch in [8, 64, 256, 257] {
        let b = ebb_testkit::bind(&[("B", batch), ("S", 5)]);
        let (want, _) = run_at(&g, &b);
        let (got, measured) = run_at(&h, &b);
        assert_eq!(got, want, "B={batch}");
        let planned = plan.peak_at(&b).unwrap();
        assert_eq!(
            check(&h, &plan, &[], &b).unwrap().peak,
            planned,
            "B={batch}"
        );
        assert_eq!(measured as i64, planned, "B={batch}");
        // The product apart is charged where the contraction is deeper than one block.
        for &n in &accumulates {
            let charged = ebb_ir::op::accumulate_product_bytes(body, n, &writes[&n])
                .unwrap()
                .unwrap()
                .eval(&b)
                .unwrap();
            let result = body.node(n).outputs[0].size_bytes().eval(&b).unwrap();
            assert_eq!(charged, if batch > 256 { result } else { 0 }, "B={batch}");
        }
    }
}

/// A scan accumulating `xᵀ·g` into carry 1 over `n` steps.
const SCAN: &str = r#"graph @main {
  %0 = input {index = 0, name = "x"} : f32[8,4]
  %1 = input {index = 1, name = "g"} : f32[8,6]
  %2 = input {index = 2, name = "acc"} : f32[4,6]
  %3 = constant {value = dense<0> : i32} : i32[]
  %4:4 = while(%3, %2, %0, %1) : i32[], f32[4,6], f32[8,4], f32[8,6] {
    region @cond {
      %0 = input {index = 0, name = ""} : i32[]
      %1 = input {index = 1, name = ""} : f32[4,6]
      %2 = input {index = 2, name = ""} : f32[8,4]
      %3 = input {index = 3, name = ""} : f32[8,6]
      %4 = constant {value = dense<3> : i32} : i32[]
      %5 = compare(%0, %4) {compare_type = "SIGNED", comparison_direction = "LT"} : i1[]
      return %5
    }
    region @body {
      %0 = input {aliasing_output = 0, index = 0, name = ""} : i32[]
      %1 = input {aliasing_output = 1, index = 1, name = ""} : f32[4,6]
      %2 = input {index = 2, name = ""} : f32[8,4]
      %3 = input {index = 3, name = ""} : f32[8,6]
      %4 = constant {value = dense<1> : i32} : i32[]
      %5 = add(%0, %4) : i32[]
      %6 = dot_general(%2, %3) {lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]} : f32[4,6]
      %7 = add(%1, %6) : f32[4,6]
      return %5, %7, %2, %3
    }
  }
  return %4#1 as "acc"
}
"#;

fn rewrite(text: &str) -> (usize, String) {
    let mut g = ebb_testkit::graph(text);
    let n = ebb_passes::dot_accumulate::accumulate_dots(&mut g);
    ebb_ir::verify::verify(&g).expect("verifies");
    (n, ebb_ir::text::print(&g))
}

/// Tests that a scan's `add(carry, dot)` becomes one dot-accumulate writing the carry in
/// place.
#[test]
fn rewrites_carried_accumulation() {
    let (n, text) = rewrite(SCAN);
    assert_eq!(n, 1);
    assert!(text.contains("%6 = dot_general(%2, %3, %1)"), "{text}");
    assert!(!text.contains(" add(%1"), "{text}");
    let g = ebb_testkit::graph(&text);
    let w = g.order().iter().copied();
    let w = w
        .filter(|&n| g.node(n).kind() == ebb_ir::OpKind::While)
        .next()
        .unwrap();
    let body = &g.node(w).regions[1];
    let writes = ebb_ir::op::in_place_writes(body);
    let acc = body.outputs()[1].node;
    assert_eq!(
        writes.get(&acc).map(Vec::as_slice),
        Some(
            &[ebb_ir::op::InPlace {
                operand: 2,
                result: 0
            }][..]
        )
    );
}

/// Tests that nothing changes when the carry is the right operand (`add(dot, c)`: the
/// executor adds the accumulator as the left operand only).
#[test]
fn keeps_accumulator_on_the_right() {
    let (n, _) = rewrite(&SCAN.replace("add(%1, %6)", "add(%6, %1)"));
    assert_eq!(n, 0);
}

/// Tests that nothing changes when the carry is not donated to its next value, or the
/// product has another reader.
#[test]
fn keeps_undonated_or_shared() {
    let undonated = SCAN.replace(
        "input {aliasing_output = 1, index = 1, name = \"\"} : f32[4,6]\n      %2",
        "input {index = 1, name = \"\"} : f32[4,6]\n      %2",
    );
    assert_eq!(rewrite(&undonated).0, 0);
    let shared = SCAN
        .replace("%4:4 = while(%3, %2, %0, %1) : i32[], f32[4,6], f32[8,4], f32[8,6]", "%4:5 = while(%3, %2, %0, %1, %2) : i32[], f32[4,6], f32[8,4], f32[8,6], f32[4,6]")
        .replace("%3 = input {index = 3, name = \"\"} : f32[8,6]\n      %4 = constant {value = dense<3>", "%3 = input {index = 3, name = \"\"} : f32[8,6]\n      %9 = input {index = 4, name = \"\"} : f32[4,6]\n      %4 = constant {value = dense<3>")
        .replace("%3 = input {index = 3, name = \"\"} : f32[8,6]\n      %4 = constant {value = dense<1>", "%3 = input {index = 3, name = \"\"} : f32[8,6]\n      %9 = input {index = 4, name = \"\"} : f32[4,6]\n      %4 = constant {value = dense<1>")
        .replace("return %5, %7, %2, %3", "return %5, %7, %2, %3, %6");
    assert_eq!(rewrite(&shared).0, 0);
}
