//! The JIT executor's `bf16` fusion kernels against the reference executor, bit for bit: the
//! kernel holds `bf16` values in `f32` registers and rounds after every op as the reference
//! does (`half::bf16::from_f32`; `from_f64` for `convert`), computes `exp` and `tanh` with
//! `fastmath.rs`'s operations as the reference does (the C library's functions for the other
//! transcendental ops), and quiets NaNs on load as `bf16::to_f32`:
//! - every one of the 65536 `bf16` bit patterns through each supported unary op, `add` and
//!   `multiply` against a second pattern, and `convert` to `f32` and `i32`;
//! - `f32` and `i32` values (ties, subnormals, infinities, NaN payloads, large integers)
//!   converted to `bf16`;
//! - a loop fusion shaped like the bf16 GPT's (bias and scalar broadcasts, softmax's `exp`,
//!   GELU's `tanh`, layer norm's `rsqrt`, `compare`/`select`, mixed `f32`/`bf16` results) and
//!   an input fusion reducing a `bf16` chain in `f32`, at random shapes;
//! - row reductions in `bf16` (a softmax's maximum and sum: the kernel writes the row as
//!   `f32`, folded and rounded as the reference folds a `bf16` row).

use crate::common;
use common::*;
use ebb_runtime::{Data, Tensor};
use half::bf16;
use proptest::prelude::*;

fn bf16t(shape: &[usize], v: &[bf16]) -> Tensor {
    Tensor::new(shape.to_vec(), Data::BF16(v.to_vec().into())).unwrap()
}

/// The unary ops of [`every_op_fusion`], in output order.
const UNARY: [&str; 18] = [
    "exponential",
    "exponential_minus_one",
    "log",
    "log_plus_one",
    "logistic",
    "tanh",
    "cbrt",
    "sine",
    "cosine",
    "sqrt",
    "rsqrt",
    "negate",
    "abs",
    "floor",
    "ceil",
    "sign",
    "round_nearest_even",
    "round_nearest_afz",
];

/// The binary ops of [`every_op_fusion`], in output order after [`UNARY`].
const BINARY: [&str; 7] = [
    "add",
    "subtract",
    "multiply",
    "divide",
    "remainder",
    "maximum",
    "minimum",
];

/// A loop fusion applying each unary op the host kernels implement for `dt` (`bf16` or
/// `f16`) to input 0, each binary one to inputs 0 and 1, and `convert`, `is_finite` and
/// `compare` (`N` elements).
pub(crate) fn every_op_fusion(dt: &str) -> String {
    let mut lines: Vec<(String, String)> = Vec::new();
    for op in UNARY {
        lines.push((format!("{op}(%0) : {dt}[N]"), format!("{dt}[N]")));
    }
    for op in BINARY {
        lines.push((format!("{op}(%0, %1) : {dt}[N]"), format!("{dt}[N]")));
    }
    for (line, ty) in [
        ("convert(%0) {dtype = f32} : f32[N]", "f32[N]"),
        ("convert(%0) {dtype = i32} : i32[N]", "i32[N]"),
        ("is_finite(%0) : i1[N]", "i1[N]"),
        (
            "compare(%0, %1) {compare_type = \"FLOAT\", comparison_direction = \"LT\"} : i1[N]",
            "i1[N]",
        ),
    ] {
        lines.push((line.to_string(), ty.to_string()));
    }
    let body: String = lines
        .iter()
        .enumerate()
        .map(|(i, (line, _))| format!("      %{} = {line}\n", i + 2))
        .collect();
    let rets: Vec<String> = (0..lines.len()).map(|i| format!("%{}", i + 2)).collect();
    let types: Vec<&str> = lines.iter().map(|(_, ty)| ty.as_str()).collect();
    let outs: Vec<String> = (0..rets.len()).map(|i| format!("%2#{i}")).collect();
    format!(
        r#"graph @t {{
  %0 = input {{index = 0, name = "x"}} : {dt}[N]
  %1 = input {{index = 1, name = "y"}} : {dt}[N]
  %2:{m} = fusion(%0, %1) {{kind = "loop"}} : {types} {{
    region @fusion0 {{
      %0 = input {{index = 0, name = "in0"}} : {dt}[N]
      %1 = input {{index = 1, name = "in1"}} : {dt}[N]
{body}      return {rets}
    }}
  }}
  return {outs}
}}"#,
        m = rets.len(),
        types = types.join(", "),
        rets = rets.join(", "),
        outs = outs.join(", "),
    )
}

