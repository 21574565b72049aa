//! Typed errors of the executor and of the `.npz` loader.

use ebb_ir::dim::DimError;
use ebb_ir::DType;

/// Why a graph could not be executed. Every variant names the graph, op or input concerned;
/// nothing in the executor panics on user input (graphs, schedules, bindings, tensors).
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The caller passed a different number of inputs than the graph has.
    #[error("graph `{graph}` takes {expected} inputs, got {got}")]
    InputCount {
        /// Graph name.
        graph: String,
        /// Number of graph inputs.
        expected: usize,
        /// Number of tensors passed.
        got: usize,
    },
    /// An input tensor's element type or shape differs from the graph input's type evaluated
    /// at the bindings.
    #[error("input {index} (`{name}`) of graph `{graph}`: expected {expected} at the bindings, got {got}")]
    InputMismatch {
        /// Graph name.
        graph: String,
        /// Input (argument) index.
        index: usize,
        /// Input name (pytree path), may be empty.
        name: String,
        /// Expected type, e.g. `f32[8,64]`.
        expected: String,
        /// Type of the tensor passed, e.g. `f32[3,64]`.
        got: String,
    },
    /// The plan's decisions do not fit the program (unknown candidate or value, a value
    /// read while evicted, a reload of a value that was not offloaded).
    #[error("graph `{graph}`: plan decisions: {msg}")]
    Plan {
        /// Graph name.
        graph: String,
        /// What does not fit (decision, candidate, value, point).
        msg: String,
    },
    /// The schedule is not a topological order of the graph's non-input ops.
    #[error("graph `{graph}`: invalid schedule: {msg}")]
    Schedule {
        /// Graph name.
        graph: String,
        /// What is wrong (position and node).
        msg: String,
    },
    /// A result type (or a symbolic dimension of an op) cannot be evaluated at the bindings
    /// (an unbound symbol, an overflow or a negative dimension).
    #[error(
        "graph `{graph}`: op `{op}` at {loc}: cannot evaluate its type at the bindings: {msg}"
    )]
    Shape {
        /// Graph name.
        graph: String,
        /// Op name.
        op: String,
        /// Source location.
        loc: String,
        /// The underlying problem.
        msg: String,
    },
    /// An op the CPU executor does not implement (e.g. `custom_call`).
    #[error("unsupported op `{op}`{detail} at {loc}")]
    Unsupported {
        /// Op name.
        op: String,
        /// Extra detail, e.g. ` (target "Sharding")`, or empty.
        detail: String,
        /// Source location.
        loc: String,
    },
    /// A kernel rejected its operands or its op's configuration.
    #[error("op `{op}` at {loc}: {source}")]
    Op {
        /// Op name.
        op: String,
        /// Source location.
        loc: String,
        /// What went wrong.
        source: OpError,
    },
}

/// What a kernel reports; [`ExecError::Op`] adds the op name and location.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// Dimension arithmetic failed while evaluating a symbolic dimension of the op's payload
    /// (slice bounds, slice sizes, dimension constants).
    #[error("dimension attribute: {0}")]
    Dim(#[from] DimError),
    /// Operands or the op's configuration are inconsistent with each other or with the
    /// result type.
    #[error("{0}")]
    Invalid(String),
    /// The op does not support this element type.
    #[error("element type {dtype} is not supported{what}")]
    DType {
        /// The element type.
        dtype: DType,
        /// Context, e.g. ` by exponential`.
        what: String,
    },
    /// An error while executing a region (`while` body, reduction body).
    #[error("in region `{region}`: {source}")]
    Region {
        /// Region name (`body`, `cond`).
        region: String,
        /// The error inside the region.
        source: Box<ExecError>,
    },
    /// An op kind this executor does not implement.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

/// Shorthand for kernels.
pub(crate) fn invalid<T>(msg: impl Into<String>) -> Result<T, OpError> {
    Err(OpError::Invalid(msg.into()))
}

/// Why an `.npz` file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NpzError {
    /// The file cannot be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a valid zip archive (or an entry cannot be decompressed).
    #[error("{path}: invalid zip archive: {msg}")]
    Zip {
        /// The file.
        path: String,
        /// The zip error.
        msg: String,
    },
    /// An entry is not a valid `.npy` array.
    #[error("{path}: entry `{name}`: {msg}")]
    Npy {
        /// The file.
        path: String,
        /// Entry name without `.npy`.
        name: String,
        /// What is wrong.
        msg: String,
    },
    /// An entry's element type has no Ebb counterpart (or is big-endian / Fortran order).
    #[error("{path}: entry `{name}`: unsupported array type `{descr}`")]
    UnsupportedType {
        /// The file.
        path: String,
        /// Entry name.
        name: String,
        /// The numpy type descriptor, e.g. `<c8`.
        descr: String,
    },
    /// The archive has no entry of that name.
    #[error("{path}: no array named `{name}`")]
    Missing {
        /// The file.
        path: String,
        /// The requested name.
        name: String,
    },
    /// An entry holds more bytes (decompressed) than the process may still allocate.
    #[error(
        "{path}: entry `{name}` holds more than {limit} bytes decompressed, the most this process \
         may still allocate ({limited_by}); it is not read"
    )]
    TooLarge {
        /// The file.
        path: String,
        /// Entry name.
        name: String,
        /// The limit, bytes.
        limit: i64,
        /// Where the limit comes from ([`crate::host_memory::HostLimit::source`]).
        limited_by: String,
    },
}
