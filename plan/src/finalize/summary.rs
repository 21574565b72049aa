//! The decisions of a finalized plan as a flat, self-describing list: what `ebb plan --json`
//! prints, the C ABI hands out and the Python package returns.

use super::ConcretePlan;
use crate::format::{DecisionKind, Plan};
use serde::Serialize;

/// One decision of a [`ConcretePlan`], resolved against its plan variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DecisionSummary {
    /// Index into the variant's `Plan::candidates`.
    pub candidate: usize,
    /// Recompute or swap.
    pub kind: DecisionKind,
    /// The evicted value (index into the variant's `Plan::values`).
    pub value: usize,
    /// The value is freed (or its offload issued) after the op at this schedule point.
    pub evict_after: usize,
    /// A recompute runs before the op at this point; a swap's reload is issued before it.
    pub back_before: usize,
    /// The value's size at the bindings, bytes.
    pub bytes: i64,
}

impl ConcretePlan {
    /// The decisions in the order they were taken. `plan` is the plan this was finalized
    /// from (its variant [`ConcretePlan::variant`] is resolved here); decisions whose candidate
    /// the plan does not have are left out.
    pub fn decision_summaries(&self, plan: &Plan) -> Vec<DecisionSummary> {
        let v = plan.variant(self.variant).unwrap_or(plan);
        self.decisions
            .iter()
            .filter_map(|d| {
                let c = v.candidate(d.candidate)?;
                Some(DecisionSummary {
                    candidate: d.candidate.index(),
                    kind: d.kind,
                    value: c.value.index(),
                    evict_after: c.evict_after.index(),
                    back_before: match d.kind {
                        DecisionKind::Recompute => c.regenerate_before.index(),
                        DecisionKind::Swap => c.prefetch_at.index(),
                    },
                    bytes: self.value_bytes.get(c.value.index()).copied().unwrap_or(0),
                })
            })
            .collect()
    }
}
