//! `fusion` (loop or input fusion, made by `ebb_passes::fuse`): the region is evaluated chunk
//! by chunk over the flat (row-major) iteration space, [`ebb_ir::op::FUSION_CHUNK`] elements
//! at a time, so that no internal value of the group is ever materialized whole. Per chunk:
//! aligned inputs are copied for the chunk's range (read in place when one chunk covers them),
//! members run with the ordinary kernels on chunk-sized tensors (`reshape` and unit-dimension
//! broadcasts are the identity on a chunk, expanding broadcasts, `iota` and splat constants
//! are computed from the flat indices), and the results' chunks are written into the whole
//! results. An input fusion's chunks are whole rows of its `reduce` root's operand; the root
//! reduces each chunk's rows with the ordinary `reduce` kernel and its rows of the result are
//! written in place. A column reduction's root instead combines each chunk's rows, in order,
//! into one accumulator per result element ([`super::reduce::ColumnAcc`]), written out after
//! the last chunk.
//!
//! The preparation of a group at the bindings ([`Interp`], `fusion/plan.rs`) is made at its
//! first run and kept with the step's launch under the JIT executor (the groups the code
//! generator declines run here at every step); the reference executor prepares at every run.
//!
//! Invariant: the results equal, bit for bit, what running the region's ops one by one on whole
//! tensors gives (every member is elementwise on the flat index; the `reduce` kernel combines
//! each output element's inputs in an order fixed by its row alone), and the transient bytes
//! reported are [`ebb_ir::op::fusion_tile_bytes`] at the bindings, the planner's charge.

mod plan;

pub(crate) use plan::{index_map, Interp};

use super::{elementwise, Ctx, Executor, KernelFailure, OutType};
use crate::buffer::Buf;
use crate::error::OpError;
use crate::tensor::{Data, Tensor};
use ebb_ir::{Bindings, Graph, Node, Op};
use plan::{How, Step};
use std::cell::Cell;

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
    // The step's launch keeps the preparation under the JIT executor (which made the launch
    // before declining the group); the reference executor prepares at every run.
    let kept = ctx
        .launch
        .and_then(std::sync::OnceLock::get)
        .filter(|_| ctx.executor != Executor::Reference)
        .map(super::jit::Launch::interp);
    let local;
    let interp: &Interp = match kept {
        Some(slot) => match slot.get() {
            Some(p) => p,
            None => {
                let p = plan::prepare(region, ctx)?;
                slot.get_or_init(|| p)
            }
        },
        None => {
            local = plan::prepare(region, ctx)?;
            &local
        }
    };
    run(ctx, region, interp, ops)
}

