//! Graph to e-graph: adds every op of a [`Graph`]'s main body to a fresh [`EbbEGraph`] in
//! program order (one e-node per op, see [`super::lang`] for the encoding) and remembers
//! which e-class holds each value, so that extraction can rebuild the graph.
//!
//! Invariant: the class of every value has the value's declared type, and every op of the
//! input graph is an e-node of the e-graph (identical ops share a node only when duplicates
//! are merged).

use super::lang::{has_payload_child, ClassData, EbbEGraph, EbbNode, PayloadEntry, TypeAnalysis};
use super::RewriteError;
use ebb_ir::{Graph, NodeId, OpKind, ValueRef};
use egg::{Id, Language};
use std::collections::HashMap;

/// One op of the input graph as it went into the e-graph.
#[derive(Debug, Clone)]
pub(crate) struct Original {
    /// The op.
    pub node: NodeId,
    /// Its position in program order.
    pub pos: usize,
    /// The e-node added for it (children as they were when added).
    pub enode: EbbNode,
    /// The class it was added to.
    pub class: Id,
}

/// A graph encoded as an e-graph.
pub(crate) struct Encoded {
    /// The e-graph (rebuilt, clean).
    pub egraph: EbbEGraph,
    /// Class of every value of the main graph.
    pub values: HashMap<ValueRef, Id>,
    /// Every non-input op, in program order.
    pub originals: Vec<Original>,
    /// Classes that must be kept: graph outputs and the results of ops nobody uses.
    pub roots: Vec<Id>,
    /// Class of each graph input, in argument order.
    pub inputs: Vec<Id>,
}

/// Whether an op is encoded as an [`EbbNode::Opaque`] node.
fn is_opaque(g: &Graph, id: NodeId) -> bool {
    let n = g.node(id);
    let leafless_with_regions = !has_payload_child(n.kind()) && !n.regions.is_empty();
    n.outputs.len() != 1
        || leafless_with_regions
        || matches!(
            n.kind(),
            OpKind::While
                | OpKind::Case
                | OpKind::Sort
                | OpKind::CustomCall
                | OpKind::OptimizationBarrier
                | OpKind::AnnotateDevicePlacement
        )
}

/// Encodes `g`. With `merge_duplicates`, structurally identical ops share one e-node
/// (common-subexpression elimination); without, each op keeps its own node.
///
/// Errors: [`RewriteError::Encode`] when an op's inferred type differs from its declared one
/// (the graph does not verify).
pub(crate) fn encode(g: &Graph, merge_duplicates: bool) -> Result<Encoded, RewriteError> {
    let analysis = TypeAnalysis {
        inputs: g
            .inputs()
            .iter()
            .map(|&id| g.node(id).outputs[0].clone())
            .collect(),
        ..Default::default()
    };
    let mut eg = EbbEGraph::new(analysis);
    let mut values: HashMap<ValueRef, Id> = HashMap::with_capacity(g.order().len());
    let mut inputs = Vec::with_capacity(g.inputs().len());
    for (i, &id) in g.inputs().iter().enumerate() {
        let c = eg.add(EbbNode::Input(i as u32));
        values.insert(ValueRef::new(id, 0), c);
        inputs.push(c);
    }
    let mut originals = Vec::with_capacity(g.order().len());
    let mut roots = Vec::new();
    for (pos, &id) in g.order().iter().enumerate() {
        let n = g.node(id);
        if n.kind() == OpKind::Input {
            continue;
        }
        let mut operands = Vec::new();
        for v in g.operands(id) {
            let c = values
                .get(&v)
                .copied()
                .ok_or_else(|| RewriteError::Encode {
                    position: pos,
                    op: n.kind().name().into(),
                    msg: format!("operand {v} is not defined before use"),
                })?;
            operands.push(c);
        }
        let (enode, class) = if is_opaque(g, id) {
            let op = eg.analysis.opaque.len() as u32;
            eg.analysis.opaque.push(n.clone());
            let enode = EbbNode::Opaque {
                op,
                children: operands,
            };
            let class = eg.add(enode.clone());
            for k in 0..n.outputs.len() {
                let r = eg.add(EbbNode::Result {
                    index: k as u32,
                    child: [class],
                });
                values.insert(ValueRef::new(id, k as u32), r);
            }
            (enode, class)
        } else {
            let mut children = Vec::with_capacity(operands.len() + 1);
            if has_payload_child(n.kind()) {
                let declared = matches!(n.kind(), OpKind::Constant | OpKind::DimConstant)
                    .then(|| n.outputs.clone());
                let a = eg.analysis.payloads.intern(PayloadEntry::with(
                    n.op.clone(),
                    n.regions.clone(),
                    declared,
                ));
                children.push(eg.add(EbbNode::Payload(a)));
            }
            children.extend(operands);
            let mut enode = EbbNode::Op {
                kind: n.kind(),
                copy: 0,
                children,
            };
            if !merge_duplicates {
                while eg.lookup(enode.clone()).is_some() {
                    if let EbbNode::Op { copy, .. } = &mut enode {
                        *copy += 1;
                    }
                }
            }
            let class = eg.add(enode.clone());
            match &eg[class].data {
                ClassData::Tensor(t) if *t == n.outputs[0] => {}
                other => {
                    return Err(RewriteError::Encode {
                        position: pos,
                        op: n.kind().name().into(),
                        msg: format!(
                            "declared type {} but the e-graph infers {other:?}",
                            n.outputs[0]
                        ),
                    })
                }
            }
            values.insert(ValueRef::new(id, 0), class);
            (enode, class)
        };
        if g.users(id).is_empty() {
            roots.push(class);
        }
        originals.push(Original {
            node: id,
            pos,
            enode,
            class,
        });
    }
    for v in g.outputs() {
        let c = values.get(v).copied().ok_or(RewriteError::Encode {
            position: 0,
            op: "return".into(),
            msg: format!("output {v} refers to a missing value"),
        })?;
        roots.push(c);
    }
    eg.rebuild();
    debug_assert!(originals.iter().all(|o| o.enode.all(|c| eg.find(c) == c)));
    Ok(Encoded {
        egraph: eg,
        values,
        originals,
        roots,
        inputs,
    })
}
