//! The dataflow graph: ops as nodes of a petgraph `StableDiGraph`, values as (node, result)
//! pairs, edges from producer to consumer labelled with the result and operand indices.
//!
//! A graph also keeps its *program order* (the order the front end saw the ops, always a
//! topological order), its inputs and outputs, the symbol scope with the facts about its
//! symbolic dimensions, and the shape assertions that must hold at run time.
//! Regions (`reduce` bodies, `while` condition and body) are nested graphs whose inputs are the
//! block arguments and whose outputs are the returned values.

use crate::dim::{DimExpr, SymbolScope};
use crate::op::{Op, OpKind};
use crate::types::TensorType;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::OnceLock;

/// Deepest nesting of regions an importer accepts (a `while` in a `case` branch is two
/// levels). Deeper modules are refused at import with the op's location, so every graph Ebb
/// compiles also loads back from its plan ([`MAX_REGION_DEPTH`]).
pub const MAX_IMPORT_REGION_DEPTH: usize = 64;

/// Deepest nesting of regions any graph may have: the verifier and the textual IR's parser
/// refuse more. One more than [`MAX_IMPORT_REGION_DEPTH`]: fusion wraps ops of the deepest
/// region in a region of their own.
pub const MAX_REGION_DEPTH: usize = MAX_IMPORT_REGION_DEPTH + 1;

/// Identifier of a node (an op) in a [`Graph`].
pub type NodeId = NodeIndex<u32>;

/// A value: result `output` of node `node`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct ValueRef {
    /// Producing node.
    pub node: NodeId,
    /// Result index on that node.
    pub output: u32,
}

impl ValueRef {
    /// Result `output` of `node`.
    pub fn new(node: NodeId, output: u32) -> Self {
        ValueRef { node, output }
    }
}

/// An op in the graph: the op (kind and typed payload), result types, regions and source
/// location.
#[derive(Clone, Debug)]
pub struct Node {
    /// The op: its kind and typed payload.
    pub op: Op,
    /// Result types (symbolic shapes).
    pub outputs: Vec<TensorType>,
    /// Nested regions (reduce bodies, while cond/body).
    pub regions: Vec<Graph>,
    /// Source location (`file:line:col` or a name), for error messages.
    pub loc: Option<String>,
}

impl Node {
    /// A node without regions or location.
    pub fn new(op: Op, outputs: Vec<TensorType>) -> Self {
        Node {
            op,
            outputs,
            regions: Vec::new(),
            loc: None,
        }
    }

    /// The op's kind.
    pub fn kind(&self) -> OpKind {
        self.op.kind()
    }
}

/// Edge label: the producer's result index and the consumer's operand index.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Operand {
    /// Result index on the producer.
    pub output: u32,
    /// Operand index on the consumer.
    pub operand: u32,
}

/// A comparison relation: of a shape assertion, or the direction of a `compare` op.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum Relation {
    /// `lhs == rhs` (StableHLO `EQ`).
    Eq,
    /// `lhs != rhs` (`NE`).
    Ne,
    /// `lhs >= rhs` (`GE`).
    Ge,
    /// `lhs > rhs` (`GT`).
    Gt,
    /// `lhs <= rhs` (`LE`).
    Le,
    /// `lhs < rhs` (`LT`).
    Lt,
}

impl Relation {
    /// The StableHLO `comparison_direction` spelling (`EQ`, `GE`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Relation::Eq => "EQ",
            Relation::Ne => "NE",
            Relation::Ge => "GE",
            Relation::Gt => "GT",
            Relation::Le => "LE",
            Relation::Lt => "LT",
        }
    }

    /// Parses `EQ`, `NE`, `GE`, `GT`, `LE`, `LT`.
    pub fn from_name(s: &str) -> Option<Relation> {
        Some(match s {
            "EQ" => Relation::Eq,
            "NE" => Relation::Ne,
            "GE" => Relation::Ge,
            "GT" => Relation::Gt,
            "LE" => Relation::Le,
            "LT" => Relation::Lt,
            _ => return None,
        })
    }

    /// The relation with its operands swapped: `a REL b` iff `b REL.mirror() a`.
    pub fn mirror(self) -> Relation {
        match self {
            Relation::Lt => Relation::Gt,
            Relation::Gt => Relation::Lt,
            Relation::Le => Relation::Ge,
            Relation::Ge => Relation::Le,
            r @ (Relation::Eq | Relation::Ne) => r,
        }
    }

    /// Whether `a REL b` holds.
    pub fn holds(self, a: i64, b: i64) -> bool {
        match self {
            Relation::Eq => a == b,
            Relation::Ne => a != b,
            Relation::Ge => a >= b,
            Relation::Gt => a > b,
            Relation::Le => a <= b,
            Relation::Lt => a < b,
        }
    }
}

