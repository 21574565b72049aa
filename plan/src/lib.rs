//! Ebb's decisions: everything between a compiled symbolic [`Plan`] and the bytes an executor
//! runs with, and nothing that executes a step. Depends only on `ebb-ir`.
//!
//! * [`format`] — the serializable plan: schedule variants, values with symbolic sizes,
//!   remat/swap candidates with symbolic costs, decisions, thresholds.
//! * [`device`] — device profiles (the built-in accelerators, `custom:` specifications); the
//!   measured `cpu` profile is calibrated by the runtime's executor (`ebb_runtime::device`).
//! * [`cost`] — the roofline time model that prices recompute and swap decisions, the one
//!   pricing implementation finalize and the exact ILP share.
//! * [`finalize`] — a plan at concrete bindings under a memory budget: shape assertions
//!   checked, sizes evaluated, evict/recompute/swap decisions chosen, arena offsets assigned
//!   ([`ConcretePlan`]).
//! * [`arena`] — offset assignment of every device-resident interval in one arena.
//! * [`cache`] — finalized plans cached per (bindings, budget).
//! * [`pack`] — batch packing: which batches of given lengths fit a budget after decisions.
//! * `exact` (feature `exact`) — the ILP optimum of the decisions (COIN-OR CBC), the yardstick
//!   of finalize's greedy.

pub mod arena;
pub mod binary;
pub mod cache;
pub mod cost;
#[doc(hidden)]
pub mod csr;
pub mod device;
#[cfg(feature = "exact")]
pub mod exact;
pub mod finalize;
pub mod format;
mod helpers;
#[doc(hidden)]
pub mod index;
pub mod pack;

pub use finalize::{finalize, ConcretePlan, FinalizeError, FinalizeOptions, Finalizer};
pub use format::{Candidate, Decision, DecisionKind, Plan};
