//! Loop-invariant carries handed over (`hand_over_carries`, run by the donation pass after
//! the graph's inputs are donated).
//!
//! A `while` whose body returns its block argument `j` unchanged (a scan's inputs, a
//! loop-invariant value: [`ebb_ir::op::while_forwards`]) has result `j` equal to operand `j`
//! after any number of iterations. When that operand is also read after the loop (a forward
//! scan's inputs, read again by the backward scan), its buffer is live across the loop and the
//! result, the same elements, is charged beside it. Here every reader that runs after the
//! loop in every schedule (a descendant of the `while`) reads result `j` instead, so the
//! operand dies at the loop and the result takes its buffer
//! ([`ebb_ir::op::in_place_writes`]): one buffer instead of two at the loop's point.
//!
//! A carry is handed over only when, afterwards, the operand's other readers all precede the
//! loop (are its ancestors), and the operand is a buffer the step owns: computed by an op that
//! is not a `constant`, or a donated graph input; not a graph output; read once by the loop.
//! Otherwise nothing changes (rewiring then would only lengthen the result's life).
//!
//! A carry initialized with a splat (`broadcast_in_dim` of a scalar `constant`: the zeros a
//! scan stacks its outputs into) that another op also reads — common-subexpression
//! elimination merges the equal zero stacks of all the loops of a step into one — gets its own
//! splat, made right before the loop ([`own_splats`]): the loop's operand then dies at the
//! loop, so the body's updates of it (donated to its next value) take its buffer, instead of
//! one zero stack held from the first loop to the last. A splat `constant` (constant folding
//! makes one of such a broadcast when the shapes are static, as in a plan compiled for one
//! shape) is made anew as a broadcast before its loop even when only the loop reads it: a
//! constant's buffer is never written in place.
//!
//! A value `x` whose transpose such loops carry unchanged (a forward scan's time-major input,
//! read again by the backward scan) and that is read again only after them is read there as
//! the last loop's result transposed back ([`hand_back_transposes`]), so that it dies at its
//! transpose instead of being held beside it across the loops.
//!
//! Invariant: every rewired read reads the same elements as before (result `j` *is* operand
//! `j`; a transpose transposed back is its operand), so results are bit-identical; no edge is added from a reader that did not already
//! follow the loop, so program order stays valid and no schedule is lost; only top-level
//! `while` ops are handled.

use crate::writable_splats::{place_before, remove_unread, splat_node};
use ebb_ir::{Graph, Literal, NodeId, Op, OpKind, ValueRef};
use petgraph::Direction;
use std::collections::HashSet;

/// The nodes reachable from `from` along `dir` (`from` excluded).
pub(crate) fn reach(g: &Graph, from: NodeId, dir: Direction) -> HashSet<NodeId> {
    let mut seen = HashSet::new();
    let mut stack = vec![from];
    while let Some(n) = stack.pop() {
        for m in g.petgraph().neighbors_directed(n, dir) {
            if seen.insert(m) {
                stack.push(m);
            }
        }
    }
    seen
}

/// Whether `v` is a buffer the step owns: computed by an op that is not a `constant`, or a
/// donated graph input.
pub(crate) fn owned(g: &Graph, v: ValueRef) -> bool {
    let producer = g.node(v.node);
    match producer.kind() {
        OpKind::Input => g.aliasing_output(v.node).is_some(),
        _ => !matches!(producer.op, Op::Constant(_)),
    }
}

/// The readers of `v` other than `except`: (node, operand index).
fn readers_but(g: &Graph, v: ValueRef, except: NodeId) -> Vec<(NodeId, u32)> {
    g.users(v.node)
        .into_iter()
        .filter(|&(u, _, out)| out == v.output && u != except)
        .map(|(u, k, _)| (u, k))
        .collect()
}

/// The top-level `while` ops of `g` with their carries returned unchanged
/// ([`ebb_ir::op::while_forwards`]), in program order.
fn top_level_loops(g: &Graph) -> Vec<(NodeId, Vec<usize>)> {
    g.order()
        .iter()
        .filter_map(
            |&id| match (&g.node(id).op, g.node(id).regions.as_slice()) {
                (Op::While, [_, body]) => Some((id, ebb_ir::op::while_forwards(body))),
                _ => None,
            },
        )
        .collect()
}

/// A splat a carry starts from: a `broadcast_in_dim` of a rank-0 `constant` (copied as it
/// is), or a splat `constant` of rank > 0 (what constant folding makes of one when the shape
/// is static; made anew as a rank-0 `constant` and its `broadcast_in_dim`, since a constant's
/// buffer is never written in place).
enum Splat {
    Broadcast,
    Constant(Literal),
}

/// The splat `v` is, if it is one.
fn splat_of(g: &Graph, v: ValueRef) -> Option<Splat> {
    let n = g.node(v.node);
    match &n.op {
        Op::BroadcastInDim(_) => {
            let ins = g.operands(v.node);
            (ins.len() == 1
                && g.value_type(ins[0]).rank() == 0
                && matches!(g.node(ins[0].node).op, Op::Constant(_)))
            .then_some(Splat::Broadcast)
        }
        Op::Constant(lit) if lit.splat && g.value_type(v).rank() > 0 => {
            Some(Splat::Constant(lit.clone()))
        }
        _ => None,
    }
}

