//! Unit tests of the random lowerings (`Dropout` in training mode, `DropoutGrad`,
//! `RandomUniformLike`, `RandomNormalLike`, `Bernoulli`): the values are Ebb's own random
//! numbers, so the tests check their distribution, the dropout algebra, the `ebb.rng_seed`
//! input and determinism.

use crate::onnx::{ms_node, node, run, vi};
use ebb_import::onnx::proto::{NodeProto, TensorProto};
use ebb_runtime::{Data, Tensor};

fn f32_init(name: &str, v: f32) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: vec![],
        data_type: Some(1),
        float_data: vec![v],
        ..Default::default()
    }
}

fn bool_init(name: &str, v: bool) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: vec![],
        data_type: Some(9),
        int32_data: vec![i32::from(v)],
        ..Default::default()
    }
}

fn seed(v: u64) -> Tensor {
    Tensor::new(vec![], Data::U64(vec![v].into())).unwrap()
}

const N: usize = 100_000;

/// Dropout(x, 0.25, training) and DropoutGrad(dy, mask) at `seed`: (y, mask, dx).
fn dropout(s: u64) -> Vec<Tensor> {
    let x: Vec<f32> = (0..N).map(|i| 1.0 + (i % 7) as f32).collect();
    let nodes: Vec<NodeProto> = vec![
        node("Dropout", &["x", "r", "t"], &["y", "m"], vec![]),
        ms_node("DropoutGrad", &["x", "m", "r", "t"], &["dx"]),
    ];
    let n = N.to_string();
    run(
        nodes,
        vec![f32_init("r", 0.25), bool_init("t", true)],
        vec![vi("x", 1, &[&n])],
        vec![vi("y", 1, &[&n]), vi("m", 9, &[&n]), vi("dx", 1, &[&n])],
        &[],
        vec![Tensor::from_f32(vec![N], x).unwrap(), seed(s)],
    )
}

#[test]
fn training_dropout_keeps_three_quarters_and_its_grad_uses_the_same_mask() {
    let out = dropout(7);
    let (y, dx) = (out[0].as_f32().unwrap(), out[2].as_f32().unwrap());
    let Data::I1(m) = out[1].data() else {
        panic!("mask type")
    };
    let kept = m.iter().filter(|&&k| k).count() as f64 / N as f64;
    assert!((kept - 0.75).abs() < 0.01, "kept {kept}");
    for i in 0..N {
        let x = 1.0 + (i % 7) as f32;
        let want = if m[i] { x / 0.75 } else { 0.0 };
        assert!((y[i] - want).abs() <= 1e-6 * want.abs(), "y[{i}]");
        assert_eq!(
            dx[i], y[i],
            "dx[{i}]: DropoutGrad(x, mask) is the forward itself"
        );
    }
    // A pure function of the seed: the same seed gives the same bits, another seed others.
    assert!(dropout(7)[0].bits_eq(&out[0]));
    assert!(!dropout(8)[0].bits_eq(&out[0]));
}

#[test]
fn uniform_normal_and_bernoulli_have_their_distributions() {
    let n = N.to_string();
    let out = run(
        vec![
            node("RandomUniformLike", &["x"], &["u"], vec![]),
            node("RandomNormalLike", &["x"], &["z"], vec![]),
            node("Bernoulli", &["p"], &["b"], vec![]),
        ],
        vec![],
        vec![vi("x", 1, &[&n]), vi("p", 1, &[&n])],
        vec![vi("u", 1, &[&n]), vi("z", 1, &[&n]), vi("b", 1, &[&n])],
        &[],
        vec![
            Tensor::from_f32(vec![N], vec![0.0; N]).unwrap(),
            Tensor::from_f32(vec![N], vec![0.3; N]).unwrap(),
            seed(1),
        ],
    );
    let stats = |t: &Tensor| {
        let v = t.to_f64_vec();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
        (mean, var, v)
    };
    let (mu, var, u) = stats(&out[0]);
    assert!(u.iter().all(|&x| (0.0..1.0).contains(&x)));
    assert!(
        (mu - 0.5).abs() < 0.01 && (var - 1.0 / 12.0).abs() < 0.005,
        "{mu} {var}"
    );
    let (mz, vz, _) = stats(&out[1]);
    assert!(mz.abs() < 0.02 && (vz - 1.0).abs() < 0.03, "{mz} {vz}");
    let (mb, _, b) = stats(&out[2]);
    assert!(b.iter().all(|&x| x == 0.0 || x == 1.0));
    assert!((mb - 0.3).abs() < 0.01, "{mb}");
}
