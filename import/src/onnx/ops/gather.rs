//! Indexing ops: `Gather`, `GatherElements`, `GatherND`, `ScatterElements`, `ScatterND`,
//! `OneHot`, and `com.microsoft` `GatherGrad`/`GatherNDGrad`, lowered to StableHLO
//! `gather`/`scatter` (StableHLO spec, sections "gather" and "scatter"). The element-wise
//! forms use the batching dimensions of `gather`/`scatter` (every dimension but the axis), so
//! no index tensor is materialized.
//!
//! ONNX indices may be negative (counting from the end of the axis); they are wrapped with a
//! `select` before indexing, except when known at import time.

use super::super::ctx::{norm_axis, Cx, NodeAttrs, Val, R};
use super::super::proto::NodeProto;
use super::{one, symbolic, Lower};
use ebb_ir::op::{GatherDims, ScatterDims, SliceSpec};
use ebb_ir::{DType, DimExpr, Graph, Op, Relation, TensorType, ValueRef};

/// The ai.onnx ops this module lowers, by op type.
pub(super) static OPS: &[(&str, &dyn Lower)] = &[
    ("Gather", &Gather),
    ("GatherND", &GatherNd),
    ("GatherElements", &GatherElements),
    ("ScatterElements", &ScatterElements),
    ("ScatterND", &ScatterNd),
    ("OneHot", &OneHot),
];

/// The com.microsoft ops this module lowers, by op type.
pub(super) static OPS_MS: &[(&str, &dyn Lower)] =
    &[("GatherGrad", &GatherGrad), ("GatherNDGrad", &GatherNdGrad)];

/// `idx + n` where `idx < 0` (ONNX negative indices), in `idx`'s integer type.
fn wrap_negative(cx: &mut Cx, idx: ValueRef, n: &DimExpr) -> R<ValueRef> {
    let d = cx.ty(idx).dtype;
    let zero = cx.scalar(d, 0.0);
    let neg = cx.compare(Relation::Lt, idx, zero)?;
    let nv = cx.dim_scalar(n, d)?;
    let shifted = cx.binary(Op::Add, idx, nv)?;
    cx.select(neg, shifted, idx)
}

/// `Gather(data, indices, axis)`: `out[a.., i.., b..] = data[a.., indices[i..], b..]`.
struct Gather;

impl Lower for Gather {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let dv = cx.input_val(n, 0)?;
        let iv = cx.input_val(n, 1)?;
        if let (Some(ds), Some(is)) = (&dv.s, &iv.s) {
            if let Some(ix) = is
                .ints()
                .and_then(|v| v.iter().map(|d| d.as_const()).collect::<Option<Vec<_>>>())
            {
                let a = norm_axis(cx, n.int_or("axis", 0), ds.shape.len())?;
                if let Some(s) = symbolic::gather(ds, &ix, &is.shape, a) {
                    return Ok(vec![Val::sym(s)]);
                }
            }
        }
        let known_nonneg =
            iv.s.as_ref()
                .and_then(|s| s.ints())
                .is_some_and(|v| v.iter().all(|d| d.as_const().is_some_and(|k| k >= 0)));
        let data = cx.input(n, 0)?;
        let mut idx = cx.input(n, 1)?;
        let td = cx.ty(data);
        let a = norm_axis(cx, n.int_or("axis", 0), td.rank())?;
        if !known_nonneg {
            idx = wrap_negative(cx, idx, &td.shape[a])?;
        }
        one(gather_axis(cx, data, idx, a)?)
    }
}

/// StableHLO `gather` of whole slices along `axis` at `idx` (any integer type, any rank).
pub(crate) fn gather_axis(cx: &mut Cx, data: ValueRef, idx: ValueRef, axis: usize) -> R<ValueRef> {
    let td = cx.ty(data);
    let ri = cx.ty(idx).rank();
    let r = td.rank();
    let mut sizes = td.shape.clone();
    sizes[axis] = DimExpr::constant(1);
    let offset: Vec<i64> = (0..axis as i64)
        .chain((axis + ri) as i64..(r - 1 + ri) as i64)
        .collect();
    let dims = GatherDims {
        offset_dims: offset,
        collapsed_slice_dims: vec![axis as i64],
        start_index_map: vec![axis as i64],
        index_vector_dim: ri as i64,
        slice_sizes: sizes,
        ..Default::default()
    };
    cx.emit(Op::Gather(dims), &[data, idx])
}

