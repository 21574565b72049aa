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
//!    alternative e-node, and when that alone frees nothing, also move the other users of
//!    each costly class it stopped using to alternatives that do not use it (a compound
//!    move: one `transpose` feeding two `dot_general`s is freed only when both fold). Keep
//!    the move when the total cost strictly drops and no cycle is formed (checked with a
//!    potential, the height in the choice graph, else a depth-first search). Passes repeat
//!    until nothing improves (at most [`MAX_PASSES`]); the cost only decreases, so it
//!    terminates.
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
    /// A potential of the choice graph: larger on a parent than on each chosen child.
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

/// The e-graph flattened for the search: per class index, per e-node, the child classes.
struct Dag {
    kids: Vec<Vec<Vec<usize>>>,
}

impl Dag {
    fn new(eg: &EbbEGraph, n: usize) -> Dag {
        let mut kids = vec![Vec::new(); n];
        for class in eg.classes() {
            kids[ix(class.id)] = class
                .nodes
                .iter()
                .map(|x| x.children().iter().map(|c| ix(*c)).collect())
                .collect();
        }
        Dag { kids }
    }

    fn chosen<'a>(&'a self, choice: &[Option<usize>], c: usize) -> &'a [usize] {
        match choice[c] {
            Some(j) => &self.kids[c][j],
            None => &[],
        }
    }
}

struct State<'a> {
    dag: &'a Dag,
    choice: Vec<Option<usize>>,
    refc: Vec<u32>,
    cost: Vec<f64>,
    /// Cost of the materialized classes.
    total: f64,
    stack: Vec<usize>,
    /// Marks for cycle searches (`stamp` is the current search).
    seen: Vec<u32>,
    stamp: u32,
}

