//! The graph verifier: structural and type consistency, run after import and between passes.
//!
//! Checks, for the graph and recursively for its regions:
//! - the program order holds every live node exactly once and is topological (every operand is
//!   defined earlier);
//! - operand indices are dense (0..n) and refer to existing results;
//! - each op has the number of regions its kind requires;
//! - result types equal the types inferred by [`crate::shape::infer`] (where it infers);
//! - graph outputs refer to existing results;
//! - regions nest at most [`MAX_REGION_DEPTH`] deep (what the textual IR's parser accepts);
//! - every attribute the shape rules read is in range (axes below the rank, slice bounds
//!   inside the dimension, region arities), so an accepted graph never fails a shape rule
//!   later, at finalize or run time;
//! - every value's size in bytes has `i64` coefficients, and all sizes together stay within
//!   [`MAX_TOTAL_BYTES`] (huge static dimensions are rejected here, not panicked on later).

use crate::dim::expr::Monomial;
use crate::graph::{Graph, NodeId, MAX_REGION_DEPTH};
use crate::op::OpKind;
use crate::shape::{infer, ShapeError};
use std::collections::{BTreeMap, HashMap};

/// A verifier finding: which node (by program-order position and op name) and what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VerifyError {
    /// Structural problem.
    #[error("graph `{graph}`: op #{position} `{op}`{loc}: {msg}")]
    Structure {
        /// Graph name.
        graph: String,
        /// Position in program order.
        position: usize,
        /// Op name.
        op: String,
        /// Location suffix (` at file:line:col`) or empty.
        loc: String,
        /// What is wrong.
        msg: String,
    },
    /// Shape rule violated.
    #[error("graph `{graph}`: op #{position}{loc}: {source}")]
    Shape {
        /// Graph name.
        graph: String,
        /// Position in program order.
        position: usize,
        /// Location suffix or empty.
        loc: String,
        /// The shape error (boxed: keeps `VerifyError` small).
        source: Box<ShapeError>,
    },
    /// Graph outputs are invalid.
    #[error("graph `{graph}`: output {index} refers to a missing value")]
    Output {
        /// Graph name.
        graph: String,
        /// Output index.
        index: usize,
    },
}

/// Largest total, over all values of a graph (regions included), of the absolute size
/// coefficients per monomial: 2^61 bytes. Every sum or difference of the values' sizes (the
/// resident bytes at a point, a peak, a lower bound) then keeps its coefficients in `i64`
/// with room to spare, so the passes can add sizes without overflow checks.
pub const MAX_TOTAL_BYTES: i128 = 1 << 61;

/// Verifies `g` (see the module docs). Returns the first problem found.
pub fn verify(g: &Graph) -> Result<(), VerifyError> {
    verify_graph(g, 0)?;
    let mut totals = BTreeMap::new();
    check_sizes(g, &mut totals)
}

/// Checks that every value's size in bytes is an expression with `i64` coefficients and that
/// the sizes of all values add up to at most [`MAX_TOTAL_BYTES`] per monomial.
fn check_sizes(g: &Graph, totals: &mut BTreeMap<Monomial, i128>) -> Result<(), VerifyError> {
    for (i, &id) in g.order().iter().enumerate() {
        let n = g.node(id);
        for (k, t) in n.outputs.iter().enumerate() {
            let size = t.checked_size_bytes().map_err(|_| {
                structure(
                    g,
                    i,
                    id,
                    &format!("result {k} of type {t}: its size in bytes overflows 64-bit integers"),
                )
            })?;
            for (m, c) in &size.terms {
                let sum = match totals.get_mut(m) {
                    Some(sum) => sum,
                    None => totals.entry(m.clone()).or_insert(0),
                };
                *sum += i128::from(*c).abs();
                if *sum > MAX_TOTAL_BYTES {
                    return Err(structure(
                        g,
                        i,
                        id,
                        &format!(
                            "result {k} of type {t} ({size} bytes): the sizes of the graph's \
                             values add up to more than 2^61 bytes"
                        ),
                    ));
                }
            }
        }
        for r in &n.regions {
            check_sizes(r, totals)?;
        }
    }
    Ok(())
}

