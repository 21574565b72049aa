//! The memory contract of a `fusion` op shared by the planner and the executor: a loop fusion
//! is evaluated over chunks of [`FUSION_CHUNK`] consecutive elements of its flat (row-major)
//! iteration space; each region value is a tile buffer of one chunk, live from its member to its
//! last in-region reader, and so is each region input read flat-aligned (a copy of that chunk
//! of the operand, made when the chunk starts). Nothing else of the region is materialized.
//!
//! An input fusion (XLA's kInput: a `reduce` root, [`input_fusion_rows`]) iterates over the
//! reduce's operand instead, in chunks of whole *rows* — the elements of one index of the
//! leading dimensions the reduce keeps — as many rows as fit in [`FUSION_CHUNK`] elements, and
//! at least one; each chunk's rows are reduced on their own, which combines every output
//! element's inputs in the same order as reducing the whole operand.
//!
//! A *column* reduction ([`reduce_root_columns`]: the reduce reduces leading dimensions and
//! keeps the trailing ones, as a bias or layer-norm scale gradient sums `[B, S, d]` to `[d]`)
//! roots an input fusion too: its rows are the elements of one index of the reduced leading
//! dimensions (one row has the result's size), chunks are whole rows as above, and each row is
//! combined in order into one accumulator per result element, as the reference `reduce` walks
//! the operand in memory order. The accumulators (at most 8 bytes per result element: `f32`
//! sums accumulate in `f64`) are charged with the tiles.
//!
//! In-place writes ([`in_place_writes`]): a loop fusion, `scatter` or `dynamic_update_slice`
//! whose operand dies at it writes its result into that operand's buffer, and a `case` result
//! that a branch returns unchanged from an operand dying at it (a forwarded operand) takes
//! that operand's buffer, as does a `while` result carried from an operand dying at the loop
//! (returned unchanged by the body, or donated to its next value); planner, checker and executor count the buffer once
//! ([`in_place_bytes`] less at the op's point).
//!
//! Invariant: [`fusion_tile_bytes`] is the bytes the executor charges while the op runs, on top
//! of its operands and results, and never less than what it allocates for the tiles; an
//! in-place write never overwrites a value that any op reads later, in any schedule.

use super::{Op, OpKind};
use crate::dim::{DimError, DimExpr, SymbolScope};
use crate::graph::{Graph, NodeId, ValueRef};
use std::collections::HashMap;

/// Elements per chunk of a loop fusion's iteration space.
pub const FUSION_CHUNK: i64 = 2048;

/// The op `id` of `g` when it is a `reduce` of one operand and its init value, with one result
/// and at least one reduced dimension: the node, its dimensions and its operands.
fn single_reduce(g: &Graph, id: NodeId) -> Option<(&crate::graph::Node, &[i64], Vec<ValueRef>)> {
    let n = g.node(id);
    let Op::Reduce(dims) = &n.op else {
        return None;
    };
    let ins = g.operands(id);
    (ins.len() == 2 && n.outputs.len() == 1 && !dims.is_empty()).then_some((
        n,
        dims.as_slice(),
        ins,
    ))
}

/// Whether the op `id` of `g` is a `reduce` that may root an input fusion: one operand and its
/// init value, one result, and a non-empty prefix of leading dimensions it keeps followed by at
/// least one it reduces. Returns the length of that prefix (the rows of the module docs are
/// the indices of these dimensions).
pub fn reduce_root_prefix(g: &Graph, id: NodeId) -> Option<usize> {
    let (_, dims, ins) = single_reduce(g, id)?;
    let rank = g.value_type(ins[0]).rank();
    let k = (0..rank)
        .take_while(|&d| !dims.contains(&(d as i64)))
        .count();
    (k >= 1 && k < rank).then_some(k)
}

/// Whether the op `id` of `g` is a `reduce` that may root a column input fusion (see the
/// module docs): one `f32` operand and its init value, one result, a body that is one
/// `add`, `multiply`, `maximum` or `minimum` of its two arguments, and a non-empty prefix of
/// leading dimensions it reduces followed by at least one it keeps and none it reduces.
/// Returns the length of that prefix.
pub fn reduce_root_columns(g: &Graph, id: NodeId) -> Option<usize> {
    let (n, dims, ins) = single_reduce(g, id)?;
    let t = g.value_type(ins[0]);
    if t.dtype != crate::DType::F32 || n.outputs[0].dtype != crate::DType::F32 {
        return None;
    }
    let k = dims.len();
    let leading = (0..k).all(|d| dims.contains(&(d as i64)));
    (leading && k < t.rank() && n.regions.first().is_some_and(monoid_body)).then_some(k)
}

