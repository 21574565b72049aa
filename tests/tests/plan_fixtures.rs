//! Tests that the memory plan works on the real JAX fixtures: candidates are found on the GPT-2
//! graphs (count, bytes saved at B=4, S=512, time), the independent checker accepts the plans
//! with every candidate taken as recompute and as swap, its per-point resident bytes equal the
//! memory module's, and the Plan JSON of `mlp_sgd` is stable (insta snapshot).

use ebb_ir::{Bindings, Symbol};
use ebb_passes::memory::{liveness, program_order};
use ebb_passes::plan::{build_plan, check, resident_bytes, PlanOptions, ThresholdQuery};
use ebb_plan::format::{DecisionKind, Plan};
use ebb_testkit::{bind, import_fixture as import};
use std::time::Instant;

/// Builds the plan in program order and checks it with no decision, all-recompute and all-swap;
/// returns the plan, the build time and the bytes saved by all candidates at `b`.
fn plan_and_check(name: &str, b: &Bindings) -> (Plan, f64, i64) {
    let g = import(name);
    let s = program_order(&g);
    let t = Instant::now();
    let plan = build_plan(&g, &s, &PlanOptions::default()).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let base = check(&g, &plan, &[], b).unwrap_or_else(|e| panic!("{name}: {e}"));
    let live = liveness(&g, &s).resident_bytes(b).unwrap();
    assert_eq!(
        base.resident, live,
        "{name}: checker and memory module disagree"
    );
    assert_eq!(resident_bytes(&g, &plan, b).unwrap(), live);
    let saved: i64 = plan
        .candidates
        .iter()
        .map(|c| c.bytes_saved.eval(b).unwrap())
        .sum();
    for kind in [DecisionKind::Recompute, DecisionKind::Swap] {
        let ds = plan.decisions_of_kind(kind);
        let t = Instant::now();
        let r = check(&g, &plan, &ds, b).unwrap_or_else(|e| panic!("{name} {kind:?}: {e}"));
        eprintln!(
            "{name}: {kind:?} x{}: peak {} -> {} bytes (check {:.3}s)",
            ds.len(),
            base.peak,
            r.peak,
            t.elapsed().as_secs_f64()
        );
        assert!(r.peak <= base.peak || kind == DecisionKind::Recompute);
    }
    eprintln!(
        "{name}: {} ops, {} candidates ({} recompute), bytes saved {saved} at {b:?}, plan built in {secs:.3}s",
        g.order().len(),
        plan.candidates.len(),
        plan.decisions_of_kind(DecisionKind::Recompute).len()
    );
    (plan, secs, saved)
}

#[test]
fn gpt2_tiny_adamw_candidates_pass_the_checker() {
    let b = bind(&[("B", 4), ("S", 512)]);
    let (plan, _, saved) = plan_and_check("gpt2_tiny_adamw", &b);
    assert!(!plan.candidates.is_empty());
    assert!(saved > 0);
}

#[test]
fn gpt2_small_candidates_pass_the_checker() {
    let b = bind(&[("B", 4), ("S", 512)]);
    let (plan, secs, _) = plan_and_check("gpt2_small", &b);
    assert!(!plan.candidates.is_empty());
    assert!(secs < 10.0);
}

/// Tests the Plan JSON of `mlp_sgd` (snapshot), its round trip, and the budget threshold on
/// `B` it carries against the memory module's concrete peak at every `B` around it.
#[test]
fn mlp_sgd_plan_json_snapshot_and_threshold() {
    let g = import("mlp_sgd");
    let s = program_order(&g);
    let budget = 8 << 20;
    let q = ThresholdQuery {
        symbol: Symbol::new("B"),
        fixed: Bindings::new(),
        budget,
    };
    let plan = build_plan(
        &g,
        &s,
        &PlanOptions {
            thresholds: vec![q],
            ..Default::default()
        },
    )
    .unwrap();
    let json = plan.to_json();
    assert_eq!(Plan::from_json(&json).unwrap(), plan);
    let t = &plan.thresholds[0];
    let first = t.first_over().expect("the peak grows with B");
    let live = liveness(&g, &s);
    for b in (first - 3).max(1)..=first + 3 {
        let peak = live.peak(&bind(&[("B", b)])).unwrap().0;
        assert_eq!(peak > budget, t.exceeds(b), "B = {b}: peak {peak}");
    }
    check(&g, &plan, &[], &bind(&[("B", first)])).unwrap();
    insta::assert_snapshot!(json);
}

