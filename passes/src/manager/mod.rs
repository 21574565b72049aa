//! The pass manager: runs groups of [`Pass`]es over a [`Graph`] in order — each group once or
//! repeated until a fixed point — with the graph verifier between passes, a [`PassContext`]
//! through which analysis passes hand results (schedule, plan) to later passes, per-pass
//! timing, `stop_after` and `print_after`.
//!
//! Invariant: when [`PassManager::run`] returns `Ok`, the graph verifies
//! ([`ebb_ir::verify::verify`]) after every pass run (unless verification was switched off with
//! [`PassManager::verify`]). When a pass breaks the graph, the error names that pass and its run
//! number, so `stop_after(Some(run - 1))` reproduces the last good graph; this is the
//! bisection workflow of tract's optimizer (`core/src/optim/mod.rs`: consistency checks around
//! every patch and a step limit), and LLVM's `-stop-after=PASS` ([`StopAfter::Pass`]).
//!
//! Passes are looked up by name in [`crate::registry`] ([`crate::registry::pass_by_name`],
//! [`PassManager::from_names`]); this module knows no pass, so passes may use it freely (no
//! import cycle between the manager and the passes it runs).

mod context;
mod report;

pub use context::PassContext;
pub use report::{GroupReport, PassDump, PassReport, PassResult, PassRun, PassTotals, StopReason};

use ebb_ir::verify::{verify, VerifyError};
use ebb_ir::{Graph, OpKind};
use std::time::Instant;

/// A transformation of a [`Graph`].
///
/// A pass must leave a verifying graph verifying, must not change the graph inputs and the
/// number, order and types of the graph outputs, and must report `changed == false` only when
/// it left the graph as it was (the fixed-point loop relies on it). An analysis pass (a
/// schedule, a plan) leaves the graph alone, stores its result in the [`PassContext`] and
/// reports what it produced as its changes (each documents the unit).
pub trait Pass {
    /// Short name, as used on the command line (`dce`, `cse`, `fold`, `schedule`, `plan`).
    fn name(&self) -> &'static str;
    /// Runs the pass over `g`; `cx` holds the results of earlier analysis passes.
    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<PassResult, PassError>;
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
    /// A pass needs the result of an earlier pass that did not run.
    #[error("pass `{pass}` needs the {needs} (run `{producer}` before it)")]
    Missing {
        /// The pass that needs it.
        pass: &'static str,
        /// What is missing.
        needs: &'static str,
        /// The pass that produces it.
        producer: &'static str,
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

/// Where [`PassManager::run`] stops early (LLVM's `-stop-after`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopAfter {
    /// After this many pass runs in total (`Runs(0)` runs nothing), for bisecting a pass bug.
    Runs(usize),
    /// After the first run of the pass with this name, or after the group with this name ends.
    Pass(String),
}

impl std::str::FromStr for StopAfter {
    type Err = std::convert::Infallible;

    /// A number is [`StopAfter::Runs`], anything else a pass or group name.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.parse() {
            Ok(n) => StopAfter::Runs(n),
            Err(_) => StopAfter::Pass(s.to_string()),
        })
    }
}

/// A named list of passes run once, or repeated until a sweep changes nothing.
struct Group {
    name: &'static str,
    passes: Vec<Box<dyn Pass>>,
    max_iterations: usize,
}

/// Runs groups of passes in order; see the module docs.
///
/// ```
/// use ebb_passes::manager::PassManager;
/// use ebb_passes::canon::{Cse, Dce, Fold};
/// let mut g = ebb_ir::text::parse("graph { %0 = input {index = 0, name = \"x\"} : f32[4]\n return %0 }").unwrap();
/// let report = PassManager::new().add_pass(Fold::default()).add_pass(Cse).add_pass(Dce).fixed_point(8).run(&mut g).unwrap();
/// assert!(!report.changed());
/// ```
pub struct PassManager {
    groups: Vec<Group>,
    stop_after: Option<StopAfter>,
    verify: bool,
    print_after: Vec<String>,
}

impl Default for PassManager {
    fn default() -> Self {
        PassManager::new()
    }
}

impl PassManager {
    /// An empty manager: one unnamed group run once, no step limit, verification on.
    pub fn new() -> Self {
        PassManager {
            groups: vec![Group {
                name: "",
                passes: Vec::new(),
                max_iterations: 1,
            }],
            stop_after: None,
            verify: true,
            print_after: Vec::new(),
        }
    }

    fn last(&mut self) -> &mut Group {
        self.groups
            .last_mut()
            .expect("a manager always has a group")
    }

    /// Starts a new group called `name` (run once unless [`PassManager::fixed_point`] follows);
    /// [`PassManager::add_pass`] appends to it. An empty unnamed first group is replaced.
    pub fn group(mut self, name: &'static str) -> Self {
        let g = Group {
            name,
            passes: Vec::new(),
            max_iterations: 1,
        };
        if self.groups.len() == 1
            && self.groups[0].name.is_empty()
            && self.groups[0].passes.is_empty()
        {
            self.groups[0] = g;
        } else {
            self.groups.push(g);
        }
        self
    }

