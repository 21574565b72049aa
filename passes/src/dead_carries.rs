//! Dead loop carries (`drop_dead_carries`, run by the `licm` pass after hoisting): a `while`
//! carry that neither region reads and that the body returns unchanged at its own position
//! is removed: the loop's operand, its result, the block arguments of `cond` and `body` and
//! the body's output. Readers of the result read the operand instead.
//!
//! Such carries are what [`crate::licm`] leaves behind: once `transpose(W)` is hoisted out of
//! a backward scan, the body reads the transposed carry and no longer `W`, which it still
//! carries unchanged. The executor passes every carry through every iteration, and the
//! planner charges each carry across the loop; removed, neither does.
//!
//! A carry `j` is dead when the body returns its block argument `j` at position `j` and at
//! no other, no op of the body or of `cond` reads block argument `j`, `cond` does not return
//! it, and the loop's result `j` is not a graph output (a graph output must be computed by
//! an op to take a donated input's buffer; the rewired output would be the operand itself).
//! Loops inside regions are processed, innermost first; `while` ops with side effects are
//! kept whole.
//!
//! Invariant: every value the graph computes is unchanged: the loop's result `j` equals its
//! operand `j` after any number of iterations (the body returns it unchanged), so each reader
//! reads the same elements; the body and `cond` compute the same values from the carries
//! they read, so the loop runs the same iterations and its other results are the same; the
//! operand is defined before the loop, so every reader still follows its operands in
//! program order. Change count: carries removed.

use crate::canon::{for_each_region, has_side_effects, place_before};
use ebb_ir::op::while_forwards;
use ebb_ir::{Graph, Node, NodeId, OpKind, ValueRef};
use std::collections::{HashMap, HashSet};

/// Removes the dead carries of every `while` of `g` (regions included, innermost first; see
/// the module docs); returns how many.
pub fn drop_dead_carries(g: &mut Graph) -> usize {
    let ids: Vec<NodeId> = g.order().to_vec();
    let mut n = 0;
    for &id in &ids {
        n += for_each_region(g, id, |r| {
            Ok::<_, std::convert::Infallible>(drop_dead_carries(r))
        })
        .unwrap_or(0);
    }
    for id in ids {
        let node = g.node(id);
        if node.kind() == OpKind::While && node.regions.len() == 2 && !has_side_effects(node) {
            n += drop_in_loop(g, id);
        }
    }
    n
}

/// The dead carries of loop `id` (ascending).
fn dead(g: &Graph, id: NodeId) -> Vec<usize> {
    let node = g.node(id);
    let [cond, body] = node.regions.as_slice() else {
        return Vec::new();
    };
    let outputs: HashSet<ValueRef> = g.outputs().iter().copied().collect();
    let unread = |r: &Graph, j: usize| r.inputs().get(j).is_some_and(|&a| r.users(a).is_empty());
    while_forwards(body)
        .into_iter()
        .filter(|&j| {
            let arg = ValueRef::new(body.inputs()[j], 0);
            body.outputs().iter().filter(|&&o| o == arg).count() == 1
                && unread(body, j)
                && unread(cond, j)
                && !cond.outputs().iter().any(|o| o.node == cond.inputs()[j])
                && !outputs.contains(&ValueRef::new(id, j as u32))
        })
        .collect()
}

/// Removes the dead carries of loop `id` of `g`: a new `while` without them takes its place.
fn drop_in_loop(g: &mut Graph, id: NodeId) -> usize {
    let (body_ins, cond_ins) = {
        let r = &g.node(id).regions;
        (r[1].inputs().len(), r[0].inputs().len())
    };
    let arity = g.node(id).outputs.len();
    if body_ins != arity || cond_ins != arity || g.operands(id).len() != arity {
        return 0;
    }
    let gone = dead(g, id);
    if gone.is_empty() {
        return 0;
    }
    let ops = g.operands(id);
    let mut node = g.node(id).clone();
    for &j in gone.iter().rev() {
        node.outputs.remove(j);
        let [cond, body] = node.regions.as_mut_slice() else {
            return 0;
        };
        body.remove_output(j);
        if !body.remove_input(j) || !cond.remove_input(j) {
            // Checked by `dead`: both are unread; nothing to undo as `node` is a copy.
            return 0;
        }
    }
    let kept: Vec<usize> = (0..arity).filter(|j| !gone.contains(j)).collect();
    let operands: Vec<ValueRef> = kept.iter().map(|&j| ops[j]).collect();
    let new = g.add_node(
        Node {
            op: node.op,
            outputs: node.outputs,
            regions: node.regions,
            loc: node.loc,
        },
        &operands,
    );
    place_before(g, &HashMap::from([(id, new)]));
    for (k, &j) in kept.iter().enumerate() {
        g.replace_all_uses(ValueRef::new(id, j as u32), ValueRef::new(new, k as u32));
    }
    for &j in &gone {
        g.replace_all_uses(ValueRef::new(id, j as u32), ops[j]);
    }
    g.remove_nodes(&HashSet::from([id]));
    gone.len()
}