/// Tests that the threshold on `S` (with `B = 4`) of the 2-layer GPT, whose peak has `S*S`
/// attention terms, matches the memory module's concrete peak.
#[test]
fn gpt2_tiny_threshold_on_s_matches_the_concrete_peak() {
    let g = import("gpt2_tiny_adamw");
    let s = program_order(&g);
    let budget = 64 << 20;
    let fixed = bind(&[("B", 4)]);
    let q = ThresholdQuery {
        symbol: Symbol::new("S"),
        fixed: fixed.clone(),
        budget,
    };
    let plan = build_plan(
        &g,
        &s,
        &PlanOptions {
            thresholds: vec![q],
            ..Default::default()
        },
    )
    .unwrap();
    let t = &plan.thresholds[0];
    eprintln!(
        "gpt2_tiny_adamw: peak > {budget} bytes at B=4 iff S in {:?}",
        t.over
    );
    let live = liveness(&g, &s);
    for s_val in (1..=512)
        .step_by(7)
        .chain(t.over.iter().flat_map(|r| [r.0 - 1, r.0, r.1]))
    {
        if !(1..=512).contains(&s_val) {
            continue;
        }
        let peak = live.peak(&bind(&[("B", 4), ("S", s_val)])).unwrap().0;
        assert_eq!(peak > budget, t.exceeds(s_val), "S = {s_val}: peak {peak}");
    }
}

/// Measures the 24-layer GPT-2 (22k ops): plan building and checking must stay far below the
/// 10 s compile budget.
#[test]
fn gpt2_24l_plans_and_checks_quickly() {
    let b = bind(&[("B", 4), ("S", 512)]);
    let (plan, secs, _) = plan_and_check("gpt2_24l", &b);
    assert!(!plan.candidates.is_empty());
    assert!(secs < 5.0, "plan built in {secs:.2}s");
}

/// Tests that, on every small fixture (the `while` loop of `gpt2_tiny_scan`, the convolutions
/// of `cnn_sgd`, bf16, JAX's own remat), the checker's per-point resident bytes equal the
/// memory module's at representative bindings, and that all-recompute and all-swap plans pass.
#[test]
fn every_fixture_plan_checks_against_the_memory_module() {
    for name in [
        "mlp_sgd",
        "mlp_bf16",
        "cnn_sgd",
        "cnn_poly_sgd",
        "unet_gn",
        "vae_convt",
        "gpt2_tiny_remat",
        "gpt2_tiny_scan",
    ] {
        let g = import(name);
        let s = program_order(&g);
        let plan = build_plan(&g, &s, &PlanOptions::default()).unwrap();
        let live = liveness(&g, &s);
        for b in g.scope.representative_bindings(3) {
            let base = check(&g, &plan, &[], &b).unwrap_or_else(|e| panic!("{name} at {b:?}: {e}"));
            assert_eq!(
                base.resident,
                live.resident_bytes(&b).unwrap(),
                "{name} at {b:?}"
            );
            for kind in [DecisionKind::Recompute, DecisionKind::Swap] {
                let r = check(&g, &plan, &plan.decisions_of_kind(kind), &b)
                    .unwrap_or_else(|e| panic!("{name} {kind:?} at {b:?}: {e}"));
                assert!(r.resident.iter().zip(&base.resident).all(|(a, b)| a <= b));
            }
        }
        eprintln!(
            "{name}: {} ops, {} candidates, {} region transients",
            g.order().len(),
            plan.candidates.len(),
            plan.region_transients.len()
        );
    }
}
