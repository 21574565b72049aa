//! ONNX front end on the real fixtures (`tests/fixtures/onnx`, exported by
//! `examples/export/onnx/export_onnx.py`): every model imports with all dimensions named,
//! verifies, compiles, and finalizes at half its program-order peak with the plan proven by the
//! independent checker; the imported IR of one small model per producer is snapshotted; and
//! malformed models (truncated bytes, an unknown op, a `dim_param` contradicting inference)
//! give typed errors that name the problem.

use ebb_import::onnx::{
    decode_model, encode_model, import_bytes, import_file, import_file_with, OnnxError,
};
use ebb_ir::Bindings;
use ebb_passes::plan::check::check;
use ebb_pipeline::{compile, CompileOptions};
use ebb_plan::finalize::{finalize, FinalizeError, FinalizeOptions};
use ebb_testkit::{onnx_fixture as fixture, onnx_fixture_names as names};
use onnx_common::options;

use crate::onnx_common;

/// A training-sized shape for the planning test: `batch = 1024`, `seq = 256` (activations
/// dominate there; at the reference shapes of the numerics tests, parameters and optimizer
/// state alone exceed half the peak).
fn planning_bindings(g: &ebb_ir::Graph) -> Bindings {
    g.scope
        .symbols()
        .into_iter()
        .map(|s| {
            let v = if s.name() == "seq" { 256 } else { 1024 };
            (s, v)
        })
        .collect()
}

