//! Memory-aware extraction: picks one e-node per needed e-class so that the extracted graph
//! materializes as few bytes as possible, without ever creating a cycle.
//!
//! # Cost model
//! The cost of an extraction is the sum, over the e-classes it materializes (reachable from
//! the roots through the chosen e-nodes), of the class's size in bytes. Sizes are symbolic
//! ([`ebb_ir::TensorType::size_bytes`]); they are evaluated at the representative bindings of
//! the graph's symbol scope ([`ebb_ir::SymbolScope::representative_bindings`]) and each
//! binding is weighted by the inverse of the input graph's total at that binding, so small
//! and large shapes count equally. Graph inputs and results of opaque ops cost nothing (they
//! exist whatever is chosen). A binding at which a size does not evaluate counts as 0 bytes.
//! Unlike a tree cost (egg's `Extractor`), this *DAG cost* counts a shared class once.
//!
//! # Algorithm
//! 1. A fallback choice for every class, bottom-up with Knuth's generalization of Dijkstra's
//!    algorithm (Knuth 1977, "A generalization of Dijkstra's algorithm") on the superior
//!    cost `size(class) + max(cost(children))`: a node is chosen only once all its children
//!    are final, so the choice is acyclic by construction.
//! 2. The starting extraction is the input graph itself (each class's first original op;
//!    the fallback for classes that rules created). If merges made that cyclic, the fallback
//!    is used everywhere.
//! 3. Greedy local search with reference counts (the incremental DAG cost of
//!    "extraction by local improvement"): for every needed class with alternatives, try each
//!    alternative e-node; keep it when the total cost strictly drops, or stays equal while
//!    the references to materialized bytes (cost of each class times the number of chosen
//!    nodes using it) strictly drop, and no cycle is formed (checked with a topological
//!    rank, then a depth-first search). The secondary objective lets a value shared by two
//!    users be freed in two steps (e.g. one `transpose` feeding two `dot_general`s: the
//!    first fold frees nothing, the second frees the copy). Passes repeat until nothing
//!    improves (at most [`MAX_PASSES`]); both objectives only decrease, so it terminates.
//!
//! Invariant: the chosen e-nodes of the needed classes form a DAG whose total cost is at
//! most that of the input graph.

use super::encode::Encoded;
use super::lang::{ClassData, EbbEGraph, EbbNode};
use super::RewriteError;
use ebb_ir::{Bindings, NodeId};
use egg::{Id, Language};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Passes of local improvement at most.
pub const MAX_PASSES: usize = 8;

/// Cost differences below this are ties (costs are fractions of the input's bytes, summed
/// over the bindings; one byte of a 1 GiB graph is about 1e-9).
const EPS: f64 = 1e-12;

/// The chosen e-nodes and what they cost.
pub(crate) struct Extraction {
    /// Chosen node (index into the class's nodes) per class index, for every class with a
    /// finite derivation.
    pub choice: Vec<Option<usize>>,
    /// Whether a class is materialized by the extraction (reachable from the roots).
    pub active: Vec<bool>,
    /// Topological rank in the choice graph (children before parents).
    pub rank: Vec<usize>,
    /// Position in program order of the first original op of a class.
    pub orig_pos: Vec<Option<usize>>,
    /// The first original op of a class and the index of its e-node in the class.
    pub orig: Vec<Option<(NodeId, usize)>>,
    /// Materialized bytes of the input graph at each binding.
    pub bytes_before: Vec<i64>,
    /// Materialized bytes of the extraction at each binding.
    pub bytes_after: Vec<i64>,
    /// Classes whose chosen e-node differs from their original op.
    pub changed: usize,
}

fn ix(id: Id) -> usize {
    usize::from(id)
}

