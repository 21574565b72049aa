//! Loop-invariant code motion (`licm`): computes once, before a `while` loop, what its body
//! would compute identically in every iteration, and hands the result to the body as a new
//! loop-carried value that the body returns unchanged.
//!
//! A body value is *loop-invariant* when it is a block argument the body returns unchanged at
//! its own position ([`ebb_ir::op::while_forwards`]: the weights a scan reads, captured values
//! the importer turned into carries), or the result of a *hoistable* op whose operands are all
//! loop-invariant or operand-free constants (`constant`, `dim_constant`, `iota`). Hoistable
//! ops are pure total functions without regions, so running one when the loop runs zero times
//! costs only its work and can neither fail nor have an effect: data movement (`transpose`,
//! `reshape`, `broadcast_in_dim`, `slice`, `reverse`, `concatenate`, `pad`), elementwise ops
//! (integer `divide`, `remainder` and `power` excepted), `select`, `clamp` and `dot_general`.
//! Not hoisted: ops reading only constants (folding's business, and nothing is saved), a
//! `reshape` of a block argument (a view, free in the body), ops with side effects or regions
//! (`custom_call`, `while`, `case`, `reduce`, ...), ops with data-dependent indices
//! (`gather`, `dynamic_slice`, ...), and any op whose result is not proven (over the graph's
//! symbol facts) to be at most as large as its largest loop-invariant operand.
//!
//! Besides the ops of the body, one copy the executor would otherwise make in every iteration
//! is made explicit and hoisted: a `dot_general` (not itself hoisted) with a loop-invariant
//! operand that is not laid out as the GEMM reads it in place (lhs: batching, free, then
//! contracting dimensions; rhs: batching, contracting, then free: a scan step's `dh·Wᵀ`, JAX's
//! contraction of `W` over its last dimension, which the unpacked GEMM and the shallow
//! product copy row-major at every call) reads a `transpose` of it into that order, made
//! before the loop. The result and its layout are unchanged (the free dimensions keep their
//! order), and the kernel is chosen from the product's sizes alone and sums the same products
//! in the same order, so the bits are the same.
//!
//! Memory (the size rule): a hoisted value is a loop operand, live from its op before the
//! loop to the end of the loop, as any value defined before the loop and read by it; the
//! liveness analysis and the planner charge it so (the new carry is an ordinary operand and
//! result of the `while`). Each hoisted op's result is no larger than the invariant operand it
//! is derived from, so hoisting adds at most one copy of the invariant values it derives from
//! at the loop's point; the work saved per iteration is that op's.
//!
//! Nested loops: regions are processed innermost first, so a value hoisted out of an inner
//! loop becomes an op of the outer body, which the outer loop may hoist in turn when it is
//! invariant there too. Nothing is hoisted out of a `case` branch (it may not run) or out of
//! a `while` condition (a few scalar ops); loops inside them are processed.
//!
//! After hoisting, the carries that neither region reads any more and that the body returns
//! unchanged (the `W` whose transpose a backward scan now carries instead) are removed
//! ([`crate::dead_carries`]).
//!
//! Invariant: every value the graph computes is unchanged (a hoisted op computes from the same
//! operands as in every iteration; a transposed `dot_general` operand is read in another
//! order only), so results are bit-identical; the graph keeps verifying; graph inputs, outputs
//! and side-effecting ops are kept. Change count: ops hoisted plus `transpose`s made plus
//! dead carries removed.

use crate::canon::dce::eliminate_dead_code;
use crate::canon::{for_each_region, has_side_effects, place_all_before};
use crate::dead_carries::drop_dead_carries;
use crate::manager::{Pass, PassContext, PassError, PassResult};
use crate::pass_id::PassId;
use ebb_ir::op::{while_forwards, DotDims};
use ebb_ir::{Graph, Node, NodeId, Op, OpKind, SymbolScope, TensorType, ValueRef};
use std::collections::{HashMap, HashSet};

/// The LICM pass (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct Licm;

impl Pass for Licm {
    fn name(&self) -> &'static str {
        PassId::Licm.name()
    }

    fn run(&self, g: &mut Graph, _cx: &mut PassContext) -> Result<PassResult, PassError> {
        let hoisted = hoist_loop_invariants(g);
        Ok(PassResult::changes(hoisted + drop_dead_carries(g)))
    }
}

