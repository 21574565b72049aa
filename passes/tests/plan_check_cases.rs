//! Tests of the independent plan checker (`ebb_passes::plan::check`) on a hand-built
//! forward/backward graph: what it measures with each decision kind, and that each failure
//! names the point, the value and the problem.

use crate::memory_helpers::FWD_BWD;
use ebb_ir::text::parse;
use ebb_ir::{Bindings, DimExpr, Graph};
use ebb_passes::memory::{liveness, program_order};
use ebb_passes::plan::{build_plan, check, CheckError, PlanOptions};
use ebb_passes::remat::CandidateOptions;
use ebb_plan::format::{CandidateId, Decision, DecisionKind, OpPos, Plan, Point, ValueId};

fn setup() -> (Graph, Plan, Bindings) {
    let g = parse(FWD_BWD).unwrap();
    let opts = PlanOptions {
        candidates: CandidateOptions {
            min_bytes: 0,
            ..CandidateOptions::default()
        },
        ..PlanOptions::default()
    };
    let plan = build_plan(&g, &program_order(&g), &opts).unwrap();
    assert_eq!(plan.candidates.len(), 1);
    (g, plan, ebb_testkit::bs(2, 8))
}

const ACT: i64 = 256 * 2 * 8; // bytes of one f32[B,S,64] at B=2, S=8
const W: i64 = 64 * 64 * 4;
/// The graph's only candidate.
const C0: CandidateId = CandidateId::new(0);

/// Tests that without decisions the checker's resident bytes are the memory module's, and that
/// a recompute frees the activation inside the gap, brings it back before its use (with the
/// `dot_general` result as transient memory) while a swap holds it on the host and reloads it
/// at the prefetch point.
#[test]
fn measures_recompute_and_swap() {
    let (g, plan, b) = setup();
    let base = check(&g, &plan, &[], &b).unwrap();
    assert_eq!(
        base.resident,
        liveness(&g, &program_order(&g)).resident_bytes(&b).unwrap()
    );
    assert_eq!(
        base.resident[5],
        ACT + W + 3 * ACT,
        "x, w, h2, n2 and n3 at point 5"
    );
    let rec = check(
        &g,
        &plan,
        &[Decision {
            candidate: C0,
            kind: DecisionKind::Recompute,
        }],
        &b,
    )
    .unwrap();
    for p in 0..14 {
        let freed = if (3..13).contains(&p) { ACT } else { 0 };
        assert_eq!(rec.resident[p], base.resident[p] - freed, "point {p}");
    }
    assert_eq!(
        rec.regen_peak[13],
        ACT + W + ACT + 2 * ACT,
        "x, w, n10, h1 and h2 while tanh reruns"
    );
    assert!(rec.host.iter().all(|&h| h == 0));
    let swap = check(
        &g,
        &plan,
        &[Decision {
            candidate: C0,
            kind: DecisionKind::Swap,
        }],
        &b,
    )
    .unwrap();
    for p in 0..14 {
        let freed = if (3..10).contains(&p) { ACT } else { 0 };
        assert_eq!(swap.resident[p], base.resident[p] - freed, "point {p}");
        assert_eq!(swap.host[p], freed, "point {p}");
    }
}

/// Tests that a regeneration moved past its use is reported at the use, naming the value and
/// the eviction.
#[test]
fn reports_a_use_after_eviction() {
    let (g, mut plan, b) = setup();
    plan.candidates[0].regenerate_before = Point::new(13);
    plan.candidates[0].evict_after = Point::new(1);
    let e = check(
        &g,
        &plan,
        &[Decision {
            candidate: C0,
            kind: DecisionKind::Swap,
        }],
        &b,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "point 2: `dot_general` reads value 3, which is evicted after point 1 by candidate 0"
    );
}

/// Tests that a recompute reading a value that was freed is reported with the value and why.
#[test]
fn reports_a_recompute_that_reads_a_freed_value() {
    let (g, mut plan, b) = setup();
    plan.candidates[0].recompute = vec![OpPos::new(3)];
    let e = check(
        &g,
        &plan,
        &[Decision {
            candidate: C0,
            kind: DecisionKind::Recompute,
        }],
        &b,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "point 13: recompute of value 3 (candidate 0) reads value 2, which is freed after its last use at point 1"
    );
    plan.candidates[0].recompute = vec![OpPos::new(2)];
    let e = check(
        &g,
        &plan,
        &[Decision {
            candidate: C0,
            kind: DecisionKind::Recompute,
        }],
        &b,
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            CheckError::BadRecompute { point, value, .. }
                if point == Point::new(13) && value == ValueId::new(3)
        ),
        "{e}"
    );
}

/// Tests that the accounting claims are checked: live ranges, bytes saved, the peak terms and
/// the graph the plan was made for.
#[test]
fn reports_wrong_accounting() {
    let (g, plan, b) = setup();
    let mut p = plan.clone();
    p.values[3].last_use = Point::new(12);
    assert_eq!(
        check(&g, &p, &[], &b).unwrap_err().to_string(),
        "value 3: planned live range [1, 12], derived [1, 13]"
    );
    let mut p = plan.clone();
    p.candidates[0].bytes_saved = "128*B*S".parse::<DimExpr>().unwrap();
    let e = check(
        &g,
        &p,
        &[Decision {
            candidate: C0,
            kind: DecisionKind::Swap,
        }],
        &b,
    )
    .unwrap_err();
    assert!(
        matches!(e, CheckError::Decision { candidate: C0, .. }),
        "{e}"
    );
    let mut p = plan.clone();
    p.peak_terms = vec!["1024*B*S".parse().unwrap()];
    assert!(matches!(
        check(&g, &p, &[], &b),
        Err(CheckError::Peak { planned: 16384, .. })
    ));
    let mut other = g.clone();
    other.name = "other".into();
    assert!(matches!(
        check(&other, &plan, &[], &b),
        Err(CheckError::GraphMismatch { .. })
    ));
    let bad = ebb_testkit::bs(0, 8);
    assert!(matches!(
        check(&g, &plan, &[], &bad),
        Err(CheckError::Bindings(_))
    ));
}
