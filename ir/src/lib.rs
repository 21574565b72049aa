//! Ebb's intermediate representation: symbolic dimensions ([`dim`]), element and tensor types,
//! the op set with shape rules, the dataflow graph, the verifier and the textual IR.
//!
//! The IR has no dependency on MLIR, egg or CUDA.

pub mod dim;
pub mod dtype;
pub mod fsio;
pub mod graph;
pub mod index;
pub mod op;
pub mod shape;
pub mod text;
pub mod types;
pub mod verify;

pub use dim::{Bindings, BindingsExt, DimExpr, DimOrdering, Symbol, SymbolScope};
pub use dtype::DType;
pub use graph::{Graph, Node, NodeId, Relation, ShapeAssertion, ValueRef};
pub use index::{CandidateId, OpPos, Point, ProgPoint, Side, ValueId};
pub use op::{Attr, Attrs, Literal, Op, OpKind};
pub use types::{Shape, TensorType};
