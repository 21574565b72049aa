//! Matrix products: `MatMul` (numpy `matmul` semantics: 1-D operands promoted, batch
//! dimensions broadcast), `Gemm`, and `com.microsoft` `FusedMatMul` (`alpha·op(A)·op(B)` with
//! transposes of the last two dimensions), all lowered to `dot_general`.
//!
//! A rank-2 right operand is contracted directly against the left operand's last dimension
//! (no broadcast of the weight over the batch), which is the common `x @ W` case.

use super::super::ctx::{Cx, NodeAttrs, Val, R};
use super::super::proto::NodeProto;
use super::{one, Lower};
use ebb_ir::{DimExpr, Op, ValueRef};

/// The ai.onnx ops this module lowers, by op type.
pub(super) static OPS: &[(&str, &dyn Lower)] = &[("MatMul", &MatMul), ("Gemm", &Gemm)];

/// The com.microsoft ops this module lowers, by op type.
pub(super) static OPS_MS: &[(&str, &dyn Lower)] = &[("FusedMatMul", &FusedMatMul)];

/// `matmul(a, b)` with numpy semantics.
pub(crate) fn matmul(cx: &mut Cx, a: ValueRef, b: ValueRef) -> R<ValueRef> {
    let (ta, tb) = (cx.ty(a), cx.ty(b));
    if ta.dtype != tb.dtype {
        return Err(cx.err(format!(
            "operand element types differ: {} vs {}",
            ta.dtype, tb.dtype
        )));
    }
    if ta.rank() == 0 || tb.rank() == 0 {
        return Err(cx.err("MatMul of a scalar"));
    }
    let one_ = DimExpr::constant(1);
    let (a, sq_a) = if ta.rank() == 1 {
        (cx.reshape(a, &[one_.clone(), ta.shape[0].clone()])?, true)
    } else {
        (a, false)
    };
    let (b, sq_b) = if tb.rank() == 1 {
        (cx.reshape(b, &[tb.shape[0].clone(), one_.clone()])?, true)
    } else {
        (b, false)
    };
    let (ta, tb) = (cx.ty(a), cx.ty(b));
    let (ra, rb) = (ta.rank(), tb.rank());
    let out = if rb == 2 {
        cx.dot(a, b, (&[], &[]), (&[ra as i64 - 1], &[0]))?
    } else {
        let batch = cx.broadcast_shape(&ta.shape[..ra - 2], &tb.shape[..rb - 2])?;
        let nb = batch.len();
        let mut sa = batch.clone();
        sa.extend_from_slice(&ta.shape[ra - 2..]);
        let mut sb = batch.clone();
        sb.extend_from_slice(&tb.shape[rb - 2..]);
        let a = cx.broadcast_to(a, &sa)?;
        let b = cx.broadcast_to(b, &sb)?;
        let bd: Vec<i64> = (0..nb as i64).collect();
        cx.dot(a, b, (&bd, &bd), (&[nb as i64 + 1], &[nb as i64]))?
    };
    if !sq_a && !sq_b {
        return Ok(out);
    }
    let mut s = cx.ty(out).shape;
    let r = s.len();
    if sq_b {
        s.remove(r - 1);
    }
    if sq_a {
        s.remove(r - 2);
    }
    cx.reshape(out, &s)
}

struct MatMul;

impl Lower for MatMul {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let a = cx.input(n, 0)?;
        let b = cx.input(n, 1)?;
        one(matmul(cx, a, b)?)
    }
}

/// `Gemm`: `alpha·op(A)·op(B) + beta·C` on rank-2 operands.
struct Gemm;

impl Lower for Gemm {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let a = cx.input(n, 0)?;
        let b = cx.input(n, 1)?;
        if cx.ty(a).rank() != 2 || cx.ty(b).rank() != 2 {
            return Err(cx.err("Gemm operands must have rank 2"));
        }
        let ca = if n.int_or("transA", 0) != 0 { 0 } else { 1 };
        let cb = if n.int_or("transB", 0) != 0 { 1 } else { 0 };
        let mut y = cx.dot(a, b, (&[], &[]), (&[ca], &[cb]))?;
        let alpha = n.float_or("alpha", 1.0) as f64;
        if alpha != 1.0 {
            y = cx.binary_scalar(Op::Multiply, y, alpha)?;
        }
        if cx.opt_input(n, 2).is_some() {
            let mut c = cx.input(n, 2)?;
            let beta = n.float_or("beta", 1.0) as f64;
            if beta != 1.0 {
                c = cx.binary_scalar(Op::Multiply, c, beta)?;
            }
            y = cx.binary(Op::Add, y, c)?;
        }
        one(y)
    }
}

/// Swaps the last two dimensions of `v`.
fn swap_last2(cx: &mut Cx, v: ValueRef) -> R<ValueRef> {
    let r = cx.ty(v).rank();
    if r < 2 {
        return Err(cx.err("transpose of an operand of rank < 2"));
    }
    let mut p: Vec<i64> = (0..r as i64).collect();
    p.swap(r - 2, r - 1);
    cx.transpose(v, &p)
}

/// `FusedMatMul(A, B)` (com.microsoft): `alpha·matmul(op(A), op(B))`.
struct FusedMatMul;

impl Lower for FusedMatMul {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        if n.int_or("transBatchA", 0) != 0 || n.int_or("transBatchB", 0) != 0 {
            return Err(cx.err("FusedMatMul with transBatchA/transBatchB is not supported"));
        }
        let mut a = cx.input(n, 0)?;
        let mut b = cx.input(n, 1)?;
        let (ra, rb) = (cx.ty(a).rank(), cx.ty(b).rank());
        let (ta, tb) = (n.int_or("transA", 0) != 0, n.int_or("transB", 0) != 0);
        let mut y = if ra == 2 && rb == 2 {
            let ca = if ta { 0 } else { 1 };
            let cb = if tb { 1 } else { 0 };
            cx.dot(a, b, (&[], &[]), (&[ca], &[cb]))?
        } else if ta
            && !tb
            && ra == rb
            && ra > 2
            && cx.ty(a).shape[..ra - 2] == cx.ty(b).shape[..rb - 2]
        {
            // Aᵀ·B over matching batches: contract the second-to-last dimensions.
            let bd: Vec<i64> = (0..ra as i64 - 2).collect();
            cx.dot(a, b, (&bd, &bd), (&[ra as i64 - 2], &[rb as i64 - 2]))?
        } else {
            if ta {
                a = swap_last2(cx, a)?;
            }
            if tb {
                b = swap_last2(cx, b)?;
            }
            matmul(cx, a, b)?
        };
        let alpha = n.float_or("alpha", 1.0) as f64;
        if alpha != 1.0 {
            y = cx.binary_scalar(Op::Multiply, y, alpha)?;
        }
        one(y)
    }
}