struct State<'a> {
    eg: &'a EbbEGraph,
    choice: Vec<Option<usize>>,
    refc: Vec<u32>,
    cost: Vec<f64>,
    /// Cost of the materialized classes.
    total: f64,
    /// Secondary objective: cost of each class times its reference count.
    refs: f64,
    stack: Vec<usize>,
}

impl State<'_> {
    fn children(&self, c: usize) -> &[Id] {
        match self.choice[c] {
            Some(j) => self.eg[Id::from(c)].nodes[j].children(),
            None => &[],
        }
    }

    /// Adds a reference to each class in `roots`, activating what becomes reachable.
    fn inc(&mut self, roots: &[Id]) {
        let mut stack = std::mem::take(&mut self.stack);
        stack.extend(roots.iter().map(|r| ix(self.eg.find(*r))));
        while let Some(c) = stack.pop() {
            self.refc[c] += 1;
            self.refs += self.cost[c];
            if self.refc[c] == 1 {
                self.total += self.cost[c];
                stack.extend(self.children(c).iter().map(|x| ix(*x)));
            }
        }
        self.stack = stack;
    }

    /// Removes a reference from each class in `roots`, deactivating what becomes unreachable.
    fn dec(&mut self, roots: &[Id]) {
        let mut stack = std::mem::take(&mut self.stack);
        stack.extend(roots.iter().map(|r| ix(self.eg.find(*r))));
        while let Some(c) = stack.pop() {
            self.refc[c] -= 1;
            self.refs -= self.cost[c];
            if self.refc[c] == 0 {
                self.total -= self.cost[c];
                stack.extend(self.children(c).iter().map(|x| ix(*x)));
            }
        }
        self.stack = stack;
    }
}

/// Bytes of class `c` at each binding (0 where a size does not evaluate); 0 for classes that
/// hold an input or an opaque result, or that are not tensors.
fn class_bytes(eg: &EbbEGraph, id: Id, bindings: &[Bindings]) -> Vec<i64> {
    let free = eg[id].nodes.iter().any(|n| matches!(n, EbbNode::Input(_) | EbbNode::Result { .. }));
    let size = match &eg[id].data {
        ClassData::Tensor(t) if !free => Some(t.size_bytes()),
        ClassData::Tuple(ts) if !free => {
            Some(ts.iter().map(|t| t.size_bytes()).fold(ebb_ir::DimExpr::zero(), |a, b| a + b))
        }
        _ => None,
    };
    bindings.iter().map(|b| size.as_ref().and_then(|s| s.eval(b).ok()).unwrap_or(0)).collect()
}

/// Topological ranks of the choice graph over all classes with a choice, or `None` if it
/// has a cycle.
fn ranks(eg: &EbbEGraph, choice: &[Option<usize>]) -> Option<Vec<usize>> {
    let n = choice.len();
    let mut rank = vec![usize::MAX; n];
    let mut state = vec![0u8; n]; // 0 new, 1 on stack, 2 done
    let mut next = 0;
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for start in 0..n {
        if choice[start].is_none() || state[start] != 0 {
            continue;
        }
        stack.push((start, 0));
        state[start] = 1;
        while let Some(&mut (c, ref mut k)) = stack.last_mut() {
            let kids = choice[c].map(|j| eg[Id::from(c)].nodes[j].children()).unwrap_or(&[]);
            if let Some(&ch) = kids.get(*k) {
                *k += 1;
                let ch = ix(ch);
                match state[ch] {
                    0 if choice[ch].is_some() => {
                        state[ch] = 1;
                        stack.push((ch, 0));
                    }
                    1 => return None,
                    _ => {}
                }
            } else {
                state[c] = 2;
                rank[c] = next;
                next += 1;
                stack.pop();
            }
        }
    }
    Some(rank)
}