    /// Appends `pass` to the current group.
    pub fn add_pass(mut self, pass: impl Pass + 'static) -> Self {
        self.last().passes.push(Box::new(pass));
        self
    }

    /// Appends a boxed pass to the current group.
    pub fn push(&mut self, pass: Box<dyn Pass>) {
        self.last().passes.push(pass);
    }

    /// Repeats the current group until a sweep changes nothing, at most `max_iterations`
    /// sweeps (at least one).
    pub fn fixed_point(mut self, max_iterations: usize) -> Self {
        self.last().max_iterations = max_iterations.max(1);
        self
    }

    /// Stops after `n` pass runs in total (`Some(0)` runs nothing), for bisecting a pass bug.
    pub fn stop_after(mut self, n: Option<usize>) -> Self {
        self.stop_after = n.map(StopAfter::Runs);
        self
    }

    /// Stops where `at` says (a run count, or a pass or group name); `None` runs everything.
    pub fn stop_at(mut self, at: Option<StopAfter>) -> Self {
        self.stop_after = at;
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

    /// Names of the passes, in order (over all groups).
    pub fn pass_names(&self) -> Vec<&'static str> {
        self.groups
            .iter()
            .flat_map(|g| g.passes.iter().map(|p| p.name()))
            .collect()
    }

    /// Names of the groups, in order (the unnamed first group of [`PassManager::new`] is `""`).
    pub fn group_names(&self) -> Vec<&'static str> {
        self.groups.iter().map(|g| g.name).collect()
    }

    /// Runs every group over `g` with a fresh [`PassContext`] (see [`PassManager::run_in`]).
    pub fn run(&self, g: &mut Graph) -> Result<PassReport, PassError> {
        self.run_in(g, &mut PassContext::new())
    }

    /// Runs every group over `g` in order, passing `cx` to every pass (see the module docs).
    ///
    /// Errors: [`PassError::InvalidInput`] when `g` does not verify on entry,
    /// [`PassError::Verify`] naming the pass after which it stopped verifying, or the error a
    /// pass returned.
    pub fn run_in(&self, g: &mut Graph, cx: &mut PassContext) -> Result<PassReport, PassError> {
        let start = Instant::now();
        if self.verify {
            verify(g).map_err(|source| PassError::InvalidInput {
                source: Box::new(source),
            })?;
        }
        let ops_before = total_op_count(g);
        let mut report = PassReport {
            runs: Vec::new(),
            groups: Vec::new(),
            iterations: 0,
            stop_reason: StopReason::Completed,
            ops_before,
            ops_after: ops_before,
            total_us: 0,
            dumps: Vec::new(),
        };
        let mut stopped = false;
        for group in &self.groups {
            if stopped {
                break;
            }
            let t = Instant::now();
            let (reason, iterations) = self.run_group(group, g, cx, &mut report)?;
            report.iterations += iterations;
            report.stop_reason = reason;
            stopped = reason == StopReason::StopAfter
                || matches!(&self.stop_after, Some(StopAfter::Pass(n)) if n == group.name);
            if reason != StopReason::StopAfter && stopped {
                report.stop_reason = StopReason::StopAfter;
            }
            report.groups.push(GroupReport {
                group: group.name,
                iterations,
                stop_reason: reason,
                time_us: micros(t),
            });
        }
        report.ops_after = report.runs.last().map_or(ops_before, |r| r.ops_after);
        report.total_us = micros(start);
        Ok(report)
    }

    /// Runs one group; returns why it stopped and how many sweeps it began.
    fn run_group(
        &self,
        group: &Group,
        g: &mut Graph,
        cx: &mut PassContext,
        report: &mut PassReport,
    ) -> Result<(StopReason, usize), PassError> {
        let mut ops = report
            .runs
            .last()
            .map_or(report.ops_before, |r| r.ops_after);
        let mut iterations = 0;
        let mut reason = StopReason::Completed;
        for iteration in 1..=group.max_iterations {
            let mut changed = false;
            for pass in &group.passes {
                if matches!(self.stop_after, Some(StopAfter::Runs(n)) if report.runs.len() >= n) {
                    return Ok((StopReason::StopAfter, iterations));
                }
                iterations = iteration;
                let run = report.runs.len() + 1;
                let t = Instant::now();
                let result = pass.run(g, cx)?;
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
                    group: group.name,
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
                if matches!(&self.stop_after, Some(StopAfter::Pass(n)) if n == pass.name()) {
                    return Ok((StopReason::StopAfter, iterations));
                }
            }
            if group.max_iterations > 1 {
                if !changed {
                    reason = StopReason::FixedPoint;
                    break;
                }
                if iteration == group.max_iterations {
                    reason = StopReason::IterationLimit;
                }
            }
        }
        Ok((reason, iterations))
    }
}

fn micros(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX)
}