/// Every 16-bit pattern, and a second operand: the patterns in another order.
pub(crate) fn all_bit_patterns() -> (Vec<u16>, Vec<u16>) {
    let x: Vec<u16> = (0..=u16::MAX).collect();
    let y = (0..=u16::MAX as u32)
        .map(|i| (i.wrapping_mul(40503) ^ 0x3f80) as u16)
        .collect();
    (x, y)
}

/// Each unary op the host kernels implement for `bf16`, and the binary ones, on every bit
/// pattern (NaN payloads, signaling NaNs, subnormals, infinities, both zeros).
#[test]
fn every_bf16_pattern_matches_the_reference() {
    every_pattern_matches("bf16", |bits| {
        let v: Vec<bf16> = bits.iter().map(|&b| bf16::from_bits(b)).collect();
        bf16t(&[v.len()], &v)
    });
}

/// [`every_op_fusion`] of `dt` on every 16-bit pattern (`tensor` makes a tensor of `dt` from
/// the bits), JIT against reference, bit for bit.
pub(crate) fn every_pattern_matches(dt: &str, tensor: impl Fn(&[u16]) -> Tensor) {
    let (x, y) = all_bit_patterns();
    let n = x.len();
    let (got, want) = both(
        &every_op_fusion(dt),
        &[("N", n as i64)],
        vec![tensor(&x), tensor(&y)],
    );
    // A binary op of two NaNs may give either operand's payload (IEEE 754 §6.2.3), and LLVM
    // commutes `fadd`/`fmul` operands as it likes (an optimized build of the reference does
    // too): there both results must be NaN; every other element, bit for bit.
    let nan = |bits: &[u16]| tensor(bits).to_f64_vec();
    let (xn, yn) = (nan(&x), nan(&y));
    let binary = UNARY.len()..UNARY.len() + BINARY.len();
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        if !binary.contains(&k) {
            assert_bits(
                std::slice::from_ref(g),
                std::slice::from_ref(w),
                &format!("{dt} patterns, output {k}"),
            );
            continue;
        }
        let (gv, wv) = (g.to_f64_vec(), w.to_f64_vec());
        for i in 0..n {
            if xn[i].is_nan() && yn[i].is_nan() {
                assert!(
                    gv[i].is_nan() && wv[i].is_nan(),
                    "{dt} {}: {i}",
                    BINARY[k - binary.start]
                );
            }
        }
        let masked = |t: &Tensor| -> Tensor {
            let keep: Vec<u16> = bits16(t)
                .iter()
                .enumerate()
                .map(|(i, &b)| {
                    if xn[i].is_nan() && yn[i].is_nan() {
                        0
                    } else {
                        b
                    }
                })
                .collect();
            tensor(&keep)
        };
        assert_bits(
            &[masked(g)],
            &[masked(w)],
            &format!("{dt} {}", BINARY[k - binary.start]),
        );
    }
}

/// The bit patterns of a `bf16` or `f16` tensor.
fn bits16(t: &Tensor) -> Vec<u16> {
    match t.data() {
        Data::BF16(v) => v.iter().map(|x| x.to_bits()).collect(),
        Data::F16(v) => v.iter().map(|x| x.to_bits()).collect(),
        _ => panic!("not a 16-bit float tensor"),
    }
}