/// Hoists the loop-invariant ops of every `while` body of `g` (regions included, innermost
/// first) and materializes loop-invariant `dot_general` operands in the GEMM's layout before
/// their loop, one `transpose` per value and permutation (see the module docs); returns the
/// number of ops hoisted plus `transpose`s made. Sizes are compared under `g.scope`.
pub fn hoist_loop_invariants(g: &mut Graph) -> usize {
    let scope = g.scope.clone();
    hoist_in(g, &scope)
}

/// [`hoist_loop_invariants`] on `g`, a graph or region, with the top-level graph's `scope`.
fn hoist_in(g: &mut Graph, scope: &SymbolScope) -> usize {
    let ids: Vec<NodeId> = g.order().to_vec();
    let mut n = 0;
    for &id in &ids {
        n += for_each_region(g, id, |r| {
            Ok::<_, std::convert::Infallible>(hoist_in(r, scope))
        })
        .unwrap_or(0);
    }
    for id in ids {
        let node = g.node(id);
        if node.kind() == OpKind::While && node.regions.len() == 2 && !has_side_effects(node) {
            n += hoist_loop(g, id, scope);
        }
    }
    n
}

/// What the body of one loop computes before the loop.
struct Hoisting {
    /// Body ops to hoist, in body program order.
    ops: Vec<NodeId>,
    /// `dot_general` operands (node, operand index) read through a `transpose` made before the
    /// loop, with that transpose's permutation.
    dots: Vec<(NodeId, usize, Vec<i64>)>,
}

/// Whether the op computing `node` may run before its loop: pure, total (no fault on any
/// operand values), without regions (see the module docs).
fn hoistable(node: &Node) -> bool {
    if !node.regions.is_empty() || node.outputs.len() != 1 {
        return false;
    }
    let k = node.kind();
    let int_result = node.outputs[0].dtype.is_int();
    match k {
        OpKind::Divide | OpKind::Remainder | OpKind::Power => !int_result,
        OpKind::Transpose
        | OpKind::Reshape
        | OpKind::BroadcastInDim
        | OpKind::Slice
        | OpKind::Reverse
        | OpKind::Concatenate
        | OpKind::Pad
        | OpKind::Select
        | OpKind::Clamp
        | OpKind::DotGeneral => true,
        _ => k.is_elementwise(),
    }
}

/// Whether `node` is an operand-free constant (recomputing it costs nothing worth a carry).
fn is_constant(node: &Node) -> bool {
    matches!(
        node.kind(),
        OpKind::Constant | OpKind::DimConstant | OpKind::Iota
    )
}

/// The permutation putting operand `side` (0: lhs, 1: rhs) of rank `rank` of a `dot_general`
/// in the order the GEMM reads in place (lhs: batching, free, contracting dimensions; rhs:
/// batching, contracting, free; free dimensions in their order, so the result's layout is
/// unchanged), or `None` when it already is in that order.
fn gemm_layout(dd: &DotDims, side: usize, rank: usize) -> Option<Vec<i64>> {
    let (batch, contract) = if side == 0 {
        (&dd.lhs_batch, &dd.lhs_contract)
    } else {
        (&dd.rhs_batch, &dd.rhs_contract)
    };
    let taken: HashSet<i64> = batch.iter().chain(contract).copied().collect();
    let free = (0..rank as i64).filter(|d| !taken.contains(d));
    let perm: Vec<i64> = if side == 0 {
        batch
            .iter()
            .copied()
            .chain(free)
            .chain(contract.iter().copied())
            .collect()
    } else {
        batch.iter().chain(contract).copied().chain(free).collect()
    };
    let identity = perm.iter().enumerate().all(|(i, &d)| d == i as i64);
    (perm.len() == rank && !identity).then_some(perm)
}

/// `dd` reading operand `side` (0: lhs, 1: rhs) of rank `rank` transposed by [`gemm_layout`].
fn relabel(dd: &mut DotDims, side: usize, rank: usize) {
    let (batch, contract) = if side == 0 {
        (&mut dd.lhs_batch, &mut dd.lhs_contract)
    } else {
        (&mut dd.rhs_batch, &mut dd.rhs_contract)
    };
    let (nb, nc) = (batch.len() as i64, contract.len() as i64);
    *batch = (0..nb).collect();
    *contract = if side == 0 {
        (rank as i64 - nc..rank as i64).collect()
    } else {
        (nb..nb + nc).collect()
    };
}

