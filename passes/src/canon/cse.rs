//! Common subexpression elimination (`cse`): merges ops that compute the same value into the
//! first one in program order.
//!
//! Two ops are identical when they have the same op (kind and typed payload), result types,
//! operands (after earlier merges) and structurally identical regions (same ops, payloads,
//! types and wiring; locations and region names are ignored). The later op's
//! results are replaced by the earlier op's and the later op is removed. One forward sweep in
//! program order with a hash table keyed by a fingerprint of (op, result types, operands, region
//! structure) makes the pass linear in the size of the graph (expected); fingerprint collisions
//! are resolved by a full comparison. [`ebb_ir::Op`] is `Eq + Hash` (no payload holds a float:
//! constants are literal bytes), so the op is hashed and compared directly.
//!
//! Not merged: `input`s, side-effecting ops ([`super::has_side_effects`]) and
//! `optimization_barrier`s (a barrier exists precisely to keep the ops behind it distinct, e.g.
//! JAX's rematerialized recomputations). Regions are processed recursively first, each as an
//! independent graph (regions cannot capture outer values).
//!
//! **CSE undoes rematerialization.** A recomputed op (remat) is by construction identical to
//! the op it recomputes; CSE would merge the copy back into the original and stretch the
//! original's live range over the whole gap again, raising peak memory. CSE therefore runs in
//! canonicalization, *before* scheduling and memory planning, never after.
//!
//! Invariant: the graph's inputs, outputs (count, order, types), assertions and side-effecting
//! ops are kept, and the program order of the remaining ops is unchanged. Change count: ops
//! merged away, counting the ops inside their regions.

use super::{for_each_region, has_side_effects, total_op_count};
use crate::manager::{Pass, PassContext, PassError, PassResult};
use crate::pass_id::PassId;
use ebb_ir::{Graph, NodeId, OpKind, ValueRef};
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

/// The CSE pass (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct Cse;

impl Pass for Cse {
    fn name(&self) -> &'static str {
        PassId::Cse.name()
    }

    fn run(&self, g: &mut Graph, _cx: &mut PassContext) -> Result<PassResult, PassError> {
        Ok(PassResult::changes(eliminate_common_subexpressions(g)))
    }
}

/// Whether CSE may merge op `id` into an identical earlier one.
fn mergeable(g: &Graph, id: NodeId) -> bool {
    let n = g.node(id);
    !matches!(
        n.kind(),
        OpKind::Input | OpKind::OptimizationBarrier | OpKind::AnnotateDevicePlacement
    ) && !has_side_effects(n)
}

/// Merges the duplicate ops of `g` (regions included); returns how many ops were removed.
/// Expected linear time in ops + edges.
pub fn eliminate_common_subexpressions(g: &mut Graph) -> usize {
    let order: Vec<NodeId> = g.order().to_vec();
    let mut table: HashMap<u64, Vec<NodeId>> = HashMap::with_capacity(order.len());
    let mut merged: HashSet<NodeId> = HashSet::new();
    let mut changes = 0;
    for id in order {
        changes += for_each_region(g, id, |r| {
            Ok::<_, std::convert::Infallible>(eliminate_common_subexpressions(r))
        })
        .unwrap_or(0);
        if !mergeable(g, id) {
            continue;
        }
        let operands = g.operands(id);
        let key = fingerprint(g, id, &operands);
        let bucket = table.entry(key).or_default();
        let rep = bucket
            .iter()
            .copied()
            .find(|&r| same_op(g, r, id, &operands));
        match rep {
            None => bucket.push(id),
            Some(rep) => {
                for k in 0..g.node(id).outputs.len() as u32 {
                    g.replace_all_uses(ValueRef::new(id, k), ValueRef::new(rep, k));
                }
                changes += 1 + g.node(id).regions.iter().map(total_op_count).sum::<usize>();
                merged.insert(id);
            }
        }
    }
    if !merged.is_empty() {
        g.remove_nodes(&merged);
    }
    changes
}

/// Hash of (op, result types, operands, region structure) of node `id`.
fn fingerprint(g: &Graph, id: NodeId, operands: &[ValueRef]) -> u64 {
    let mut h = DefaultHasher::new();
    let n = g.node(id);
    n.op.hash(&mut h);
    n.outputs.hash(&mut h);
    operands.hash(&mut h);
    for r in &n.regions {
        hash_region(r, &mut h);
    }
    h.finish()
}

/// Whether node `a` and node `b` (whose operands are `b_operands`) compute the same values.
fn same_op(g: &Graph, a: NodeId, b: NodeId, b_operands: &[ValueRef]) -> bool {
    let (x, y) = (g.node(a), g.node(b));
    x.op == y.op
        && x.outputs == y.outputs
        && x.regions.len() == y.regions.len()
        && g.operands(a) == b_operands
        && x.regions
            .iter()
            .zip(&y.regions)
            .all(|(p, q)| regions_eq(p, q))
}

/// Position of every node of `r` in its program order, for wiring comparisons.
fn positions(r: &Graph) -> HashMap<NodeId, usize> {
    r.order()
        .iter()
        .enumerate()
        .map(|(i, &id)| (id, i))
        .collect()
}

/// Hashes the structure of region `r`: per op its op (kind and payload), result types, operand
/// positions and nested regions; then the returned positions. Ignores locations and names.
fn hash_region<H: Hasher>(r: &Graph, h: &mut H) {
    let pos = positions(r);
    r.order().len().hash(h);
    for &id in r.order() {
        let n = r.node(id);
        n.op.hash(h);
        n.outputs.hash(h);
        for v in r.operands(id) {
            (pos.get(&v.node), v.output).hash(h);
        }
        for sub in &n.regions {
            hash_region(sub, h);
        }
    }
    for v in r.outputs() {
        (pos.get(&v.node), v.output).hash(h);
    }
}

/// Structural equality of two regions (see [`hash_region`]), assertions included.
fn regions_eq(a: &Graph, b: &Graph) -> bool {
    if a.order().len() != b.order().len()
        || a.outputs().len() != b.outputs().len()
        || a.assertions != b.assertions
    {
        return false;
    }
    let (pa, pb) = (positions(a), positions(b));
    let wire = |p: &HashMap<NodeId, usize>, v: &ValueRef| (p.get(&v.node).copied(), v.output);
    let ops_eq = a.order().iter().zip(b.order()).all(|(&x, &y)| {
        let (m, n) = (a.node(x), b.node(y));
        let (ox, oy) = (a.operands(x), b.operands(y));
        m.op == n.op
            && m.outputs == n.outputs
            && ox.len() == oy.len()
            && ox
                .iter()
                .zip(&oy)
                .all(|(u, v)| wire(&pa, u) == wire(&pb, v))
            && m.regions.len() == n.regions.len()
            && m.regions
                .iter()
                .zip(&n.regions)
                .all(|(p, q)| regions_eq(p, q))
    });
    ops_eq
        && a.outputs()
            .iter()
            .zip(b.outputs())
            .all(|(u, v)| wire(&pa, u) == wire(&pb, v))
}