/// A run-time check on the symbolic dimensions, `lhs REL rhs`, with the producer's message
/// (JAX's `shape_assertion` custom calls become these).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ShapeAssertion {
    /// Left-hand side.
    pub lhs: DimExpr,
    /// Relation that must hold.
    pub rel: Relation,
    /// Right-hand side.
    pub rhs: DimExpr,
    /// Message to report when it does not hold (JAX's text, with `{0}`, `{1}` placeholders).
    pub message: String,
}

/// A dataflow graph with symbolic shapes. See the module docs.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// Name (the exported function's, e.g. `main`).
    pub name: String,
    g: StableDiGraph<Node, Operand>,
    order: Vec<NodeId>,
    inputs: Vec<NodeId>,
    outputs: Vec<ValueRef>,
    /// Names of the outputs (pytree paths), parallel to the outputs; may be empty strings.
    pub output_names: Vec<String>,
    /// Symbols and the facts known about them.
    pub scope: SymbolScope,
    /// Run-time shape checks.
    pub assertions: Vec<ShapeAssertion>,
    /// Analyses computed on first use, cleared by every change.
    pub(crate) memo: Memo,
}

/// Shape-independent analyses of a graph, computed on first use and kept until the graph
/// changes: every `&mut self` method of [`Graph`] clears them. They are pure functions of the
/// graph (and of its scope, a public field, which is compared before a result is reused), and
/// a cold `ebb plan` asks for them once per liveness analysis and checker run.
#[derive(Clone, Default)]
pub(crate) struct Memo {
    /// [`crate::op::in_place_writes`] of the graph, with the scope it was proven under.
    pub(crate) in_place: OnceLock<(SymbolScope, HashMap<NodeId, Vec<crate::op::InPlace>>)>,
    /// [`crate::op::fusion_tile_bytes`] of the graph as a fusion's region.
    pub(crate) tile_bytes: OnceLock<Result<DimExpr, crate::dim::DimError>>,
    /// [`crate::op::fusion_tile_bytes_in`]: those bytes normalized under a scope, with it.
    pub(crate) tile_bytes_in: OnceLock<(SymbolScope, Result<DimExpr, crate::dim::DimError>)>,
}

impl fmt::Debug for Memo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Memo")
    }
}

impl Graph {
    /// An empty graph.
    pub fn new(name: &str) -> Self {
        Graph {
            name: name.to_string(),
            ..Default::default()
        }
    }

    /// An empty graph with room for `nodes` nodes and `edges` operand edges, so that adding
    /// that many grows no table (a decoder that knows the sizes builds the graph in one
    /// allocation per table instead of a doubling series of them).
    pub fn with_capacity(name: &str, nodes: usize, edges: usize) -> Self {
        Graph {
            name: name.to_string(),
            g: StableDiGraph::with_capacity(nodes, edges),
            order: Vec::with_capacity(nodes),
            ..Default::default()
        }
    }

    /// The region `(a, b) -> op(a, b)` over two scalars of `dtype`, with a result of type
    /// `out`: a `reduce`/`reduce_window` body (`op` a monoid, `out == dtype`) or a
    /// `select_and_scatter` select (`op` a `compare`, `out` `i1`).
    pub fn scalar_binary(op: Op, dtype: crate::dtype::DType, out: crate::dtype::DType) -> Graph {
        let mut r = Graph::new("body");
        let a = r.add_input("", TensorType::scalar(dtype));
        let b = r.add_input("", TensorType::scalar(dtype));
        let id = r.add_node(Node::new(op, vec![TensorType::scalar(out)]), &[a, b]);
        r.set_outputs(vec![ValueRef::new(id, 0)], vec![String::new()]);
        r
    }

    /// Adds an `input` node (argument `inputs().len()`) named `name` of type `ty`.
    pub fn add_input(&mut self, name: &str, ty: TensorType) -> ValueRef {
        self.memo = Memo::default();
        let op = Op::input(self.inputs.len(), name);
        let id = self.g.add_node(Node::new(op, vec![ty]));
        self.inputs.push(id);
        self.order.push(id);
        ValueRef::new(id, 0)
    }

