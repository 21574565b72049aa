//! Tests of borrowed operands: a step reads the values the program goes on holding (graph
//! inputs, loop-carried values passed through, constants, a value read again later) where
//! their slots keep them, instead of a clone of each. A scan body that reads its held values
//! many times per turn — in a loop `fusion` (which may write an operand it owns in place), a
//! `dynamic_slice`, a `dynamic_update_slice`, an elementwise op reading one value twice at its
//! last use — computes the recurrence exactly, leaves the caller's inputs unchanged, and gives
//! bit-identical outputs when run again, by both executors.

use crate::common;
use common::*;
use ebb_runtime::{program_schedule, Executor, Program, Tensor};

/// A scan over `S` turns: `h = max(h * w + xs[i], h + w)`, in a loop `fusion` whose operands
/// are the carried `h` (moved in at its last read: written in place), the passed-through `w`
/// and the row of `xs` (both held); then `g = h + h` (one value read twice at its last use),
/// written into row `i` of a stacked result. `w` and `xs` are passed through unchanged and
/// returned, `w` twice.
const SCAN: &str = r#"graph @t {
  symbols S in [1, inf), B in [1, inf)
  %0 = input {index = 0, name = "xs"} : f32[S,B]
  %1 = input {index = 1, name = "h0"} : f32[B]
  %2 = input {index = 2, name = "w"} : f32[B]
  %3 = constant {value = dense<0> : i32} : i32[]
  %4 = constant {value = dense<0.0> : f32} : f32[S,B]
  %5:5 = while(%3, %0, %1, %2, %4) : i32[], f32[S,B], f32[B], f32[B], f32[S,B] {
    region @cond {
      %0 = input {index = 0, name = ""} : i32[]
      %1 = input {index = 1, name = ""} : f32[S,B]
      %2 = input {index = 2, name = ""} : f32[B]
      %3 = input {index = 3, name = ""} : f32[B]
      %4 = input {index = 4, name = ""} : f32[S,B]
      %5 = dim_constant {values = dims[S]} : i32[]
      %6 = compare(%0, %5) {comparison_direction = "LT"} : i1[]
      return %6
    }
    region @body {
      %0 = input {index = 0, name = ""} : i32[]
      %1 = input {index = 1, name = ""} : f32[S,B]
      %2 = input {index = 2, name = ""} : f32[B]
      %3 = input {index = 3, name = ""} : f32[B]
      %4 = input {index = 4, name = ""} : f32[S,B]
      %5 = constant {value = dense<0> : i32} : i32[]
      %6 = dynamic_slice(%1, %0, %5) {slice_sizes = dims[1, B]} : f32[1,B]
      %7 = reshape(%6) {shape = dims[B]} : f32[B]
      %8 = fusion(%2, %3, %7) {kind = "loop"} : f32[B] {
        region @f0 {
          %0 = input {index = 0, name = "in0"} : f32[B]
          %1 = input {index = 1, name = "in1"} : f32[B]
          %2 = input {index = 2, name = "in2"} : f32[B]
          %3 = multiply(%0, %1) : f32[B]
          %4 = add(%3, %2) : f32[B]
          %5 = add(%0, %1) : f32[B]
          %6 = maximum(%4, %5) : f32[B]
          return %6
        }
      }
      %9 = add(%8, %8) : f32[B]
      %10 = reshape(%9) {shape = dims[1, B]} : f32[1,B]
      %11 = dynamic_update_slice(%4, %10, %0, %5) : f32[S,B]
      %12 = constant {value = dense<1> : i32} : i32[]
      %13 = add(%0, %12) : i32[]
      return %13, %1, %8, %3, %11
    }
  }
  return %5#2, %5#4, %5#3, %5#1, %5#3, %5#0
}"#;

/// `n` values in `[-1, 1]` drawn with `seed` (the scan then stays finite: `|h|` grows by at most
/// one a turn).
fn unit(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = (i as u64 ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            (h % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// The scan computed here: the last `h` and the stack of `g = h + h`.
fn reference(xs: &[f32], h0: &[f32], w: &[f32], s: usize) -> (Vec<f32>, Vec<f32>) {
    let b = h0.len();
    let mut h = h0.to_vec();
    let mut stack = vec![0f32; s * b];
    for i in 0..s {
        for j in 0..b {
            h[j] = (h[j] * w[j] + xs[i * b + j]).max(h[j] + w[j]);
            stack[i * b + j] = h[j] + h[j];
        }
    }
    (h, stack)
}

/// Tests the scan, run twice by one prepared program under each executor (once on inputs it
/// alone holds, once on the caller's clones), against the recurrence computed here, its two
/// runs against each other bit for bit, and the caller's inputs (read borrowed at every turn)
/// against their values before.
#[test]
fn borrowed_operands_across_loop_turns_keep_inputs_and_results_intact() {
    let g = graph(SCAN);
    let sched = program_schedule(&g);
    for (s, b) in [(1usize, 3usize), (9, 5), (33, 300)] {
        let bindings = bind(&[("S", s as i64), ("B", b as i64)]);
        let (xs, h0, w) = (unit(s * b, 7), unit(b, 8), unit(b, 9));
        let (h, stack) = reference(&xs, &h0, &w, s);
        let inputs = vec![f32t(&[s, b], &xs), f32t(&[b], &h0), f32t(&[b], &w)];
        let kept = inputs.clone();
        for executor in [Executor::Jit, Executor::Reference] {
            let p = Program::new(&g, &sched, &bindings)
                .unwrap()
                .with_executor(executor);
            let mut first: Option<Vec<Tensor>> = None;
            for run in 0..2 {
                let what = format!("S={s}, B={b}, {executor:?}, run {run}");
                // Run 0 on inputs the program alone holds (a write into a borrowed one would
                // find its buffer unshared), run 1 on the caller's clones.
                let given = match run {
                    0 => vec![f32t(&[s, b], &xs), f32t(&[b], &h0), f32t(&[b], &w)],
                    _ => inputs.clone(),
                };
                let (out, _) = p.run(given).unwrap();
                // (The generated kernel may contract `h * w + x` into one rounding.)
                let wide = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>();
                assert_close(&out[0], &wide(&h), 1e-5);
                assert_close(&out[1], &wide(&stack), 1e-5);
                assert_eq!(out[2].as_f32().unwrap(), &w[..], "{what}: w");
                assert_eq!(out[3].as_f32().unwrap(), &xs[..], "{what}: xs");
                assert_bits(&out[4..5], &out[2..3], &what);
                assert_eq!(out[5].as_i32(), Some(&[s as i32][..]), "{what}: count");
                if let Some(f) = &first {
                    assert_bits(&out, f, &what);
                }
                first = Some(out);
            }
            assert_bits(&inputs, &kept, "the caller's inputs after the runs");
            assert_eq!(inputs[0].as_f32().unwrap(), &xs[..]);
            assert_eq!(inputs[2].as_f32().unwrap(), &w[..]);
        }
    }
}
