//! Import statistics, shared by both front ends.

/// Import statistics the CLI reports.
#[derive(Clone, Debug, Default)]
pub struct ImportStats {
    /// Dimensions left as placeholder symbols (not a `DimExpr` over named symbols).
    pub unresolved_dims: usize,
    /// Nested graphs found in the model (`node (op).attr: N nodes`; ONNX `If`/`Loop`/`Scan`).
    pub nested_graphs: Vec<String>,
    /// Ops of the source format by name (ONNX: `domain::op_type`); empty for StableHLO.
    pub source_ops: std::collections::BTreeMap<String, usize>,
    /// Import warnings (e.g. unnamed dynamic dimensions).
    pub warnings: Vec<String>,
}
