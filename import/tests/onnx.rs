//! Unit tests of lowerings on small models built in Rust, executed by the CPU executor and
//! compared with values computed directly (ops the fixtures do not exercise: `Erf`, negative
//! `Gather` indices, `Trilu`, `OneHot`, symbolic `Reshape` chains, batched `MatMul`).

use ebb_import::onnx::proto::{
    tensor_shape_proto::{dimension::Value as D, Dimension},
    type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use ebb_import::onnx::{encode_model, import_bytes};
use ebb_ir::{Bindings, Symbol};
use ebb_runtime::{execute, program_schedule, Tensor};

pub(super) fn dim(d: &str) -> Dimension {
    Dimension {
        value: Some(match d.parse::<i64>() {
            Ok(k) => D::DimValue(k),
            Err(_) => D::DimParam(d.into()),
        }),
        denotation: None,
    }
}

pub(super) fn vi(name: &str, elem: i32, dims: &[&str]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto {
                    dim: dims.iter().map(|d| dim(d)).collect(),
                }),
            })),
            denotation: None,
        }),
        doc_string: None,
    }
}

pub(super) fn node(op: &str, ins: &[&str], outs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        op_type: Some(op.into()),
        attribute: attrs,
        ..Default::default()
    }
}

/// A `com.microsoft` node.
pub(super) fn ms_node(op: &str, ins: &[&str], outs: &[&str]) -> NodeProto {
    NodeProto {
        domain: Some("com.microsoft".into()),
        ..node(op, ins, outs, vec![])
    }
}

pub(super) fn str_attr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(3),
        s: Some(v.as_bytes().to_vec()),
        ..Default::default()
    }
}

pub(super) fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(2),
        i: Some(v),
        ..Default::default()
    }
}

pub(super) fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(7),
        ints: v.to_vec(),
        ..Default::default()
    }
}

pub(super) fn i64_init(name: &str, dims: &[i64], v: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(7),
        int64_data: v.to_vec(),
        ..Default::default()
    }
}

/// Imports a one-graph model and runs it at `b` on `ins`.
/// A model of one graph importing opset 18 of ai.onnx and version 1 of each `extra` domain.
pub(super) fn model(graph: GraphProto, extra: &[&str]) -> ModelProto {
    let mut opset_import = vec![OperatorSetIdProto {
        domain: Some(String::new()),
        version: Some(18),
    }];
    opset_import.extend(extra.iter().map(|d| OperatorSetIdProto {
        domain: Some(d.to_string()),
        version: Some(1),
    }));
    ModelProto {
        ir_version: Some(10),
        opset_import,
        graph: Some(graph),
        ..Default::default()
    }
}

pub(super) fn run(
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    b: &[(&str, i64)],
    ins: Vec<Tensor>,
) -> Vec<Tensor> {
    let m = model(
        GraphProto {
            node: nodes,
            initializer: inits,
            input: inputs,
            output: outputs,
            ..Default::default()
        },
        &["com.microsoft"],
    );
    let (g, stats) = import_bytes(&encode_model(&m), "t.onnx", None).unwrap();
    assert_eq!(stats.unresolved_dims, 0);
    let b: Bindings = b.iter().map(|(k, v)| (Symbol::new(k), *v)).collect();
    execute(&g, &program_schedule(&g), &b, ins).unwrap().0
}

