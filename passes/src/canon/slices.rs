//! Forwarding of slices through `dynamic_update_slice` (`forward_slices`).
//!
//! A scan stacks what its backward pass needs: iteration `i` writes its residual into row `i`
//! of a `[L, ...]` buffer with `dynamic_update_slice`, and the backward scan reads row `i` back
//! with `dynamic_slice`. Once the loops are unrolled ([`super::unroll`]) and the indices folded
//! ([`super::fold`]), every start index is a constant, and for a `dynamic_slice` with constant
//! starts or a unit-stride `slice` (a *read* of a constant window):
//! 1. a read of exactly the window a `dynamic_update_slice` wrote (same clamped starts, same
//!    sizes, same type) is the update itself — its uses take the update;
//! 2. a read of a window disjoint from the window a `dynamic_update_slice` wrote reads the same
//!    elements from that op's operand — it is rewired to the operand, and rule 1 or 2 applies
//!    again there;
//! 3. a `dynamic_slice` with constant starts that was not forwarded becomes the equivalent
//!    `slice` (the stacked parameters a scan reads layer by layer).
//!
//! Start indices are clamped as the StableHLO spec says (`clamp(start, 0, dim - size)`,
//! §`dynamic_slice`, §`dynamic_update_slice`). A dimension whose size is symbolic is only
//! understood when the window covers it whole (size = dimension, start 0 after clamping).
//! When the stacked buffer has no other reader it dies and [`super::dce`] removes the whole
//! chain of updates, so the planner sees each layer's residual as its own tensor with its own
//! live range.
//!
//! Invariant: every rewritten read reads the same elements as before, so results are
//! bit-identical; no tensor grows; graph inputs, outputs and assertions are unchanged; a
//! `slice` made by rule 3 takes its `dynamic_slice`'s place in program order. Forwarded and
//! replaced slices are removed. Change count: reads forwarded, rewired or made `slice`s.

use super::unroll::scalar_int;
use crate::manager::{Pass, PassContext, PassError, PassResult};
use crate::pass_id::PassId;
use ebb_ir::op::SliceSpec;
use ebb_ir::{DimExpr, Graph, Node, NodeId, Op, OpKind, ValueRef};
use std::collections::{HashMap, HashSet};

/// The slice-forwarding pass (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct ForwardSlices;

impl Pass for ForwardSlices {
    fn name(&self) -> &'static str {
        PassId::ForwardSlices.name()
    }

    fn run(&self, g: &mut Graph, _cx: &mut PassContext) -> Result<PassResult, PassError> {
        Ok(PassResult::changes(forward_slices(g)))
    }
}

/// One dimension of a window with constant starts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Span {
    /// The whole (symbolic) dimension.
    Full,
    /// `[start, start + len)`, start already clamped.
    At(i64, i64),
}

/// Forwards the constant-window reads of `g` (see the module docs); returns the change count.
pub fn forward_slices(g: &mut Graph) -> usize {
    let order: Vec<NodeId> = g.order().to_vec();
    let mut removed = HashSet::new();
    let mut replaced_by: HashMap<NodeId, NodeId> = HashMap::new();
    let mut changes = 0;
    for id in order {
        let ops = g.operands(id);
        let Some(win) = read_window(g, id) else {
            continue;
        };
        let out = g.node(id).outputs[0].clone();
        let mut src = ops[0];
        let mut forwarded = None;
        while src.output == 0 && g.node(src.node).kind() == OpKind::DynamicUpdateSlice {
            let u = g.operands(src.node);
            let upd_ty = g.value_type(u[1]);
            let Some(written) = window(g, src, &upd_ty.shape.clone(), &u[2..]) else {
                break;
            };
            if written == win && *upd_ty == out {
                forwarded = Some(u[1]);
                break;
            }
            if !disjoint(&win, &written) {
                break;
            }
            src = u[0];
        }
        if let Some(v) = forwarded {
            g.replace_all_uses(ValueRef::new(id, 0), v);
            removed.insert(id);
            changes += 1;
            continue;
        }
        if src != ops[0] {
            g.set_operand(id, 0, src);
            changes += 1;
        }
        if g.node(id).kind() == OpKind::DynamicSlice {
            let dims = g.value_type(src).shape.clone();
            let mut node = Node::new(Op::Slice(as_slice(&win, &dims)), vec![out]);
            node.loc.clone_from(&g.node(id).loc);
            let new = g.add_node(node, &[src]);
            g.replace_all_uses(ValueRef::new(id, 0), ValueRef::new(new, 0));
            replaced_by.insert(id, new);
            removed.insert(id);
            changes += 1;
        }
    }
    super::place_before(g, &replaced_by);
    if !removed.is_empty() {
        g.remove_nodes(&removed);
    }
    changes
}