/// Gives each computed carry of a top-level `while` of `g` whose operand is a splat read
/// elsewhere too (or a splat `constant`, see [`Splat`]) its own splat, placed right before
/// the loop; removes splats left unread. Returns the number of splats made.
pub fn own_splats(g: &mut Graph) -> usize {
    let loops = top_level_loops(g);
    let mut made = 0;
    let mut originals = HashSet::new();
    for (w, forwards) in loops {
        for (j, v) in g.operands(w).into_iter().enumerate() {
            let uses = g
                .users(v.node)
                .iter()
                .filter(|&&(_, _, out)| out == v.output)
                .count();
            // (A splat already copied for an earlier loop is copied for this one too, so it
            // is made right before each loop and the original is left unread.)
            let shared = uses >= 2 || originals.contains(&v.node);
            let Some(splat) = splat_of(g, v).filter(|_| !forwards.contains(&j)) else {
                continue;
            };
            let before = g.order().len();
            let copy = match splat {
                Splat::Broadcast if shared => {
                    let node = g.node(v.node).clone();
                    let ins = g.operands(v.node);
                    g.add_node(node, &ins)
                }
                Splat::Broadcast => continue,
                Splat::Constant(lit) => {
                    let ty = g.value_type(v).clone();
                    let loc = g.node(v.node).loc.clone();
                    splat_node(g, lit, ty, loc)
                }
            };
            place_before(g, before, w);
            g.set_operand(w, j as u32, ValueRef::new(copy, 0));
            originals.insert(v.node);
            made += 1;
        }
    }
    remove_unread(g, originals);
    made
}

/// Hands over the loop-invariant carries of the top-level `while` ops of `g` (see the module
/// docs); returns the number of reads rewired.
pub fn hand_over_carries(g: &mut Graph) -> usize {
    let loops = top_level_loops(g);
    let mut rewired = 0;
    for (w, forwards) in loops {
        if forwards.is_empty() {
            continue;
        }
        let after = reach(g, w, Direction::Outgoing);
        let before = reach(g, w, Direction::Incoming);
        let ops = g.operands(w);
        for j in forwards {
            let Some(&v) = ops.get(j) else {
                continue;
            };
            if !owned(g, v)
                || ops.iter().filter(|&&x| x == v).count() != 1
                || g.outputs().contains(&v)
            {
                continue;
            }
            let readers = readers_but(g, v, w);
            let late: Vec<(NodeId, u32)> = readers
                .iter()
                .copied()
                .filter(|(u, _)| after.contains(u))
                .collect();
            if late.is_empty()
                || readers
                    .iter()
                    .any(|(u, _)| !after.contains(u) && !before.contains(u))
            {
                continue;
            }
            for (u, k) in late {
                g.set_operand(u, k, ValueRef::new(w, j as u32));
                rewired += 1;
            }
        }
    }
    rewired
}

/// Lets a value whose transpose a loop carries unchanged die at the transpose: when every
/// reader of `x` but `y = transpose(x)` runs after a top-level `while` chain that returns `y`
/// unchanged (`y` an operand the body returns, that result an operand of a later such loop,
/// and so on: a forward scan's stacked input read again by the backward scan), those readers
/// read `transpose(r)` instead, `r` the last loop's result for `y` (the transposition
/// inverted: the same elements), made right before the first of them. `x` then dies at the
/// transpose instead of being held beside `y` across the loops. Returns the number of reads
/// rewired.
///
/// Only for `x` a buffer the step owns (not a `constant`, a donated input if an input, not a
/// graph output); `y` read once by each loop of the chain.
pub fn hand_back_transposes(g: &mut Graph) -> usize {
    let transposes: Vec<NodeId> = g
        .order()
        .iter()
        .copied()
        .filter(|&id| matches!(g.node(id).op, Op::Transpose(_)))
        .collect();
    let mut rewired = 0;
    for t in transposes {
        let Op::Transpose(perm) = g.node(t).op.clone() else {
            continue;
        };
        let x = g.operands(t)[0];
        let readers = readers_but(g, x, t);
        if !owned(g, x) || readers.is_empty() || g.outputs().contains(&x) {
            continue;
        }
        // The chain of loops carrying `y` unchanged; the last one that all readers follow.
        let mut carried = ValueRef::new(t, 0);
        let mut last = None;
        loop {
            let users: Vec<(NodeId, u32, u32)> = g
                .users(carried.node)
                .into_iter()
                .filter(|&(_, _, out)| out == carried.output)
                .collect();
            let next = users.iter().find_map(|&(w, j, _)| {
                let n = g.node(w);
                let forwards = match (&n.op, n.regions.as_slice()) {
                    (Op::While, [_, body]) => ebb_ir::op::while_forwards(body),
                    _ => return None,
                };
                let once = g.operands(w).iter().filter(|&&v| v == carried).count() == 1;
                (once && forwards.contains(&(j as usize))).then_some(ValueRef::new(w, j))
            });
            let Some(next) = next else { break };
            let after = reach(g, next.node, Direction::Outgoing);
            if readers.iter().all(|(u, _)| after.contains(u)) {
                last = Some(next);
            }
            carried = next;
        }
        let Some(r) = last else { continue };
        let mut inverse = vec![0i64; perm.len()];
        for (i, &p) in perm.iter().enumerate() {
            inverse[p as usize] = i as i64;
        }
        let mut node = g.node(t).clone();
        node.op = Op::Transpose(inverse);
        node.outputs = vec![g.value_type(x).clone()];
        let before = g.order().len();
        let back = g.add_node(node, &[r]);
        let mut order = g.order().to_vec();
        order.truncate(before);
        let first = order
            .iter()
            .position(|n| readers.iter().any(|(u, _)| u == n))
            .unwrap_or(order.len());
        order.insert(first, back);
        g.set_order(order);
        for (u, k) in readers {
            g.set_operand(u, k, ValueRef::new(back, 0));
            rewired += 1;
        }
    }
    rewired
}
