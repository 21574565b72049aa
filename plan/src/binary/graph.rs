//! The graph of a binary plan file: its distinct op payloads, result types and locations each
//! stored once in a table, and each body (the graph and every region, flattened into one list
//! so that decoding never recurses on untrusted input) as one stream of integers naming them.
//!
//! # Tables
//! * payloads: an op's kind name and attribute dictionary ([`Op::to_attrs`]), dimension
//!   attributes as indices into the file's expressions ([`super::exprs`]); rebuilt once each by
//!   [`Op::from_attrs`], which validates them as the textual IR's parser does;
//! * types: an element type and its dimensions as expression indices;
//! * locations: source locations as text.
//!
//! # Bodies
//! Each body is stored as its own postcard bytes, beside its name, the number of bodies below
//! it and, for a fusion op's region, its tile bytes: a body is decoded only when it is built,
//! and a report that elides fusion regions ([`super::DecodeOptions`]) skips theirs unread.
//!
//! # A body's op stream
//! For each op in program order, integers: its payload; its location plus one (0: none); its
//! result count, then each result's type; its operand count, then each operand as (op index in
//! the body, strictly before this op; result index); its region count, then each region's
//! body index in [`BinGraph::bodies`] (each after this op's body, each used once).
//!
//! Decoding rebuilds the graph exactly as the textual IR's parser does
//! (`ebb_ir::text::parse`): `input` ops first through [`Graph::add_input`] in the order of
//! their argument index, then the other ops through [`Graph::add_node`], then the stored
//! program order with [`Graph::set_order`]. So a decoded graph has the node ids, program
//! order and payloads of the graph parsed from the same graph's text. Shapes are not
//! re-inferred (the IR verifier does that, on plans that are not stamped).

use super::exprs::{Interner, Ix, Tables};
use super::BinaryError;
use ebb_ir::graph::ShapeAssertion;
use ebb_ir::op::{Attr, Attrs, Literal, Op, OpKind};
use ebb_ir::{DType, Graph, TensorType, ValueRef};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

mod build;
use build::{build, Shared};

/// The graph and its regions, body 0 the graph itself, with the tables their ops name.
#[derive(Serialize, Deserialize)]
pub(super) struct BinGraph<'a> {
    payloads: Vec<BinPayload>,
    types: Vec<(DType, Vec<Ix>)>,
    locs: Vec<String>,
    #[serde(borrow)]
    bodies: Vec<BodyEntry<'a>>,
}

/// One body in the list: what eliding it needs, and the body itself as postcard bytes, read
/// in place and decoded only when the body is built.
#[derive(Serialize, Deserialize)]
struct BodyEntry<'a> {
    name: &'a str,
    tile_bytes: Option<Ix>,
    descendants: u32,
    data: &'a [u8],
}

/// One graph body (the graph or a region).
#[derive(Serialize, Deserialize)]
struct BinBody {
    /// Stored in its [`BodyEntry`].
    #[serde(skip)]
    name: String,
    scope: Ix,
    assertions: Vec<ShapeAssertion>,
    /// Number of ops in `stream`.
    ops: u32,
    /// The ops (see the module docs).
    stream: Vec<u32>,
    /// Graph outputs: (op index in the body, result index).
    outputs: Vec<(u32, u32)>,
    output_names: Vec<String>,
    /// The body's in-place writes ([`ebb_ir::op::in_place_writes`]): (op index in the body,
    /// operand, result).
    in_place: Vec<(u32, u32, u32)>,
    /// For the region of a `fusion` op: its tile bytes ([`ebb_ir::op::fusion_tile_bytes`]),
    /// when they compute (stored in its [`BodyEntry`]).
    #[serde(skip)]
    tile_bytes: Option<Ix>,
    /// The number of bodies after this one that are its regions, theirs, and so on (they
    /// follow it in the list; stored in its [`BodyEntry`]).
    #[serde(skip)]
    descendants: u32,
}