/// The window node `id` reads from its operand 0, when it is a `dynamic_slice` with constant
/// starts or a unit-stride `slice` with constant bounds (symbolic dimensions whole).
fn read_window(g: &Graph, id: NodeId) -> Option<Vec<Span>> {
    let n = g.node(id);
    let ops = g.operands(id);
    match &n.op {
        Op::DynamicSlice(sizes) => window(g, ops[0], sizes, &ops[1..]),
        Op::Slice(s) => {
            let dims = &g.value_type(ops[0]).shape;
            let mut out = Vec::with_capacity(dims.len());
            for (k, d) in dims.iter().enumerate() {
                if s.strides.get(k)?.as_const()? != 1 {
                    return None;
                }
                let (start, limit) = (s.start.get(k)?, s.limit.get(k)?);
                out.push(match (d.as_const(), start.as_const(), limit.as_const()) {
                    (Some(_), Some(a), Some(b)) => Span::At(a, b - a),
                    (None, Some(0), _) if limit == d => Span::Full,
                    _ => return None,
                });
            }
            Some(out)
        }
        _ => None,
    }
}

/// The `slice` that reads `win` from an operand of shape `dims`.
fn as_slice(win: &[Span], dims: &[DimExpr]) -> SliceSpec {
    let (mut start, mut limit) = (Vec::new(), Vec::new());
    for (w, d) in win.iter().zip(dims) {
        match *w {
            Span::At(s, n) => {
                start.push(DimExpr::constant(s));
                limit.push(DimExpr::constant(s + n));
            }
            Span::Full => {
                start.push(DimExpr::zero());
                limit.push(d.clone());
            }
        }
    }
    SliceSpec {
        strides: vec![DimExpr::constant(1); win.len()],
        start,
        limit,
    }
}

/// The window of `sizes` at the constant `starts` in `operand`, clamped; `None` when a start is
/// not a constant or a symbolic size is not the whole dimension.
fn window(
    g: &Graph,
    operand: ValueRef,
    sizes: &[DimExpr],
    starts: &[ValueRef],
) -> Option<Vec<Span>> {
    let dims = &g.value_type(operand).shape;
    if dims.len() != sizes.len() || starts.len() != sizes.len() {
        return None;
    }
    let mut out = Vec::with_capacity(dims.len());
    for ((d, z), s) in dims.iter().zip(sizes).zip(starts) {
        let start = scalar_int(g, *s)?;
        let room = d.checked_sub(z).ok()?.as_const()?;
        if room < 0 {
            return None;
        }
        out.push(match (d.as_const(), z.as_const()) {
            (Some(_), Some(len)) => Span::At(start.clamp(0, room), len),
            (None, _) if room == 0 => Span::Full,
            _ => return None,
        });
    }
    Some(out)
}

/// Whether two windows of the same buffer share no element.
fn disjoint(a: &[Span], b: &[Span]) -> bool {
    a.iter().zip(b).any(|(x, y)| match (x, y) {
        (Span::At(s, n), Span::At(t, m)) => s + n <= *t || t + m <= *s || *n == 0 || *m == 0,
        _ => false,
    })
}
