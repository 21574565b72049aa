//! E-graph rewrites that lower memory (egg): the graph's main body becomes an e-graph, rule
//! groups add equivalent forms, and a memory-aware extraction picks the form that
//! materializes the fewest bytes.
//!
//! Pipeline of [`rewrite`]:
//! 1. Encoding (`encode.rs`): every op of the main body becomes an e-node ([`lang`]
//!    describes the language: op kind, an interned payload leaf as first child, operand
//!    e-classes; multi-result and region-carrying control ops are opaque). The e-class
//!    analysis ([`lang::TypeAnalysis`]) holds each class's symbolic [`ebb_ir::TensorType`].
//! 2. An egg [`egg::Runner`] applies the chosen [`RuleGroup`]s under hard caps
//!    ([`Limits`]: iterations, e-nodes, time, and per-rule match limits through egg's
//!    `BackoffScheduler`), and reports why it stopped.
//! 3. Extraction (`extract.rs`): a DAG-cost extraction (bytes of materialized
//!    intermediates, evaluated at representative bindings of the symbols) that starts from
//!    the input graph and only takes an alternative when it strictly lowers that cost; it
//!    never creates cycles.
//! 4. Emission (`emit.rs`): the graph is rebuilt from the chosen e-nodes, one op per e-class
//!    (shared subterms stay shared), in the input's program order, and verified.
//!
//! # Rulebook
//! Rules follow Cranelift's `opts/README.md`: grouped by topic, one file per group, each
//! rule named `group/what`, each in one direction only, with no blanket commutativity or
//! associativity (a rule that needs `add(y, x)` looks it up instead of adding it), and with
//! hard caps on matching. A rule proposes a form; the extraction decides whether it is
//! better, so rules are guarded only to keep the e-graph small and the types consistent.
//! Every rule is exact, except `reassociate/sum-of-reductions` (reassociates a floating-point
//! sum; see [`reassociate`]).
//! * [`sink_broadcast`]: `broadcast_in_dim` below elementwise ops.
//! * [`sink_convert`]: widening `convert` below data-movement ops.
//! * [`fold_transpose_dot`]: `transpose` of a `dot_general` operand into its dimension
//!   numbers.
//! * [`reassociate`]: reductions of gradient-accumulation chains, negations, reshapes.
//!
//! Invariant: the result computes the same outputs as the input (exactly, except for the
//! reassociation above), has the same inputs, outputs, output names, symbol scope and
//! assertions, verifies, and materializes at most as many bytes as the input under the
//! cost model (equality when no rule helps: the graph is then unchanged).
//!
//! Not done here: regions are not rewritten by [`rewrite`] (the pass, [`RewritePass`], runs it
//! again on each `while` and `case` region; `reduce` bodies are left alone), and peak
//! memory is not modelled by the extraction (it depends on the schedule, chosen later); in
//! particular a broadcast kept alive from the forward to the backward pass by a consumer
//! that cannot take a small operand (JAX's causal-mask `select`) is left to
//! rematerialization.
//!
//! `cargo test --release -p ebb-tests --test integration rewrite_fixtures -- --nocapture
//! --include-ignored` prints each group's time on the 24-layer GPT-2 fixture (14k ops) and its
//! effect on the peak (of the groups, only `fold_transpose_dot` lowers gpt2_small's, at
//! B=8,S=256 by about 2.4% when last measured).

mod emit;
mod encode;
mod extract;
pub mod fold_transpose_dot;
pub mod lang;
mod pass;
pub mod reassociate;
pub mod rules;
pub mod sink_broadcast;
pub mod sink_convert;

use ebb_ir::verify::{verify, VerifyError};
use ebb_ir::Graph;
use egg::{BackoffScheduler, Id, Pattern, Runner, Searcher};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub use lang::{ClassData, EbbEGraph, EbbNode, TypeAnalysis};
pub use pass::RewritePass;
pub use rules::Rule;

