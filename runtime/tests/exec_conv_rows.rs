//! Tests that the rows lowering of `convolution` gives the same bits whichever of the input's
//! batch or feature dimensions is the contiguous one: the weight-gradient layout
//! `[f, 0, 1, b]` (batch contiguous, the patch gathered transposed) against the same
//! convolution on the input transposed to `[b, 0, 1, f]` (feature contiguous, the patch
//! gathered by rows). Both contract the same products in the same `(tap, feature)` order.

use crate::common;
use common::*;
use ebb_testkit::Lcg;

/// A weight-gradient-shaped convolution: `nb` result batch (the layer's channels), `c`
/// contracted features (the layer's batch), an `h×w` input, a `k×k` kernel.
struct Case {
    nb: usize,
    c: usize,
    hw: (usize, usize),
    k: usize,
    o: usize,
    pad: (i64, i64),
    ldil: i64,
    rdil: i64,
    stride: i64,
}

/// The convolution of `case` on `x` in layout `xdn` (`f32[xs]`), as text.
fn graph(case: &Case, xs: &[usize], xdn: &str, out: &[usize]) -> String {
    let Case {
        c,
        k,
        o,
        pad: (lo, hi),
        ldil,
        rdil,
        stride,
        ..
    } = *case;
    format!(
        "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[{}]\n  %1 = input {{index = 1, name = \"w\"}} : f32[{c},{k},{k},{o}]\n  %2 = convolution(%0, %1) {{batch_group_count = 1, dimension_numbers = \"{xdn}x[i, 0, 1, o]->[0, 1, b, f]\", feature_group_count = 1, lhs_dilation = [{ldil}, {ldil}], padding = [{lo}, {hi}, {lo}, {hi}], rhs_dilation = [{rdil}, {rdil}], window_strides = [{stride}, {stride}]}} : f32[{}]\n  return %2\n}}",
        dims(xs),
        dims(out)
    )
}

/// Output size of one spatial dimension.
fn q(case: &Case, d: usize) -> usize {
    let padded = (d as i64 - 1) * case.ldil + 1 + case.pad.0 + case.pad.1;
    let win = (case.k as i64 - 1) * case.rdil + 1;
    ((padded - win) / case.stride + 1) as usize
}

fn check(case: &Case, seed: u64) {
    let (h, w) = case.hw;
    let (nb, c) = (case.nb, case.c);
    let mut g = Lcg::new(seed);
    // x as [c, h, w, nb] (batch contiguous) and its transpose [nb, h, w, c].
    let xf: Vec<f32> = (0..c * h * w * nb).map(|_| g.symmetric_f32()).collect();
    let mut xb = vec![0f32; xf.len()];
    for ci in 0..c {
        for p in 0..h * w {
            for b in 0..nb {
                xb[(b * h * w + p) * c + ci] = xf[(ci * h * w + p) * nb + b];
            }
        }
    }
    let wv: Vec<f32> = (0..c * case.k * case.k * case.o)
        .map(|_| g.symmetric_f32())
        .collect();
    let wt = f32t(&[c, case.k, case.k, case.o], &wv);
    let out = [q(case, h), q(case, w), nb, case.o];
    let sf = [c, h, w, nb];
    let sb = [nb, h, w, c];
    let a = run1(
        &graph(case, &sf, "[f, 0, 1, b]", &out),
        &[],
        vec![f32t(&sf, &xf), wt.clone()],
    );
    let b = run1(
        &graph(case, &sb, "[b, 0, 1, f]", &out),
        &[],
        vec![f32t(&sb, &xb), wt],
    );
    let bits = |t: &ebb_runtime::Tensor| -> Vec<u64> {
        t.to_f64_vec().iter().map(|v| v.to_bits()).collect()
    };
    assert_eq!(bits(&a), bits(&b), "{:?}", (nb, c, h, w, case.k));
}

/// Tests small-batch weight-gradient shapes (the rows lowering serves them: a contraction
/// over batch × image no longer than four times the result rows), with padding, several
/// batch-row blocks (`nb` above 64 with a contraction above 512), lhs dilation (several
/// classes) and rhs dilation.
#[test]
fn batch_contiguous_rows_lowering_matches_feature_contiguous() {
    let cases = [
        Case {
            nb: 64,
            c: 4,
            hw: (8, 8),
            k: 3,
            o: 8,
            pad: (1, 1),
            ldil: 1,
            rdil: 1,
            stride: 1,
        },
        Case {
            nb: 70,
            c: 72,
            hw: (3, 3),
            k: 3,
            o: 5,
            pad: (1, 1),
            ldil: 1,
            rdil: 1,
            stride: 1,
        },
        Case {
            nb: 16,
            c: 2,
            hw: (4, 4),
            k: 3,
            o: 3,
            pad: (2, 1),
            ldil: 2,
            rdil: 1,
            stride: 1,
        },
        Case {
            nb: 9,
            c: 3,
            hw: (6, 6),
            k: 3,
            o: 4,
            pad: (0, 1),
            ldil: 1,
            rdil: 2,
            stride: 1,
        },
        Case {
            nb: 5,
            c: 1,
            hw: (5, 5),
            k: 2,
            o: 2,
            pad: (0, 0),
            ldil: 1,
            rdil: 1,
            stride: 2,
        },
    ];
    for (i, case) in cases.iter().enumerate() {
        check(case, 11 + i as u64);
    }
}

