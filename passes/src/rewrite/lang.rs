//! The e-graph language of Ebb graphs ([`EbbNode`]) and its e-class analysis
//! ([`TypeAnalysis`]), which gives every e-class its symbolic [`TensorType`].
//!
//! # Encoding
//! * A graph input is a leaf [`EbbNode::Input`] (its argument index).
//! * An op's typed payload (the [`Op`] itself, with its regions and the declared result type
//!   of ops whose type is not inferred from operands, `constant` and `dim_constant`) is
//!   interned in a [`PayloadTable`] and appears as a leaf [`EbbNode::Payload`] *child*, so
//!   that patterns can bind it with a variable: `(broadcast_in_dim ?a ?x)`. The elementwise
//!   ops without a payload (all but `convert` and `compare`) have no payload child:
//!   `(add ?x ?y)`. See [`has_payload_child`].
//! * A single-result op is an [`EbbNode::Op`]: its kind, a `copy` number and its children
//!   (payload first, then operand e-classes). `copy` is 0 for every node a rule creates;
//!   the encoder gives structurally identical ops of the input graph distinct copy numbers
//!   unless duplicates are to be merged (see [`super::Limits::merge_duplicates`]). Patterns
//!   ignore `copy`.
//! * Multi-result ops, ops without results, and ops that rules must never look into
//!   (`while`, `sort`, `custom_call`, `optimization_barrier`) are [`EbbNode::Opaque`]: a
//!   unique node whose e-class holds the tuple of its results, read by
//!   [`EbbNode::Result`] projections. No rule matches an opaque node.
//!
//! # Invariant
//! Every e-class has one type: all e-nodes in a class denote the same tensor. The analysis
//! records any merge of classes with different types in [`TypeAnalysis::conflicts`] (a bug
//! in a rule), and rule appliers union only classes whose types are equal.

use ebb_ir::shape::infer;
use ebb_ir::{Graph, Node, Op, OpKind, TensorType};
use egg::{Analysis, DidMerge, EGraph, FromOp, FromOpError, Id, Language};
use std::collections::HashMap;
use std::fmt;

/// Index of an interned payload entry in a [`PayloadTable`].
pub type PayloadId = u32;

/// An e-node of the Ebb language. See the module docs for the encoding.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EbbNode {
    /// Graph input number `0` (argument order).
    Input(u32),
    /// An interned op payload (entry of the [`PayloadTable`]).
    Payload(PayloadId),
    /// A single-result op: children are the payload leaf (if [`has_payload_child`]) and then
    /// the operands.
    Op {
        /// Op kind.
        kind: OpKind,
        /// Distinguishes identical ops of the input graph that must stay distinct; 0 for
        /// nodes created by rules. Ignored by pattern matching.
        copy: u32,
        /// Payload leaf (if any), then operand e-classes.
        children: Vec<Id>,
    },
    /// An op rules never look into; its class is the tuple of its results.
    Opaque {
        /// Index into [`TypeAnalysis::opaque`].
        op: u32,
        /// Operand e-classes.
        children: Vec<Id>,
    },
    /// Result `index` of an opaque op.
    Result {
        /// Result index.
        index: u32,
        /// The opaque op's class.
        child: [Id; 1],
    },
}

/// Whether ops of `kind` have a payload leaf as first child: all but the elementwise ops
/// without a payload (everything elementwise except `convert`, `compare`). Non-elementwise
/// payload-free kinds (`dynamic_update_slice`) have a leaf too; it holds their regions.
pub fn has_payload_child(kind: OpKind) -> bool {
    !(kind.is_elementwise() && kind.is_payload_free())
}

impl EbbNode {
    /// The payload leaf and the operands of an [`EbbNode::Op`] (`None, children` for other
    /// nodes).
    pub fn split_payload(&self) -> (Option<Id>, &[Id]) {
        match self {
            EbbNode::Op { kind, children, .. }
                if has_payload_child(*kind) && !children.is_empty() =>
            {
                (Some(children[0]), &children[1..])
            }
            _ => (None, self.children()),
        }
    }

