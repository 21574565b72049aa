//! Tests of `budget` (`pipeline/src/budget.rs`): a resolver built once gives, at every shape,
//! exactly the bytes `resolve_budget` gives there.

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