/// Checks that `data` and `indices` of an element-wise gather/scatter have the same rank and
/// the same sizes along every dimension but `axis` (ONNX allows smaller indices there; Ebb
/// does not yet); returns the batching dimensions (all but `axis`).
fn elementwise_batching(cx: &Cx, data: ValueRef, idx: ValueRef, axis: usize) -> R<Vec<i64>> {
    let (td, ti) = (cx.ty(data), cx.ty(idx));
    if td.rank() != ti.rank() {
        return Err(cx.err(format!(
            "indices of rank {} for data of rank {}: the ranks must be equal",
            ti.rank(),
            td.rank()
        )));
    }
    for j in (0..td.rank()).filter(|&j| j != axis) {
        if td.shape[j] != ti.shape[j] {
            return Err(cx.err(format!(
                "indices dimension {j} is {} but the data's is {}: indices smaller than the \
                 data outside the axis are not supported",
                ti.shape[j], td.shape[j]
            )));
        }
    }
    Ok((0..td.rank() as i64)
        .filter(|&j| j != axis as i64)
        .collect())
}

/// `GatherElements(data, indices, axis)`: `out[i, j, k] = data[i, indices[i, j, k], k]` for
/// `axis = 1` (ONNX operator spec), one element per index: a `gather` whose batching
/// dimensions are all but `axis`.
struct GatherElements;

impl Lower for GatherElements {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let data = cx.input(n, 0)?;
        let idx = cx.input(n, 1)?;
        let td = cx.ty(data);
        let r = td.rank();
        let a = norm_axis(cx, n.int_or("axis", 0), r)?;
        let batch = elementwise_batching(cx, data, idx, a)?;
        let idx = wrap_negative(cx, idx, &td.shape[a])?;
        let dims = GatherDims {
            offset_dims: Vec::new(),
            collapsed_slice_dims: vec![a as i64],
            operand_batching_dims: batch.clone(),
            start_indices_batching_dims: batch,
            start_index_map: vec![a as i64],
            index_vector_dim: r as i64,
            slice_sizes: vec![DimExpr::constant(1); r],
            ..Default::default()
        };
        one(cx.emit(Op::Gather(dims), &[data, idx])?)
    }
}

/// `ScatterElements(data, indices, updates, axis, reduction)` with `reduction` `none` or
/// `add`: a copy of `data` with `out[i, indices[i, j, k], k] = updates[i, j, k]` (or `+=`) for
/// `axis = 1`: a `scatter` whose batching dimensions are all but `axis`. With `none` and
/// repeated indices the result is unspecified by ONNX; Ebb keeps the last update in index order.
struct ScatterElements;

impl Lower for ScatterElements {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let red = n.string("reduction").unwrap_or_else(|| "none".into());
        let add = match red.as_str() {
            "none" => false,
            "add" => true,
            r => {
                return Err(cx.err(format!(
                    "ScatterElements reduction `{r}` is not supported (none, add are)"
                )))
            }
        };
        let data = cx.input(n, 0)?;
        let idx = cx.input(n, 1)?;
        let upd = cx.input(n, 2)?;
        let td = cx.ty(data);
        let r = td.rank();
        let a = norm_axis(cx, n.int_or("axis", 0), r)?;
        let batch = elementwise_batching(cx, data, idx, a)?;
        if cx.ty(upd).shape != cx.ty(idx).shape {
            return Err(cx.err("updates must have the shape of the indices"));
        }
        let idx = wrap_negative(cx, idx, &td.shape[a])?;
        let dims = ScatterDims {
            update_window_dims: Vec::new(),
            inserted_window_dims: vec![a as i64],
            input_batching_dims: batch.clone(),
            scatter_indices_batching_dims: batch,
            scatter_dims_to_operand_dims: vec![a as i64],
            index_vector_dim: r as i64,
            ..Default::default()
        };
        let body = scatter_body(td.dtype, add);
        one(cx.emit_n(Op::Scatter(dims), &[data, idx, upd], vec![body])?[0])
    }
}

/// `GatherND(data, indices)` with `batch_dims = 0`: `out[i..] = data[indices[i..], ..]`.
struct GatherNd;