/// Whether a reduce body is one `add`, `multiply`, `maximum` or `minimum` of its two
/// arguments, returned.
fn monoid_body(body: &Graph) -> bool {
    matches!(
        combiner(body),
        Some(OpKind::Add | OpKind::Multiply | OpKind::Maximum | OpKind::Minimum)
    )
}

/// The kind of the one op of a two-argument region (a `reduce` or `scatter` body) when that op
/// combines the region's two arguments (in either order) and is returned: `add` for a sum.
pub fn combiner(body: &Graph) -> Option<OpKind> {
    let ins = body.inputs();
    let ops: Vec<NodeId> = body
        .order()
        .iter()
        .copied()
        .filter(|&id| body.node(id).kind() != OpKind::Input)
        .collect();
    let ([a, b], [op]) = (ins, ops.as_slice()) else {
        return None;
    };
    let args = body.operands(*op);
    let (a, b) = (ValueRef::new(*a, 0), ValueRef::new(*b, 0));
    ((args == [a, b] || args == [b, a]) && body.outputs() == [ValueRef::new(*op, 0)])
        .then(|| body.node(*op).kind())
}

/// Whether the op `id` of `g` may root an input fusion: a row ([`reduce_root_prefix`]) or
/// column ([`reduce_root_columns`]) reduction.
pub fn is_reduce_root(g: &Graph, id: NodeId) -> bool {
    reduce_root_prefix(g, id).is_some() || reduce_root_columns(g, id).is_some()
}

/// The iteration space of the op `id` as a fusion group member or root, in elements: the
/// reduce operand's element count for an input fusion root ([`is_reduce_root`]), the first
/// result's otherwise; `None` for an op without results.
pub fn iteration_space(g: &Graph, id: NodeId) -> Option<DimExpr> {
    if is_reduce_root(g, id) {
        return g
            .operands(id)
            .first()
            .map(|v| g.value_type(*v).num_elements());
    }
    g.node(id).outputs.first().map(|t| t.num_elements())
}

/// For an input fusion's region (its last member an [`is_reduce_root`] root): the iteration
/// space (the reduce operand's elements) and the row length (the product of the dimensions
/// after the kept prefix of a row reduction, or after the reduced prefix of a column
/// reduction: the result's size), both in elements; `None` for a loop fusion.
pub fn input_fusion_rows(region: &Graph) -> Option<(DimExpr, DimExpr)> {
    let root = *region.order().last()?;
    let k = reduce_root_prefix(region, root).or_else(|| reduce_root_columns(region, root))?;
    let t = region.value_type(*region.operands(root).first()?);
    let row = t.shape[k..]
        .iter()
        .cloned()
        .fold(DimExpr::constant(1), |acc, d| acc * d);
    Some((t.num_elements(), row))
}

/// Whether `consumer` (in `g`) reads its operand `operand` flat-aligned with its iteration
/// space ([`iteration_space`]): an elementwise operand of the result's shape, a `reshape`, an
/// order-preserving `broadcast_in_dim` that adds only unit dimensions, or the reduced operand
/// of an [`is_reduce_root`] root.
pub fn reads_aligned(g: &Graph, consumer: NodeId, operand: usize) -> bool {
    let n = g.node(consumer);
    if matches!(n.op, Op::Reduce(_)) {
        return operand == 0 && is_reduce_root(g, consumer);
    }
    let Some(out) = n.outputs.first() else {
        return false;
    };
    let Some(v) = operand_at(g, consumer, operand) else {
        return false;
    };
    let t = g.value_type(v);
    match &n.op {
        Op::Reshape(_) => true,
        Op::BroadcastInDim(b) => {
            b.dims.windows(2).all(|w| w[0] < w[1])
                && b.dims.len() == t.rank()
                && b.dims.iter().zip(&t.shape).all(|(&d, s)| {
                    usize::try_from(d).ok().and_then(|d| out.shape.get(d)) == Some(s)
                })
                && out.num_elements() == t.num_elements()
        }
        _ if n.kind().is_elementwise() => t.shape == out.shape,
        _ => false,
    }
}

