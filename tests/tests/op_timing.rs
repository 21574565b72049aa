//! A runtime's steps time their ops only when asked (`Runtime::set_op_timing`, off by
//! default: one clock read per op is a few percent of a sub-millisecond step), and timing
//! changes no bit of the outputs.

use ebb_pipeline::CompileOptions;
use ebb_runtime::inputs::random_inputs;
use ebb_runtime::Runtime;
use ebb_testkit::{bind, compile_fixture};

#[test]
fn steps_time_their_ops_only_when_asked() {
    let plan = compile_fixture("mlp_sgd", &CompileOptions::default()).plan;
    let mut rt = Runtime::new(plan, None).unwrap();
    let b = bind(&[("B", 8)]);
    let inputs = random_inputs(rt.graph(), &b, 3).unwrap();
    let untimed = rt.step(&b, inputs.clone()).unwrap();
    assert!(untimed.stats.op_time.is_empty());
    rt.set_op_timing(true);
    let timed = rt.step(&b, inputs.clone()).unwrap();
    // One time per program point, as the resident bytes.
    assert!(!timed.stats.op_time.is_empty());
    assert_eq!(timed.stats.op_time.len(), timed.stats.resident_bytes.len());
    rt.set_op_timing(false);
    let again = rt.step(&b, inputs).unwrap();
    assert!(again.stats.op_time.is_empty());
    for (x, y) in untimed.outputs.iter().zip(&timed.outputs) {
        assert_eq!(x.to_le_bytes(), y.to_le_bytes());
    }
    for (x, y) in untimed.outputs.iter().zip(&again.outputs) {
        assert_eq!(x.to_le_bytes(), y.to_le_bytes());
    }
}