/// erf by its Maclaurin series in f64 (|x| <= 4; error below 1e-8 there).
fn erf_ref(x: f64) -> f64 {
    if x.abs() > 4.0 {
        return x.signum();
    }
    let (mut sum, mut term, mut n) = (0.0, x, 0.0f64);
    while term.abs() > 1e-18 || n < 10.0 {
        sum += term / (2.0 * n + 1.0);
        n += 1.0;
        term *= -x * x / n;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn erf_matches_the_series_to_f32_precision() {
    let xs: Vec<f32> = (-60..=60).map(|i| i as f32 * 0.1).collect();
    let n = xs.len();
    let out = run(
        vec![node("Erf", &["x"], &["y"], vec![])],
        vec![],
        vec![vi("x", 1, &[&n.to_string()])],
        vec![vi("y", 1, &[&n.to_string()])],
        &[],
        vec![Tensor::from_f32(vec![n], xs.clone()).unwrap()],
    );
    for (x, y) in xs.iter().zip(out[0].to_f64_vec()) {
        let want = erf_ref(*x as f64);
        assert!((y - want).abs() <= 4e-7, "erf({x}) = {y}, want {want}");
    }
}

#[test]
fn shape_chain_reshape_and_negative_gather() {
    // h = Reshape(x, Concat(Gather(Shape(x), 0), [-1])) : [batch, 6] from [batch, 2, 3];
    // z = Gather(h, [-1, 0], axis 1).
    let out = run(
        vec![
            node("Shape", &["x"], &["s"], vec![]),
            node("Gather", &["s", "zero"], &["b"], vec![int_attr("axis", 0)]),
            node(
                "Concat",
                &["b", "minus1"],
                &["shape"],
                vec![int_attr("axis", 0)],
            ),
            node("Reshape", &["x", "shape"], &["h"], vec![]),
            node("Gather", &["h", "idx"], &["z"], vec![int_attr("axis", 1)]),
        ],
        vec![
            i64_init("zero", &[1], &[0]),
            i64_init("minus1", &[1], &[-1]),
            i64_init("idx", &[2], &[-1, 0]),
        ],
        vec![vi("x", 1, &["batch", "2", "3"])],
        vec![vi("h", 1, &["batch", "6"]), vi("z", 1, &["batch", "2"])],
        &[("batch", 2)],
        vec![Tensor::from_f32(vec![2, 2, 3], (0..12).map(|i| i as f32).collect()).unwrap()],
    );
    assert_eq!(out[0].shape(), &[2, 6]);
    assert_eq!(out[1].to_f64_vec(), [5.0, 0.0, 11.0, 6.0]);
}

#[test]
fn trilu_onehot_and_batched_matmul() {
    let out = run(
        vec![
            node("Trilu", &["m"], &["u"], vec![int_attr("upper", 1)]),
            node("OneHot", &["lab", "depth", "vals"], &["oh"], vec![]),
            node("MatMul", &["a", "m"], &["p"], vec![]),
        ],
        vec![
            i64_init("depth", &[], &[3]),
            TensorProto {
                name: Some("vals".into()),
                dims: vec![2],
                data_type: Some(1),
                float_data: vec![0.0, 5.0],
                ..Default::default()
            },
        ],
        vec![
            vi("m", 1, &["3", "3"]),
            vi("lab", 7, &["batch"]),
            vi("a", 1, &["batch", "2", "3"]),
        ],
        vec![
            vi("u", 1, &["3", "3"]),
            vi("oh", 1, &["batch", "3"]),
            vi("p", 1, &["batch", "2", "3"]),
        ],
        &[("batch", 2)],
        vec![
            Tensor::from_f32(vec![3, 3], (1..=9).map(|i| i as f32).collect()).unwrap(),
            Tensor::new(vec![2], ebb_runtime::Data::I64(vec![2, -1].into())).unwrap(),
            Tensor::from_f32(
                vec![2, 2, 3],
                vec![1., 0., 0., 0., 1., 0., 0., 0., 1., 1., 1., 1.],
            )
            .unwrap(),
        ],
    );
    assert_eq!(out[0].to_f64_vec(), [1., 2., 3., 0., 5., 6., 0., 0., 9.]);
    assert_eq!(out[1].to_f64_vec(), [0., 0., 5., 0., 0., 5.]);
    assert_eq!(
        out[2].to_f64_vec(),
        [1., 2., 3., 4., 5., 6., 7., 8., 9., 12., 15., 18.]
    );
}

/// `F.cross_entropy`'s pattern (torch.onnx, dynamo): log-probabilities picked per row with
/// `GatherElements` on axis 1, negative targets wrapped; its gradient scatters back with
/// `ScatterElements` (`none` and `add`).
#[test]
fn gather_elements_and_scatter_elements_pick_and_place_per_row() {
    let i64s = |shape: Vec<usize>, v: Vec<i64>| {
        Tensor::new(shape, ebb_runtime::Data::I64(v.into())).unwrap()
    };
    let out = run(
        vec![
            node(
                "GatherElements",
                &["x", "t"],
                &["g"],
                vec![int_attr("axis", 1)],
            ),
            node(
                "ScatterElements",
                &["z", "t", "u"],
                &["s"],
                vec![int_attr("axis", 1)],
            ),
            node(
                "ScatterElements",
                &["x", "t2", "u2"],
                &["sa"],
                vec![int_attr("axis", 0), str_attr("reduction", "add")],
            ),
        ],
        vec![],
        vec![
            vi("x", 1, &["batch", "3"]),
            vi("t", 7, &["batch", "1"]),
            vi("z", 1, &["batch", "3"]),
            vi("u", 1, &["batch", "1"]),
            vi("t2", 7, &["2", "3"]),
            vi("u2", 1, &["2", "3"]),
        ],
        vec![
            vi("g", 1, &["batch", "1"]),
            vi("s", 1, &["batch", "3"]),
            vi("sa", 1, &["batch", "3"]),
        ],
        &[("batch", 2)],
        vec![
            Tensor::from_f32(vec![2, 3], vec![1., 2., 3., 4., 5., 6.]).unwrap(),
            i64s(vec![2, 1], vec![2, -3]),
            Tensor::from_f32(vec![2, 3], vec![0.; 6]).unwrap(),
            Tensor::from_f32(vec![2, 1], vec![7., 8.]).unwrap(),
            i64s(vec![2, 3], vec![1, 1, 0, 1, 0, 0]),
            Tensor::from_f32(vec![2, 3], vec![10., 20., 30., 40., 50., 60.]).unwrap(),
        ],
    );
    assert_eq!(out[0].to_f64_vec(), [3., 4.]);
    assert_eq!(out[1].to_f64_vec(), [0., 0., 7., 8., 0., 0.]);
    // Column j of x gets u2[i][j] added at row t2[i][j].
    assert_eq!(
        out[2].to_f64_vec(),
        [1., 2. + 50., 3. + 30. + 60., 4. + 10. + 40., 5. + 20., 6.]
    );
}

/// ONNX Runtime training's gradients of `Tanh` and `Sigmoid` from the forward output `Y`.
#[test]
fn tanh_and_sigmoid_grads_follow_the_forward_output() {
    let y = vec![-0.5f32, 0.0, 0.25, 0.9];
    let dy = vec![1.0f32, 2.0, -3.0, 0.5];
    let out = run(
        vec![
            ms_node("TanhGrad", &["dy", "y"], &["dt"]),
            ms_node("SigmoidGrad", &["dy", "y"], &["ds"]),
        ],
        vec![],
        vec![vi("dy", 1, &["n"]), vi("y", 1, &["n"])],
        vec![vi("dt", 1, &["n"]), vi("ds", 1, &["n"])],
        &[("n", 4)],
        vec![
            Tensor::from_f32(vec![4], dy.clone()).unwrap(),
            Tensor::from_f32(vec![4], y.clone()).unwrap(),
        ],
    );
    for k in 0..4 {
        let (d, v) = (dy[k], y[k]);
        assert_eq!(out[0].to_f64_vec()[k], (d * (1.0 - v * v)) as f64);
        assert_eq!(out[1].to_f64_vec()[k], (d * v * (1.0 - v)) as f64);
    }
}

/// ORT's `ReduceSumTraining` (axes as an input, keepdims) sums as `ReduceSum` does.
#[test]
fn reduce_sum_training_sums_over_its_axes_input() {
    let mut node = ms_node("ReduceSumTraining", &["x", "ax"], &["s"]);
    node.attribute.push(int_attr("keepdims", 0));
    let out = run(
        vec![node],
        vec![i64_init("ax", &[1], &[0])],
        vec![vi("x", 1, &["n", "2"])],
        vec![vi("s", 1, &["2"])],
        &[("n", 3)],
        vec![Tensor::from_f32(vec![3, 2], vec![1., 2., 3., 4., 5., 6.]).unwrap()],
    );
    assert_eq!(out[0].to_f64_vec(), [9., 12.]);
}

/// Imports a one-graph model; the error text when the import fails.
fn import_err(
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
) -> Option<String> {
    let m = ModelProto {
        ir_version: Some(10),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(18),
        }],
        graph: Some(GraphProto {
            node: nodes,
            initializer: inits,
            input: inputs,
            output: outputs,
            ..Default::default()
        }),
        ..Default::default()
    };
    import_bytes(&encode_model(&m), "t.onnx", None)
        .err()
        .map(|e| e.to_string())
}

