//! Tests of donation (`ebb_passes::donate`) and of what it changes downstream: the pairing of
//! the `auto` and list policies and their errors, the donated input's live range, the lower
//! bound, candidates that would read a donated input after its last read, and the checker's
//! rejection of such a read.

use crate::memory_helpers::FWD_BWD;
use ebb_ir::text::parse;
use ebb_ir::{Graph, Point, ValueRef};
use ebb_passes::donate::{apply, report, DonatePolicy};
use ebb_passes::memory::{liveness, lower_bound, program_order, ValueClass};
use ebb_passes::plan::{build_plan, check, PlanOptions};
use ebb_passes::remat::CandidateOptions;
use ebb_plan::format::{CandidateId, Decision, DecisionKind};

/// FWD_BWD with an SGD-like update of `w` (read right after the forward) returned second, and
/// an unread scalar input `lr` that no output matches.
fn with_update() -> Graph {
    let text = FWD_BWD
        .replace(
            "  %h1 = ",
            "  %lr = input {index = 2, name = \"lr\"} : f32[]\n  %h1 = ",
        )
        .replace(
            "  %n1 = negate(%h3) : f32[B,S,64]\n",
            "  %wn = negate(%w) : f32[64,64]\n  %n1 = negate(%h3) : f32[B,S,64]\n",
        )
        .replace(
            "return %g as \"grad\"",
            "return %g as \"grad\", %wn as \"w_new\"",
        );
    parse(&text).unwrap()
}

fn input(g: &Graph, name: &str) -> ebb_ir::NodeId {
    *g.inputs()
        .iter()
        .find(|&&id| g.input_name(id) == name)
        .unwrap()
}

/// `w` donated (by name).
fn donate_w(g: &mut Graph) {
    assert_eq!(apply(g, &"w".parse().unwrap()).unwrap(), 1);
}

/// Tests that `auto` pairs each input with the first unpaired output of its type, as JAX does
/// for `donate_argnums` over every argument (`x` with the gradient of its type, `w` with its
/// update), leaves `lr` alone, that the pairing survives the textual IR, and that `none`
/// clears it.
#[test]
fn auto_pairs_inputs_with_outputs_of_their_type() {
    let mut g = with_update();
    assert_eq!(apply(&mut g, &DonatePolicy::Auto).unwrap(), 2);
    assert_eq!(g.aliasing_output(input(&g, "x")), Some(0));
    assert_eq!(g.aliasing_output(input(&g, "w")), Some(1));
    assert_eq!(g.aliasing_output(input(&g, "lr")), None);
    let r = report(&g);
    assert_eq!(r.donated.len(), 2);
    assert_eq!((r.donated[1].input, r.donated[1].output), (1, 1));
    assert_eq!(r.donated[1].bytes, "16384");
    let text = ebb_ir::text::print(&g);
    assert!(text.contains("aliasing_output = 1"), "{text}");
    let back = parse(&text).unwrap();
    assert_eq!(back.aliasing_output(input(&back, "w")), Some(1));
    assert_eq!(apply(&mut g, &DonatePolicy::None).unwrap(), 2);
    assert_eq!(g.aliasing_output(input(&g, "w")), None);
}

/// Tests the list policy: by name or index, and the named errors for an unknown input and an
/// input nothing updates (the graph is left unchanged then).
#[test]
fn a_list_names_inputs_and_refuses_what_cannot_be_donated() {
    let mut g = with_update();
    assert_eq!(apply(&mut g, &"1".parse().unwrap()).unwrap(), 1);
    assert_eq!(g.aliasing_output(input(&g, "w")), Some(1));
    let e = apply(&mut g, &"w,nope".parse().unwrap()).unwrap_err();
    assert!(e.to_string().contains("`nope` is not an input"), "{e}");
    let e = apply(&mut g, &"lr".parse().unwrap()).unwrap_err();
    assert!(e.to_string().contains("`lr` has no unpaired output"), "{e}");
    assert_eq!(
        g.aliasing_output(input(&g, "w")),
        Some(1),
        "unchanged after errors"
    );
}

