//! Canonicalization: the cleanup passes that run right after import and before any memory
//! planning, one pass per file.
//!
//! | pass             | file       | what it does                                                |
//! |------------------|------------|-------------------------------------------------------------|
//! | `unroll`         | [`unroll`] | unrolls `while` loops with a constant trip count (a scan over layers) |
//! | `fold`           | [`fold`]   | folds shape computations and small integer constants, removes identity ops |
//! | `forward_slices` | [`slices`] | forwards `dynamic_slice` of a `dynamic_update_slice` to the update (or its operand) |
//! | `cse`            | [`cse`]    | merges identical pure ops into the first one in program order |
//! | `dce`            | [`dce`]    | removes ops whose results do not reach the graph outputs    |
//!
//! [`pipeline`] runs them in that order to a fixed point: unrolling makes loop counters
//! constants, folding turns the index arithmetic on them into constants, which lets slices of
//! stacked residuals forward to the values written; folding also exposes duplicates (equal new
//! constants) and dead producers, CSE exposes dead duplicates, DCE removes them.
//!
//! Every pass keeps the graph valid ([`ebb_ir::verify::verify`] passes after it when it passed
//! before), keeps the graph inputs, outputs (count, order, types, names) and the shape
//! assertions, keeps every side-effecting op ([`has_side_effects`]) and never makes a tensor
//! larger than one that existed before it ran. Regions (`reduce` bodies, `while` condition and
//! body) are processed recursively; they cannot capture outer values, so each is handled as an
//! independent graph whose roots are its returned values.
//!
//! Deliberately not done here: algebraic simplification (`x * 1`, `x + 0`; that is the e-graph
//! rewrite groups' job), folding of large or float tensors (constants must stay small so that
//! folding never grows memory), removing unused `while`-carried values (it would change the
//! loop's interface), and CSE after planning (it would undo rematerialization; see [`cse`]).

pub mod cse;
pub mod dce;
pub mod fold;
mod fold_gather;
mod fold_index;
mod fold_loop;
mod fold_scatter;
mod fold_starts;
pub mod slices;
pub mod unroll;

pub use cse::Cse;
pub use dce::Dce;
pub use fold::Fold;
pub use slices::ForwardSlices;
pub use unroll::Unroll;

pub use crate::manager::total_op_count;
use crate::manager::PassManager;
use ebb_ir::{Graph, Node, NodeId, Op};
use std::collections::{HashMap, HashSet};

/// `custom_call` targets known to be pure (no side effects, result depends only on operands),
/// which DCE may remove and CSE may merge. Any other target is treated as side-effecting, as is
/// any `custom_call` with `has_side_effect = true`. The list follows XLA's pure SPMD/partitioning
/// markers and its 64-bit splitting helpers.
pub const PURE_CUSTOM_CALLS: &[&str] = &[
    "Sharding",
    "SPMDFullToShardShape",
    "SPMDShardToFullShape",
    "X64Combine",
    "X64SplitLow",
    "X64SplitHigh",
];

/// Whether `node` has side effects: a `custom_call` whose `call_target_name` is not in
/// [`PURE_CUSTOM_CALLS`] (or that carries `has_side_effect = true`), or an op with a region that
/// contains such an op. Side-effecting ops are never removed, merged or reordered by the
/// canonicalization passes.
pub fn has_side_effects(node: &Node) -> bool {
    if let Op::CustomCall(c) = &node.op {
        if c.has_side_effect || !PURE_CUSTOM_CALLS.contains(&c.target.as_str()) {
            return true;
        }
    }
    node.regions.iter().any(graph_has_side_effects)
}

/// Whether any op of `g` (regions included) has side effects ([`has_side_effects`]).
pub fn graph_has_side_effects(g: &Graph) -> bool {
    g.order().iter().any(|&id| has_side_effects(g.node(id)))
}

/// The canonicalization pipeline: `unroll`, `fold`, `forward_slices`, `cse`, `dce`, repeated
/// until a whole sweep changes nothing or `max_iterations` sweeps ran. The verifier runs after
/// every pass.
pub fn pipeline(max_iterations: usize) -> PassManager {
    PassManager::new()
        .add_pass(Unroll::default())
        .add_pass(Fold::default())
        .add_pass(ForwardSlices)
        .add_pass(Cse)
        .add_pass(Dce)
        .fixed_point(max_iterations)
}

/// Moves each node `before[id]` (appended to the program order by a rewrite) to just before
/// `id`, so that a replacement takes the place of the op it replaces; `id` itself stays
/// (a caller removing it does so afterwards).
pub(crate) fn place_before(g: &mut Graph, before: &HashMap<NodeId, NodeId>) {
    if before.is_empty() {
        return;
    }
    let new: HashSet<NodeId> = before.values().copied().collect();
    let mut order = Vec::with_capacity(g.order().len());
    for &id in g.order() {
        if new.contains(&id) {
            continue;
        }
        if let Some(&n) = before.get(&id) {
            order.push(n);
        }
        order.push(id);
    }
    g.set_order(order);
}

/// Moves the nodes `before[id]` (appended to the program order by a rewrite, in that order)
/// to just before `id`, which stays.
pub(crate) fn place_all_before(g: &mut Graph, before: &HashMap<NodeId, Vec<NodeId>>) {
    if before.is_empty() {
        return;
    }
    let new: HashSet<NodeId> = before.values().flatten().copied().collect();
    let mut order = Vec::with_capacity(g.order().len());
    for &id in g.order() {
        if new.contains(&id) {
            continue;
        }
        if let Some(ns) = before.get(&id) {
            order.extend_from_slice(ns);
        }
        order.push(id);
    }
    g.set_order(order);
}

/// Runs `f` on every region of node `id` of `g`, in order; returns the sum of its results.
/// The regions are moved out of the node while `f` runs, so `f` may mutate them freely.
pub(crate) fn for_each_region<E>(
    g: &mut Graph,
    id: ebb_ir::NodeId,
    mut f: impl FnMut(&mut Graph) -> Result<usize, E>,
) -> Result<usize, E> {
    if g.node(id).regions.is_empty() {
        return Ok(0);
    }
    let mut regions = std::mem::take(&mut g.node_mut(id).regions);
    let mut total = 0;
    let mut result = Ok(());
    for r in regions.iter_mut() {
        match f(r) {
            Ok(n) => total += n,
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    g.node_mut(id).regions = regions;
    result.map(|()| total)
}
