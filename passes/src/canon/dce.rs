//! Dead code elimination (`dce`): removes every op whose results do not reach the graph
//! outputs, transitively.
//!
//! Liveness roots are the graph outputs, every `input` (inputs are the graph's interface and
//! are never removed) and every side-effecting op ([`super::has_side_effects`]: `custom_call`s
//! with targets not known to be pure, and ops whose regions contain one). One backward sweep
//! over the program order marks the operands of live ops live; since the program order is
//! topological, every user is visited before its producers, so the sweep is linear in the
//! number of ops and edges. Multi-result ops stay when any result is used.
//!
//! Regions are processed recursively after their op is known to be live: inside a region the
//! roots are the values it returns (and its block arguments and side-effecting ops). A
//! region's interface (its inputs and returned values) is never changed, so removing unused
//! `while`-carried values is not done.
//!
//! Invariant: the graph outputs, inputs, shape assertions and side-effecting ops are kept;
//! the program order of the remaining ops is unchanged; the graph keeps verifying. Change count:
//! ops removed, counting the ops inside removed regions (so it equals the drop in
//! [`super::total_op_count`]).

use super::{for_each_region, has_side_effects, total_op_count};
use crate::manager::{Pass, PassContext, PassError, PassResult};
use crate::pass_id::PassId;
use ebb_ir::{Graph, NodeId, OpKind};
use petgraph::visit::{EdgeRef, NodeIndexable};
use std::collections::HashSet;

/// The DCE pass (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct Dce;

impl Pass for Dce {
    fn name(&self) -> &'static str {
        PassId::Dce.name()
    }

    fn run(&self, g: &mut Graph, _cx: &mut PassContext) -> Result<PassResult, PassError> {
        Ok(PassResult::changes(eliminate_dead_code(g)))
    }
}

/// Removes the dead ops of `g` and of the regions of its live ops; returns how many ops were
/// removed (regions included). Linear in ops + edges.
pub fn eliminate_dead_code(g: &mut Graph) -> usize {
    let bound = g.petgraph().node_bound();
    let mut live = vec![false; bound];
    for v in g.outputs() {
        if let Some(l) = live.get_mut(v.node.index()) {
            *l = true;
        }
    }
    let order: Vec<NodeId> = g.order().to_vec();
    let mut dead: HashSet<NodeId> = HashSet::new();
    for &id in order.iter().rev() {
        let n = g.node(id);
        let is_live = live[id.index()] || n.kind() == OpKind::Input || has_side_effects(n);
        if !is_live {
            dead.insert(id);
            continue;
        }
        live[id.index()] = true;
        for e in g
            .petgraph()
            .edges_directed(id, petgraph::Direction::Incoming)
        {
            live[e.source().index()] = true;
        }
    }
    // Ops inside the regions of removed ops go with them.
    let mut removed: usize = dead
        .iter()
        .map(|&id| 1 + g.node(id).regions.iter().map(total_op_count).sum::<usize>())
        .sum();
    if !dead.is_empty() {
        g.remove_nodes(&dead);
    }
    for id in order {
        if g.contains(id) {
            removed += for_each_region(g, id, |r| {
                Ok::<_, std::convert::Infallible>(eliminate_dead_code(r))
            })
            .unwrap_or(0);
        }
    }
    removed
}
