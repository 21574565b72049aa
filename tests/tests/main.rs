//! Ebb's workspace-level integration tests, one test binary (`autotests = false` in Cargo.toml)
//! instead of one per file, each linking LLVM/MLIR: every file in this directory is a module
//! here. A new test file must be added below. `exact` (CBC) runs with the `exact` feature:
//! `cargo test --workspace --all-features`.

mod budget_curve;
mod caller_thread;
mod canon_fixtures;
mod case_fixtures;
mod claimed_ranges;
mod control_flow;
mod dim_expressions;
mod donation_fixtures;
mod error_messages;
#[cfg(feature = "exact")]
mod exact;
mod exec_numerics;
mod finalize;
mod fusion_fixtures;
mod fuzz_smoke;
mod golden;
mod golden_atlas;
mod import_errors;
mod import_fixtures;
mod install;
mod loop_folds;
mod memory_fixtures;
mod numerics_check;
mod offload;
mod onnx_common;
mod onnx_import;
mod onnx_numerics;
mod op_timing;
mod plan_binary;
mod plan_fixtures;
mod plan_verify;
mod pretty_form;
mod report_reuse;
mod rewrite_fixtures;
mod run_planned;
mod scan_stacks;
mod schedule_fixtures;
mod simt_fixtures;
mod soak;
mod trial_imports;
mod variant_screen;
mod workspace_layout;
