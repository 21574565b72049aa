//! Helpers shared by the ONNX fixture tests (`onnx_import.rs`, `onnx_numerics.rs`).

pub use ebb_testkit::{onnx_fixtures_dir as dir, onnx_metadata as meta};

pub use ebb_testkit::onnx_import_options as options;