/// Operand `k` of op `id` ([`Graph::operands`]`[k]`), found among its incoming edges without
/// collecting and sorting all of them.
fn operand_at(g: &Graph, id: NodeId, k: usize) -> Option<ValueRef> {
    use petgraph::visit::EdgeRef;
    g.petgraph()
        .edges_directed(id, petgraph::Direction::Incoming)
        .find(|e| e.weight().operand as usize == k)
        .map(|e| ValueRef::new(e.source(), e.weight().output))
}

/// The region inputs of a loop fusion that some member reads flat-aligned (copied chunk by
/// chunk); the others are read whole (scalars, the operands of expanding broadcasts).
pub fn aligned_inputs(region: &Graph) -> Vec<bool> {
    let ins = region.inputs();
    let mut aligned = vec![false; ins.len()];
    for (i, &id) in ins.iter().enumerate() {
        aligned[i] = region
            .users(id)
            .iter()
            .any(|&(u, operand, _)| reads_aligned(region, u, operand as usize));
    }
    aligned
}

/// The members of a loop fusion's region in program order, and for every region value the
/// index (into that list) of its last in-region reader; `None` for values never read inside.
pub fn member_last_uses(region: &Graph) -> (Vec<NodeId>, HashMap<ValueRef, usize>) {
    let members: Vec<NodeId> = region
        .order()
        .iter()
        .copied()
        .filter(|&id| region.node(id).kind() != OpKind::Input)
        .collect();
    let mut last = HashMap::new();
    for (k, &m) in members.iter().enumerate() {
        for v in region.operands(m) {
            last.insert(v, k);
        }
    }
    (members, last)
}

/// Bytes per element of the iteration space that a chunked evaluation holds at most (see the
/// module docs): while member `k` runs, every aligned input read at `k` or later (all are
/// copied when the chunk starts), every earlier member result read at `k` or later, and the
/// result of `k`. Region outputs are copied out when produced and dropped after their last
/// in-region read.
pub fn tile_bytes_per_element(region: &Graph) -> i64 {
    use petgraph::visit::{EdgeRef, NodeIndexable};
    let pg = region.petgraph();
    // Node index -> the last member reading its result 0.
    let mut last = vec![None::<usize>; pg.node_bound()];
    let mut members = Vec::with_capacity(region.order().len());
    for &id in region.order() {
        if region.node(id).kind() == OpKind::Input {
            continue;
        }
        let k = members.len();
        members.push(id);
        for e in pg.edges_directed(id, petgraph::Direction::Incoming) {
            if e.weight().output == 0 {
                last[e.source().index()] = Some(k);
            }
        }
    }
    let size = |id: NodeId| region.node(id).outputs[0].dtype.size_bytes() as i64;
    // What is live while member `k` runs, as a difference array over `k`: an aligned input
    // from 0 to its last reader, an earlier member's result from the next member to its last
    // reader, and the member's own result at `k`.
    let mut delta = vec![0i64; members.len() + 1];
    for (&id, al) in region.inputs().iter().zip(aligned_inputs(region)) {
        if let (true, Some(l)) = (al, last[id.index()]) {
            delta[0] += size(id);
            delta[l + 1] -= size(id);
        }
    }
    for (j, &m) in members.iter().enumerate() {
        delta[j] += size(m);
        delta[j + 1] -= size(m);
        if let Some(l) = last[m.index()].filter(|&l| l > j) {
            delta[j + 1] += size(m);
            delta[l + 1] -= size(m);
        }
    }
    let mut live = 0;
    let mut peak = 0;
    for d in &delta[..members.len()] {
        live += d;
        peak = peak.max(live);
    }
    peak
}

/// Elements of one chunk of a fusion's iteration space (see the module docs), at most: for a
/// loop fusion `min(elements, FUSION_CHUNK)` with `elements` the first output's element count;
/// for an input fusion `min(elements, max(row, FUSION_CHUNK))` (whole rows, at least one).
///
/// Errors: [`DimError`] on overflow.
pub fn fusion_chunk_elements(region: &Graph) -> Result<DimExpr, DimError> {
    let chunk = DimExpr::constant(FUSION_CHUNK);
    if let Some((elements, row)) = input_fusion_rows(region) {
        return elements.checked_min(&row.checked_max(&chunk)?);
    }
    match region.outputs().first() {
        Some(first) => region.value_type(*first).num_elements().checked_min(&chunk),
        None => Ok(DimExpr::zero()),
    }
}