/// 8192 scattered `f32` bit patterns, then `±(e | m)` for each exponent field `e` and low
/// mantissa `m` (ties of a narrower type's rounding, just above and below them).
pub(crate) fn f32_probes(exponents: &[u32], mantissas: &[u32]) -> Vec<f32> {
    let mut xs: Vec<f32> = (0u32..8192)
        .map(|i| f32::from_bits(i.wrapping_mul(0x9E37_79B9) ^ (i << 19)))
        .collect();
    for e in exponents {
        for m in mantissas {
            xs.push(f32::from_bits(e | m));
            xs.push(-f32::from_bits(e | m));
        }
    }
    xs
}

/// `convert` to `bf16` from `f32` (through `bf16::from_f64`, which rounds on the top bits of
/// the `f64`) and from integers (exact `f64`, one rounding; beyond 2^24 `f32` would round
/// twice).
#[test]
fn conversions_to_bf16_match_the_reference() {
    // ties, just above and below them, at several exponents and in the subnormals; ties
    // broken only by the lowest 3 bits (which `from_f64` does not see in a normal number,
    // nor the lowest 1 or 2 in a subnormal whose leading one is bit 21 or 22)
    let mut xs = f32_probes(
        &[0x3f80_0000, 0x0000_0000, 0x0080_0000, 0x7f00_0000],
        &[
            0x8000, 0x7fff, 0x8001, 0x1_8000, 0x1_7fff, 0xffff, 0x7f_ffff, 0x8004, 0x8007,
            0x40_8001, 0x40_8002, 0x40_8004, 0x20_8001, 0x20_8002, 0x60_8003,
        ],
    );
    xs.extend([
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xffc1_2345),
    ]);
    let ints: Vec<i32> = (0..xs.len() as i32)
        .map(|i| {
            let h = i.wrapping_mul(0x2545_F491);
            match i % 3 {
                0 => h,
                1 => h >> 8,
                // above 2^24, where `f32` would round first
                _ => (1 << 24) + (1 << 16) + (i % 7) - 3,
            }
        })
        .collect();
    let n = xs.len();
    let ins = vec![
        Tensor::new(vec![n], Data::F32(xs.into())).unwrap(),
        i32t(&[n], &ints),
    ];
    let (got, want) = both(CONVERT, &[("N", n as i64)], ins);
    assert_bits(&got, &want, "convert to bf16");
}

/// `convert` to `bf16` from `f32` input 0, `i32` input 1, and `iota` times input 1.
pub(crate) const CONVERT: &str = r#"graph @t {
  %0 = input {index = 0, name = "x"} : f32[N]
  %1 = input {index = 1, name = "k"} : i32[N]
  %2:3 = fusion(%0, %1) {kind = "loop"} : bf16[N], bf16[N], bf16[N] {
    region @fusion0 {
      %0 = input {index = 0, name = "in0"} : f32[N]
      %1 = input {index = 1, name = "in1"} : i32[N]
      %2 = convert(%0) {dtype = bf16} : bf16[N]
      %3 = convert(%1) {dtype = bf16} : bf16[N]
      %4 = iota {dtype = i32, iota_dimension = 0, shape = dims[N]} : i32[N]
      %5 = multiply(%4, %1) : i32[N]
      %6 = convert(%5) {dtype = bf16} : bf16[N]
      return %2, %3, %6
    }
  }
  return %2#0, %2#1, %2#2
}"#;