/// The body ops of `body` to hoist and the `dot_general`s to give a transposed operand (see
/// the module docs), `invariant` holding the forwarded block arguments.
fn plan(body: &Graph, scope: &SymbolScope, mut invariant: HashSet<NodeId>) -> Hoisting {
    let args: HashSet<NodeId> = invariant.clone();
    let mut h = Hoisting {
        ops: Vec::new(),
        dots: Vec::new(),
    };
    for &id in body.order() {
        let node = body.node(id);
        if node.kind() == OpKind::Input || is_constant(node) {
            continue;
        }
        let operands = body.operands(id);
        let inv = |v: &ValueRef| invariant.contains(&v.node);
        let cst = |v: &ValueRef| is_constant(body.node(v.node));
        let all_invariant = operands.iter().all(|v| inv(v) || cst(v));
        if let (Op::DotGeneral(dd), false) = (&node.op, all_invariant) {
            for (side, v) in operands.iter().enumerate().take(2) {
                if inv(v) {
                    if let Some(perm) = gemm_layout(dd, side, body.value_type(*v).rank()) {
                        h.dots.push((id, side, perm));
                    }
                }
            }
            continue;
        }
        if !hoistable(node)
            || !all_invariant
            || !operands.iter().any(inv)
            || (node.kind() == OpKind::Reshape && operands.iter().all(|v| args.contains(&v.node)))
        {
            continue;
        }
        let bytes = node.outputs[0].size_bytes();
        let fits = operands
            .iter()
            .filter(|v| inv(v))
            .any(|v| scope.prove_le(&bytes, &body.value_type(*v).size_bytes()));
        if fits {
            invariant.insert(id);
            h.ops.push(id);
        }
    }
    h
}

/// Hoists out of the `while` node `w` of `g` (see the module docs); returns the changes.
fn hoist_loop(g: &mut Graph, w: NodeId, scope: &SymbolScope) -> usize {
    let mut regions = std::mem::take(&mut g.node_mut(w).regions);
    let n = hoist_regions(g, w, &mut regions, scope);
    g.node_mut(w).regions = regions;
    n
}

/// [`hoist_loop`] with the loop's `[cond, body]` regions moved out of the node.
fn hoist_regions(g: &mut Graph, w: NodeId, regions: &mut [Graph], scope: &SymbolScope) -> usize {
    let [cond, body] = regions else {
        return 0;
    };
    let forwarded = while_forwards(body);
    let outer = g.operands(w);
    if outer.len() != body.inputs().len() || outer.len() != cond.inputs().len() {
        return 0;
    }
    let invariant: HashSet<NodeId> = forwarded.iter().map(|&i| body.inputs()[i]).collect();
    let h = plan(body, scope, invariant);
    if h.ops.is_empty() && h.dots.is_empty() {
        return 0;
    }
    // Body node → its value before the loop (forwarded block arguments, hoisted ops, and
    // constants made again before the loop).
    let mut before: HashMap<NodeId, ValueRef> = forwarded
        .iter()
        .map(|&i| (body.inputs()[i], outer[i]))
        .collect();
    let mut made: Vec<NodeId> = Vec::new();
    for &id in &h.ops {
        let ins: Vec<ValueRef> = body
            .operands(id)
            .into_iter()
            .map(|v| outer_value(g, body, &mut before, &mut made, v))
            .collect();
        let x = g.add_node(body.node(id).clone(), &ins);
        made.push(x);
        before.insert(id, ValueRef::new(x, 0));
    }
    // Hoisted values still read in the body (by an op not hoisted, or returned; not by a
    // `dot_general` reading its transpose instead).
    let hoisted: HashSet<NodeId> = h.ops.iter().copied().collect();
    let dots: HashSet<(NodeId, u32)> = h.dots.iter().map(|(d, k, _)| (*d, *k as u32)).collect();
    let carried: Vec<(ValueRef, ValueRef)> = h
        .ops
        .iter()
        .filter(|&&id| {
            body.users(id)
                .iter()
                .any(|&(u, k, _)| !hoisted.contains(&u) && !dots.contains(&(u, k)))
                || body.outputs().iter().any(|v| v.node == id)
        })
        .map(|&id| (ValueRef::new(id, 0), before[&id]))
        .collect();
    // Transposed operands of the `dot_general`s, one per value and permutation.
    let mut transposed: Vec<(NodeId, usize, ValueRef)> = Vec::new();
    let mut made_transposes: HashMap<(ValueRef, Vec<i64>), ValueRef> = HashMap::new();
    for (dot, side, perm) in &h.dots {
        let v = body.operands(*dot)[*side];
        let x = outer_value(g, body, &mut before, &mut made, v);
        if let Some(&t) = made_transposes.get(&(x, perm.clone())) {
            transposed.push((*dot, *side, t));
            continue;
        }
        let ty = g.value_type(x).clone();
        let shape = perm.iter().map(|&d| ty.shape[d as usize].clone()).collect();
        let mut t = Node::new(
            Op::Transpose(perm.clone()),
            vec![TensorType::new(ty.dtype, shape)],
        );
        t.loc = body.node(*dot).loc.clone();
        let tid = g.add_node(t, &[x]);
        made.push(tid);
        made_transposes.insert((x, perm.clone()), ValueRef::new(tid, 0));
        transposed.push((*dot, *side, ValueRef::new(tid, 0)));
    }
    place_all_before(g, &HashMap::from([(w, made)]));
    // The new carries: an operand and result of the loop, a block argument of both regions
    // that the body returns unchanged.
    for (v, x) in carried {
        let arg = add_carry(g, w, cond, body, x);
        // Every read, the body's return included (the new carry's own position reads `arg`).
        body.replace_all_uses(v, arg);
    }
    let mut carry_of: HashMap<ValueRef, ValueRef> = HashMap::new();
    for &(dot, side, t) in &transposed {
        let rank = g.value_type(t).rank();
        let arg = match carry_of.get(&t) {
            Some(&arg) => arg,
            None => {
                let arg = add_carry(g, w, cond, body, t);
                carry_of.insert(t, arg);
                arg
            }
        };
        body.set_operand(dot, side as u32, arg);
        if let Op::DotGeneral(dd) = &mut body.node_mut(dot).op {
            relabel(dd, side, rank);
        }
    }
    eliminate_dead_code(body);
    h.ops.len() + made_transposes.len()
}

