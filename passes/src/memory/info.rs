//! [`GraphInfo`]: a dense, position-indexed view of a graph for the memory model and the
//! scheduler: values numbered `0..`, their interned sizes, distinct operands per op, distinct
//! users per value, and the transient memory of region-carrying ops.
//!
//! Invariant: built once per graph (O(nodes + edges)); every per-op or per-value query of the
//! liveness analysis and the schedulers is then an index into a `Vec`, never a graph walk.
//! Values are numbered inputs first (in argument order), then the results of the ops in
//! program order; ops are numbered by their program-order position among non-input ops.

use super::sizes::SizeTable;
use super::ValueClass;
use ebb_ir::{DimExpr, Graph, NodeId, OpKind, SymbolScope, TensorType, ValueRef};
use petgraph::visit::{EdgeRef, NodeIndexable};
use petgraph::Direction;
use rustc_hash::FxHashMap;

/// Marker for "no index" in the dense tables.
pub(crate) const NONE: u32 = u32::MAX;

/// Compressed rows: row `i` is `items[offsets[i]..offsets[i + 1]]`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Csr {
    offsets: Vec<u32>,
    items: Vec<u32>,
}

impl Csr {
    /// Rows from `(row, item)` pairs, items of a row in the order given.
    pub(crate) fn from_pairs(rows: usize, pairs: &[(u32, u32)]) -> Csr {
        let mut offsets = vec![0u32; rows + 1];
        for &(r, _) in pairs {
            offsets[r as usize + 1] += 1;
        }
        for i in 0..rows {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut items = vec![0u32; pairs.len()];
        for &(r, x) in pairs {
            items[fill[r as usize] as usize] = x;
            fill[r as usize] += 1;
        }
        Csr { offsets, items }
    }

    /// Row `i`.
    pub(crate) fn row(&self, i: usize) -> &[u32] {
        &self.items[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }
}

/// Dense view of one graph (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct GraphInfo {
    /// Non-input ops in program order; op `i` is `ops[i]`.
    pub ops: Vec<NodeId>,
    /// Node index -> op index (`NONE` for inputs and removed nodes).
    pub op_of_node: Vec<u32>,
    /// Node index -> id of its first result value (`NONE` when not in the program order).
    pub value_base: Vec<u32>,
    /// Op -> id of its first result; `op_values[i]..op_values[i + 1]` are op `i`'s results
    /// (one extra entry at the end).
    pub op_values: Vec<u32>,
    /// Value id -> the value.
    pub values: Vec<ValueRef>,
    /// Value id -> size id in `sizes` (bytes).
    pub value_size: Vec<u32>,
    /// Value id -> producing op (`NONE` for inputs).
    pub producer: Vec<u32>,
    /// Value id -> class (an input that is also an output is `Input`).
    pub class: Vec<ValueClass>,
    /// Op -> its distinct operand values, ascending.
    pub operands: Csr,
    /// Value -> its distinct user ops, ascending.
    pub users: Csr,
    /// Op -> size id of its transient region memory (`NONE` when it has none).
    pub transient: Vec<u32>,
    /// The distinct sizes.
    pub sizes: SizeTable,
}

impl GraphInfo {
    /// Builds the view of `g`; `scope` proves the pruning of region peaks (the graph's own
    /// scope at the top level, the enclosing graph's scope for regions).
    pub(crate) fn build(g: &Graph, scope: &SymbolScope) -> GraphInfo {
        let in_place = ebb_ir::op::in_place_writes(g);
        let mut norm = Normalizer::new(scope);
        GraphInfo::build_with(g, |id| region_transient(g, id, &mut norm, &in_place))
    }

