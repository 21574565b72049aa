//! Typed errors of the StableHLO front end. Every error names the file and, where it applies,
//! the op and its source location.

use std::path::PathBuf;

/// An error importing a StableHLO module.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// File path.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The file is not UTF-8 text or holds a NUL byte (with the byte offset, line and column).
    #[error(transparent)]
    Text(#[from] crate::text::TextError),
    /// MLIR could not parse the text.
    #[error("{file}:{line}:{col}: MLIR parse error: {msg}")]
    Parse {
        /// File name.
        file: String,
        /// 1-based line.
        line: u32,
        /// 1-based column.
        col: u32,
        /// MLIR's diagnostic.
        msg: String,
    },
    /// The module does not have the structure of a JAX export (no `@main`, a call to a missing
    /// function, ...).
    #[error("{file}: {msg}")]
    Structure {
        /// File name.
        file: String,
        /// What is wrong.
        msg: String,
    },
    /// An op Ebb does not support.
    #[error("{file}: unsupported op `{op}` at {loc}")]
    UnsupportedOp {
        /// File name.
        file: String,
        /// Full op name (`stablehlo.fft`).
        op: String,
        /// Source location.
        loc: String,
    },
    /// An op whose attribute or operand form Ebb does not support, or that is malformed.
    #[error("{file}: op `{op}` at {loc}: {msg}")]
    Op {
        /// File name.
        file: String,
        /// Full op name.
        op: String,
        /// Source location.
        loc: String,
        /// What is wrong.
        msg: String,
    },
    /// The imported graph failed verification (a bug in the importer or an invalid module).
    #[error("{file}: imported graph is invalid: {source}")]
    Verify {
        /// File name.
        file: String,
        /// Verifier finding.
        source: Box<ebb_ir::verify::VerifyError>,
    },
}
