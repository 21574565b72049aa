//! The chunked interpreter's preparation of one `fusion` at the bindings ([`Interp`]): the
//! chunking of the iteration space, which inputs are read chunk by chunk, and per member its
//! operand slots, the slots it reads for the last time, the results it is, and how it computes
//! a chunk (index maps, splat chunks, a reduce root's renumbered dimensions).
//!
//! Everything here depends on the region and the bindings (and the op's result types at them)
//! only, never on the operands, so that the JIT executor keeps one preparation with a step's
//! launch ([`super::super::jit::Launch`]) and reuses it at every run of that step; a program
//! at other bindings has steps of its own, and so preparations of its own.

use super::super::layout::strides_of;
use super::super::{Ctx, KernelFailure, Prepared};
use super::{invalid, shape_at};
use crate::tensor::Tensor;
use ebb_ir::op::fusion::{
    aligned_inputs, member_last_uses, reads_aligned, reduce_root_columns, reduce_root_prefix,
};
use ebb_ir::op::{fusion_tile_bytes, FUSION_CHUNK};
use ebb_ir::{Bindings, Graph, NodeId, Op, ValueRef};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// How the iteration space is cut into chunks, at the bindings.
pub(super) struct Chunking {
    /// Elements of the iteration space.
    pub n: usize,
    /// Elements per row (1 for a loop fusion: any cut is a row boundary).
    pub row: usize,
    /// Rows per chunk (at least 1).
    pub rows_per: usize,
    /// Rows of the iteration space.
    pub rows: usize,
    /// Whether this is an input fusion (a `reduce` root).
    pub input: bool,
}

impl Chunking {
    /// Elements of the first chunk and of the last one (equal when every chunk is full).
    fn chunk_lens(&self) -> (usize, usize) {
        let full = self.rows_per.min(self.rows) * self.row;
        match self.rows % self.rows_per.max(1) {
            0 => (full, full),
            tail => (full, tail * self.row),
        }
    }
}

/// The chunking of a loop fusion (chunks of [`FUSION_CHUNK`] elements) or of an input fusion
/// (whole rows of the reduce's operand, as many as fit, at least one).
fn chunking(region: &Graph, ctx: &Ctx) -> Result<Chunking, KernelFailure> {
    let chunk = FUSION_CHUNK as usize;
    let root = region.order().last().copied();
    let prefix = |r| reduce_root_prefix(region, r).or_else(|| reduce_root_columns(region, r));
    if let Some((root, k)) = root.and_then(|r| Some((r, prefix(r)?))) {
        let operand = region
            .operands(root)
            .first()
            .copied()
            .ok_or_else(|| invalid("reduce without an operand"))?;
        let shape = shape_at(&region.value_type(operand).shape, ctx.bindings)?;
        let row: usize = shape[k..].iter().product();
        return Ok(Chunking {
            n: shape.iter().product(),
            row,
            rows_per: (chunk / row.max(1)).max(1),
            // One row per index of the kept (row reduction) or reduced (column reduction)
            // prefix; empty rows still yield the init value.
            rows: shape[..k].iter().product(),
            input: true,
        });
    }
    let n: usize = ctx.out.first().map_or(0, |o| o.shape.iter().product());
    if ctx
        .out
        .iter()
        .any(|o| o.shape.iter().product::<usize>() != n)
    {
        return Err(invalid("loop fusion results differ in element count"));
    }
    Ok(Chunking {
        n,
        row: 1,
        rows_per: chunk,
        rows: n,
        input: false,
    })
}

/// How a member computes one chunk.
pub(super) enum How {
    /// `reshape`, or a broadcast that only adds unit dimensions: the operand's chunk.
    Identity,
    /// An expanding `broadcast_in_dim` of a whole operand: for each result dimension, its
    /// extent and the operand stride it maps to (0 where the operand repeats).
    Broadcast(Vec<(usize, usize)>),
    /// An expanding `broadcast_in_dim` that repeats one element (every stride 0).
    Repeat,
    /// `iota` along a dimension of the result: per result dimension its extent and 1 for the
    /// iota dimension (0 elsewhere), as for [`How::Broadcast`]; and the element type.
    Iota(Vec<(usize, usize)>, ebb_ir::DType),
    /// A splat `constant`: its one value repeated over a whole chunk and over the last
    /// chunk, made once where a chunk is at most [`FUSION_CHUNK`] elements (else per chunk).
    Splat(Vec<Tensor>),
    /// An elementwise op, run by its ordinary kernel on chunk tensors.
    Elementwise,
    /// The `reduce` root of an input fusion, run by its ordinary kernel on a chunk of rows
    /// reshaped to `[rows] ++ rest`: the dimensions it reduces renumbered for that shape,
    /// `rest` (the operand's dimensions after the kept prefix) and the kept dimensions of
    /// `rest`.
    Reduce {
        dims: Vec<i64>,
        rest: Vec<usize>,
        kept_rest: Vec<usize>,
    },
    /// The `reduce` root of a column input fusion ([`reduce_root_columns`]), folding each
    /// chunk's rows into the accumulators with its monoid.
    Columns(super::super::region::Monoid),
}

