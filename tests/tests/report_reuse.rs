//! What the `ebb plan` report reuses instead of deriving it again, on real fixtures (fused,
//! with `while`, `case` and in-place writes): the memory view built with the plan's region
//! transients ([`GraphMemory::of_plan`]) is the one [`GraphMemory::new`] derives, and the
//! checker kept from checking every variant ([`check_variants_keeping`]) proves finalized
//! decisions exactly as a fresh [`check`] does.

use ebb_ir::{Bindings, Graph, Point};
use ebb_passes::memory::{program_order, GraphMemory, Liveness, Schedule};
use ebb_passes::plan::{check, check_variants_keeping, verify_plan};
use ebb_plan::finalize::{finalize, FinalizeError, FinalizeOptions};
use ebb_plan::format::Plan;
use ebb_testkit::compiled;

/// Fused fixtures with a `while` (`gpt2_tiny_scan`, `ckpt_cumsum_key`), `case` ops
/// (`gpt2_tiny_dropout`, `gpt_bf16_scaled`) and in-place writes.
const FIXTURES: &[&str] = &[
    "mlp_sgd",
    "gpt2_tiny_adamw",
    "gpt2_tiny_scan",
    "ckpt_cumsum_key",
    "gpt2_tiny_dropout",
    "gpt_bf16_scaled",
];

/// Each fixture's compiled plan and the graph its verification parses (as a command loads
/// it), with the bindings to test at: the scope's representative ones.
fn loaded(name: &str) -> (Plan, Graph, Vec<Bindings>) {
    let plan = compiled(name).plan;
    let g = verify_plan(&plan).unwrap_or_else(|e| panic!("{name}: {e}"));
    let bindings = g.scope.representative_bindings(4);
    assert!(!bindings.is_empty(), "{name}: no binding");
    (plan, g, bindings)
}

/// A liveness as comparable data: every range, every transient, and their values at `b`.
type View = (Vec<String>, Vec<String>, Vec<i64>);

fn view(l: &Liveness, b: &Bindings) -> View {
    let ranges = l.ranges.iter().map(|r| format!("{r:?}")).collect();
    let transients = l.transients.iter().map(|t| format!("{t:?}")).collect();
    (ranges, transients, l.resident_bytes(b).unwrap())
}

/// The view with the plan's transients is the derived one: the same ranges, transients
/// (expressions), resident bytes and lower bound, in program order and under the plan's own
/// schedule.
#[test]
fn the_memory_view_from_the_plans_transients_is_the_derived_one() {
    for name in FIXTURES {
        let (plan, g, bindings) = loaded(name);
        let derived = GraphMemory::new(&g);
        let reused = GraphMemory::of_plan(&g, &plan)
            .unwrap_or_else(|| panic!("{name}: the plan's points name the graph's ops"));
        let scheduled: Schedule = plan
            .schedule
            .iter()
            .map(|pos| g.order()[pos.index()])
            .collect();
        for s in [program_order(&g), scheduled] {
            let (a, b_) = (derived.liveness(&s), reused.liveness(&s));
            for b in &bindings {
                assert_eq!(view(&a, b), view(&b_, b), "{name} at {b:?}");
                assert_eq!(
                    derived.lower_bound(b),
                    reused.lower_bound(b),
                    "{name} at {b:?}"
                );
            }
        }
        assert!(
            !plan.region_transients.is_empty() || *name == "mlp_sgd",
            "{name}: the fixture has region transients"
        );
    }
}

/// The plan's points naming one op twice is no view: the caller derives it instead.
#[test]
fn a_plan_whose_transients_name_an_op_twice_gives_no_view() {
    let (mut plan, g, _) = loaded("gpt2_tiny_adamw");
    let first = plan.region_transients[0].clone();
    plan.region_transients.push(first);
    assert!(GraphMemory::of_plan(&g, &plan).is_none());
    plan.region_transients.pop();
    plan.region_transients[0].point = Point::new(plan.schedule.len() + 3);
    assert!(GraphMemory::of_plan(&g, &plan).is_none());
}

/// The checker kept for the finalized variant proves the decisions finalize takes at half the
/// scheduled peak (or the smallest feasible budget) with the report a fresh [`check`] gives.
#[test]
fn the_kept_checker_proves_decisions_as_a_fresh_check_does() {
    for name in FIXTURES {
        let (plan, g, bindings) = loaded(name);
        for b in &bindings {
            let scheduled = finalize(&plan, b, &FinalizeOptions::default())
                .unwrap()
                .peak_bytes_scheduled;
            let at = |budget: i64| {
                let opts = FinalizeOptions {
                    budget: Some(budget),
                    ..Default::default()
                };
                finalize(&plan, b, &opts)
            };
            let c = match at(scheduled / 2) {
                Err(FinalizeError::Infeasible { smallest, .. }) => at(smallest).unwrap(),
                r => r.unwrap(),
            };
            let kept = check_variants_keeping(&g, &plan, b, c.variant).unwrap();
            let variant = plan.variant(c.variant).unwrap();
            assert_eq!(
                kept.check(&c.decisions).unwrap(),
                check(&g, variant, &c.decisions, b).unwrap(),
                "{name} at {b:?}"
            );
            assert_eq!(
                kept.check(&[]).unwrap(),
                check(&g, variant, &[], b).unwrap(),
                "{name} at {b:?}"
            );
        }
    }
}