/// Tile bytes of a fusion's region (see the module docs): [`fusion_chunk_elements`] times
/// [`tile_bytes_per_element`] (for an input fusion the reduce's chunk result is charged per
/// element of the chunk, an upper bound), plus 8 bytes per result element for a column
/// reduction's accumulators.
///
/// Computed once and kept with the region until it changes.
///
/// Errors: [`DimError`] on overflow.
pub fn fusion_tile_bytes(region: &Graph) -> Result<DimExpr, DimError> {
    region
        .memo
        .tile_bytes
        .get_or_init(|| compute_tile_bytes(region))
        .clone()
}

/// [`fusion_tile_bytes`] normalized under `scope` ([`SymbolScope::normalize`]): the form the
/// liveness analysis charges at the fusion's point. Kept with the region, for one scope.
///
/// Errors: [`DimError`] on overflow.
pub fn fusion_tile_bytes_in(region: &Graph, scope: &SymbolScope) -> Result<DimExpr, DimError> {
    let normalized = || fusion_tile_bytes(region).map(|e| scope.normalize(&e));
    match region.memo.tile_bytes_in.get() {
        Some((s, e)) if s == scope => e.clone(),
        Some(_) => normalized(),
        None => {
            let e = normalized();
            let _ = region.memo.tile_bytes_in.set((scope.clone(), e.clone()));
            e
        }
    }
}

/// The version of the two shape-independent analyses a binary plan file stores
/// ([`in_place_writes`] and [`fusion_tile_bytes`]), part of the file's fingerprint
/// (`ebb_plan::binary::fingerprint`): bump it with any change to what either returns, so that
/// files written by an earlier build are refused instead of reported with their stored results.
pub const STORED_ANALYSES_VERSION: u32 = 1;

/// Records `bytes` as [`fusion_tile_bytes`] of `region`: what it returns (and
/// [`fusion_tile_bytes_in`] normalizes) until `region` changes. For a loader that read them
/// from a file stamped as verified against this very region (`ebb_plan::binary`); no effect
/// when they are known already.
pub fn remember_fusion_tile_bytes(region: &Graph, bytes: DimExpr) {
    let _ = region.memo.tile_bytes.set(Ok(bytes));
}

/// [`fusion_tile_bytes`], computed.
fn compute_tile_bytes(region: &Graph) -> Result<DimExpr, DimError> {
    let tiles = fusion_chunk_elements(region)?
        .checked_mul(&DimExpr::constant(tile_bytes_per_element(region)))?;
    let columns = region
        .order()
        .last()
        .filter(|&&root| reduce_root_columns(region, root).is_some())
        .and_then(|_| input_fusion_rows(region));
    match columns {
        Some((_, row)) => tiles.checked_add(&row.checked_mul(&DimExpr::constant(8))?),
        None => Ok(tiles),
    }
}

/// An in-place write: result `result` of an op is written into the buffer of its operand
/// `operand`, which dies at the op (indices into the op's operands and results).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InPlace {
    /// Operand index.
    pub operand: usize,
    /// Result index.
    pub result: usize,
}

