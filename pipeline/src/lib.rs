//! Ebb's compile pipeline and what every interface (the `ebb` CLI, the Python package, the C
//! ABI) shares around it, with no command-line or plotting dependency:
//!
//! * [`compile`](mod@compile) — the pass pipeline from an imported graph to a [`Plan`]
//!   ([`compile()`], [`run_pipeline`]), its options ([`CompileOptions`], built by
//!   [`CompileOptions::builder`], see [`options`]) and report;
//! * [`api`] — [`api::Compiler`]: import and compile a file, read a plan file;
//! * [`bind`] — symbol bindings (`B=8,S=512`), binding a graph, checking sizes evaluate;
//! * [`report`] — a plan's memory figures at one binding, finalized and proven by the checker;
//! * [`curve`] — the budget curve at one binding: added time and arena against the budget;
//! * [`run`] — `ebb run`: finalize, execute on the CPU with the decisions, check and report;
//! * [`numerics`] — the outputs against the framework's (`ebb run --inputs REF.npz`);
//! * [`size`] — byte sizes and budgets as written (`2GiB`, `50%`);
//! * [`output`] — output files written atomically, stdout write errors reported.
//!
//! [`Plan`]: ebb_plan::format::Plan

pub mod api;
pub mod bind;
pub mod budget;
pub mod compile;
pub mod curve;
pub mod device_check;
pub mod numerics;
pub mod options;
pub mod output;
pub mod plan_file;
pub mod report;
pub mod run;
pub mod size;

pub use bind::{bind_graph, check_evaluable, parse_bindings, show};
pub use budget::{BudgetResolver, StepBudget};
pub use compile::{
    compile, fusion_groups, pass_manager, plan_graph, run_pipeline, CompileOptions, CompileReport,
    Compiled, Staged, STOP_POINTS,
};
pub use curve::{budget_curve, BudgetCurve, CurvePoint, DEFAULT_CURVE_POINTS};
pub use options::{resolve_device, CompileOptionsBuilder, Kinds, Pricing, RewriteSpec};
pub use report::{
    check_plan_bindings, plan_report, plan_report_finalized, plan_report_proven,
    plan_report_proven_on, prove_at, resolve_budget, PlanReport,
};
pub use size::{parse_budget, parse_bytes, Budget};
