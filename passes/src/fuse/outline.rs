//! Outlines each fusion group of a [`Partition`](super::partition::Partition) into one `fusion`
//! op whose region holds the
//! group's ops (XLA's fusion computation): the region's inputs are the values the group reads
//! from outside, its outputs the members' results that are read outside the group or are graph
//! outputs.
//!
//! Invariant: the graph computes the same values; the `fusion` op takes the root's place in
//! program order (every member precedes the root, and every outside user of a group result
//! follows it: [`super::partition`](mod@super::partition)'s invariant).

use super::partition::FusionGroup;
use ebb_ir::op::FusionKind;
use ebb_ir::{Graph, Node, NodeId, Op, ValueRef};
use std::collections::{HashMap, HashSet};

/// Outlines `group` of `g`; returns the `fusion` node.
pub fn outline(g: &mut Graph, group: &FusionGroup, name: &str) -> NodeId {
    let members: HashSet<NodeId> = group.members.iter().copied().collect();
    let mut region = Graph::new(name);
    region.scope = g.scope.clone();
    let mut map: HashMap<ValueRef, ValueRef> = HashMap::new();
    let mut external: Vec<ValueRef> = Vec::new();
    for &m in &group.members {
        let mut ops = Vec::new();
        for v in g.operands(m) {
            let inner = match map.get(&v) {
                Some(x) => *x,
                None => {
                    let x =
                        region.add_input(&format!("in{}", external.len()), g.value_type(v).clone());
                    external.push(v);
                    map.insert(v, x);
                    x
                }
            };
            ops.push(inner);
        }
        let n = g.node(m);
        let node = Node {
            op: n.op.clone(),
            outputs: n.outputs.clone(),
            regions: n.regions.clone(),
            loc: n.loc.clone(),
        };
        let id = region.add_node(node, &ops);
        for k in 0..n.outputs.len() as u32 {
            map.insert(ValueRef::new(m, k), ValueRef::new(id, k));
        }
    }
    let graph_outputs: HashSet<ValueRef> = g.outputs().iter().copied().collect();
    let mut results: Vec<ValueRef> = Vec::new();
    for &m in group
        .members
        .iter()
        .filter(|m| !group.duplicated.contains(m))
    {
        for k in 0..g.node(m).outputs.len() as u32 {
            let v = ValueRef::new(m, k);
            let outside = g
                .users(m)
                .iter()
                .any(|&(u, _, out)| out == k && !members.contains(&u));
            if outside || graph_outputs.contains(&v) {
                results.push(v);
            }
        }
    }
    let inner: Vec<ValueRef> = results.iter().map(|v| map[v]).collect();
    let n_out = inner.len();
    region.set_outputs(inner, vec![String::new(); n_out]);
    let types = results.iter().map(|v| g.value_type(*v).clone()).collect();
    let kind = if g.node(group.root).kind() == ebb_ir::OpKind::Reduce {
        FusionKind::Input
    } else {
        FusionKind::Loop
    };
    let mut node = Node::new(Op::Fusion(kind), types);
    node.loc = g.node(group.root).loc.clone();
    node.regions = vec![region];
    let id = g.add_node(node, &external);
    for (k, v) in results.iter().enumerate() {
        g.replace_all_uses(*v, ValueRef::new(id, k as u32));
    }
    // The fusion op takes the root's place.
    let order: Vec<NodeId> = g
        .order()
        .iter()
        .filter_map(|&n| {
            if n == group.root {
                Some(id)
            } else if n == id || (members.contains(&n) && !group.duplicated.contains(&n)) {
                None
            } else {
                Some(n)
            }
        })
        .collect();
    let moved: HashSet<NodeId> = members
        .iter()
        .copied()
        .filter(|m| !group.duplicated.contains(m))
        .collect();
    g.remove_nodes(&moved);
    g.set_order(order);
    // A duplicated producer whose every user was fused is dead now, and so, then, may be the
    // duplicated producers it read.
    loop {
        let dead: HashSet<NodeId> = group
            .duplicated
            .iter()
            .copied()
            .filter(|&d| {
                g.contains(d) && g.users(d).is_empty() && !g.outputs().iter().any(|o| o.node == d)
            })
            .collect();
        if dead.is_empty() {
            break;
        }
        g.remove_nodes(&dead);
    }
    id
}