/// Tests that a convolution whose contraction is deeper than one `matrixmultiply` depth
/// block (256), computed block by block with the blocks' sums added to the result, gives the
/// bits of the same product as one `dot_general`: a 1×1 convolution over 600 features into a
/// few output features (the convolution's GEMM reads `x` in place).
#[test]
fn deep_convolution_matches_dot_general_bits() {
    let (n, h, w, c, o) = (2, 3, 5, 600, 5);
    let mut g = Lcg::new(5);
    let xv: Vec<f32> = (0..n * h * w * c).map(|_| g.symmetric_f32()).collect();
    let wv: Vec<f32> = (0..c * o).map(|_| g.symmetric_f32()).collect();
    let conv = format!(
        "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[{n},{h},{w},{c}]\n  %1 = input {{index = 1, name = \"w\"}} : f32[1,1,{c},{o}]\n  %2 = convolution(%0, %1) {{batch_group_count = 1, dimension_numbers = \"[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]\", feature_group_count = 1, lhs_dilation = [1, 1], padding = [0, 0, 0, 0], rhs_dilation = [1, 1], window_strides = [1, 1]}} : f32[{n},{h},{w},{o}]\n  return %2\n}}"
    );
    let dot = format!(
        "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[{},{c}]\n  %1 = input {{index = 1, name = \"w\"}} : f32[{c},{o}]\n  %2 = dot_general(%0, %1) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : f32[{},{o}]\n  return %2\n}}",
        n * h * w,
        n * h * w
    );
    let a = run1(
        &conv,
        &[],
        vec![f32t(&[n, h, w, c], &xv), f32t(&[1, 1, c, o], &wv)],
    );
    let b = run1(
        &dot,
        &[],
        vec![f32t(&[n * h * w, c], &xv), f32t(&[c, o], &wv)],
    );
    let bits = |t: &ebb_runtime::Tensor| -> Vec<u64> {
        t.to_f64_vec().iter().map(|v| v.to_bits()).collect()
    };
    assert_eq!(bits(&a), bits(&b));
}

/// Tests that a weight-gradient convolution with fewer than 8 output features (computed as
/// its transpose, `Cᵀ = Bᵀ·Aᵀ`, by the split-contraction lowering) gives the bits of the same
/// product as one `dot_general`: the kernel covers the whole image, so the contraction is
/// `(c, h, w)` in order, one chunk of one block.
#[test]
fn narrow_weight_gradient_matches_dot_general_bits() {
    let (c, h, w, nb, o) = (4, 8, 8, 40, 3);
    let mut g = Lcg::new(9);
    let xv: Vec<f32> = (0..c * h * w * nb).map(|_| g.symmetric_f32()).collect();
    let wv: Vec<f32> = (0..c * h * w * o).map(|_| g.symmetric_f32()).collect();
    let conv = format!(
        "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[{c},{h},{w},{nb}]\n  %1 = input {{index = 1, name = \"w\"}} : f32[{c},{h},{w},{o}]\n  %2 = convolution(%0, %1) {{batch_group_count = 1, dimension_numbers = \"[f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f]\", feature_group_count = 1, lhs_dilation = [1, 1], padding = [0, 0, 0, 0], rhs_dilation = [1, 1], window_strides = [1, 1]}} : f32[1,1,{nb},{o}]\n  return %2\n}}"
    );
    let k = c * h * w;
    let dot = format!(
        "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[{k},{nb}]\n  %1 = input {{index = 1, name = \"w\"}} : f32[{k},{o}]\n  %2 = dot_general(%0, %1) {{lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]}} : f32[{nb},{o}]\n  return %2\n}}"
    );
    let a = run1(
        &conv,
        &[],
        vec![f32t(&[c, h, w, nb], &xv), f32t(&[c, h, w, o], &wv)],
    );
    let b = run1(&dot, &[], vec![f32t(&[k, nb], &xv), f32t(&[k, o], &wv)]);
    let bits = |t: &ebb_runtime::Tensor| -> Vec<u64> {
        t.to_f64_vec().iter().map(|v| v.to_bits()).collect()
    };
    assert_eq!(bits(&a), bits(&b));
}
