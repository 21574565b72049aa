//! Property tests of op scheduling on random DAGs with symbolic shapes: every schedule is a
//! topological permutation of the ops, and the checked schedule's peak is never above program
//! order's at any binding of the sweep.

use crate::memory_helpers as helpers;

use ebb_passes::memory::{liveness, lower_bound, program_order, validate_schedule};
use ebb_passes::schedule::{schedule, schedule_checked, ScheduleOptions, Strategy};
use helpers::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Tests that every heuristic yields a topological permutation of the non-input ops.
    #[test]
    fn every_strategy_gives_a_topological_permutation(g in random_dag()) {
        for st in [Strategy::FreeFirst, Strategy::MemoryGreedy, Strategy::DepthFirst,
                   Strategy::DepthFirstFreeFirst, Strategy::LocalSearch] {
            let s = ebb_passes::schedule::schedule(&g, &ScheduleOptions { strategies: vec![st], ..Default::default() });
            prop_assert_eq!(validate_schedule(&g, &s), Ok(()));
            let s = ebb_passes::schedule::candidate_schedule(&g, st);
            prop_assert_eq!(validate_schedule(&g, &s), Ok(()), "{}", st);
        }
    }

    /// Tests that the checked schedule is never worse than program order on its sweep, and
    /// that the lower bound is below both.
    #[test]
    fn checked_schedule_is_never_worse_than_program_order(
        g in random_dag(),
        sweep in prop::collection::vec(random_bindings(), 1..5),
    ) {
        let (s, report) = schedule_checked(&g, &ScheduleOptions::default(), &sweep);
        prop_assert_eq!(validate_schedule(&g, &s), Ok(()));
        let live_s = liveness(&g, &s);
        let live_p = liveness(&g, &program_order(&g));
        for (b, point) in sweep.iter().zip(&report.sweep) {
            let (ps, _) = live_s.peak(b).unwrap();
            let (pp, _) = live_p.peak(b).unwrap();
            prop_assert!(ps <= pp, "scheduled {} > program order {} at {:?}", ps, pp, b);
            prop_assert_eq!((point.scheduled, point.program_order), (Some(ps), Some(pp)));
            let lb = lower_bound(&g, b).unwrap();
            prop_assert!(lb <= ps);
        }
    }

    /// Tests that the unchecked schedule is never worse than program order at the sampled
    /// representative bindings.
    #[test]
    fn schedule_is_never_worse_at_the_samples(g in random_dag()) {
        let s = schedule(&g, &ScheduleOptions::default());
        let live_s = liveness(&g, &s);
        let live_p = liveness(&g, &program_order(&g));
        for b in g.scope.representative_bindings(8) {
            prop_assert!(live_s.peak(&b).unwrap().0 <= live_p.peak(&b).unwrap().0);
        }
    }
}