#[test]
fn every_fixture_imports_compiles_and_finalizes_under_half_its_peak_or_the_smallest_feasible_budget(
) {
    let names = names();
    assert!(names.len() >= 8, "fixtures: {names:?}");
    let mut met_half = Vec::new();
    for name in names {
        let (g, stats) = import_file_with(&fixture(&name), &options(&name))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(stats.unresolved_dims, 0, "{name}: {:?}", stats.warnings);
        ebb_ir::verify::verify(&g).unwrap();
        let c = compile(g, &CompileOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let b = planning_bindings(&c.graph);
        let po =
            ebb_passes::memory::liveness(&c.graph, &ebb_passes::memory::program_order(&c.graph))
                .peak(&b)
                .unwrap()
                .0;
        // Half the peak is not always reachable: an optimizer model holds nothing but its
        // inputs (always resident), and an MLP's backward needs its few large activations at
        // once. finalize may call half the peak infeasible only where the memory lower bound
        // proves it so; it must then report the smallest feasible budget, which must be met.
        let lb = ebb_passes::memory::lower_bound(&c.graph, &b).unwrap();
        let mut budget = po / 2;
        let opts = FinalizeOptions {
            budget: Some(budget),
            ..Default::default()
        };
        if let Err(e) = finalize(&c.plan, &b, &opts) {
            match e {
                FinalizeError::Infeasible { smallest, .. } => {
                    assert!(
                        lb > budget,
                        "{name}: infeasible, yet lower bound {lb} <= {budget}"
                    );
                    assert!(smallest >= lb && smallest <= po, "{name}");
                    budget = smallest;
                }
                e => panic!("{name}: {e}"),
            }
        } else {
            met_half.push(name.clone());
        }
        let opts = FinalizeOptions {
            budget: Some(budget),
            ..Default::default()
        };
        let cp = finalize(&c.plan, &b, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(cp.peak_bytes_planned <= budget, "{name}");
        eprintln!(
            "{name}: program-order peak {po} B, lower bound {lb} B, budget {budget} B, planned {} B, {} decisions",
            cp.peak_bytes_planned,
            cp.decisions.len()
        );
        let report = check(
            &c.graph,
            c.plan.variant(cp.variant).unwrap(),
            &cp.decisions,
            &b,
        )
        .unwrap_or_else(|e| panic!("{name}: checker: {e}"));
        assert_eq!(report.peak, cp.peak_bytes_planned, "{name}");
    }
    // The transformer training steps (torch SGD/AdamW, ORT) meet half their peak.
    for n in [
        "ort_gpt2_tiny_training",
        "torch_gpt2_tiny_adam",
        "torch_gpt2_tiny_sgd",
        "torch_gpt2_tiny_ce_adam",
    ] {
        assert!(met_half.iter().any(|m| m == n), "{n}: {met_half:?}");
    }
}

#[test]
fn torch_gpt2_names_its_symbols_from_dim_params() {
    let (g, stats) = import_file(&fixture("torch_gpt2_tiny_adam")).unwrap();
    let syms: Vec<String> = g
        .scope
        .symbols()
        .iter()
        .map(|s| s.name().to_string())
        .collect();
    assert_eq!(syms, ["batch", "seq"]);
    assert!(stats.nested_graphs.is_empty());
    assert_eq!(stats.source_ops["ai.onnx::LayerNormalization"], 5);
}

#[test]
fn torch_mlp_imported_ir() {
    let (g, _) = import_file(&fixture("torch_mlp_sgd")).unwrap();
    insta::assert_snapshot!(ebb_ir::text::print(&g));
}

#[test]
fn ort_mlp_imported_ir() {
    let (g, _) = import_file(&fixture("ort_mlp_training")).unwrap();
    insta::assert_snapshot!(ebb_ir::text::print(&g));
}

#[test]
fn sequence_inputs_without_element_types_are_an_error() {
    let e = import_file(&fixture("ort_mlp_optimizer")).unwrap_err();
    assert!(
        e.to_string()
            .contains("graph input `params` is a tensor sequence whose element types"),
        "{e}"
    );
}

#[test]
fn truncated_file_is_a_decode_error() {
    let bytes = std::fs::read(fixture("torch_mlp_sgd")).unwrap();
    let cut = &bytes[..bytes.len() / 2];
    let e = import_bytes(cut, "cut.onnx", None).unwrap_err();
    assert!(matches!(e, OnnxError::Decode { .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with("cut.onnx: not a valid ONNX model"),
        "{e}"
    );
}

#[test]
fn unknown_op_names_op_domain_and_node() {
    let bytes = std::fs::read(fixture("torch_mlp_sgd")).unwrap();
    let mut m = decode_model(&bytes, "m").unwrap();
    let g = m.graph.as_mut().unwrap();
    let k = g
        .node
        .iter()
        .position(|n| n.op_type.as_deref() == Some("Relu"))
        .unwrap();
    g.node[k].op_type = Some("Frobnicate".into());
    g.node[k].domain = Some("com.example".into());
    g.node[k].name = Some("the_node".into());
    let e = import_bytes(&encode_model(&m), "m.onnx", None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "m.onnx: unsupported op `Frobnicate` (domain `com.example`, opset 0) at node `the_node`"
    );
    // Triage lists it (and every other unsupported node) without importing.
    let dir = std::env::temp_dir().join(format!("ebb-unsupported-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.onnx");
    std::fs::write(&path, encode_model(&m)).unwrap();
    let missing = ebb_import::onnx::unsupported_ops(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(missing[0].op, "com.example::Frobnicate");
    assert_eq!(
        (missing[0].count, missing[0].first.as_str()),
        (1, "the_node")
    );
    assert!(ebb_import::onnx::unsupported_ops(&fixture("torch_mlp_sgd"))
        .unwrap()
        .is_empty());
}

#[test]
fn dim_param_contradicting_inference_names_value_and_both_shapes() {
    let bytes = std::fs::read(fixture("torch_mlp_sgd")).unwrap();
    let mut m = decode_model(&bytes, "m").unwrap();
    let g = m.graph.as_mut().unwrap();
    // Declare the first MatMul's result as [4*batch, 256] instead of [batch, 256].
    let mm = g
        .node
        .iter()
        .find(|n| n.op_type.as_deref() == Some("MatMul"))
        .unwrap()
        .output[0]
        .clone();
    let vi = g
        .value_info
        .iter_mut()
        .find(|v| v.name.as_deref() == Some(mm.as_str()))
        .expect("value_info of the first MatMul");
    use ebb_import::onnx::proto::{tensor_shape_proto::dimension::Value as D, type_proto};
    let Some(type_proto::Value::TensorType(t)) = vi.r#type.as_mut().unwrap().value.as_mut() else {
        panic!("not a tensor type")
    };
    t.shape.as_mut().unwrap().dim[0].value = Some(D::DimParam("4*batch".into()));
    let e = import_bytes(&encode_model(&m), "m.onnx", None).unwrap_err();
    let OnnxError::ShapeMismatch {
        value,
        declared,
        inferred,
        ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(value, &mm);
    assert_eq!(declared, "f32[4*batch,256]");
    assert_eq!(inferred, "f32[batch,256]");
}

#[test]
fn cli_summary_reports_ops_symbols_and_source_ops() {
    let (g, stats) = import_file(&fixture("torch_mlp_sgd")).unwrap();
    let s = ebb_compiler::report::import_summary(&g, &stats, std::time::Duration::ZERO);
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["symbols"], serde_json::json!(["batch"]));
    assert_eq!(v["unresolved_dims"], 0);
    assert_eq!(v["nested_graphs"], serde_json::json!([]));
    assert_eq!(v["source_ops"]["ai.onnx::MatMul"], 8);
    assert_eq!(v["op_counts"]["dot_general"], 8);
}

#[test]
fn unnamed_dynamic_dimension_is_a_fresh_symbol_counted_as_unresolved() {
    use ebb_import::onnx::proto::{
        tensor_shape_proto::{dimension::Value as D, Dimension},
        type_proto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto,
        TypeProto, ValueInfoProto,
    };
    // y = Relu(x) with x: f32[?, 4] (the first dimension has neither value nor parameter).
    let ty = |dims: Vec<Option<D>>| TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: Some(1),
            shape: Some(TensorShapeProto {
                dim: dims
                    .into_iter()
                    .map(|value| Dimension {
                        value,
                        denotation: None,
                    })
                    .collect(),
            }),
        })),
        denotation: None,
    };
    let vi = |n: &str, t: TypeProto| ValueInfoProto {
        name: Some(n.into()),
        r#type: Some(t),
        doc_string: None,
    };
    let m = ModelProto {
        ir_version: Some(10),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(18),
        }],
        graph: Some(GraphProto {
            node: vec![NodeProto {
                input: vec!["x".into()],
                output: vec!["y".into()],
                op_type: Some("Relu".into()),
                ..Default::default()
            }],
            input: vec![vi("x", ty(vec![None, Some(D::DimValue(4))]))],
            output: vec![vi("y", ty(vec![None, Some(D::DimValue(4))]))],
            ..Default::default()
        }),
        ..Default::default()
    };
    let (g, stats) = import_bytes(&encode_model(&m), "m.onnx", None).unwrap();
    assert_eq!(stats.unresolved_dims, 3, "{}", ebb_ir::text::print(&g));
    assert_eq!(
        stats.warnings,
        ["graph input `x` dimension 0 has neither dim_value nor dim_param; named `_unk0` (unresolved)"]
    );
}

