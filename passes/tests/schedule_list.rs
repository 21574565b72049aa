//! Tests of op scheduling (`ebb_passes::schedule`): it finds a lower-peak order where one
//! exists, does not reorder when program order is already best or when the reordering is worse
//! at some shape, falls back to program order on a checked sweep, and rejects invalid
//! schedules with typed errors.

use crate::memory_helpers as helpers;

use ebb_ir::{Graph, OpKind, ValueRef};
use ebb_passes::memory::{liveness, program_order, validate_schedule, ScheduleError};
use ebb_passes::schedule::{apply_schedule, schedule, schedule_checked, ScheduleOptions, Strategy};
use helpers::*;

/// Before and after IR of scheduling `g` with `opts`.
fn before_after(g: &Graph, opts: &ScheduleOptions) -> (String, Graph) {
    let s = schedule(g, opts);
    let mut after = g.clone();
    apply_schedule(&mut after, &s).expect("a valid schedule");
    ebb_ir::verify::verify(&after).expect("the scheduled graph verifies");
    (
        format!(
            "// before\n{}\n// after\n{}",
            ebb_ir::text::print(g),
            ebb_ir::text::print(&after)
        ),
        after,
    )
}

fn peak(g: &Graph, b: &ebb_ir::Bindings) -> i64 {
    liveness(g, &program_order(g)).peak(b).unwrap().0
}

/// Two large temporaries (`[B,S,16]`), each reduced to `[B]`; `large_first` puts both
/// expansions before both reductions.
fn two_temporaries(large_first: bool) -> Graph {
    let mut b = Builder::new("two_temporaries");
    let x = b.input("x", f32t(&["B", "S"]));
    let (r1, r2);
    if large_first {
        let a1 = b.call1("expand1", &[x], f32t(&["B", "S", "16"]));
        let a2 = b.call1("expand2", &[x], f32t(&["B", "S", "16"]));
        r1 = b.call1("reduce1", &[a1], f32t(&["B"]));
        r2 = b.call1("reduce2", &[a2], f32t(&["B"]));
    } else {
        let a1 = b.call1("expand1", &[x], f32t(&["B", "S", "16"]));
        r1 = b.call1("reduce1", &[a1], f32t(&["B"]));
        let a2 = b.call1("expand2", &[x], f32t(&["B", "S", "16"]));
        r2 = b.call1("reduce2", &[a2], f32t(&["B"]));
    }
    let out = b.op(OpKind::Add, &[r1, r2], f32t(&["B"]));
    b.outputs(&[out]);
    b.finish()
}

#[test]
fn finishes_one_large_temporary_before_starting_the_next() {
    let g = two_temporaries(true);
    let (text, after) = before_after(&g, &ScheduleOptions::default());
    insta::assert_snapshot!(text);
    for b in [bind(1, 1), bind(8, 256), bind(4096, 4096)] {
        assert!(peak(&after, &b) < peak(&g, &b), "at {b:?}");
    }
    // It is the order written by hand.
    let best = two_temporaries(false);
    assert_eq!(
        ebb_ir::text::print(&after).replace("two_temporaries", ""),
        ebb_ir::text::print(&best).replace("two_temporaries", "")
    );
}

#[test]
fn does_not_reorder_when_program_order_is_already_best() {
    let g = two_temporaries(false);
    let (text, after) = before_after(&g, &ScheduleOptions::default());
    assert_eq!(program_order(&after), program_order(&g));
    insta::assert_snapshot!(text);
}

/// A reordering that pays only at small shapes: `split` makes a 400 kB constant-size buffer
/// (with a `[B]` key that `expand` needs), and `widen` turns the buffer into a `[B,S,4]`
/// tensor. Run as soon as it frees the buffer, `widen` lowers the peak when `B*S` is small
/// but holds `[B,S,4]` across the `[B,S,16]` temporary when `B*S` is large.
fn pays_only_when_small() -> Graph {
    let mut b = Builder::new("pays_only_when_small");
    let x = b.input("x", f32t(&["B", "S"]));
    let split = b.call("split", &[x], vec![f32t(&["100000"]), f32t(&["B"])]);
    let (buf, key) = (ValueRef::new(split, 0), ValueRef::new(split, 1));
    let big = b.call1("expand", &[x, key], f32t(&["B", "S", "16"]));
    let s = b.call1("reduce", &[big], f32t(&["1"]));
    let w = b.call1("widen", &[buf], f32t(&["B", "S", "4"]));
    let out = b.call1("combine", &[s, w], f32t(&["B", "S", "4"]));
    b.outputs(&[out]);
    b.finish()
}

