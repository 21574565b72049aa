//! Unit tests of `If`: branches reading enclosing tensors (captured as `case` operands) and
//! their own initializers, both branches taken at run time, and a condition known at import
//! time imported inline; `Loop` with captures, scan outputs and a run-time trip count; `Scan`
//! in both directions;
//! model-local functions expanded with their attribute references.

use crate::onnx::{node, vi};
use ebb_import::onnx::proto::{AttributeProto, GraphProto, NodeProto, TensorProto};
use ebb_import::onnx::{encode_model, import_bytes};
use ebb_ir::{Bindings, OpKind};
use ebb_runtime::{execute, program_schedule, Data, Tensor};

fn graph_attr(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(5),
        g: Some(g),
        ..Default::default()
    }
}

fn model(cond: Option<bool>) -> Vec<u8> {
    // then: x + y (both enclosing); else: x * x + 2 (an initializer of the branch).
    let then_g = GraphProto {
        node: vec![node("Add", &["x", "y"], &["t_out"], vec![])],
        output: vec![vi("t_out", 1, &["n"])],
        ..Default::default()
    };
    let else_g = GraphProto {
        node: vec![
            node("Mul", &["x", "x"], &["sq"], vec![]),
            node("Add", &["sq", "two"], &["e_out"], vec![]),
        ],
        initializer: vec![TensorProto {
            name: Some("two".into()),
            dims: vec![],
            data_type: Some(1),
            float_data: vec![2.0],
            ..Default::default()
        }],
        output: vec![vi("e_out", 1, &["n"])],
        ..Default::default()
    };
    let mut nodes = Vec::new();
    let mut inputs = vec![vi("x", 1, &["n"]), vi("y", 1, &["n"])];
    match cond {
        Some(c) => nodes.push(NodeProto {
            attribute: vec![AttributeProto {
                name: Some("value".into()),
                r#type: Some(4),
                t: Some(TensorProto {
                    dims: vec![],
                    data_type: Some(9),
                    int32_data: vec![i32::from(c)],
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..node("Constant", &[], &["c"], vec![])
        }),
        None => inputs.push(vi("c", 9, &[])),
    }
    nodes.push(NodeProto {
        attribute: vec![
            graph_attr("then_branch", then_g),
            graph_attr("else_branch", else_g),
        ],
        ..node("If", &["c"], &["out"], vec![])
    });
    let m = crate::onnx::model(
        GraphProto {
            node: nodes,
            input: inputs,
            output: vec![vi("out", 1, &["n"])],
            ..Default::default()
        },
        &[],
    );
    encode_model(&m)
}

fn run(bytes: &[u8], extra: Option<bool>) -> (Vec<f32>, bool) {
    let (g, stats) = import_bytes(bytes, "if.onnx", None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stats.unresolved_dims, 0);
    let has_case = g
        .order()
        .iter()
        .any(|&id| g.node(id).kind() == OpKind::Case);
    let b: Bindings = [(ebb_ir::Symbol::new("n"), 3)].into_iter().collect();
    let mut ins = vec![
        Tensor::from_f32(vec![3], vec![1.0, 2.0, 3.0]).unwrap(),
        Tensor::from_f32(vec![3], vec![10.0, 20.0, 30.0]).unwrap(),
    ];
    if let Some(c) = extra {
        ins.push(Tensor::new(vec![], Data::I1(vec![c].into())).unwrap());
    }
    let out = execute(&g, &program_schedule(&g), &b, ins).unwrap().0;
    (out[0].as_f32().unwrap().to_vec(), has_case)
}

#[test]
fn if_runs_the_taken_branch_with_captured_tensors() {
    let bytes = model(None);
    assert_eq!(run(&bytes, Some(true)), (vec![11.0, 22.0, 33.0], true));
    assert_eq!(run(&bytes, Some(false)), (vec![3.0, 6.0, 11.0], true));
}

#[test]
fn if_with_a_known_condition_is_imported_inline() {
    assert_eq!(
        run(&model(Some(true)), None),
        (vec![11.0, 22.0, 33.0], false)
    );
    assert_eq!(
        run(&model(Some(false)), None),
        (vec![3.0, 6.0, 11.0], false)
    );
}

/// A model-local function `SoftAdd(a, b) = Softmax(a + b, axis = @ax)` called twice, once
/// with `ax` given and once with its default, expands in place.
#[test]
fn local_functions_expand_with_their_attributes() {
    use ebb_import::onnx::proto::FunctionProto;
    let int_attr = crate::onnx::int_attr;
    let f = FunctionProto {
        name: Some("SoftAdd".into()),
        domain: Some("local".into()),
        input: vec!["a".into(), "b".into()],
        output: vec!["y".into()],
        attribute_proto: vec![int_attr("ax", 0)],
        node: vec![
            node("Add", &["a", "b"], &["s"], vec![]),
            NodeProto {
                attribute: vec![AttributeProto {
                    name: Some("axis".into()),
                    r#type: Some(2),
                    ref_attr_name: Some("ax".into()),
                    ..Default::default()
                }],
                ..node("Softmax", &["s"], &["y"], vec![])
            },
        ],
        ..Default::default()
    };
    let call = |out: &str, attrs: Vec<AttributeProto>| NodeProto {
        domain: Some("local".into()),
        attribute: attrs,
        ..node("SoftAdd", &["x", "x"], &[out], vec![])
    };
    let m = ebb_import::onnx::proto::ModelProto {
        functions: vec![f],
        ..crate::onnx::model(
            GraphProto {
                node: vec![call("p", vec![int_attr("ax", 1)]), call("q", vec![])],
                input: vec![vi("x", 1, &["2", "2"])],
                output: vec![vi("p", 1, &["2", "2"]), vi("q", 1, &["2", "2"])],
                ..Default::default()
            },
            &["local"],
        )
    };
    let (g, _) = import_bytes(&encode_model(&m), "f.onnx", None).unwrap_or_else(|e| panic!("{e}"));
    let x = Tensor::from_f32(vec![2, 2], vec![0.0, 1.0, 2.0, 0.5]).unwrap();
    let out = execute(&g, &program_schedule(&g), &Bindings::new(), vec![x])
        .unwrap()
        .0;
    let sm = |v: &[f32]| {
        let e: Vec<f32> = v.iter().map(|x| (2.0 * x).exp()).collect();
        let s: f32 = e.iter().sum();
        e.into_iter().map(|x| x / s).collect::<Vec<f32>>()
    };
    // axis 1: rows [0, 1], [2, 0.5]; axis 0 (the default): columns [0, 2], [1, 0.5].
    let rows = [sm(&[0.0, 1.0]), sm(&[2.0, 0.5])].concat();
    let (c0, c1) = (sm(&[0.0, 2.0]), sm(&[1.0, 0.5]));
    let cols = vec![c0[0], c1[0], c0[1], c1[1]];
    for (got, want) in [(&out[0], rows), (&out[1], cols)] {
        for (a, b) in got.as_f32().unwrap().iter().zip(&want) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
    }
}

/// `Loop` with a trip count known at import time: `acc += x·i` for `i` in `0..4`, `x`
/// captured, the running `acc` stacked as a scan output; and with the trip count a graph input
/// (no scan output).
#[test]
fn loop_carries_values_captures_and_stacks_scan_outputs() {
    let body = GraphProto {
        node: vec![
            node(
                "Cast",
                &["i"],
                &["fi"],
                vec![crate::onnx::int_attr("to", 1)],
            ),
            node("Mul", &["x", "fi"], &["xi"], vec![]),
            node("Add", &["acc", "xi"], &["acc_out"], vec![]),
            node("Identity", &["cond"], &["cond_out"], vec![]),
            node("Identity", &["acc_out"], &["row"], vec![]),
        ],
        input: vec![vi("i", 7, &[]), vi("cond", 9, &[]), vi("acc", 1, &["2"])],
        output: vec![
            vi("cond_out", 9, &[]),
            vi("acc_out", 1, &["2"]),
            vi("row", 1, &["2"]),
        ],
        ..Default::default()
    };
    let short = GraphProto {
        output: vec![vi("cond_out", 9, &[]), vi("acc_out", 1, &["2"])],
        ..body.clone()
    };
    let looped = |g: GraphProto, trip: &str, outs: &[&str]| NodeProto {
        attribute: vec![graph_attr("body", g)],
        ..node("Loop", &[trip, "", "acc0"], outs, vec![])
    };
    let m = crate::onnx::model(
        GraphProto {
            node: vec![
                looped(body, "four", &["acc", "rows"]),
                looped(short, "trips", &["acc2"]),
            ],
            initializer: vec![crate::onnx::i64_init("four", &[], &[4])],
            input: vec![
                vi("x", 1, &["2"]),
                vi("acc0", 1, &["2"]),
                vi("trips", 7, &[]),
            ],
            output: vec![
                vi("acc", 1, &["2"]),
                vi("rows", 1, &["4", "2"]),
                vi("acc2", 1, &["2"]),
            ],
            ..Default::default()
        },
        &[],
    );
    let (g, _) =
        import_bytes(&encode_model(&m), "loop.onnx", None).unwrap_or_else(|e| panic!("{e}"));
    let ins = vec![
        Tensor::from_f32(vec![2], vec![1.0, -2.0]).unwrap(),
        Tensor::from_f32(vec![2], vec![0.5, 0.5]).unwrap(),
        Tensor::new(vec![], Data::I64(vec![3].into())).unwrap(),
    ];
    let out = execute(&g, &program_schedule(&g), &Bindings::new(), ins)
        .unwrap()
        .0;
    // acc after i = 0..3: 0.5 + x·(0+1+2+3) = 0.5 + 6x; rows are the running sums.
    assert_eq!(out[0].as_f32().unwrap(), [6.5, -11.5]);
    assert_eq!(
        out[1].as_f32().unwrap(),
        [0.5, 0.5, 1.5, -1.5, 3.5, -5.5, 6.5, -11.5]
    );
    // Three trips from the graph input: 0.5 + 3x.
    assert_eq!(out[2].as_f32().unwrap(), [3.5, -5.5]);
}

/// `Scan` over rows of a `[t, 2]` input with a symbolic `t`: a running sum as the state and
/// twice it as the scan output, forwards and with the input reversed (direction 1), with a
/// captured tensor.
#[test]
fn scan_runs_over_rows_in_both_directions() {
    let body = GraphProto {
        node: vec![
            node("Add", &["s", "row"], &["s_out"], vec![]),
            node("Mul", &["s_out", "k"], &["y"], vec![]),
        ],
        input: vec![vi("s", 1, &["2"]), vi("row", 1, &["2"])],
        output: vec![vi("s_out", 1, &["2"]), vi("y", 1, &["2"])],
        ..Default::default()
    };
    let scan = |out: [&str; 2], reverse: bool| NodeProto {
        attribute: {
            let mut a = vec![
                graph_attr("body", body.clone()),
                crate::onnx::int_attr("num_scan_inputs", 1),
            ];
            if reverse {
                a.push(AttributeProto {
                    name: Some("scan_input_directions".into()),
                    r#type: Some(7),
                    ints: vec![1],
                    ..Default::default()
                });
            }
            a
        },
        ..node("Scan", &["s0", "xs"], &out, vec![])
    };
    let m = crate::onnx::model(
        GraphProto {
            node: vec![scan(["f", "fy"], false), scan(["r", "ry"], true)],
            input: vec![
                vi("s0", 1, &["2"]),
                vi("xs", 1, &["t", "2"]),
                vi("k", 1, &["2"]),
            ],
            output: vec![
                vi("f", 1, &["2"]),
                vi("fy", 1, &["t", "2"]),
                vi("r", 1, &["2"]),
                vi("ry", 1, &["t", "2"]),
            ],
            ..Default::default()
        },
        &[],
    );
    let (g, stats) =
        import_bytes(&encode_model(&m), "scan.onnx", None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stats.unresolved_dims, 0);
    let b: Bindings = [(ebb_ir::Symbol::new("t"), 3)].into_iter().collect();
    let ins = vec![
        Tensor::from_f32(vec![2], vec![0.0, 10.0]).unwrap(),
        Tensor::from_f32(vec![3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap(),
        Tensor::from_f32(vec![2], vec![2.0, 2.0]).unwrap(),
    ];
    let out = execute(&g, &program_schedule(&g), &b, ins).unwrap().0;
    assert_eq!(out[0].as_f32().unwrap(), [9.0, 22.0]);
    assert_eq!(out[1].as_f32().unwrap(), [2.0, 24.0, 8.0, 32.0, 18.0, 44.0]);
    assert_eq!(out[2].as_f32().unwrap(), [9.0, 22.0]);
    // Reversed: rows 5,6 then 3,4 then 1,2.
    assert_eq!(
        out[3].as_f32().unwrap(),
        [10.0, 32.0, 16.0, 40.0, 18.0, 44.0]
    );
}
