//! Front-end dispatch: picks the importer for a file by `--format` or by its extension.
//!
//! `.mlir` → StableHLO ([`crate::stablehlo`]); `.onnx` → ONNX ([`crate::onnx`]).

use crate::stablehlo::ImportStats;
use ebb_ir::Graph;
use std::path::Path;

/// The input formats Ebb imports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// StableHLO in MLIR generic form (`jax.export`), extension `.mlir`.
    Stablehlo,
    /// An ONNX model (`torch.onnx.export`, ONNX Runtime training artifacts), extension `.onnx`.
    Onnx,
}

impl Format {
    /// The format a path's extension names, if any (`.mlir`, `.onnx`).
    pub fn from_path(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()? {
            "mlir" => Some(Format::Stablehlo),
            "onnx" => Some(Format::Onnx),
            _ => None,
        }
    }
}

/// Imports `path` with the importer for `format`, or for its extension when `format` is `None`.
///
/// Errors: an unknown extension without `--format`, and every importer error (file, location,
/// op) of the chosen front end.
pub fn import_file(path: &Path, format: Option<Format>) -> anyhow::Result<(Graph, ImportStats)> {
    let format = match format.or_else(|| Format::from_path(path)) {
        Some(f) => f,
        None => anyhow::bail!(
            "{}: cannot tell the format from the extension (expected .mlir or .onnx); pass --format",
            path.display()
        ),
    };
    match format {
        Format::Stablehlo => Ok(crate::stablehlo::import_file(path)?),
        Format::Onnx => Ok(crate::onnx::import_file(path)?),
    }
}