    /// Appends `node` to the program order with the given operands; returns its id.
    /// The caller guarantees that the operands are defined earlier in program order
    /// ([`crate::verify::verify`] checks it).
    pub fn add_node(&mut self, node: Node, operands: &[ValueRef]) -> NodeId {
        self.memo = Memo::default();
        let id = self.g.add_node(node);
        for (i, v) in operands.iter().enumerate() {
            self.g.add_edge(
                v.node,
                id,
                Operand {
                    output: v.output,
                    operand: i as u32,
                },
            );
        }
        self.order.push(id);
        id
    }

    /// Sets the graph outputs.
    pub fn set_outputs(&mut self, outputs: Vec<ValueRef>, names: Vec<String>) {
        self.memo = Memo::default();
        self.outputs = outputs;
        self.output_names = names;
    }

    /// The node `id`. Panics if `id` was removed (ids come from this graph).
    pub fn node(&self, id: NodeId) -> &Node {
        &self.g[id]
    }

    /// Mutable access to node `id`.
    pub fn node_mut(&mut self, id: NodeId) -> &mut Node {
        self.memo = Memo::default();
        &mut self.g[id]
    }

    /// Whether `id` is a live node of this graph.
    pub fn contains(&self, id: NodeId) -> bool {
        self.g.contains_node(id)
    }

    /// Type of value `v`.
    pub fn value_type(&self, v: ValueRef) -> &TensorType {
        &self.g[v.node].outputs[v.output as usize]
    }

    /// Operands of `id`, in operand order.
    pub fn operands(&self, id: NodeId) -> Vec<ValueRef> {
        let mut ops: Vec<(u32, ValueRef)> = self
            .g
            .edges_directed(id, Direction::Incoming)
            .map(|e| {
                (
                    e.weight().operand,
                    ValueRef::new(e.source(), e.weight().output),
                )
            })
            .collect();
        ops.sort_unstable_by_key(|(i, _)| *i);
        ops.into_iter().map(|(_, v)| v).collect()
    }

    /// Consumers of any result of `id`: (consumer, operand index, result index).
    pub fn users(&self, id: NodeId) -> Vec<(NodeId, u32, u32)> {
        let mut u: Vec<_> = self
            .g
            .edges_directed(id, Direction::Outgoing)
            .map(|e| (e.target(), e.weight().operand, e.weight().output))
            .collect();
        u.sort_unstable();
        u
    }

    /// Replaces every use of `old` (as an operand and as a graph output) by `new`.
    pub fn replace_all_uses(&mut self, old: ValueRef, new: ValueRef) {
        self.memo = Memo::default();
        let edges: Vec<_> = self
            .g
            .edges_directed(old.node, Direction::Outgoing)
            .filter(|e| e.weight().output == old.output)
            .map(|e| (e.id(), e.target(), e.weight().operand))
            .collect();
        for (eid, target, operand) in edges {
            self.g.remove_edge(eid);
            self.g.add_edge(
                new.node,
                target,
                Operand {
                    output: new.output,
                    operand,
                },
            );
        }
        for o in self.outputs.iter_mut() {
            if *o == old {
                *o = new;
            }
        }
    }

    /// Replaces operand `operand` of `id` by `new`.
    pub fn set_operand(&mut self, id: NodeId, operand: u32, new: ValueRef) {
        self.memo = Memo::default();
        let e = self
            .g
            .edges_directed(id, Direction::Incoming)
            .find(|e| e.weight().operand == operand)
            .map(|e| e.id());
        if let Some(eid) = e {
            self.g.remove_edge(eid);
        }
        self.g.add_edge(
            new.node,
            id,
            Operand {
                output: new.output,
                operand,
            },
        );
    }

    /// Removes the given nodes (and their edges) and drops them from the program order.
    /// Input nodes cannot be removed and are skipped.
    pub fn remove_nodes(&mut self, ids: &HashSet<NodeId>) {
        self.memo = Memo::default();
        for &id in ids {
            if self.g.contains_node(id) && self.g[id].kind() != OpKind::Input {
                self.g.remove_node(id);
            }
        }
        let g = &self.g;
        self.order.retain(|id| g.contains_node(*id));
    }