impl Lower for GatherNd {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        if n.int_or("batch_dims", 0) != 0 {
            return Err(cx.err("GatherND with batch_dims != 0 is not supported"));
        }
        let data = cx.input(n, 0)?;
        let mut idx = cx.input(n, 1)?;
        let (td, ti) = (cx.ty(data), cx.ty(idx));
        let ri = ti.rank();
        let k = ti
            .shape
            .last()
            .and_then(|d| d.as_const())
            .ok_or_else(|| cx.err("the last dimension of GatherND indices must be static"))?
            as usize;
        if k == 0 || k > td.rank() {
            return Err(cx.err("GatherND index depth must be in 1..=rank(data)"));
        }
        if k == 1 {
            idx = wrap_negative(cx, idx, &td.shape[0])?;
        }
        let r = td.rank();
        let mut sizes = td.shape.clone();
        for s in sizes.iter_mut().take(k) {
            *s = DimExpr::constant(1);
        }
        let dims = GatherDims {
            offset_dims: (ri as i64 - 1..(ri - 1 + r - k) as i64).collect(),
            collapsed_slice_dims: (0..k as i64).collect(),
            start_index_map: (0..k as i64).collect(),
            index_vector_dim: ri as i64 - 1,
            slice_sizes: sizes,
            ..Default::default()
        };
        one(cx.emit(Op::Gather(dims), &[data, idx])?)
    }
}

/// The scalar body `(a, b) -> a + b` (or `-> b` when `add` is false) of a scatter.
fn scatter_body(dtype: DType, add: bool) -> Graph {
    if add {
        return Graph::scalar_binary(Op::Add, dtype, dtype);
    }
    let mut body = Graph::new("body");
    body.add_input("", TensorType::scalar(dtype));
    let b = body.add_input("", TensorType::scalar(dtype));
    body.set_outputs(vec![b], vec![String::new()]);
    body
}

/// StableHLO `scatter` with the given dimension numbers and an add/overwrite body.
#[allow(clippy::too_many_arguments)]
fn scatter(
    cx: &mut Cx,
    data: ValueRef,
    idx: ValueRef,
    upd: ValueRef,
    update_window_dims: Vec<i64>,
    inserted: Vec<i64>,
    to_operand: Vec<i64>,
    index_vector_dim: i64,
    add: bool,
) -> R<ValueRef> {
    let d = cx.ty(data).dtype;
    let dims = ScatterDims {
        update_window_dims,
        inserted_window_dims: inserted,
        scatter_dims_to_operand_dims: to_operand,
        index_vector_dim,
        ..Default::default()
    };
    Ok(cx.emit_n(
        Op::Scatter(dims),
        &[data, idx, upd],
        vec![scatter_body(d, add)],
    )?[0])
}

/// `ScatterND(data, indices, updates, reduction)` with `reduction` `none` or `add`.
struct ScatterNd;

impl Lower for ScatterNd {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let red = n.string("reduction").unwrap_or_else(|| "none".into());
        let add = match red.as_str() {
            "none" => false,
            "add" => true,
            r => return Err(cx.err(format!("ScatterND reduction `{r}` is not supported"))),
        };
        let data = cx.input(n, 0)?;
        let idx = cx.input(n, 1)?;
        let upd = cx.input(n, 2)?;
        let (td, ti) = (cx.ty(data), cx.ty(idx));
        let q = ti.rank();
        let k = ti
            .shape
            .last()
            .and_then(|d| d.as_const())
            .ok_or_else(|| cx.err("the last dimension of ScatterND indices must be static"))?
            as usize;
        if k > td.rank() {
            return Err(cx.err("ScatterND index depth exceeds the data rank"));
        }
        let mut idx = idx;
        // Negative indices: wrap per component when the depth is 1 (the common case).
        if k == 1 {
            idx = wrap_negative(cx, idx, &td.shape[0])?;
        }
        let window: Vec<i64> = (q as i64 - 1..(q - 1 + td.rank() - k) as i64).collect();
        let ins: Vec<i64> = (0..k as i64).collect();
        one(scatter(
            cx,
            data,
            idx,
            upd,
            window,
            ins.clone(),
            ins,
            q as i64 - 1,
            add,
        )?)
    }
}

