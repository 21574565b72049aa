//! Unfused elementwise float arithmetic in an arena-backed step writes its result straight
//! into the result's planned range (`runtime/src/exec/claimed.rs`): no result of such a step
//! is copied into the arena after its kernel, the bits are those of the same program on heap
//! buffers (where the kernels allocate their results or write into a dying operand), and the
//! measured peak is the planned one. The ops cover the `f32` vector kernels (`exponential`,
//! `tanh`, `log_plus_one`), the scalar `f32` and `f64` unary and binary arithmetic, operands
//! held by the program (graph inputs, a value read again later) and operands at their last use.

use ebb_runtime::buffer::Buf;
use ebb_runtime::{execute, program_schedule, Data, Runtime, Tensor};
use ebb_testkit::{bind, graph, unfused_options};

const STEP: &str = r#"graph @claimed {
  symbols N in [1, inf)
  %x = input {index = 0, name = "x"} : f32[N]
  %y = input {index = 1, name = "y"} : f32[N]
  %p = input {index = 2, name = "p"} : f64[N]
  %q = input {index = 3, name = "q"} : f64[N]
  %0 = multiply(%x, %y) : f32[N]
  %1 = exponential(%0) : f32[N]
  %2 = add(%1, %x) : f32[N]
  %3 = divide(%2, %y) : f32[N]
  %4 = tanh(%3) : f32[N]
  %5 = abs(%4) : f32[N]
  %6 = log_plus_one(%5) : f32[N]
  %7 = sqrt(%6) : f32[N]
  %8 = maximum(%7, %0) : f32[N]
  %9 = power(%8, %y) : f32[N]
  %10 = subtract(%p, %q) : f64[N]
  %11 = multiply(%10, %p) : f64[N]
  %12 = exponential(%11) : f64[N]
  %13 = minimum(%12, %q) : f64[N]
  %14 = negate(%13) : f64[N]
  %15 = add(%14, %10) : f64[N]
  return %9, %3, %15, %12
}"#;

/// `n` values in `[lo, lo + 2]`, drawn with `seed`.
fn values(n: usize, seed: u64, lo: f64) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let h = (i as u64 ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            lo + (h % 2001) as f64 / 1000.0
        })
        .collect()
}

fn inputs(n: usize) -> Vec<Tensor> {
    let f32s = |seed, lo| {
        let v: Vec<f32> = values(n, seed, lo).into_iter().map(|x| x as f32).collect();
        Tensor::from_f32(vec![n], v).unwrap()
    };
    let f64s = |seed| Tensor::new(vec![n], Data::F64(Buf::from(values(n, seed, -1.0)))).unwrap();
    vec![f32s(1, -1.0), f32s(2, 0.5), f64s(3), f64s(4)]
}

#[test]
fn elementwise_results_are_written_into_their_ranges_with_the_heap_runs_bits() {
    let g = graph(STEP);
    let plan = ebb_pipeline::compile(g.clone(), &unfused_options())
        .unwrap()
        .plan;
    let mut rt = Runtime::new(plan, None).unwrap();
    // Below and above the split threshold of the elementwise kernels (2^15 elements).
    for n in [1000usize, 40_000] {
        let b = bind(&[("N", n as i64)]);
        let heap = execute(&g, &program_schedule(&g), &b, inputs(n)).unwrap().0;
        let step = rt.step(&b, inputs(n)).unwrap();
        let r = &step.report;
        assert!(r.arena_backed);
        assert_eq!(r.arena_copied_bytes, 0, "N={n}: a result was copied in");
        assert_eq!(r.arena_unplaced_bytes, 0);
        assert!(r.arena_direct_bytes > 0);
        assert_eq!(r.measured_peak_bytes as i64, r.peak_bytes_planned, "N={n}");
        assert_eq!(step.outputs.len(), heap.len());
        for (i, (x, y)) in step.outputs.iter().zip(&heap).enumerate() {
            assert!(
                x.bits_eq(y),
                "N={n}: output {i} differs from the heap run's"
            );
        }
    }
}