/// A loop fusion shaped like the bf16 GPT's groups, on `bf16[A,B]` with `f32` master values.
pub(crate) const LOOP: &str = r#"graph @t {
  %0 = input {index = 0, name = "x"} : bf16[A,B]
  %1 = input {index = 1, name = "bias"} : bf16[B]
  %2 = input {index = 2, name = "w"} : f32[A,B]
  %3 = input {index = 3, name = "s"} : bf16[]
  %4 = input {index = 4, name = "row"} : f32[A]
  %5:3 = fusion(%0, %1, %2, %3, %4) {kind = "loop"} : bf16[A,B], f32[A,B], i1[A,B] {
    region @fusion0 {
      %0 = input {index = 0, name = "in0"} : bf16[A,B]
      %1 = input {index = 1, name = "in1"} : bf16[B]
      %2 = input {index = 2, name = "in2"} : f32[A,B]
      %3 = input {index = 3, name = "in3"} : bf16[]
      %4 = input {index = 4, name = "in4"} : f32[A]
      %5 = broadcast_in_dim(%1) {broadcast_dimensions = [1], shape = dims[A, B]} : bf16[A,B]
      %6 = broadcast_in_dim(%3) {broadcast_dimensions = [], shape = dims[A, B]} : bf16[A,B]
      %7 = broadcast_in_dim(%4) {broadcast_dimensions = [0], shape = dims[A, B]} : f32[A,B]
      %8 = convert(%2) {dtype = bf16} : bf16[A,B]
      %9 = multiply(%0, %6) : bf16[A,B]
      %10 = add(%9, %5) : bf16[A,B]
      %11 = subtract(%10, %8) : bf16[A,B]
      %12 = exponential(%11) : bf16[A,B]
      %13 = tanh(%10) : bf16[A,B]
      %14 = abs(%11) : bf16[A,B]
      %15 = constant {value = dense<0.5> : f32} : f32[]
      %16 = broadcast_in_dim(%15) {broadcast_dimensions = [], shape = dims[A, B]} : f32[A,B]
      %17 = convert(%16) {dtype = bf16} : bf16[A,B]
      %18 = add(%14, %17) : bf16[A,B]
      %19 = rsqrt(%18) : bf16[A,B]
      %20 = log(%18) : bf16[A,B]
      %21 = maximum(%19, %20) : bf16[A,B]
      %22 = divide(%12, %18) : bf16[A,B]
      %23 = compare(%10, %8) {compare_type = "FLOAT", comparison_direction = "LT"} : i1[A,B]
      %24 = select(%23, %13, %22) : bf16[A,B]
      %25 = negate(%24) : bf16[A,B]
      %26 = minimum(%25, %21) : bf16[A,B]
      %27 = convert(%26) {dtype = f32} : f32[A,B]
      %28 = multiply(%27, %7) : f32[A,B]
      %29 = is_finite(%12) : i1[A,B]
      return %26, %28, %29
    }
  }
  return %5#0, %5#1, %5#2
}"#;

/// A softmax's sum over `bf16` exponentials, accumulated in `f32` (input fusion).
pub(crate) const ROWS: &str = r#"graph @t {
  %0 = input {index = 0, name = "x"} : bf16[A,B]
  %1 = input {index = 1, name = "m"} : bf16[A]
  %3 = constant {value = dense<0.0> : f32} : f32[]
  %2 = fusion(%0, %1, %3) {kind = "input"} : f32[A] {
    region @fusion0 {
      %0 = input {index = 0, name = "in0"} : bf16[A,B]
      %1 = input {index = 1, name = "in1"} : bf16[A]
      %6 = input {index = 2, name = "in2"} : f32[]
      %2 = broadcast_in_dim(%1) {broadcast_dimensions = [0], shape = dims[A, B]} : bf16[A,B]
      %3 = subtract(%0, %2) : bf16[A,B]
      %4 = exponential(%3) : bf16[A,B]
      %5 = convert(%4) {dtype = f32} : f32[A,B]
      %7 = reduce(%5, %6) {dimensions = [1]} : f32[A] {
        region @sum {
          %0 = input {index = 0, name = "a"} : f32[]
          %1 = input {index = 1, name = "b"} : f32[]
          %2 = add(%0, %1) : f32[]
          return %2
        }
      }
      return %7
    }
  }
  return %2
}"#;