#[test]
fn does_not_reorder_when_the_reordering_is_worse_at_some_shape() {
    let g = pays_only_when_small();
    // Sampling the smallest shape only, free-first hoists `widen`...
    let small_only = ScheduleOptions {
        samples: 1,
        strategies: vec![Strategy::FreeFirst],
        ..Default::default()
    };
    let (_, hoisted) = before_after(&g, &small_only);
    assert_ne!(program_order(&hoisted), program_order(&g));
    assert!(peak(&hoisted, &bind(1, 1)) < peak(&g, &bind(1, 1)));
    assert!(peak(&hoisted, &bind(4096, 4096)) > peak(&g, &bind(4096, 4096)));
    // ...but with the default samples (small and large shapes) nothing is reordered.
    let (text, after) = before_after(&g, &ScheduleOptions::default());
    assert_eq!(program_order(&after), program_order(&g));
    insta::assert_snapshot!(text);
}

#[test]
fn checked_schedule_falls_back_to_program_order_when_a_sweep_shape_is_worse() {
    let g = pays_only_when_small();
    let opts = ScheduleOptions {
        samples: 1,
        strategies: vec![Strategy::FreeFirst],
        ..Default::default()
    };
    let sweep = [bind(1, 1), bind(64, 64), bind(4096, 4096)];
    let (s, report) = schedule_checked(&g, &opts, &sweep);
    assert_eq!(s, program_order(&g));
    assert!(report.fell_back);
    assert_eq!(
        (report.preferred, report.strategy),
        (Strategy::FreeFirst, Strategy::ProgramOrder)
    );
    for p in &report.sweep {
        assert_eq!(p.scheduled, p.program_order);
        assert!(p.lower_bound <= p.scheduled);
    }
    insta::assert_snapshot!(report.to_string());
    // Without the large shape in the sweep, the preferred schedule is kept.
    let (s, report) = schedule_checked(&g, &opts, &sweep[..2]);
    assert_ne!(s, program_order(&g));
    assert!(!report.fell_back);
    assert!(report.sweep.iter().all(|p| p.scheduled <= p.program_order));
}

#[test]
fn schedules_a_while_loop_by_its_dataflow() {
    let mut b = Builder::new("loop_and_barrier");
    let x = b.input("x", f32t(&["B", "S"]));
    let big = b.call1("expand", &[x], f32t(&["B", "S", "16"]));
    let mut node = ebb_ir::Node::new(ebb_ir::Op::OptimizationBarrier, vec![f32t(&["B", "S"])]);
    node.loc = Some("barrier".into());
    let bar = ValueRef::new(b.g.add_node(node, &[x]), 0);
    let small = b.call1("reduce", &[big], f32t(&["B"]));
    let y = b.call1("use", &[bar, small], f32t(&["B"]));
    b.outputs(&[y]);
    let g = b.finish();
    let s = schedule(&g, &ScheduleOptions::default());
    assert_eq!(validate_schedule(&g, &s), Ok(()));
    let pos = |v: ValueRef| s.iter().position(|&n| n == v.node).unwrap();
    assert!(pos(bar) < pos(y) && pos(big) < pos(small) && pos(small) < pos(y));
}

#[test]
fn invalid_schedules_are_rejected_with_typed_errors() {
    let mut g = two_temporaries(true);
    let s = program_order(&g);
    let input = g.inputs()[0];
    let mut dup = s.clone();
    dup[1] = dup[0];
    let cases: Vec<(Vec<_>, &str)> = vec![
        (s[..s.len() - 1].to_vec(), "not scheduled"),
        (dup, "scheduled twice"),
        ([&[input][..], &s[..]].concat(), "not an op"),
        (
            [&s[2..3], &s[0..2], &s[3..]].concat(),
            "runs before its operand",
        ),
    ];
    for (bad, msg) in cases {
        let err = apply_schedule(&mut g, &bad).unwrap_err();
        assert!(err.to_string().contains(msg), "{err}");
    }
    assert!(matches!(
        validate_schedule(&g, &s[..s.len() - 1].to_vec()),
        Err(ScheduleError::Missing { .. })
    ));
    assert_eq!(
        program_order(&g),
        s,
        "a rejected schedule leaves the graph unchanged"
    );
}

#[test]
fn schedule_pass_reorders_only_when_it_pays() {
    use ebb_passes::manager::{Pass, PassContext};
    use ebb_passes::schedule::SchedulePass;
    let pass = SchedulePass {
        apply: true,
        ..SchedulePass::default()
    };
    let mut g = two_temporaries(true);
    let r = pass.run(&mut g, &mut PassContext::new()).unwrap();
    assert!(r.changed && r.changes == 2, "{r:?}"); // expand2 and reduce1 swap
    ebb_ir::verify::verify(&g).unwrap();
    let r = pass.run(&mut g, &mut PassContext::new()).unwrap();
    assert!(!r.changed, "a second run finds nothing better");
}
