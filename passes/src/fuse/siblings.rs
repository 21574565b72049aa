//! Multi-output fusion of siblings (XLA's `MultiOutputFusion`, sibling case): two loop fusion
//! groups over the same iteration space that read the same tensor become one group with the
//! results of both, so the shared tensor is read once per chunk, the members both groups
//! copy (a sigmoid recomputed for each residual of a scan step) run once, and the earlier
//! group's results are allocated only when the later one runs.
//!
//! Group `A` (root earlier in program order) merges into group `B` when
//! * both are loop fusions and their element counts are provably equal;
//! * they read a common full-size value from outside (the siblings' shared input);
//! * every reader of `A`'s results outside `A` comes after `B`'s root in program order (a
//!   member of another group at its own place, not at its group's root: merging `A` must not
//!   tie other groups' schedules to `B`'s operands — counting them at their roots merged T5's
//!   35 per-parameter scalars of the gradient norm into one group and raised its scheduled peak
//!   by a third), or is a *moved reader*: an op outside every group, without regions, whose
//!   results only the graph returns (typically the `dynamic_update_slice` that stacks a scan
//!   step's residual into its carried buffer). The moved readers go right after `B`'s root, in
//!   their order. So no path joins `A` and `B`, the merged op may take `B`'s place, every op
//!   still follows the values it reads (moved readers are pure ops: no `custom_call`), and the
//!   moved readers delay no computation (only the graph returns their results);
//! * it costs memory in program order at most by `A`'s results that only moved readers read
//!   (they are allocated with the merged op's other results instead of being freed before it;
//!   one iteration's slice each in a scan step): the bytes of the values whose live range the
//!   merge extends to `B`'s root (the operands of `A` and of the moved readers that are read
//!   last before it, graph inputs that are not donated aside; an op read counts where it runs:
//!   a member of a group at its group's root, where the outlined `fusion` op runs, a copied
//!   member at the root of every group that copies it and at its own place while an op outside
//!   those groups reads it) are provably at most the bytes of the values whose allocation it
//!   delays to it (`A`'s results and the moved readers' results: a moved in-place update's
//!   buffer and its result cancel).
//!
//! Invariant: the merged groups keep [`super::partition`](mod@super::partition)'s invariant —
//! members precede the root, every outside reader of a result follows it — in the program
//! order the pass leaves (a topological order: only moved readers change places), so
//! outlining creates no cycle, and the values computed are the same.

use super::partition::FusionGroup;
use ebb_ir::{DimExpr, Graph, NodeId, OpKind, SymbolScope, ValueRef};
use std::collections::{HashMap, HashSet};

/// What the merge rule reads of a group.
struct Facts {
    /// Values read by members and produced outside the group.
    operands: Vec<ValueRef>,
    /// Results: values of non-copy members read outside the group, or graph outputs.
    results: Vec<ValueRef>,
}

/// Where things are: the program order being built and its positions, the groups of each
/// member (copies included), and the graph outputs.
struct Lookup {
    order: Vec<NodeId>,
    pos: HashMap<NodeId, usize>,
    /// Members (copies included) → indices of the groups that hold them.
    groups_of: HashMap<NodeId, Vec<usize>>,
    outputs: HashSet<ValueRef>,
}

impl Lookup {
    fn new(g: &Graph, groups: &[Option<FusionGroup>]) -> Lookup {
        let mut cx = Lookup {
            order: g.order().to_vec(),
            pos: HashMap::new(),
            groups_of: HashMap::new(),
            outputs: g.outputs().iter().copied().collect(),
        };
        cx.reindex(groups);
        cx
    }

    /// Recomputes positions and group membership after a merge.
    fn reindex(&mut self, groups: &[Option<FusionGroup>]) {
        self.pos = self
            .order
            .iter()
            .enumerate()
            .map(|(i, &n)| (n, i))
            .collect();
        self.groups_of.clear();
        for (i, x) in groups.iter().enumerate() {
            for &m in x.iter().flat_map(|x| &x.members) {
                self.groups_of.entry(m).or_default().push(i);
            }
        }
    }