    /// The op kind of an [`EbbNode::Op`].
    pub fn kind(&self) -> Option<OpKind> {
        match self {
            EbbNode::Op { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}

impl Language for EbbNode {
    type Discriminant = (u8, u32);

    fn discriminant(&self) -> (u8, u32) {
        match self {
            EbbNode::Input(i) => (0, *i),
            EbbNode::Payload(a) => (1, *a),
            EbbNode::Op { kind, .. } => (2, *kind as u32),
            EbbNode::Opaque { op, .. } => (3, *op),
            EbbNode::Result { index, .. } => (4, *index),
        }
    }

    fn matches(&self, other: &Self) -> bool {
        self.discriminant() == other.discriminant()
            && self.children().len() == other.children().len()
    }

    fn children(&self) -> &[Id] {
        match self {
            EbbNode::Input(_) | EbbNode::Payload(_) => &[],
            EbbNode::Op { children, .. } | EbbNode::Opaque { children, .. } => children,
            EbbNode::Result { child, .. } => child,
        }
    }

    fn children_mut(&mut self) -> &mut [Id] {
        match self {
            EbbNode::Input(_) | EbbNode::Payload(_) => &mut [],
            EbbNode::Op { children, .. } | EbbNode::Opaque { children, .. } => children,
            EbbNode::Result { child, .. } => child,
        }
    }
}

impl fmt::Display for EbbNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EbbNode::Input(i) => write!(f, "input:{i}"),
            EbbNode::Payload(a) => write!(f, "payload:{a}"),
            EbbNode::Op { kind, .. } => f.write_str(kind.name()),
            EbbNode::Opaque { op, .. } => write!(f, "opaque:{op}"),
            EbbNode::Result { index, .. } => write!(f, "result:{index}"),
        }
    }
}

impl FromOp for EbbNode {
    type Error = FromOpError;

    /// Parses an op name (`add`, `broadcast_in_dim`) with its children, or the leaves
    /// `input:N` and `payload:N`.
    fn from_op(op: &str, children: Vec<Id>) -> Result<Self, Self::Error> {
        let leaf = |prefix: &str| op.strip_prefix(prefix).and_then(|n| n.parse::<u32>().ok());
        if let Some(kind) = OpKind::from_name(op) {
            return Ok(EbbNode::Op {
                kind,
                copy: 0,
                children,
            });
        }
        match (leaf("input:"), leaf("payload:")) {
            (Some(i), _) if children.is_empty() => Ok(EbbNode::Input(i)),
            (_, Some(a)) if children.is_empty() => Ok(EbbNode::Payload(a)),
            _ => Err(FromOpError::new(op, children)),
        }
    }
}

/// The interned payload of an op, with what rules want to know about it.
#[derive(Debug, Clone)]
pub struct PayloadEntry {
    /// The op (kind and typed payload); its kind is the kind of the e-nodes that hold the
    /// leaf.
    pub op: Op,
    /// The op's regions (reduce bodies).
    pub regions: Vec<Graph>,
    /// Declared result types, for ops whose type is not inferred (`constant`,
    /// `dim_constant`).
    pub declared: Option<Vec<TensorType>>,
    /// The single region is a sum: `add(arg0, arg1)` returned (a `reduce` that sums).
    pub is_sum_body: bool,
    /// The op is a `constant` whose literal bytes are all zero.
    pub is_zero_literal: bool,
}

/// What makes two payload entries equal: the op, the declared types and the regions (by
/// their printed form).
type PayloadKey = (Op, Option<Vec<TensorType>>, Vec<String>);

impl PayloadEntry {
    /// An entry with the op only.
    pub fn new(op: Op) -> Self {
        PayloadEntry::with(op, Vec::new(), None)
    }

    /// An entry with the op, regions and declared types.
    pub fn with(op: Op, regions: Vec<Graph>, declared: Option<Vec<TensorType>>) -> Self {
        let is_sum_body = regions.len() == 1 && is_sum_region(&regions[0]);
        let is_zero_literal = matches!(&op, Op::Constant(l) if l.data.iter().all(|b| *b == 0));
        PayloadEntry {
            op,
            regions,
            declared,
            is_sum_body,
            is_zero_literal,
        }
    }

    fn key(&self) -> PayloadKey {
        (
            self.op.clone(),
            self.declared.clone(),
            self.regions.iter().map(ebb_ir::text::print).collect(),
        )
    }
}

