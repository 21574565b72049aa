//! The generic attribute dictionary of the textual IR (`{name = value, ...}`): the form in
//! which [`super::Op`] payloads are printed and parsed ([`super::codec`]). Passes and kernels
//! never read it; they match on the typed payload.

use super::Literal;
use crate::dim::DimExpr;
use crate::dtype::DType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A named attribute value.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub enum Attr {
    /// An integer.
    I64(i64),
    /// A list of integers (dimension numbers, permutations, window sizes).
    Ints(Vec<i64>),
    /// A list of symbolic dimensions (result shapes, slice bounds).
    Dims(Vec<DimExpr>),
    /// A string (comparison direction, custom-call target, ...).
    Str(String),
    /// A boolean.
    Bool(bool),
    /// A float.
    F64(f64),
    /// An element type.
    DType(DType),
    /// A literal tensor value (for `constant`).
    Literal(Literal),
}

/// Ordered attribute dictionary of an op.
pub type Attrs = BTreeMap<String, Attr>;

/// Error reading an attribute that is missing or has the wrong kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("op `{op}`: attribute `{name}` {problem}")]
pub struct AttrError {
    /// Op name.
    pub op: String,
    /// Attribute name.
    pub name: String,
    /// What is wrong (`is missing`, `is not a list of integers`, ...).
    pub problem: String,
}