/// The in-place writes of `g`, by node; ops without any are absent. An elementwise group
/// may write into an operand that dies at it; XLA's buffer assignment
/// shares the same buffers (`CanShareOperandBufferWithUser`: elementwise fusions,
/// `scatter`, `dynamic_update_slice`).
///
/// * A loop `fusion`'s result `j` is written into its operand `i` (the input donated to the
///   graph output that result `j` is, if the op reads it; else the first one, in operand
///   order, not already taken by an earlier result) when every member of the region that reads
///   the operand reads it flat-aligned, so each chunk of it is read (copied, the chunk contract
///   of the module docs) before that chunk of the result is written.
/// * A `scatter` of one input writes its result into that input (operand 0), and a
///   `dynamic_update_slice` into its operand: the kernels update the buffer in place.
/// * A `dot_general` with an accumulator (operand 2, the dot-accumulate form) adds the
///   product into the accumulator's buffer, each element's complete sum added once (the shallow
///   kernel's store, or the GEMM adding each element as it stores it, over one depth block); a deeper product is
///   computed apart and then added, its buffer the op's transient ([`super::accumulate`]).
/// * A `case` result `j` takes the buffer of operand `i` (not the index, operand 0): first
///   where a branch returns its block argument `i - 1` unchanged as result `j`
///   ([`case_forwards`]; the first such operand, in branch order, not already taken by an
///   earlier result), so that in that branch the result *is* the operand; then, for the other
///   results, the first operand that fits, in operand order. A branch that computes the result
///   holds it in the operand's buffer once the operand is dead, as the op's point ends (the
///   branch's own peak is charged apart; the branch inputs of such operands are donated to the
///   branch's outputs by `ebb_passes::donate::donate_into_branches`, so a branch frees them
///   after their last read there).
/// * A `while` result `j` takes the buffer of operand `j` where the body returns its block
///   argument `j` unchanged ([`while_forwards`]: a scan's inputs, loop-invariant values; the
///   loop never writes it, and the result *is* the operand after any number of iterations),
///   or donates that argument to its output `j` (`ebb_passes::donate::donate_into_branches`:
///   each iteration's value replaces the last, as a scan's stacked outputs, updated in place,
///   and its carry do): the loop holds one value of the carry at a time.
///
/// In every case the operand has the result's element type and, provably, its element count;
/// it is not a graph output, nor a graph input other than a donated one (`aliasing_output`),
/// nor a `constant`; the op reads it at one operand only; and every other reader of it is an
/// ancestor of the op, so the op reads it last in every schedule: nothing reads the old value
/// after it is overwritten. The operand's bytes are then not allocated twice at the op's
/// point: [`in_place_bytes`].
///
/// Computed once and kept with the graph until it changes (a changed scope recomputes it).
pub fn in_place_writes(g: &Graph) -> HashMap<NodeId, Vec<InPlace>> {
    match g.memo.in_place.get() {
        Some((scope, writes)) if *scope == g.scope => writes.clone(),
        Some(_) => compute_in_place_writes(g),
        None => {
            let writes = compute_in_place_writes(g);
            let _ = g.memo.in_place.set((g.scope.clone(), writes.clone()));
            writes
        }
    }
}

/// Records `writes` as the in-place writes of `g` under its current scope: what
/// [`in_place_writes`] returns until `g` changes. For a loader that read them from a file
/// stamped as verified against this very graph (`ebb_plan::binary`); no effect when they are
/// known already.
pub fn remember_in_place_writes(g: &Graph, writes: HashMap<NodeId, Vec<InPlace>>) {
    let _ = g.memo.in_place.set((g.scope.clone(), writes));
}

