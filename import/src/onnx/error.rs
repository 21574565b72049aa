//! Typed errors of the ONNX front end. Every error names the file and, where it applies, the
//! node (its name, op type and domain) and the value involved.

use std::path::PathBuf;

/// Where in the model an error arose: the node's name, op type and domain.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeLoc {
    /// `NodeProto.name` (may be empty).
    pub name: String,
    /// `NodeProto.op_type`.
    pub op_type: String,
    /// `NodeProto.domain`, `ai.onnx` for the default domain.
    pub domain: String,
}

impl std::fmt::Display for NodeLoc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = if self.name.is_empty() {
            "<unnamed>"
        } else {
            &self.name
        };
        write!(f, "node `{name}` ({}::{})", self.domain, self.op_type)
    }
}

/// prost's message for `e`, with a path of nested messages longer than six cut in the middle
/// (a deeply nested model would otherwise print a hundred `GraphProto.node` steps).
fn short_decode(e: &prost::DecodeError) -> String {
    let full = e.to_string();
    let parts: Vec<&str> = full.split(": ").collect();
    if parts.len() <= 8 {
        return full;
    }
    let n = parts.len();
    format!(
        "{}: {}: {}: ... ({} more levels): {}: {}",
        parts[0],
        parts[1],
        parts[2],
        n - 5,
        parts[n - 2],
        parts[n - 1]
    )
}

/// An error importing an ONNX model.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The file (or an external-data file) could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// File path.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The bytes are not a valid `ModelProto` (truncated, not an ONNX file, or messages
    /// nested deeper than the decoder's limit of 100, about 31 levels of `If`/`Loop` graphs).
    #[error(
        "{file}: not a valid ONNX model (protobuf decode error: {})",
        short_decode(source)
    )]
    Decode {
        /// File name.
        file: String,
        /// Decoder error.
        source: prost::DecodeError,
    },
    /// The model's structure is not importable (no graph, an undefined value, a sparse
    /// initializer, a non-tensor type, ...).
    #[error("{file}: {msg}")]
    Structure {
        /// File name.
        file: String,
        /// What is wrong.
        msg: String,
    },
    /// A `dim_param` that is not a dimension expression (grammar in the module docs) or is a
    /// negative constant.
    #[error("{file}: value `{value}` dimension {dim}: dim_param `{param}`: {msg}")]
    DimParam {
        /// File name.
        file: String,
        /// The value whose type carries the dimension.
        value: String,
        /// Dimension index.
        dim: usize,
        /// The `dim_param` text.
        param: String,
        /// Parser message.
        msg: String,
    },
    /// The shape declared for a value (graph output or `value_info`) contradicts the shape Ebb
    /// infers from the node's inputs.
    #[error("{file}: {node}: value `{value}` is declared {declared} but inferred {inferred}")]
    ShapeMismatch {
        /// File name.
        file: String,
        /// The producing node.
        node: Box<NodeLoc>,
        /// The value.
        value: String,
        /// Declared type, e.g. `f32[batch,4]`.
        declared: String,
        /// Inferred type, e.g. `f32[batch,8]`.
        inferred: String,
    },
    /// An op (op type, domain) with no lowering in Ebb.
    #[error(
        "{file}: unsupported op `{}` (domain `{}`, opset {opset}) at node `{}`{nested}",
        .node.op_type,
        .node.domain,
        .node.name
    )]
    UnsupportedOp {
        /// File name.
        file: String,
        /// The node (name, op type, domain).
        node: Box<NodeLoc>,
        /// Imported opset version of the domain (0 if not imported).
        opset: i64,
        /// Nested graphs the node carries (`; nested graphs: then_branch (3 nodes), ...`).
        nested: String,
    },
    /// A node whose attributes or inputs Ebb does not support, or that is malformed.
    #[error("{file}: {node}: {msg}")]
    Op {
        /// File name.
        file: String,
        /// The node.
        node: Box<NodeLoc>,
        /// What is wrong.
        msg: String,
    },
    /// The imported graph failed verification (a bug in a lowering or an invalid model).
    #[error("{file}: imported graph is invalid: {source}")]
    Verify {
        /// File name.
        file: String,
        /// Verifier finding.
        source: Box<ebb_ir::verify::VerifyError>,
    },
}
