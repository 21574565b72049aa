//! Unit tests of the convolution and pooling lowerings against direct loops: `Conv` and
//! `ConvGrad` with strides, padding and dilation (the fixture `ort_cnn` has unit strides
//! only), `MaxPool` + `MaxPoolGrad` with padding and ties, `AveragePool` with padding,
//! `GlobalMaxPool`, `AveragePoolGrad` in both padding-count modes, `BatchNormalization` in both
//! modes with its running statistics.

use crate::onnx::{ints_attr, ms_node, node, run, vi};
use ebb_import::onnx::proto::{AttributeProto, NodeProto};
use ebb_runtime::Tensor;

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn t(shape: &[usize], v: Vec<f32>) -> Tensor {
    Tensor::from_f32(shape.to_vec(), v).unwrap()
}

fn close(got: &Tensor, want: &[f32], what: &str) {
    let g = got.as_f32().unwrap();
    assert_eq!(g.len(), want.len(), "{what}");
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * b.abs().max(1.0),
            "{what}[{i}]: {a} vs {b}"
        );
    }
}

// N=2, C=2, H=5, W=6; M=3 filters 3x3; stride 2, pads (1, 1, 0, 1), dilation (1, 2).
const N: usize = 2;
const C: usize = 2;
const H: usize = 5;
const W: usize = 6;
const M: usize = 3;
const K: usize = 3;
const S: usize = 2;
const PAD: [usize; 4] = [1, 1, 0, 1]; // h_begin, w_begin, h_end, w_end
const DIL: [usize; 2] = [1, 2];

fn out_size(i: usize, lo: usize, hi: usize, d: usize) -> usize {
    (i + lo + hi - (d * (K - 1) + 1)) / S + 1
}

fn conv_attrs() -> Vec<AttributeProto> {
    vec![
        ints_attr("kernel_shape", &[K as i64, K as i64]),
        ints_attr("strides", &[S as i64, S as i64]),
        ints_attr("pads", &PAD.map(|p| p as i64)),
        ints_attr("dilations", &DIL.map(|d| d as i64)),
    ]
}

/// The input position read by output `(oh, ow)` at kernel tap `(i, j)`, if not padding.
fn tap(oh: usize, ow: usize, i: usize, j: usize) -> Option<(usize, usize)> {
    let h = (oh * S + i * DIL[0]).checked_sub(PAD[0])?;
    let w = (ow * S + j * DIL[1]).checked_sub(PAD[1])?;
    (h < H && w < W).then_some((h, w))
}