/// Whether class `target` is reachable from `from` through the chosen nodes.
fn reaches(eg: &EbbEGraph, choice: &[Option<usize>], from: &[Id], target: usize, seen: &mut [u32], stamp: u32) -> bool {
    let mut stack: Vec<usize> = from.iter().map(|x| ix(*x)).collect();
    while let Some(c) = stack.pop() {
        if c == target {
            return true;
        }
        if seen[c] == stamp {
            continue;
        }
        seen[c] = stamp;
        if let Some(j) = choice[c] {
            stack.extend(eg[Id::from(c)].nodes[j].children().iter().map(|x| ix(*x)));
        }
    }
    false
}

/// Fallback choice (step 1 of the module docs): per class, the node minimizing
/// `cost(class) + max(cost(children))`, acyclic by construction.
fn fallback(eg: &EbbEGraph, cost: &[f64], usable: &[bool]) -> Vec<Option<usize>> {
    let n = cost.len();
    let mut nodes: Vec<(usize, usize)> = Vec::new();
    let mut pending: Vec<usize> = Vec::new();
    let mut parents: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut best = vec![f64::INFINITY; n];
    let mut choice = vec![None; n];
    let mut done = vec![false; n];
    let mut heap = BinaryHeap::new();
    let key = |v: f64| Reverse(v.to_bits()); // non-negative f64 bits order like the values
    for class in eg.classes() {
        let c = ix(class.id);
        if !usable[c] {
            continue;
        }
        for (j, node) in class.nodes.iter().enumerate() {
            let t = nodes.len();
            nodes.push((c, j));
            pending.push(node.len());
            for ch in node.children() {
                parents[ix(*ch)].push(t);
            }
            if node.is_leaf() && cost[c] + 1e-12 < best[c] {
                best[c] = cost[c] + 1e-12;
                choice[c] = Some(j);
            }
        }
        if best[c].is_finite() {
            heap.push((key(best[c]), c));
        }
    }
    while let Some((_, c)) = heap.pop() {
        if done[c] {
            continue;
        }
        done[c] = true;
        for &t in &parents[c] {
            pending[t] -= 1;
            if pending[t] > 0 {
                continue;
            }
            let (p, j) = nodes[t];
            if done[p] {
                continue;
            }
            let node = &eg[Id::from(p)].nodes[j];
            let m = node.children().iter().map(|ch| best[ix(*ch)]).fold(0.0, f64::max);
            let v = cost[p] + 1e-12 + m;
            if v < best[p] {
                best[p] = v;
                choice[p] = Some(j);
                heap.push((key(v), p));
            }
        }
    }
    choice
}

