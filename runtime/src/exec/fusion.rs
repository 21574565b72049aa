//! `fusion` (loop or input fusion, made by `ebb_passes::fuse`): the region is evaluated chunk by chunk
//! over the flat (row-major) iteration space, [`FUSION_CHUNK`] elements at a time, so that no
//! internal value of the group is ever materialized whole. Per chunk: aligned inputs are
//! copied for the chunk's range, members run with the ordinary kernels on chunk-sized
//! tensors (`reshape` and unit-dimension broadcasts are the identity on a chunk, expanding
//! broadcasts, `iota` and splat constants are computed from the flat indices), and the results' chunks are
//! written into the whole results. An input fusion's chunks are whole rows of its `reduce`
//! root's operand; the root reduces each chunk's rows with the ordinary `reduce` kernel and
//! its rows of the result are written in place. A column reduction's root instead combines
//! each chunk's rows, in order, into one accumulator per result element
//! ([`super::reduce::ColumnAcc`]), written out after the last chunk.
//!
//! Invariant: the results equal, bit for bit, what running the region's ops one by one on whole
//! tensors gives (every member is elementwise on the flat index; the `reduce` kernel combines
//! each output element's inputs in an order fixed by its row alone), and the transient bytes
//! reported are [`fusion_tile_bytes`] at the bindings, the planner's charge.

use super::layout::strides_of;
use super::{elementwise, Ctx, KernelFailure, OutType};
use crate::buffer::Buf;
use crate::error::OpError;
use crate::tensor::{Data, Tensor};
use ebb_ir::op::fusion::{
    aligned_inputs, member_last_uses, reads_aligned, reduce_root_columns, reduce_root_prefix,
};
use ebb_ir::op::{fusion_tile_bytes, FUSION_CHUNK};
use ebb_ir::{Bindings, Graph, Node, Op, ValueRef};
use std::cell::Cell;
use std::collections::HashMap;

pub(super) fn invalid(msg: impl Into<String>) -> KernelFailure {
    KernelFailure::Op(OpError::Invalid(msg.into()))
}

/// Concrete shape of a region value's type at the bindings.
pub(super) fn shape_at(
    shape: &[ebb_ir::DimExpr],
    b: &Bindings,
) -> Result<Vec<usize>, KernelFailure> {
    shape
        .iter()
        .map(|d| {
            let v = d.eval(b).map_err(|e| invalid(e.to_string()))?;
            usize::try_from(v).map_err(|_| invalid(format!("negative dimension {v}")))
        })
        .collect()
}