#[test]
fn unsupported_op_error_reports_its_nested_graphs() {
    let bytes = std::fs::read(fixture("torch_mlp_sgd")).unwrap();
    let mut m = decode_model(&bytes, "m").unwrap();
    let g = m.graph.as_mut().unwrap();
    let body = ebb_import::onnx::proto::GraphProto {
        node: vec![Default::default(); 3],
        ..Default::default()
    };
    let k = g
        .node
        .iter()
        .position(|n| n.op_type.as_deref() == Some("Relu"))
        .unwrap();
    g.node[k].op_type = Some("SequenceMap".into());
    g.node[k].name = Some("branch".into());
    g.node[k]
        .attribute
        .push(ebb_import::onnx::proto::AttributeProto {
            name: Some("body".into()),
            r#type: Some(5),
            g: Some(body),
            ..Default::default()
        });
    let e = import_bytes(&encode_model(&m), "m.onnx", None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "m.onnx: unsupported op `SequenceMap` (domain `ai.onnx`, opset 20) at node `branch`; nested graphs: body (3 nodes)"
    );
}

#[test]
fn params_from_the_training_model_gives_the_exporters_sequence_elements() {
    let optimizers: Vec<String> = names()
        .into_iter()
        .filter(|n| n.ends_with("_optimizer"))
        .collect();
    assert!(optimizers.len() >= 3, "{optimizers:?}");
    for name in optimizers {
        let training = fixture(&name.replace("_optimizer", "_training"));
        let from_training =
            ebb_import::onnx::params_from::options_from_training(&training).unwrap();
        let (g, _) = import_file_with(&fixture(&name), &from_training).unwrap();
        let (want, _) = import_file_with(&fixture(&name), &options(&name)).unwrap();
        assert_eq!(
            ebb_ir::text::print(&g),
            ebb_ir::text::print(&want),
            "{name}: the training model's parameters differ from the exporter's record"
        );
    }
    // A model without gradient accumulation buffers is not a training model.
    let e = ebb_import::onnx::params_from::trainable_parameters(&fixture("torch_mlp_sgd"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no trainable parameters"), "{e}");
}
