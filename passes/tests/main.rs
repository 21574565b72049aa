//! The integration tests of `ebb-passes`, one test binary (`autotests = false` in Cargo.toml):
//! every file in this directory is a module here. A new test file must be added below.

// First: its `rule_test!` macro must be in textual scope of the rewrite tests below.
#[macro_use]
mod rewrite_util;

mod canon_cse;
mod canon_dce;
mod canon_fold;
mod canon_fold_starts;
mod canon_manager;
mod canon_unroll;
mod case_in_place;
mod donate;
mod dot_accumulate;
// The ILP of `ebb_plan::exact` and Checkmate need CBC (feature `exact`).
#[cfg(feature = "exact")]
mod exact;
mod fuse;
mod in_place;
mod licm;
mod memory_helpers;
mod memory_liveness;
mod memory_peak;
mod memory_proptest;
mod memory_shared;
mod plan_check_cases;
mod plan_check_fuzz;
mod registry;
mod remat_candidates;
mod remat_cost;
mod remat_threshold;
mod rewrite_fold_transpose_dot;
mod rewrite_reassociate;
mod rewrite_roundtrip;
mod rewrite_sink_broadcast;
mod rewrite_sink_convert;
mod schedule_context;
mod schedule_list;
mod schedule_proptest;
mod stack_reuse;
mod while_in_place;
mod writable_splats;