    /// Removes input `i` (argument order) when no op reads it and no graph output is it
    /// (a loop's dead carry, `ebb_passes::dead_carries`): the later inputs move up one
    /// position (their `index` with them). Returns whether it was removed.
    pub fn remove_input(&mut self, i: usize) -> bool {
        let Some(&id) = self.inputs.get(i) else {
            return false;
        };
        let read = self
            .g
            .edges_directed(id, Direction::Outgoing)
            .next()
            .is_some();
        if read || self.outputs.iter().any(|o| o.node == id) {
            return false;
        }
        self.memo = Memo::default();
        self.g.remove_node(id);
        self.inputs.remove(i);
        self.order.retain(|&n| n != id);
        for &x in &self.inputs[i..] {
            if let Op::Input(s) = &mut self.g[x].op {
                s.index -= 1;
            }
        }
        true
    }

    /// Removes graph output `j` (and its name); the later outputs move up one position, and
    /// so do the donations naming them ([`Graph::aliasing_output`]); an input donated to
    /// output `j` is no longer donated.
    pub fn remove_output(&mut self, j: usize) {
        if j >= self.outputs.len() {
            return;
        }
        self.memo = Memo::default();
        self.outputs.remove(j);
        if j < self.output_names.len() {
            self.output_names.remove(j);
        }
        for &x in &self.inputs {
            if let Op::Input(s) = &mut self.g[x].op {
                s.aliasing_output = match s.aliasing_output {
                    Some(k) if k == j => None,
                    Some(k) if k > j => Some(k - 1),
                    k => k,
                };
            }
        }
    }

    /// Replaces the program order (must be a permutation of the live nodes, topological).
    pub fn set_order(&mut self, order: Vec<NodeId>) {
        self.memo = Memo::default();
        self.order = order;
    }

    /// Nodes in program order (inputs included).
    pub fn order(&self) -> &[NodeId] {
        &self.order
    }

    /// Input nodes in argument order.
    pub fn inputs(&self) -> &[NodeId] {
        &self.inputs
    }

    /// Graph outputs.
    pub fn outputs(&self) -> &[ValueRef] {
        &self.outputs
    }

    /// Number of live nodes, inputs included.
    pub fn node_count(&self) -> usize {
        self.g.node_count()
    }

    /// Number of ops that are not inputs.
    pub fn op_count(&self) -> usize {
        self.order
            .iter()
            .filter(|id| self.g[**id].kind() != OpKind::Input)
            .count()
    }

    /// The underlying petgraph graph, for graph algorithms.
    pub fn petgraph(&self) -> &StableDiGraph<Node, Operand> {
        &self.g
    }

    /// Name of input `id`, or "" if `id` is not an input.
    pub fn input_name(&self, id: NodeId) -> &str {
        match &self.g[id].op {
            Op::Input(s) => &s.name,
            _ => "",
        }
    }

    /// The graph output that donated input `id` aliases (`None` when `id` is not a donated
    /// input; see [`InputSpec::aliasing_output`](crate::op::InputSpec::aliasing_output)).
    pub fn aliasing_output(&self, id: NodeId) -> Option<usize> {
        match &self.g[id].op {
            Op::Input(s) => s.aliasing_output,
            _ => None,
        }
    }

    /// Sets (or clears, with `None`) the donation of input `id` to graph output `output`;
    /// does nothing when `id` is not an input. [`crate::verify`] checks the pairing.
    pub fn set_aliasing_output(&mut self, id: NodeId, output: Option<usize>) {
        self.memo = Memo::default();
        if let Op::Input(s) = &mut self.g[id].op {
            s.aliasing_output = output;
        }
    }

    /// Applies `f` to every dimension of every type, attribute, region and assertion
    /// (e.g. to substitute symbols).
    pub fn map_dims(&mut self, f: &dyn Fn(&DimExpr) -> DimExpr) {
        self.memo = Memo::default();
        let ids: Vec<NodeId> = self.g.node_indices().collect();
        for id in ids {
            let n = &mut self.g[id];
            for t in n.outputs.iter_mut() {
                for d in t.shape.iter_mut() {
                    *d = f(d);
                }
            }
            n.op.map_dims(f);
            for r in n.regions.iter_mut() {
                r.map_dims(f);
            }
        }
        for a in self.assertions.iter_mut() {
            a.lhs = f(&a.lhs);
            a.rhs = f(&a.rhs);
        }
    }
}

impl fmt::Display for ValueRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}#{}", self.node.index(), self.output)
    }
}