impl State<'_> {
    /// Adds a reference to each class in `roots`, activating what becomes reachable.
    fn inc(&mut self, roots: &[usize]) {
        let mut stack = std::mem::take(&mut self.stack);
        stack.extend_from_slice(roots);
        while let Some(c) = stack.pop() {
            self.refc[c] += 1;
            if self.refc[c] == 1 {
                self.total += self.cost[c];
                stack.extend_from_slice(self.dag.chosen(&self.choice, c));
            }
        }
        self.stack = stack;
    }

    /// Removes a reference from each class in `roots`, deactivating what becomes unreachable.
    fn dec(&mut self, roots: &[usize]) {
        let mut stack = std::mem::take(&mut self.stack);
        stack.extend_from_slice(roots);
        while let Some(c) = stack.pop() {
            self.refc[c] -= 1;
            if self.refc[c] == 0 {
                self.total -= self.cost[c];
                stack.extend_from_slice(self.dag.chosen(&self.choice, c));
            }
        }
        self.stack = stack;
    }

    /// Whether class `target` is reachable from `from` through the chosen nodes.
    fn reaches(&mut self, from: &[usize], target: usize) -> bool {
        self.stamp += 1;
        let mut stack = from.to_vec();
        while let Some(c) = stack.pop() {
            if c == target {
                return true;
            }
            if self.seen[c] == self.stamp {
                continue;
            }
            self.seen[c] = self.stamp;
            stack.extend_from_slice(self.dag.chosen(&self.choice, c));
        }
        false
    }

    /// Switches class `c` to its node `m` unless that would create a cycle (checked with
    /// `rank`, else by search; pass no ranks to force the search). Returns the previous node
    /// and whether `rank` stays valid.
    fn switch(&mut self, c: usize, m: usize, rank: &[usize]) -> Option<(usize, bool)> {
        let cur = self.choice[c]?;
        let dag = self.dag;
        let alt = &dag.kids[c][m];
        if alt.iter().any(|ch| self.choice[*ch].is_none()) {
            return None;
        }
        let ranked = !rank.is_empty() && alt.iter().all(|ch| rank[*ch] < rank[c]);
        if !ranked && self.reaches(alt, c) {
            return None;
        }
        self.set(c, m);
        Some((cur, ranked))
    }

    /// Sets the choice of `c` to `m`, moving references only if `c` is materialized (the
    /// children of an inactive class hold no references from it).
    fn set(&mut self, c: usize, m: usize) {
        let dag = self.dag;
        let Some(cur) = self.choice[c] else { return };
        self.choice[c] = Some(m);
        if self.refc[c] > 0 {
            self.inc(&dag.kids[c][m]);
            self.dec(&dag.kids[c][cur]);
        }
    }

    /// Undoes switches in reverse order.
    fn revert(&mut self, log: &[(usize, usize)]) {
        for &(c, old) in log.iter().rev() {
            self.set(c, old);
        }
    }

    /// Tries class `c` with node `m`, and if that alone does not lower the cost, also moves
    /// the other users of each costly class that `c` stopped using away from it (so that a
    /// value shared by several users can be freed). Keeps the move if the total cost
    /// strictly drops: returns `Some(rank still valid)`; otherwise undoes it.
    fn improve(
        &mut self,
        c: usize,
        m: usize,
        rank: &[usize],
        parents: &[Vec<(usize, usize)>],
    ) -> Option<bool> {
        let before = self.total;
        let dag = self.dag;
        let old_children = dag.chosen(&self.choice, c);
        let (old, mut ranked) = self.switch(c, m, rank)?;
        let mut log = vec![(c, old)];
        if self.total >= before - EPS {
            let new_children = &dag.kids[c][m];
            let mut stuck: Vec<usize> = old_children
                .iter()
                .copied()
                .filter(|t| self.refc[*t] > 0 && self.cost[*t] > 0.0 && !new_children.contains(t))
                .collect();
            stuck.sort_unstable();
            stuck.dedup();
            'stuck: for t in stuck {
                let users: Vec<usize> = parents[t]
                    .iter()
                    .filter(|(u, j)| self.refc[*u] > 0 && self.choice[*u] == Some(*j))
                    .map(|(u, _)| *u)
                    .collect();
                let uses: usize = users
                    .iter()
                    .map(|u| {
                        dag.chosen(&self.choice, *u)
                            .iter()
                            .filter(|x| **x == t)
                            .count()
                    })
                    .sum();
                if uses != self.refc[t] as usize {
                    continue; // also a root: cannot be freed
                }
                for u in users {
                    if self.refc[u] == 0 {
                        continue; // no longer materialized after an earlier switch
                    }
                    let alts = (0..dag.kids[u].len()).filter(|&k| !dag.kids[u][k].contains(&t));
                    let mut moved = false;
                    for k in alts {
                        // After a searched switch `rank` may be stale: search from then on.
                        if let Some((prev, r)) = self.switch(u, k, if ranked { rank } else { &[] })
                        {
                            log.push((u, prev));
                            ranked &= r;
                            moved = true;
                            break;
                        }
                    }
                    if !moved {
                        continue 'stuck;
                    }
                }
            }
        }
        if self.total < before - EPS {
            Some(ranked)
        } else {
            self.revert(&log);
            None
        }
    }
}

/// Bytes of class `c` at each binding (0 where a size does not evaluate); 0 for classes that
/// hold an input or an opaque result, or that are not tensors.
fn class_bytes(eg: &EbbEGraph, id: Id, bindings: &[Bindings]) -> Vec<i64> {
    let free = eg[id]
        .nodes
        .iter()
        .any(|n| matches!(n, EbbNode::Input(_) | EbbNode::Result { .. }));
    let size = match &eg[id].data {
        ClassData::Tensor(t) if !free => Some(t.size_bytes()),
        ClassData::Tuple(ts) if !free => Some(
            ts.iter()
                .map(|t| t.size_bytes())
                .fold(ebb_ir::DimExpr::zero(), |a, b| a + b),
        ),
        _ => None,
    };
    bindings
        .iter()
        .map(|b| size.as_ref().and_then(|s| s.eval(b).ok()).unwrap_or(0))
        .collect()
}

