//! The checker's own dataflow facts about a scheduled graph at concrete bindings: positions,
//! points, value numbering, sizes in bytes, definition and last-use points, operands per point
//! and the transient memory of region-carrying ops.
//!
//! Part of the independent plan checker: it re-derives everything from the graph and the
//! plan's schedule and shares no code with `crate::memory` or `crate::remat` (the point of an
//! independent checker, as regalloc2's `src/checker.rs` is to its allocator).
//!
//! Residency rules re-derived here (the plan format's, see [`ebb_plan::format`]): inputs at every
//! point, donated inputs (an `aliasing_output` attribute) from point 0 to their last read,
//! other outputs from their definition to the last point, intermediates from their
//! definition to their last read; a region-carrying op with a region that holds a tensor adds,
//! at its own point, the largest over such regions of (the region's peak in its program order
//! minus its block arguments), for a `case` less the bytes of its results not written in place
//! and at least 0 (the branch's computed outputs are those results); a `fusion` op adds its tile buffers minus the operands its
//! results are written into in place ([`ebb_ir::op::in_place_writes`], the contract shared with
//! the executor), and each such operand is proved to be last read there, and not to be a graph
//! output or an input that is not donated (no read after the overwrite); so is the operand of
//! each donated block argument of a `case` branch (the branch frees it).

use super::error::CheckError;
use ebb_ir::{Bindings, Graph, NodeId, OpKind, OpPos, Point, TensorType, ValueId, ValueRef};
use petgraph::visit::NodeIndexable;
use rustc_hash::FxHashMap;

/// Facts about one graph under one schedule at one binding (see the module docs).
pub(crate) struct Derived {
    /// Number of points (at least 1).
    pub points: usize,
    /// Program-order position → is an input.
    pub is_input: Vec<bool>,
    /// Position → first value id (one extra entry at the end).
    pub base: Vec<usize>,
    /// Value id → producer position.
    pub producer: Vec<OpPos>,
    /// Value id → size in bytes.
    pub bytes: Vec<i64>,
    /// Value id → definition point.
    pub def: Vec<Point>,
    /// Value id → last resident point.
    pub last_use: Vec<Point>,
    /// Point → distinct operand value ids: `operands[op_start[p]..op_start[p + 1]]`.
    pub op_start: Vec<usize>,
    pub operands: Vec<ValueId>,
    /// Point → transient region bytes.
    pub transient: Vec<i64>,
    /// `NodeId::index()` → program-order position.
    pos_of_id: Vec<usize>,
}

impl Derived {
    /// Value ids of the results of the op at program-order position `pos`.
    pub fn results(&self, pos: OpPos) -> impl Iterator<Item = ValueId> + Clone {
        let pos = pos.index();
        ValueId::new(self.base[pos]).upto(ValueId::new(self.base[pos + 1]))
    }

    /// The value id of `v` (a value of the graph: it comes from an operand edge).
    pub fn value_of(&self, v: ValueRef) -> ValueId {
        ValueId::new(self.base[self.pos_of_id[v.node.index()]] + v.output as usize)
    }

    /// Operand value ids of the op at point `p`.
    pub fn operands_at(&self, p: Point) -> &[ValueId] {
        &self.operands[self.op_start[p.index()]..self.op_start[p.index() + 1]]
    }

    /// Resident bytes at each point without any decision, and the bytes of the inputs.
    pub fn baseline(&self) -> Result<(Vec<i64>, i64), CheckError> {
        let mut delta = vec![0i128; self.points + 1];
        let mut inputs = 0i128;
        for v in 0..self.bytes.len() {
            let x = i128::from(self.bytes[v]);
            delta[self.def[v].index()] += x;
            delta[self.last_use[v].index() + 1] -= x;
            if self.is_input[self.producer[v].index()] {
                inputs += x;
            }
        }
        let mut acc = 0i128;
        let mut out = Vec::with_capacity(self.points);
        for (d, &t) in delta.iter().zip(&self.transient) {
            acc += d;
            out.push(to_i64(acc + i128::from(t))?);
        }
        Ok((out, to_i64(inputs)?))
    }
}

fn to_i64(x: i128) -> Result<i64, CheckError> {
    i64::try_from(x).map_err(|_| CheckError::Overflow)
}

/// Bytes of a tensor of type `t` at `b`.
pub(crate) fn tensor_bytes(t: &TensorType, b: &Bindings) -> Result<i64, ebb_ir::dim::DimError> {
    let mut n: i64 = t.dtype.size_bytes() as i64;
    for d in &t.shape {
        n = n
            .checked_mul(d.eval(b)?)
            .ok_or(ebb_ir::dim::DimError::Overflow)?;
    }
    Ok(n)
}

