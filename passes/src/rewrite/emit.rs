//! E-graph to graph: rebuilds a [`Graph`] from the e-nodes chosen by
//! [`super::extract::extract`], one op per materialized e-class, so that shared subterms
//! stay shared.
//!
//! The program order follows the input graph: an e-class containing an original op takes
//! that op's position; an e-class that rules created is placed just before its first user
//! (as late as possible, to keep its live range short). A topological sort (Kahn's
//! algorithm with a min-heap on these positions) turns the positions into a valid order.
//!
//! Invariant: inputs (all of them, in argument order), outputs and output names, the symbol
//! scope and the shape assertions are those of the input graph; an op kept from the input
//! graph keeps its location.

use super::encode::Encoded;
use super::extract::Extraction;
use super::lang::{payload_entry, tensor, ClassData, EbbEGraph, EbbNode};
use super::RewriteError;
use ebb_ir::{Graph, Node, NodeId, Op, ValueRef};
use egg::{Id, Language};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

fn ix(id: Id) -> usize {
    usize::from(id)
}

/// Rebuilds the graph of extraction `ex`. See the module docs.
///
/// Errors: [`RewriteError::Extract`] when a chosen e-node refers to something the graph
/// cannot express (a payload leaf where an operand is expected).
pub(crate) fn emit(
    g: &Graph,
    enc: &Encoded,
    eg: &EbbEGraph,
    ex: &Extraction,
) -> Result<Graph, RewriteError> {
    let n = ex.choice.len();
    let node_at =
        |c: usize| -> Option<&EbbNode> { ex.choice[c].map(|j| &eg[Id::from(c)].nodes[j]) };
    let mut out = Graph::new(&g.name);
    out.scope = g.scope.clone();
    out.assertions = g.assertions.clone();
    let mut value: Vec<Option<ValueRef>> = vec![None; n];
    let mut op_of: Vec<Option<NodeId>> = vec![None; n];
    for (i, &id) in g.inputs().iter().enumerate() {
        let v = out.add_input(g.input_name(id), g.node(id).outputs[0].clone());
        *out.node_mut(v.node) = g.node(id).clone();
        value[ix(eg.find(enc.inputs[i]))] = Some(v);
    }
    // Classes to emit: active, not payload leaves, not already inputs.
    let emit_class = |c: usize| {
        ex.active[c] && value[c].is_none() && !matches!(eg[Id::from(c)].data, ClassData::Payload(_))
    };
    let mut todo: Vec<usize> = (0..n).filter(|&c| emit_class(c)).collect();
    // Anchors: original position, or the earliest user's anchor (parents first).
    let mut anchor: Vec<usize> = ex
        .orig_pos
        .iter()
        .map(|p| p.unwrap_or(usize::MAX))
        .collect();
    todo.sort_by_key(|&c| Reverse(ex.rank[c]));
    for &c in &todo {
        let a = anchor[c];
        if let Some(node) = node_at(c) {
            for ch in node.children() {
                let ch = ix(*ch);
                if ex.orig_pos[ch].is_none() && a < anchor[ch] {
                    anchor[ch] = a;
                }
            }
        }
    }
    // Kahn's algorithm over the classes to emit.
    let mut indeg = vec![0usize; n];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &c in &todo {
        for ch in node_at(c).map(|x| x.children()).unwrap_or(&[]) {
            let ch = ix(*ch);
            if emit_class(ch) {
                indeg[c] += 1;
                users[ch].push(c);
            }
        }
    }
    let mut heap: BinaryHeap<Reverse<(usize, usize)>> = todo
        .iter()
        .filter(|&&c| indeg[c] == 0)
        .map(|&c| Reverse((anchor[c], c)))
        .collect();
    let mut emitted = 0;
    while let Some(Reverse((_, c))) = heap.pop() {
        emit_one(g, eg, ex, c, &mut out, &mut value, &mut op_of)?;
        emitted += 1;
        for &u in &users[c] {
            indeg[u] -= 1;
            if indeg[u] == 0 {
                heap.push(Reverse((anchor[u], u)));
            }
        }
    }
    if emitted != todo.len() {
        return Err(RewriteError::Extract(format!(
            "{} classes could not be ordered",
            todo.len() - emitted
        )));
    }
    let mut outputs = Vec::with_capacity(g.outputs().len());
    for v in g.outputs() {
        let c = enc.values.get(v).map(|c| ix(eg.find(*c)));
        outputs.push(
            c.and_then(|c| value[c])
                .ok_or_else(|| RewriteError::Extract(format!("output {v} was not emitted")))?,
        );
    }
    out.set_outputs(outputs, g.output_names.clone());
    Ok(out)
}

fn operand(value: &[Option<ValueRef>], id: Id) -> Result<ValueRef, RewriteError> {
    value[ix(id)].ok_or_else(|| RewriteError::Extract(format!("operand class {id} has no value")))
}

fn emit_one(
    g: &Graph,
    eg: &EbbEGraph,
    ex: &Extraction,
    c: usize,
    out: &mut Graph,
    value: &mut [Option<ValueRef>],
    op_of: &mut [Option<NodeId>],
) -> Result<(), RewriteError> {
    let j =
        ex.choice[c].ok_or_else(|| RewriteError::Extract(format!("class {c} has no choice")))?;
    let node = &eg[Id::from(c)].nodes[j];
    let loc = ex.orig[c]
        .filter(|(_, oj)| *oj == j)
        .and_then(|(id, _)| g.node(id).loc.clone());
    match node {
        EbbNode::Op { kind, .. } => {
            let (leaf, operands) = node.split_payload();
            let (op, regions) = match leaf {
                Some(a) => payload_entry(eg, a)
                    .filter(|e| e.op.kind() == *kind)
                    .map(|e| (e.op.clone(), e.regions.clone())),
                None => Op::simple(*kind).map(|op| (op, Vec::new())),
            }
            .ok_or_else(|| RewriteError::Extract(format!("`{kind}` without its payload")))?;
            let ty = tensor(eg, Id::from(c))
                .cloned()
                .ok_or_else(|| RewriteError::Extract(format!("`{kind}` is not a tensor")))?;
            let ops = operands
                .iter()
                .map(|o| operand(value, *o))
                .collect::<Result<Vec<_>, _>>()?;
            let new = Node {
                op,
                outputs: vec![ty],
                regions,
                loc,
            };
            let id = out.add_node(new, &ops);
            value[c] = Some(ValueRef::new(id, 0));
        }
        EbbNode::Opaque { op, children } => {
            let mut new = eg.analysis.opaque[*op as usize].clone();
            new.loc = new.loc.or(loc);
            let ops = children
                .iter()
                .map(|o| operand(value, *o))
                .collect::<Result<Vec<_>, _>>()?;
            op_of[c] = Some(out.add_node(new, &ops));
        }
        EbbNode::Result { index, child } => {
            let t = op_of[ix(eg.find(child[0]))].ok_or_else(|| {
                RewriteError::Extract(format!("result {index} of an op not emitted"))
            })?;
            value[c] = Some(ValueRef::new(t, *index));
        }
        EbbNode::Input(_) | EbbNode::Payload(_) => {
            return Err(RewriteError::Extract(format!(
                "class {c} chose a leaf that is not emitted"
            )));
        }
    }
    Ok(())
}
