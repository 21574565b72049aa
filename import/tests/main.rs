//! The tests of `ebb-import`, one test binary (`autotests = false`, `[lib] test = false` in
//! Cargo.toml): every file in this directory is a module here, the tests of a source module in
//! the file named after it (`onnx_dims.rs` for `src/onnx/dims.rs`). A new test file must be
//! added below.

// First: the model builders (`node`, `vi`, `model`, `run`) the other `onnx_*` tests use.
mod onnx;
mod onnx_control;
mod onnx_conv;
mod onnx_dims;
mod onnx_hostile;
mod onnx_nll;
mod onnx_random;
mod onnx_shape;
mod onnx_symbolic;
mod onnx_tensor;
mod op_table;
// The StableHLO front end (feature `stablehlo`, links MLIR).
#[cfg(feature = "stablehlo")]
mod stablehlo;
#[cfg(feature = "stablehlo")]
mod stablehlo_dims;
#[cfg(feature = "stablehlo")]
mod stablehlo_mlir_text;
#[cfg(feature = "stablehlo")]
mod stablehlo_placement;
#[cfg(feature = "stablehlo")]
mod stablehlo_pretty;
mod sym;
mod text;
