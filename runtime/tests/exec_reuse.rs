//! Tests of the working vectors a program keeps between runs (its value slots, result and
//! output vectors) and of the statistics a loop reuses for every run of its body: a program
//! run again, at one shape or after another shape's program ran, and a scan loop whose body
//! runs many times, give outputs bit-identical to, and statistics equal to, a program made
//! fresh for each run.

use crate::common;
use common::*;
use ebb_runtime::{program_schedule, ExecStats, Program, Tensor};

/// A scan over `S` steps of a stacked input: each turn reads row `i` (`dynamic_slice`),
/// updates a carried vector (`tanh(h + row)`), writes it into row `i` of a stacked result
/// (`dynamic_update_slice`, in place) and passes the stacked input through. The graph returns
/// the last carried vector twice (an output mentioned again) besides the stack and the count.
const SCAN: &str = r#"graph @t {
  symbols S in [1, inf), B in [1, inf)
  %0 = input {index = 0, name = "xs"} : f32[S,B]
  %1 = input {index = 1, name = "h0"} : f32[B]
  %2 = constant {value = dense<0> : i32} : i32[]
  %3 = constant {value = dense<0.0> : f32} : f32[S,B]
  %4:4 = while(%2, %0, %1, %3) : i32[], f32[S,B], f32[B], f32[S,B] {
    region @cond {
      %0 = input {index = 0, name = ""} : i32[]
      %1 = input {index = 1, name = ""} : f32[S,B]
      %2 = input {index = 2, name = ""} : f32[B]
      %3 = input {index = 3, name = ""} : f32[S,B]
      %4 = dim_constant {values = dims[S]} : i32[]
      %5 = compare(%0, %4) {comparison_direction = "LT"} : i1[]
      return %5
    }
    region @body {
      %0 = input {index = 0, name = ""} : i32[]
      %1 = input {index = 1, name = ""} : f32[S,B]
      %2 = input {index = 2, name = ""} : f32[B]
      %3 = input {index = 3, name = ""} : f32[S,B]
      %4 = constant {value = dense<0> : i32} : i32[]
      %5 = dynamic_slice(%1, %0, %4) {slice_sizes = dims[1, B]} : f32[1,B]
      %6 = reshape(%5) {shape = dims[B]} : f32[B]
      %7 = add(%2, %6) : f32[B]
      %8 = tanh(%7) : f32[B]
      %9 = reshape(%8) {shape = dims[1, B]} : f32[1,B]
      %10 = dynamic_update_slice(%3, %9, %0, %4) : f32[S,B]
      %11 = constant {value = dense<1> : i32} : i32[]
      %12 = add(%0, %11) : i32[]
      return %12, %1, %8, %10
    }
  }
  return %4#2, %4#3, %4#2, %4#0
}"#;

/// The scan's inputs at `S`, `B` (values drawn with `seed`).
fn inputs(s: usize, b: usize, seed: u64) -> Vec<Tensor> {
    vec![
        f32t(&[s, b], &values(s * b, seed)),
        f32t(&[b], &values(b, seed + 1)),
    ]
}

/// The statistics without the op times (wall clock, different at every run).
fn untimed(mut st: ExecStats) -> ExecStats {
    st.op_time.clear();
    st
}

/// Tests one prepared program per shape run again and again, the shapes alternating, each run
/// against a program made fresh for it: the same outputs bit for bit and the same statistics
/// (resident bytes at every point, the loop's charged transient, the peak).
#[test]
fn a_program_run_again_matches_a_fresh_one_at_every_shape() {
    let g = graph(SCAN);
    let sched = program_schedule(&g);
    let shapes = [(3usize, 2usize), (7, 5), (1, 9)];
    let programs: Vec<Program> = shapes
        .iter()
        .map(|&(s, b)| Program::new(&g, &sched, &bind(&[("S", s as i64), ("B", b as i64)])))
        .collect::<Result<_, _>>()
        .unwrap();
    for round in 0..3u64 {
        for (k, (&(s, b), p)) in shapes.iter().zip(&programs).enumerate() {
            let what = format!("round {round}, S={s}, B={b}");
            let x = inputs(s, b, 10 * round + k as u64);
            let (got, got_st) = p.run(x.clone()).unwrap();
            let fresh =
                Program::new(&g, &sched, &bind(&[("S", s as i64), ("B", b as i64)])).unwrap();
            let (want, want_st) = fresh.run(x).unwrap();
            assert_bits(&got, &want, &what);
            assert_eq!(untimed(got_st), untimed(want_st), "{what}");
            // The loop really ran: the count is S and the stack's last row is the output.
            assert_eq!(got[3].as_i32(), Some(&[s as i32][..]), "{what}");
            let stack = got[1].as_f32().unwrap();
            assert_eq!(&stack[(s - 1) * b..], got[0].as_f32().unwrap(), "{what}");
        }
    }
}

/// Tests the scan's results against the recurrence computed here, `h = tanh(h + x[i])`
/// written into row `i`, over many turns of one body program (its vectors and the loop's
/// statistics reused at every turn).
#[test]
fn a_scan_body_run_many_times_computes_the_recurrence() {
    let (s, b) = (40usize, 3usize);
    let x = inputs(s, b, 99);
    let (out, _) = run_with_stats(SCAN, &[("S", s as i64), ("B", b as i64)], x.clone()).unwrap();
    let xs = x[0].as_f32().unwrap();
    let mut h = x[1].as_f32().unwrap().to_vec();
    let mut stack = vec![0f32; s * b];
    for i in 0..s {
        for j in 0..b {
            h[j] = (h[j] + xs[i * b + j]).tanh();
        }
        stack[i * b..(i + 1) * b].copy_from_slice(&h);
    }
    assert_close(
        &out[0],
        &h.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
        1e-6,
    );
    assert_close(
        &out[1],
        &stack.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
        1e-6,
    );
    assert_bits(&out[2..3], &out[0..1], "the output mentioned twice");
}