    /// [`GraphInfo::build`] with each op's region transient memory given by `transient_of`
    /// (`None` for an op without one) instead of derived.
    pub(crate) fn build_with(
        g: &Graph,
        mut transient_of: impl FnMut(NodeId) -> Option<DimExpr>,
    ) -> GraphInfo {
        let pg = g.petgraph();
        let bound = pg.node_bound();
        let mut op_of_node = vec![NONE; bound];
        let mut value_base = vec![NONE; bound];
        let mut values = Vec::new();
        let mut value_size = Vec::new();
        let mut producer = Vec::new();
        let mut sizes = SizeTable::new();
        let mut ops = Vec::with_capacity(g.order().len());
        let mut op_values = Vec::with_capacity(g.order().len() + 1);
        // Each distinct type's size computed and interned once (a graph of repeated layers has
        // few distinct types).
        let mut size_of_type: FxHashMap<&TensorType, u32> = FxHashMap::default();
        let mut add_values = |id: NodeId, prod: u32, values: &mut Vec<ValueRef>| {
            value_base[id.index()] = values.len() as u32;
            for (k, t) in g.node(id).outputs.iter().enumerate() {
                values.push(ValueRef::new(id, k as u32));
                let size = *size_of_type
                    .entry(t)
                    .or_insert_with(|| sizes.intern(t.size_bytes()));
                value_size.push(size);
                producer.push(prod);
            }
        };
        for &id in g.inputs() {
            if g.contains(id) {
                add_values(id, NONE, &mut values);
            }
        }
        for &id in g.order() {
            if !g.contains(id) || g.node(id).kind() == OpKind::Input {
                continue;
            }
            op_of_node[id.index()] = ops.len() as u32;
            op_values.push(values.len() as u32);
            add_values(id, ops.len() as u32, &mut values);
            ops.push(id);
        }
        op_values.push(values.len() as u32);
        let mut class: Vec<ValueClass> = producer
            .iter()
            .map(|&p| {
                if p == NONE {
                    ValueClass::Input
                } else {
                    ValueClass::Intermediate
                }
            })
            .collect();
        for &id in g.inputs() {
            if g.aliasing_output(id).is_some() {
                if let Some(&b) = value_base.get(id.index()) {
                    if b != NONE {
                        class[b as usize] = ValueClass::Donated;
                    }
                }
            }
        }
        for v in g.outputs() {
            if let Some(id) = value_id(&value_base, g, *v) {
                if !matches!(class[id as usize], ValueClass::Input) {
                    class[id as usize] = ValueClass::Output;
                }
            }
        }
        let mut op_pairs = Vec::new();
        let mut user_pairs = Vec::new();
        let mut row = Vec::new();
        for (i, &id) in ops.iter().enumerate() {
            row.clear();
            for e in pg.edges_directed(id, Direction::Incoming) {
                let src = e.source();
                let base = value_base.get(src.index()).copied().unwrap_or(NONE);
                if base != NONE {
                    row.push(base + e.weight().output);
                }
            }
            row.sort_unstable();
            row.dedup();
            for &v in &row {
                op_pairs.push((i as u32, v));
                user_pairs.push((v, i as u32));
            }
        }
        // `user_pairs` is in op order, so each value's users come out ascending
        // (`Csr::from_pairs` keeps each row's items in the order given).
        let operands = Csr::from_pairs(ops.len(), &op_pairs);
        let users = Csr::from_pairs(values.len(), &user_pairs);
        let transient = ops
            .iter()
            .map(|&id| transient_of(id).map_or(NONE, |e| sizes.intern(e)))
            .collect();
        GraphInfo {
            ops,
            op_of_node,
            value_base,
            op_values,
            values,
            value_size,
            producer,
            class,
            operands,
            users,
            transient,
            sizes,
        }
    }

    /// Number of values.
    pub(crate) fn num_values(&self) -> usize {
        self.values.len()
    }

    /// Result value ids of op `op`.
    pub(crate) fn results(&self, op: usize) -> std::ops::Range<u32> {
        self.op_values[op]..self.op_values[op + 1]
    }

