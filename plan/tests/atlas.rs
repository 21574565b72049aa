//! The plan atlas (`Finalizer::prepare_atlas`, `finalize/atlas.rs`): a result of its fast path
//! fits the budget (planned peak and arena, offsets that never overlap), any other is the full
//! finalize's, and results depend on the atlas's samples, not on the order of the shapes
//! finalized; an atlas for one budget leaves finalizes under another unchanged.

use super::replay::random_plan;
use ebb_ir::{Bindings, BindingsExt};
use ebb_plan::arena::check_layout;
use ebb_plan::finalize::{ConcretePlan, FinalizeError, FinalizeOptions, Finalizer};
use ebb_plan::format::Plan;

/// What a result is compared by: decisions, planned peak, arena size and every offset.
pub(crate) fn key(r: &Result<ConcretePlan, FinalizeError>) -> String {
    match r {
        Ok(c) => format!(
            "{:?}|{}|{}|{:?}",
            c.decisions,
            c.peak_bytes_planned,
            c.arena.arena_bytes,
            c.arena
                .allocations
                .iter()
                .map(|a| a.offset)
                .collect::<Vec<_>>()
        ),
        Err(e) => format!("{e}"),
    }
}

pub(crate) fn shape(s: i64) -> Bindings {
    Bindings::parse(&format!("B=2,S={s}")).unwrap()
}

#[test]
fn atlas_results_fit_and_do_not_depend_on_the_order_of_shapes() {
    let mut next = ebb_testkit::lcg(0xa71a_5040);
    let mut hits = 0;
    for _ in 0..6 {
        let plan: Plan = random_plan(40 + next(40) as usize, &mut next);
        let base = FinalizeOptions::default();
        let mid = Finalizer::new(&plan)
            .finalize(&shape(256), &base)
            .expect("finalizes without a budget")
            .peak_bytes_scheduled;
        let opts = FinalizeOptions {
            budget: Some(mid * 7 / 10),
            ..base.clone()
        };
        let samples: Vec<Bindings> = (0..12).map(|i| shape(64 + 40 * i)).collect();
        let shapes: Vec<i64> = (0..24).map(|_| 64 + next(460) as i64).collect();
        let (a, b, plain) = (
            Finalizer::new(&plan),
            Finalizer::new(&plan),
            Finalizer::new(&plan),
        );
        a.prepare_atlas(&samples, &opts);
        b.prepare_atlas(&samples, &opts);
        let forward: Vec<String> = shapes
            .iter()
            .map(|&s| {
                let before = a.atlas_hits();
                let r = a.finalize(&shape(s), &opts);
                if a.atlas_hits() > before {
                    // The fast path: checked against the budget.
                    let c = r.as_ref().expect("the fast path gives a result");
                    assert!(c.peak_bytes_planned <= mid * 7 / 10, "S={s}: planned peak");
                    assert!(c.arena.arena_bytes <= mid * 7 / 10, "S={s}: arena");
                    check_layout(&c.arena).unwrap_or_else(|e| panic!("S={s}: {e}"));
                } else {
                    // Else the full finalize, as without an atlas.
                    assert_eq!(key(&r), key(&plain.finalize(&shape(s), &opts)), "S={s}");
                }
                key(&r)
            })
            .collect();
        let backward: Vec<String> = shapes
            .iter()
            .rev()
            .map(|&s| key(&b.finalize(&shape(s), &opts)))
            .collect();
        assert_eq!(
            forward,
            backward.into_iter().rev().collect::<Vec<_>>(),
            "order of shapes"
        );
        hits += a.atlas_hits();
        // Another budget: as without an atlas.
        let other = FinalizeOptions {
            budget: Some(mid * 6 / 10),
            ..base.clone()
        };
        for &s in &shapes[..6] {
            assert_eq!(
                key(&a.finalize(&shape(s), &other)),
                key(&plain.finalize(&shape(s), &other)),
                "S={s} under another budget"
            );
        }
    }
    assert!(hits > 0, "the fast path was never taken");
}
