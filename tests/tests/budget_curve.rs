//! The budget curve (`ebb_pipeline::curve`) on real fixtures — a JAX GPT, a JAX MLP and an ONNX
//! Runtime training model — at random shapes, devices and grid sizes: the curve's invariant
//! holds at every point (budgets increasing, arena ≤ the budget it was decided at ≤ the point's
//! budget, added time never larger at a larger budget, a fitting point followed only by fitting
//! points), and a point's decisions are what finalize gives at the budget it names.

use ebb_ir::Bindings;
use ebb_pipeline::{budget_curve, Compiled, Pricing};
use ebb_plan::finalize::Finalizer;
use ebb_testkit::bind;
use proptest::prelude::*;
use std::sync::OnceLock;

/// The fixtures, each with its symbols' names (batch, sequence), compiled once with the
/// default options.
const FIXTURES: [(&str, &str, Option<&str>); 3] = [
    ("gpt2_tiny_adamw", "B", Some("S")),
    ("mlp_sgd", "B", None),
    ("onnx/ort_gpt2_tiny_training", "batch", Some("seq")),
];

fn fixture(k: usize) -> &'static Compiled {
    static PLANS: [OnceLock<Compiled>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    PLANS[k].get_or_init(|| ebb_testkit::compiled(FIXTURES[k].0))
}

fn bindings(k: usize, batch: i64, seq: i64) -> Bindings {
    let (_, b, s) = FIXTURES[k];
    match s {
        Some(s) => bind(&[(b, batch), (s, seq)]),
        None => bind(&[(b, batch)]),
    }
}

/// Checks the curve of fixture `k` at `b` on `device` over `points` budgets, and finalizes
/// again at the budgets two points name: the first that fits and one in the middle.
fn check_curve(k: usize, b: &Bindings, device: &str, points: usize) {
    let c = fixture(k);
    let pricing = Pricing::resolve(Some(device), Default::default(), &c.plan).unwrap();
    let curve = budget_curve(&c.plan, &c.graph, b, &pricing, points)
        .unwrap_or_else(|e| panic!("{}: {e:#}", FIXTURES[k].0));
    curve
        .check()
        .unwrap_or_else(|e| panic!("{} at {b:?} on {device}: {e:#}", FIXTURES[k].0));
    assert!(!curve.points.is_empty());
    assert_eq!(curve.points[0].budget_bytes, curve.smallest_feasible_bytes);
    let fit: Vec<_> = curve.points.iter().filter(|p| p.fits).collect();
    let last = fit
        .last()
        .expect("the arena without decisions fits at the curve's top");
    assert_eq!(last.added_us, 0.0, "the top of the curve adds nothing");
    let finalizer = Finalizer::new(&c.plan);
    for p in [fit[0], fit[fit.len() / 2]] {
        let Some(at) = p.decided_at_bytes else {
            continue;
        };
        let again = finalizer
            .finalize(b, &pricing.finalize_options(Some(at), true))
            .unwrap();
        assert_eq!(
            (
                again.arena.arena_bytes,
                again.overhead_us,
                again.decisions.len()
            ),
            (
                p.arena_bytes,
                p.added_us,
                p.recompute_decisions + p.swap_decisions
            ),
            "finalize at {at} bytes gives the point's decisions"
        );
    }
}

#[test]
fn the_curve_of_gpt2_tiny_at_b8_s256_is_monotone_and_fits() {
    check_curve(0, &bindings(0, 8, 256), "h100-sxm-pcie5", 16);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Tests that at random shapes, devices and grid sizes every fixture's curve keeps its
    /// invariant.
    #[test]
    fn every_curve_is_monotone_and_fits(
        k in 0usize..3,
        batch in 1i64..16,
        seq in 1i64..300,
        gpu in any::<bool>(),
        points in 2usize..12,
    ) {
        let device = if gpu { "h100-sxm-pcie5" } else { "cpu" };
        check_curve(k, &bindings(k, batch, seq), device, points);
    }
}
