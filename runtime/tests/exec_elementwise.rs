//! Tests of the elementwise kernels: float math against `f64` references, integer and boolean
//! semantics, `compare`/`select`/`clamp`/`convert`, `bf16` rounding, and in-place reuse of a
//! dead operand's buffer not changing results.

use crate::common;
use common::*;
use ebb_runtime::{Data, Tensor};
use proptest::prelude::*;

fn unary(op: &str, dtype: &str, shape: &[usize]) -> String {
    format!(
        "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : {dtype}[{d}]\n  %1 = {op}(%0) : {dtype}[{d}]\n  return %1\n}}",
        d = dims(shape)
    )
}

fn binary(op: &str, dtype: &str, out: &str, shape: &[usize], attrs: &str) -> String {
    format!(
        "graph @t {{\n  %0 = input {{index = 0, name = \"a\"}} : {dtype}[{d}]\n  %1 = input {{index = 1, name = \"b\"}} : {dtype}[{d}]\n  %2 = {op}(%0, %1) {attrs} : {out}[{d}]\n  return %2\n}}",
        d = dims(shape)
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Tests the unary float ops against their f64 definitions (1e-6 relative).
    #[test]
    fn unary_float_ops(v in prop::collection::vec(0.01f32..4.0, 1..40)) {
        let n = v.len();
        type Case = (&'static str, fn(f64) -> f64);
        let cases: [Case; 12] = [
            ("exponential", f64::exp), ("log", f64::ln), ("sqrt", f64::sqrt), ("rsqrt", |x| 1.0 / x.sqrt()),
            ("tanh", f64::tanh), ("negate", |x| -x), ("logistic", |x| 1.0 / (1.0 + (-x).exp())),
            ("log_plus_one", f64::ln_1p), ("exponential_minus_one", f64::exp_m1), ("sine", f64::sin),
            ("cosine", f64::cos), ("cbrt", f64::cbrt),
        ];
        for (op, f) in cases {
            let got = run1(&unary(op, "f32", &[n]), &[], vec![f32t(&[n], &v)]);
            let want: Vec<f64> = v.iter().map(|&x| f(x as f64)).collect();
            assert_close(&got, &want, 1e-6);
        }
    }

    /// Tests that the in-place path (the operand dies at this op) and the allocating path
    /// (the operand is also a graph output) give bit-identical results, for large tensors
    /// split over threads too, and agree with a scalar computation.
    #[test]
    fn in_place_and_fresh_results_agree(len in prop::sample::select(vec![7usize, 40_000])) {
        let graph = |ret: &str| format!(
            "graph @t {{\n  %0 = input {{index = 0, name = \"a\"}} : f32[{len}]\n  %1 = input {{index = 1, name = \"b\"}} : f32[{len}]\n  %2 = multiply(%0, %1) : f32[{len}]\n  %3 = subtract(%1, %2) : f32[{len}]\n  %4 = exponential(%3) : f32[{len}]\n  %5 = subtract(%2, %4) : f32[{len}]\n  %6 = divide(%5, %2) : f32[{len}]\n  %7 = tanh(%6) : f32[{len}]\n  return {ret}\n}}"
        );
        let a: Vec<f32> = (0..len).map(|i| (i % 17) as f32 * 0.1 - 0.7).collect();
        let b: Vec<f32> = (0..len).map(|i| (i % 5) as f32 * 0.3 + 0.2).collect();
        let inputs = || vec![f32t(&[len], &a), f32t(&[len], &b)];
        let in_place = run(&graph("%7, %2"), &[], inputs()).unwrap();
        let fresh = run(&graph("%7, %2, %3, %4, %5, %6"), &[], inputs()).unwrap();
        prop_assert!(in_place[0].bits_eq(&fresh[0]));
        let want: Vec<f64> = a.iter().zip(&b).map(|(&x, &y)| {
            let m = x * y;
            (((m - (y - m).exp()) / m) as f64).tanh()
        }).collect();
        assert_close(&in_place[0], &want, 1e-6);
    }
}

/// Tests integer arithmetic semantics (wrapping, division by zero, shifts) on i32.
#[test]
fn integer_semantics() {
    let a = i32t(&[4], &[i32::MAX, 7, -7, i32::MIN]);
    let b = i32t(&[4], &[1, 0, 2, -1]);
    let go = |op: &str| {
        run1(
            &binary(op, "i32", "i32", &[4], ""),
            &[],
            vec![a.clone(), b.clone()],
        )
        .as_i32()
        .unwrap()
        .to_vec()
    };
    assert_eq!(go("add"), vec![i32::MIN, 7, -5, i32::MAX]);
    assert_eq!(go("divide"), vec![i32::MAX, -1, -3, i32::MIN]);
    assert_eq!(go("remainder"), vec![0, 7, -1, 0]);
    assert_eq!(go("shift_left"), vec![-2, 7, -28, 0]);
    assert_eq!(go("shift_right_arithmetic"), vec![i32::MAX >> 1, 7, -2, -1]);
    assert_eq!(go("power"), vec![i32::MAX, 1, 49, 0]);
}

/// Tests compare directions (with NaN unordered), select with a scalar and a full predicate,
/// and clamp with scalar bounds.
#[test]
fn compare_select_clamp() {
    let a = f32t(&[3], &[1.0, f32::NAN, 3.0]);
    let b = f32t(&[3], &[2.0, 2.0, 3.0]);
    let lt = run1(
        &binary(
            "compare",
            "f32",
            "i1",
            &[3],
            "{comparison_direction = \"LT\"}",
        ),
        &[],
        vec![a.clone(), b.clone()],
    );
    assert_eq!(lt.to_f64_vec(), vec![1., 0., 0.]);
    let ne = run1(
        &binary(
            "compare",
            "f32",
            "i1",
            &[3],
            "{comparison_direction = \"NE\"}",
        ),
        &[],
        vec![a, b],
    );
    assert_eq!(ne.to_f64_vec(), vec![1., 1., 0.]);
    let src = "graph @t {
  %0 = input {index = 0, name = \"p\"} : i1[]
  %1 = input {index = 1, name = \"q\"} : i1[3]
  %2 = input {index = 2, name = \"x\"} : f32[3]
  %3 = input {index = 3, name = \"y\"} : f32[3]
  %4 = select(%0, %2, %3) : f32[3]
  %5 = select(%1, %2, %3) : f32[3]
  %6 = constant {value = dense<0.5> : f32} : f32[]
  %7 = constant {value = dense<2.5> : f32} : f32[]
  %8 = clamp(%6, %2, %7) : f32[3]
  return %4, %5, %8
}";
    let p = Tensor::new(vec![], Data::I1(vec![false].into())).unwrap();
    let q = Tensor::new(vec![3], Data::I1(vec![true, false, true].into())).unwrap();
    let out = run(
        src,
        &[],
        vec![
            p,
            q,
            f32t(&[3], &[0., 1., 3.]),
            f32t(&[3], &[10., 11., 12.]),
        ],
    )
    .unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![10., 11., 12.]);
    assert_eq!(out[1].to_f64_vec(), vec![0., 11., 3.]);
    assert_eq!(out[2].to_f64_vec(), vec![0.5, 1., 2.5]);
}

/// Tests convert between float, integer, boolean and bf16 types.
#[test]
fn convert_between_types() {
    let src = "graph @t {
  %0 = input {index = 0, name = \"x\"} : f32[4]
  %1 = convert(%0) {dtype = i32} : i32[4]
  %2 = convert(%0) {dtype = i1} : i1[4]
  %3 = convert(%0) {dtype = bf16} : bf16[4]
  %4 = convert(%1) {dtype = f64} : f64[4]
  return %1, %2, %3, %4
}";
    let out = run(
        src,
        &[],
        vec![f32t(&[4], &[-1.5, 0.0, 2.7, 1.0 + 1.0 / 1024.0])],
    )
    .unwrap();
    assert_eq!(out[0].as_i32(), Some(&[-1, 0, 2, 1][..]));
    assert_eq!(out[1].to_f64_vec(), vec![1., 0., 1., 1.]);
    assert_eq!(out[2].to_f64_vec(), vec![-1.5, 0.0, 2.703125, 1.0]);
    assert_eq!(out[3].to_f64_vec(), vec![-1., 0., 2., 1.]);
}

/// Tests that bf16 arithmetic rounds to bf16 after the op (1 + 2^-9 is 1 in bf16).
#[test]
fn bf16_add_rounds_to_bf16() {
    let v =
        |x: f32| Tensor::new(vec![1], Data::BF16(vec![half::bf16::from_f32(x)].into())).unwrap();
    let got = run1(
        &binary("add", "bf16", "bf16", &[1], ""),
        &[],
        vec![v(1.0), v(1.0 / 512.0)],
    );
    assert_eq!(got.to_f64_vec(), vec![1.0]);
    let got = run1(
        &binary("add", "bf16", "bf16", &[1], ""),
        &[],
        vec![v(1.0), v(1.0 / 64.0)],
    );
    assert_eq!(got.to_f64_vec(), vec![1.015625]);
}

/// Tests that maximum propagates NaN and that is_finite and not work.
#[test]
fn maximum_nan_is_finite_not() {
    let got = run1(
        &binary("maximum", "f32", "f32", &[2], ""),
        &[],
        vec![f32t(&[2], &[f32::NAN, 1.0]), f32t(&[2], &[0.0, 2.0])],
    );
    let v = got.to_f64_vec();
    assert!(v[0].is_nan() && v[1] == 2.0);
    let src = "graph @t {
  %0 = input {index = 0, name = \"x\"} : f32[3]
  %1 = is_finite(%0) : i1[3]
  %2 = not(%1) : i1[3]
  return %2
}";
    let got = run1(src, &[], vec![f32t(&[3], &[1.0, f32::INFINITY, f32::NAN])]);
    assert_eq!(got.to_f64_vec(), vec![0., 1., 1.]);
}

/// Tests that select gives the same result whether it writes into a dead `on_true`, a dead
/// `on_false`, or a fresh buffer.
#[test]
fn select_in_place_matches_fresh() {
    let graph = |ret: &str| {
        format!(
            "graph @t {{
  %0 = input {{index = 0, name = \"p\"}} : i1[4]
  %1 = input {{index = 1, name = \"x\"}} : f32[4]
  %2 = negate(%1) : f32[4]
  %3 = exponential(%1) : f32[4]
  %4 = select(%0, %2, %3) : f32[4]
  return {ret}
}}"
        )
    };
    let p = || Tensor::new(vec![4], Data::I1(vec![true, false, false, true].into())).unwrap();
    let x = || f32t(&[4], &[0., 1., 2., 3.]);
    let want = [0.0, 1f64.exp(), 2f64.exp(), -3.0];
    for ret in ["%4", "%4, %2", "%4, %3", "%4, %2, %3"] {
        let got = run(&graph(ret), &[], vec![p(), x()]).unwrap();
        assert_close(&got[0], &want, 1e-6);
    }
}