/// Derives the facts of `g` under `schedule` (program-order positions of the non-input ops, in
/// execution order) at `b`.
///
/// # Errors
/// [`CheckError::Schedule`] when the schedule is not a topological permutation of the
/// non-input ops; [`CheckError::Size`] when a size does not evaluate.
pub(crate) fn derive(g: &Graph, schedule: &[OpPos], b: &Bindings) -> Result<Derived, CheckError> {
    let order = g.order();
    let n = order.len();
    let sched_err = |point: usize, problem: String| CheckError::Schedule {
        point: Point::new(point),
        problem,
    };
    let is_input: Vec<bool> = order
        .iter()
        .map(|&id| g.node(id).kind() == OpKind::Input)
        .collect();
    let donated: Vec<bool> = order
        .iter()
        .map(|&id| g.aliasing_output(id).is_some())
        .collect();
    let mut point_of_pos = vec![usize::MAX; n];
    for (p, pos) in schedule.iter().map(|pos| pos.index()).enumerate() {
        if pos >= n || is_input[pos] {
            return Err(sched_err(
                p,
                format!("position {pos} is not a non-input op of the graph"),
            ));
        }
        if point_of_pos[pos] != usize::MAX {
            return Err(sched_err(p, format!("position {pos} is scheduled twice")));
        }
        point_of_pos[pos] = p;
    }
    if let Some(pos) = (0..n).find(|&pos| !is_input[pos] && point_of_pos[pos] == usize::MAX) {
        return Err(sched_err(
            schedule.len(),
            format!(
                "op at position {pos} (`{}`) is never scheduled",
                g.node(order[pos]).kind()
            ),
        ));
    }
    let points = schedule.len().max(1);
    let last = points - 1;
    let mut pos_of_id = vec![usize::MAX; g.petgraph().node_bound()];
    for (pos, id) in order.iter().enumerate() {
        pos_of_id[id.index()] = pos;
    }
    let mut base = Vec::with_capacity(n + 1);
    let (mut producer, mut bytes, mut def, mut last_use) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Each distinct type's bytes evaluated once (a graph of repeated layers has few).
    let mut bytes_of_type: FxHashMap<&TensorType, i64> = FxHashMap::default();
    for (pos, &id) in order.iter().enumerate() {
        base.push(bytes.len());
        for t in &g.node(id).outputs {
            let v = bytes.len();
            let x = match bytes_of_type.get(t) {
                Some(&x) => x,
                None => {
                    let x = tensor_bytes(t, b).map_err(|source| CheckError::Size {
                        value: ValueId::new(v),
                        source,
                    })?;
                    bytes_of_type.insert(t, x);
                    x
                }
            };
            bytes.push(x);
            producer.push(OpPos::new(pos));
            let d = Point::new(if is_input[pos] { 0 } else { point_of_pos[pos] });
            def.push(d);
            // A donated input is resident until its last read (raised below from point 0).
            last_use.push(if is_input[pos] && !donated[pos] {
                Point::new(last)
            } else {
                d
            });
        }
    }
    base.push(bytes.len());
    let mut op_start = Vec::with_capacity(points + 1);
    let mut operands = Vec::new();
    let mut transient = vec![0i64; points];
    let in_place = ebb_ir::op::in_place_writes(g);
    // (point, overwritten value) of every in-place write, proved below.
    let mut overwrites: Vec<(usize, usize)> = Vec::new();
    for (p, pos) in schedule.iter().map(|pos| pos.index()).enumerate() {
        op_start.push(operands.len());
        let id = order[pos];
        let from = operands.len();
        let ins = g.operands(id);
        for &v in &ins {
            let src = pos_of_id.get(v.node.index()).copied().unwrap_or(usize::MAX);
            if src == usize::MAX || !is_input[src] && point_of_pos[src] >= p {
                return Err(sched_err(
                    p,
                    format!(
                        "`{}` at position {pos} reads {v} before it is defined",
                        g.node(id).kind()
                    ),
                ));
            }
            let w = base[src] + v.output as usize;
            operands.push(ValueId::new(w));
            if !is_input[src] || donated[src] {
                last_use[w] = last_use[w].max(Point::new(p));
            }
        }
        operands[from..].sort_unstable();
        let mut k = from;
        for i in from..operands.len() {
            if i == from || operands[i] != operands[i - 1] {
                operands[k] = operands[i];
                k += 1;
            }
        }
        operands.truncate(k);
        let writes = in_place.get(&id).map_or(&[][..], Vec::as_slice);
        transient[p] = region_transient(g, id, writes, b)?;
        // An in-place write: the result takes the operand's buffer, allocated once.
        for w in in_place.get(&id).into_iter().flatten() {
            let v = ins.get(w.operand).ok_or_else(|| {
                sched_err(
                    p,
                    format!("in-place write of missing operand {}", w.operand),
                )
            })?;
            let src = pos_of_id[v.node.index()];
            let x = base[src] + v.output as usize;
            transient[p] -= bytes[x];
            overwrites.push((p, x));
        }
        // A branch frees its donated block arguments after their last read there: their
        // operands are proved dead after the op as an overwritten value is.
        if g.node(id).op == ebb_ir::Op::Case {
            for r in &g.node(id).regions {
                for (k, &arg) in r.inputs().iter().enumerate() {
                    if r.aliasing_output(arg).is_none() {
                        continue;
                    }
                    let v = ins.get(k + 1).ok_or_else(|| {
                        sched_err(p, format!("a branch argument {k} without an operand"))
                    })?;
                    let src = pos_of_id[v.node.index()];
                    overwrites.push((p, base[src] + v.output as usize));
                }
            }
        }
    }
    op_start.resize(points + 1, operands.len());
    for o in g.outputs() {
        let pos = pos_of_id[o.node.index()];
        if !is_input[pos] {
            last_use[base[pos] + o.output as usize] = Point::new(last);
        }
    }
    // No read after an overwrite: the overwritten value is last resident at the write, and is
    // neither a graph input the caller keeps nor a graph output.
    let mut output = vec![false; bytes.len()];
    for o in g.outputs() {
        let pos = pos_of_id[o.node.index()];
        let x = base[pos] + o.output as usize;
        if x < base[pos + 1] {
            output[x] = true;
        }
    }
    for &(p, x) in &overwrites {
        let src = producer[x].index();
        let kept_input = is_input[src] && !donated[src];
        let is_output = output[x];
        if kept_input || is_output || last_use[x] != Point::new(p) {
            return Err(sched_err(
                p,
                format!(
                    "an in-place write overwrites value {x}, which is {}",
                    if kept_input {
                        "a graph input that is not donated".to_string()
                    } else if is_output {
                        "a graph output".to_string()
                    } else {
                        format!("read until point {}", last_use[x])
                    }
                ),
            ));
        }
    }
    Ok(Derived {
        points,
        is_input,
        base,
        producer,
        bytes,
        def,
        last_use,
        op_start,
        operands,
        transient,
        pos_of_id,
    })
}

