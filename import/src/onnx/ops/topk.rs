//! `TopK` (opset 10 and later: `k` is the second input, a one-element `int64` tensor;
//! attributes `axis` (default -1), `largest` (default 1), `sorted` (default 1)): the `k`
//! largest (or smallest) elements along `axis` and their `int64` indices.
//!
//! Lowered as XLA lowers `lax.top_k` (and as JAX's `chlo.top_k` decomposition reads): a stable
//! `sort` along the axis of the input together with an `iota` of its indices, compared on the
//! values only (`GT` for the largest, `LT` for the smallest), then a `slice` of the first `k`
//! of both. The stable sort puts equal values in index order, lower index first, which is the
//! order ONNX specifies; with `sorted = 0` the order is unspecified, so the sorted one serves.
//! `k` must be known at import time (a constant, or computed from shapes: it may be a symbolic
//! dimension) and at most the axis's length, which a symbolic `k` turns into a shape assertion
//! ([`super::slicing`]'s rule for symbolic ends). NaNs compare as the executor's `compare`
//! does (unordered: never greater, never less), not as ONNX Runtime's (largest).
//!
//! Invariant: the outputs are `values: X.dtype[..., k, ...]`, `indices: i64[..., k, ...]`, with
//! `X[indices] == values` along the axis.

use super::super::ctx::{norm_axis, Cx, NodeAttrs, Val, R};
use super::super::proto::NodeProto;
use super::Lower;
use ebb_ir::op::{CompareSpec, SliceSpec, SortSpec};
use ebb_ir::{DType, DimExpr, Graph, Node, Op, Relation, TensorType, ValueRef};

/// The ai.onnx ops this module lowers, by op type.
pub(super) static OPS: &[(&str, &dyn Lower)] = &[("TopK", &TopK)];

struct TopK;

/// The comparator of the sort: `lhs.value <direction> rhs.value` over the region inputs
/// `(lhs value, rhs value, lhs index, rhs index)`.
fn comparator(dtype: DType, direction: Relation) -> Graph {
    let mut r = Graph::new("comparator");
    let a = r.add_input("", TensorType::scalar(dtype));
    let b = r.add_input("", TensorType::scalar(dtype));
    r.add_input("", TensorType::scalar(DType::I64));
    r.add_input("", TensorType::scalar(DType::I64));
    let cmp = Op::Compare(CompareSpec {
        direction,
        compare_type: None,
    });
    let id = r.add_node(Node::new(cmp, vec![TensorType::scalar(DType::I1)]), &[a, b]);
    r.set_outputs(vec![ValueRef::new(id, 0)], vec![String::new()]);
    r
}

impl Lower for TopK {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        if cx.opset() < 10 {
            return Err(cx.err(
                "TopK before opset 10 (`k` as an attribute) is not supported; re-export with \
                 opset 10 or later",
            ));
        }
        let x = cx.input(n, 0)?;
        let t = cx.ty(x);
        if t.rank() == 0 {
            return Err(cx.err("TopK of a scalar: the input needs at least one dimension"));
        }
        let axis = norm_axis(cx, n.int_or("axis", -1), t.rank())?;
        let k = match cx.input_dims(n, 1)?.as_slice() {
            [k] => k.clone(),
            other => {
                return Err(cx.err(format!(
                    "TopK's `k` must hold one element, found {}",
                    other.len()
                )))
            }
        };
        if k.as_const().is_some_and(|k| k < 0) {
            return Err(cx.err(format!("TopK's `k` is negative ({k})")));
        }
        let len = t.shape[axis].clone();
        if let (Some(kc), Some(lc)) = (k.as_const(), len.as_const()) {
            if kc > lc {
                return Err(cx.err(format!(
                    "TopK's `k` ({kc}) exceeds the length {lc} of axis {axis}"
                )));
            }
        }
        let k = super::slicing::slice_end(cx, &k, &len);
        let direction = if n.int_or("largest", 1) != 0 {
            Relation::Gt
        } else {
            Relation::Lt
        };
        let idx = cx.iota(DType::I64, &t.shape, axis)?;
        let sorted = cx.emit_n(
            Op::Sort(SortSpec {
                dimension: axis as i64,
                is_stable: true,
            }),
            &[x, idx],
            vec![comparator(t.dtype, direction)],
        )?;
        let mut limit = t.shape.clone();
        limit[axis] = k;
        let spec = SliceSpec {
            start: vec![DimExpr::zero(); t.rank()],
            limit,
            strides: vec![DimExpr::constant(1); t.rank()],
        };
        let values = cx.emit(Op::Slice(spec.clone()), &[sorted[0]])?;
        let indices = cx.emit(Op::Slice(spec), &[sorted[1]])?;
        Ok(vec![Val::t(values), Val::t(indices)])
    }
}
