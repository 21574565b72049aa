//! Property tests of the memory model on random DAGs with symbolic shapes: the symbolic peak
//! evaluates to the concrete peak, resident bytes agree with a direct sum over the live
//! ranges, and the lower bound is below the peak of every schedule tried; each with and
//! without donated inputs.

use crate::memory_helpers as helpers;

use ebb_passes::memory::{liveness, lower_bound, program_order};
use ebb_passes::schedule::{candidate_schedule, Strategy};
use helpers::*;
use proptest::prelude::*;

/// `g` with every input that has an output of its type donated (when `donate`).
fn donated(mut g: ebb_ir::Graph, donate: bool) -> ebb_ir::Graph {
    if donate {
        ebb_passes::donate::apply(&mut g, &ebb_passes::donate::DonatePolicy::Auto).unwrap();
    }
    g
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Tests that pruning keeps the maximum: the symbolic peak equals the peak everywhere.
    #[test]
    fn symbolic_peak_evaluates_to_the_peak(g in random_dag(), bs in prop::collection::vec(random_bindings(), 1..6), donate in any::<bool>()) {
        let g = donated(g, donate);
        let live = liveness(&g, &program_order(&g));
        let sp = live.symbolic_peak(&g.scope);
        for b in &bs {
            prop_assert_eq!(sp.eval(b), live.peak(b).map(|(v, _)| v), "{} at {:?}", sp, b);
        }
    }

    /// Tests the difference-array sum against a direct sum over the ranges live at each point.
    #[test]
    fn resident_bytes_is_the_sum_over_live_ranges(g in random_dag(), b in random_bindings(), donate in any::<bool>()) {
        let g = donated(g, donate);
        let live = liveness(&g, &program_order(&g));
        let fast = live.resident_bytes(&b).unwrap();
        for (p, &bytes) in ebb_ir::Point::all(fast.len()).zip(&fast) {
            let slow: i64 = live.live_at(p).iter().map(|&i| live.ranges[i].bytes.eval(&b).unwrap()).sum::<i64>()
                + live.transients.iter().filter(|t| t.point == p).map(|t| t.bytes.eval(&b).unwrap()).sum::<i64>();
            prop_assert_eq!(bytes, slow, "point {}", p);
        }
    }

    /// Tests that the lower bound is below the peak of several different schedules.
    #[test]
    fn lower_bound_is_below_every_schedule(g in random_dag(), b in random_bindings(), donate in any::<bool>()) {
        let g = donated(g, donate);
        let lb = lower_bound(&g, &b).unwrap();
        let mut schedules = vec![program_order(&g)];
        for st in [Strategy::MemoryGreedy, Strategy::DepthFirst, Strategy::FreeFirst] {
            schedules.push(candidate_schedule(&g, st));
        }
        for s in &schedules {
            prop_assert!(lb <= liveness(&g, s).peak(&b).unwrap().0);
        }
    }
}
