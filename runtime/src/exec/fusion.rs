//! `fusion` (loop fusion, made by `ebb_passes::fuse`): the region is evaluated chunk by chunk
//! over the flat (row-major) iteration space, [`FUSION_CHUNK`] elements at a time, so that no
//! internal value of the group is ever materialized whole. Per chunk: aligned inputs are
//! copied for the chunk's range, members run with the ordinary kernels on chunk-sized
//! tensors (`reshape` and unit-dimension broadcasts are the identity on a chunk, expanding
//! broadcasts and `iota` are computed from the flat indices), and the results' chunks are
//! written into the whole results.
//!
//! Invariant: the results equal, bit for bit, what running the region's ops one by one on whole
//! tensors gives (every member is elementwise on the flat index), and the transient bytes
//! reported are [`fusion_tile_bytes`] at the bindings, the planner's charge.

use super::layout::strides_of;
use super::{elementwise, Ctx, KernelFailure, OutType};
use crate::error::OpError;
use crate::tensor::{Data, Tensor};
use ebb_ir::op::fusion::{aligned_inputs, member_last_uses, reads_aligned};
use ebb_ir::op::{fusion_tile_bytes, FUSION_CHUNK};
use ebb_ir::{Bindings, Graph, Node, Op, ValueRef};
use std::cell::Cell;
use std::collections::HashMap;

fn invalid(msg: impl Into<String>) -> KernelFailure {
    KernelFailure::Op(OpError::Invalid(msg.into()))
}

/// Concrete shape of a region value's type at the bindings.
fn shape_at(shape: &[ebb_ir::DimExpr], b: &Bindings) -> Result<Vec<usize>, KernelFailure> {
    shape
        .iter()
        .map(|d| {
            let v = d.eval(b).map_err(|e| invalid(e.to_string()))?;
            usize::try_from(v).map_err(|_| invalid(format!("negative dimension {v}")))
        })
        .collect()
}

/// `fusion` with a loop region (see the module docs).
pub(crate) fn loop_fusion(ctx: &Ctx, ops: Vec<Tensor>) -> Result<Vec<Tensor>, KernelFailure> {
    let [region] = ctx.node.regions.as_slice() else {
        return Err(invalid("fusion needs one region"));
    };
    if ops.len() != region.inputs().len() || ctx.out.len() != region.outputs().len() {
        return Err(invalid(
            "fusion operands or results differ from its region's",
        ));
    }
    let n: usize = ctx.out.first().map_or(0, |o| o.shape.iter().product());
    if ctx
        .out
        .iter()
        .any(|o| o.shape.iter().product::<usize>() != n)
    {
        return Err(invalid("loop fusion results differ in element count"));
    }
    let aligned = aligned_inputs(region);
    let (members, last) = member_last_uses(region);
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
    let mut results: Vec<Data> = ctx.out.iter().map(|o| Data::zeros(o.dtype, n)).collect();
    let chunk = FUSION_CHUNK as usize;
    let mut start = 0;
    while start < n {
        let len = chunk.min(n - start);
        let mut env: HashMap<ValueRef, Tensor> = HashMap::new();
        for (i, (&id, t)) in region.inputs().iter().zip(&ops).enumerate() {
            let v = if aligned[i] {
                if t.len() != n {
                    return Err(invalid(format!("operand {i} is not of the fusion's size")));
                }
                let d = crate::tensor::map_same!(t.data(), v => v[start..start + len].to_vec());
                Tensor::from_parts(vec![len], d)
            } else {
                t.clone()
            };
            env.insert(ValueRef::new(id, 0), v);
        }
        for (k, &id) in members.iter().enumerate() {
            let node = region.node(id);
            let ins = region.operands(id);
            let operands: Vec<Tensor> = ins.iter().map(|v| env[v].clone()).collect();
            // Drop what this member reads for the last time (the tiles of the module docs).
            for v in &ins {
                if last.get(v) == Some(&k) {
                    env.remove(v);
                }
            }
            let t = member(region, id, node, operands, start, len, ctx.bindings)?;
            let v = ValueRef::new(id, 0);
            for &o in out_of.get(&v).into_iter().flatten() {
                let dst = &mut results[o];
                let ok = crate::tensor::zip_with!(dst, t.data(), d, s => d[start..start + len].copy_from_slice(s));
                if ok.is_none() {
                    return Err(invalid("a fusion result changed its element type"));
                }
            }
            if last.get(&v).is_some_and(|&l| l > k) {
                env.insert(v, t);
            }
        }
        start += len;
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

/// One member on the chunk `[start, start + len)`.
fn member(
    region: &Graph,
    id: ebb_ir::NodeId,
    node: &Node,
    operands: Vec<Tensor>,
    start: usize,
    len: usize,
    b: &Bindings,
) -> Result<Tensor, KernelFailure> {
    let out = &node.outputs[0];
    match &node.op {
        Op::Reshape(_) => Ok(operands[0].clone()),
        Op::BroadcastInDim(_) if reads_aligned(region, id, 0) => Ok(operands[0].clone()),
        Op::BroadcastInDim(bc) => {
            let full = shape_at(&out.shape, b)?;
            let src = &operands[0];
            let ost = strides_of(&full);
            let ist = strides_of(src.shape());
            let idx: Vec<usize> = (start..start + len)
                .map(|i| {
                    bc.dims
                        .iter()
                        .enumerate()
                        .map(|(k, &d)| {
                            let d = d as usize;
                            let j = (i / ost[d]) % full[d];
                            // A broadcast operand dimension of size 1 repeats its element.
                            if src.shape()[k] == 1 {
                                0
                            } else {
                                j * ist[k]
                            }
                        })
                        .sum()
                })
                .collect();
            let d = crate::tensor::map_same!(src.data(), v => idx.iter().map(|&i| v[i]).collect());
            Ok(Tensor::from_parts(vec![len], d))
        }
        Op::Iota(spec) => {
            let full = shape_at(&out.shape, b)?;
            let st = strides_of(&full);
            let d = usize::try_from(spec.dimension).map_err(|_| invalid("bad iota dimension"))?;
            let v: Vec<i64> = (start..start + len)
                .map(|i| ((i / st[d]) % full[d]) as i64)
                .collect();
            Ok(Tensor::from_parts(
                vec![len],
                Data::I64(v).convert(spec.dtype),
            ))
        }
        _ if node.kind().is_elementwise() => {
            let out_ty = [OutType {
                dtype: out.dtype,
                shape: vec![len],
            }];
            let c = Ctx {
                node,
                out: &out_ty,
                bindings: b,
                transient: Cell::new(0),
            };
            elementwise::run(&c, operands).map_err(KernelFailure::Op)
        }
        _ => Err(invalid(format!(
            "`{}` cannot be a loop fusion member",
            node.kind().name()
        ))),
    }
}