/// Tests that the verifier refuses a donation to an output of another type or out of range.
#[test]
fn the_verifier_checks_the_pairing() {
    let g = with_update();
    let bad = ebb_ir::text::print(&g).replace(
        "index = 1, name = \"w\"",
        "aliasing_output = 0, index = 1, name = \"w\"",
    );
    let e = ebb_ir::verify::verify(&parse(&bad).unwrap()).unwrap_err();
    assert!(e.to_string().contains("whose type differs"), "{e}");
    let bad = ebb_ir::text::print(&g).replace(
        "index = 1, name = \"w\"",
        "aliasing_output = 7, index = 1, name = \"w\"",
    );
    let e = ebb_ir::verify::verify(&parse(&bad).unwrap()).unwrap_err();
    assert!(e.to_string().contains("the graph has 2 outputs"), "{e}");
}

/// Tests that a donated input is resident only up to its last read, which lowers the peak and
/// the lower bound by its bytes where it is dead, and keeps the bound below the peak.
#[test]
fn a_donated_input_dies_at_its_last_read() {
    let b = ebb_testkit::bs(2, 8);
    let kept = with_update();
    let mut g = kept.clone();
    donate_w(&mut g);
    let w = ValueRef::new(input(&g, "w"), 0);
    let live = liveness(&g, &program_order(&g));
    let r = live.range_of(w).unwrap();
    assert_eq!(r.class, ValueClass::Donated);
    // Points: h1 0, h2 1, h3 2, wn 3 (the last read of w).
    assert_eq!((r.def, r.last_use), (Point::new(0), Point::new(3)));
    let before = liveness(&kept, &program_order(&kept))
        .resident_bytes(&b)
        .unwrap();
    let after = live.resident_bytes(&b).unwrap();
    for (p, (x, y)) in before.iter().zip(&after).enumerate() {
        let w_bytes = if p > 3 { 64 * 64 * 4 } else { 0 };
        assert_eq!(x - y, w_bytes, "point {p}");
    }
    let lb = lower_bound(&g, &b).unwrap();
    assert!(lb < lower_bound(&kept, &b).unwrap());
    assert!(lb <= live.peak(&b).unwrap().0);
}

/// Tests that no candidate recomputes `h2` once `w` is dead (its recompute would read the
/// donated buffer after the update overwrote it), and that the checker rejects such a
/// recompute when a plan claims it anyway.
#[test]
fn no_recompute_reads_a_donated_input_after_its_last_read() {
    let opts = PlanOptions {
        candidates: CandidateOptions {
            min_bytes: 0,
            ..CandidateOptions::default()
        },
        ..PlanOptions::default()
    };
    let b = ebb_testkit::bs(2, 8);
    let kept = with_update();
    let plan = build_plan(&kept, &program_order(&kept), &opts).unwrap();
    let c = CandidateId::new(0);
    assert!(plan.candidates[0].allows(DecisionKind::Recompute));
    let recompute = [Decision {
        candidate: c,
        kind: DecisionKind::Recompute,
    }];
    check(&kept, &plan, &recompute, &b).unwrap();

    let mut g = kept.clone();
    donate_w(&mut g);
    let mut plan = build_plan(&g, &program_order(&g), &opts).unwrap();
    assert_eq!(plan.candidates.len(), 1);
    assert!(!plan.candidates[0].allows(DecisionKind::Recompute));
    check(
        &g,
        &plan,
        &[Decision {
            candidate: c,
            kind: DecisionKind::Swap,
        }],
        &b,
    )
    .unwrap();
    // A tampered plan: the recompute of the donated graph's candidate, with w listed as read.
    let unplanned = build_plan(&kept, &program_order(&kept), &opts).unwrap();
    plan.candidates[0] = unplanned.candidates[0].clone();
    let e = check(&g, &plan, &recompute, &b).unwrap_err();
    assert!(e.to_string().contains("freed after its last use"), "{e}");
}
