//! Tests of peak memory (`Liveness::resident_bytes`, `peak`, `symbolic_peak`) and of
//! `lower_bound`.

use crate::memory_helpers as helpers;

use ebb_ir::dim::DimError;
use ebb_ir::{Bindings, DimExpr, Graph, OpKind, Point};
use ebb_passes::memory::{liveness, lower_bound, program_order, Schedule};
use helpers::*;

/// x -> exp -> tanh -> negate (output), all `f32[B,64]` (256*B bytes).
fn chain() -> Graph {
    let mut b = Builder::new("chain");
    let x = b.input("x", f32t(&["B", "64"]));
    let a = b.op(OpKind::Exponential, &[x], f32t(&["B", "64"]));
    let t = b.op(OpKind::Tanh, &[a], f32t(&["B", "64"]));
    let n = b.op(OpKind::Negate, &[t], f32t(&["B", "64"]));
    b.outputs(&[n]);
    b.finish()
}

/// Two phases whose peaks cannot be ordered symbolically: a large constant-size scratch
/// buffer (400 kB) early, then a `[B,S,8]` activation late.
fn two_phases() -> Graph {
    let mut b = Builder::new("two_phases");
    let x = b.input("x", f32t(&["B", "S"]));
    let scratch = b.call1("scratch", &[x], f32t(&["100000"]));
    let small = b.call1("summarize", &[scratch], f32t(&["B"]));
    let act = b.call1("expand", &[x, small], f32t(&["B", "S", "8"]));
    let y = b.call1("reduce", &[act], f32t(&["B"]));
    b.outputs(&[y]);
    b.finish()
}

#[test]
fn chain_resident_bytes_and_peak() {
    let g = chain();
    let live = liveness(&g, &program_order(&g));
    // B = 2: every value is 512 bytes; op 1 (tanh) holds x, exp and tanh.
    assert_eq!(live.resident_bytes(&bind(2, 1)), Ok(vec![1024, 1536, 1536]));
    assert_eq!(live.peak(&bind(2, 1)), Ok((1536, Point::new(1))));
}

#[test]
fn symbolic_peak_drops_points_proven_dominated() {
    let g = chain();
    let live = liveness(&g, &program_order(&g));
    let sp = live.symbolic_peak(&g.scope);
    // 512*B <= 768*B at point 1, which equals point 2: one term is left.
    assert_eq!(
        sp.terms,
        vec![("768*B".parse::<DimExpr>().unwrap(), Point::new(2))]
    );
    assert_eq!(sp.to_string(), "max(768*B @2)");
    assert_eq!(sp.eval(&bind(5, 1)), Ok(3840));
}

#[test]
fn symbolic_peak_keeps_incomparable_points_and_evaluates_to_the_peak() {
    let g = two_phases();
    let live = liveness(&g, &program_order(&g));
    let sp = live.symbolic_peak(&g.scope);
    assert_eq!(sp.terms.len(), 2, "{sp}");
    insta::assert_snapshot!(format!(
        "{}\n// symbolic peak\n{sp}\n// as one expression\n{}",
        ebb_ir::text::print(&g),
        sp.to_expr()
    ));
    for b in [
        bind(1, 1),
        bind(4, 128),
        bind(64, 4096),
        bind(4096, 1),
        bind(1, 4096),
    ] {
        let (peak, _) = live.peak(&b).unwrap();
        assert_eq!(sp.eval(&b), Ok(peak), "at {b:?}");
        assert_eq!(sp.to_expr().eval(&b), Ok(peak), "at {b:?}");
    }
    // Small shapes peak while the scratch buffer is live, large ones at the activation.
    assert_eq!(sp.eval_with_point(&bind(1, 1)).unwrap().1, Point::new(1));
    assert_eq!(
        sp.eval_with_point(&bind(64, 4096)).unwrap().1,
        Point::new(3)
    );
}

#[test]
fn lower_bound_is_tight_on_a_chain_and_below_every_order_of_a_graph() {
    let g = chain();
    let b = bind(2, 1);
    assert_eq!(lower_bound(&g, &b), Ok(1536));
    // A graph with several topological orders: the bound is below each of them.
    let mut bld = Builder::new("fan");
    let x = bld.input("x", f32t(&["B", "S"]));
    let big: Vec<_> = (0..3)
        .map(|i| bld.call1(&format!("big{i}"), &[x], f32t(&["B", "S", "4"])))
        .collect();
    let small: Vec<_> = big
        .iter()
        .enumerate()
        .map(|(i, &v)| bld.call1(&format!("small{i}"), &[v], f32t(&["B"])))
        .collect();
    let out = bld.call1("sum", &small, f32t(&["B"]));
    bld.outputs(&[out]);
    let g = bld.finish();
    let ops = program_order(&g);
    for b in [bind(1, 1), bind(3, 7), bind(64, 64)] {
        let lb = lower_bound(&g, &b).unwrap();
        let mut orders = Vec::new();
        topological_orders(&g, &ops, &mut Vec::new(), &mut orders);
        assert_eq!(orders.len(), 90, "6 ops in 3 chains of 2: 6!/(2!^3) orders");
        for s in &orders {
            let (peak, _) = liveness(&g, s).peak(&b).unwrap();
            assert!(lb <= peak, "bound {lb} above the peak {peak} of {s:?}");
        }
    }
}

/// Every topological order of the non-input ops `ops` extending `prefix`.
fn topological_orders(
    g: &Graph,
    ops: &[ebb_ir::NodeId],
    prefix: &mut Schedule,
    out: &mut Vec<Schedule>,
) {
    if prefix.len() == ops.len() {
        out.push(prefix.clone());
        return;
    }
    for &op in ops {
        if prefix.contains(&op) {
            continue;
        }
        let ready = g
            .operands(op)
            .iter()
            .all(|v| g.node(v.node).kind() == OpKind::Input || prefix.contains(&v.node));
        if ready {
            prefix.push(op);
            topological_orders(g, ops, prefix, out);
            prefix.pop();
        }
    }
}

#[test]
fn evaluation_errors_are_typed() {
    let g = chain();
    let live = liveness(&g, &program_order(&g));
    assert_eq!(
        live.resident_bytes(&Bindings::new()),
        Err(DimError::Unbound("B".into()))
    );
    assert_eq!(live.peak(&bind(i64::MAX / 2, 1)), Err(DimError::Overflow));
    assert_eq!(
        lower_bound(&g, &bind(i64::MAX / 2, 1)),
        Err(DimError::Overflow)
    );
    // The sum overflows even though every size fits.
    assert_eq!(live.peak(&bind(i64::MAX / 512, 1)), Err(DimError::Overflow));
}
