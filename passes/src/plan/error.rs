//! The plan checker's error type, shared by the checker (`check.rs`) and the derivation of
//! positions, sizes and live ranges it checks against (`derive.rs`).

use ebb_ir::dim::DimError;
use ebb_ir::{CandidateId, Point, ValueId};

/// A failed proof; every variant names where and what.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CheckError {
    /// The plan was made for another graph (name or number of ops differs).
    #[error(
        "plan is for graph `{plan}` with {plan_ops} ops, not graph `{graph}` with {graph_ops}"
    )]
    GraphMismatch {
        /// Graph name in the plan.
        plan: String,
        /// Op count in the plan.
        plan_ops: usize,
        /// Graph name.
        graph: String,
        /// Op count of the graph (program order, inputs included).
        graph_ops: usize,
    },
    /// The bindings violate a fact of the graph's symbol scope.
    #[error("bindings: {0}")]
    Bindings(DimError),
    /// The schedule is not a topological permutation of the non-input ops.
    #[error("schedule point {point}: {problem}")]
    Schedule {
        /// The point.
        point: Point,
        /// What is wrong.
        problem: String,
    },
    /// A size does not evaluate at the bindings.
    #[error("value {value}: size: {source}")]
    Size {
        /// Value id.
        value: ValueId,
        /// Why.
        source: DimError,
    },
    /// A symbolic claim of the plan does not evaluate at the bindings.
    #[error("plan field `{what}`: {source}")]
    Claim {
        /// The field.
        what: String,
        /// Why.
        source: DimError,
    },
    /// A byte count overflowed `i64`.
    #[error("byte count overflows i64")]
    Overflow,
    /// The plan's value table disagrees with the graph.
    #[error("value {value}: {problem}")]
    ValueTable {
        /// Value id.
        value: ValueId,
        /// What disagrees.
        problem: String,
    },
    /// The plan's live range of a value is not the one the schedule implies.
    #[error("value {value}: planned live range [{planned_def}, {planned_last_use}], derived [{def}, {last_use}]")]
    LiveRange {
        /// Value id.
        value: ValueId,
        /// Planned definition point.
        planned_def: Point,
        /// Planned last use.
        planned_last_use: Point,
        /// Derived definition point.
        def: Point,
        /// Derived last use.
        last_use: Point,
    },
    /// Planned and derived region transient memory differ at a point.
    #[error("point {point}: planned region transient {planned} bytes, derived {derived}")]
    Transient {
        /// The point.
        point: Point,
        /// Planned bytes.
        planned: i64,
        /// Derived bytes.
        derived: i64,
    },
    /// The plan's peak terms do not give the simulated peak.
    #[error("peak terms give {planned} bytes, the simulation {derived} bytes (at point {point})")]
    Peak {
        /// Maximum of the peak terms.
        planned: i64,
        /// Simulated peak.
        derived: i64,
        /// Point of the simulated peak.
        point: Point,
    },
    /// A decision is malformed (unknown candidate, kind not allowed, bad window, wrong claims).
    #[error("decision {decision} (candidate {candidate}): {problem}")]
    Decision {
        /// Index into the decisions.
        decision: usize,
        /// Candidate index.
        candidate: CandidateId,
        /// What is wrong.
        problem: String,
    },
    /// An op reads a value that is not resident.
    #[error("point {point}: `{op}` reads value {value}, which is {why}")]
    UseNotResident {
        /// The point.
        point: Point,
        /// The op's name.
        op: String,
        /// Value id.
        value: ValueId,
        /// Why it is not resident.
        why: String,
    },
    /// A recompute reads a value that is not resident (or is not listed as read).
    #[error("point {point}: recompute of value {value} (candidate {candidate}) reads value {read}, which is {why}")]
    RegenRead {
        /// The point of the regeneration.
        point: Point,
        /// Regenerated value.
        value: ValueId,
        /// Candidate index.
        candidate: CandidateId,
        /// The value read.
        read: ValueId,
        /// What is wrong with it.
        why: String,
    },
    /// A recompute list is not a valid recomputation of the value.
    #[error("point {point}: recompute of value {value} (candidate {candidate}): {problem}")]
    BadRecompute {
        /// The point.
        point: Point,
        /// Regenerated value.
        value: ValueId,
        /// Candidate index.
        candidate: CandidateId,
        /// What is wrong.
        problem: String,
    },
    /// An eviction of a value that is not resident.
    #[error("point {point}: candidate {candidate} evicts value {value}, which is {why}")]
    EvictNotResident {
        /// The point.
        point: Point,
        /// Value id.
        value: ValueId,
        /// Candidate index.
        candidate: CandidateId,
        /// Why it is not resident.
        why: String,
    },
    /// A regeneration of a value that is resident.
    #[error("point {point}: candidate {candidate} regenerates value {value}, which is resident")]
    RegenerateResident {
        /// The point.
        point: Point,
        /// Value id.
        value: ValueId,
        /// Candidate index.
        candidate: CandidateId,
    },
}
