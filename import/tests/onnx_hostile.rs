//! Models that must be refused with the node or field named: a value defined twice, an
//! opset outside the supported versions, an invalid attribute on a node nothing reads,
//! nested graphs deeper than the import bound, external data that leaves the model's folder
//! through a symbolic link or names a FIFO.

use crate::onnx::{ints_attr, model, node, vi};
use ebb_import::onnx::proto::{
    AttributeProto, GraphProto, OperatorSetIdProto, StringStringEntryProto, TensorProto,
};
use ebb_import::onnx::{encode_model, import_bytes, OnnxError};
use std::path::Path;

/// A graph `x: f32[2,3] -> y` with `nodes` (which must define `y`).
fn graph(nodes: Vec<ebb_import::onnx::proto::NodeProto>, inits: Vec<TensorProto>) -> GraphProto {
    GraphProto {
        node: nodes,
        initializer: inits,
        input: vec![vi("x", 1, &["2", "3"])],
        output: vec![vi("y", 1, &["2", "3"])],
        ..Default::default()
    }
}

fn import_err(g: GraphProto, opset: i64, dir: Option<&Path>) -> String {
    let mut m = model(g, &[]);
    m.opset_import[0] = OperatorSetIdProto {
        domain: Some(String::new()),
        version: Some(opset),
    };
    match import_bytes(&encode_model(&m), "m.onnx", dir) {
        Ok(_) => panic!("imported"),
        Err(e) => e.to_string(),
    }
}

fn named(
    mut n: ebb_import::onnx::proto::NodeProto,
    name: &str,
) -> ebb_import::onnx::proto::NodeProto {
    n.name = Some(name.into());
    n
}

#[test]
fn a_value_defined_twice_is_refused_naming_both() {
    let e = import_err(
        graph(
            vec![
                named(node("Relu", &["x"], &["y"], vec![]), "first"),
                named(node("Neg", &["x"], &["y"], vec![]), "second"),
            ],
            vec![],
        ),
        18,
        None,
    );
    assert!(e.contains("node `second` (ai.onnx::Neg)"), "{e}");
    assert!(
        e.contains("defines value `y`, which is already defined"),
        "{e}"
    );
    // A node output shadowing a graph input.
    let e = import_err(
        graph(
            vec![
                named(node("Relu", &["x"], &["x"], vec![]), "shadow"),
                node("Neg", &["x"], &["y"], vec![]),
            ],
            vec![],
        ),
        18,
        None,
    );
    assert!(
        e.contains("node `shadow`") && e.contains("value `x`"),
        "{e}"
    );
}

#[test]
fn unsupported_opset_versions_are_refused_with_the_first_node() {
    for v in [0, 24, 99, -3] {
        let e = import_err(
            graph(
                vec![named(node("Relu", &["x"], &["y"], vec![]), "r")],
                vec![],
            ),
            v,
            None,
        );
        assert!(
            e.contains(&format!("domain `ai.onnx` version {v} is not supported")),
            "{e}"
        );
        assert!(
            e.contains("versions 1 to 23") && e.contains("node is `r`"),
            "{e}"
        );
    }
}

#[test]
fn invalid_attributes_are_refused_on_nodes_nothing_reads() {
    let e = import_err(
        graph(
            vec![
                node("Relu", &["x"], &["y"], vec![]),
                named(
                    node(
                        "Transpose",
                        &["x"],
                        &["dead"],
                        vec![ints_attr("perm", &[0, 0])],
                    ),
                    "dead_transpose",
                ),
            ],
            vec![],
        ),
        18,
        None,
    );
    assert!(
        e.contains("node `dead_transpose` (ai.onnx::Transpose)"),
        "{e}"
    );
    assert!(e.contains("names dimension 0 twice"), "{e}");
}

