//! Partitions a graph into loop and input fusion groups (XLA's producer-consumer loop fusion,
//! and input fusion under a `reduce` root, restricted to flat-aligned members; see
//! [`super::legality`]).
//!
//! Algorithm: visit the ops in reverse program order; an op not yet in a group and fusible
//! (or a `reduce` that may root an input fusion) becomes the root of a new group over its
//! iteration space ([`iteration_space`]); its producers are
//! considered latest-first (so every user of a producer has been decided before it) and join
//! when [`join`] allows. Groups of one op are dropped. Deterministic: the result depends on the
//! program order only.
//!
//! Invariant: groups are disjoint but for duplicated members (cheap producers copied into
//! each group that reads them, which stay in the graph for their other users); every other
//! member's users are members, except those of values that are graph outputs or of the root;
//! so outlining a group creates no cycle. No node is copied into one group and moved into
//! another (outlining the latter would remove it from under the former's copy): the group
//! found earlier then reads the moved value from the other group's results.
//! Every group has at least two members.

use super::legality::{join, loop_fusible, GroupView, Join, NotFused};
use ebb_ir::op::fusion::{is_reduce_root, iteration_space};
use ebb_ir::{DimExpr, Graph, NodeId, Op, OpKind};
use std::collections::{BTreeSet, HashMap, HashSet};

/// One fusion group: its root (the last member in program order) and its members. The root
/// of an input fusion is a `reduce` ([`is_reduce_root`]).
#[derive(Clone, Debug, PartialEq)]
pub struct FusionGroup {
    /// The root op, whose result gives the iteration space.
    pub root: NodeId,
    /// Members in program order (the root last).
    pub members: Vec<NodeId>,
    /// Members that are copies: cheap producers that stay in the graph for their other users.
    pub duplicated: HashSet<NodeId>,
    /// Elements of the iteration space ([`iteration_space`] of the root).
    pub space: DimExpr,
}

/// A producer that was not fused into the group of its consumer, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejection {
    /// The producer.
    pub producer: NodeId,
    /// The consumer, a member of the group.
    pub consumer: NodeId,
    /// Why.
    pub reason: NotFused,
}

/// The groups of a graph and the named reasons for the producer-consumer pairs left apart.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Partition {
    /// Groups of two or more ops, in order of their roots in program order.
    pub groups: Vec<FusionGroup>,
    /// Rejected producer-consumer pairs (inputs and constants other than splats of rank > 0
    /// are never listed: they stay outside every group by design).
    pub rejected: Vec<Rejection>,
}

/// Partitions `g` (see the module docs).
pub fn partition(g: &Graph) -> Partition {
    let pos: HashMap<NodeId, usize> = g.order().iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let mut assigned: HashSet<NodeId> = HashSet::new();
    let mut out = Partition::default();
    let recomputable = super::duplicate::recomputable(g);
    // The groups (indices into `out.groups`) each op is a member of, copies included.
    let mut groups_of: HashMap<NodeId, Vec<usize>> = HashMap::new();
    for &root in g.order().iter().rev() {
        let r = g.node(root);
        let input = is_reduce_root(g, root);
        if r.kind() == OpKind::Reduce && !input && !assigned.contains(&root) {
            if let Some(v) = g.operands(root).first() {
                if !external_by_design(g, v.node) {
                    out.rejected.push(Rejection {
                        producer: v.node,
                        consumer: root,
                        reason: NotFused::ReduceRows,
                    });
                }
            }
        }
        if assigned.contains(&root)
            || !(input || loop_fusible(&r.op) && r.outputs.len() == 1)
            || computed_by_copies(g, root, &groups_of)
        {
            continue;
        }
        let Some(space) = iteration_space(g, root) else {
            continue;
        };
        let mut members: HashSet<NodeId> = HashSet::from([root]);
        // Producers to consider, latest first: (position, producer, consumer).
        let mut todo: BTreeSet<(usize, NodeId, NodeId)> = BTreeSet::new();
        let push = |todo: &mut BTreeSet<_>, c: NodeId| {
            for v in g.operands(c) {
                todo.insert((pos[&v.node], v.node, c));
            }
        };
        push(&mut todo, root);
        let mut rejected = Vec::new();
        let mut duplicated: HashSet<NodeId> = HashSet::new();
        while let Some((_, p, c)) = todo.pop_last() {
            // A duplicable or recomputable producer may be copied into several groups.
            let taken = assigned.contains(&p);
            if members.contains(&p) || taken || external_by_design(g, p) {
                continue;
            }
            let view = GroupView {
                space: &space,
                members: &members,
                copies: &duplicated,
                recomputable: &recomputable,
                input,
            };
            match join(g, p, &view) {
                Ok(how) => {
                    members.insert(p);
                    if how == Join::Duplicate {
                        duplicated.insert(p);
                    }
                    push(&mut todo, p);
                }
                Err(reason) => {
                    if !rejected.iter().any(|x: &Rejection| x.producer == p) {
                        rejected.push(Rejection {
                            producer: p,
                            consumer: c,
                            reason,
                        });
                    }
                }
            }
        }
        // A producer rejected for one member may have joined through another path.
        rejected.retain(|x| !members.contains(&x.producer));
        out.rejected.extend(rejected);
        if members.len() < 2 {
            continue;
        }
        let mut ms: Vec<NodeId> = members.into_iter().collect();
        ms.sort_by_key(|n| pos[n]);
        assigned.extend(ms.iter().copied().filter(|m| !duplicated.contains(m)));
        let moved: Vec<NodeId> = ms
            .iter()
            .copied()
            .filter(|m| !duplicated.contains(m))
            .collect();
        drop_copies_of_moved(g, &moved, &mut out.groups, &mut groups_of);
        for &m in &ms {
            groups_of.entry(m).or_default().push(out.groups.len());
        }
        out.groups.push(FusionGroup {
            root,
            members: ms,
            duplicated,
            space,
        });
    }
    // Groups that lost their copies down to one op (see `drop_copies_of_moved`).
    out.groups.retain(|x| x.members.len() >= 2);
    // `groups_of` indexes groups in the order they were found; the final order is reversed.
    out.groups.reverse();
    out.rejected
        .sort_by_key(|x| (pos[&x.consumer], pos[&x.producer]));
    // Two groups may reject the same pair (a producer read by a member copied into both).
    out.rejected.dedup();
    out
}