    /// True for inputs and outputs (resident for the whole schedule); donated inputs are not
    /// persistent (they are freed after their last read).
    pub(crate) fn persistent(&self, v: u32) -> bool {
        matches!(
            self.class[v as usize],
            ValueClass::Input | ValueClass::Output
        )
    }
}

fn value_id(value_base: &[u32], g: &Graph, v: ValueRef) -> Option<u32> {
    let base = *value_base.get(v.node.index())?;
    (base != NONE && (v.output as usize) < g.node(v.node).outputs.len()).then_some(base + v.output)
}

/// Transient memory of a region-carrying op, in bytes: for each region that holds a
/// non-scalar value, the region's own symbolic peak (in its program order) minus the bytes of
/// its inputs (the block arguments, donated or not, which alias the op's operands already
/// counted outside);
/// the maximum over the op's regions. `None` for ops without such regions (`reduce`, `sort`,
/// `scatter` comparators are scalar bodies and are ignored).
///
/// A `fusion` op is charged its tile buffers only, a dot-accumulate the product it computes
/// apart ([`ebb_ir::op::accumulate_product_bytes`]). An op that writes results into operands
/// that die at it ([`ebb_ir::op::in_place_writes`]) is charged minus those operands' bytes
/// (negative when they exceed its other transient bytes).
///
/// A `case` runs one branch: it is charged the largest branch peak less its block arguments,
/// less the bytes of the results not written in place (counted outside as the op's results,
/// and inside as the branch's outputs where it computes them), and at least 0
/// ([`case_transient`]).
///
/// Conservative for a `while`: the region's outputs are counted both inside (in its peak) and
/// outside (as the op's results), and its regions are charged at the op's point only, as if one
/// iteration's transient memory were live for the whole op.
fn region_transient(
    g: &Graph,
    id: NodeId,
    norm: &mut Normalizer<'_>,
    in_place: &std::collections::HashMap<NodeId, Vec<ebb_ir::op::InPlace>>,
) -> Option<DimExpr> {
    let own = own_transient(g, id, norm, in_place.get(&id).map_or(&[], Vec::as_slice));
    let Some(w) = in_place.get(&id) else {
        return own;
    };
    // An operand written in place holds the result: its bytes are counted once.
    let saved = ebb_ir::op::in_place_bytes(g, id, w).ok()?;
    let base = own.unwrap_or_else(DimExpr::zero);
    base.checked_sub(&saved).ok().map(|e| norm.normalize(e))
}

/// [`region_transient`] without the in-place writes' saving (`writes`: the op's in-place
/// writes, which a `case` needs to know its results held apart).
fn own_transient(
    g: &Graph,
    id: NodeId,
    norm: &mut Normalizer<'_>,
    writes: &[ebb_ir::op::InPlace],
) -> Option<DimExpr> {
    let node = g.node(id);
    if let Some(bytes) = ebb_ir::op::accumulate_product_bytes(g, id, writes) {
        // A dot-accumulate deeper than one GEMM depth block holds its product apart.
        return bytes.ok().map(|e| norm.normalize(e));
    }
    if let (ebb_ir::Op::Fusion(_), [region]) = (&node.op, node.regions.as_slice()) {
        // A fusion's internal values are never materialized: only its tile buffers (the
        // normalized form `ebb_ir::op::fusion_tile_bytes_in` gives, one normalization per
        // distinct expression).
        return ebb_ir::op::fusion_tile_bytes(region)
            .ok()
            .map(|e| norm.normalize(e));
    }
    let scope = norm.scope;
    let mut parts = Vec::new();
    for r in &node.regions {
        let has_tensor = r
            .order()
            .iter()
            .any(|&n| r.node(n).outputs.iter().any(|t| t.rank() > 0));
        if !has_tensor {
            continue;
        }
        let live = super::liveness_in_scope(r, &super::program_order(r), scope);
        let peak = live.symbolic_peak(scope).to_expr();
        let inputs = live
            .ranges
            .iter()
            .filter(|x| matches!(x.class, ValueClass::Input | ValueClass::Donated))
            .try_fold(DimExpr::zero(), |acc, x| acc.checked_add(&x.bytes));
        if let Ok(e) = inputs.and_then(|i| peak.checked_sub(&i)) {
            parts.push(scope.normalize(&e));
        }
    }
    let most = match DimExpr::max_of(&parts) {
        Some(Ok(e)) => scope.normalize(&e),
        _ => return None,
    };
    if node.op == ebb_ir::Op::Case {
        return case_transient(g, id, scope, writes, &most);
    }
    Some(most)
}

/// The transient bytes of the `case` op `id` whose largest branch peak less its block
/// arguments is `most`: `max(0, most - held)`, `held` the bytes of the results not written in
/// place. During branch `b` the op holds its operands and the branch's own values (its
/// computed outputs among them); the liveness counts the operands and `held` at the op's
/// point, so the branch is charged what it holds beyond them. `None` on overflow.
fn case_transient(
    g: &Graph,
    id: NodeId,
    scope: &SymbolScope,
    writes: &[ebb_ir::op::InPlace],
    most: &DimExpr,
) -> Option<DimExpr> {
    let mut held = DimExpr::zero();
    for (j, t) in g.node(id).outputs.iter().enumerate() {
        if !writes.iter().any(|w| w.result == j) {
            held = held.checked_add(&t.size_bytes()).ok()?;
        }
    }
    let beyond = scope.normalize(&most.checked_sub(&held).ok()?);
    match DimExpr::max_of(&[DimExpr::zero(), beyond]) {
        Some(Ok(e)) => Some(scope.normalize(&e)),
        _ => None,
    }
}

/// [`SymbolScope::normalize`] under one scope, each distinct expression normalized once: the
/// region transients of a graph of repeated layers are a few distinct expressions repeated
/// (the same fusion body's tile bytes, the same in-place saving), and normalizing one proves
/// facts about it.
pub(crate) struct Normalizer<'a> {
    /// The scope normalized under.
    pub(crate) scope: &'a SymbolScope,
    /// Expression -> its normal form.
    memo: std::collections::HashMap<DimExpr, DimExpr>,
}

impl<'a> Normalizer<'a> {
    /// An empty memo under `scope`.
    pub(crate) fn new(scope: &'a SymbolScope) -> Self {
        Normalizer {
            scope,
            memo: std::collections::HashMap::new(),
        }
    }

    /// `scope.normalize(&e)`, from the memo when `e` was normalized before.
    pub(crate) fn normalize(&mut self, e: DimExpr) -> DimExpr {
        if let Some(n) = self.memo.get(&e) {
            return n.clone();
        }
        let n = self.scope.normalize(&e);
        self.memo.insert(e, n.clone());
        n
    }
}
