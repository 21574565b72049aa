//! The graph of a binary plan file: each body (the graph and every region, flattened into one
//! list so that decoding never recurses on untrusted input) as its ops in program order, each
//! op as its kind's name, its attribute dictionary ([`Op::to_attrs`]), result types, operands
//! and region indices. Shapes, dimension attributes and scopes are indices into the file's
//! tables ([`super::exprs`]).
//!
//! Decoding rebuilds the graph exactly as the textual IR's parser does
//! (`ebb_ir::text::parse`): `input` ops first through [`Graph::add_input`] in the order of
//! their argument index, then the other ops through [`Graph::add_node`], then the stored
//! program order with [`Graph::set_order`]. So a decoded graph has the node ids, program
//! order and payloads of the graph parsed from the same graph's text. Payloads are rebuilt by
//! [`Op::from_attrs`], which validates them as the parser does; shapes are not re-inferred
//! (the IR verifier does that, on plans that are not stamped).

use super::exprs::{Interner, Ix, Tables};
use super::BinaryError;
use ebb_ir::graph::{ShapeAssertion, MAX_REGION_DEPTH};
use ebb_ir::op::{Attr, Attrs, Literal, Op, OpKind};
use ebb_ir::{DType, Graph, Node, NodeId, TensorType, ValueRef};
use serde::{Deserialize, Serialize};

/// The graph and its regions, body 0 the graph itself.
#[derive(Serialize, Deserialize)]
pub(super) struct BinGraph {
    bodies: Vec<BinBody>,
}

/// One graph body (the graph or a region).
#[derive(Serialize, Deserialize)]
struct BinBody {
    name: String,
    scope: Ix,
    assertions: Vec<ShapeAssertion>,
    ops: Vec<BinOp>,
    /// Graph outputs: (op index in `ops`, result index).
    outputs: Vec<(u32, u32)>,
    output_names: Vec<String>,
}

/// One op of a body.
#[derive(Serialize, Deserialize)]
struct BinOp {
    /// [`OpKind::name`].
    kind: String,
    attrs: Vec<(String, BinAttr)>,
    /// Result types: element type and dimensions.
    types: Vec<(DType, Vec<Ix>)>,
    /// (op index in the body, strictly before this op; result index).
    operands: Vec<(u32, u32)>,
    /// Indices of the region bodies in [`BinGraph::bodies`], each after this op's body.
    regions: Vec<u32>,
    loc: Option<String>,
}

/// [`Attr`] with dimensions as indices.
#[derive(Serialize, Deserialize)]
enum BinAttr {
    I64(i64),
    Ints(Vec<i64>),
    Dims(Vec<Ix>),
    Str(String),
    Bool(bool),
    F64(f64),
    DType(DType),
    Literal(Literal),
}

impl BinAttr {
    fn of(a: Attr, ix: &mut Interner) -> BinAttr {
        match a {
            Attr::I64(v) => BinAttr::I64(v),
            Attr::Ints(v) => BinAttr::Ints(v),
            Attr::Dims(v) => BinAttr::Dims(ix.exprs(&v)),
            Attr::Str(v) => BinAttr::Str(v),
            Attr::Bool(v) => BinAttr::Bool(v),
            Attr::F64(v) => BinAttr::F64(v),
            Attr::DType(v) => BinAttr::DType(v),
            Attr::Literal(v) => BinAttr::Literal(v),
        }
    }

    fn into_attr(self, t: &Tables) -> Result<Attr, BinaryError> {
        Ok(match self {
            BinAttr::I64(v) => Attr::I64(v),
            BinAttr::Ints(v) => Attr::Ints(v),
            BinAttr::Dims(v) => Attr::Dims(t.exprs(&v)?),
            BinAttr::Str(v) => Attr::Str(v),
            BinAttr::Bool(v) => Attr::Bool(v),
            BinAttr::F64(v) => Attr::F64(v),
            BinAttr::DType(v) => Attr::DType(v),
            BinAttr::Literal(v) => Attr::Literal(v),
        })
    }
}

impl BinGraph {
    /// The encoding of `g`, its expressions and scopes added to `ix`.
    ///
    /// # Errors
    /// [`BinaryError::Encode`] when a scope does not serialize or a value is outside the
    /// program order.
    pub(super) fn of(g: &Graph, ix: &mut Interner) -> Result<BinGraph, BinaryError> {
        let mut out = BinGraph { bodies: Vec::new() };
        out.push(g, ix)?;
        Ok(out)
    }