/// Whether region `r` computes `add(arg0, arg1)` of its two block arguments.
fn is_sum_region(r: &Graph) -> bool {
    let [a, b] = r.inputs() else { return false };
    let ops: Vec<_> = r
        .order()
        .iter()
        .filter(|id| r.node(**id).kind() != OpKind::Input)
        .collect();
    let ([op], [out]) = (ops.as_slice(), r.outputs()) else {
        return false;
    };
    if r.node(**op).kind() != OpKind::Add || out.node != **op {
        return false;
    }
    let operands: Vec<_> = r.operands(**op).iter().map(|v| v.node).collect();
    operands == [*a, *b] || operands == [*b, *a]
}

/// The interned payload entries of an e-graph, deduplicated by value.
#[derive(Debug, Default, Clone)]
pub struct PayloadTable {
    entries: Vec<PayloadEntry>,
    index: HashMap<PayloadKey, PayloadId>,
}

impl PayloadTable {
    /// Interns `e`, returning the id of an equal existing entry if there is one.
    pub fn intern(&mut self, e: PayloadEntry) -> PayloadId {
        let key = e.key();
        if let Some(&id) = self.index.get(&key) {
            return id;
        }
        let id = self.entries.len() as PayloadId;
        self.entries.push(e);
        self.index.insert(key, id);
        id
    }