    /// Where `n` runs: at its group's root for a moved member; at the root of every group
    /// that copies it for a copy, and at its own place too while something outside those
    /// groups reads it; at its own place for any other op.
    fn runs(&self, g: &Graph, n: NodeId, groups: &[Option<FusionGroup>]) -> Vec<usize> {
        let holders = || {
            self.groups_of
                .get(&n)
                .into_iter()
                .flatten()
                .filter_map(|&i| groups[i].as_ref())
        };
        if holders().next().is_none() {
            return vec![self.pos[&n]];
        }
        if let Some(x) = holders().find(|x| !x.duplicated.contains(&n)) {
            return vec![self.pos[&x.root]];
        }
        let mut at: Vec<usize> = holders().map(|x| self.pos[&x.root]).collect();
        let read_apart = (0..g.node(n).outputs.len() as u32)
            .any(|k| self.outputs.contains(&ValueRef::new(n, k)))
            || g.users(n).iter().any(|&(u, _, _)| {
                let of_u = self.groups_of.get(&u).map(Vec::as_slice).unwrap_or(&[]);
                of_u.is_empty()
                    || of_u
                        .iter()
                        .filter_map(|&i| groups[i].as_ref())
                        .any(|x| !x.members.contains(&n))
            });
        if read_apart {
            at.push(self.pos[&n]);
        }
        at
    }

    /// Whether `n` is a member of a group (a copy or not).
    fn grouped(&self, n: NodeId) -> bool {
        self.groups_of.contains_key(&n)
    }
}

fn facts(g: &Graph, group: &FusionGroup, cx: &Lookup) -> Facts {
    let outputs = &cx.outputs;
    let members: HashSet<NodeId> = group.members.iter().copied().collect();
    let mut operands = Vec::new();
    let mut results = Vec::new();
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
            let read_outside = g
                .users(m)
                .iter()
                .any(|&(u, _, out)| out == k && !members.contains(&u));
            if read_outside || outputs.contains(&v) {
                results.push(v);
            }
        }
    }
    Facts { operands, results }
}

/// Last position that reads `v` (`usize::MAX` for a graph output; see [`Lookup::runs`]).
fn last_reader(g: &Graph, v: ValueRef, groups: &[Option<FusionGroup>], cx: &Lookup) -> usize {
    if cx.outputs.contains(&v) {
        return usize::MAX;
    }
    g.users(v.node)
        .into_iter()
        .filter(|&(_, _, out)| out == v.output)
        .flat_map(|(u, _, _)| cx.runs(g, u, groups))
        .max()
        .unwrap_or(0)
}

/// The readers of `a`'s results that must move after `b`'s root for `a` to merge into `b`
/// (in program order), or `None` when one of them cannot (see the module docs).
fn moved_readers(
    g: &Graph,
    (a, fa): (&FusionGroup, &Facts),
    b_root: usize,
    cx: &Lookup,
) -> Option<Vec<NodeId>> {
    let mut moved = Vec::new();
    for &v in &fa.results {
        for (u, _, out) in g.users(v.node) {
            if out != v.output || a.members.contains(&u) || cx.pos[&u] > b_root {
                continue;
            }
            let movable = !cx.grouped(u)
                && g.node(u).regions.is_empty()
                && g.node(u).kind() != OpKind::CustomCall
                && g.users(u).is_empty();
            if !movable {
                return None;
            }
            if !moved.contains(&u) {
                moved.push(u);
            }
        }
    }
    moved.sort_by_key(|n| cx.pos[n]);
    Some(moved)
}

