//! Tests of the liveness analysis (`ebb_passes::memory::liveness`): live ranges of chains,
//! diamonds, dead values, inputs that are outputs, the per-point index, and the transient
//! memory of a `while` body.

use crate::memory_helpers as helpers;

use ebb_ir::op::CompareSpec;
use ebb_ir::{DType, DimExpr, Graph, Op, OpKind, Point, Relation, ValueRef};
use ebb_passes::memory::{liveness, program_order, Liveness, ValueClass};
use helpers::*;

/// The IR followed by one line per live range: value, class, `[def, last_use]`, bytes.
fn table(g: &Graph, live: &Liveness) -> String {
    let mut s = ebb_ir::text::print(g);
    s.push_str("\n// live ranges (points 0..");
    s.push_str(&format!("{})\n", live.points));
    for r in &live.ranges {
        s.push_str(&format!(
            "{} {:?} [{}, {}] {}\n",
            r.value, r.class, r.def, r.last_use, r.bytes
        ));
    }
    for t in &live.transients {
        s.push_str(&format!(
            "transient of %{} at {}: {}\n",
            t.node.index(),
            t.point,
            t.bytes
        ));
    }
    s
}

fn range(live: &Liveness, v: ValueRef) -> (usize, usize, ValueClass) {
    let r = live.range_of(v).expect("value has a range");
    (r.def.index(), r.last_use.index(), r.class.clone())
}

/// x -> exp -> tanh -> negate (output).
fn chain() -> (Graph, [ValueRef; 4]) {
    let mut b = Builder::new("chain");
    let x = b.input("x", f32t(&["B", "64"]));
    let a = b.op(OpKind::Exponential, &[x], f32t(&["B", "64"]));
    let t = b.op(OpKind::Tanh, &[a], f32t(&["B", "64"]));
    let n = b.op(OpKind::Negate, &[t], f32t(&["B", "64"]));
    b.outputs(&[n]);
    (b.finish(), [x, a, t, n])
}

#[test]
fn chain_ranges_end_at_the_last_use() {
    let (g, [x, a, t, n]) = chain();
    let live = liveness(&g, &program_order(&g));
    assert_eq!(live.points, 3);
    assert_eq!(range(&live, x), (0, 2, ValueClass::Input));
    assert_eq!(range(&live, a), (0, 1, ValueClass::Intermediate));
    assert_eq!(range(&live, t), (1, 2, ValueClass::Intermediate));
    assert_eq!(range(&live, n), (2, 2, ValueClass::Output));
    assert_eq!(
        live.range_of(x).map(|r| r.bytes.clone()),
        Some("256*B".parse::<DimExpr>().unwrap())
    );
    insta::assert_snapshot!(table(&g, &live));
}

/// x -> a = exp; b = tanh(a); c = negate(a); d = add(b, c) (output).
#[test]
fn diamond_keeps_the_shared_value_until_its_second_user() {
    let mut bld = Builder::new("diamond");
    let x = bld.input("x", f32t(&["B", "S"]));
    let a = bld.op(OpKind::Exponential, &[x], f32t(&["B", "S"]));
    let b = bld.op(OpKind::Tanh, &[a], f32t(&["B", "S"]));
    let c = bld.op(OpKind::Negate, &[a], f32t(&["B", "S"]));
    let d = bld.op(OpKind::Add, &[b, c], f32t(&["B", "S"]));
    bld.outputs(&[d]);
    let g = bld.finish();
    let live = liveness(&g, &program_order(&g));
    assert_eq!(range(&live, a), (0, 2, ValueClass::Intermediate));
    assert_eq!(range(&live, b), (1, 3, ValueClass::Intermediate));
    assert_eq!(range(&live, c), (2, 3, ValueClass::Intermediate));
    assert_eq!(range(&live, d), (3, 3, ValueClass::Output));
    insta::assert_snapshot!(table(&g, &live));
}

#[test]
fn ranges_follow_the_schedule_not_the_program_order() {
    // Two independent branches; running the second first swaps their points.
    let mut bld = Builder::new("branches");
    let x = bld.input("x", f32t(&["B"]));
    let a = bld.op(OpKind::Exponential, &[x], f32t(&["B"]));
    let b = bld.op(OpKind::Tanh, &[x], f32t(&["B"]));
    let c = bld.op(OpKind::Add, &[a, b], f32t(&["B"]));
    bld.outputs(&[c]);
    let g = bld.finish();
    let s = vec![b.node, a.node, c.node];
    let live = liveness(&g, &s);
    assert_eq!(range(&live, b), (0, 2, ValueClass::Intermediate));
    assert_eq!(range(&live, a), (1, 2, ValueClass::Intermediate));
    // Ranges are listed inputs first, then in schedule order.
    let order: Vec<ValueRef> = live.ranges.iter().map(|r| r.value).collect();
    assert_eq!(order, vec![x, b, a, c]);
}

