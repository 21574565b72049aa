//! What a [`PassManager::run`](super::PassManager::run) call reports: every pass run with its
//! change count, op counts and timing, per-group iteration counts, and the IR dumps requested
//! with `print_after`.

#[cfg(doc)]
use super::PassManager;
use serde::Serialize;

/// What one run of a pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PassResult {
    /// Whether the graph changed.
    pub changed: bool,
    /// Number of changes (ops removed, merged, folded, ...; each pass documents its unit).
    pub changes: usize,
}

impl PassResult {
    /// A result of `changes` changes (`changed` is `changes > 0`).
    pub fn changes(changes: usize) -> Self {
        PassResult {
            changed: changes > 0,
            changes,
        }
    }

    /// No change.
    pub fn unchanged() -> Self {
        PassResult::default()
    }
}

/// Why [`PassManager::run`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Ran the pass list once (no fixed-point iteration requested).
    Completed,
    /// A whole sweep of the pass list changed nothing.
    FixedPoint,
    /// The iteration limit was reached while passes still changed the graph.
    IterationLimit,
    /// The `stop_after` step limit kept further pass runs from running.
    StopAfter,
}

/// One run of one pass.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PassRun {
    /// 1-based number of this run over the whole [`PassManager::run`] call.
    pub run: usize,
    /// Name of the group the pass ran in (`""` for the unnamed group of a plain manager).
    pub group: &'static str,
    /// 1-based iteration of the group's pass list.
    pub iteration: usize,
    /// Pass name.
    pub pass: &'static str,
    /// What the pass reported.
    pub result: PassResult,
    /// Ops (regions included, inputs excluded) before the pass.
    pub ops_before: usize,
    /// Ops (regions included, inputs excluded) after the pass.
    pub ops_after: usize,
    /// Wall time of the pass, microseconds.
    pub time_us: u64,
    /// Wall time of the verifier after the pass, microseconds (0 when not verifying).
    pub verify_us: u64,
}

/// Totals of one pass over all its runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PassTotals {
    /// Pass name.
    pub pass: &'static str,
    /// Number of runs.
    pub runs: usize,
    /// Sum of reported changes.
    pub changes: usize,
    /// Sum of pass wall time, microseconds.
    pub time_us: u64,
}

/// What a [`PassManager::run`] call did: every pass run with its change count and timing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PassReport {
    /// Every pass run, in order.
    pub runs: Vec<PassRun>,
    /// Every group that ran, in order.
    pub groups: Vec<GroupReport>,
    /// Number of (possibly partial) sweeps, summed over the groups.
    pub iterations: usize,
    /// Why the manager stopped: [`StopReason::StopAfter`] when a stop point was reached,
    /// otherwise why the last group stopped.
    pub stop_reason: StopReason,
    /// Ops (regions included, inputs excluded) before the first pass.
    pub ops_before: usize,
    /// Ops (regions included, inputs excluded) after the last pass.
    pub ops_after: usize,
    /// Wall time of the whole call (passes and verification), microseconds.
    pub total_us: u64,
    /// The graph after the runs selected by [`PassManager::print_after`], in run order.
    #[serde(skip)]
    pub dumps: Vec<PassDump>,
}

/// What one group did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupReport {
    /// Group name.
    pub group: &'static str,
    /// Number of (possibly partial) sweeps of the group's pass list.
    pub iterations: usize,
    /// Why the group stopped.
    pub stop_reason: StopReason,
    /// Wall time of the group (passes and verification), microseconds.
    pub time_us: u64,
}

/// The graph after one pass run, in textual IR ([`PassManager::print_after`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PassDump {
    /// 1-based pass run number (as in [`PassRun::run`]).
    pub run: usize,
    /// Pass name.
    pub pass: &'static str,
    /// The graph after the run (`ebb_ir::text::print`).
    pub ir: String,
}

impl PassReport {
    /// Whether any pass changed the graph.
    pub fn changed(&self) -> bool {
        self.runs.iter().any(|r| r.result.changed)
    }

    /// Per-pass totals, in order of first run.
    pub fn totals(&self) -> Vec<PassTotals> {
        let mut out: Vec<PassTotals> = Vec::new();
        for r in &self.runs {
            match out.iter_mut().find(|t| t.pass == r.pass) {
                Some(t) => {
                    t.runs += 1;
                    t.changes += r.result.changes;
                    t.time_us += r.time_us;
                }
                None => out.push(PassTotals {
                    pass: r.pass,
                    runs: 1,
                    changes: r.result.changes,
                    time_us: r.time_us,
                }),
            }
        }
        out
    }
}
