//! Building a decoded body of a binary plan file into a [`Graph`] (see the parent module's
//! docs for the op stream): every read of the untrusted stream checked, ops added as the
//! textual IR's parser adds them, regions built (or, for a report, fusion regions elided) at
//! most [`MAX_REGION_DEPTH`] deep.

use super::{BinBody, BodyEntry};
use crate::binary::exprs::{Ix, Tables};
use crate::binary::BinaryError;
use ebb_ir::graph::MAX_REGION_DEPTH;
use ebb_ir::op::{Op, OpKind};
use ebb_ir::{DType, Graph, Node, NodeId, TensorType, ValueRef};
use std::collections::HashMap;

/// The decoded tables every body's ops name.
pub(super) struct Shared<'a> {
    pub(super) payloads: Vec<Op>,
    pub(super) types: Vec<TensorType>,
    pub(super) locs: Vec<String>,
    pub(super) t: &'a Tables,
    /// Build for a report ([`super::DecodeOptions::elide_fusion_bodies`]): every body's
    /// in-place writes and every fusion region's tile bytes taken from the file, and a fusion
    /// region whose tile bytes the file holds left empty.
    pub(super) elide: bool,
}

/// Reads a body's op stream, every read checked.
struct Stream<'a> {
    items: &'a [u32],
    at: usize,
}

impl Stream<'_> {
    fn next(&mut self) -> Option<u32> {
        let x = self.items.get(self.at).copied();
        self.at += 1;
        x
    }
}

/// An op read from a stream: payload, result types, operands (op index in the body, result),
/// region bodies, location.
struct ReadOp {
    payload: usize,
    types: Vec<TensorType>,
    operands: std::ops::Range<usize>,
    regions: std::ops::Range<usize>,
    loc: Option<String>,
}

