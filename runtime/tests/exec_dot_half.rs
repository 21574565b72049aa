//! `dot_general` on `bf16`/`f16` operands gives the bits of the same contraction of the
//! operands converted to `f32` first, with its `f32` result rounded after (or kept, for an
//! `f32` result type): the shallow-contraction product reads the narrow operands and rounds
//! as it stores, the packing GEMM converts, and both must agree with the converting path.

use crate::common::*;
use ebb_runtime::{Data, Tensor};
use ebb_testkit::Lcg;

/// One contraction: operand shapes, its dimension numbers (IR attributes) and result shape.
struct Case {
    lhs: &'static [usize],
    rhs: &'static [usize],
    dims: &'static str,
    out: &'static [usize],
}

fn ty(t: &str, shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("{t}[{}]", dims.join(","))
}

/// `n` values in `[-1, 1)` from `seed`, rounded to `t` (`bf16` or `f16`), with a few
/// subnormal-producing, zero and large values mixed in.
fn narrow(t: &str, shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut g = Lcg::new(seed.wrapping_add(0x9E37_79B9_7F4A_7C15));
    let v: Vec<f32> = (0..n)
        .map(|i| match i % 37 {
            0 => 0.0,
            1 => 1.0e-3,
            2 => -300.0,
            _ => g.symmetric_f32(),
        })
        .collect();
    let data = match t {
        "bf16" => Data::BF16(
            v.iter()
                .map(|&x| half::bf16::from_f32(x))
                .collect::<Vec<_>>()
                .into(),
        ),
        _ => Data::F16(
            v.iter()
                .map(|&x| half::f16::from_f32(x))
                .collect::<Vec<_>>()
                .into(),
        ),
    };
    Tensor::new(shape.to_vec(), data).unwrap()
}

fn bits(t: &Tensor) -> Vec<u64> {
    t.to_f64_vec().iter().map(|x| x.to_bits()).collect()
}

const CASES: &[Case] = &[
    // Shallow: a partial block of rows, full column blocks.
    Case { lhs: &[5, 16], rhs: &[16, 128], dims: "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]", out: &[5, 128] },
    // A partial column block.
    Case { lhs: &[9, 7], rhs: &[7, 70], dims: "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]", out: &[9, 70] },
    // Fewer than 8 columns: computed transposed.
    Case { lhs: &[20, 8], rhs: &[8, 5], dims: "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]", out: &[20, 5] },
    // Thin and deep.
    Case { lhs: &[2, 100], rhs: &[100, 40], dims: "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]", out: &[2, 40] },
    // Both operands read through strides (contracting their first dimension).
    Case { lhs: &[16, 40], rhs: &[16, 24], dims: "lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]", out: &[40, 24] },
    // Attention's `q·kᵀ`, batched over dimensions that do not merge.
    Case { lhs: &[2, 24, 3, 16], rhs: &[2, 24, 3, 16], dims: "lhs_batching_dimensions = [0, 2], lhs_contracting_dimensions = [3], rhs_batching_dimensions = [0, 2], rhs_contracting_dimensions = [3]", out: &[2, 3, 24, 24] },
    // Large enough to be split into row blocks across threads.
    Case { lhs: &[520, 32], rhs: &[32, 96], dims: "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]", out: &[520, 96] },
    // Deep: the packing GEMM (operands converted).
    Case { lhs: &[64, 64], rhs: &[64, 48], dims: "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]", out: &[64, 48] },
];

/// Every case, for `bf16` and `f16`, with a narrow and an `f32` result type.
#[test]
fn half_dots_give_the_bits_of_converted_operands() {
    for t in ["bf16", "f16"] {
        for (i, c) in CASES.iter().enumerate() {
            for res in [t, "f32"] {
                let inputs = format!(
                    "  %0 = input {{index = 0, name = \"a\"}} : {}\n  %1 = input {{index = 1, name = \"b\"}} : {}\n",
                    ty(t, c.lhs),
                    ty(t, c.rhs)
                );
                let direct = format!(
                    "graph @t {{\n{inputs}  %2 = dot_general(%0, %1) {{dtype = {res}, {}}} : {}\n  return %2\n}}",
                    c.dims,
                    ty(res, c.out)
                );
                let converted = format!(
                    "graph @t {{\n{inputs}  %2 = convert(%0) {{dtype = f32}} : {}\n  %3 = convert(%1) {{dtype = f32}} : {}\n  %4 = dot_general(%2, %3) {{{}}} : {}\n  %5 = convert(%4) {{dtype = {res}}} : {}\n  return %5\n}}",
                    ty("f32", c.lhs),
                    ty("f32", c.rhs),
                    c.dims,
                    ty("f32", c.out),
                    ty(res, c.out)
                );
                let ins = || vec![narrow(t, c.lhs, i as u64), narrow(t, c.rhs, i as u64 + 50)];
                let (x, y) = (run1(&direct, &[], ins()), run1(&converted, &[], ins()));
                assert_eq!(x.dtype().to_string(), res, "case {i} ({t} → {res})");
                assert_eq!(bits(&x), bits(&y), "case {i} ({t} → {res})");
            }
        }
    }
}
