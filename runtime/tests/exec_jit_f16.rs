//! The JIT executor's `f16` fusion kernels against the reference executor, bit for bit: the
//! kernel holds `f16` values in `f32` registers (widened exactly, a NaN quieted as
//! `f16::to_f32` quiets it) and rounds after every op to nearest even as the reference does
//! (`half::f16::from_f32`; `convert` rounds the `f64` value to `f32`, then to `f16`):
//! - every one of the 65536 `f16` bit patterns through each supported unary op, the binary
//!   ops against a second pattern, and `convert` to `f32` and `i32`;
//! - `f32` and `i32` values (ties at several exponents, the subnormal range, the overflow
//!   edge, NaN payloads, integers past 2^24) converted to `f16`;
//! - the `bf16` tests' GPT-shaped loop fusion, `f32` row reduction and row reductions in the
//!   low-precision type (a softmax's maximum and sum), in `f16`, at random shapes.

use crate::common;
use crate::exec_jit_bf16::{every_pattern_matches, f32_probes, BF16_ROWS, CONVERT, LOOP, ROWS};
use common::*;
use ebb_runtime::{Data, Tensor};
use half::f16;
use proptest::prelude::*;

fn f16t(shape: &[usize], v: &[f16]) -> Tensor {
    Tensor::new(shape.to_vec(), Data::F16(v.to_vec().into())).unwrap()
}

fn f16s(n: usize, seed: u64) -> Vec<f16> {
    values(n, seed).into_iter().map(f16::from_f32).collect()
}

/// Each op the host kernels implement for `f16` on every bit pattern (NaN payloads,
/// signaling NaNs, subnormals, infinities, both zeros).
#[test]
fn every_f16_pattern_matches_the_reference() {
    every_pattern_matches("f16", |bits| {
        let v: Vec<f16> = bits.iter().map(|&b| f16::from_bits(b)).collect();
        f16t(&[v.len()], &v)
    });
}

/// `convert` to `f16` from `f32` (one rounding) and from integers (to `f64`, `f32`, then
/// `f16`).
#[test]
fn conversions_to_f16_match_the_reference() {
    // Ties of the 13 dropped bits, just above and below them, at 1.0, in f16's subnormal range
    // (2^-20), at its smallest normal (2^-14), and just below 65504.
    let mut xs = f32_probes(
        &[0x3f80_0000, 0x3580_0000, 0x3880_0000, 0x4778_0000],
        &[0x1000, 0x0fff, 0x1001, 0x3000, 0x2fff, 0x1fff, 0x7_ffff],
    );
    xs.extend([
        65504.0,
        65519.0,
        65520.0,
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xffc1_2345),
        f32::from_bits(1),
    ]);
    let ints: Vec<i32> = (0..xs.len() as i32)
        .map(|i| {
            let h = i.wrapping_mul(0x2545_F491);
            match i % 3 {
                0 => h >> 16,
                1 => (h >> 20) | 1,
                _ => (1 << 24) + (1 << 16) + (i % 7) - 3,
            }
        })
        .collect();
    let n = xs.len();
    let src = CONVERT.replace("bf16", "f16");
    let ins = vec![
        Tensor::new(vec![n], Data::F32(xs.into())).unwrap(),
        i32t(&[n], &ints),
    ];
    let (got, want) = both(&src, &[("N", n as i64)], ins);
    assert_bits(&got, &want, "convert to f16");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// The GPT-shaped loop fusion in `f16` at random shapes.
    #[test]
    fn f16_loop_fusion_matches_the_reference(a in 1usize..24, b in 1usize..70, seed in 0u64..1000) {
        let ins = vec![
            f16t(&[a, b], &f16s(a * b, seed)),
            f16t(&[b], &f16s(b, seed + 1)),
            f32t(&[a, b], &values(a * b, seed + 2)),
            f16t(&[], &[f16::from_f32(0.7)]),
            f32t(&[a], &values(a, seed + 3)),
        ];
        let src = LOOP.replace("bf16", "f16");
        let (got, want) = both(&src, &[("A", a as i64), ("B", b as i64)], ins);
        assert_bits(&got, &want, &format!("A={a} B={b}"));
    }

    /// A row reduction of an `f16` chain in `f32`.
    #[test]
    fn f16_rows_match_the_reference(a in 1usize..16, b in 1usize..200, seed in 0u64..1000) {
        let ins = vec![f16t(&[a, b], &f16s(a * b, seed)), f16t(&[a], &f16s(a, seed + 1))];
        let src = ROWS.replace("bf16", "f16");
        let (got, want) = both(&src, &[("A", a as i64), ("B", b as i64)], ins);
        assert_bits(&got, &want, &format!("A={a} B={b}"));
    }

    /// Row reductions in `f16` (maximum from `-inf`, and a sum rounded once from `f64`).
    #[test]
    fn f16_reductions_match_the_reference(a in 1usize..16, b in 0usize..200, seed in 0u64..1000) {
        let ins = vec![
            f16t(&[a, b], &f16s(a * b, seed)),
            f16t(&[a], &f16s(a, seed + 1)),
            f16t(&[], &[f16::from_f32(0.25)]),
        ];
        // `bf16`'s -inf and 0.75 as `f16` bits.
        let src = BF16_ROWS
            .replace("0xff80", "0xfc00")
            .replace("0x3f40", "0x3a00")
            .replace("bf16", "f16");
        let (got, want) = both(&src, &[("A", a as i64), ("B", b as i64)], ins);
        assert_bits(&got, &want, &format!("A={a} B={b}"));
    }
}
