//! Ebb's compiler: front ends (StableHLO through melior, feature `stablehlo`; ONNX), the
//! pipeline driver and the `ebb` command-line tool's library half.

pub mod api;
pub mod bench;
pub mod flags;
pub mod frontend;
pub mod onnx;
pub mod output;
pub mod pack;
pub mod pipeline;
pub mod report;
pub mod run;
pub mod size;
#[cfg(feature = "stablehlo")]
pub mod stablehlo;
