//! Ebb's compiler: front ends (StableHLO through melior), the pipeline driver and the `ebb`
//! command-line tool's library half.

pub mod api;
pub mod bench;
pub mod frontend;
pub mod onnx;
pub mod pipeline;
pub mod report;
pub mod run;
pub mod stablehlo;
