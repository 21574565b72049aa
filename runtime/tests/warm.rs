//! The warm workers of `ebb_runtime::warm`: a step's split work gives the same result with the
//! pool's other workers kept awake or not, and the wardens stop when the step unwinds.

use ebb_runtime::warm::with_warm_workers;
use rayon::prelude::*;

#[test]
fn split_work_gives_the_same_result_warm_or_not() {
    let sum = |warm| {
        with_warm_workers(warm, || {
            (0..200_000u64)
                .into_par_iter()
                .map(|i| i * i % 7)
                .sum::<u64>()
        })
    };
    assert_eq!(sum(true), sum(false));
}

#[test]
fn wardens_stop_when_the_step_unwinds() {
    let r = std::panic::catch_unwind(|| with_warm_workers(true, || panic!("step failed")));
    assert!(r.is_err());
    // The pool is usable afterwards: no warden is left running.
    assert_eq!(with_warm_workers(true, || 7), 7);
}
