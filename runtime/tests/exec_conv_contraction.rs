//! Tests the split-contraction lowering of `convolution` (weight gradients: few result rows
//! `(q, b)`, a contraction over the layer's batch and image), whose patch rows are gathered as
//! runs over the result batch merged per kernel tap: against a direct `f64` evaluation of the
//! StableHLO definition, over strides, dilations (rhs and lhs: several classes), padding,
//! result batches (one to several row parts), both layouts of `x` (batch contiguous, runs
//! merged across positions; batch strided) and inputs with `-0`, infinities and a NaN (whose
//! outputs must be NaN exactly where the definition's are).

use crate::common::*;
use ebb_testkit::Lcg;

/// A weight-gradient-shaped convolution: `[f, 0, 1, b]`-like `x` of `nb` result batch (the
/// layer's channels) and `c` contracted features (the layer's batch) over an `h×w` image, a
/// `g` operand `[c, kh, kw, o]` (the output gradient: the convolution's kernel).
#[derive(Clone, Copy, Debug)]
struct Case {
    nb: usize,
    c: usize,
    hw: (usize, usize),
    k: (usize, usize),
    o: usize,
    pad: (i64, i64),
    ldil: i64,
    rdil: i64,
    stride: i64,
    /// `x` as `[c, h, w, nb]` (result batch contiguous) or `[c, nb, h, w]`.
    batch_last: bool,
}

impl Case {
    /// Output size of spatial dimension `d` (input size `n`, kernel size `k`).
    fn q(&self, n: usize, k: usize) -> usize {
        let padded = (n as i64 - 1) * self.ldil + 1 + self.pad.0 + self.pad.1;
        let win = (k as i64 - 1) * self.rdil + 1;
        ((padded - win) / self.stride + 1) as usize
    }

    /// The convolution as text, `x` of shape `xs`, result `[qh, qw, nb, o]`.
    fn graph(&self, xs: &[usize]) -> String {
        let Case {
            c,
            k,
            o,
            pad: (lo, hi),
            ldil,
            rdil,
            stride,
            nb,
            hw,
            batch_last,
            ..
        } = *self;
        let xdn = if batch_last {
            "[f, 0, 1, b]"
        } else {
            "[f, b, 0, 1]"
        };
        let out = [self.q(hw.0, k.0), self.q(hw.1, k.1), nb, o];
        format!(
            "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[{}]\n  %1 = input {{index = 1, name = \"w\"}} : f32[{c},{},{},{o}]\n  %2 = convolution(%0, %1) {{batch_group_count = 1, dimension_numbers = \"{xdn}x[i, 0, 1, o]->[0, 1, b, f]\", feature_group_count = 1, lhs_dilation = [{ldil}, {ldil}], padding = [{lo}, {hi}, {lo}, {hi}], rhs_dilation = [{rdil}, {rdil}], window_strides = [{stride}, {stride}]}} : f32[{}]\n  return %2\n}}",
            dims(xs),
            k.0,
            k.1,
            dims(&out)
        )
    }
}

/// The input index of output position `q` and kernel tap `t` along one dimension, if any.
fn input(case: &Case, q: usize, t: usize, n: usize) -> Option<usize> {
    let p = q as i64 * case.stride + t as i64 * case.rdil - case.pad.0;
    (p >= 0 && p % case.ldil == 0 && p / case.ldil < n as i64).then(|| (p / case.ldil) as usize)
}