#[test]
fn shapes_from_data_that_overflow_are_errors_not_panics() {
    let big = 1i64 << 40;
    // Reshape of f32[B,4] to [2^40, 2^40, -1]: the product of the target overflows.
    let e = import_err(
        vec![node("Reshape", &["x", "s"], &["y"], vec![])],
        vec![i64_init("s", &[3], &[big, big, -1])],
        vec![vi("x", 1, &["B", "4"])],
        vec![vi("y", 1, &[])],
    )
    .expect("accepted");
    assert!(e.contains("overflows 64-bit integers"), "{e}");
    // Expand to a huge static shape: the result's size overflows.
    let e = import_err(
        vec![node("Expand", &["x", "s"], &["y"], vec![])],
        vec![i64_init("s", &[2], &[big, big])],
        vec![vi("x", 1, &["1", "1"])],
        vec![vi("y", 1, &[])],
    )
    .expect("accepted");
    assert!(e.contains("overflows 64-bit integers"), "{e}");
    // Range with a delta whose negation overflows: an error or an empty range, no panic.
    let _ = import_err(
        vec![node("Range", &["a", "b", "d"], &["y"], vec![])],
        vec![
            i64_init("a", &[], &[0]),
            i64_init("b", &[], &[i64::MAX]),
            i64_init("d", &[], &[i64::MIN]),
        ],
        vec![],
        vec![vi("y", 7, &[])],
    );
}

/// `SoftmaxCrossEntropyLoss` with labels whose rank is not one less than the scores': an
/// error naming both types (found by the `onnx_proto` fuzz target: a scalar label panicked).
#[test]
fn cross_entropy_labels_of_the_wrong_rank_are_an_error() {
    for labels in [&[][..], &["N", "2"][..]] {
        let e = import_err(
            vec![node("SoftmaxCrossEntropyLoss", &["x", "l"], &["y"], vec![])],
            vec![],
            vec![vi("x", 1, &["N", "4"]), vi("l", 7, labels)],
            vec![vi("y", 1, &[])],
        )
        .expect("accepted");
        assert!(e.contains("labels [N, d..]"), "{e}");
    }
}
