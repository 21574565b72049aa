//! Summaries the CLI prints (`ebb import --emit stats`), as serializable structs.

use ebb_import::ImportStats;
use ebb_ir::{DimExpr, Graph, OpKind};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// One graph input or output.
#[derive(Debug, Serialize)]
pub struct ValueSummary {
    /// Pytree path from the export (`params['wte']`, `result[0]`), or "".
    pub name: String,
    /// Tensor type, e.g. `f32[B,S,64]`.
    #[serde(rename = "type")]
    pub ty: String,
    /// Size in bytes, as a symbolic expression.
    pub bytes: String,
}

/// Summary of an imported graph.
#[derive(Debug, Serialize)]
pub struct ImportSummary {
    /// Graph name.
    pub name: String,
    /// Number of ops (graph inputs not counted, region ops not counted).
    pub ops: usize,
    /// Number of ops including those inside regions.
    pub ops_with_regions: usize,
    /// Ops by name.
    pub op_counts: BTreeMap<String, usize>,
    /// Symbol names, in declaration order.
    pub symbols: Vec<String>,
    /// Dimensions that are not an expression over named symbols (must be 0).
    pub unresolved_dims: usize,
    /// Bytes of the inputs whose shape has no symbol (parameters and optimizer state).
    pub parameter_bytes: String,
    /// Bytes of all inputs, symbolic.
    pub input_bytes: String,
    /// Bytes of all outputs, symbolic.
    pub output_bytes: String,
    /// Run-time shape assertions kept from the export.
    pub assertions: usize,
    /// Graph inputs in argument order.
    pub inputs: Vec<ValueSummary>,
    /// Graph outputs.
    pub outputs: Vec<ValueSummary>,
    /// Import wall time in milliseconds.
    pub import_ms: f64,
    /// Ops of the source model by `domain::op_type` (ONNX only).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub source_ops: BTreeMap<String, usize>,
    /// Nested graphs of the source model (ONNX `If`/`Loop`/`Scan` bodies).
    pub nested_graphs: Vec<String>,
    /// Import warnings.
    pub warnings: Vec<String>,
}

fn count_ops(g: &Graph, counts: &mut BTreeMap<String, usize>) -> usize {
    let mut n = 0;
    for &id in g.order() {
        let node = g.node(id);
        if node.kind() == OpKind::Input {
            continue;
        }
        n += 1;
        *counts.entry(node.kind().name().to_string()).or_default() += 1;
        for r in &node.regions {
            n += count_ops(r, counts);
        }
    }
    n
}

/// Builds the summary of `g`.
pub fn import_summary(g: &Graph, stats: &ImportStats, elapsed: Duration) -> ImportSummary {
    let mut op_counts = BTreeMap::new();
    let ops_with_regions = count_ops(g, &mut op_counts);
    let mut params = DimExpr::constant(0);
    let mut all_in = DimExpr::constant(0);
    let inputs = g
        .inputs()
        .iter()
        .map(|&id| {
            let t = &g.node(id).outputs[0];
            let b = t.size_bytes();
            if b.symbols().is_empty() {
                params = params.clone() + b.clone();
            }
            all_in = all_in.clone() + b.clone();
            ValueSummary {
                name: g.input_name(id).to_string(),
                ty: t.to_string(),
                bytes: b.to_string(),
            }
        })
        .collect();
    let mut all_out = DimExpr::constant(0);
    let outputs = g
        .outputs()
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let t = g.value_type(*v);
            all_out = all_out.clone() + t.size_bytes();
            ValueSummary {
                name: g.output_names.get(i).cloned().unwrap_or_default(),
                ty: t.to_string(),
                bytes: t.size_bytes().to_string(),
            }
        })
        .collect();
    ImportSummary {
        name: g.name.clone(),
        ops: g.op_count(),
        ops_with_regions,
        op_counts,
        symbols: g
            .scope
            .symbols()
            .iter()
            .map(|s| s.name().to_string())
            .filter(|n| !n.starts_with('_'))
            .collect(),
        unresolved_dims: stats.unresolved_dims,
        parameter_bytes: params.to_string(),
        input_bytes: all_in.to_string(),
        output_bytes: all_out.to_string(),
        assertions: g.assertions.len(),
        inputs,
        outputs,
        import_ms: elapsed.as_secs_f64() * 1e3,
        source_ops: stats.source_ops.clone(),
        nested_graphs: stats.nested_graphs.clone(),
        warnings: stats.warnings.clone(),
    }
}

impl ImportSummary {
    /// Human-readable multi-line text.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        s += &format!(
            "graph @{}: {} ops ({} with regions)\n",
            self.name, self.ops, self.ops_with_regions
        );
        s += &format!("symbols: {}\n", self.symbols.join(", "));
        s += &format!("unresolved dims: {}\n", self.unresolved_dims);
        if !self.nested_graphs.is_empty() {
            s += &format!("nested graphs: {}\n", self.nested_graphs.join("; "));
        }
        for w in &self.warnings {
            s += &format!("warning: {w}\n");
        }
        s += &format!(
            "parameter bytes: {}\ninput bytes: {}\noutput bytes: {}\n",
            self.parameter_bytes, self.input_bytes, self.output_bytes
        );
        s += &format!("shape assertions: {}\n", self.assertions);
        s += &format!(
            "inputs: {}, outputs: {}\n",
            self.inputs.len(),
            self.outputs.len()
        );
        s += "ops by kind:\n";
        let mut v: Vec<_> = self.op_counts.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (k, n) in v {
            s += &format!("  {n:>6}  {k}\n");
        }
        s += &format!("import time: {:.1} ms\n", self.import_ms);
        s
    }
}