/// Whether `a` (earlier) may merge into `b` (see the module docs): the readers to move
/// after `b`'s root when it may.
fn mergeable(
    g: &Graph,
    (a, fa): (&FusionGroup, &Facts),
    (b, fb): (&FusionGroup, &Facts),
    groups: &[Option<FusionGroup>],
    (cx, scope): (&Lookup, &SymbolScope),
) -> Option<Vec<NodeId>> {
    let kind = |x: &FusionGroup| g.node(x.root).kind();
    if kind(a) == OpKind::Reduce || kind(b) == OpKind::Reduce {
        return None;
    }
    if !scope.prove_eq(&a.space, &b.space) {
        return None;
    }
    let shared = fa.operands.iter().any(|v| {
        fb.operands.contains(v) && scope.prove_eq(&g.value_type(*v).num_elements(), &a.space)
    });
    if !shared {
        return None;
    }
    let b_root = cx.pos[&b.root];
    let moved = moved_readers(g, (a, fa), b_root, cx)?;
    let a_results: HashSet<ValueRef> = fa.results.iter().copied().collect();
    let mut read: Vec<ValueRef> = fa.operands.clone();
    for &u in &moved {
        for v in g.operands(u) {
            if !a_results.contains(&v) && !read.contains(&v) {
                read.push(v);
            }
        }
    }
    let mut extended = DimExpr::zero();
    for v in read {
        let producer = g.node(v.node);
        let kept_input = producer.kind() == OpKind::Input && g.aliasing_output(v.node).is_none();
        if !kept_input && last_reader(g, v, groups, cx) < b_root {
            extended += g.value_type(v).size_bytes();
        }
    }
    let mut delayed = fa.results.iter().fold(DimExpr::zero(), |acc, &v| {
        acc + g.value_type(v).size_bytes()
    });
    for &u in &moved {
        for t in &g.node(u).outputs {
            delayed += t.size_bytes();
        }
    }
    (extended.is_zero() || scope.prove_le(&extended, &delayed)).then_some(moved)
}

/// Merges sibling loop groups of `groups` (in order of their roots in program order; see the
/// module docs), greedily: each group, latest first, absorbs the earlier groups it may merge
/// with that share an operand with it, nearest first, looking again after each merge (the
/// merged group reads more). Moves the readers the merges need moved in `g`'s program order.
/// Proves sizes under `scope` (the top-level graph's: a loop body's own scope may not bound
/// the symbols). Returns the groups in the same order; deterministic.
pub fn merge_siblings(
    g: &mut Graph,
    groups: Vec<FusionGroup>,
    scope: &SymbolScope,
) -> Vec<FusionGroup> {
    let mut groups: Vec<Option<FusionGroup>> = groups.into_iter().map(Some).collect();
    let mut cx = Lookup::new(g, &groups);
    let mut facts_of: Vec<Option<Facts>> = groups
        .iter()
        .map(|x| x.as_ref().map(|x| facts(g, x, &cx)))
        .collect();
    // Groups (indices) by the values they read from outside.
    let mut readers: HashMap<ValueRef, Vec<usize>> = HashMap::new();
    for (i, f) in facts_of.iter().enumerate() {
        for &v in f.iter().flat_map(|f| &f.operands) {
            readers.entry(v).or_default().push(i);
        }
    }
    let mut reordered = false;
    for bi in (0..groups.len()).rev() {
        'look: while let Some(fb) = &facts_of[bi] {
            let mut earlier: Vec<usize> = fb
                .operands
                .iter()
                .flat_map(|v| readers.get(v).into_iter().flatten().copied())
                .filter(|&ai| ai < bi && groups[ai].is_some())
                .collect();
            earlier.sort_unstable_by(|x, y| y.cmp(x));
            earlier.dedup();
            for ai in earlier {
                let (Some(a), Some(b), Some(fa), Some(fb)) =
                    (&groups[ai], &groups[bi], &facts_of[ai], &facts_of[bi])
                else {
                    continue;
                };
                let Some(moved) = mergeable(g, (a, fa), (b, fb), &groups, (&cx, scope)) else {
                    continue;
                };
                let Some(a) = groups[ai].take() else { continue };
                facts_of[ai] = None;
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
                if !moved.is_empty() {
                    let root = b.root;
                    let mut order: Vec<NodeId> = Vec::with_capacity(cx.order.len());
                    for &n in &cx.order {
                        if moved.contains(&n) {
                            continue;
                        }
                        order.push(n);
                        if n == root {
                            order.extend(moved.iter().copied());
                        }
                    }
                    cx.order = order;
                    reordered = true;
                }
                cx.reindex(&groups);
                let merged = groups[bi].as_ref().map(|b| facts(g, b, &cx));
                // The merged group reads what `a` read: later groups may find it through them.
                for &v in merged.iter().flat_map(|f| &f.operands) {
                    let r = readers.entry(v).or_default();
                    if !r.contains(&bi) {
                        r.push(bi);
                    }
                }
                facts_of[bi] = merged;
                continue 'look;
            }
            break;
        }
    }
    if reordered {
        g.set_order(cx.order);
    }
    groups.into_iter().flatten().collect()
}
