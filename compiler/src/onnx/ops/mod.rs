//! ONNX op lowerings: one [`Lower`] implementation per op or small op family, looked up by
//! (domain, op type) in [`lookup`].
//!
//! A lowering turns one `NodeProto` into Ebb primitive ops (the executor's op set, named as in
//! StableHLO) through the builders of the lowering context, and returns what is known of each
//! output ([`Val`]): a graph value, and for integer shape computations the elements as
//! symbolic dimensions. Lowerings follow the ONNX operator specification (`docs/Operators.md`)
//! and, for `com.microsoft` ops, ONNX Runtime's contrib and training op schemas
//! (`docs/ContribOperators.md`, `orttraining/core/graph/training_op_defs.cc`).

mod constant;
mod conv;
mod elementwise;
mod gather;
mod gelu;
mod matmul;
mod nn;
mod optim;
mod reduce;
mod shape;
mod slicing;
mod symbolic;

pub(crate) use constant::literal_val;

use super::ctx::{Cx, Val, R};
use super::proto::NodeProto;

/// The lowering of one ONNX op (or op family).
pub(crate) trait Lower: Sync {
    /// Lowers `n`; returns one value per output of the node (trailing optional outputs may be
    /// omitted when the node does not name them).
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>>;
}

/// The lowering registered for `op_type` in `domain` (`ai.onnx`, `com.microsoft`,
/// `ai.onnx.ml` is not supported), or `None`.
pub(crate) fn lookup(domain: &str, op_type: &str) -> Option<&'static dyn Lower> {
    match domain {
        "ai.onnx" => elementwise::lookup(op_type)
            .or_else(|| gelu::lookup(op_type))
            .or_else(|| matmul::lookup(op_type))
            .or_else(|| shape::lookup(op_type))
            .or_else(|| slicing::lookup(op_type))
            .or_else(|| constant::lookup(op_type))
            .or_else(|| gather::lookup(op_type))
            .or_else(|| reduce::lookup(op_type))
            .or_else(|| nn::lookup(op_type))
            .or_else(|| conv::lookup(op_type)),
        "com.microsoft" => elementwise::lookup_ms(op_type)
            .or_else(|| gelu::lookup_ms(op_type))
            .or_else(|| matmul::lookup_ms(op_type))
            .or_else(|| gather::lookup_ms(op_type))
            .or_else(|| nn::lookup_ms(op_type))
            .or_else(|| conv::lookup_ms(op_type))
            .or_else(|| optim::lookup_ms(op_type))
            .or_else(|| slicing::lookup_ms(op_type)),
        _ => None,
    }
}

/// One output holding graph value `v`.
pub(crate) fn one(v: ebb_ir::ValueRef) -> R<Vec<Val>> {
    Ok(vec![Val::t(v)])
}