/// Keeps the groups disjoint but for copies that stay in the graph: a group found earlier
/// (its root later in program order) may hold a copy of a node that the group just found
/// moves — its root, with readers outside every group (a `gather` reading a broadcast index
/// tensor that a `reduce`'s input fusion also recomputes), or a producer all of whose readers
/// it holds. Outlining the new group removes that node and rewires its readers to the
/// `fusion` op's results, so the earlier group reads the value from there instead of
/// recomputing it: its copies of the moved nodes are dropped, and then the copies that only
/// they read (copies are never group results). A group left with fewer than two ops is
/// dropped when the partition is done.
fn drop_copies_of_moved(
    g: &Graph,
    moved: &[NodeId],
    groups: &mut [FusionGroup],
    groups_of: &mut HashMap<NodeId, Vec<usize>>,
) {
    let mut touched: BTreeSet<usize> = BTreeSet::new();
    for m in moved {
        let Some(gs) = groups_of.remove(m) else {
            continue;
        };
        for gi in gs {
            let group = &mut groups[gi];
            group.members.retain(|x| x != m);
            group.duplicated.remove(m);
            touched.insert(gi);
        }
    }
    for gi in touched {
        let group = &mut groups[gi];
        loop {
            let members: HashSet<NodeId> = group.members.iter().copied().collect();
            let unread: Vec<NodeId> = group
                .duplicated
                .iter()
                .copied()
                .filter(|&d| !g.users(d).iter().any(|&(u, _, _)| members.contains(&u)))
                .collect();
            if unread.is_empty() {
                break;
            }
            for d in unread {
                group.members.retain(|&x| x != d);
                group.duplicated.remove(&d);
                if let Some(gs) = groups_of.get_mut(&d) {
                    gs.retain(|&x| x != gi);
                }
            }
        }
    }
}

/// Whether every user of `n` is in groups only that hold a copy of `n`: then no group reads
/// `n` from outside and it needs no group (nor materialization) of its own.
fn computed_by_copies(g: &Graph, n: NodeId, groups_of: &HashMap<NodeId, Vec<usize>>) -> bool {
    let Some(own) = groups_of.get(&n) else {
        return false;
    };
    let users = g.users(n);
    !users.is_empty()
        && !g.outputs().iter().any(|o| o.node == n)
        && users.iter().all(|&(u, _, _)| {
            groups_of
                .get(&u)
                .is_some_and(|gs| gs.iter().all(|gi| own.contains(gi)))
        })
}

/// Inputs, dimension constants, scalar constants and constants that are not splats stay
/// outside every group.
fn external_by_design(g: &Graph, n: NodeId) -> bool {
    let node = g.node(n);
    match &node.op {
        Op::Constant(l) => !l.splat || node.outputs.first().is_none_or(|t| t.rank() == 0),
        _ => matches!(node.kind(), OpKind::Input | OpKind::DimConstant),
    }
}