/// Extracts from `eg` (after saturation) for the roots of `enc`, costing sizes at
/// `bindings`. See the module docs.
///
/// Errors: [`RewriteError::Extract`] when a root has no acyclic derivation (cannot happen
/// for an e-graph built by [`super::encode::encode`] and grown by rules).
pub(crate) fn extract(eg: &EbbEGraph, enc: &Encoded, bindings: &[Bindings]) -> Result<Extraction, RewriteError> {
    let n = eg.classes().map(|c| ix(c.id) + 1).max().unwrap_or(0);
    let mut raw: Vec<Vec<i64>> = vec![Vec::new(); n];
    let mut usable = vec![false; n];
    for class in eg.classes() {
        let c = ix(class.id);
        raw[c] = class_bytes(eg, class.id, bindings);
        usable[c] = !matches!(class.data, ClassData::Invalid(_));
    }
    // Original ops: first per class.
    let mut orig: Vec<Option<(NodeId, usize)>> = vec![None; n];
    let mut orig_pos: Vec<Option<usize>> = vec![None; n];
    for o in &enc.originals {
        let c = eg.find(o.class);
        if orig[ix(c)].is_some() {
            continue;
        }
        let canon = o.enode.clone().map_children(|x| eg.find(x));
        let j = eg[c].nodes.binary_search(&canon).map_err(|_| RewriteError::Extract(format!("original op {:?} lost", o.node)))?;
        orig[ix(c)] = Some((o.node, j));
        orig_pos[ix(c)] = Some(o.pos);
    }
    // Weights: 1 / (bytes of the input graph) per binding.
    let mut totals = vec![0i64; bindings.len()];
    for c in 0..n {
        if orig[c].is_some() {
            for (t, b) in totals.iter_mut().zip(&raw[c]) {
                *t = t.saturating_add(*b);
            }
        }
    }
    let cost: Vec<f64> = raw
        .iter()
        .map(|r| r.iter().zip(&totals).map(|(b, t)| *b as f64 / (*t).max(1) as f64).sum())
        .collect();
    let fb = fallback(eg, &cost, &usable);
    let mut choice: Vec<Option<usize>> = (0..n).map(|c| orig[c].map(|(_, j)| j).or(fb[c])).collect();
    let mut rank = match ranks(eg, &choice) {
        Some(r) => r,
        None => {
            choice = fb.clone();
            ranks(eg, &choice).ok_or_else(|| RewriteError::Extract("fallback choice is cyclic".into()))?
        }
    };
    let mut roots: Vec<Id> = enc.roots.clone();
    roots.extend(enc.inputs.iter().copied());
    if let Some(r) = roots.iter().find(|r| choice[ix(eg.find(**r))].is_none()) {
        return Err(RewriteError::Extract(format!("class {r} has no acyclic derivation")));
    }
    let mut st = State { eg, choice, refc: vec![0; n], cost, total: 0.0, refs: 0.0, stack: Vec::new() };
    st.inc(&roots);
    let active_bytes = |st: &State| -> Vec<i64> {
        let mut out = vec![0i64; bindings.len()];
        for c in 0..n {
            if st.refc[c] > 0 {
                for (o, b) in out.iter_mut().zip(&raw[c]) {
                    *o = o.saturating_add(*b);
                }
            }
        }
        out
    };
    let bytes_before = active_bytes(&st);

    let candidates: Vec<usize> = (0..n).filter(|&c| usable[c] && eg[Id::from(c)].nodes.len() > 1).collect();
    let mut seen = vec![0u32; n];
    let mut stamp = 0u32;
    for _ in 0..MAX_PASSES {
        let mut improved = false;
        for &c in &candidates {
            let cid = Id::from(c);
            for m in 0..eg[cid].nodes.len() {
                let Some(cur) = st.choice[c] else { break };
                if st.refc[c] == 0 || m == cur {
                    continue;
                }
                let alt = eg[cid].nodes[m].children();
                if alt.iter().any(|ch| st.choice[ix(*ch)].is_none()) {
                    continue;
                }
                let ranked = alt.iter().all(|ch| rank[ix(*ch)] < rank[c]);
                if !ranked {
                    stamp += 1;
                    if reaches(eg, &st.choice, alt, c, &mut seen, stamp) {
                        continue;
                    }
                }
                let old: Vec<Id> = eg[cid].nodes[cur].children().to_vec();
                let (before, refs_before) = (st.total, st.refs);
                st.choice[c] = Some(m);
                st.inc(alt);
                st.dec(&old);
                if st.total < before - EPS || (st.total < before + EPS && st.refs < refs_before - EPS) {
                    improved = true;
                    if !ranked {
                        rank = ranks(eg, &st.choice).ok_or_else(|| RewriteError::Extract("cycle after a checked switch".into()))?;
                    }
                } else {
                    st.choice[c] = Some(cur);
                    st.inc(&old);
                    st.dec(alt);
                }
            }
        }
        if !improved {
            break;
        }
    }
    let bytes_after = active_bytes(&st);
    let active: Vec<bool> = st.refc.iter().map(|r| *r > 0).collect();
    let changed = (0..n).filter(|&c| active[c] && orig[c].is_some_and(|(_, j)| st.choice[c] != Some(j))).count();
    Ok(Extraction { choice: st.choice, active, rank, orig_pos, orig, bytes_before, bytes_after, changed })
}
