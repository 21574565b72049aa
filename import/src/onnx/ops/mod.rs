//! ONNX op lowerings: one [`Lower`] implementation per op or small op family, looked up by
//! (domain, op type) in [`lookup`].
//!
//! A lowering turns one `NodeProto` into Ebb primitive ops (the executor's op set, named as in
//! StableHLO) through the builders of the lowering context, and returns what is known of each
//! output ([`Val`]): a graph value, and for integer shape computations the elements as
//! symbolic dimensions. Lowerings follow the ONNX operator specification (`docs/Operators.md`)
//! and, for `com.microsoft` ops, ONNX Runtime's contrib and training op schemas
//! (`docs/ContribOperators.md`, `orttraining/core/graph/training_op_defs.cc`).

mod batchnorm;
mod constant;
mod control;
mod conv;
mod elementwise;
mod gather;
mod gelu;
mod matmul;
mod nn;
mod optim;
mod random;
mod reduce;
pub(super) mod shape;
mod slicing;
pub(super) mod symbolic;
mod topk;

pub(crate) use constant::literal_val;

use super::ctx::{Cx, Val, R};
use super::proto::NodeProto;

/// The lowering of one ONNX op (or op family).
pub(crate) trait Lower: Sync {
    /// Lowers `n`; returns one value per output of the node (trailing optional outputs may be
    /// omitted when the node does not name them).
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>>;
}

/// The lowering tables of the `ai.onnx` domain, searched in order.
static AI_ONNX: &[&[(&str, &dyn Lower)]] = &[
    elementwise::OPS,
    gelu::OPS,
    matmul::OPS,
    shape::OPS,
    slicing::OPS,
    constant::OPS,
    gather::OPS,
    reduce::OPS,
    nn::OPS,
    conv::OPS,
    random::OPS,
    batchnorm::OPS,
    control::OPS,
    topk::OPS,
];

/// The lowering tables of the `com.microsoft` domain (ONNX Runtime's contrib and training
/// ops), searched in order.
static COM_MICROSOFT: &[&[(&str, &dyn Lower)]] = &[
    elementwise::OPS_MS,
    gelu::OPS_MS,
    matmul::OPS_MS,
    gather::OPS_MS,
    nn::OPS_MS,
    conv::OPS_MS,
    random::OPS_MS,
    batchnorm::OPS_MS,
    reduce::OPS_MS,
    optim::OPS_MS,
    slicing::OPS_MS,
];

/// The tables of `domain` (`ai.onnx`, `com.microsoft`; `ai.onnx.ml` is not supported).
fn tables(domain: &str) -> &'static [&'static [(&'static str, &'static dyn Lower)]] {
    match domain {
        "ai.onnx" => AI_ONNX,
        "com.microsoft" => COM_MICROSOFT,
        _ => &[],
    }
}

/// The lowering registered for `op_type` in `domain`, or `None`.
pub(crate) fn lookup(domain: &str, op_type: &str) -> Option<&'static dyn Lower> {
    tables(domain)
        .iter()
        .flat_map(|t| t.iter())
        .find(|(name, _)| *name == op_type)
        .map(|(_, l)| *l)
}

/// Every op type the importer lowers in `domain`, sorted (the registry behind the README's
/// op tables and `ebb ops`).
pub fn supported(domain: &str) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = tables(domain)
        .iter()
        .flat_map(|t| t.iter().map(|(n, _)| *n))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// One output holding graph value `v`.
pub(crate) fn one(v: ebb_ir::ValueRef) -> R<Vec<Val>> {
    Ok(vec![Val::t(v)])
}