/// How the iteration space is cut into chunks, at the bindings.
struct Chunking {
    /// Elements of the iteration space.
    n: usize,
    /// Elements per row (1 for a loop fusion: any cut is a row boundary).
    row: usize,
    /// Rows per chunk (at least 1).
    rows_per: usize,
    /// Rows of the iteration space.
    rows: usize,
    /// Whether this is an input fusion (a `reduce` root).
    input: bool,
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

/// `fusion` of either kind (see the module docs).
pub(crate) fn fusion(ctx: &Ctx, ops: Vec<Tensor>) -> Result<Vec<Tensor>, KernelFailure> {
    let [region] = ctx.node.regions.as_slice() else {
        return Err(invalid("fusion needs one region"));
    };
    if ops.len() != region.inputs().len() || ctx.out.len() != region.outputs().len() {
        return Err(invalid(
            "fusion operands or results differ from its region's",
        ));
    }
    let Chunking {
        n,
        row,
        rows_per,
        rows,
        input,
    } = chunking(region, ctx)?;
    let aligned = aligned_inputs(region);
    let (members, last) = member_last_uses(region);
    if input
        && region
            .outputs()
            .iter()
            .any(|v| Some(&v.node) != members.last())
    {
        return Err(invalid(
            "an input fusion's only result is its reduce root's",
        ));
    }
    // Region output index of each member result that is one.
    let out_of: HashMap<ValueRef, Vec<usize>> =
        region
            .outputs()
            .iter()
            .enumerate()
            .fold(HashMap::new(), |mut m, (k, v)| {
                m.entry(*v).or_default().push(k);
                m
            });
    for (i, t) in ops.iter().enumerate() {
        if aligned[i] && t.len() != n {
            return Err(invalid(format!("operand {i} is not of the fusion's size")));
        }
    }
    // Everything that does not depend on the chunk, prepared once per op execution.
    let steps = members
        .iter()
        .map(|&id| prepare(region, id, ctx.bindings))
        .collect::<Result<Vec<_>, _>>()?;
    // In-place writes: a result takes the buffer of an operand this op alone holds; that
    // operand's chunks are then read from the result buffer, each before it is overwritten.
    let mut ops = ops;
    let mut reuse: Vec<Option<Data>> = vec![None; ctx.out.len()];
    let mut src_result: Vec<Option<usize>> = vec![None; ops.len()];
    // (The planner writes in place only into loop fusions, whose results have the
    // iteration space's size.)
    for w in ctx.in_place.iter().filter(|_| !input) {
        let (Some(t), Some(o)) = (ops.get_mut(w.operand), ctx.out.get(w.result)) else {
            continue;
        };
        if !aligned[w.operand] || t.dtype() != o.dtype || reuse[w.result].is_some() {
            continue;
        }
        let held = std::mem::replace(t, Tensor::scalar(crate::tensor::Scalar::I1(false)));
        match held.try_into_data() {
            Ok(d) => {
                reuse[w.result] = Some(d);
                src_result[w.operand] = Some(w.result);
            }
            Err(back) => *t = back,
        }
    }
    let mut results: Vec<Data> = ctx
        .out
        .iter()
        .zip(reuse)
        .map(|(o, r)| r.unwrap_or_else(|| Data::zeros(o.dtype, o.shape.iter().product())))
        .collect();
    // A column reduction's accumulators (its root is the last step).
    let mut columns: Option<super::reduce::ColumnAcc> = None;
    let mut r0 = 0;
    while r0 < rows {
        let nrows = rows_per.min(rows - r0);
        let (start, len) = (r0 * row, nrows * row);
        let chunk = Chunk {
            start,
            len,
            rows: nrows,
        };
        let mut env: HashMap<ValueRef, Tensor> = HashMap::new();
        for (i, (&id, t)) in region.inputs().iter().zip(&ops).enumerate() {
            let v = if aligned[i] {
                let data = match src_result[i] {
                    Some(o) => &results[o],
                    None => t.data(),
                };
                let d = crate::tensor::map_same!(data, v => v[start..start + len].to_vec());
                Tensor::from_parts(vec![len], d)
            } else {
                t.clone()
            };
            env.insert(ValueRef::new(id, 0), v);
        }
        for (k, step) in steps.iter().enumerate() {
            let operands: Vec<Tensor> = step.ins.iter().map(|v| env[v].clone()).collect();
            // Drop what this member reads for the last time (the tiles of the module docs).
            for v in &step.ins {
                if last.get(v) == Some(&k) {
                    env.remove(v);
                }
            }
            if let How::Columns(m) = step.how {
                column_rows(&mut columns, m, &operands, row)?;
                continue;
            }
            let t = member(step, operands, &chunk, ctx.bindings)?;
            let v = ValueRef::new(step.id, 0);
            // A loop member's chunk lands at the chunk's elements, a reduce root's at its rows.
            let at = if input {
                r0 * (t.len() / nrows.max(1))
            } else {
                start
            };
            for &o in out_of.get(&v).into_iter().flatten() {
                let dst = &mut results[o];
                if at + t.len() > dst.len() {
                    return Err(invalid("a fusion member's chunk exceeds its result"));
                }
                let ok = crate::tensor::zip_with!(dst, t.data(), d, s => d[at..at + s.len()].copy_from_slice(s));
                if ok.is_none() {
                    return Err(invalid("a fusion result changed its element type"));
                }
            }
            if last.get(&v).is_some_and(|&l| l > k) {
                env.insert(v, t);
            }
        }
        r0 += nrows;
    }
    if let Some(How::Columns(m)) = steps.last().map(|s| &s.how) {
        // No rows at all: every result element is the init value.
        if columns.is_none() {
            let root = steps[steps.len() - 1].id;
            let init = super::jit::init_value::<f32>(region, root, &ops).ok_or_else(|| {
                invalid("a column reduction's init value is not an f32 input or splat")
            })?;
            columns = super::reduce::ColumnAcc::new(*m, init, row);
        }
        let acc = columns.ok_or_else(|| invalid("a logical column reduction of f32"))?;
        let v = ValueRef::new(steps[steps.len() - 1].id, 0);
        let data = Data::F32(Buf::from(acc.finish()));
        for &o in out_of.get(&v).into_iter().flatten() {
            if results[o].len() != data.len() {
                return Err(invalid("a column reduction's result differs from its row"));
            }
            results[o] = data.clone();
        }
    }
    let tile = fusion_tile_bytes(region)
        .and_then(|e| e.eval(ctx.bindings))
        .map_err(|e| invalid(e.to_string()))?;
    ctx.transient.set(u64::try_from(tile).unwrap_or(0));
    Ok(results
        .into_iter()
        .zip(ctx.out)
        .map(|(d, o)| Tensor::from_parts(o.shape.clone(), d))
        .collect())
}

/// The part of the iteration space one pass of the chunk loop covers.
struct Chunk {
    /// First element.
    start: usize,
    /// Elements.
    len: usize,
    /// Whole rows (an input fusion's; `len` for a loop fusion).
    rows: usize,
}

/// How a member computes one chunk.
enum How {
    /// `reshape`, or a broadcast that only adds unit dimensions: the operand's chunk.
    Identity,
    /// An expanding `broadcast_in_dim` of a whole operand: for each result dimension, its
    /// extent and the operand stride it maps to (0 where the operand repeats).
    Broadcast(Vec<(usize, usize)>),
    /// `iota` along a dimension of the result: per result dimension its extent and 1 for the
    /// iota dimension (0 elsewhere), as for [`How::Broadcast`]; and the element type.
    Iota(Vec<(usize, usize)>, ebb_ir::DType),
    /// A splat `constant`: its one value repeated over a whole chunk, made once.
    Splat(Tensor),
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
    Columns(super::region::Monoid),
}

/// Folds a chunk of whole rows (operand 0, `f32`) into a column reduction's accumulators,
/// made at the first chunk from the init value (operand 1, element 0).
fn column_rows(
    acc: &mut Option<super::reduce::ColumnAcc>,
    m: super::region::Monoid,
    operands: &[Tensor],
    row: usize,
) -> Result<(), KernelFailure> {
    let (Some(Data::F32(x)), Some(Data::F32(init))) = (
        operands.first().map(Tensor::data),
        operands.get(1).map(Tensor::data),
    ) else {
        return Err(invalid("a column reduction of other than f32"));
    };
    if acc.is_none() {
        let init = *init.first().ok_or_else(|| invalid("empty init value"))?;
        *acc = super::reduce::ColumnAcc::new(m, init, row);
    }
    let acc = acc
        .as_mut()
        .ok_or_else(|| invalid("a logical column reduction of f32"))?;
    if x.len() % row.max(1) != 0 {
        return Err(invalid("a column reduction's chunk is not whole rows"));
    }
    acc.fold_rows(x);
    Ok(())
}

/// A member prepared for the chunk loop: its node, operands and [`How`].
struct Step<'g> {
    id: ebb_ir::NodeId,
    node: &'g Node,
    ins: Vec<ValueRef>,
    how: How,
}