/// One distinct op payload.
#[derive(Serialize, Deserialize)]
struct BinPayload {
    /// [`OpKind::name`].
    kind: String,
    attrs: Vec<(String, BinAttr)>,
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

/// Collects the distinct payloads, types and locations while encoding. Payloads are compared
/// by their encoded form (a float attribute compares by its bits there, so `-0.0` and `0.0`
/// or two NaNs stay apart).
#[derive(Default)]
struct Distinct {
    payloads: HashMap<Vec<u8>, u32>,
    payload_list: Vec<BinPayload>,
    types: HashMap<(DType, Vec<Ix>), u32>,
    type_list: Vec<(DType, Vec<Ix>)>,
    locs: HashMap<String, u32>,
    loc_list: Vec<String>,
}

impl Distinct {
    fn payload(&mut self, p: BinPayload) -> Result<u32, BinaryError> {
        let key = postcard::to_stdvec(&p).map_err(|e| BinaryError::Encode(e.to_string()))?;
        let n = self.payload_list.len() as u32;
        Ok(*self.payloads.entry(key).or_insert_with(|| {
            self.payload_list.push(p);
            n
        }))
    }

    fn ty(&mut self, t: (DType, Vec<Ix>)) -> u32 {
        let n = self.type_list.len() as u32;
        *self.types.entry(t.clone()).or_insert_with(|| {
            self.type_list.push(t);
            n
        })
    }

    fn loc(&mut self, l: &str) -> u32 {
        if let Some(&i) = self.locs.get(l) {
            return i;
        }
        let n = self.loc_list.len() as u32;
        self.locs.insert(l.to_string(), n);
        self.loc_list.push(l.to_string());
        n
    }
}

/// The bodies of a graph, each encoded ([`BinGraph::of`] borrows them).
pub(super) struct Encoded {
    d: Distinct,
    /// Name, tile bytes, descendants and the encoded body.
    bodies: Vec<(String, Option<Ix>, u32, Vec<u8>)>,
}

impl Encoded {
    /// The encoding of `g`'s bodies, its expressions and scopes added to `ix`.
    ///
    /// # Errors
    /// [`BinaryError::Encode`] when a scope does not serialize, a value is outside the
    /// program order, or a body does not encode.
    pub(super) fn of(g: &Graph, ix: &mut Interner) -> Result<Encoded, BinaryError> {
        let mut d = Distinct::default();
        let mut bodies = Vec::new();
        push(&mut bodies, &mut d, g, ix)?;
        let bodies = bodies
            .into_iter()
            .map(|b| {
                let data =
                    postcard::to_stdvec(&b).map_err(|e| BinaryError::Encode(e.to_string()))?;
                Ok((b.name, b.tile_bytes, b.descendants, data))
            })
            .collect::<Result<_, BinaryError>>()?;
        Ok(Encoded { d, bodies })
    }
}

impl<'a> BinGraph<'a> {
    /// The graph of `e` as stored.
    pub(super) fn of(e: &'a mut Encoded) -> BinGraph<'a> {
        BinGraph {
            payloads: std::mem::take(&mut e.d.payload_list),
            types: std::mem::take(&mut e.d.type_list),
            locs: std::mem::take(&mut e.d.loc_list),
            bodies: e
                .bodies
                .iter()
                .map(|(name, tile_bytes, descendants, data)| BodyEntry {
                    name,
                    tile_bytes: *tile_bytes,
                    descendants: *descendants,
                    data,
                })
                .collect(),
        }
    }

    /// The graph (see the module docs).
    ///
    /// # Errors
    /// [`BinaryError::Graph`] naming the body and op: an unknown op kind, an invalid payload,
    /// a table index out of range, a stream that ends early or runs on, an operand or output
    /// that is not an earlier op's result, a region index that is not a later, unused body,
    /// regions deeper than [`ebb_ir::graph::MAX_REGION_DEPTH`], an `input` op with operands or regions or
    /// not exactly one result, or bodies no op refers to.
    pub(super) fn into_graph(self, t: &Tables, elide: bool) -> Result<Graph, BinaryError> {
        let payloads = self
            .payloads
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let bad = |msg: String| BinaryError::Graph(format!("op payload {i}: {msg}"));
                let kind = OpKind::from_name(&p.kind)
                    .ok_or_else(|| bad(format!("unknown op kind `{}`", p.kind)))?;
                let mut attrs = Attrs::new();
                for (k, a) in p.attrs {
                    attrs.insert(k, a.into_attr(t)?);
                }
                Op::from_attrs(kind, attrs).map_err(|e| bad(e.to_string()))
            })
            .collect::<Result<Vec<Op>, BinaryError>>()?;
        let types = self
            .types
            .into_iter()
            .map(|(dtype, shape)| Ok(TensorType::new(dtype, t.exprs(&shape)?)))
            .collect::<Result<Vec<_>, BinaryError>>()?;
        let shared = Shared {
            payloads,
            types,
            locs: self.locs,
            t,
            elide,
        };
        let mut bodies: Vec<Option<BodyEntry<'_>>> = self.bodies.into_iter().map(Some).collect();
        if bodies.is_empty() {
            return Err(BinaryError::Graph("the file holds no graph".into()));
        }
        let mut used = 1;
        let g = build(&mut bodies, 0, 0, &mut used, &shared)?;
        if used != bodies.len() {
            return Err(BinaryError::Graph(format!(
                "{} graph bodies are not regions of any op",
                bodies.len() - used
            )));
        }
        Ok(g)
    }
}

