//! Helpers shared by the ONNX fixture tests (`onnx_import.rs`, `onnx_numerics.rs`).

use ebb_import::onnx::ImportOptions;
use ebb_ir::{DType, TensorType};

pub use ebb_testkit::{onnx_fixtures_dir as dir, onnx_metadata as meta};

/// Import options for fixture `name`: an ONNX Runtime optimizer model gets the element types
/// of its sequence inputs from its training model's parameter inputs (`elements` in its json).
pub fn options(name: &str) -> ImportOptions {
    let mut opts = ImportOptions::default();
    let m = meta(name);
    if m["kind"] != "ort_optimizer_model" {
        return opts;
    }
    let train = meta(&name.replace("_optimizer", "_training"));
    let shape_of = |p: &str| -> TensorType {
        let i = train["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == p)
            .unwrap_or_else(|| panic!("{p} not a training input"));
        let dims: Vec<i64> = i["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_i64().unwrap())
            .collect();
        TensorType::fixed(DType::F32, &dims)
    };
    for i in m["inputs"].as_array().unwrap() {
        if i["type"] == "sequence" {
            let elems = i["elements"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| shape_of(e.as_str().unwrap()))
                .collect();
            opts.sequence_elements
                .insert(i["name"].as_str().unwrap().to_string(), elems);
        }
    }
    opts
}