/// A topic of rules. See the module docs of each group.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleGroup {
    /// [`sink_broadcast`].
    SinkBroadcast,
    /// [`sink_convert`].
    SinkConvert,
    /// [`fold_transpose_dot`].
    FoldTransposeDot,
    /// [`reassociate`].
    Reassociate,
}

impl RuleGroup {
    /// All groups.
    pub const ALL: [RuleGroup; 4] = [
        RuleGroup::SinkBroadcast,
        RuleGroup::SinkConvert,
        RuleGroup::FoldTransposeDot,
        RuleGroup::Reassociate,
    ];

    /// The group's name (`sink_broadcast`, ...).
    pub fn name(self) -> &'static str {
        match self {
            RuleGroup::SinkBroadcast => "sink_broadcast",
            RuleGroup::SinkConvert => "sink_convert",
            RuleGroup::FoldTransposeDot => "fold_transpose_dot",
            RuleGroup::Reassociate => "reassociate",
        }
    }

    /// Looks a group up by name.
    pub fn from_name(s: &str) -> Option<RuleGroup> {
        RuleGroup::ALL.into_iter().find(|g| g.name() == s)
    }

    /// The group's rules.
    pub fn rules(self) -> Vec<Rule> {
        match self {
            RuleGroup::SinkBroadcast => sink_broadcast::rules(),
            RuleGroup::SinkConvert => sink_convert::rules(),
            RuleGroup::FoldTransposeDot => fold_transpose_dot::rules(),
            RuleGroup::Reassociate => reassociate::rules(),
        }
    }
}

/// Hard caps on equality saturation and the extraction's cost sampling.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Iterations of the runner at most.
    pub iterations: usize,
    /// E-nodes at most (the runner stops after the iteration that exceeds it).
    pub nodes: usize,
    /// Wall-clock time of the runner at most, in milliseconds.
    pub time_ms: u64,
    /// Matches per rule and iteration before egg's `BackoffScheduler` bans the rule for a
    /// while (the limit doubles with each ban).
    pub matches_per_rule: usize,
    /// Representative bindings at which extraction evaluates symbolic sizes.
    pub bindings: usize,
    /// Merge structurally identical ops of the input (common-subexpression elimination).
    /// Off by default: the canonicalization pass does CSE, and with it off a graph no rule
    /// applies to comes back unchanged.
    pub merge_duplicates: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            iterations: 8,
            nodes: 500_000,
            time_ms: 5_000,
            matches_per_rule: 10_000,
            bindings: 4,
            merge_duplicates: false,
        }
    }
}

/// Why equality saturation stopped (egg's `StopReason`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// No rule changed the e-graph: every equivalent form the rules can reach is present.
    Saturated,
    /// The iteration cap was hit (iterations done).
    IterationLimit(usize),
    /// The e-node cap was exceeded (e-nodes then, egg's `total_size`).
    NodeLimit(usize),
    /// The time cap was exceeded (seconds elapsed).
    TimeLimit(f64),
    /// Something else.
    Other(String),
}

impl From<&egg::StopReason> for StopReason {
    fn from(r: &egg::StopReason) -> Self {
        match r {
            egg::StopReason::Saturated => StopReason::Saturated,
            egg::StopReason::IterationLimit(n) => StopReason::IterationLimit(*n),
            egg::StopReason::NodeLimit(n) => StopReason::NodeLimit(*n),
            egg::StopReason::TimeLimit(t) => StopReason::TimeLimit(*t),
            egg::StopReason::Other(s) => StopReason::Other(s.clone()),
        }
    }
}