/// Runs the fusion of `ctx` prepared as `ip` on `ops`.
fn run(
    ctx: &Ctx,
    region: &Graph,
    ip: &Interp,
    ops: Vec<Tensor>,
) -> Result<Vec<Tensor>, KernelFailure> {
    let plan::Chunking {
        n,
        row,
        rows_per,
        rows,
        input,
    } = ip.chunking;
    let aligned = &ip.aligned;
    let steps = &ip.steps;
    for (i, t) in ops.iter().enumerate() {
        if aligned[i] && t.len() != n {
            return Err(invalid(format!("operand {i} is not of the fusion's size")));
        }
    }
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
    // A result that a member computes has every element written below (each chunk's, each
    // row's, or the column accumulators'), so it may start in its planned arena range or a
    // recycled buffer with stale contents ([`Ctx::take_result`]).
    let mut results: Vec<Data> = ctx
        .out
        .iter()
        .zip(reuse)
        .enumerate()
        .map(|(i, (o, r))| {
            let n = o.shape.iter().product();
            r.unwrap_or_else(|| match ip.writes_all {
                true => ctx.take_result(i, o.dtype, n),
                false => Data::zeros(o.dtype, n),
            })
        })
        .collect();
    // A column reduction's accumulators (its root is the last step).
    let mut columns: Option<super::reduce::ColumnAcc> = None;
    // The chunk's values by slot ([`Step`]): the inputs', then the members' results.
    let mut env: Vec<Option<Tensor>> = vec![None; ops.len() + steps.len()];
    let mut r0 = 0;
    while r0 < rows {
        let nrows = rows_per.min(rows - r0);
        let (start, len) = (r0 * row, nrows * row);
        let chunk = Chunk {
            start,
            len,
            rows: nrows,
        };
        for (i, t) in ops.iter().enumerate() {
            env[i] = Some(if !aligned[i] {
                t.clone()
            } else if let Some(o) = src_result[i] {
                let d = crate::tensor::map_same!(&results[o], v => v[start..start + len].to_vec());
                Tensor::from_parts(vec![len], d)
            } else if start == 0 && len == t.len() {
                // The whole operand is the one chunk: read in place.
                t.reshape(vec![len]).map_err(|e| invalid(e.to_string()))?
            } else {
                let d = crate::tensor::map_same!(t.data(), v => v[start..start + len].to_vec());
                Tensor::from_parts(vec![len], d)
            });
        }
        for (k, step) in steps.iter().enumerate() {
            let operands = step
                .ins
                .iter()
                .map(|&s| env[s].clone())
                .collect::<Option<Vec<Tensor>>>()
                .ok_or_else(|| invalid("a fusion member reads a value not computed"))?;
            // Drop what this member reads for the last time (the tiles of the module docs).
            for &s in &step.drops {
                env[s] = None;
            }
            if let How::Columns(m) = step.how {
                column_rows(&mut columns, m, &operands, row)?;
                continue;
            }
            let t = member(region.node(step.id), step, operands, &chunk, ctx.bindings)?;
            // A loop member's chunk lands at the chunk's elements, a reduce root's at its rows.
            let at = if input {
                r0 * (t.len() / nrows.max(1))
            } else {
                start
            };
            for &o in &step.outs {
                let dst = &mut results[o];
                if at + t.len() > dst.len() {
                    return Err(invalid("a fusion member's chunk exceeds its result"));
                }
                let ok = crate::tensor::zip_with!(dst, t.data(), d, s => d[at..at + s.len()].copy_from_slice(s));
                if ok.is_none() {
                    return Err(invalid("a fusion result changed its element type"));
                }
            }
            if step.keep {
                env[ops.len() + k] = Some(t);
            }
        }
        r0 += nrows;
    }
    drop(env);
    if let Some(root) = steps.last().filter(|s| matches!(s.how, How::Columns(_))) {
        let How::Columns(m) = root.how else {
            return Err(invalid("a column reduction without its monoid"));
        };
        // No rows at all: every result element is the init value.
        if columns.is_none() {
            let init = super::jit::init_value::<f32>(region, root.id, &ops).ok_or_else(|| {
                invalid("a column reduction's init value is not an f32 input or splat")
            })?;
            columns = super::reduce::ColumnAcc::new(m, init, row);
        }
        let acc = columns.ok_or_else(|| invalid("a logical column reduction of f32"))?;
        let data = Data::F32(Buf::from(acc.finish()));
        for &o in &root.outs {
            if results[o].len() != data.len() {
                return Err(invalid("a column reduction's result differs from its row"));
            }
            results[o] = data.clone();
        }
    }
    ctx.transient.set(ip.tile);
    Ok(results
        .into_iter()
        .zip(ctx.out)
        .map(|(d, o)| Tensor::from_parts(o.shape.as_slice(), d))
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

/// One member (`node`, prepared as `step`) on the chunk `[start, start + len)`.
fn member(
    node: &Node,
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
        How::Repeat => {
            let src = &operands[0];
            if len > 0 && src.is_empty() {
                return Err(invalid("a broadcast reads past its operand"));
            }
            let d = crate::tensor::map_same!(src.data(), v => v[..len.min(1)].repeat(len));
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
        How::Splat(made) => match made.iter().find(|t| t.len() == len) {
            Some(t) => Ok(t.clone()),
            None => match &node.op {
                Op::Constant(lit) => plan::splat(lit, node.outputs[0].dtype, len),
                _ => Err(invalid("a splat member that is not a constant")),
            },
        },
        How::Elementwise => with_ctx(node, step, b, vec![len], |c| {
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
            let mut r = with_ctx(node, step, b, out, |c| {
                super::reduce::reduce(c, dims, operands).map_err(KernelFailure::Op)
            })?;
            r.pop().ok_or_else(|| invalid("reduce without a result"))
        }
    }
}

/// Runs `f` with the kernel context of member `node` (prepared as `step`) whose one result
/// has `shape`.
fn with_ctx<R>(
    node: &Node,
    step: &Step,
    b: &Bindings,
    shape: Vec<usize>,
    f: impl FnOnce(&Ctx) -> R,
) -> R {
    let out = [OutType {
        dtype: node.outputs[0].dtype,
        shape,
    }];
    let c = Ctx {
        node,
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
        regions: &step.regions,
        overwritten: &[],
        unread: false,
        direct: &[],
    };
    f(&c)
}