/// Heights of the choice graph over all classes with a choice (0 for leaves, else one more
/// than the highest child), or `None` if it has a cycle. Any map that is larger on a parent
/// than on each chosen child is a valid potential for the cycle check; heights keep classes
/// created by rules low, so switching to them rarely needs a search.
fn ranks(dag: &Dag, choice: &[Option<usize>]) -> Option<Vec<usize>> {
    let n = choice.len();
    let mut rank = vec![0usize; n];
    let mut state = vec![0u8; n]; // 0 new, 1 on stack, 2 done
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for start in 0..n {
        if choice[start].is_none() || state[start] != 0 {
            continue;
        }
        stack.push((start, 0));
        state[start] = 1;
        while let Some(&mut (c, ref mut k)) = stack.last_mut() {
            let kids = dag.chosen(choice, c);
            if let Some(&ch) = kids.get(*k) {
                *k += 1;
                match state[ch] {
                    0 if choice[ch].is_some() => {
                        state[ch] = 1;
                        stack.push((ch, 0));
                    }
                    1 => return None,
                    _ => {}
                }
            } else {
                rank[c] = kids.iter().map(|x| rank[*x] + 1).max().unwrap_or(0);
                state[c] = 2;
                stack.pop();
            }
        }
    }
    Some(rank)
}

/// Reference counts recomputed from scratch (for the debug check of the incremental ones).
fn recount(dag: &Dag, choice: &[Option<usize>], roots: &[usize]) -> Vec<u32> {
    let mut refc = vec![0u32; choice.len()];
    let mut stack = roots.to_vec();
    while let Some(c) = stack.pop() {
        refc[c] += 1;
        if refc[c] == 1 {
            stack.extend_from_slice(dag.chosen(choice, c));
        }
    }
    refc
}

