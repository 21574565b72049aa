//! Unit tests of the `NegativeLogLikelihoodLoss` lowering against a direct computation of the
//! ONNX definition: every reduction, with and without class weights and an ignored target,
//! a spatial `[N, C, d]` input, and infinite inputs at classes other than the target.

use crate::onnx::{int_attr, node, run, str_attr, vi};
use ebb_runtime::{Data, Tensor};

/// `loss[n, d] = −x[n, t[n, d], d]·w[t[n, d]]` (0 and no weight where `t == ignore`), reduced
/// as ONNX says: `mean` divides by the sum of the applied weights.
fn nll_ref(
    x: &[f32],
    dims: (usize, usize, usize),
    t: &[i64],
    w: Option<&[f32]>,
    ignore: Option<i64>,
    reduction: &str,
) -> Vec<f64> {
    let (n, c, d) = dims;
    let (mut loss, mut wsum) = (Vec::new(), 0f64);
    for i in 0..n {
        for k in 0..d {
            let tt = t[i * d + k];
            if Some(tt) == ignore {
                loss.push(0.0);
                continue;
            }
            let wt = w.map_or(1.0, |w| w[tt as usize] as f64);
            wsum += wt;
            loss.push(-(x[(i * c + tt as usize) * d + k] as f64) * wt);
        }
    }
    match reduction {
        "none" => loss,
        "sum" => vec![loss.iter().sum()],
        _ => vec![loss.iter().sum::<f64>() / wsum],
    }
}

fn i64s(shape: Vec<usize>, v: Vec<i64>) -> Tensor {
    Tensor::new(shape, Data::I64(v.into())).unwrap()
}

fn close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-6 * w.abs().max(1.0),
            "{got:?} vs {want:?}"
        );
    }
}

/// Tests `none`, `sum` and `mean` on `[N, C]` scores with class weights and an ignored target
/// (the mean divides by the applied weights only), and without weights or ignore index.
#[test]
fn nll_loss_matches_the_definition_for_every_reduction() {
    let x: Vec<f32> = (0..12).map(|i| ((i * 5) % 7) as f32 * 0.5 - 1.5).collect();
    let t = vec![2i64, -100, 0, 3];
    let w = [0.5f32, 1.0, 2.0, 1.5];
    for reduction in ["none", "sum", "mean"] {
        for weighted in [false, true] {
            let ins = if weighted {
                &["x", "t", "w"][..]
            } else {
                &["x", "t"][..]
            };
            let mut inputs = vec![vi("x", 1, &["N", "3"]), vi("t", 7, &["N"])];
            if weighted {
                inputs.push(vi("w", 1, &["3"]));
            }
            // Only 3 classes: the target 3 of the last sample is out of range, kept out by
            // making it the ignore index here.
            let out_dims: &[&str] = if reduction == "none" { &["N"] } else { &[] };
            let mut tensors = vec![
                Tensor::from_f32(vec![4, 3], x.clone()).unwrap(),
                i64s(vec![4], t.clone()),
            ];
            if weighted {
                tensors.push(Tensor::from_f32(vec![3], w[..3].to_vec()).unwrap());
            }
            for ignore in [-100i64, 3] {
                let mut t2 = t.clone();
                t2[1] = ignore;
                t2[3] = if ignore == 3 { 3 } else { 1 };
                tensors[1] = i64s(vec![4], t2.clone());
                let out = run(
                    vec![node(
                        "NegativeLogLikelihoodLoss",
                        ins,
                        &["y"],
                        vec![
                            str_attr("reduction", reduction),
                            int_attr("ignore_index", ignore),
                        ],
                    )],
                    vec![],
                    inputs.clone(),
                    vec![vi("y", 1, out_dims)],
                    &[("N", 4)],
                    tensors.clone(),
                );
                let want = nll_ref(
                    &x,
                    (4, 3, 1),
                    &t2,
                    weighted.then_some(&w[..3]),
                    Some(ignore),
                    reduction,
                );
                close(&out[0].to_f64_vec(), &want);
            }
        }
    }
}

/// Tests a spatial input `[N, C, d]` (targets `[N, d]`) with the default `mean` and no
/// ignore index, and that `-inf` at classes other than the target (a log-softmax of a masked
/// logit) does not reach the loss.
#[test]
fn nll_loss_spatial_and_infinite_other_classes() {
    let (n, c, d) = (2usize, 3usize, 2usize);
    let mut x: Vec<f32> = (0..n * c * d).map(|i| -(i as f32) * 0.25).collect();
    let t = vec![1i64, 0, 2, 2];
    // Every non-target element of sample 0, position 0 is -inf.
    for k in 0..c {
        if k as i64 != t[0] {
            x[k * d] = f32::NEG_INFINITY;
        }
    }
    let out = run(
        vec![node(
            "NegativeLogLikelihoodLoss",
            &["x", "t"],
            &["y"],
            vec![],
        )],
        vec![],
        vec![vi("x", 1, &["N", "3", "2"]), vi("t", 7, &["N", "2"])],
        vec![vi("y", 1, &[])],
        &[("N", 2)],
        vec![
            Tensor::from_f32(vec![n, c, d], x.clone()).unwrap(),
            i64s(vec![n, d], t.clone()),
        ],
    );
    let got = out[0].to_f64_vec();
    assert!(got[0].is_finite());
    close(&got, &nll_ref(&x, (n, c, d), &t, None, None, "mean"));
}

/// Tests that malformed forms are import errors naming the op: a rank-1 input, a float
/// target, an unknown reduction.
#[test]
fn nll_loss_bad_forms_are_errors() {
    let cases: Vec<(Vec<ebb_import::onnx::proto::ValueInfoProto>, &str, &str)> = vec![
        (
            vec![vi("x", 1, &["4"]), vi("t", 7, &[])],
            "mean",
            "rank >= 2",
        ),
        (
            vec![vi("x", 1, &["4", "3"]), vi("t", 1, &["4"])],
            "mean",
            "integer",
        ),
        (
            vec![vi("x", 1, &["4", "3"]), vi("t", 7, &["4"])],
            "avg",
            "reduction",
        ),
    ];
    for (inputs, reduction, want) in cases {
        let m = crate::onnx::model(
            ebb_import::onnx::proto::GraphProto {
                node: vec![node(
                    "NegativeLogLikelihoodLoss",
                    &["x", "t"],
                    &["y"],
                    vec![str_attr("reduction", reduction)],
                )],
                input: inputs,
                output: vec![vi("y", 1, &[])],
                ..Default::default()
            },
            &[],
        );
        let e = ebb_import::onnx::import_bytes(&ebb_import::onnx::encode_model(&m), "t.onnx", None)
            .err()
            .map(|e| e.to_string())
            .expect("refused");
        assert!(
            e.contains("NegativeLogLikelihoodLoss") && e.contains(want),
            "{e}"
        );
    }
}