/// `GatherNDGrad(shape, indices, update)` (com.microsoft, `batch_dims = 0`): zeros of
/// `shape` with `update` scatter-added at `indices` (the gradient of `GatherND`).
struct GatherNdGrad;

impl Lower for GatherNdGrad {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        if n.int_or("batch_dims", 0) != 0 {
            return Err(cx.err("GatherNDGrad with batch_dims != 0 is not supported"));
        }
        let shape = cx.input_dims(n, 0)?;
        let mut idx = cx.input(n, 1)?;
        let upd = cx.input(n, 2)?;
        let d = cx.ty(upd).dtype;
        let ti = cx.ty(idx);
        let q = ti.rank();
        let k = ti
            .shape
            .last()
            .and_then(|d| d.as_const())
            .ok_or_else(|| cx.err("the last dimension of the indices must be static"))?
            as usize;
        if k == 0 || k > shape.len() {
            return Err(cx.err("index depth must be in 1..=rank"));
        }
        if k == 1 {
            idx = wrap_negative(cx, idx, &shape[0])?;
        }
        let zeros = cx.full(d, 0.0, &shape)?;
        let window: Vec<i64> = (q as i64 - 1..(q - 1 + shape.len() - k) as i64).collect();
        let ins: Vec<i64> = (0..k as i64).collect();
        one(scatter(
            cx,
            zeros,
            idx,
            upd,
            window,
            ins.clone(),
            ins,
            q as i64 - 1,
            true,
        )?)
    }
}

/// `GatherGrad(shape, indices, dY)` (com.microsoft, attr `axis`): zeros of `shape` with `dY`
/// scatter-added at `indices` along `axis` (the gradient of `Gather`).
struct GatherGrad;

impl Lower for GatherGrad {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let shape = cx.input_dims(n, 0)?;
        let mut idx = cx.input(n, 1)?;
        let dy = cx.input(n, 2)?;
        let d = cx.ty(dy).dtype;
        let r = shape.len();
        let a = norm_axis(cx, n.int_or("axis", 0), r)?;
        let ri = cx.ty(idx).rank();
        idx = wrap_negative(cx, idx, &shape[a])?;
        let zeros = cx.full(d, 0.0, &shape)?;
        let window: Vec<i64> = (0..a as i64)
            .chain((a + ri) as i64..(r - 1 + ri) as i64)
            .collect();
        one(scatter(
            cx,
            zeros,
            idx,
            dy,
            window,
            vec![a as i64],
            vec![a as i64],
            ri as i64,
            true,
        )?)
    }
}

/// `OneHot(indices, depth, values)`: `values[1]` where `iota == indices` along `axis`,
/// `values[0]` elsewhere (negative indices wrap by `depth`).
struct OneHot;

impl Lower for OneHot {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let idx = cx.input(n, 0)?;
        let depth = cx.input_dims(n, 1)?;
        let depth = depth
            .first()
            .cloned()
            .ok_or_else(|| cx.err("empty depth"))?;
        let vals = cx.input(n, 2)?;
        let ti = cx.ty(idx);
        let r = ti.rank() + 1;
        let a = norm_axis(cx, n.int_or("axis", -1), r)?;
        let idx = cx.convert(idx, DType::I64)?;
        let idx = wrap_negative(cx, idx, &depth)?;
        let mut shape = ti.shape.clone();
        shape.insert(a, depth);
        let io = cx.iota(DType::I64, &shape, a)?;
        let dims: Vec<i64> = (0..r as i64).filter(|&i| i != a as i64).collect();
        let ib = cx.broadcast_in_dim(idx, &dims, &shape)?;
        let hit = cx.compare(Relation::Eq, io, ib)?;
        let tv = cx.ty(vals);
        let pick = |cx: &mut Cx, k: i64| -> R<ValueRef> {
            let spec = SliceSpec {
                start: vec![DimExpr::constant(k)],
                limit: vec![DimExpr::constant(k + 1)],
                strides: vec![DimExpr::constant(1)],
            };
            let s = cx.emit(Op::Slice(spec), &[vals])?;
            cx.reshape(s, &[])
        };
        if tv.rank() != 1 {
            return Err(cx.err("OneHot values must have rank 1"));
        }
        let off = pick(cx, 0)?;
        let on = pick(cx, 1)?;
        one(cx.select(hit, on, off)?)
    }
}