/// Fallback choice (step 1 of the module docs): per class, the node minimizing
/// `cost(class) + max(cost(children))`, acyclic by construction.
fn fallback(
    dag: &Dag,
    cost: &[f64],
    usable: &[bool],
    parents: &[Vec<(usize, usize)>],
) -> Vec<Option<usize>> {
    let n = cost.len();
    let mut pending: Vec<Vec<usize>> = dag
        .kids
        .iter()
        .map(|ns| ns.iter().map(|k| k.len()).collect())
        .collect();
    let mut best = vec![f64::INFINITY; n];
    let mut choice = vec![None; n];
    let mut done = vec![false; n];
    let mut heap = BinaryHeap::new();
    let key = |v: f64| Reverse(v.to_bits()); // non-negative f64 bits order like the values
    for c in (0..n).filter(|c| usable[*c]) {
        if let Some(j) = dag.kids[c].iter().position(|k| k.is_empty()) {
            best[c] = cost[c] + EPS;
            choice[c] = Some(j);
            heap.push((key(best[c]), c));
        }
    }
    while let Some((_, c)) = heap.pop() {
        if done[c] {
            continue;
        }
        done[c] = true;
        for &(p, j) in &parents[c] {
            pending[p][j] -= 1;
            if pending[p][j] > 0 || done[p] || !usable[p] {
                continue;
            }
            let m = dag.kids[p][j]
                .iter()
                .map(|ch| best[*ch])
                .fold(0.0, f64::max);
            let v = cost[p] + EPS + m;
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
pub(crate) fn extract(
    eg: &EbbEGraph,
    enc: &Encoded,
    bindings: &[Bindings],
) -> Result<Extraction, RewriteError> {
    let n = eg.classes().map(|c| ix(c.id) + 1).max().unwrap_or(0);
    let dag = Dag::new(eg, n);
    let mut raw: Vec<Vec<i64>> = vec![Vec::new(); n];
    let mut usable = vec![false; n];
    let mut parents: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for class in eg.classes() {
        let c = ix(class.id);
        raw[c] = class_bytes(eg, class.id, bindings);
        usable[c] = !matches!(class.data, ClassData::Invalid(_));
        for (j, kids) in dag.kids[c].iter().enumerate() {
            for ch in kids {
                parents[*ch].push((c, j));
            }
        }
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
        let j = eg[c]
            .nodes
            .binary_search(&canon)
            .map_err(|_| RewriteError::Extract(format!("original op {:?} lost", o.node)))?;
        orig[ix(c)] = Some((o.node, j));
        orig_pos[ix(c)] = Some(o.pos);
    }
    // Weights: 1 / (bytes of the input graph) per binding.
    let mut totals = vec![0i64; bindings.len()];
    for c in (0..n).filter(|c| orig[*c].is_some()) {
        for (t, b) in totals.iter_mut().zip(&raw[c]) {
            *t = t.saturating_add(*b);
        }
    }
    let cost: Vec<f64> = raw
        .iter()
        .map(|r| {
            r.iter()
                .zip(&totals)
                .map(|(b, t)| *b as f64 / (*t).max(1) as f64)
                .sum()
        })
        .collect();
    let fb = fallback(&dag, &cost, &usable, &parents);
    let mut choice: Vec<Option<usize>> =
        (0..n).map(|c| orig[c].map(|(_, j)| j).or(fb[c])).collect();
    let mut rank = match ranks(&dag, &choice) {
        Some(r) => r,
        None => {
            choice = fb.clone();
            ranks(&dag, &choice)
                .ok_or_else(|| RewriteError::Extract("fallback choice is cyclic".into()))?
        }
    };
    let roots: Vec<usize> = enc
        .roots
        .iter()
        .chain(&enc.inputs)
        .map(|r| ix(eg.find(*r)))
        .collect();
    if let Some(r) = roots.iter().find(|r| choice[**r].is_none()) {
        return Err(RewriteError::Extract(format!(
            "class {r} has no acyclic derivation"
        )));
    }
    let mut st = State {
        dag: &dag,
        choice,
        refc: vec![0; n],
        cost,
        total: 0.0,
        stack: Vec::new(),
        seen: vec![0; n],
        stamp: 0,
    };
    st.inc(&roots);
    let active_bytes = |refc: &[u32]| -> Vec<i64> {
        let mut out = vec![0i64; bindings.len()];
        for c in (0..n).filter(|c| refc[*c] > 0) {
            for (o, b) in out.iter_mut().zip(&raw[c]) {
                *o = o.saturating_add(*b);
            }
        }
        out
    };
    let bytes_before = active_bytes(&st.refc);
    let candidates: Vec<usize> = (0..n)
        .filter(|&c| usable[c] && dag.kids[c].len() > 1)
        .collect();
    for _ in 0..MAX_PASSES {
        let mut improved = false;
        for &c in &candidates {
            for m in 0..dag.kids[c].len() {
                if st.refc[c] == 0 || st.choice[c] == Some(m) {
                    continue;
                }
                match st.improve(c, m, &rank, &parents) {
                    Some(true) => improved = true,
                    Some(false) => {
                        improved = true;
                        rank = ranks(&dag, &st.choice).ok_or_else(|| {
                            RewriteError::Extract("cycle after a checked switch".into())
                        })?;
                    }
                    None => {}
                }
            }
        }
        if !improved {
            break;
        }
    }
    debug_assert_eq!(
        recount(&dag, &st.choice, &roots),
        st.refc,
        "incremental reference counts drifted"
    );
    let bytes_after = active_bytes(&st.refc);
    let active: Vec<bool> = st.refc.iter().map(|r| *r > 0).collect();
    let changed = (0..n)
        .filter(|&c| active[c] && orig[c].is_some_and(|(_, j)| st.choice[c] != Some(j)))
        .count();
    Ok(Extraction {
        choice: st.choice,
        active,
        rank,
        orig_pos,
        orig,
        bytes_before,
        bytes_after,
        changed,
    })
}
