//! Ebb's importers: a training step exported by JAX (StableHLO) or PyTorch / ONNX Runtime
//! (ONNX) into an [`ebb_ir::Graph`] with symbolic shapes.
//!
//! [`import_file`] picks the importer for a file by `--format` or by its extension: `.mlir` →
//! StableHLO ([`crate::stablehlo`], feature `stablehlo`, MLIR's parser through melior);
//! `.onnx` → ONNX ([`crate::onnx`], protobuf through prost; builds without LLVM/MLIR).
//!
//! Also the pieces both front ends share, so that neither owns them: symbolic shape values
//! ([`sym`]), text decoding ([`text`]), the supported-op table ([`op_table`]) and import
//! statistics ([`ImportStats`]).

pub mod onnx;
pub mod op_table;
#[cfg(feature = "stablehlo")]
pub mod stablehlo;
mod stats;
pub mod sym;
pub mod text;

use ebb_ir::Graph;
pub use stats::ImportStats;
use std::path::Path;

/// The input formats Ebb imports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

impl std::str::FromStr for Format {
    type Err = String;

    /// `stablehlo` or `onnx` (`--format`).
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "stablehlo" => Ok(Format::Stablehlo),
            "onnx" => Ok(Format::Onnx),
            _ => Err(format!("unknown format `{s}` (stablehlo, onnx)")),
        }
    }
}

/// Whether `path` is a model to import (a `format` was given, or its extension names one)
/// rather than a plan file written by `ebb compile`.
pub fn is_model_file(path: &Path, format: Option<Format>) -> bool {
    format.is_some() || Format::from_path(path).is_some()
}

/// One op an importer does not take: its name, how often it occurs and where first (for
/// triage: `ebb import --allow-unsupported`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct UnsupportedUse {
    /// Op name: `stablehlo.case`, or `domain::OpType` for ONNX (`ai.onnx::If`).
    pub op: String,
    /// Occurrences, nested regions/graphs and uncalled functions included.
    pub count: usize,
    /// The first occurrence: the op's source location (StableHLO) or the node's name (ONNX).
    pub first: String,
}

/// Adds one occurrence of `op` at `at` to `out` (first-seen order).
pub(crate) fn count_unsupported(
    out: &mut Vec<UnsupportedUse>,
    op: String,
    at: impl FnOnce() -> String,
) {
    match out.iter_mut().find(|u| u.op == op) {
        Some(u) => u.count += 1,
        None => out.push(UnsupportedUse {
            first: at(),
            op,
            count: 1,
        }),
    }
}

/// Every op of the model at `path` that its importer does not take (see
/// [`crate::stablehlo::unsupported_ops`], [`crate::onnx::unsupported_ops`]); empty when it
/// takes them all.
///
/// Errors: as [`import_file`] for files that cannot be read or parsed.
pub fn unsupported_ops(path: &Path, format: Option<Format>) -> anyhow::Result<Vec<UnsupportedUse>> {
    match resolve_format(path, format)? {
        #[cfg(feature = "stablehlo")]
        Format::Stablehlo => {
            let text = text::read(path)?;
            Ok(crate::stablehlo::unsupported_ops(
                &text,
                &path.display().to_string(),
            )?)
        }
        #[cfg(not(feature = "stablehlo"))]
        Format::Stablehlo => anyhow::bail!(
            "{}: this build of Ebb has no StableHLO (MLIR) support",
            path.display()
        ),
        Format::Onnx => Ok(crate::onnx::unsupported_ops(path)?),
    }
}

/// `format`, or the format of `path`'s extension.
///
/// Errors: an unknown extension without a format.
fn resolve_format(path: &Path, format: Option<Format>) -> anyhow::Result<Format> {
    match format.or_else(|| Format::from_path(path)) {
        Some(f) => Ok(f),
        None => anyhow::bail!(
            "{}: cannot tell the format from the extension (expected .mlir or .onnx); pass --format",
            path.display()
        ),
    }
}

/// Imports `path` with the importer for `format`, or for its extension when `format` is `None`.
///
/// Errors: an unknown extension without `--format`, and every importer error (file, location,
/// op) of the chosen front end.
pub fn import_file(path: &Path, format: Option<Format>) -> anyhow::Result<(Graph, ImportStats)> {
    import_file_with(path, format, None)
}

/// [`import_file`]; an ONNX Runtime optimizer model's sequence inputs take the trainable
/// parameters of the training model `params_from` as elements
/// ([`crate::onnx::params_from`]).
///
/// Errors: as [`import_file`]; the training model's import errors; `params_from` with a model
/// that is not ONNX.
pub fn import_file_with(
    path: &Path,
    format: Option<Format>,
    params_from: Option<&Path>,
) -> anyhow::Result<(Graph, ImportStats)> {
    if let Some(training) = params_from {
        if resolve_format(path, format)? != Format::Onnx {
            anyhow::bail!(
                "--params-from applies to ONNX Runtime optimizer models (.onnx); {} is not one",
                path.display()
            );
        }
        let opts = crate::onnx::params_from::options_from_training(training)
            .map_err(|e| anyhow::anyhow!("--params-from {}: {e}", training.display()))?;
        return Ok(crate::onnx::import_file_with(path, &opts)?);
    }
    match resolve_format(path, format)? {
        #[cfg(feature = "stablehlo")]
        Format::Stablehlo => Ok(crate::stablehlo::import_file(path)?),
        #[cfg(not(feature = "stablehlo"))]
        Format::Stablehlo => anyhow::bail!(
            "{}: this build of Ebb has no StableHLO (MLIR) support; rebuild with the `stablehlo` \
             feature (on by default): `cargo build --release -p ebb-compiler` (needs LLVM/MLIR \
             22, see scripts/setup-debian.sh)",
            path.display()
        ),
        Format::Onnx => Ok(crate::onnx::import_file(path)?),
    }
}