/// What a [`rewrite`] did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RewriteReport {
    /// The groups that ran.
    pub groups: Vec<RuleGroup>,
    /// Why saturation stopped.
    pub stop_reason: StopReason,
    /// Runner iterations.
    pub iterations: usize,
    /// E-nodes in the final e-graph.
    pub egraph_nodes: usize,
    /// E-classes in the final e-graph.
    pub egraph_classes: usize,
    /// Times each rule applied (newly unioned something), by rule name; rules that never
    /// applied are listed with 0.
    pub applied: BTreeMap<String, usize>,
    /// Ops (inputs excluded) of the input graph.
    pub ops_before: usize,
    /// Ops (inputs excluded) of the result.
    pub ops_after: usize,
    /// E-classes whose extracted op differs from the input's op.
    pub classes_changed: usize,
    /// The representative bindings of the cost model.
    pub bindings: Vec<BTreeMap<String, i64>>,
    /// Bytes of materialized values (inputs excluded) at each binding, before.
    pub bytes_before: Vec<i64>,
    /// Same, after.
    pub bytes_after: Vec<i64>,
    /// Milliseconds spent verifying and encoding the input.
    pub encode_ms: f64,
    /// Milliseconds spent saturating.
    pub saturate_ms: f64,
    /// Milliseconds spent extracting and emitting the result.
    pub extract_ms: f64,
    /// Milliseconds in total, both verifications included.
    pub total_ms: f64,
}

/// Errors of the rewrite pass.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RewriteError {
    /// The input graph does not verify.
    #[error("input graph does not verify: {0}")]
    InvalidInput(Box<VerifyError>),
    /// An op could not be encoded.
    #[error("cannot encode op #{position} `{op}`: {msg}")]
    Encode {
        /// Position in program order.
        position: usize,
        /// Op name.
        op: String,
        /// What went wrong.
        msg: String,
    },
    /// A rule merged e-classes of different types (a bug in a rule).
    #[error("rule merged e-classes of different types: {0}")]
    TypeConflict(String),
    /// Extraction or emission failed.
    #[error("extraction failed: {0}")]
    Extract(String),
    /// The rewritten graph does not verify (a bug in a rule or in emission).
    #[error("rewritten graph does not verify: {0}")]
    InvalidOutput(Box<VerifyError>),
    /// A pattern given to [`Explored::output_matches`] does not parse.
    #[error("cannot parse pattern `{pattern}`: {msg}")]
    Pattern {
        /// The pattern text.
        pattern: String,
        /// The parser's message.
        msg: String,
    },
}

/// An e-graph after equality saturation, for inspecting what the rules proved.
pub struct Explored {
    /// The saturated e-graph.
    pub egraph: EbbEGraph,
    /// The e-class of each graph output.
    pub outputs: Vec<Id>,
    /// Why saturation stopped.
    pub stop_reason: StopReason,
    /// Runner iterations.
    pub iterations: usize,
    /// Times each rule applied, by name.
    pub applied: BTreeMap<String, usize>,
    /// Milliseconds spent verifying and encoding the input.
    pub encode_ms: f64,
    /// Milliseconds spent saturating.
    pub saturate_ms: f64,
    encoded: encode::Encoded,
}