/// [`in_place_writes`], computed.
fn compute_in_place_writes(g: &Graph) -> HashMap<NodeId, Vec<InPlace>> {
    let writers = |id: NodeId| match &g.node(id).op {
        Op::Fusion(super::FusionKind::Loop)
        | Op::Scatter(_)
        | Op::DynamicUpdateSlice
        | Op::Case
        | Op::While => true,
        Op::DotGeneral(_) => g.operands(id).len() == 3,
        _ => false,
    };
    let mut out = HashMap::new();
    if !g.order().iter().any(|&id| writers(id)) {
        return out;
    }
    let ancestry = std::cell::RefCell::new(Ancestry::new(g));
    let outputs: std::collections::HashSet<ValueRef> = g.outputs().iter().copied().collect();
    for &id in g.order() {
        let node = g.node(id);
        if !writers(id) {
            continue;
        }
        let ops = g.operands(id);
        // Whether operand `i` may hold result `j`, the region aside.
        // Whether operand `i` dies at the op (memoized: a `case` tries many pairs).
        let dies = std::cell::RefCell::new(vec![None; ops.len()]);
        let fits = |i: usize, j: usize| {
            let (Some(&v), Some(ty)) = (ops.get(i), node.outputs.get(j)) else {
                return false;
            };
            let vt = g.value_type(v);
            // Equal shapes have equal element counts; others need the proof.
            if vt.dtype != ty.dtype
                || vt.shape != ty.shape && !g.scope.prove_eq(&vt.num_elements(), &ty.num_elements())
            {
                return false;
            }
            *dies.borrow_mut()[i].get_or_insert_with(|| {
                let producer = g.node(v.node);
                ops.iter().filter(|&&w| w == v).count() == 1
                    && !outputs.contains(&v)
                    && !matches!(producer.op, Op::Constant(_))
                    && (producer.kind() != OpKind::Input || g.aliasing_output(v.node).is_some())
                    && ancestry.borrow_mut().others_precede(g, v, id)
            })
        };
        let mut pairs = Vec::new();
        match (&node.op, node.regions.as_slice()) {
            (Op::Fusion(super::FusionKind::Loop), [region]) => {
                // Memoized: tried once per (result, operand) pair.
                let aligned_memo = std::cell::RefCell::new(vec![None; ops.len()]);
                let aligned = |i: usize| {
                    *aligned_memo.borrow_mut()[i].get_or_insert_with(|| {
                        region.inputs().get(i).is_some_and(|&r| {
                            let users = region.users(r);
                            !users.is_empty()
                                && users
                                    .iter()
                                    .all(|&(u, k, _)| reads_aligned(region, u, k as usize))
                        })
                    })
                };
                // The operand that is the input donated to the graph output result `j` is:
                // the result is that input's update, written over it first.
                let own = |j: usize| {
                    let out = ValueRef::new(id, j as u32);
                    let k = g.outputs().iter().position(|&o| o == out)?;
                    let input = g
                        .inputs()
                        .iter()
                        .find(|&&x| g.aliasing_output(x) == Some(k))?;
                    ops.iter().position(|v| v.node == *input)
                };
                let mut taken = vec![false; ops.len()];
                let preferred = (0..node.outputs.len()).filter_map(|j| Some((j, own(j)?)));
                let any = (0..node.outputs.len()).flat_map(|j| (0..ops.len()).map(move |i| (j, i)));
                for (j, i) in preferred.chain(any) {
                    if !taken[i]
                        && !pairs.iter().any(|w: &InPlace| w.result == j)
                        && aligned(i)
                        && fits(i, j)
                    {
                        taken[i] = true;
                        pairs.push(InPlace {
                            operand: i,
                            result: j,
                        });
                    }
                }
                pairs.sort_by_key(|w| w.result);
            }
            (Op::Scatter(_), _) if ops.len() == 3 && node.outputs.len() == 1 && fits(0, 0) => {
                pairs.push(InPlace {
                    operand: 0,
                    result: 0,
                });
            }
            (Op::DotGeneral(_), _) if ops.len() == 3 && fits(2, 0) => {
                pairs.push(InPlace {
                    operand: 2,
                    result: 0,
                });
            }
            (Op::DynamicUpdateSlice, _) if node.outputs.len() == 1 && fits(0, 0) => {
                pairs.push(InPlace {
                    operand: 0,
                    result: 0,
                });
            }
            (Op::Case, branches) => {
                let mut taken = vec![false; ops.len()];
                let forwarded = case_forwards(branches);
                let others =
                    (0..node.outputs.len()).flat_map(|j| (1..ops.len()).map(move |i| (j, i)));
                for (j, i) in forwarded.into_iter().chain(others) {
                    if !taken[i] && !pairs.iter().any(|w: &InPlace| w.result == j) && fits(i, j) {
                        taken[i] = true;
                        pairs.push(InPlace {
                            operand: i,
                            result: j,
                        });
                    }
                }
                pairs.sort_by_key(|w| w.result);
            }
            (Op::While, [_, body]) => {
                let forwarded = while_forwards(body);
                let args = body.inputs();
                for j in 0..node.outputs.len() {
                    let carried = forwarded.contains(&j)
                        || args
                            .get(j)
                            .is_some_and(|&a| body.aliasing_output(a) == Some(j));
                    if carried && fits(j, j) {
                        pairs.push(InPlace {
                            operand: j,
                            result: j,
                        });
                    }
                }
            }
            _ => {}
        }
        if !pairs.is_empty() {
            out.insert(id, pairs);
        }
    }
    out
}

