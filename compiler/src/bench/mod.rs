//! `ebb bench`: sweeps a training step over many concrete shapes and compares Ebb's memory
//! figures with baselines — program order, a plan compiled for each shape (`--bind`, the
//! precise-shape baseline), the lower bound, the plan finalized under a budget, XLA's own
//! memory analysis of the same JAX step (`--xla`) and the exact optimum (`--exact`).
//!
//! Per shape (a [`Row`]), all bytes are on Ebb's accounting (every tensor resident at a program
//! point; every op result materialized unless `--fusion on`, inputs resident throughout unless
//! donated with `--donate`; see docs/architecture.md, the memory model):
//! - `peak_bytes_program_order`: the planned graph executed in program order;
//! - `peak_bytes_scheduled`: the symbolic plan (compiled once) at this shape, no budget;
//! - `peak_bytes_precise`: a plan compiled with `--bind` at this shape; `symbolic_over_precise`
//!   = scheduled / precise;
//! - `lower_bound_bytes`: persistent bytes + the largest single op's operands and results;
//! - `budget`: the runtime's finalize under `--budget` (bytes or % of program order): planned
//!   peak, recompute FLOPs / step FLOPs, swap bytes, the modelled time the decisions add on
//!   `--device` (roofline, `ebb_plan::cost`) against the modelled step, the arena's bytes
//!   (`arena_bytes`; the markdown shows arena / planned peak), finalize time (µs);
//! - `compile_ms_precise`: compile time of the precise plan (import excluded), against the
//!   symbolic plan's single `compile_ms_symbolic`;
//! - `xla`: `compiled.memory_analysis()` of `jax.jit(step)` at this shape on XLA:CPU
//!   (argument + output − alias + temp bytes), and `ebb_over_xla` = Ebb scheduled / XLA total; the same
//!   with every argument donated (`total_bytes_donated`, `ebb_over_xla_donated`), and with
//!   `--xla-time-runs N` the median time of N executed XLA steps (`step_ms`);
//! - `exec` (`--exec N`): Ebb's own step executed (JIT executor, seeded random inputs, no
//!   budget): the median wall time of N steps after a warm-up, the kernels the warm-up
//!   compiled, and the ratio to XLA's `step_ms`;
//! - `exact`: the least overhead (µs, the same time model) of any set of decisions meeting
//!   the budget, found by the ILP of `ebb_plan::exact`, and the greedy's gap to it.
//!
//! The report ([`BenchReport`]) is rendered as a markdown table ([`render`]), written as JSON
//! (schema [`SCHEMA_VERSION`]; bump it on any change of field names or meaning) and plotted as
//! SVG ([`plot`]). The `timeline` (resident bytes per program point at one shape, before and
//! after the budget's decisions) is plotted but not written to the JSON.
//!
//! Invariant: every row's bindings satisfy the plan's symbol facts (see [`shapes`]); rows are
//! sorted by the sequence symbol (`S` when the plan has it), then by the other symbols.

pub mod cli;
pub mod exact;
pub mod plot;
pub mod render;
mod run;
pub mod shapes;
pub mod xla;

pub use run::{run, BenchOptions, Progress};

use serde::Serialize;
use std::collections::BTreeMap;

/// Version of the JSON schema of [`BenchReport`].
pub const SCHEMA_VERSION: u32 = 5;