/// Transient bytes of the op `id` from its regions (see the module docs); 0 without regions
/// that hold a tensor.
///
/// A `fusion` op holds its tile buffers only: the contract of [`ebb_ir::op::fusion`], shared
/// with the executor, evaluated here at the bindings; a dot-accumulate the product it computes
/// apart ([`ebb_ir::op::accumulate_product_bytes`], the same). A `case` (`writes`: its in-place writes)
/// holds what its largest branch holds beyond the results not written in place.
fn region_transient(
    g: &Graph,
    id: NodeId,
    writes: &[ebb_ir::op::InPlace],
    b: &Bindings,
) -> Result<i64, CheckError> {
    let node = g.node(id);
    if let Some(bytes) = ebb_ir::op::accumulate_product_bytes(g, id, writes) {
        return bytes.and_then(|e| e.eval(b)).map_err(CheckError::Bindings);
    }
    if let (ebb_ir::Op::Fusion(_), [region]) = (&node.op, node.regions.as_slice()) {
        return ebb_ir::op::fusion_tile_bytes(region)
            .and_then(|e| e.eval(b))
            .map_err(CheckError::Bindings);
    }
    let mut best: Option<i64> = None;
    for r in &node.regions {
        let holds_tensor = r
            .order()
            .iter()
            .any(|&n| r.node(n).outputs.iter().any(|t| t.rank() > 0));
        if !holds_tensor {
            continue;
        }
        let sched: Vec<OpPos> = (0..r.order().len())
            .filter(|&i| r.node(r.order()[i]).kind() != OpKind::Input)
            .map(OpPos::new)
            .collect();
        let d = derive(r, &sched, b)?;
        let (resident, inputs) = d.baseline()?;
        let peak = resident.iter().copied().max().unwrap_or(0);
        let t = peak.checked_sub(inputs).ok_or(CheckError::Overflow)?;
        best = Some(best.map_or(t, |x: i64| x.max(t)));
    }
    match best {
        Some(most) if node.op == ebb_ir::Op::Case => {
            let mut held = 0i64;
            for (j, t) in node.outputs.iter().enumerate() {
                if !writes.iter().any(|w| w.result == j) {
                    let x = t.size_bytes().eval(b).map_err(CheckError::Bindings)?;
                    held = held.checked_add(x).ok_or(CheckError::Overflow)?;
                }
            }
            Ok(most.checked_sub(held).ok_or(CheckError::Overflow)?.max(0))
        }
        _ => Ok(best.unwrap_or(0)),
    }
}
