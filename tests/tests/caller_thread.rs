//! A CPU step none of whose kernels splits its work at its shapes runs on the caller's thread
//! (`StepReport::caller_thread`), without the hand-off to rayon's pool, and gives the bits the
//! same step gives on a thread of the pool; a step with a kernel that splits is handed over.

use ebb_pipeline::CompileOptions;
use ebb_runtime::inputs::random_inputs;
use ebb_runtime::Runtime;
use ebb_testkit::{bind, compile_fixture};
use std::thread::ThreadId;

#[test]
fn small_steps_run_on_the_callers_thread_with_the_pools_bits() {
    let plan = compile_fixture("ckpt_cumsum_key", &CompileOptions::default()).plan;
    let mut rt = Runtime::new(plan, None).unwrap();
    let b = bind(&[("B", 2), ("S", 5)]);
    let inputs = random_inputs(rt.graph(), &b, 7).unwrap();
    let mut seen: Vec<ThreadId> = Vec::new();
    let here = rt
        .step_with_progress(&b, inputs.clone(), &mut |_, _| {
            seen.push(std::thread::current().id())
        })
        .unwrap();
    assert!(here.report.caller_thread);
    let me = std::thread::current().id();
    assert!(!seen.is_empty() && seen.iter().all(|&t| t == me));
    // On a thread of the pool, where every step ran before this path existed.
    let pooled = rayon::scope(|_| rt.step(&b, inputs.clone())).unwrap();
    assert_eq!(pooled.outputs.len(), here.outputs.len());
    for (x, y) in here.outputs.iter().zip(&pooled.outputs) {
        assert_eq!(x.to_le_bytes(), y.to_le_bytes());
    }
    assert_eq!(
        here.report.measured_peak_bytes,
        pooled.report.measured_peak_bytes
    );
}

#[test]
fn steps_with_a_kernel_that_splits_are_handed_to_the_pool() {
    // A 256×256 weight (65 536 elements) is updated by a kernel that splits its work.
    let plan = compile_fixture("mlp_sgd", &CompileOptions::default()).plan;
    let mut rt = Runtime::new(plan, None).unwrap();
    let b = bind(&[("B", 8)]);
    let inputs = random_inputs(rt.graph(), &b, 3).unwrap();
    let mut seen: Vec<ThreadId> = Vec::new();
    let out = rt
        .step_with_progress(&b, inputs, &mut |_, _| {
            seen.push(std::thread::current().id())
        })
        .unwrap();
    assert!(!out.report.caller_thread);
    let me = std::thread::current().id();
    assert!(!seen.is_empty() && seen.iter().all(|&t| t != me));
}
