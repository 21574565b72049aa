//! Ebb's passes over [`ebb_ir::Graph`]: canonicalization (DCE, CSE, shape constant folding),
//! memory analysis (liveness, symbolic peak memory, lower bound), op scheduling, e-graph
//! rewrites that lower memory (egg), rematerialization/swap candidate selection, and the
//! independent plan checker. One pass per file; see each module's docs for its invariant.

pub mod canon;
pub mod carry;
pub mod dead_carries;
pub mod donate;
pub mod dot_accumulate;
#[cfg(feature = "exact")]
pub mod exact;
pub mod fuse;
pub mod licm;
pub mod manager;
pub mod memory;
pub mod pass_id;
pub mod plan;
pub mod registry;
pub mod remat;
pub mod rewrite;
pub mod schedule;
pub mod stack_reuse;
pub mod writable_splats;

pub use pass_id::PassId;