/// A member prepared for the chunk loop. Slots number the region's values: input `i` is slot
/// `i`, member `k`'s result is slot `inputs + k`.
pub(super) struct Step {
    pub id: NodeId,
    /// Operand slots.
    pub ins: Vec<usize>,
    /// Slots read here for the last time (dropped once the operands are taken).
    pub drops: Vec<usize>,
    /// Region output indices this member's result is.
    pub outs: Vec<usize>,
    /// Whether a later member reads the result.
    pub keep: bool,
    pub how: How,
    /// The member's regions (a `reduce` root's body) prepared at their first run
    /// ([`Ctx::regions`]).
    pub regions: Vec<OnceLock<Arc<Prepared>>>,
}

/// A `fusion` prepared for the chunked interpreter at the bindings (see the module docs).
pub(crate) struct Interp {
    pub(super) chunking: Chunking,
    /// Per region input: whether it is read chunk by chunk (else whole).
    pub(super) aligned: Vec<bool>,
    pub(super) steps: Vec<Step>,
    /// Planned tile bytes at the bindings ([`fusion_tile_bytes`]).
    pub(super) tile: u64,
    /// Whether every region output is a member's result (written whole by the chunk loop).
    pub(super) writes_all: bool,
}

/// Prepares the fusion region `region` of `ctx`'s op at `ctx`'s bindings and result types.
///
/// # Errors
/// A kernel failure when the region is not a loop or input fusion the interpreter runs, or a
/// size cannot be evaluated at the bindings.
pub(super) fn prepare(region: &Graph, ctx: &Ctx) -> Result<Interp, KernelFailure> {
    let chunking = chunking(region, ctx)?;
    let aligned = aligned_inputs(region);
    let (members, last) = member_last_uses(region);
    if chunking.input
        && region
            .outputs()
            .iter()
            .any(|v| Some(&v.node) != members.last())
    {
        return Err(invalid(
            "an input fusion's only result is its reduce root's",
        ));
    }
    let inputs = region.inputs();
    let mut slot_of: HashMap<ValueRef, usize> = HashMap::new();
    for (i, &id) in inputs.iter().enumerate() {
        slot_of.insert(ValueRef::new(id, 0), i);
    }
    for (k, &id) in members.iter().enumerate() {
        slot_of.insert(ValueRef::new(id, 0), inputs.len() + k);
    }
    let mut steps = Vec::with_capacity(members.len());
    for (k, &id) in members.iter().enumerate() {
        let operands = region.operands(id);
        let ins = operands
            .iter()
            .map(|v| {
                slot_of
                    .get(v)
                    .copied()
                    .ok_or_else(|| invalid("a fusion member reads a value outside its region"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut drops: Vec<usize> = operands
            .iter()
            .zip(&ins)
            .filter(|(v, _)| last.get(v) == Some(&k))
            .map(|(_, &s)| s)
            .collect();
        drops.dedup();
        let v = ValueRef::new(id, 0);
        let outs = region
            .outputs()
            .iter()
            .enumerate()
            .filter(|(_, o)| **o == v)
            .map(|(o, _)| o)
            .collect();
        steps.push(Step {
            id,
            ins,
            drops,
            outs,
            keep: last.get(&v).is_some_and(|&l| l > k),
            how: how(region, id, ctx.bindings, &chunking)?,
            regions: region
                .node(id)
                .regions
                .iter()
                .map(|_| OnceLock::new())
                .collect(),
        });
    }
    let tile = fusion_tile_bytes(region)
        .and_then(|e| e.eval(ctx.bindings))
        .map_err(|e| invalid(e.to_string()))?;
    let writes_all = (0..region.outputs().len()).all(|o| steps.iter().any(|s| s.outs.contains(&o)));
    Ok(Interp {
        chunking,
        aligned,
        steps,
        tile: u64::try_from(tile).unwrap_or(0),
        writes_all,
    })
}

/// How member `id` of `region` computes a chunk at the bindings (shapes, strides, index
/// maps, splat chunks).
fn how(
    region: &Graph,
    id: NodeId,
    b: &Bindings,
    chunking: &Chunking,
) -> Result<How, KernelFailure> {
    let node = region.node(id);
    let ins = region.operands(id);
    Ok(match &node.op {
        Op::Reshape(_) => How::Identity,
        Op::BroadcastInDim(_) if reads_aligned(region, id, 0) => How::Identity,
        Op::BroadcastInDim(_) => {
            let map = index_map(region, id, b)?;
            if map.iter().all(|&(_, s)| s == 0) {
                How::Repeat
            } else {
                How::Broadcast(map)
            }
        }
        Op::Iota(spec) => How::Iota(index_map(region, id, b)?, spec.dtype),
        Op::Constant(lit) if lit.splat => {
            let (full, last) = chunking.chunk_lens();
            let mut lens = vec![full, last];
            lens.dedup();
            lens.retain(|&n| n <= FUSION_CHUNK as usize);
            let dtype = node.outputs[0].dtype;
            How::Splat(
                lens.into_iter()
                    .map(|n| splat(lit, dtype, n))
                    .collect::<Result<_, _>>()?,
            )
        }
        _ if node.kind().is_elementwise() => How::Elementwise,
        Op::Reduce(_) if reduce_root_columns(region, id).is_some() => {
            let body = node
                .regions
                .first()
                .ok_or_else(|| invalid("reduce without a body"))?;
            match super::super::region::recognize(body) {
                super::super::region::Body::Monoid(m) => How::Columns(m),
                _ => return Err(invalid("a column reduction whose body is not a monoid")),
            }
        }
        Op::Reduce(dims) => {
            let k = reduce_root_prefix(region, id)
                .ok_or_else(|| invalid("a reduce that cannot root an input fusion"))?;
            let src = ins
                .first()
                .map(|v| shape_at(&region.value_type(*v).shape, b))
                .ok_or_else(|| invalid("reduce without an operand"))??;
            let rest = src[k..].to_vec();
            let kept_rest = (k..src.len())
                .filter(|d| !dims.contains(&(*d as i64)))
                .map(|d| src[d])
                .collect();
            How::Reduce {
                dims: dims.iter().map(|&d| d - k as i64 + 1).collect(),
                rest,
                kept_rest,
            }
        }
        _ => {
            return Err(invalid(format!(
                "`{}` cannot be a loop fusion member",
                node.kind().name()
            )))
        }
    })
}

/// The index map of an expanding `broadcast_in_dim` or an `iota` member `id` of `region` at
/// the bindings: per result dimension its extent and the operand stride it maps to (0 where
/// the operand repeats, including broadcast operand dimensions of size 1); for an `iota`, 1
/// for the iota dimension and 0 elsewhere (the index along it is the "operand" offset).
///
/// # Errors
/// A kernel failure when `id` is neither, or its dimensions do not evaluate.
pub(crate) fn index_map(
    region: &Graph,
    id: NodeId,
    b: &Bindings,
) -> Result<Vec<(usize, usize)>, KernelFailure> {
    let node = region.node(id);
    let full = shape_at(&node.outputs[0].shape, b)?;
    let mut map: Vec<(usize, usize)> = full.iter().map(|&n| (n, 0)).collect();
    match &node.op {
        Op::BroadcastInDim(bc) => {
            let src = region
                .operands(id)
                .first()
                .map(|v| shape_at(&region.value_type(*v).shape, b))
                .ok_or_else(|| invalid("broadcast_in_dim without an operand"))??;
            let ist = strides_of(&src);
            for (k, &d) in bc.dims.iter().enumerate() {
                let slot = usize::try_from(d)
                    .ok()
                    .and_then(|d| map.get_mut(d))
                    .ok_or_else(|| invalid("bad broadcast dimension"))?;
                // A broadcast operand dimension of size 1 repeats its element.
                slot.1 = if src.get(k) == Some(&1) { 0 } else { ist[k] };
            }
        }
        Op::Iota(spec) => {
            let d = usize::try_from(spec.dimension)
                .ok()
                .filter(|&d| d < full.len())
                .ok_or_else(|| invalid("bad iota dimension"))?;
            // The index along `d` is the offset of a broadcast whose only stride is `d`'s.
            map[d].1 = 1;
        }
        _ => {
            return Err(invalid(
                "an index map of a member that is not a broadcast or iota",
            ))
        }
    }
    Ok(map)
}

/// `len` copies of splat literal `lit` as `dtype`.
pub(super) fn splat(
    lit: &ebb_ir::Literal,
    dtype: ebb_ir::DType,
    len: usize,
) -> Result<Tensor, KernelFailure> {
    let t = Tensor::from_literal(lit, vec![len]).map_err(|e| invalid(e.to_string()))?;
    Ok(if t.dtype() == dtype {
        t
    } else {
        Tensor::from_parts(vec![len], t.data().convert(dtype))
    })
}