#[test]
fn dead_value_lives_only_at_its_def_point_and_input_output_stays_an_input() {
    let mut bld = Builder::new("dead");
    let x = bld.input("x", f32t(&["B"]));
    let dead = bld.op(OpKind::Exponential, &[x], f32t(&["B"]));
    let y = bld.op(OpKind::Tanh, &[x], f32t(&["B"]));
    bld.outputs(&[y, x]);
    let g = bld.finish();
    let live = liveness(&g, &program_order(&g));
    assert_eq!(range(&live, dead), (0, 0, ValueClass::Intermediate));
    assert_eq!(range(&live, x), (0, 1, ValueClass::Input));
    assert_eq!(range(&live, y), (1, 1, ValueClass::Output));
}

#[test]
fn per_point_index_agrees_with_the_ranges() {
    let (g, _) = chain();
    let live = liveness(&g, &program_order(&g));
    for p in Point::all(live.points) {
        for &r in live.defined_at(p) {
            assert_eq!(live.ranges[r as usize].def, p);
        }
        for &r in live.freed_after(p) {
            assert_eq!(live.ranges[r as usize].last_use, p);
        }
        let expect: Vec<usize> = (0..live.ranges.len())
            .filter(|&i| live.ranges[i].def <= p && p <= live.ranges[i].last_use)
            .collect();
        assert_eq!(live.live_at(p), expect);
    }
    let total: usize = Point::all(live.points)
        .map(|p| live.defined_at(p).len())
        .sum();
    assert_eq!(total, live.ranges.len());
    let beyond = Point::new(99);
    assert!(live.defined_at(beyond).is_empty() && live.freed_after(beyond).is_empty());
}

#[test]
fn graph_without_ops_has_one_point_with_its_inputs() {
    let mut bld = Builder::new("empty");
    let x = bld.input("x", f32t(&["B"]));
    bld.outputs(&[x]);
    let g = bld.finish();
    let live = liveness(&g, &program_order(&g));
    assert_eq!(live.points, 1);
    assert_eq!(live.peak(&bind(3, 1)), Ok((12, Point::new(0))));
}

/// A `while` whose body computes a `[B, S]` intermediate from the carried `[B, S]` value.
pub fn while_graph() -> Graph {
    let carried = || vec![ty(DType::I32, &[]), f32t(&["B", "S"])];
    let mut cond = Builder::new("cond");
    let i = cond.input("i", carried()[0].clone());
    let _x = cond.input("x", carried()[1].clone());
    let n = cond.call1("limit", &[], ty(DType::I32, &[]));
    let lt_op = Op::Compare(CompareSpec {
        direction: Relation::Lt,
        compare_type: None,
    });
    let lt = cond
        .g
        .add_node(ebb_ir::Node::new(lt_op, vec![ty(DType::I1, &[])]), &[i, n]);
    cond.outputs(&[ValueRef::new(lt, 0)]);
    let mut body = Builder::new("body");
    let i = body.input("i", carried()[0].clone());
    let x = body.input("x", carried()[1].clone());
    let one = body.call1("one", &[], ty(DType::I32, &[]));
    let i2 = body.op(OpKind::Add, &[i, one], ty(DType::I32, &[]));
    let e = body.op(OpKind::Exponential, &[x], f32t(&["B", "S"]));
    let x2 = body.op(OpKind::Tanh, &[e], f32t(&["B", "S"]));
    body.outputs(&[i2, x2]);
    let mut b = Builder::new("loop");
    let i0 = b.input("i0", carried()[0].clone());
    let x0 = b.input("x0", carried()[1].clone());
    let mut node = ebb_ir::Node::new(Op::While, carried());
    node.regions = vec![cond.finish(), body.finish()];
    let w = b.g.add_node(node, &[i0, x0]);
    let y = b.op(OpKind::Negate, &[ValueRef::new(w, 1)], f32t(&["B", "S"]));
    b.outputs(&[y]);
    b.finish()
}

#[test]
fn while_body_peak_minus_its_inputs_is_charged_at_the_loop() {
    let g = while_graph();
    let live = liveness(&g, &program_order(&g));
    assert_eq!(live.transients.len(), 1);
    let t = &live.transients[0];
    assert_eq!(t.point, Point::new(0));
    // Body peak: at `tanh`, its inputs (4 + 4*B*S), the new counter (4), `exp` and `tanh`
    // (4*B*S each); minus the inputs: 8*B*S + 4.
    assert_eq!(t.bytes, "8*B*S + 4".parse::<DimExpr>().unwrap());
    // At B=2, S=3: inputs 4 + 24, the loop's results 4 + 24, transient 52.
    assert_eq!(
        live.resident_bytes(&bind(2, 3)).unwrap()[0],
        4 + 24 + 4 + 24 + 52
    );
    insta::assert_snapshot!(table(&g, &live));
}