    /// The entry `id`, if it exists.
    pub fn get(&self, id: PayloadId) -> Option<&PayloadEntry> {
        self.entries.get(id as usize)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// What the analysis knows about an e-class.
#[derive(Debug, Clone, PartialEq)]
pub enum ClassData {
    /// A payload leaf.
    Payload(PayloadId),
    /// A tensor of this type.
    Tensor(TensorType),
    /// The results of an opaque op.
    Tuple(Vec<TensorType>),
    /// A node a rule built whose type cannot be inferred; never unioned with a valid class.
    Invalid(String),
}

/// The e-class analysis: symbolic result types, plus the side tables the encoding needs.
#[derive(Debug, Default)]
pub struct TypeAnalysis {
    /// Interned payloads.
    pub payloads: PayloadTable,
    /// Opaque ops: copies of the original nodes (op, result types, regions).
    pub opaque: Vec<Node>,
    /// Types of the graph inputs, by argument index.
    pub inputs: Vec<TensorType>,
    /// Merges of classes with different types (each a message); must stay empty.
    pub conflicts: Vec<String>,
}

/// The e-graph type of the rewrite pass.
pub type EbbEGraph = EGraph<EbbNode, TypeAnalysis>;

/// The tensor type of class `id`, if it is a tensor.
pub fn tensor(eg: &EbbEGraph, id: Id) -> Option<&TensorType> {
    match &eg[id].data {
        ClassData::Tensor(t) => Some(t),
        _ => None,
    }
}

/// The payload entry of class `id`, if it is a payload leaf.
pub fn payload_entry(eg: &EbbEGraph, id: Id) -> Option<&PayloadEntry> {
    match &eg[id].data {
        ClassData::Payload(a) => eg.analysis.payloads.get(*a),
        _ => None,
    }
}

/// The op of the payload entry of class `id`, if it is a payload leaf.
pub fn payload_op(eg: &EbbEGraph, id: Id) -> Option<&Op> {
    payload_entry(eg, id).map(|e| &e.op)
}

/// Whether class `id` holds a `constant` whose literal is all zero bytes.
pub fn is_zero_constant(eg: &EbbEGraph, id: Id) -> bool {
    eg[id].nodes.iter().any(|n| match n {
        EbbNode::Op {
            kind: OpKind::Constant,
            children,
            ..
        } => children
            .first()
            .and_then(|a| payload_entry(eg, *a))
            .is_some_and(|e| e.is_zero_literal),
        _ => false,
    })
}

fn make_op(eg: &EbbEGraph, kind: OpKind, node: &EbbNode) -> ClassData {
    let (leaf, operands) = node.split_payload();
    let simple;
    let (op, regions, declared): (&Op, &[Graph], Option<&[TensorType]>) = match leaf {
        Some(a) => match payload_entry(eg, a) {
            Some(e) if e.op.kind() == kind => (&e.op, &e.regions, e.declared.as_deref()),
            Some(e) => {
                return ClassData::Invalid(format!(
                    "`{kind}`: payload leaf holds a `{}`",
                    e.op.kind()
                ))
            }
            None => {
                return ClassData::Invalid(format!("`{kind}`: first child is not a payload leaf"))
            }
        },
        None => match Op::simple(kind) {
            Some(op) => {
                simple = op;
                (&simple, &[], None)
            }
            None => return ClassData::Invalid(format!("`{kind}`: no payload leaf")),
        },
    };
    let mut types = Vec::with_capacity(operands.len());
    for &c in operands {
        match tensor(eg, c) {
            Some(t) => types.push(t),
            None => return ClassData::Invalid(format!("`{kind}`: operand is not a tensor")),
        }
    }
    match infer(op, &types, regions) {
        Ok(Some(mut ts)) if ts.len() == 1 => ClassData::Tensor(ts.remove(0)),
        Ok(Some(ts)) => ClassData::Invalid(format!(
            "`{kind}`: {} results where one was expected",
            ts.len()
        )),
        Ok(None) => match declared {
            Some([t]) => ClassData::Tensor(t.clone()),
            _ => ClassData::Invalid(format!("`{kind}`: no declared result type")),
        },
        Err(e) => ClassData::Invalid(e.to_string()),
    }
}

impl Analysis<EbbNode> for TypeAnalysis {
    type Data = ClassData;

    fn make(eg: &mut EbbEGraph, enode: &EbbNode, _id: Id) -> ClassData {
        match enode {
            EbbNode::Input(i) => match eg.analysis.inputs.get(*i as usize) {
                Some(t) => ClassData::Tensor(t.clone()),
                None => ClassData::Invalid(format!("input {i} out of range")),
            },
            EbbNode::Payload(a) => ClassData::Payload(*a),
            EbbNode::Op { kind, .. } => make_op(eg, *kind, enode),
            EbbNode::Opaque { op, .. } => match eg.analysis.opaque.get(*op as usize) {
                Some(n) => ClassData::Tuple(n.outputs.clone()),
                None => ClassData::Invalid(format!("opaque op {op} out of range")),
            },
            EbbNode::Result { index, child } => match &eg[child[0]].data {
                ClassData::Tuple(ts) if (*index as usize) < ts.len() => {
                    ClassData::Tensor(ts[*index as usize].clone())
                }
                _ => ClassData::Invalid(format!("result {index} of a class that is not a tuple")),
            },
        }
    }

    fn merge(&mut self, a: &mut ClassData, b: ClassData) -> DidMerge {
        if *a == b {
            return DidMerge(false, false);
        }
        match (&*a, &b) {
            (ClassData::Invalid(_), _) => {
                *a = b;
                DidMerge(true, false)
            }
            (_, ClassData::Invalid(_)) => DidMerge(false, true),
            _ => {
                self.conflicts
                    .push(format!("merged classes of types {a:?} and {b:?}"));
                DidMerge(false, true)
            }
        }
    }
}

/// Adds `node` and unions it with `class` if their types agree; returns the changed class
/// (for an [`egg::Applier`]) or nothing.
pub fn union_if_same_type(eg: &mut EbbEGraph, class: Id, node: EbbNode) -> Vec<Id> {
    let id = eg.add(node);
    union_ids_if_same_type(eg, class, id)
}

/// Unions classes `class` and `id` if their types agree and both are valid tensors.
pub fn union_ids_if_same_type(eg: &mut EbbEGraph, class: Id, id: Id) -> Vec<Id> {
    match (tensor(eg, class), tensor(eg, id)) {
        (Some(a), Some(b)) if a == b => {}
        _ => return Vec::new(),
    }
    if eg.union(class, id) {
        vec![class]
    } else {
        Vec::new()
    }
}

/// Interns `op` (without regions) and adds its payload leaf, returning its class.
pub fn add_payload(eg: &mut EbbEGraph, op: Op) -> Id {
    let a = eg.analysis.payloads.intern(PayloadEntry::new(op));
    eg.add(EbbNode::Payload(a))
}