    /// Appends `g` as a body (and its regions after it); returns its index.
    fn push(&mut self, g: &Graph, ix: &mut Interner) -> Result<u32, BinaryError> {
        let at = self.bodies.len();
        self.bodies.push(BinBody {
            name: g.name.clone(),
            scope: ix.scope(&g.scope)?,
            assertions: g.assertions.clone(),
            ops: Vec::new(),
            outputs: Vec::new(),
            output_names: g.output_names.clone(),
        });
        let order = g.order();
        let mut pos = std::collections::HashMap::with_capacity(order.len());
        for (i, &id) in order.iter().enumerate() {
            pos.insert(id, i as u32);
        }
        let at_pos = |v: ValueRef| -> Result<(u32, u32), BinaryError> {
            pos.get(&v.node)
                .map(|&p| (p, v.output))
                .ok_or_else(|| BinaryError::Encode("a value outside the program order".into()))
        };
        let mut ops = Vec::with_capacity(order.len());
        for &id in order {
            let n = g.node(id);
            let mut regions = Vec::with_capacity(n.regions.len());
            for r in &n.regions {
                regions.push(self.push(r, ix)?);
            }
            ops.push(BinOp {
                kind: n.kind().name().to_string(),
                attrs: n
                    .op
                    .to_attrs()
                    .into_iter()
                    .map(|(k, a)| (k, BinAttr::of(a, ix)))
                    .collect(),
                types: n
                    .outputs
                    .iter()
                    .map(|t| (t.dtype, ix.exprs(&t.shape)))
                    .collect(),
                operands: g
                    .operands(id)
                    .into_iter()
                    .map(at_pos)
                    .collect::<Result<_, _>>()?,
                regions,
                loc: n.loc.clone(),
            });
        }
        let outputs = g
            .outputs()
            .iter()
            .map(|&v| at_pos(v))
            .collect::<Result<_, _>>()?;
        let body = &mut self.bodies[at];
        body.ops = ops;
        body.outputs = outputs;
        Ok(at as u32)
    }

    /// The graph (see the module docs).
    ///
    /// # Errors
    /// [`BinaryError::Graph`] naming the body and op: an unknown op kind, an invalid payload,
    /// an operand or output that is not an earlier op's result, a region index that is not a
    /// later, unused body, regions deeper than [`MAX_REGION_DEPTH`], an `input` op with
    /// operands or regions or not exactly one result, or bodies no op refers to.
    pub(super) fn into_graph(self, t: &Tables) -> Result<Graph, BinaryError> {
        let mut bodies: Vec<Option<BinBody>> = self.bodies.into_iter().map(Some).collect();
        if bodies.is_empty() {
            return Err(BinaryError::Graph("the file holds no graph".into()));
        }
        let mut used = 1;
        let g = build(&mut bodies, 0, 0, &mut used, t)?;
        if used != bodies.len() {
            return Err(BinaryError::Graph(format!(
                "{} graph bodies are not regions of any op",
                bodies.len() - used
            )));
        }
        Ok(g)
    }
}

/// An op read from the file: op, result types, operands, region bodies, location.
type ReadOp = (
    Op,
    Vec<TensorType>,
    Vec<(u32, u32)>,
    Vec<u32>,
    Option<String>,
);

