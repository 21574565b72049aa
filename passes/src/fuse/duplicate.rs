//! Which elementwise producers are recomputed inside every group that reads them instead of
//! being materialized: XLA's producer duplication in instruction fusion (`InstructionFusion`,
//! "fusion would duplicate"), restricted so that it never costs memory.
//!
//! A training step keeps the forward's elementwise intermediates for the backward: GELU's
//! `x³`, `tanh(...)`, `1 + tanh(...)`, ... are each a tensor of the MLP's width, alive from the
//! forward to the backward. When every reader of such a value can compute it itself from one
//! tensor that is kept anyway (GELU's input `x`, a `dot_general` result), none of them needs to
//! exist in memory.
//!
//! A producer `p` is **recomputable** when
//! * it is a single-result loop-fusible op that computes something (not a `broadcast_in_dim`,
//!   `iota` or splat `constant`: those are copied anyway, [`super::legality::duplicable`]) and
//!   not a graph output;
//! * every user is a single-result loop-fusible op with `p`'s element count (proved with the
//!   symbolic algebra), or a `reduce` that roots an input fusion over `p`'s element count, and
//!   reads `p` flat-aligned, so every user's group can take a copy;
//! * its cone — `p` and the recomputable producers it reads, transitively — holds at most
//!   [`MAX_CONE`] ops and reads at most one *leaf* of `p`'s element count: a value that is not
//!   recomputable and will be materialized. Smaller leaves (the operands of expanding
//!   broadcasts, scalars) are not counted.
//!
//! Invariant: recomputing a recomputable value in all its readers replaces it, and the
//! recomputable values its cone reads, by at most one tensor of its size that some group reads
//! instead; the values computed are the same, bit for bit (elementwise ops are deterministic).

use super::legality::{duplicable, loop_fusible};
use ebb_ir::op::fusion::{is_reduce_root, iteration_space, reads_aligned};
use ebb_ir::{Graph, NodeId, ValueRef};
use std::collections::{BTreeSet, HashMap, HashSet};

/// The most ops a recomputed cone may hold (bounds the FLOPs a copy adds per element).
pub const MAX_CONE: usize = 16;

/// The cone of a recomputable producer: its ops and its full-size leaves.
#[derive(Clone, Debug, Default)]
struct Cone {
    ops: BTreeSet<NodeId>,
    leaves: BTreeSet<ValueRef>,
}

impl Cone {
    /// Adds the cone of a recomputable operand.
    fn absorb(&mut self, other: &Cone) {
        self.ops.extend(other.ops.iter().copied());
        self.leaves.extend(other.leaves.iter().copied());
    }
}

/// The recomputable producers of `g` (see the module docs). Deterministic; linear in the graph
/// size times [`MAX_CONE`].
pub fn recomputable(g: &Graph) -> HashSet<NodeId> {
    let outputs: HashSet<NodeId> = g.outputs().iter().map(|v| v.node).collect();
    let mut cones: HashMap<NodeId, Cone> = HashMap::new();
    for &n in g.order() {
        let node = g.node(n);
        if !loop_fusible(&node.op)
            || duplicable(&node.op)
            || node.outputs.len() != 1
            || outputs.contains(&n)
            || !every_user_takes_a_copy(g, n)
        {
            continue;
        }
        let count = node.outputs[0].num_elements();
        let mut cone = Cone {
            ops: BTreeSet::from([n]),
            leaves: BTreeSet::new(),
        };
        for (k, v) in g.operands(n).into_iter().enumerate() {
            if let Some(c) = cones.get(&v.node) {
                cone.absorb(c);
            } else if duplicable(&g.node(v.node).op) {
                // A copied broadcast reads its operand aligned only when it adds unit
                // dimensions; that operand is then a leaf of the full size.
                let b = v.node;
                for (j, w) in g.operands(b).into_iter().enumerate() {
                    if reads_aligned(g, b, j) {
                        match cones.get(&w.node) {
                            Some(c) => cone.absorb(c),
                            None => {
                                cone.leaves.insert(w);
                            }
                        }
                    }
                }
            } else if reads_aligned(g, n, k)
                && g.scope.prove_eq(&g.value_type(v).num_elements(), &count)
            {
                cone.leaves.insert(v);
            }
        }
        if cone.leaves.len() <= 1 && cone.ops.len() <= MAX_CONE {
            cones.insert(n, cone);
        }
    }
    cones.into_keys().collect()
}

/// Whether every user of `n`'s single result could take a copy of it (see the module docs).
fn every_user_takes_a_copy(g: &Graph, n: NodeId) -> bool {
    let count = g.node(n).outputs[0].num_elements();
    let users = g.users(n);
    !users.is_empty()
        && users.iter().all(|&(u, operand, _)| {
            let un = g.node(u);
            (loop_fusible(&un.op) && un.outputs.len() == 1 || is_reduce_root(g, u))
                && reads_aligned(g, u, operand as usize)
                && iteration_space(g, u).is_some_and(|s| g.scope.prove_eq(&s, &count))
        })
}
