//! Rematerialization and swap candidates with symbolic costs, and budget thresholds.
//!
//! Given a graph and a schedule, this module finds the *candidates* of the memory plan:
//! intermediate values that stay resident across a long gap between two uses (typically
//! activations saved by the forward pass for the backward pass), each with the points at which
//! it may be evicted and must be regenerated, a bounded recompute subgraph over values that
//! stay resident, and symbolic bytes saved, recompute FLOPs and swap bytes. The final choice
//! among candidates is made at run time once the shapes are known (BladeDISC++,
//! arXiv 2412.16985, §3.2; XLA `HloRematerialization` and Checkmate as background).
//!
//! * [`index`]: the schedule index (positions, points, value table, live ranges, use points).
//! * [`candidates`]: the candidate search and its rules (see its module docs).
//! * [`cost`]: the FLOP model.
//! * [`threshold`]: symbolic peak terms and one-symbol budget thresholds.
//!
//! Invariant: the pass does not change the graph; every subset of the candidates it returns,
//! each taken as any of its allowed kinds, passes the independent checker
//! ([`crate::plan::check()`]).

pub mod candidates;
pub mod cost;
pub mod index;
pub mod threshold;

pub use candidates::{Found, Rejection};
pub use index::ScheduleIndex;

use ebb_ir::dim::DimError;
use ebb_ir::{Graph, NodeId, Point};

/// Knobs of the candidate search (see [`candidates`] for the rules they tune).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidateOptions {
    /// Minimum number of points strictly between eviction and regeneration (at least 1).
    pub min_gap: usize,
    /// Maximum number of ops in a recompute subgraph (the value's producer included).
    pub max_recompute_ops: usize,
    /// How many points before the next use a swap's reload is issued.
    pub prefetch_distance: usize,
    /// Values proven smaller than this many bytes are not candidates.
    pub min_bytes: i64,
    /// Offer recompute.
    pub allow_recompute: bool,
    /// Offer swap.
    pub allow_swap: bool,
    /// What becomes of the values the user placed on the host
    /// ([`ebb_ir::Op::AnnotateDevicePlacement`]; see [`candidates`], rule 6).
    pub offload: OffloadPolicy,
}

/// What the plan does with a value the user placed on the host (a `jax.checkpoint` offload
/// policy's `annotate_device_placement` to `pinned_host`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OffloadPolicy {
    /// The value is swapped out after its placement and reloaded before its next use, under
    /// any budget (finalize takes the swap before deciding anything else).
    #[default]
    Force,
    /// The value is a swap candidate whatever its size and gap, which finalize takes only
    /// when the budget needs it.
    Hint,
    /// The placement is an identity like any other; the value is a candidate by the usual
    /// rules.
    Ignore,
}

impl OffloadPolicy {
    /// The CLI spelling (`force`, `hint`, `ignore`).
    pub fn name(self) -> &'static str {
        match self {
            OffloadPolicy::Force => "force",
            OffloadPolicy::Hint => "hint",
            OffloadPolicy::Ignore => "ignore",
        }
    }
}

impl Default for CandidateOptions {
    /// `min_gap` 8, `max_recompute_ops` 8, `prefetch_distance` 3, `min_bytes` 4096, both kinds,
    /// offloads forced.
    fn default() -> Self {
        CandidateOptions {
            min_gap: 8,
            max_recompute_ops: 8,
            prefetch_distance: 3,
            min_bytes: 4096,
            allow_recompute: true,
            allow_swap: true,
            offload: OffloadPolicy::Force,
        }
    }
}

/// Errors of the candidate search.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RematError {
    /// The schedule is not a topological permutation of the graph's ops.
    #[error("invalid schedule at point {point}: {problem}")]
    Schedule {
        /// The offending point.
        point: Point,
        /// What is wrong.
        problem: String,
    },
    /// A size or cost overflowed.
    #[error("symbolic size or cost: {0}")]
    Dim(#[from] DimError),
}

/// Indexes `g` under `schedule` and finds its candidates ([`candidates::find`]).
///
/// # Errors
/// [`RematError::Schedule`] for an invalid schedule, [`RematError::Dim`] on overflow.
pub fn find_candidates(
    g: &Graph,
    schedule: &[NodeId],
    opts: &CandidateOptions,
) -> Result<(ScheduleIndex, Found), RematError> {
    let idx = ScheduleIndex::new(g, schedule)?;
    let found = candidates::find(g, &idx, opts)?;
    Ok((idx, found))
}