/// The result of a sweep (see the module docs).
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Version of the `ebb` crate that made the report.
    pub ebb_version: String,
    /// The input file as given.
    pub input: String,
    /// The fixture name from the `.json` metadata next to a `.mlir` input.
    pub fixture: Option<String>,
    /// The symbol plotted on the x axis (the sequence symbol `S` when present).
    pub x_symbol: String,
    /// Where the shapes came from.
    pub shape_source: shapes::ShapeSource,
    /// The budget as given (`50%`, `2GiB`, bytes).
    pub budget: Option<String>,
    /// The device whose roofline times price recompute and swap (`--device`).
    pub device: ebb_plan::device::DeviceProfile,
    /// Decision kinds the runtime could choose (`--kinds`).
    pub kinds: Vec<ebb_plan::format::DecisionKind>,
    /// Compile time of the symbolic plan (import excluded), ms; `None` for a plan-file input.
    pub compile_ms_symbolic: Option<f64>,
    /// Schedules kept in the symbolic plan (the runtime picks one per shape).
    pub plan_variants: usize,
    /// Remat/swap candidates of the symbolic plan.
    pub candidates: usize,
    /// `fusion` ops of the planned graph (0 without `--fusion on`).
    pub fusion_groups: usize,
    /// Donated inputs of the planned graph (`--donate`); compare with XLA's donated column
    /// when there are some.
    pub donated_inputs: usize,
    /// The XLA peer: requested, available, and why not.
    pub xla: XlaInfo,
    /// Time limit of the exact solver per shape, s (`None` without `--exact`).
    pub exact_time_limit_s: Option<f64>,
    /// One row per distinct shape.
    pub rows: Vec<Row>,
    /// Worst cases over the rows, read against the targets.
    pub summary: Summary,
    /// Resident bytes over program points at one shape (plotted, not serialized).
    #[serde(skip)]
    pub timeline: Option<Timeline>,
}

/// Whether the XLA column is present.
#[derive(Clone, Debug, Default, Serialize)]
pub struct XlaInfo {
    /// `--xla` was given.
    pub requested: bool,
    /// The peer answered for every shape.
    pub available: bool,
    /// `jax.__version__` of the peer.
    pub jax_version: Option<String>,
    /// Why there is no column, when requested and unavailable.
    pub note: Option<String>,
}

/// Figures at one shape (see the module docs). Bytes, FLOPs, µs and ms as named.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The bindings, by symbol name.
    pub bind: BTreeMap<String, i64>,
    /// Peak bytes in program order.
    pub peak_bytes_program_order: i64,
    /// Peak bytes of the symbolic plan (best variant at this shape), no budget.
    pub peak_bytes_scheduled: i64,
    /// Peak bytes of a plan compiled with `--bind` at this shape, no budget.
    pub peak_bytes_precise: i64,
    /// `peak_bytes_scheduled / peak_bytes_precise`.
    pub symbolic_over_precise: f64,
    /// Lower bound in bytes.
    pub lower_bound_bytes: i64,
    /// Compile time of the precise plan (import excluded), ms.
    pub compile_ms_precise: f64,
    /// Finalize under the budget, when one was given.
    pub budget: Option<BudgetRow>,
    /// XLA's memory analysis, when available.
    pub xla: Option<XlaRow>,
    /// The exact optimum, with `--exact`.
    pub exact: Option<exact::ExactRow>,
    /// Ebb's executed step, with `--exec N`.
    pub exec: Option<ExecRow>,
}

/// Ebb's step executed at one shape (`--exec N`; JIT executor, no budget).
#[derive(Clone, Debug, Serialize)]
pub struct ExecRow {
    /// Median wall time of the timed steps, ms.
    pub step_ms: f64,
    /// Wall time of the warm-up step (kernel compiles included), ms.
    pub warmup_ms: f64,
    /// Kernels the warm-up step compiled (0 when an earlier shape compiled them all).
    pub kernels_compiled_warmup: u64,
    /// Compile time within the warm-up step, ms.
    pub jit_compile_ms_warmup: f64,
    /// Kernels compiled during the timed steps (always 0: every kernel is cached).
    pub kernels_compiled_timed: u64,
    /// `step_ms` / XLA's `step_ms` at this shape, with `--xla --xla-time-runs`.
    pub ebb_over_xla_step: Option<f64>,
}