/// The forwarded operands of a `case` with branches `branches`: (result `j`, operand `i`) for
/// each branch that returns its block argument `i - 1` unchanged as its result `j` (operand 0
/// is the index, which no branch receives), results in order, branches in order within a
/// result. Linear in the branches' inputs and outputs.
pub fn case_forwards(branches: &[Graph]) -> Vec<(usize, usize)> {
    let results = branches
        .iter()
        .map(|r| r.outputs().len())
        .max()
        .unwrap_or(0);
    let mut out = Vec::new();
    for j in 0..results {
        for r in branches {
            let Some(v) = r.outputs().get(j) else {
                continue;
            };
            if let Some(k) = r
                .inputs()
                .iter()
                .position(|&x| x == v.node && v.output == 0)
            {
                if !out.contains(&(j, k + 1)) {
                    out.push((j, k + 1));
                }
            }
        }
    }
    out
}

/// The carried values `j` that a `while` body `body` returns unchanged: its output `j` is its
/// block argument `j`, so the loop's result `j` is its operand `j` after any number of
/// iterations (a scan's inputs and loop-invariant values). In order; linear in the body's
/// outputs.
pub fn while_forwards(body: &Graph) -> Vec<usize> {
    let args = body.inputs();
    body.outputs()
        .iter()
        .enumerate()
        .filter(|&(j, v)| v.output == 0 && args.get(j) == Some(&v.node))
        .map(|(j, _)| j)
        .collect()
}

/// Program-order positions by node index and a visit mark per node, for the ancestor
/// searches of [`in_place_writes`] (one per operand that may be overwritten), reused so that a
/// search allocates nothing.
struct Ancestry {
    /// `NodeId::index()` → program-order position (`usize::MAX` for an index not in the order).
    pos: Vec<usize>,
    /// `NodeId::index()` → the search that last visited it.
    seen: Vec<u32>,
    /// The current search's number.
    search: u32,
    /// The search's stack.
    stack: Vec<NodeId>,
}

impl Ancestry {
    fn new(g: &Graph) -> Ancestry {
        use petgraph::visit::NodeIndexable;
        let bound = g.petgraph().node_bound();
        let mut pos = vec![usize::MAX; bound];
        for (i, &n) in g.order().iter().enumerate() {
            pos[n.index()] = i;
        }
        Ancestry {
            pos,
            seen: vec![0; bound],
            search: 0,
            stack: Vec::new(),
        }
    }

    /// Whether every reader of `v` other than `f` is an ancestor of `f` (a backward search from
    /// `f` over operands, pruned at program-order positions before the earliest such reader).
    fn others_precede(&mut self, g: &Graph, v: ValueRef, f: NodeId) -> bool {
        let mut want: Vec<NodeId> = g
            .users(v.node)
            .into_iter()
            .filter(|&(u, _, out)| out == v.output && u != f)
            .map(|(u, _, _)| u)
            .collect();
        want.dedup();
        let pos = |n: NodeId| {
            self.pos
                .get(n.index())
                .copied()
                .filter(|&p| p != usize::MAX)
        };
        let Some(floor) = want.iter().filter_map(|&u| pos(u)).min() else {
            return true;
        };
        self.search += 1;
        let search = self.search;
        self.seen[f.index()] = search;
        self.stack.clear();
        self.stack.push(f);
        while let Some(n) = self.stack.pop() {
            for w in g
                .petgraph()
                .neighbors_directed(n, petgraph::Direction::Incoming)
            {
                if let Some(k) = want.iter().position(|&x| x == w) {
                    want.swap_remove(k);
                    if want.is_empty() {
                        return true;
                    }
                }
                let p = self.pos.get(w.index()).copied().unwrap_or(usize::MAX);
                if p != usize::MAX && p >= floor && self.seen[w.index()] != search {
                    self.seen[w.index()] = search;
                    self.stack.push(w);
                }
            }
        }
        want.is_empty()
    }
}

/// Bytes of the operands of op `id` that its results are written into (`in_place`, the op's
/// [`in_place_writes`]): allocated once for operand and result, so subtracted from what the
/// op adds at its point.
///
/// Errors: [`DimError`] on overflow.
pub fn in_place_bytes(g: &Graph, id: NodeId, in_place: &[InPlace]) -> Result<DimExpr, DimError> {
    let ops = g.operands(id);
    let mut t = DimExpr::zero();
    for w in in_place {
        if let Some(v) = ops.get(w.operand) {
            t = t.checked_add(&g.value_type(*v).checked_size_bytes()?)?;
        }
    }
    Ok(t)
}