fn check(case: Case, seed: u64) {
    let Case {
        nb,
        c,
        hw: (h, w),
        k: (kh, kw),
        o,
        ..
    } = case;
    let mut g = Lcg::new(seed);
    let mut xv: Vec<f32> = (0..c * h * w * nb).map(|_| g.symmetric_f32()).collect();
    let wv: Vec<f32> = (0..c * kh * kw * o).map(|_| g.symmetric_f32()).collect();
    for (i, v) in xv.iter_mut().enumerate() {
        match i % 97 {
            0 => *v = -0.0,
            13 if i % 3 == 0 => *v = 1e-41,
            _ => {}
        }
    }
    let n = xv.len();
    if seed.is_multiple_of(3) {
        xv[n / 2] = f32::NAN;
    }
    if seed % 4 == 1 {
        xv[n / 3] = f32::INFINITY;
    }
    // element (ci, y, x, b) of x in its layout
    let xs: Vec<usize> = if case.batch_last {
        vec![c, h, w, nb]
    } else {
        vec![c, nb, h, w]
    };
    let xat = |ci: usize, y: usize, xx: usize, b: usize| -> f64 {
        let i = if case.batch_last {
            ((ci * h + y) * w + xx) * nb + b
        } else {
            ((ci * nb + b) * h + y) * w + xx
        };
        xv[i] as f64
    };
    let (qh, qw) = (case.q(h, kh), case.q(w, kw));
    let got = run1(
        &case.graph(&xs),
        &[],
        vec![f32t(&xs, &xv), f32t(&[c, kh, kw, o], &wv)],
    )
    .to_f64_vec();
    assert_eq!(got.len(), qh * qw * nb * o);
    for a in 0..qh {
        for bq in 0..qw {
            for b in 0..nb {
                for f in 0..o {
                    let (mut sum, mut mag) = (0f64, 0f64);
                    for ci in 0..c {
                        for ty in 0..kh {
                            for tx in 0..kw {
                                let (Some(y), Some(xx)) =
                                    (input(&case, a, ty, h), input(&case, bq, tx, w))
                                else {
                                    continue;
                                };
                                let t = xat(ci, y, xx, b)
                                    * wv[((ci * kh + ty) * kw + tx) * o + f] as f64;
                                sum += t;
                                mag += t.abs();
                            }
                        }
                    }
                    let v = got[((a * qw + bq) * nb + b) * o + f];
                    if sum.is_nan() || !sum.is_finite() {
                        assert!(
                            v.is_nan() == sum.is_nan() && (sum.is_nan() || v == sum),
                            "{case:?}: ({a}, {bq}, {b}, {f}) got {v}, want {sum}"
                        );
                    } else {
                        assert!(
                            (v - sum).abs() <= 1e-5 * mag + 1e-30,
                            "{case:?}: ({a}, {bq}, {b}, {f}) got {v}, want {sum}"
                        );
                    }
                }
            }
        }
    }
}

/// Tests weight-gradient convolutions that take the split-contraction lowering (a contraction
/// over batch × image above four times the result rows).
#[test]
fn split_contraction_matches_the_definition() {
    let base = Case {
        nb: 3,
        c: 8,
        hw: (12, 12),
        k: (12, 12),
        o: 8,
        pad: (1, 1),
        ldil: 1,
        rdil: 1,
        stride: 1,
        batch_last: true,
    };
    let mut cases = vec![base];
    for &nb in &[1, 3, 8, 16] {
        for &batch_last in &[true, false] {
            cases.push(Case {
                nb,
                batch_last,
                ..base
            });
        }
    }
    // strided and dilated: the kernel (output gradient) of a stride-2 layer
    cases.push(Case {
        k: (6, 6),
        stride: 2,
        ..base
    });
    cases.push(Case {
        k: (5, 6),
        rdil: 2,
        pad: (2, 1),
        ..base
    });
    cases.push(Case {
        k: (6, 5),
        stride: 2,
        rdil: 2,
        pad: (0, 2),
        nb: 16,
        batch_last: false,
        ..base
    });
    // lhs dilation: several classes
    cases.push(Case {
        k: (12, 12),
        ldil: 2,
        pad: (1, 0),
        ..base
    });
    // many result rows (several row parts) and a deep contraction (several chunks)
    cases.push(Case {
        nb: 16,
        c: 40,
        hw: (16, 16),
        k: (16, 16),
        o: 16,
        ..base
    });
    cases.push(Case {
        nb: 5,
        c: 64,
        hw: (16, 16),
        k: (16, 16),
        o: 3,
        ..base
    });
    for (i, case) in cases.into_iter().enumerate() {
        check(case, i as u64);
    }
}