/// The symbolic plan finalized under the budget at one shape.
#[derive(Clone, Debug, Serialize)]
pub struct BudgetRow {
    /// The budget in bytes.
    pub budget_bytes: i64,
    /// Whether the greedy met the budget.
    pub feasible: bool,
    /// Peak bytes with the decisions (feasible only).
    pub peak_bytes_planned: Option<i64>,
    /// The smallest budget the greedy reaches (infeasible only).
    pub smallest_feasible_bytes: Option<i64>,
    /// Arena bytes of the decisions' layout (feasible only): the device memory the step
    /// needs, the planned peak plus the layout's fragmentation.
    pub arena_bytes: Option<i64>,
    /// Recompute decisions taken.
    pub recompute_decisions: usize,
    /// Swap decisions taken.
    pub swap_decisions: usize,
    /// FLOPs spent recomputing.
    pub recompute_flops: i64,
    /// FLOPs of one step.
    pub step_flops: i64,
    /// `recompute_flops / step_flops`.
    pub recompute_fraction: f64,
    /// Bytes offloaded to host (each also reloaded).
    pub swap_bytes: i64,
    /// Modelled step time without decisions on the device, µs (roofline, `ebb_plan::cost`).
    pub step_us_modelled: f64,
    /// Modelled time the decisions add, µs (recompute + exposed transfers).
    pub added_us: f64,
    /// `added_us / step_us_modelled`.
    pub added_fraction: f64,
    /// Modelled recompute time, µs.
    pub recompute_us: f64,
    /// Modelled transfer time not hidden behind compute, µs.
    pub exposed_transfer_us: f64,
    /// Time to finalize the plan at this shape (with offsets), µs.
    pub finalize_us: f64,
}

/// XLA's figures at one shape and Ebb's ratio to them.
#[derive(Clone, Debug, Serialize)]
pub struct XlaRow {
    /// Arguments (parameters, optimizer state, inputs), bytes.
    pub argument_bytes: i64,
    /// Outputs, bytes.
    pub output_bytes: i64,
    /// Outputs aliasing arguments, bytes.
    pub alias_bytes: i64,
    /// XLA's temporary buffer, bytes.
    pub temp_bytes: i64,
    /// argument + output − alias + temp, bytes.
    pub total_bytes: i64,
    /// XLA compile time, ms.
    pub compile_ms: f64,
    /// Ebb scheduled peak / XLA total.
    pub ebb_over_xla: f64,
    /// XLA total with every argument donated (parameters and optimizer state updated in
    /// place), bytes; `None` from a peer that does not measure it.
    pub total_bytes_donated: Option<i64>,
    /// Ebb scheduled peak / XLA's donated total (the fair ratio when Ebb donates too:
    /// [`BenchReport::donated_inputs`] > 0).
    pub ebb_over_xla_donated: Option<f64>,
    /// Median time of one step executed by XLA:CPU, ms (`--xla-time-runs`).
    pub step_ms: Option<f64>,
}

/// Worst cases over the rows.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// Shapes swept.
    pub shapes: usize,
    /// Largest `symbolic_over_precise` (target ≤ 1.01).
    pub max_symbolic_over_precise: f64,
    /// Largest `ebb_over_xla` (target ≤ 0.85), when XLA is present.
    pub max_ebb_over_xla: Option<f64>,
    /// Smallest `ebb_over_xla`, when XLA is present.
    pub min_ebb_over_xla: Option<f64>,
    /// Shapes at which the budget was infeasible for the greedy.
    pub budget_infeasible: usize,
    /// Largest recompute fraction among feasible shapes (target ≤ 0.15).
    pub max_recompute_fraction: Option<f64>,
    /// Largest modelled added step time fraction among feasible shapes (target ≤ 0.10).
    pub max_added_fraction: Option<f64>,
    /// Largest arena / planned peak among feasible shapes (target ≤ 1.05).
    pub max_arena_over_planned: Option<f64>,
    /// Largest greedy gap to the optimum (target ≤ 0.05), with `--exact`.
    pub max_greedy_gap: Option<f64>,
    /// Total precise compile time over the shapes, ms.
    pub compile_ms_precise_total: f64,
}