/// Prepares member `id` of `region` at the bindings (shapes, strides, index maps).
fn prepare<'g>(
    region: &'g Graph,
    id: ebb_ir::NodeId,
    b: &Bindings,
) -> Result<Step<'g>, KernelFailure> {
    let node = region.node(id);
    let ins = region.operands(id);
    let how = match &node.op {
        Op::Reshape(_) => How::Identity,
        Op::BroadcastInDim(_) if reads_aligned(region, id, 0) => How::Identity,
        Op::BroadcastInDim(_) => How::Broadcast(index_map(region, id, b)?),
        Op::Iota(spec) => How::Iota(index_map(region, id, b)?, spec.dtype),
        Op::Constant(lit) if lit.splat => {
            How::Splat(splat(lit, node.outputs[0].dtype, FUSION_CHUNK as usize)?)
        }
        _ if node.kind().is_elementwise() => How::Elementwise,
        Op::Reduce(_) if reduce_root_columns(region, id).is_some() => {
            let body = node
                .regions
                .first()
                .ok_or_else(|| invalid("reduce without a body"))?;
            match super::region::recognize(body) {
                super::region::Body::Monoid(m) => How::Columns(m),
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
    };
    Ok(Step { id, node, ins, how })
}

/// The index map of an expanding `broadcast_in_dim` or an `iota` member `id` of `region` at
/// the bindings: per result dimension its extent and the operand stride it maps to (0 where
/// the operand repeats, including broadcast operand dimensions of size 1); for an `iota`, 1
/// for the iota dimension and 0 elsewhere (the index along it is the "operand" offset).
pub(super) fn index_map(
    region: &Graph,
    id: ebb_ir::NodeId,
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

/// Operand offsets of the flat result elements `[start, start + len)` of a broadcast with
/// per-result-dimension `(extent, operand stride)` `map`: one division per dimension for the
/// first element, then an odometer (row-major increments, carrying into outer dimensions).
fn broadcast_offsets(map: &[(usize, usize)], start: usize, len: usize) -> Vec<usize> {
    let mut idx = vec![0usize; map.len()];
    let mut rest = start;
    for (d, &(n, _)) in map.iter().enumerate().rev() {
        idx[d] = rest % n.max(1);
        rest /= n.max(1);
    }
    let mut off: usize = idx.iter().zip(map).map(|(&i, &(_, s))| i * s).sum();
    let mut out = Vec::with_capacity(len);
    for _ in 0..len {
        out.push(off);
        for d in (0..map.len()).rev() {
            let (n, s) = map[d];
            idx[d] += 1;
            off += s;
            if idx[d] < n {
                break;
            }
            off -= s * n;
            idx[d] = 0;
        }
    }
    out
}

/// `len` copies of splat literal `lit` as `dtype`.
fn splat(lit: &ebb_ir::Literal, dtype: ebb_ir::DType, len: usize) -> Result<Tensor, KernelFailure> {
    let t = Tensor::from_literal(lit, vec![len]).map_err(|e| invalid(e.to_string()))?;
    Ok(if t.dtype() == dtype {
        t
    } else {
        Tensor::from_parts(vec![len], t.data().convert(dtype))
    })
}

/// One member on the chunk `[start, start + len)`.
fn member(
    step: &Step,
    mut operands: Vec<Tensor>,
    chunk: &Chunk,
    b: &Bindings,
) -> Result<Tensor, KernelFailure> {
    let &Chunk { start, len, rows } = chunk;
    match &step.how {
        How::Identity => Ok(operands[0].clone()),
        How::Broadcast(map) => {
            let src = &operands[0];
            let idx = broadcast_offsets(map, start, len);
            if idx.iter().any(|&i| i >= src.len()) {
                return Err(invalid("a broadcast reads past its operand"));
            }
            let d = crate::tensor::map_same!(src.data(), v => idx.iter().map(|&i| v[i]).collect::<Vec<_>>());
            Ok(Tensor::from_parts(vec![len], d))
        }
        How::Iota(map, dtype) => {
            let v: Vec<i64> = broadcast_offsets(map, start, len)
                .into_iter()
                .map(|i| i as i64)
                .collect();
            Ok(Tensor::from_parts(
                vec![len],
                Data::I64(Buf::from(v)).into_dtype(*dtype),
            ))
        }
        How::Splat(full) if full.len() == len => Ok(full.clone()),
        How::Splat(_) => match &step.node.op {
            Op::Constant(lit) => splat(lit, step.node.outputs[0].dtype, len),
            _ => Err(invalid("a splat member that is not a constant")),
        },
        How::Elementwise => with_ctx(step, b, vec![len], |c| {
            elementwise::run(c, operands).map_err(KernelFailure::Op)
        }),
        How::Columns(_) => Err(invalid("a column reduction is folded, not run per chunk")),
        How::Reduce {
            dims,
            rest,
            kept_rest,
        } => {
            let shape: Vec<usize> = std::iter::once(rows).chain(rest.iter().copied()).collect();
            let x = operands
                .first()
                .ok_or_else(|| invalid("reduce without an operand"))?
                .reshape(shape)
                .map_err(|e| invalid(e.to_string()))?;
            operands[0] = x;
            let out = std::iter::once(rows)
                .chain(kept_rest.iter().copied())
                .collect();
            let mut r = with_ctx(step, b, out, |c| {
                super::reduce::reduce(c, dims, operands).map_err(KernelFailure::Op)
            })?;
            r.pop().ok_or_else(|| invalid("reduce without a result"))
        }
    }
}

/// Runs `f` with the kernel context of member `step` whose one result has `shape`.
fn with_ctx<R>(step: &Step, b: &Bindings, shape: Vec<usize>, f: impl FnOnce(&Ctx) -> R) -> R {
    let out = [OutType {
        dtype: step.node.outputs[0].dtype,
        shape,
    }];
    let c = Ctx {
        node: step.node,
        out: &out,
        bindings: b,
        transient: Cell::new(0),
        in_place: &[],
        held: &[],
        executor: super::Executor::Reference,
        pool: super::pool::BufferPool::none(),
        memo: None,
        slots: None,
        launch: None,
        regions: &[],
    };
    f(&c)
}
