//! Splat `constant`s written in place made anew (run by the scheduling pass, after the
//! schedules are chosen).
//!
//! A `scatter` (one input) or `dynamic_update_slice` writes its result into its operand 0
//! when that operand dies at it ([`ebb_ir::op::in_place_writes`]) — but never into a
//! `constant`'s buffer. When the shapes are static, constant folding turns the zeros that
//! JAX scatters a gradient into (the transpose of a gather: an embedding table's gradient,
//! `x[idx]`'s cotangent) into a splat `constant` of the result's shape, so the op allocates
//! its result beside the zeros and copies them in: two buffers of the result's size at its
//! point instead of one. Here each such operand is replaced by a `broadcast_in_dim` of a
//! rank-0 `constant` with the same literal, read by the op alone, so the op writes into the
//! broadcast's buffer ([`splat_node`]). The splat `constant`, when then unread, is removed.
//!
//! The schedules are chosen on the graph with the splat `constant`s ([`own_written_splats_in`]
//! runs after them): the new nodes take the removed `constant`'s slot in program order and in
//! every schedule (else they go right before the op), so each schedule orders the ops as it
//! did, and the op's point holds one buffer of its result's size fewer. Rewritten before the
//! scheduler, the two nodes let it move the op elsewhere: on the golden set, GPT-2 small's
//! `wte` gradient moved 120 points earlier in one schedule variant, live to the end of the
//! step, and under 75% of its scheduled peak (B=8, S=128, `h100-sxm-pcie5`) finalize then
//! swapped the logits' gradient out: 668 µs added became 3884 µs.
//!
//! Invariant: the op reads the same elements as before (a broadcast of a splat's one value is
//! that splat), so results are bit-identical; the new nodes read nothing and precede the op
//! in program order and in every schedule, so each stays a topological order; no new tensor
//! is larger than the op's result, and no point's resident bytes rise by more than the rank-0
//! `constant`'s own bytes (at its point and the broadcast's).

use crate::memory::Schedule;
use ebb_ir::op::BroadcastSpec;
use ebb_ir::{Graph, Literal, Node, NodeId, Op, OpKind, TensorType, ValueRef};
use std::collections::HashSet;

/// Adds `broadcast_in_dim(constant lit : scalar)` of type `ty` (`lit` a splat literal of
/// `ty`'s element type) to `g`, both at `loc`, appended to the program order. Returns the
/// broadcast.
pub(crate) fn splat_node(
    g: &mut Graph,
    lit: Literal,
    ty: TensorType,
    loc: Option<String>,
) -> NodeId {
    let mut scalar = Node::new(Op::Constant(lit), vec![TensorType::scalar(ty.dtype)]);
    scalar.loc = loc.clone();
    let scalar = g.add_node(scalar, &[]);
    let spec = BroadcastSpec {
        dims: Vec::new(),
        shape: ty.shape.clone(),
    };
    let mut b = Node::new(Op::BroadcastInDim(spec), vec![ty]);
    b.loc = loc;
    g.add_node(b, &[ValueRef::new(scalar, 0)])
}

/// Moves the nodes appended to `g`'s program order since it held `since` nodes to right
/// before `at` (they stay at the end when `at` is not in it).
pub(crate) fn place_before(g: &mut Graph, since: usize, at: NodeId) {
    let mut order = g.order().to_vec();
    let new: Vec<NodeId> = order.split_off(since);
    let pos = order.iter().position(|&n| n == at).unwrap_or(order.len());
    order.splice(pos..pos, new);
    g.set_order(order);
}

/// Removes the nodes of `originals` that nothing reads any more (not an operand, not a graph
/// output) and returns them.
pub(crate) fn remove_unread(g: &mut Graph, originals: HashSet<NodeId>) -> HashSet<NodeId> {
    let unread: HashSet<NodeId> = originals
        .into_iter()
        .filter(|&n| g.users(n).is_empty() && !g.outputs().iter().any(|o| o.node == n))
        .collect();
    g.remove_nodes(&unread);
    unread
}

/// Gives each top-level `scatter` of one input and each `dynamic_update_slice` whose operand
/// 0 is a splat `constant` of rank > 0 its own splat (see the module docs), placed right
/// before the op in program order; returns the number of operands replaced.
pub fn own_written_splats(g: &mut Graph) -> usize {
    own_written_splats_in(g, &mut [])
}

/// As [`own_written_splats`], and keeps `schedules` (of `g`'s non-input ops) valid: where the
/// splat `constant` is removed (the op was its only reader), the new `constant` and
/// `broadcast_in_dim` take its slot in program order and in each schedule; else they go right
/// before the op in each. Returns the number of operands replaced.
pub fn own_written_splats_in(g: &mut Graph, schedules: &mut [&mut Schedule]) -> usize {
    let writers: Vec<NodeId> = g
        .order()
        .iter()
        .copied()
        .filter(|&id| {
            let n = g.node(id);
            match n.kind() {
                OpKind::Scatter => g.operands(id).len() == 3 && n.outputs.len() == 1,
                OpKind::DynamicUpdateSlice => n.outputs.len() == 1,
                _ => false,
            }
        })
        .collect();
    let mut made = 0;
    let mut originals = HashSet::new();
    for id in writers {
        let Some(&v) = g.operands(id).first() else {
            continue;
        };
        let producer = g.node(v.node);
        let Op::Constant(lit) = &producer.op else {
            continue;
        };
        let ty = g.value_type(v).clone();
        if !lit.splat || ty.rank() == 0 || g.node(id).outputs.first() != Some(&ty) {
            continue;
        }
        let (lit, loc) = (lit.clone(), producer.loc.clone());
        // The op is the constant's only reader (of every operand slot): the new nodes take
        // the constant's slot.
        let sole = g.users(v.node).iter().all(|&(u, _, _)| u == id)
            && !g.outputs().iter().any(|o| o.node == v.node);
        let at = if sole { v.node } else { id };
        let before = g.order().len();
        let b = splat_node(g, lit, ty, loc);
        let new: Vec<NodeId> = g.order()[before..].to_vec();
        place_before(g, before, at);
        for s in schedules.iter_mut() {
            let pos = s.iter().position(|&n| n == at).unwrap_or(s.len());
            s.splice(pos..pos, new.iter().copied());
        }
        g.set_operand(id, 0, ValueRef::new(b, 0));
        originals.insert(v.node);
        made += 1;
    }
    let unread = remove_unread(g, originals);
    for s in schedules.iter_mut() {
        s.retain(|n| !unread.contains(n));
    }
    made
}