/// Builds body `at` at region depth `depth`, taking it (and its regions) out of `bodies`;
/// `used` counts the bodies taken.
pub(super) fn build(
    bodies: &mut [Option<BodyEntry<'_>>],
    at: usize,
    depth: usize,
    used: &mut usize,
    sh: &Shared<'_>,
) -> Result<Graph, BinaryError> {
    let Some(entry) = bodies[at].take() else {
        return Err(BinaryError::Graph(format!(
            "graph body {at} is the region of two ops"
        )));
    };
    let (mut body, rest): (BinBody, &[u8]) = postcard::take_from_bytes(entry.data)
        .map_err(|e| BinaryError::Payload(format!("graph body {at}: {e}")))?;
    body.name = entry.name.to_string();
    if !rest.is_empty() {
        return Err(BinaryError::Payload(format!(
            "graph body {at}: {} bytes after its end",
            rest.len()
        )));
    }
    let err = |i: usize, msg: String| {
        BinaryError::Graph(format!("graph `{}`: op #{i}: {msg}", body.name))
    };
    let n = body.ops as usize;
    if n > body.stream.len() {
        return Err(err(
            0,
            format!("{n} ops in a stream of {}", body.stream.len()),
        ));
    }
    // Every op read and checked before the graph is built; operands and region indices are
    // kept in two flat lists.
    let mut s = Stream {
        items: &body.stream,
        at: 0,
    };
    let mut ops: Vec<ReadOp> = Vec::with_capacity(n);
    let mut operands: Vec<(u32, u32)> = Vec::with_capacity(body.stream.len() / 4);
    let mut region_ix: Vec<u32> = Vec::new();
    for i in 0..n {
        let ended = || err(i, "the op stream ends early".into());
        let payload = s.next().ok_or_else(ended)? as usize;
        let op = sh.payloads.get(payload).ok_or_else(|| {
            err(
                i,
                format!("payload {payload} of a table of {}", sh.payloads.len()),
            )
        })?;
        let loc = match s.next().ok_or_else(ended)? {
            0 => None,
            l => Some(
                sh.locs
                    .get(l as usize - 1)
                    .ok_or_else(|| {
                        err(
                            i,
                            format!("location {} of a table of {}", l - 1, sh.locs.len()),
                        )
                    })?
                    .clone(),
            ),
        };
        let results = s.next().ok_or_else(ended)? as usize;
        if results > s.items.len() {
            return Err(ended());
        }
        let mut types = Vec::with_capacity(results);
        for _ in 0..results {
            let ty = s.next().ok_or_else(ended)? as usize;
            types.push(
                sh.types
                    .get(ty)
                    .ok_or_else(|| err(i, format!("type {ty} of a table of {}", sh.types.len())))?
                    .clone(),
            );
        }
        let from = operands.len();
        let count = s.next().ok_or_else(ended)?;
        for _ in 0..count {
            let j = s.next().ok_or_else(ended)?;
            let k = s.next().ok_or_else(ended)?;
            if j as usize >= i {
                return Err(err(i, format!("operand from op #{j}, not an earlier op")));
            }
            let have = ops[j as usize].types.len();
            if k as usize >= have {
                return Err(err(
                    i,
                    format!("operand {j}:{k}: op #{j} has {have} results"),
                ));
            }
            operands.push((j, k));
        }
        let rfrom = region_ix.len();
        let count = s.next().ok_or_else(ended)?;
        for _ in 0..count {
            region_ix.push(s.next().ok_or_else(ended)?);
        }
        if op.kind() == OpKind::Input
            && (operands.len() > from || region_ix.len() > rfrom || types.len() != 1)
        {
            return Err(err(
                i,
                "an `input` op has no operands or regions and exactly one result".into(),
            ));
        }
        ops.push(ReadOp {
            payload,
            types,
            operands: from..operands.len(),
            regions: rfrom..region_ix.len(),
            loc,
        });
    }
    if s.at != s.items.len() {
        return Err(BinaryError::Graph(format!(
            "graph `{}`: {} integers after its last op",
            body.name,
            s.items.len() - s.at
        )));
    }
    let mut g = Graph::with_capacity(&body.name, n, operands.len());
    g.scope = sh.t.scope(body.scope)?;
    g.assertions = body.assertions;
    // Regions, depth-first; every index after this body's.
    let mut regions: Vec<Vec<Graph>> = Vec::with_capacity(n);
    for (i, o) in ops.iter().enumerate() {
        let mut rs = Vec::with_capacity(o.regions.len());
        for &r in &region_ix[o.regions.clone()] {
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
            let fusion = matches!(sh.payloads[o.payload], Op::Fusion(_)) && o.regions.len() == 1;
            let tile_bytes = bodies[r].as_ref().and_then(|b| b.tile_bytes);
            match (fusion, tile_bytes) {
                (true, Some(e)) if sh.elide => rs.push(elided(bodies, r, e, used, sh)?),
                _ => {
                    *used += 1;
                    let region = build(bodies, r, depth + 1, used, sh)?;
                    if let (true, Some(e)) = (fusion && sh.elide, tile_bytes) {
                        ebb_ir::op::remember_fusion_tile_bytes(&region, sh.t.expr(e)?);
                    }
                    rs.push(region);
                }
            }
        }
        regions.push(rs);
    }
    // Inputs in argument order (ties by position), then the other ops, as the parser does.
    let index_of = |i: usize| match &sh.payloads[ops[i].payload] {
        Op::Input(s) => s.index,
        _ => usize::MAX,
    };
    let mut inputs: Vec<usize> = (0..n)
        .filter(|&i| sh.payloads[ops[i].payload].kind() == OpKind::Input)
        .collect();
    inputs.sort_by_key(|&i| (index_of(i), i));
    let mut ids: Vec<Option<NodeId>> = vec![None; n];
    // Each op's operand count: its node gets exactly these operands (each names an earlier op,
    // built before it), so the in-place writes below are checked without reading the graph.
    let operand_counts: Vec<usize> = ops.iter().map(|o| o.operands.len()).collect();
    let mut taken: Vec<Option<(ReadOp, Vec<Graph>)>> =
        ops.into_iter().zip(regions).map(Some).collect();
    for i in inputs {
        let Some((o, _)) = taken[i].take() else {
            continue;
        };
        // One result, checked above.
        let ty = o
            .types
            .into_iter()
            .next()
            .unwrap_or_else(|| TensorType::scalar(DType::F32));
        let v = g.add_input("", ty);
        let node = g.node_mut(v.node);
        node.op = sh.payloads[o.payload].clone();
        node.loc = o.loc;
        ids[i] = Some(v.node);
    }
    let mut refs: Vec<ValueRef> = Vec::new();
    for i in 0..taken.len() {
        let Some((o, regions)) = taken[i].take() else {
            continue;
        };
        refs.clear();
        refs.extend(
            operands[o.operands.clone()]
                .iter()
                .filter_map(|&(j, k)| ids[j as usize].map(|id| ValueRef::new(id, k))),
        );
        let node = Node {
            op: sh.payloads[o.payload].clone(),
            outputs: o.types,
            regions,
            loc: o.loc,
        };
        ids[i] = Some(g.add_node(node, &refs));
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
    if sh.elide {
        let mut writes: HashMap<NodeId, Vec<ebb_ir::op::InPlace>> = HashMap::new();
        for &(j, operand, result) in &body.in_place {
            let bad = || {
                BinaryError::Graph(format!(
                    "graph `{}`: in-place write ({j}, {operand}, {result}) names no operand and result",
                    body.name
                ))
            };
            let id = ids.get(j as usize).copied().flatten().ok_or_else(bad)?;
            if operand as usize >= operand_counts[j as usize]
                || result as usize >= g.node(id).outputs.len()
            {
                return Err(bad());
            }
            writes.entry(id).or_default().push(ebb_ir::op::InPlace {
                operand: operand as usize,
                result: result as usize,
            });
        }
        ebb_ir::op::remember_in_place_writes(&g, writes);
    }
    Ok(g)
}

/// The region body `at` of a `fusion` op left empty (its name only), its tile
/// bytes `tile_bytes` remembered; it and its descendants are taken out of `bodies`.
fn elided(
    bodies: &mut [Option<BodyEntry<'_>>],
    at: usize,
    tile_bytes: Ix,
    used: &mut usize,
    sh: &Shared<'_>,
) -> Result<Graph, BinaryError> {
    let Some(body) = bodies[at].take() else {
        return Err(BinaryError::Graph(format!(
            "graph body {at} is the region of two ops"
        )));
    };
    let end = at
        .checked_add(body.descendants as usize)
        .filter(|&e| e < bodies.len())
        .ok_or_else(|| {
            BinaryError::Graph(format!(
                "graph body {at}: {} descendants in a list of {}",
                body.descendants,
                bodies.len()
            ))
        })?;
    for b in &mut bodies[at + 1..=end] {
        if b.take().is_none() {
            return Err(BinaryError::Graph(format!(
                "a region of graph body {at} is the region of two ops"
            )));
        }
    }
    *used += 1 + body.descendants as usize;
    let g = Graph::new(body.name);
    ebb_ir::op::remember_fusion_tile_bytes(&g, sh.t.expr(tile_bytes)?);
    Ok(g)
}
