//! The pass manager: runs a list of [`Pass`]es over a [`Graph`] in order, optionally repeating
//! the list until a fixed point, with the graph verifier between passes.
//!
//! Invariant: when [`PassManager::run`] returns `Ok`, the graph verifies
//! ([`ebb_ir::verify::verify`]) after every pass run (unless verification was switched off with
//! [`PassManager::verify`]). When a pass breaks the graph, the error names that pass and its run
//! number, so `stop_after(Some(run - 1))` reproduces the last good graph; this is the
//! bisection workflow of tract's optimizer (`core/src/optim/mod.rs`: consistency checks around
//! every patch and a step limit).
//!
//! Passes are looked up by name in [`crate::registry`] ([`crate::registry::pass_by_name`],
//! [`PassManager::from_names`]); this module knows no pass, so passes may use it freely (no
//! import cycle between the manager and the passes it runs).

use ebb_ir::verify::{verify, VerifyError};
use ebb_ir::{Graph, OpKind};
use serde::Serialize;
use std::time::Instant;

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

/// A transformation of a [`Graph`].
///
/// A pass must leave a verifying graph verifying, must not change the graph inputs and the
/// number, order and types of the graph outputs, and must report `changed == false` only when
/// it left the graph as it was (the fixed-point loop relies on it).
pub trait Pass {
    /// Short name, as used on the command line (`dce`, `cse`, `fold`).
    fn name(&self) -> &'static str;
    /// Runs the pass over `g`.
    fn run(&self, g: &mut Graph) -> Result<PassResult, PassError>;
}

/// Errors of the pass manager and of passes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PassError {
    /// A pass gave up; the graph may be partially transformed.
    #[error("pass `{pass}` failed: {message}")]
    Failed {
        /// Pass name.
        pass: &'static str,
        /// What went wrong.
        message: String,
    },
    /// The graph did not verify before the first pass ran.
    #[error("the input graph does not verify (before any pass): {source}")]
    InvalidInput {
        /// The verifier's finding.
        source: Box<VerifyError>,
    },
    /// The graph stopped verifying after a pass: that pass broke it.
    #[error("pass `{pass}` broke the graph (pass run {run}, iteration {iteration}): {source}")]
    Verify {
        /// The pass that broke the graph.
        pass: &'static str,
        /// 1-based number of the pass run (over all iterations); `stop_after(run - 1)` gives
        /// the last valid graph.
        run: usize,
        /// 1-based iteration of the pass list.
        iteration: usize,
        /// The verifier's finding.
        source: Box<VerifyError>,
    },
    /// [`crate::registry::pass_by_name`] was given a name it does not know.
    #[error("unknown pass `{name}` (known passes: {known})")]
    UnknownPass {
        /// The requested name.
        name: String,
        /// Comma-separated known names.
        known: String,
    },
}

