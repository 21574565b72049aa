//! Which producer may join which fusion group, and why not (the named reasons of
//! [`NotFused`]). The model is the executor's chunked evaluation of a loop fusion: every op
//! of a group is evaluated over one range of the group's flat (row-major) index space, so an
//! op may join only when its result is *flat-aligned* with the group's results — element `i`
//! of the op's result is needed exactly at element `i` of the group's iteration space.
//!
//! Invariant: [`join`] returns `Ok` only when the producer's result has the group's element
//! count (proved with the symbolic algebra under the graph's facts) and every consumer inside
//! the group reads it aligned (elementwise operand, `reshape`, or an order-preserving
//! `broadcast_in_dim` that adds only unit dimensions).

use ebb_ir::op::fusion::reads_aligned;
use ebb_ir::{DimExpr, Graph, NodeId, Op, OpKind};
use serde::Serialize;
use std::collections::HashSet;

/// Why a producer was not fused into the group of one of its consumers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum NotFused {
    /// The producer's op kind is never fused (a `dot_general`, `convolution`, `gather`,
    /// `while`, ...: a library call or a loop of its own).
    Kind {
        /// The op kind.
        op: &'static str,
    },
    /// A `reduce` is a group root only (of an input fusion), never a member.
    Reduction,
    /// The consumer is a `reduce` that cannot root an input fusion: it has several inputs, or
    /// it reduces neither every dimension after a kept prefix (a row reduction) nor a prefix of
    /// leading dimensions of an `f32` operand with a monoid body (a column reduction).
    ReduceRows,
    /// The consumer reads the producer through an index map that is not flat-aligned
    /// (`transpose`, an expanding `broadcast_in_dim`, a `slice`, ...).
    Unaligned {
        /// The consumer's op kind.
        consumer: &'static str,
    },
    /// The producer's element count is not provably the group's.
    ElementCount {
        /// The producer's element count.
        producer: String,
        /// The group's.
        group: String,
    },
    /// The producer has a user outside the group (or a copied member reads it) and is neither
    /// cheap data movement nor recomputable ([`super::duplicate`]): fusing it would make it a
    /// group result that another group reads, or form a cycle.
    UsedOutside {
        /// The op kind of the first user outside the group.
        user: &'static str,
    },
    /// The producer has several results.
    MultiResult,
}

impl std::fmt::Display for NotFused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotFused::Kind { op } => write!(f, "`{op}` is not fusible"),
            NotFused::Reduction => write!(f, "a reduce is a group root only"),
            NotFused::ReduceRows => write!(
                f,
                "the reduce is neither a row nor a column reduction of one input"
            ),
            NotFused::Unaligned { consumer } => {
                write!(f, "`{consumer}` reads it through a non-aligned index map")
            }
            NotFused::ElementCount { producer, group } => {
                write!(f, "{producer} elements, the group iterates over {group}")
            }
            NotFused::UsedOutside { user } => write!(f, "also used by `{user}` outside the group"),
            NotFused::MultiResult => write!(f, "several results"),
        }
    }
}

/// Whether ops of this kind may be members of a loop fusion group (a `constant` only when it
/// is a splat: one value repeated, computed per chunk).
pub fn loop_fusible(op: &Op) -> bool {
    let k = op.kind();
    k.is_elementwise()
        || matches!(k, OpKind::Reshape | OpKind::BroadcastInDim | OpKind::Iota)
        || matches!(op, Op::Constant(l) if l.splat)
}

/// Whether a producer is cheap enough to be duplicated into every group that reads it
/// (XLA's producer-consumer rule for cheap ops): data movement that computes nothing, and
/// splat constants (a folded `broadcast_in_dim` of a scalar must not be materialized whole
/// because several groups read it).
pub fn duplicable(op: &Op) -> bool {
    matches!(op.kind(), OpKind::BroadcastInDim | OpKind::Iota)
        || matches!(op, Op::Constant(l) if l.splat)
}

/// How a producer joins a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Join {
    /// Moved into the group: all its users are members (not copies).
    Move,
    /// Copied into the group: it has users outside, or copies read it, and it is
    /// [`duplicable`] or recomputable ([`super::duplicate`]).
    Duplicate,
}

/// A group under construction, as [`join`] sees it.
pub struct GroupView<'a> {
    /// Elements of the iteration space.
    pub space: &'a DimExpr,
    /// The members so far, copies included.
    pub members: &'a HashSet<NodeId>,
    /// The members that are copies.
    pub copies: &'a HashSet<NodeId>,
    /// The producers that may be copied into every group that reads them
    /// ([`super::duplicate::recomputable`]).
    pub recomputable: &'a HashSet<NodeId>,
    /// Whether the group is an input fusion (a `reduce` root): its only result is the root's,
    /// so a graph output may join it only as a copy.
    pub input: bool,
}

/// Checks that `producer` may join `group` (see the module docs); `Err` names the first
/// reason it may not. A producer read by a copy must be copied too: moving it into one group
/// would leave the other copies of its reader without it.
pub fn join(g: &Graph, producer: NodeId, group: &GroupView) -> Result<Join, NotFused> {
    let p = g.node(producer);
    if p.kind() == OpKind::Reduce {
        return Err(NotFused::Reduction);
    }
    if !loop_fusible(&p.op) {
        return Err(NotFused::Kind {
            op: p.kind().name(),
        });
    }
    if p.outputs.len() != 1 {
        return Err(NotFused::MultiResult);
    }
    let count = p.outputs[0].num_elements();
    if !g.scope.prove_eq(&count, group.space) {
        return Err(NotFused::ElementCount {
            producer: count.to_string(),
            group: group.space.to_string(),
        });
    }
    let mut outside = None;
    if group.input && g.outputs().iter().any(|o| o.node == producer) {
        outside = Some("(graph output)");
    }
    for (user, operand, _) in g.users(producer) {
        if !group.members.contains(&user) {
            outside.get_or_insert(g.node(user).kind().name());
        } else if !reads_aligned(g, user, operand as usize) {
            return Err(NotFused::Unaligned {
                consumer: g.node(user).kind().name(),
            });
        } else if group.copies.contains(&user) {
            outside.get_or_insert(g.node(user).kind().name());
        }
    }
    match outside {
        None => Ok(Join::Move),
        Some(_) if duplicable(&p.op) || group.recomputable.contains(&producer) => {
            Ok(Join::Duplicate)
        }
        Some(user) => Err(NotFused::UsedOutside { user }),
    }
}
