//! ONNX front end (in progress): imports ONNX training graphs with `dim_param` dimensions.

use crate::stablehlo::ImportStats;
use ebb_ir::Graph;
use std::path::Path;

/// Imports an ONNX model from `path`.
///
/// Errors: not implemented yet.
pub fn import_file(path: &Path) -> anyhow::Result<(Graph, ImportStats)> {
    anyhow::bail!(
        "{}: the ONNX front end is not implemented yet",
        path.display()
    )
}
