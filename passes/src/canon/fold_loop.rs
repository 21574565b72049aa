//! Rule 10 of [`super::fold`]: constant loop-invariant values of a `while` inside its regions.
//!
//! JAX passes the loop-invariant operands of a scan's body (the column offsets of the gates
//! an RNN cell slices out of one matmul, the constants of a closed-over computation) as
//! carried values that the body returns unchanged. In a loop that is not unrolled the body
//! then reads them as block arguments, so the ops that take them as indices (`gather`,
//! `scatter`, `dynamic_slice`) cannot be folded and run their general kernels in every
//! iteration. Here a carried value `i` whose initial operand is a `constant` (a splat, or at
//! most [`super::Fold::max_elements`] elements) and that the body returns unchanged
//! (`body.outputs()[i]` is the body's argument `i`) holds that constant in every iteration:
//! each read of argument `i` in the `cond` and `body` regions (other than the body's return
//! of it) reads a copy of the constant instead, placed right after the region's arguments.
//!
//! Invariant: the loop's interface (operands, results, region arguments and returns) is
//! unchanged, and every rewired read sees the value it saw before, so results are
//! bit-identical. The copies are no larger than the constant outside. Change count: regions
//! whose reads of a carried value were rewired.

use super::fold::elements;
use ebb_ir::{Graph, Node, NodeId, Op, ValueRef};

/// Applies rule 10 to `while` node `id` of `g` (see the module docs); returns the change count.
pub(super) fn fold_invariants(g: &mut Graph, id: NodeId, max: usize) -> usize {
    if g.node(id).op != Op::While || g.node(id).regions.len() != 2 {
        return 0;
    }
    let operands = g.operands(id);
    let mut consts = Vec::new();
    {
        let body = &g.node(id).regions[1];
        for (i, v) in operands.iter().enumerate() {
            let arg = body.inputs().get(i).copied();
            let returned = arg.is_some_and(|a| body.outputs().get(i) == Some(&ValueRef::new(a, 0)));
            if returned && elements(g, *v, max).is_some() {
                consts.push((i, g.node(v.node).clone()));
            }
        }
    }
    if consts.is_empty() {
        return 0;
    }
    let mut changes = 0;
    for r in 0..2 {
        let mut region = std::mem::take(&mut g.node_mut(id).regions[r]);
        changes += rewire(&mut region, &consts);
        g.node_mut(id).regions[r] = region;
    }
    changes
}

/// Rewires the reads of the carried values `consts` (index, the constant's node) in region `r`
/// to copies of the constants; returns 1 when any read was rewired, else 0.
fn rewire(r: &mut Graph, consts: &[(usize, Node)]) -> usize {
    let mut added = Vec::new();
    for (i, c) in consts {
        let Some(&arg) = r.inputs().get(*i) else {
            continue;
        };
        let users = r.users(arg);
        if users.is_empty() || r.value_type(ValueRef::new(arg, 0)) != &c.outputs[0] {
            continue;
        }
        let mut copy = Node::new(c.op.clone(), c.outputs.clone());
        copy.loc.clone_from(&c.loc);
        let new = r.add_node(copy, &[]);
        for (user, operand, _) in users {
            r.set_operand(user, operand, ValueRef::new(new, 0));
        }
        added.push(new);
    }
    if added.is_empty() {
        return 0;
    }
    // The copies go right after the region's arguments.
    let order = r.order();
    let keep = order.len() - added.len();
    let args = order[..keep]
        .iter()
        .take_while(|&&n| r.node(n).kind() == ebb_ir::OpKind::Input)
        .count();
    let mut new_order = order[..args].to_vec();
    new_order.extend_from_slice(&added);
    new_order.extend_from_slice(&order[args..keep]);
    r.set_order(new_order);
    1
}
