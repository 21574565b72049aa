//! Tests that `reduce_window` over dense channels-last windows (pooling and its gradient:
//! runs of channels folded a tap at a time, `exec/window_rows.rs`) gives the bits of the
//! element-by-element walk: the same windows with one padding row appended to the batch axis
//! (padding makes the windows not dense, so the walk computes them), the extra batch dropped.
//! Inputs carry `-0`, infinities, NaNs and subnormals; sums, products and extrema, in `f32`
//! (native addition) and `f64`. Every bit must agree, except which NaN a NaN result is.

use crate::common::*;
use ebb_runtime::{Data, Tensor};

/// The region body of `op` on element type `ty`.
fn body(ty: &str, op: &str) -> String {
    format!(
        "region @body {{\n      %0 = input {{index = 0, name = \"\"}} : {ty}[]\n      %1 = input {{index = 1, name = \"\"}} : {ty}[]\n      %2 = {op}(%0, %1) : {ty}[]\n      return %2\n    }}"
    )
}

/// One pooling case: `[n, h, w, c]` input, `kh×kw` window, strides, window dilations.
#[derive(Clone, Copy, Debug)]
struct Case {
    n: usize,
    h: usize,
    w: usize,
    c: usize,
    k: (usize, usize),
    s: (usize, usize),
    d: (usize, usize),
}

impl Case {
    /// Output height and width.
    fn out(&self) -> (usize, usize) {
        let o = |x: usize, k: usize, s: usize, d: usize| (x - (k - 1) * d - 1) / s + 1;
        (
            o(self.h, self.k.0, self.s.0, self.d.0),
            o(self.w, self.k.1, self.s.1, self.d.1),
        )
    }

    /// The `reduce_window` graph, with `extra` padding rows after the batch.
    fn graph(&self, ty: &str, op: &str, init: &str, extra: usize) -> String {
        let (oh, ow) = self.out();
        let Case {
            n,
            h,
            w,
            c,
            k,
            s,
            d,
        } = *self;
        format!(
            "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : {ty}[{n},{h},{w},{c}]\n  %1 = constant {{value = dense<{init}> : {ty}}} : {ty}[]\n  %2 = reduce_window(%0, %1) {{padding = [0, {extra}, 0, 0, 0, 0, 0, 0], window_dilations = [1, {}, {}, 1], window_dimensions = [1, {}, {}, 1], window_strides = [1, {}, {}, 1]}} : {ty}[{},{oh},{ow},{c}] {{\n    {}\n  }}\n  return %2\n}}",
            d.0,
            d.1,
            k.0,
            k.1,
            s.0,
            s.1,
            n + extra,
            body(ty, op)
        )
    }
}

/// Input values: the test's spread with `-0`, `±inf`, a NaN and subnormals mixed in.
fn inputs(len: usize, seed: u64, with_nan: bool) -> Vec<f32> {
    let mut v = values(len, seed);
    for (i, x) in v.iter_mut().enumerate() {
        match (i as u64 * 7 + seed) % 23 {
            0 => *x = -0.0,
            1 => *x = 1e-40,
            2 => *x = -3e-39,
            3 if i % 5 == 0 => *x = f32::INFINITY,
            4 if i % 7 == 0 => *x = f32::NEG_INFINITY,
            5 if with_nan && i % 11 == 0 => *x = f32::NAN,
            _ => {}
        }
    }
    v
}

/// The raw bits of `t`'s first `len` elements, every NaN as one value: where two NaNs meet
/// (an input NaN and one an operation made, `0·inf` or `inf - inf`), which one an operation
/// returns depends on the order the compiler gave the operands of a commutative instruction,
/// in either path.
fn bits(t: &Tensor, len: usize) -> Vec<u64> {
    match t.data() {
        Data::F32(v) => v[..len]
            .iter()
            .map(|x| if x.is_nan() { 1 } else { x.to_bits() as u64 })
            .collect(),
        Data::F64(v) => v[..len]
            .iter()
            .map(|x| if x.is_nan() { 1 } else { x.to_bits() })
            .collect(),
        d => panic!("unexpected data {:?}", d.dtype()),
    }
}

/// Runs `case` with the fast path and with the walk and compares the bits.
fn check(case: Case, ty: &str, op: &str, init: &str, seed: u64) {
    let Case { n, h, w, c, .. } = case;
    let shape = [n, h, w, c];
    let v = inputs(n * h * w * c, seed, true);
    let x = match ty {
        "f32" => f32t(&shape, &v),
        _ => Tensor::new(
            shape.to_vec(),
            Data::F64(v.iter().map(|&x| x as f64).collect::<Vec<_>>().into()),
        )
        .unwrap(),
    };
    let fast = run1(&case.graph(ty, op, init, 0), &[], vec![x.clone()]);
    let walk = run1(&case.graph(ty, op, init, 1), &[], vec![x]);
    let (oh, ow) = case.out();
    let len = n * oh * ow * c;
    assert_eq!(
        bits(&fast, len),
        bits(&walk, len),
        "{case:?} {ty} {op} init {init}"
    );
}

/// Tests pooling windows (the CNN's 2×2/2 average pool and its stride-1 gradient among them)
/// over many channel counts (runs shorter than, equal to and longer than one block of 8),
/// strides and dilations, for every float monoid.
#[test]
fn channels_last_windows_match_the_walk() {
    let mut cases = Vec::new();
    for &c in &[1, 3, 8, 13, 16, 20] {
        for &(k, s, d) in &[
            ((2, 2), (2, 2), (1, 1)),
            ((2, 2), (1, 1), (1, 1)),
            ((3, 3), (2, 2), (1, 1)),
            ((3, 2), (1, 2), (2, 1)),
            ((1, 1), (1, 1), (1, 1)),
            ((2, 3), (3, 1), (1, 2)),
        ] {
            cases.push(Case {
                n: 2,
                h: 7,
                w: 9,
                c,
                k,
                s,
                d,
            });
        }
    }
    let ops = [
        ("add", "0.0"),
        ("add", "-0.0"),
        ("add", "1.5"),
        ("multiply", "1.0"),
        ("maximum", "-inf"),
        ("minimum", "inf"),
    ];
    for (i, case) in cases.iter().enumerate() {
        for (j, (op, init)) in ops.iter().enumerate() {
            for ty in ["f32", "f64"] {
                check(*case, ty, op, init, (i * 10 + j) as u64);
            }
        }
    }
}

/// Tests a pooling large enough to be split over threads (chunks starting inside a run of
/// channels), against the walk.
#[test]
fn split_channels_last_windows_match_the_walk() {
    let case = Case {
        n: 9,
        h: 34,
        w: 34,
        c: 13,
        k: (2, 2),
        s: (1, 1),
        d: (1, 1),
    };
    check(case, "f32", "add", "0.0", 3);
    check(case, "f64", "maximum", "-inf", 4);
}