/// Appends `g` as a body (and its regions after it); returns its index.
fn push(
    bodies: &mut Vec<BinBody>,
    d: &mut Distinct,
    g: &Graph,
    ix: &mut Interner,
) -> Result<u32, BinaryError> {
    let at = bodies.len();
    bodies.push(BinBody {
        name: g.name.clone(),
        scope: ix.scope(&g.scope)?,
        assertions: g.assertions.clone(),
        ops: 0,
        stream: Vec::new(),
        outputs: Vec::new(),
        output_names: g.output_names.clone(),
        in_place: Vec::new(),
        tile_bytes: None,
        descendants: 0,
    });
    let order = g.order();
    let mut pos = HashMap::with_capacity(order.len());
    for (i, &id) in order.iter().enumerate() {
        pos.insert(id, i as u32);
    }
    let at_pos = |v: ValueRef| -> Result<(u32, u32), BinaryError> {
        pos.get(&v.node)
            .map(|&p| (p, v.output))
            .ok_or_else(|| BinaryError::Encode("a value outside the program order".into()))
    };
    let mut stream = Vec::with_capacity(order.len() * 8);
    for &id in order {
        let n = g.node(id);
        let payload = BinPayload {
            kind: n.kind().name().to_string(),
            attrs: n
                .op
                .to_attrs()
                .into_iter()
                .map(|(k, a)| (k, BinAttr::of(a, ix)))
                .collect(),
        };
        stream.push(d.payload(payload)?);
        stream.push(n.loc.as_deref().map_or(0, |l| d.loc(l) + 1));
        stream.push(n.outputs.len() as u32);
        for t in &n.outputs {
            stream.push(d.ty((t.dtype, ix.exprs(&t.shape))));
        }
        let operands = g.operands(id);
        stream.push(operands.len() as u32);
        for v in operands {
            let (j, k) = at_pos(v)?;
            stream.extend([j, k]);
        }
        stream.push(n.regions.len() as u32);
        let fusion = matches!((&n.op, n.regions.len()), (Op::Fusion(_), 1));
        for r in &n.regions {
            let b = push(bodies, d, r, ix)?;
            if fusion {
                let bytes = ebb_ir::op::fusion_tile_bytes(r).ok();
                bodies[b as usize].tile_bytes = bytes.map(|e| ix.expr(&e));
            }
            stream.push(b);
        }
    }
    let outputs = g
        .outputs()
        .iter()
        .map(|&v| at_pos(v))
        .collect::<Result<_, _>>()?;
    let mut in_place = Vec::new();
    for (id, writes) in ebb_ir::op::in_place_writes(g) {
        let (j, _) = at_pos(ValueRef::new(id, 0))?;
        in_place.extend(
            writes
                .iter()
                .map(|w| (j, w.operand as u32, w.result as u32)),
        );
    }
    // By op, each op's writes in their order.
    in_place.sort_by_key(|w| w.0);
    let descendants = (bodies.len() - at - 1) as u32;
    let body = &mut bodies[at];
    body.ops = order.len() as u32;
    body.stream = stream;
    body.outputs = outputs;
    body.in_place = in_place;
    body.descendants = descendants;
    Ok(at as u32)
}