/// The structural and type checks of [`verify`], recursively for regions.
/// A donated input names an existing output of its own type, produced by an op (not the input
/// itself passed through), and no two inputs alias the same output.
fn verify_donation(g: &Graph, pos: &HashMap<NodeId, usize>) -> Result<(), VerifyError> {
    let mut taken = vec![false; g.outputs().len()];
    for &id in g.inputs() {
        let Some(k) = g.aliasing_output(id) else {
            continue;
        };
        let i = pos.get(&id).copied().unwrap_or(0);
        let Some(&out) = g.outputs().get(k) else {
            return Err(structure(
                g,
                i,
                id,
                &format!(
                    "donated to output {k}, but the graph has {} outputs",
                    g.outputs().len()
                ),
            ));
        };
        let problem = if g.node(out.node).kind() == OpKind::Input {
            Some("which is an input passed through")
        } else if g.node(id).outputs.first() != Some(g.value_type(out)) {
            Some("whose type differs")
        } else if std::mem::replace(&mut taken[k], true) {
            Some("which another input is donated to")
        } else {
            None
        };
        if let Some(p) = problem {
            return Err(structure(g, i, id, &format!("donated to output {k}, {p}")));
        }
    }
    Ok(())
}

fn verify_graph(g: &Graph, depth: usize) -> Result<(), VerifyError> {
    let mut pos: HashMap<NodeId, usize> = HashMap::with_capacity(g.order().len());
    for (i, &id) in g.order().iter().enumerate() {
        if !g.contains(id) || pos.insert(id, i).is_some() {
            return Err(structure(
                g,
                i,
                id,
                "removed or repeated node in program order",
            ));
        }
    }
    if pos.len() != g.node_count() {
        return Err(VerifyError::Structure {
            graph: g.name.clone(),
            position: 0,
            op: String::new(),
            loc: String::new(),
            msg: format!(
                "{} nodes but {} in program order",
                g.node_count(),
                pos.len()
            ),
        });
    }
    verify_donation(g, &pos)?;
    for (i, &id) in g.order().iter().enumerate() {
        let n = g.node(id);
        let operands = g.operands(id);
        for (k, v) in operands.iter().enumerate() {
            match pos.get(&v.node) {
                Some(&p) if p < i => {}
                _ => {
                    return Err(structure(
                        g,
                        i,
                        id,
                        &format!("operand {k} is not defined before use"),
                    ))
                }
            }
            if v.output as usize >= g.node(v.node).outputs.len() {
                return Err(structure(
                    g,
                    i,
                    id,
                    &format!("operand {k} refers to a missing result"),
                ));
            }
        }
        let edges = g
            .petgraph()
            .edges_directed(id, petgraph::Direction::Incoming)
            .count();
        if edges != operands.len() || operands.iter().enumerate().any(|(k, _)| k >= edges) {
            return Err(structure(g, i, id, "operand indices are not dense"));
        }
        if n.kind() != OpKind::Input && !n.kind().accepts_regions(n.regions.len()) {
            return Err(structure(
                g,
                i,
                id,
                &format!(
                    "expects {} regions, has {}",
                    n.kind().num_regions(),
                    n.regions.len()
                ),
            ));
        }
        if !n.regions.is_empty() && depth >= MAX_REGION_DEPTH {
            return Err(structure(
                g,
                i,
                id,
                &format!(
                    "regions nested more than {MAX_REGION_DEPTH} deep (at most \
                     {MAX_REGION_DEPTH} levels are accepted)"
                ),
            ));
        }
        for r in &n.regions {
            verify_graph(r, depth + 1)?;
        }
        let types: Vec<_> = operands.iter().map(|v| g.value_type(*v)).collect();
        let inferred = infer(&n.op, &types, &n.regions).map_err(|source| VerifyError::Shape {
            graph: g.name.clone(),
            position: i,
            loc: loc(g, id),
            source: Box::new(source),
        })?;
        if let Some(inferred) = inferred {
            if inferred != n.outputs {
                let show = |v: &[crate::types::TensorType]| {
                    v.iter()
                        .map(|t| t.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                return Err(structure(
                    g,
                    i,
                    id,
                    &format!(
                        "declared result types ({}) differ from inferred ({})",
                        show(&n.outputs),
                        show(&inferred)
                    ),
                ));
            }
        }
    }
    for (index, v) in g.outputs().iter().enumerate() {
        if !g.contains(v.node) || v.output as usize >= g.node(v.node).outputs.len() {
            return Err(VerifyError::Output {
                graph: g.name.clone(),
                index,
            });
        }
    }
    Ok(())
}

fn loc(g: &Graph, id: NodeId) -> String {
    g.node(id)
        .loc
        .as_ref()
        .map(|l| format!(" at {l}"))
        .unwrap_or_default()
}

fn structure(g: &Graph, position: usize, id: NodeId, msg: &str) -> VerifyError {
    let op = if g.contains(id) {
        g.node(id).kind().name().to_string()
    } else {
        "?".into()
    };
    let loc = if g.contains(id) {
        loc(g, id)
    } else {
        String::new()
    };
    VerifyError::Structure {
        graph: g.name.clone(),
        position,
        op,
        loc,
        msg: msg.to_string(),
    }
}