/// `If(cond) { then: If(cond) { ... } }` nested `depth` deep, the innermost branch `Relu(x)`.
fn nested_ifs(depth: usize) -> GraphProto {
    let branch = |inner: Vec<ebb_import::onnx::proto::NodeProto>, out: &str| GraphProto {
        node: inner,
        output: vec![vi(out, 1, &["2", "3"])],
        ..Default::default()
    };
    let mut body = vec![node("Relu", &["x"], &[&format!("r{depth}")], vec![])];
    for k in (0..depth).rev() {
        let then = branch(body.clone(), &format!("r{}", k + 1));
        let other = branch(
            vec![node("Neg", &["x"], &[&format!("n{k}")], vec![])],
            &format!("n{k}"),
        );
        let attr = |name: &str, g: GraphProto| AttributeProto {
            name: Some(name.into()),
            r#type: Some(5),
            g: Some(g),
            ..Default::default()
        };
        let out = if k == 0 {
            "y".to_string()
        } else {
            format!("r{k}")
        };
        body = vec![named(
            node(
                "If",
                &["c"],
                &[&out],
                vec![attr("then_branch", then), attr("else_branch", other)],
            ),
            &format!("if{k}"),
        )];
    }
    let mut g = graph(body, vec![]);
    g.input.push(vi("c", 9, &[]));
    g
}

#[test]
fn nested_graphs_as_deep_as_protobuf_decodes_import_and_deeper_ones_are_short_errors() {
    // prost decodes at most 100 nested messages: 31 levels of `If` (three messages each, and
    // the innermost branch's output type four more).
    let deepest = 31;
    assert!(deepest < ebb_ir::graph::MAX_IMPORT_REGION_DEPTH);
    let m = model(nested_ifs(deepest), &[]);
    import_bytes(&encode_model(&m), "m.onnx", None).unwrap();
    let m = model(nested_ifs(deepest + 8), &[]);
    let e = import_bytes(&encode_model(&m), "m.onnx", None)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("m.onnx: not a valid ONNX model"), "{e}");
    assert!(
        e.contains("recursion limit reached") && e.contains("more levels"),
        "{e}"
    );
    assert!(e.len() < 300, "{e}");
}

/// A model whose initializer `w` (f32[2,3]) is read from external data at `location`.
fn external(location: &str) -> GraphProto {
    let kv = |k: &str, v: &str| StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v.into()),
    };
    let w = TensorProto {
        name: Some("w".into()),
        dims: vec![2, 3],
        data_type: Some(1),
        data_location: Some(1),
        external_data: vec![kv("location", location)],
        ..Default::default()
    };
    graph(vec![node("Add", &["x", "w"], &["y"], vec![])], vec![w])
}

#[test]
fn external_data_is_resolved_through_links_and_stays_in_the_model_folder() {
    let root = std::env::temp_dir().join(format!("ebb-onnx-links-{}", std::process::id()));
    let (dir, outside) = (root.join("model"), root.join("outside"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let bytes: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
    std::fs::write(outside.join("secret.bin"), &bytes).unwrap();
    std::fs::write(dir.join("w.bin"), &bytes).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.bin"), dir.join("escape.bin")).unwrap();
    std::os::unix::fs::symlink(outside.clone(), dir.join("sub")).unwrap();
    std::os::unix::fs::symlink(dir.join("w.bin"), dir.join("inside.bin")).unwrap();
    for loc in ["escape.bin", "sub/secret.bin"] {
        let e = import_err(external(loc), 18, Some(&dir));
        assert!(e.contains("outside the model directory"), "{loc}: {e}");
        assert!(e.contains(&format!("`{loc}`")), "{e}");
    }
    // A link that stays inside is followed.
    let m = model(external("inside.bin"), &[]);
    import_bytes(&encode_model(&m), "m.onnx", Some(&dir)).unwrap();
    // A FIFO is refused, not waited on.
    let fifo = dir.join("pipe.bin");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", fifo.display());
    let e = import_err(external("pipe.bin"), 18, Some(&dir));
    assert!(e.contains("it is a FIFO, not a regular file"), "{e}");
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn onnx_errors_are_typed_with_the_node() {
    // The duplicate-definition error is an op error (it names the node), not a structural one.
    let m = model(
        graph(
            vec![
                node("Relu", &["x"], &["y"], vec![]),
                node("Neg", &["x"], &["y"], vec![]),
            ],
            vec![],
        ),
        &[],
    );
    let e = import_bytes(&encode_model(&m), "m.onnx", None).unwrap_err();
    assert!(matches!(e, OnnxError::Op { .. }), "{e:?}");
}