#[test]
fn conv_and_conv_grad_match_direct_loops() {
    let (oh_n, ow_n) = (
        out_size(H, PAD[0], PAD[2], DIL[0]),
        out_size(W, PAD[1], PAD[3], DIL[1]),
    );
    let x = values(N * C * H * W, 1);
    let w = values(M * C * K * K, 2);
    let b = values(M, 3);
    let dy = values(N * M * oh_n * ow_n, 4);
    let xi = |n: usize, c: usize, h: usize, ww: usize| ((n * C + c) * H + h) * W + ww;
    let wi = |m: usize, c: usize, i: usize, j: usize| ((m * C + c) * K + i) * K + j;
    let yi = |n: usize, m: usize, a: usize, bb: usize| ((n * M + m) * oh_n + a) * ow_n + bb;
    let (mut y, mut dx, mut dw, mut db) = (
        vec![0f32; N * M * oh_n * ow_n],
        vec![0f32; x.len()],
        vec![0f32; w.len()],
        vec![0f32; M],
    );
    for n in 0..N {
        for m in 0..M {
            for a in 0..oh_n {
                for bb in 0..ow_n {
                    let g = dy[yi(n, m, a, bb)];
                    db[m] += g;
                    y[yi(n, m, a, bb)] = b[m];
                    for c in 0..C {
                        for i in 0..K {
                            for j in 0..K {
                                if let Some((h, ww)) = tap(a, bb, i, j) {
                                    y[yi(n, m, a, bb)] += x[xi(n, c, h, ww)] * w[wi(m, c, i, j)];
                                    dx[xi(n, c, h, ww)] += g * w[wi(m, c, i, j)];
                                    dw[wi(m, c, i, j)] += g * x[xi(n, c, h, ww)];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    let conv = NodeProto {
        attribute: conv_attrs(),
        ..node("Conv", &["x", "w", "b"], &["y"], vec![])
    };
    let grad = NodeProto {
        attribute: conv_attrs(),
        ..ms_node("ConvGrad", &["dy", "x", "w"], &["dx", "dw", "db"])
    };
    let (oh_s, ow_s) = (oh_n.to_string(), ow_n.to_string());
    let out = run(
        vec![conv, grad],
        vec![],
        vec![
            vi("x", 1, &["n", "2", "5", "6"]),
            vi("w", 1, &["3", "2", "3", "3"]),
            vi("b", 1, &["3"]),
            vi("dy", 1, &["n", "3", &oh_s, &ow_s]),
        ],
        vec![
            vi("y", 1, &["n", "3", &oh_s, &ow_s]),
            vi("dx", 1, &["n", "2", "5", "6"]),
            vi("dw", 1, &["3", "2", "3", "3"]),
            vi("db", 1, &["3"]),
        ],
        &[("n", N as i64)],
        vec![
            t(&[N, C, H, W], x),
            t(&[M, C, K, K], w),
            t(&[M], b),
            t(&[N, M, oh_n, ow_n], dy),
        ],
    );
    close(&out[0], &y, "y");
    close(&out[1], &dx, "dx");
    close(&out[2], &dw, "dw");
    close(&out[3], &db, "db");
}

#[test]
fn max_pool_grad_sends_each_gradient_to_the_first_maximum() {
    // One 1x1x3x4 image, 2x2 windows, stride 2, pads (1, 0, 0, 0): rows -1..0 and 1..2.
    let x = vec![
        1.0, 5.0, 5.0, 2.0, //
        0.0, 0.0, 3.0, 3.0, //
        0.0, 7.0, 3.0, -1.0,
    ];
    let attrs = || {
        vec![
            ints_attr("kernel_shape", &[2, 2]),
            ints_attr("strides", &[2, 2]),
            ints_attr("pads", &[1, 0, 0, 0]),
        ]
    };
    let pool = NodeProto {
        attribute: attrs(),
        ..node("MaxPool", &["x"], &["y", "idx"], vec![])
    };
    let grad = NodeProto {
        attribute: attrs(),
        ..node("MaxPoolGrad", &["dy", "idx"], &["dx"], vec![])
    };
    let out = run(
        vec![pool, grad],
        vec![],
        vec![
            vi("x", 1, &["1", "1", "3", "4"]),
            vi("dy", 1, &["1", "1", "2", "2"]),
        ],
        vec![
            vi("y", 1, &["1", "1", "2", "2"]),
            vi("dx", 1, &["1", "1", "3", "4"]),
        ],
        &[],
        vec![
            t(&[1, 1, 3, 4], x),
            t(&[1, 1, 2, 2], vec![10.0, 20.0, 30.0, 40.0]),
        ],
    );
    // Windows: row 0 (padding above) cols 0-1 -> 5 at (0,1); cols 2-3 -> 5 at (0,2) (first of
    // the tie 5, 2); rows 1-2 cols 0-1 -> 7 at (2,1); cols 2-3 -> 3 at (1,2) (first of three 3s).
    close(&out[0], &[5.0, 5.0, 7.0, 3.0], "y");
    let mut dx = vec![0f32; 12];
    dx[1] = 10.0;
    dx[2] = 20.0;
    dx[9] = 30.0;
    dx[6] = 40.0;
    close(&out[1], &dx, "dx");
}

#[test]
fn average_pool_excludes_padding_and_global_max_pool_reduces_space() {
    let x: Vec<f32> = (0..9).map(|i| i as f32).collect(); // 1x1x3x3
    let avg = NodeProto {
        attribute: vec![
            ints_attr("kernel_shape", &[2, 2]),
            ints_attr("pads", &[1, 1, 0, 0]),
            ints_attr("strides", &[2, 2]),
        ],
        ..node("AveragePool", &["x"], &["a"], vec![])
    };
    let gmax = node("GlobalMaxPool", &["x"], &["g"], vec![]);
    let out = run(
        vec![avg, gmax],
        vec![],
        vec![vi("x", 1, &["1", "1", "3", "3"])],
        vec![
            vi("a", 1, &["1", "1", "2", "2"]),
            vi("g", 1, &["1", "1", "1", "1"]),
        ],
        &[],
        vec![t(&[1, 1, 3, 3], x)],
    );
    // Windows over the padded 4x4 (pad row/col -1): {0}, {1,2}, {3,6}, {4,5,7,8}.
    close(&out[0], &[0.0, 1.5, 4.5, 6.0], "a");
    close(&out[1], &[8.0], "g");
}

#[test]
fn batch_normalization_modes_and_running_statistics() {
    // x: [2, 2, 1, 2]; channel 0 holds 1,2,3,4, channel 1 holds 0,0,4,4.
    let x = vec![1.0, 2.0, 0.0, 0.0, 3.0, 4.0, 4.0, 4.0];
    let vec_in = |name: &str, v: [f32; 2]| ebb_import::onnx::proto::TensorProto {
        name: Some(name.into()),
        dims: vec![2],
        data_type: Some(1),
        float_data: v.to_vec(),
        ..Default::default()
    };
    let train = NodeProto {
        attribute: vec![crate::onnx::int_attr("training_mode", 1)],
        ..node(
            "BatchNormalization",
            &["x", "s", "b", "m", "v"],
            &["y", "rm", "rv"],
            vec![],
        )
    };
    let infer = node(
        "BatchNormalization",
        &["x", "s", "b", "m", "v"],
        &["yi"],
        vec![],
    );
    let out = run(
        vec![train, infer],
        vec![
            vec_in("s", [2.0, 1.0]),
            vec_in("b", [0.5, 0.0]),
            vec_in("m", [0.0, 1.0]),
            vec_in("v", [1.0, 4.0]),
        ],
        vec![vi("x", 1, &["2", "2", "1", "2"])],
        vec![
            vi("y", 1, &["2", "2", "1", "2"]),
            vi("rm", 1, &["2"]),
            vi("rv", 1, &["2"]),
            vi("yi", 1, &["2", "2", "1", "2"]),
        ],
        &[],
        vec![t(&[2, 2, 1, 2], x.clone())],
    );
    // Batch statistics: channel 0 mean 2.5, biased var 1.25; channel 1 mean 2, var 4.
    let eps = 1e-5f32;
    let (i0, i1) = (1.0 / (1.25 + eps).sqrt(), 1.0 / (4.0 + eps).sqrt());
    let y: Vec<f32> = x
        .iter()
        .enumerate()
        .map(|(k, &v)| {
            if (k / 2) % 2 == 0 {
                (v - 2.5) * i0 * 2.0 + 0.5
            } else {
                (v - 2.0) * i1
            }
        })
        .collect();
    close(&out[0], &y, "y");
    close(
        &out[1],
        &[0.9 * 0.0 + 0.1 * 2.5, 0.9 * 1.0 + 0.1 * 2.0],
        "running mean",
    );
    close(
        &out[2],
        &[0.9 * 1.0 + 0.1 * 1.25, 0.9 * 4.0 + 0.1 * 4.0],
        "running var",
    );
    let yi: Vec<f32> = x
        .iter()
        .enumerate()
        .map(|(k, &v)| {
            if (k / 2) % 2 == 0 {
                v / (1.0 + eps).sqrt() * 2.0 + 0.5
            } else {
                (v - 1.0) / (4.0 + eps).sqrt()
            }
        })
        .collect();
    close(&out[3], &yi, "inference");
}

/// `AveragePoolGrad` against direct loops on 1-D pools: each input element receives the sum,
/// over the windows that contain it, of the window's gradient over its count.
#[test]
fn average_pool_grad_spreads_over_the_windows() {
    for (len, k, s, p, include) in [
        (9usize, 3usize, 2usize, 1usize, 1i64),
        (9, 3, 2, 1, 0),
        (6, 2, 2, 0, 0),
    ] {
        let out_len = (len + 2 * p - k) / s + 1;
        let dy = values(out_len, 9);
        let mut dx = vec![0f32; len];
        for (o, g) in dy.iter().enumerate() {
            let taps: Vec<usize> = (0..k)
                .filter_map(|j| (o * s + j).checked_sub(p).filter(|&i| i < len))
                .collect();
            let count = if include == 1 { k } else { taps.len() };
            for i in taps {
                dx[i] += g / count as f32;
            }
        }
        let attrs = vec![
            ints_attr("kernel_shape", &[k as i64]),
            ints_attr("strides", &[s as i64]),
            ints_attr("pads", &[p as i64, p as i64]),
            crate::onnx::int_attr("count_include_pad", include),
        ];
        let grad = NodeProto {
            attribute: attrs,
            ..node("AveragePoolGrad", &["dy"], &["dx"], vec![])
        };
        let (o, l) = (out_len.to_string(), len.to_string());
        let out = run(
            vec![grad],
            vec![],
            vec![vi("dy", 1, &["1", "1", &o])],
            vec![vi("dx", 1, &["1", "1", &l])],
            &[],
            vec![t(&[1, 1, out_len], dy)],
        );
        close(
            &out[0],
            &dx,
            &format!("len {len} k {k} s {s} p {p} include {include}"),
        );
    }
}