/// The value before the loop of body value `v`: a forwarded block argument's loop operand, a
/// hoisted op's copy, or a copy of an operand-free constant made before the loop (recorded in
/// `before` and `made`).
fn outer_value(
    g: &mut Graph,
    body: &Graph,
    before: &mut HashMap<NodeId, ValueRef>,
    made: &mut Vec<NodeId>,
    v: ValueRef,
) -> ValueRef {
    // Every node recorded (block arguments, hoisted ops, constants) has one result.
    if let Some(&x) = before.get(&v.node) {
        return x;
    }
    let id = g.add_node(body.node(v.node).clone(), &[]);
    made.push(id);
    let x = ValueRef::new(id, 0);
    before.insert(v.node, x);
    x
}

/// Adds `x` (a value of `g` before the `while` node `w`) as the loop's last carried value:
/// an operand and a result of `w`, a block argument of `cond` and of `body`, which `body`
/// returns unchanged; returns that block argument of `body`.
fn add_carry(
    g: &mut Graph,
    w: NodeId,
    cond: &mut Graph,
    body: &mut Graph,
    x: ValueRef,
) -> ValueRef {
    let ty = g.value_type(x).clone();
    let k = g.operands(w).len();
    g.set_operand(w, k as u32, x);
    g.node_mut(w).outputs.push(ty.clone());
    add_block_argument(cond, &ty);
    let arg = add_block_argument(body, &ty);
    let mut outs = body.outputs().to_vec();
    let mut names = body.output_names.clone();
    outs.push(arg);
    if !names.is_empty() {
        names.resize(outs.len(), String::new());
    }
    body.set_outputs(outs, names);
    arg
}

/// Adds a block argument of type `ty` to region `r` (its last input), placed in the program
/// order right after the other inputs.
fn add_block_argument(r: &mut Graph, ty: &TensorType) -> ValueRef {
    let arg = r.add_input("", ty.clone());
    let inputs: HashSet<NodeId> = r.inputs().iter().copied().collect();
    let mut order: Vec<NodeId> = r
        .order()
        .iter()
        .copied()
        .filter(|&n| n != arg.node)
        .collect();
    let at = order
        .iter()
        .rposition(|n| inputs.contains(n))
        .map_or(0, |p| p + 1);
    order.insert(at, arg.node);
    r.set_order(order);
    arg
}
