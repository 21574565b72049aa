//! Tests of a prepared program run again: what its steps keep from the first run (a fusion's
//! launch and kernels, the programs of `reduce`, `scatter` and `sort` bodies) gives, at every
//! later run on other inputs, outputs bit-identical to the reference executor's, and an input
//! fusion whose init value is an operand reads it at every run.

use crate::common;
use common::*;
use ebb_runtime::{program_schedule, Executor, Program, Scalar, Tensor};

/// Two input fusions (init values a graph input and a constant), a loop fusion, a top-level
/// `reduce` with a general body and a `sort` whose regions run as programs.
const REPEAT: &str = r#"graph @t {
  %0 = input {index = 0, name = "x"} : f32[A,B]
  %1 = input {index = 1, name = "init"} : f32[]
  %2 = fusion(%0, %1) {kind = "input"} : f32[A] {
    region @fusion0 {
      %0 = input {index = 0, name = "in0"} : f32[A,B]
      %1 = input {index = 1, name = "in1"} : f32[]
      %2 = exponential(%0) : f32[A,B]
      %3 = reduce(%2, %1) {dimensions = [1]} : f32[A] {
        region @body {
          %0 = input {index = 0, name = ""} : f32[]
          %1 = input {index = 1, name = ""} : f32[]
          %2 = add(%0, %1) : f32[]
          return %2
        }
      }
      return %3
    }
  }
  %7 = constant {value = dense<0xFF800000> : f32} : f32[]
  %3 = fusion(%0, %7) {kind = "input"} : f32[A] {
    region @fusion1 {
      %0 = input {index = 0, name = "in0"} : f32[A,B]
      %1 = input {index = 1, name = "in1"} : f32[]
      %2 = reduce(%0, %1) {dimensions = [1]} : f32[A] {
        region @body {
          %0 = input {index = 0, name = ""} : f32[]
          %1 = input {index = 1, name = ""} : f32[]
          %2 = maximum(%0, %1) : f32[]
          return %2
        }
      }
      return %2
    }
  }
  %4 = fusion(%0, %1) {kind = "loop"} : f32[A,B] {
    region @fusion2 {
      %0 = input {index = 0, name = "in0"} : f32[A,B]
      %1 = input {index = 1, name = "in1"} : f32[]
      %2 = broadcast_in_dim(%1) {broadcast_dimensions = [], shape = dims[A, B]} : f32[A,B]
      %3 = multiply(%0, %2) : f32[A,B]
      %4 = tanh(%3) : f32[A,B]
      return %4
    }
  }
  %5 = reduce(%0, %1) {dimensions = [0]} : f32[B] {
    region @body {
      %0 = input {index = 0, name = ""} : f32[]
      %1 = input {index = 1, name = ""} : f32[]
      %2 = multiply(%0, %1) : f32[]
      %3 = add(%2, %1) : f32[]
      return %3
    }
  }
  %6 = sort(%4) {dimension = 1, is_stable = true} : f32[A,B] {
    region @cmp {
      %0 = input {index = 0, name = ""} : f32[]
      %1 = input {index = 1, name = ""} : f32[]
      %2 = compare(%0, %1) {comparison_direction = "LT"} : i1[]
      return %2
    }
  }
  return %2, %3, %4, %5, %6
}"#;

/// Tests three runs of one prepared program on other inputs (and another init value) against
/// the reference executor, and that the later runs take the fusions' kernels the steps kept.
#[test]
fn a_prepared_program_run_again_matches_the_reference() {
    let g = graph(REPEAT);
    let sched = program_schedule(&g);
    let (a, b) = (5usize, 37usize);
    let binding = bind(&[("A", a as i64), ("B", b as i64)]);
    let jit = Program::new(&g, &sched, &binding).unwrap();
    let reference = Program::new(&g, &sched, &binding)
        .unwrap()
        .with_executor(Executor::Reference);
    let kernels = || {
        let s = ebb_codegen::stats();
        s.kernels_compiled + s.kernels_loaded + s.kernels_reused
    };
    let mut first = 0;
    for (run, init) in [0.5f32, -1.25, 2.0].into_iter().enumerate() {
        let x: Vec<f32> = values(a * b, run as u64 + 7)
            .into_iter()
            .map(|v| v / 8.0)
            .collect();
        let inputs = vec![f32t(&[a, b], &x), Tensor::scalar(Scalar::F32(init))];
        let before = kernels();
        let (got, _) = jit.run(inputs.clone()).unwrap();
        let used = kernels() - before;
        let (want, _) = reference.run(inputs).unwrap();
        assert_bits(&got, &want, &format!("run {run}"));
        // Every kernel of the first run is kept by its step and taken again (counted as
        // reused; other tests running meanwhile only add to the count).
        if run == 0 {
            first = used;
            assert!(first >= 2, "{first} generated kernels ran");
        } else {
            assert!(
                used >= first,
                "run {run}: {used} kernels, {first} at the first run"
            );
        }
    }
}
