//! Multi-output fusion of siblings (XLA's `MultiOutputFusion`, sibling case): two loop fusion
//! groups over the same iteration space that read the same tensor become one group with the
//! results of both, so the shared tensor is read once per chunk and the earlier group's results
//! are allocated only when the later one runs.
//!
//! Group `A` (root earlier in program order) merges into group `B` when
//! * both are loop fusions and their element counts are provably equal;
//! * they read a common full-size value from outside (the siblings' shared input);
//! * every reader of `A`'s results outside `A` comes after `B`'s root (so the merged op may
//!   take `B`'s place; no member of `B` reads `A`, and no path joins them);
//! * it never costs memory in program order: the bytes of `A`'s operands that are read last
//!   before `B`'s root (whose live range the merge extends to it), graph inputs that are not
//!   donated aside, are provably at most the bytes of `A`'s results (whose allocation it
//!   delays to it).
//!
//! Invariant: the merged groups keep [`super::partition`](mod@super::partition)'s invariant —
//! members precede the
//! root, every outside reader of a result follows it — so outlining creates no cycle, and the
//! values computed are the same.

use super::partition::FusionGroup;
use ebb_ir::{DimExpr, Graph, NodeId, OpKind, ValueRef};
use std::collections::{HashMap, HashSet};

/// What the merge rule reads of a group.
struct Facts {
    /// Values read by members and produced outside the group.
    operands: Vec<ValueRef>,
    /// Results: values of non-copy members read outside the group, or graph outputs.
    results: Vec<ValueRef>,
    /// Earliest program-order position of a reader of a result outside the group
    /// (`usize::MAX` when none).
    first_outside_reader: usize,
}

/// What every group's facts look up: program-order positions and the graph outputs.
struct Lookup {
    pos: HashMap<NodeId, usize>,
    outputs: HashSet<ValueRef>,
}

fn facts(g: &Graph, group: &FusionGroup, cx: &Lookup) -> Facts {
    let (pos, outputs) = (&cx.pos, &cx.outputs);
    let members: HashSet<NodeId> = group.members.iter().copied().collect();
    let mut operands = Vec::new();
    let mut results = Vec::new();
    let mut first = usize::MAX;
    for &m in &group.members {
        for v in g.operands(m) {
            if !members.contains(&v.node) && !operands.contains(&v) {
                operands.push(v);
            }
        }
        if group.duplicated.contains(&m) {
            continue;
        }
        for k in 0..g.node(m).outputs.len() as u32 {
            let v = ValueRef::new(m, k);
            let mut read_outside = false;
            for (u, _, out) in g.users(m) {
                if out == k && !members.contains(&u) {
                    read_outside = true;
                    first = first.min(pos[&u]);
                }
            }
            if read_outside || outputs.contains(&v) {
                results.push(v);
            }
        }
    }
    Facts {
        operands,
        results,
        first_outside_reader: first,
    }
}

/// Last program-order position that reads `v` (`usize::MAX` for a graph output), a member of
/// group `b` counting as `b`'s root (where the outlined group runs).
fn last_reader(g: &Graph, v: ValueRef, b: &FusionGroup, cx: &Lookup) -> usize {
    let pos = &cx.pos;
    if cx.outputs.contains(&v) {
        return usize::MAX;
    }
    g.users(v.node)
        .into_iter()
        .filter(|&(_, _, out)| out == v.output)
        .map(|(u, _, _)| {
            if b.members.contains(&u) {
                pos[&b.root]
            } else {
                pos[&u]
            }
        })
        .max()
        .unwrap_or(0)
}

/// Whether `a` (earlier) may merge into `b` (see the module docs).
fn mergeable(
    g: &Graph,
    (a, fa): (&FusionGroup, &Facts),
    (b, fb): (&FusionGroup, &Facts),
    cx: &Lookup,
) -> bool {
    let kind = |x: &FusionGroup| g.node(x.root).kind();
    if kind(a) == OpKind::Reduce || kind(b) == OpKind::Reduce {
        return false;
    }
    let b_root = cx.pos[&b.root];
    if fa.first_outside_reader <= b_root || !g.scope.prove_eq(&a.space, &b.space) {
        return false;
    }
    let shared = fa.operands.iter().any(|v| {
        fb.operands.contains(v) && g.scope.prove_eq(&g.value_type(*v).num_elements(), &a.space)
    });
    if !shared {
        return false;
    }
    let mut extended = DimExpr::zero();
    for &v in &fa.operands {
        let producer = g.node(v.node);
        let kept_input = producer.kind() == OpKind::Input && g.aliasing_output(v.node).is_none();
        if !kept_input && last_reader(g, v, b, cx) < b_root {
            extended += g.value_type(v).size_bytes();
        }
    }
    let delayed = fa.results.iter().fold(DimExpr::zero(), |acc, &v| {
        acc + g.value_type(v).size_bytes()
    });
    extended.is_zero() || g.scope.prove_le(&extended, &delayed)
}

/// Merges sibling loop groups of `groups` (in order of their roots in program order; see the
/// module docs), greedily: each group, latest first, absorbs the earlier groups it may merge
/// with that share an operand with it, nearest first. Returns the groups in the same order;
/// deterministic.
pub fn merge_siblings(g: &Graph, groups: Vec<FusionGroup>) -> Vec<FusionGroup> {
    let cx = Lookup {
        pos: g.order().iter().enumerate().map(|(i, &n)| (n, i)).collect(),
        outputs: g.outputs().iter().copied().collect(),
    };
    let mut facts_of: Vec<Facts> = groups.iter().map(|x| facts(g, x, &cx)).collect();
    // Groups (indices) by the values they read from outside.
    let mut readers: HashMap<ValueRef, Vec<usize>> = HashMap::new();
    for (i, f) in facts_of.iter().enumerate() {
        for &v in &f.operands {
            readers.entry(v).or_default().push(i);
        }
    }
    let mut groups: Vec<Option<FusionGroup>> = groups.into_iter().map(Some).collect();
    for bi in (0..groups.len()).rev() {
        let mut earlier: Vec<usize> = facts_of[bi]
            .operands
            .iter()
            .flat_map(|v| readers.get(v).into_iter().flatten().copied())
            .filter(|&ai| ai < bi)
            .collect();
        earlier.sort_unstable_by(|x, y| y.cmp(x));
        earlier.dedup();
        for ai in earlier {
            let (Some(a), Some(b)) = (&groups[ai], &groups[bi]) else {
                continue;
            };
            if !mergeable(g, (a, &facts_of[ai]), (b, &facts_of[bi]), &cx) {
                continue;
            }
            let Some(a) = groups[ai].take() else {
                continue;
            };
            let Some(b) = groups[bi].as_mut() else {
                continue;
            };
            for m in a.members {
                if !b.members.contains(&m) {
                    b.members.push(m);
                }
            }
            b.members.sort_by_key(|n| cx.pos[n]);
            b.duplicated.extend(a.duplicated);
            facts_of[bi] = facts(g, b, &cx);
            // The merged group reads what `a` read: later groups may find it through them.
            for &v in &facts_of[bi].operands {
                let r = readers.entry(v).or_default();
                if !r.contains(&bi) {
                    r.push(bi);
                }
            }
        }
    }
    groups.into_iter().flatten().collect()
}
