//! Dot-accumulate (`dot_accumulate`): a loop-carried accumulator updated by a product,
//! `c' = add(c, dot_general(a, b))` in a `while` body (the weight gradients a backward scan
//! sums over time steps, `dW += xᵀ·dG`), becomes one `dot_general(a, b, c)` in the
//! dot-accumulate form ([`ebb_ir::Op::DotGeneral`]): the product is added into the
//! accumulator's buffer ([`ebb_ir::op::in_place_writes`]), so the body neither holds the
//! product beside the accumulator nor runs a separate `add` over it.
//!
//! Rewritten: an `add` returned by a `while` body at position `j` whose left operand is the
//! body's block argument `j`, donated to that output (the carry's old value dies at the
//! update: `crate::donate::donate_into_branches`), and whose right operand is the only use of
//! a two-operand `f32` `dot_general` with `f32` operands (the types the executor's shallow
//! product accumulates into the buffer directly). The `add` node becomes the dot-accumulate
//! node (its location kept); the `dot_general` is removed. Bodies of nested loops are
//! visited too. Run with loop fusion only (`--fusion off` keeps every op).
//!
//! Memory: before, the product and the sum were two buffers beside the carry at the `add`;
//! after, the result is written in place into the carry, so the body's peak drops by up to
//! two buffers of the accumulator's size; the planner, the checker and the executor read the
//! in-place write from [`ebb_ir::op::in_place_writes`]. The executor adds the product into the
//! carry's buffer as each element's sum completes where the contraction is at most one depth
//! block of the packing GEMM deep (256 terms, [`ebb_ir::op::ACCUMULATE_DEPTH`]: the shallow
//! kernel's store, or the GEMM adding each element as it stores it); a deeper product it computes apart, in a
//! buffer of the result's size, which planner, checker and executor charge as the op's
//! transient ([`ebb_ir::op::accumulate_product_bytes`]: the result's bytes where the depth,
//! a symbolic expression, exceeds 256 at the bindings, else 0), so the measured peak is the
//! planned one at every shape. (The GEMM's packing panels are not counted, for any product;
//! nor are the `f64` buffers of the executor's `f64` check mode, which computes every
//! contraction apart.)
//!
//! Invariant: results are bit-identical. The executor computes the product exactly as it
//! computes a two-operand `dot_general` (the same kernel, summing each element's terms in
//! the same order) and adds the accumulator once, as the left operand, as the `add` did:
//! `c + Σₖ aₖbₖ`. In place, the unpacked GEMM adds each element as it stores it; the packing
//! GEMM's β = 1 store `c + chain` is that sum except where its AVX2+FMA kernel's chain ends at
//! `-0` (a sum of products that underflow), which the two-operand product stores as `+0`: the
//! executor turns the sums' `-0`s into `+0` there (see `ebb_runtime`'s `Gemm::raw_add`). Where two NaNs of different payloads meet, which payload
//! the sum carries is not pinned down. The graph keeps verifying; graph inputs, outputs and
//! side-effecting ops are kept. Change count: the `add`s rewritten.

use crate::canon::for_each_region;
use crate::manager::{Pass, PassContext, PassError, PassResult};
use crate::pass_id::PassId;
use ebb_ir::{DType, Graph, NodeId, Op, OpKind, ValueRef};
use std::collections::HashSet;

/// The dot-accumulate pass (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct DotAccumulate;

impl Pass for DotAccumulate {
    fn name(&self) -> &'static str {
        PassId::DotAccumulate.name()
    }

    fn run(&self, g: &mut Graph, _cx: &mut PassContext) -> Result<PassResult, PassError> {
        Ok(PassResult::changes(accumulate_dots(g)))
    }
}

/// Rewrites the loop-carried `add(c, dot_general(a, b))` updates of every `while` body of `g`
/// (regions included) into `dot_general(a, b, c)` (see the module docs); returns how many.
pub fn accumulate_dots(g: &mut Graph) -> usize {
    let ids: Vec<NodeId> = g.order().to_vec();
    let mut n = 0;
    for id in ids {
        n += for_each_region(g, id, |r| {
            Ok::<_, std::convert::Infallible>(accumulate_dots(r))
        })
        .unwrap_or(0);
        let node = g.node_mut(id);
        if node.kind() == OpKind::While && node.regions.len() == 2 {
            n += accumulate_in_body(&mut node.regions[1]);
        }
    }
    n
}

/// The rewrite in one `while` body.
fn accumulate_in_body(body: &mut Graph) -> usize {
    let found: Vec<(NodeId, NodeId)> = body
        .outputs()
        .iter()
        .enumerate()
        .filter_map(|(j, &v)| accumulation(body, j, v))
        .collect();
    let mut dead = HashSet::new();
    for &(add, dot) in &found {
        let ops = body.operands(dot);
        let (a, b) = (ops[0], ops[1]);
        let c = body.operands(add)[0];
        let Op::DotGeneral(dims) = body.node(dot).op.clone() else {
            continue;
        };
        body.node_mut(add).op = Op::DotGeneral(dims);
        body.set_operand(add, 0, a);
        body.set_operand(add, 1, b);
        body.set_operand(add, 2, c);
        dead.insert(dot);
    }
    body.remove_nodes(&dead);
    found.len()
}

/// `(add, dot)` when body output `j`, `v`, is a loop-carried accumulation (see the module
/// docs).
fn accumulation(body: &Graph, j: usize, v: ValueRef) -> Option<(NodeId, NodeId)> {
    let add = v.node;
    let node = body.node(add);
    if node.kind() != OpKind::Add || v.output != 0 || node.outputs[0].dtype != DType::F32 {
        return None;
    }
    let [c, p] = body.operands(add)[..] else {
        return None;
    };
    let arg = *body.inputs().get(j)?;
    if c != ValueRef::new(arg, 0) || body.aliasing_output(arg) != Some(j) || p.node == arg {
        return None;
    }
    let dot = body.node(p.node);
    let ops = body.operands(p.node);
    let f32s = ops.len() == 2 && ops.iter().all(|&o| body.value_type(o).dtype == DType::F32);
    let single_use = body.users(p.node).len() == 1 && !body.outputs().contains(&p);
    (matches!(dot.op, Op::DotGeneral(_)) && f32s && single_use && p.output == 0)
        .then_some((add, p.node))
}