/// A `bf16` softmax's reductions as the GPT's attention has them: the scaled row maximum
/// (init `-inf`) and the sum of the exponentials (init an input), both in
/// `bf16` (sums through `f64`, rounded once to `bf16`).
pub(crate) const BF16_ROWS: &str = r#"graph @t {
  %0 = input {index = 0, name = "x"} : bf16[A,B]
  %1 = input {index = 1, name = "m"} : bf16[A]
  %2 = input {index = 2, name = "z"} : bf16[]
  %5 = constant {value = dense<0xff80> : bf16} : bf16[]
  %3 = fusion(%0, %5) {kind = "input"} : bf16[A] {
    region @fusion0 {
      %0 = input {index = 0, name = "in0"} : bf16[A,B]
      %4 = input {index = 1, name = "in1"} : bf16[]
      %1 = constant {value = dense<0x3f40> : bf16} : bf16[]
      %2 = broadcast_in_dim(%1) {broadcast_dimensions = [], shape = dims[A, B]} : bf16[A,B]
      %3 = multiply(%0, %2) : bf16[A,B]
      %5 = reduce(%3, %4) {dimensions = [1]} : bf16[A] {
        region @max {
          %0 = input {index = 0, name = "a"} : bf16[]
          %1 = input {index = 1, name = "b"} : bf16[]
          %2 = maximum(%0, %1) : bf16[]
          return %2
        }
      }
      return %5
    }
  }
  %4 = fusion(%0, %1, %2) {kind = "input"} : bf16[A] {
    region @fusion1 {
      %0 = input {index = 0, name = "in0"} : bf16[A,B]
      %1 = input {index = 1, name = "in1"} : bf16[A]
      %2 = input {index = 2, name = "in2"} : bf16[]
      %3 = broadcast_in_dim(%1) {broadcast_dimensions = [0], shape = dims[A, B]} : bf16[A,B]
      %4 = subtract(%0, %3) : bf16[A,B]
      %5 = exponential(%4) : bf16[A,B]
      %6 = reduce(%5, %2) {dimensions = [1]} : bf16[A] {
        region @sum {
          %0 = input {index = 0, name = "a"} : bf16[]
          %1 = input {index = 1, name = "b"} : bf16[]
          %2 = add(%0, %1) : bf16[]
          return %2
        }
      }
      return %6
    }
  }
  return %3, %4
}"#;

fn bf16s(n: usize, seed: u64) -> Vec<bf16> {
    values(n, seed).into_iter().map(bf16::from_f32).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// The GPT-shaped loop fusion at random shapes (unit dimensions, sizes that are not
    /// multiples of the vector width).
    #[test]
    fn bf16_loop_fusion_matches_the_reference(a in 1usize..24, b in 1usize..70, seed in 0u64..1000) {
        let ins = vec![
            bf16t(&[a, b], &bf16s(a * b, seed)),
            bf16t(&[b], &bf16s(b, seed + 1)),
            f32t(&[a, b], &values(a * b, seed + 2)),
            bf16t(&[], &[bf16::from_f32(0.7)]),
            f32t(&[a], &values(a, seed + 3)),
        ];
        let (got, want) = both(LOOP, &[("A", a as i64), ("B", b as i64)], ins);
        assert_bits(&got, &want, &format!("A={a} B={b}"));
    }

    /// A row reduction of a `bf16` chain in `f32`.
    #[test]
    fn bf16_rows_match_the_reference(a in 1usize..16, b in 1usize..200, seed in 0u64..1000) {
        let ins = vec![bf16t(&[a, b], &bf16s(a * b, seed)), bf16t(&[a], &bf16s(a, seed + 1))];
        let (got, want) = both(ROWS, &[("A", a as i64), ("B", b as i64)], ins);
        assert_bits(&got, &want, &format!("A={a} B={b}"));
    }

    /// Row reductions in `bf16` (maximum, and a sum rounded once from `f64`).
    #[test]
    fn bf16_reductions_match_the_reference(a in 1usize..16, b in 0usize..200, seed in 0u64..1000) {
        let ins = vec![
            bf16t(&[a, b], &bf16s(a * b, seed)),
            bf16t(&[a], &bf16s(a, seed + 1)),
            bf16t(&[], &[bf16::from_f32(0.25)]),
        ];
        let (got, want) = both(BF16_ROWS, &[("A", a as i64), ("B", b as i64)], ins);
        assert_bits(&got, &want, &format!("A={a} B={b}"));
    }
}
