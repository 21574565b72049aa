//! Helpers shared by the executor tests: graphs from textual IR, tensors from literals.
#![allow(dead_code)]

use ebb_runtime::{execute, program_schedule, Data, ExecError, ExecStats, Tensor};
pub use ebb_testkit::{bind, graph};

/// Runs `src` in program order.
pub fn run_with_stats(
    src: &str,
    b: &[(&str, i64)],
    inputs: Vec<Tensor>,
) -> Result<(Vec<Tensor>, ExecStats), ExecError> {
    let g = graph(src);
    execute(&g, &program_schedule(&g), &bind(b), inputs)
}

/// Runs `src` in program order and returns its outputs.
pub fn run(src: &str, b: &[(&str, i64)], inputs: Vec<Tensor>) -> Result<Vec<Tensor>, ExecError> {
    run_with_stats(src, b, inputs).map(|r| r.0)
}

/// Runs `src` and returns its single output (panics on errors).
pub fn run1(src: &str, b: &[(&str, i64)], inputs: Vec<Tensor>) -> Tensor {
    let mut o = run(src, b, inputs).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(o.len(), 1);
    o.remove(0)
}

pub fn f32t(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::new(shape.to_vec(), Data::F32(v.to_vec().into())).unwrap()
}

pub fn i32t(shape: &[usize], v: &[i32]) -> Tensor {
    Tensor::new(shape.to_vec(), Data::I32(v.to_vec().into())).unwrap()
}

pub fn i64t(shape: &[usize], v: &[i64]) -> Tensor {
    Tensor::new(shape.to_vec(), Data::I64(v.to_vec().into())).unwrap()
}

/// `0, 1, 2, ...` as f32 of `shape`.
pub fn arange(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    f32t(shape, &(0..n).map(|i| i as f32).collect::<Vec<_>>())
}

/// Row-major strides.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// All multi-indices of `shape` in row-major order.
pub fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|mut i| {
            let mut idx = vec![0; shape.len()];
            for k in (0..shape.len()).rev() {
                idx[k] = i % shape[k];
                i /= shape[k];
            }
            idx
        })
        .collect()
}

/// Formats integers as an IR list (`[0, 2]`).
pub fn list(v: &[usize]) -> String {
    format!(
        "[{}]",
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Formats a shape as IR dims (`2, 3`).
pub fn dims(shape: &[usize]) -> String {
    shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

pub fn assert_close(got: &Tensor, want: &[f64], tol: f64) {
    assert_close_by(got, want, |_, b| tol * (1.0 + b.abs()));
}

/// Asserts `|got[i] - want[i]| <= bound(i, want[i])` for every element.
pub fn assert_close_by(got: &Tensor, want: &[f64], bound: impl Fn(usize, f64) -> f64) {
    let g = got.to_f64_vec();
    assert_eq!(g.len(), want.len(), "length");
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        let e = bound(i, *b);
        assert!(
            (a - b).abs() <= e,
            "element {i}: got {a}, want {b} (allowed {e})"
        );
    }
}

/// Runs `src` with the JIT and the reference executor; returns (JIT outputs, reference
/// outputs), and checks that a generated kernel ran.
pub fn both(src: &str, b: &[(&str, i64)], inputs: Vec<Tensor>) -> (Vec<Tensor>, Vec<Tensor>) {
    let g = graph(src);
    let sched = program_schedule(&g);
    let run = |e: ebb_runtime::Executor| {
        ebb_runtime::Program::new(&g, &sched, &bind(b))
            .and_then(|p| p.with_executor(e).run(inputs.clone()))
            .unwrap_or_else(|err| panic!("{e:?}: {err}"))
            .0
    };
    let before = ebb_codegen::stats();
    let jit = run(ebb_runtime::Executor::Jit);
    let after = ebb_codegen::stats();
    assert!(
        after.kernels_compiled + after.kernels_loaded + after.kernels_reused
            > before.kernels_compiled + before.kernels_loaded + before.kernels_reused,
        "no fusion ran through a generated kernel"
    );
    (jit, run(ebb_runtime::Executor::Reference))
}

/// Asserts that `got` and `want` are equal bit for bit.
pub fn assert_bits(got: &[Tensor], want: &[Tensor], what: &str) {
    assert_eq!(got.len(), want.len());
    for (k, (x, y)) in got.iter().zip(want).enumerate() {
        if !x.bits_eq(y) {
            let (a, b) = (x.to_f64_vec(), y.to_f64_vec());
            let bad: Vec<(usize, f64, f64)> = a
                .iter()
                .zip(&b)
                .enumerate()
                .filter(|(_, (p, q))| p.to_bits() != q.to_bits())
                .take(5)
                .map(|(i, (p, q))| (i, *p, *q))
                .collect();
            panic!("{what}: output {k} differs at (index, got, want) {bad:?}\n{x:?}\nvs\n{y:?}");
        }
    }
}

/// Values with negatives, zeros, large magnitudes (exp overflow/underflow, subnormal
/// results) and a NaN-free spread.
pub fn values(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = (i as u64 ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            let u = (h % 20001) as f32 / 10000.0 - 1.0;
            match h % 17 {
                0 => u * 120.0,
                1 => 0.0,
                _ => u * 6.0,
            }
        })
        .collect()
}
