//! Tests of `budget` (`pipeline/src/budget.rs`): a resolver used at many shapes gives, at each,
//! exactly the bytes a fresh one gives there (`resolve_budget`), and fractions follow the
//! program-order and scheduled peaks (checked against `plan_report`'s figures).

use ebb_passes::memory;
use ebb_pipeline::{resolve_budget, Budget, BudgetResolver};
use ebb_testkit::bs;

#[test]
fn the_resolver_resolves_as_resolve_budget_at_every_shape() {
    let c = ebb_testkit::compiled("gpt2_tiny_adamw");
    for budget in [
        Budget::Bytes(123_456),
        Budget::Fraction(0.5),
        Budget::Fraction(0.93),
        Budget::FractionOfScheduled(0.7),
    ] {
        let r = BudgetResolver::new(budget);
        assert_eq!(r.budget(), budget);
        let mut seen = Vec::new();
        for (b, s) in [(2, 16), (8, 64), (3, 7), (8, 64), (16, 128)] {
            let at = bs(b, s);
            let want = resolve_budget(&c.plan, &c.graph, &at, budget).unwrap();
            assert_eq!(
                r.resolve(&c.plan, &c.graph, &at).unwrap(),
                want,
                "{budget:?} {at:?}"
            );
            // The definition: a share of the program-order peak (`memory::peaks`, its own
            // liveness build) or of the best variant's scheduled peak.
            let po = memory::peaks(&c.graph, &memory::program_order(&c.graph), &[at.clone()])
                .unwrap()[0];
            let scheduled = c.plan.best_variant(&at).unwrap().1;
            assert_eq!(want, budget.resolve(po, scheduled), "{budget:?} {at:?}");
            seen.push(want);
        }
        // Fractions resolve to other bytes at other shapes.
        if !matches!(budget, Budget::Bytes(_)) {
            assert!(
                seen[0] < seen[1] && seen[1] < seen[4],
                "{budget:?}: {seen:?}"
            );
        }
    }
}