impl Explored {
    /// Whether `pattern` (e.g. `(broadcast_in_dim ?a (add ?x ?y))`) matches an e-node in the
    /// e-class of graph output `output`: that the rules proved the output equal to that form.
    pub fn output_matches(&self, output: usize, pattern: &str) -> Result<bool, RewriteError> {
        let p: Pattern<EbbNode> = pattern.parse().map_err(|e| RewriteError::Pattern {
            pattern: pattern.into(),
            msg: format!("{e:?}"),
        })?;
        Ok(self
            .outputs
            .get(output)
            .is_some_and(|c| p.search_eclass(&self.egraph, *c).is_some()))
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Encodes `g` and runs the rules of `groups` on it under `limits` (steps 1 and 2 of the
/// module docs).
///
/// Errors: [`RewriteError::InvalidInput`] if `g` does not verify, [`RewriteError::Encode`],
/// [`RewriteError::TypeConflict`].
pub fn explore(g: &Graph, groups: &[RuleGroup], limits: &Limits) -> Result<Explored, RewriteError> {
    let t0 = Instant::now();
    verify(g).map_err(|e| RewriteError::InvalidInput(Box::new(e)))?;
    let mut enc = encode::encode(g, limits.merge_duplicates)?;
    let t1 = Instant::now();
    let rules: Vec<Rule> = groups.iter().flat_map(|gr| gr.rules()).collect();
    let mut applied: BTreeMap<String, usize> =
        rules.iter().map(|r| (r.name.to_string(), 0)).collect();
    let egraph = std::mem::take(&mut enc.egraph);
    let runner: Runner<EbbNode, TypeAnalysis> = Runner::new(TypeAnalysis::default())
        .with_egraph(egraph)
        .with_iter_limit(limits.iterations)
        .with_node_limit(limits.nodes)
        .with_time_limit(Duration::from_millis(limits.time_ms))
        .with_scheduler(
            BackoffScheduler::default().with_initial_match_limit(limits.matches_per_rule),
        )
        .run(&rules);
    for it in &runner.iterations {
        for (name, n) in &it.applied {
            *applied.entry(name.to_string()).or_default() += n;
        }
    }
    let stop_reason = runner
        .stop_reason
        .as_ref()
        .map(StopReason::from)
        .unwrap_or_else(|| StopReason::Other("not run".into()));
    let iterations = runner.iterations.len();
    let mut egraph = runner.egraph;
    egraph.rebuild();
    if let Some(c) = egraph.analysis.conflicts.first() {
        return Err(RewriteError::TypeConflict(c.clone()));
    }
    let outputs = g
        .outputs()
        .iter()
        .map(|v| egraph.find(enc.values[v]))
        .collect();
    let (encode_ms, saturate_ms) = (ms(t1 - t0), ms(t1.elapsed()));
    Ok(Explored {
        egraph,
        outputs,
        stop_reason,
        iterations,
        applied,
        encode_ms,
        saturate_ms,
        encoded: enc,
    })
}

/// Rewrites `g` with the rule groups `groups` under `limits` and extracts the form that
/// materializes the fewest bytes (see the module docs). With no groups (or when no rule
/// helps) the result equals `g` up to value numbering.
///
/// Errors: see [`RewriteError`]; the input is never modified.
pub fn rewrite(
    g: &Graph,
    groups: &[RuleGroup],
    limits: &Limits,
) -> Result<(Graph, RewriteReport), RewriteError> {
    let t0 = Instant::now();
    let mut x = explore(g, groups, limits)?;
    let t1 = Instant::now();
    let bindings = g.scope.representative_bindings(limits.bindings.max(1));
    x.encoded.egraph = std::mem::take(&mut x.egraph);
    let enc = &x.encoded;
    let ex = extract::extract(&enc.egraph, enc, &bindings)?;
    let out = emit::emit(g, enc, &enc.egraph, &ex)?;
    let t2 = Instant::now();
    verify(&out).map_err(|e| RewriteError::InvalidOutput(Box::new(e)))?;
    let report = RewriteReport {
        groups: groups.to_vec(),
        stop_reason: x.stop_reason,
        iterations: x.iterations,
        egraph_nodes: enc.egraph.total_number_of_nodes(),
        egraph_classes: enc.egraph.number_of_classes(),
        applied: x.applied,
        ops_before: g.op_count(),
        ops_after: out.op_count(),
        classes_changed: ex.changed,
        bindings: bindings
            .iter()
            .map(|b| b.iter().map(|(s, v)| (s.name().to_string(), *v)).collect())
            .collect(),
        bytes_before: ex.bytes_before,
        bytes_after: ex.bytes_after,
        encode_ms: x.encode_ms,
        saturate_ms: x.saturate_ms,
        extract_ms: ms(t2 - t1),
        total_ms: ms(t0.elapsed()),
    };
    Ok((out, report))
}