/// Number of ops (not `input`s) in `g` and, recursively, in its regions: the op counts the
/// manager reports before and after each pass.
pub fn total_op_count(g: &Graph) -> usize {
    g.order()
        .iter()
        .map(|&id| {
            let n = g.node(id);
            let own = usize::from(n.kind() != OpKind::Input);
            own + n.regions.iter().map(total_op_count).sum::<usize>()
        })
        .sum()
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
    /// 1-based iteration of the pass list.
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
    /// Number of (possibly partial) sweeps of the pass list.
    pub iterations: usize,
    /// Why the manager stopped.
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

/// Runs passes in order; see the module docs.
///
/// ```
/// use ebb_passes::manager::PassManager;
/// use ebb_passes::canon::{Cse, Dce, Fold};
/// let mut g = ebb_ir::text::parse("graph { %0 = input {index = 0, name = \"x\"} : f32[4]\n return %0 }").unwrap();
/// let report = PassManager::new().add_pass(Fold::default()).add_pass(Cse).add_pass(Dce).fixed_point(8).run(&mut g).unwrap();
/// assert!(!report.changed());
/// ```
pub struct PassManager {
    passes: Vec<Box<dyn Pass>>,
    max_iterations: usize,
    stop_after: Option<usize>,
    verify: bool,
    print_after: Vec<String>,
}

impl Default for PassManager {
    fn default() -> Self {
        PassManager::new()
    }
}

impl PassManager {
    /// An empty manager: one sweep, no step limit, verification on.
    pub fn new() -> Self {
        PassManager {
            passes: Vec::new(),
            max_iterations: 1,
            stop_after: None,
            verify: true,
            print_after: Vec::new(),
        }
    }

    /// Appends `pass` to the list.
    pub fn add_pass(mut self, pass: impl Pass + 'static) -> Self {
        self.passes.push(Box::new(pass));
        self
    }

    /// Appends a boxed pass to the list.
    pub fn push(&mut self, pass: Box<dyn Pass>) {
        self.passes.push(pass);
    }

    /// Repeats the pass list until a sweep changes nothing, at most `max_iterations` sweeps
    /// (at least one).
    pub fn fixed_point(mut self, max_iterations: usize) -> Self {
        self.max_iterations = max_iterations.max(1);
        self
    }

    /// Stops after `n` pass runs in total (`Some(0)` runs nothing), for bisecting a pass bug.
    pub fn stop_after(mut self, n: Option<usize>) -> Self {
        self.stop_after = n;
        self
    }

    /// Records the graph in textual IR after every run of the passes named in `names`
    /// (`all` for every pass) into [`PassReport::dumps`], as `mlir-opt --mlir-print-ir-after`
    /// and XLA's `--xla_dump_hlo_pass_re` do.
    pub fn print_after<S: AsRef<str>>(mut self, names: &[S]) -> Self {
        self.print_after = names.iter().map(|n| n.as_ref().to_string()).collect();
        self
    }

    fn prints_after(&self, pass: &str) -> bool {
        self.print_after.iter().any(|n| n == pass || n == "all")
    }

    /// Whether to verify the graph before the first pass and after every pass (default: on).
    pub fn verify(mut self, on: bool) -> Self {
        self.verify = on;
        self
    }

    /// Names of the passes in the list, in order.
    pub fn pass_names(&self) -> Vec<&'static str> {
        self.passes.iter().map(|p| p.name()).collect()
    }

    /// Runs the pass list over `g` (see the module docs).
    ///
    /// Errors: [`PassError::InvalidInput`] when `g` does not verify on entry,
    /// [`PassError::Verify`] naming the pass after which it stopped verifying, or the error a
    /// pass returned.
    pub fn run(&self, g: &mut Graph) -> Result<PassReport, PassError> {
        let start = Instant::now();
        if self.verify {
            verify(g).map_err(|source| PassError::InvalidInput {
                source: Box::new(source),
            })?;
        }
        let ops_before = total_op_count(g);
        let mut report = PassReport {
            runs: Vec::new(),
            iterations: 0,
            stop_reason: StopReason::Completed,
            ops_before,
            ops_after: ops_before,
            total_us: 0,
            dumps: Vec::new(),
        };
        let mut ops = ops_before;
        'sweeps: for iteration in 1..=self.max_iterations {
            let mut changed = false;
            for pass in &self.passes {
                if self.stop_after.is_some_and(|n| report.runs.len() >= n) {
                    report.stop_reason = StopReason::StopAfter;
                    break 'sweeps;
                }
                if report.iterations < iteration {
                    report.iterations = iteration;
                }
                let run = report.runs.len() + 1;
                let t = Instant::now();
                let result = pass.run(g)?;
                let time_us = micros(t);
                let t = Instant::now();
                if self.verify {
                    verify(g).map_err(|source| PassError::Verify {
                        pass: pass.name(),
                        run,
                        iteration,
                        source: Box::new(source),
                    })?;
                }
                let verify_us = if self.verify { micros(t) } else { 0 };
                let ops_after = total_op_count(g);
                report.runs.push(PassRun {
                    run,
                    iteration,
                    pass: pass.name(),
                    result,
                    ops_before: ops,
                    ops_after,
                    time_us,
                    verify_us,
                });
                if self.prints_after(pass.name()) {
                    report.dumps.push(PassDump {
                        run,
                        pass: pass.name(),
                        ir: ebb_ir::text::print(g),
                    });
                }
                ops = ops_after;
                changed |= result.changed;
            }
            if self.max_iterations > 1 {
                if !changed {
                    report.stop_reason = StopReason::FixedPoint;
                    break;
                }
                if iteration == self.max_iterations {
                    report.stop_reason = StopReason::IterationLimit;
                }
            }
        }
        report.ops_after = ops;
        report.total_us = micros(start);
        Ok(report)
    }
}

fn micros(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX)
}