/// Resident bytes per program point at one shape.
#[derive(Clone, Debug)]
pub struct Timeline {
    /// The shape.
    pub bind: BTreeMap<String, i64>,
    /// Without decisions.
    pub before: Vec<i64>,
    /// With the budget's decisions (regeneration transients included), when feasible.
    pub after: Option<Vec<i64>>,
    /// The budget in bytes.
    pub budget_bytes: Option<i64>,
    /// Evictions, offloads, regenerations and reloads of the budget's decisions.
    pub marks: Vec<Mark>,
}

/// What a decision does at a program point (marked on the timeline).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkKind {
    /// A value to be recomputed is freed after the point.
    Evict,
    /// A value is offloaded to host memory after the point (swap).
    Offload,
    /// A value is recomputed before the point.
    Regenerate,
    /// A swapped value is reloaded (prefetched) before the point.
    Reload,
}

/// One timeline mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    /// When it happens: after a point (evict, offload) or before one (regenerate, reload).
    pub at: ebb_ir::ProgPoint,
    /// What happens there.
    pub kind: MarkKind,
}

/// The marks of `decisions` on `plan` (the finalized variant).
pub fn decision_marks(
    plan: &ebb_plan::format::Plan,
    decisions: &[ebb_plan::format::Decision],
) -> Vec<Mark> {
    use ebb_plan::format::DecisionKind;
    let mut out = Vec::with_capacity(2 * decisions.len());
    for d in decisions {
        let Some(c) = plan.candidate(d.candidate) else {
            continue;
        };
        let (out_kind, back_kind) = match d.kind {
            DecisionKind::Recompute => (MarkKind::Evict, MarkKind::Regenerate),
            DecisionKind::Swap => (MarkKind::Offload, MarkKind::Reload),
        };
        out.push(Mark {
            at: c.evict_point(),
            kind: out_kind,
        });
        out.push(Mark {
            at: c.back_point(d.kind),
            kind: back_kind,
        });
    }
    out
}

impl Summary {
    /// The worst cases of `rows`.
    pub fn of(rows: &[Row]) -> Summary {
        let fmax = |it: &mut dyn Iterator<Item = f64>| {
            it.fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))
        };
        let fmin = |it: &mut dyn Iterator<Item = f64>| {
            it.fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.min(x))))
        };
        Summary {
            shapes: rows.len(),
            max_symbolic_over_precise: fmax(&mut rows.iter().map(|r| r.symbolic_over_precise))
                .unwrap_or(0.0),
            max_ebb_over_xla: fmax(
                &mut rows
                    .iter()
                    .filter_map(|r| r.xla.as_ref())
                    .map(|x| x.ebb_over_xla),
            ),
            min_ebb_over_xla: fmin(
                &mut rows
                    .iter()
                    .filter_map(|r| r.xla.as_ref())
                    .map(|x| x.ebb_over_xla),
            ),
            budget_infeasible: rows
                .iter()
                .filter(|r| r.budget.as_ref().is_some_and(|b| !b.feasible))
                .count(),
            max_recompute_fraction: fmax(
                &mut rows
                    .iter()
                    .filter_map(|r| r.budget.as_ref())
                    .filter(|b| b.feasible)
                    .map(|b| b.recompute_fraction),
            ),
            max_added_fraction: fmax(
                &mut rows
                    .iter()
                    .filter_map(|r| r.budget.as_ref())
                    .filter(|b| b.feasible)
                    .map(|b| b.added_fraction),
            ),
            max_arena_over_planned: fmax(
                &mut rows
                    .iter()
                    .filter_map(|r| r.budget.as_ref())
                    .filter_map(|b| {
                        Some(b.arena_bytes? as f64 / b.peak_bytes_planned?.max(1) as f64)
                    }),
            ),
            max_greedy_gap: fmax(&mut rows.iter().filter_map(|r| r.exact.as_ref()?.greedy_gap)),
            compile_ms_precise_total: rows.iter().map(|r| r.compile_ms_precise).sum(),
        }
    }
}