/// Builds body `at` at region depth `depth`, taking it (and its regions) out of `bodies`;
/// `used` counts the bodies taken.
fn build(
    bodies: &mut [Option<BinBody>],
    at: usize,
    depth: usize,
    used: &mut usize,
    t: &Tables,
) -> Result<Graph, BinaryError> {
    let Some(body) = bodies[at].take() else {
        return Err(BinaryError::Graph(format!(
            "graph body {at} is the region of two ops"
        )));
    };
    let err = |i: usize, msg: String| {
        BinaryError::Graph(format!("graph `{}`: op #{i}: {msg}", body.name))
    };
    let edges = body.ops.iter().map(|o| o.operands.len()).sum();
    let mut g = Graph::with_capacity(&body.name, body.ops.len(), edges);
    g.scope = t.scope(body.scope)?;
    g.assertions = body.assertions;
    // Kinds and payloads first, so every op is checked before the graph is built.
    let mut ops: Vec<ReadOp> = Vec::with_capacity(body.ops.len());
    for (i, o) in body.ops.into_iter().enumerate() {
        let kind = OpKind::from_name(&o.kind)
            .ok_or_else(|| err(i, format!("unknown op kind `{}`", o.kind)))?;
        let mut attrs = Attrs::new();
        for (k, a) in o.attrs {
            attrs.insert(k, a.into_attr(t)?);
        }
        let op = Op::from_attrs(kind, attrs).map_err(|e| err(i, e.to_string()))?;
        let types = o
            .types
            .into_iter()
            .map(|(dtype, shape)| Ok(TensorType::new(dtype, t.exprs(&shape)?)))
            .collect::<Result<Vec<_>, BinaryError>>()?;
        for &(j, k) in &o.operands {
            if j as usize >= i {
                return Err(err(i, format!("operand from op #{j}, not an earlier op")));
            }
            let results = ops_types_len(&ops, j as usize);
            if k as usize >= results {
                return Err(err(
                    i,
                    format!("operand {j}:{k}: op #{j} has {results} results"),
                ));
            }
        }
        if kind == OpKind::Input
            && (!o.operands.is_empty() || !o.regions.is_empty() || types.len() != 1)
        {
            return Err(err(
                i,
                "an `input` op has no operands or regions and exactly one result".into(),
            ));
        }
        ops.push((op, types, o.operands, o.regions, o.loc));
    }
    // Regions, depth-first; every index after this body's.
    let mut regions: Vec<Vec<Graph>> = Vec::with_capacity(ops.len());
    for (i, o) in ops.iter_mut().enumerate() {
        let mut rs = Vec::with_capacity(o.3.len());
        for &r in &o.3 {
            let r = r as usize;
            if r <= at || r >= bodies.len() {
                return Err(err(i, format!("region body {r} is not a later body")));
            }
            if depth + 1 > MAX_REGION_DEPTH {
                return Err(err(
                    i,
                    format!("regions nested more than {MAX_REGION_DEPTH} deep"),
                ));
            }
            *used += 1;
            rs.push(build(bodies, r, depth + 1, used, t)?);
        }
        regions.push(rs);
    }
    // Inputs in argument order (ties by position), then the other ops, as the parser does.
    let index_of = |op: &Op| match op {
        Op::Input(s) => s.index,
        _ => usize::MAX,
    };
    let mut inputs: Vec<usize> = (0..ops.len())
        .filter(|&i| ops[i].0.kind() == OpKind::Input)
        .collect();
    inputs.sort_by_key(|&i| (index_of(&ops[i].0), i));
    let mut ids: Vec<Option<NodeId>> = vec![None; ops.len()];
    let mut taken: Vec<Option<_>> = ops.into_iter().zip(regions).map(Some).collect();
    for i in inputs {
        let Some(((op, types, _, _, loc), _)) = taken[i].take() else {
            continue;
        };
        // One result, checked above.
        let ty = types
            .into_iter()
            .next()
            .unwrap_or_else(|| TensorType::scalar(DType::F32));
        let v = g.add_input("", ty);
        let n = g.node_mut(v.node);
        n.op = op;
        n.loc = loc;
        ids[i] = Some(v.node);
    }
    for i in 0..taken.len() {
        let Some(((op, types, operands, _, loc), regions)) = taken[i].take() else {
            continue;
        };
        let operands: Vec<ValueRef> = operands
            .iter()
            .filter_map(|&(j, k)| ids[j as usize].map(|id| ValueRef::new(id, k)))
            .collect();
        let node = Node {
            op,
            outputs: types,
            regions,
            loc,
        };
        ids[i] = Some(g.add_node(node, &operands));
    }
    let order: Vec<NodeId> = ids.iter().flatten().copied().collect();
    if body.output_names.len() != body.outputs.len() {
        return Err(BinaryError::Graph(format!(
            "graph `{}`: {} output names for {} outputs",
            body.name,
            body.output_names.len(),
            body.outputs.len()
        )));
    }
    let mut outs = Vec::with_capacity(body.outputs.len());
    for (x, &(j, k)) in body.outputs.iter().enumerate() {
        let id = ids.get(j as usize).copied().flatten().ok_or_else(|| {
            BinaryError::Graph(format!(
                "graph `{}`: output {x} names op #{j}, which does not exist",
                body.name
            ))
        })?;
        if k as usize >= g.node(id).outputs.len() {
            return Err(BinaryError::Graph(format!(
                "graph `{}`: output {x} names result {k} of op #{j}, which has fewer",
                body.name
            )));
        }
        outs.push(ValueRef::new(id, k));
    }
    g.set_order(order);
    g.set_outputs(outs, body.output_names);
    Ok(g)
}

/// The number of results of the already-read op `j` (0 when out of range).
fn ops_types_len(ops: &[ReadOp], j: usize) -> usize {
    ops.get(j).map_or(0, |o| o.1.len())
}
