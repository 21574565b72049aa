//! Tests of the chunked interpreter's preparation kept with a step: fusion groups the code
//! generator declines (`i1` reductions, a total-order `compare`) run by the JIT executor at two
//! shapes, each program run twice (the second run takes the kept preparation) and the shapes
//! alternated, give outputs bit-identical to the reference executor's, which prepares at every
//! run. A preparation served at the wrong shape would chunk, broadcast or splat at the other
//! shape's sizes.

use crate::common;
use common::*;
use ebb_runtime::{program_schedule, Executor, Program, Tensor};

const AND: &str = "region @body {
          %0 = input {index = 0, name = \"\"} : i1[]
          %1 = input {index = 1, name = \"\"} : i1[]
          %2 = and(%0, %1) : i1[]
          return %2
        }";

/// An index bounds check (as JAX's gathers make it: an `i1` `reduce_and` over a unit
/// dimension, broadcast scalars), an `i1` `reduce_and` over rows of 3 (an iota and splats,
/// several chunks with a shorter last one at the larger shape) and a loop fusion with a
/// total-order `compare`, an iota and a broadcast row.
fn graph_src() -> String {
    format!(
        r#"graph @t {{
  %0 = input {{index = 0, name = "idx"}} : i32[A,B,1]
  %1 = input {{index = 1, name = "hi"}} : i32[1,1,1]
  %2 = input {{index = 2, name = "w"}} : i32[A,B,3]
  %3 = input {{index = 3, name = "x"}} : f32[A,B]
  %4 = input {{index = 4, name = "v"}} : f32[B]
  %5 = constant {{value = dense<0> : i32}} : i32[]
  %6 = constant {{value = dense<1> : i1}} : i1[]
  %7 = fusion(%5, %0, %1, %6) {{kind = "input"}} : i1[A,B] {{
    region @fusion0 {{
      %0 = input {{index = 0, name = "in0"}} : i32[]
      %1 = broadcast_in_dim(%0) {{broadcast_dimensions = [], shape = dims[A, B, 1]}} : i32[A,B,1]
      %2 = input {{index = 1, name = "in1"}} : i32[A,B,1]
      %3 = compare(%2, %1) {{compare_type = "SIGNED", comparison_direction = "GE"}} : i1[A,B,1]
      %4 = input {{index = 2, name = "in2"}} : i32[1,1,1]
      %5 = broadcast_in_dim(%4) {{broadcast_dimensions = [0, 1, 2], shape = dims[A, B, 1]}} : i32[A,B,1]
      %6 = compare(%2, %5) {{compare_type = "SIGNED", comparison_direction = "LE"}} : i1[A,B,1]
      %7 = and(%3, %6) : i1[A,B,1]
      %8 = input {{index = 3, name = "in3"}} : i1[]
      %9 = reduce(%7, %8) {{dimensions = [2]}} : i1[A,B] {{
        {AND}
      }}
      return %9
    }}
  }}
  %8 = fusion(%2, %6) {{kind = "input"}} : i1[A,B] {{
    region @fusion1 {{
      %0 = input {{index = 0, name = "in0"}} : i32[A,B,3]
      %1 = iota {{dtype = i32, iota_dimension = 2, shape = dims[A, B, 3]}} : i32[A,B,3]
      %2 = constant {{value = dense<2> : i32}} : i32[A,B,3]
      %3 = multiply(%1, %2) : i32[A,B,3]
      %4 = compare(%0, %3) {{compare_type = "SIGNED", comparison_direction = "GE"}} : i1[A,B,3]
      %5 = input {{index = 1, name = "in1"}} : i1[]
      %6 = reduce(%4, %5) {{dimensions = [2]}} : i1[A,B] {{
        {AND}
      }}
      return %6
    }}
  }}
  %9:2 = fusion(%7, %8, %3, %4) {{kind = "loop"}} : f32[A,B], i1[A,B] {{
    region @fusion2 {{
      %0 = input {{index = 0, name = "in0"}} : i1[A,B]
      %1 = input {{index = 1, name = "in1"}} : i1[A,B]
      %2 = input {{index = 2, name = "in2"}} : f32[A,B]
      %3 = input {{index = 3, name = "in3"}} : f32[B]
      %4 = broadcast_in_dim(%3) {{broadcast_dimensions = [1], shape = dims[A, B]}} : f32[A,B]
      %5 = iota {{dtype = i32, iota_dimension = 0, shape = dims[A, B]}} : i32[A,B]
      %6 = convert(%5) {{dtype = f32}} : f32[A,B]
      %7 = add(%2, %6) : f32[A,B]
      %8 = compare(%7, %4) {{compare_type = "TOTALORDER", comparison_direction = "LT"}} : i1[A,B]
      %9 = and(%0, %1) : i1[A,B]
      %10 = or(%9, %8) : i1[A,B]
      %11 = constant {{value = dense<-0.5> : f32}} : f32[A,B]
      %12 = select(%10, %7, %11) : f32[A,B]
      return %12, %10
    }}
  }}
  return %7, %8, %9#0, %9#1
}}"#
    )
}

/// The step's inputs at `A`×`B` (`seed` varies the values).
fn inputs(a: usize, b: usize, seed: u64) -> Vec<Tensor> {
    let n = a * b;
    let int = |k: usize, m: i64| -> Vec<i32> {
        values(k, seed)
            .into_iter()
            .map(|v| ((v * 97.0) as i64).rem_euclid(m) as i32 - 2)
            .collect()
    };
    vec![
        i32t(&[a, b, 1], &int(n, 12)),
        i32t(&[1, 1, 1], &[6 + seed as i32 % 3]),
        i32t(&[a, b, 3], &int(3 * n, 9)),
        f32t(&[a, b], &values(n, seed + 1)),
        f32t(&[b], &values(b, seed + 2)),
    ]
}

/// Tests the declined groups at one chunk (`A = 2`) and at several chunks with a shorter last
/// one (`A = 300`: 1500 rows of 3, 682 per chunk), alternating the shapes and running each
/// program on new inputs, against the reference executor bit for bit.
#[test]
fn kept_interpreter_preparations_match_the_reference_at_two_shapes() {
    let g = graph(&graph_src());
    let sched = program_schedule(&g);
    let b = 5usize;
    let programs: Vec<(usize, Program, Program)> = [2usize, 300]
        .into_iter()
        .map(|a| {
            let binding = bind(&[("A", a as i64), ("B", b as i64)]);
            let jit = Program::new(&g, &sched, &binding).unwrap();
            let reference = Program::new(&g, &sched, &binding)
                .unwrap()
                .with_executor(Executor::Reference);
            (a, jit, reference)
        })
        .collect();
    for run in 0..2u64 {
        for (a, jit, reference) in &programs {
            let x = inputs(*a, b, run * 10 + *a as u64);
            let (got, _) = jit.run(x.clone()).unwrap();
            let (want, _) = reference.run(x).unwrap();
            assert_bits(&got, &want, &format!("A={a} run {run}"));
        }
    }
}
