//! The swaps a plan must take whatever the budget ([`Plan::forced_swaps`]: the windows of the
//! values the user placed on the host), taken before the greedy decides anything else.
//!
//! Each forced candidate's swap option is priced like any other (`super::options`), its bytes
//! freed over its window in the per-point residency the greedy starts from, and its options
//! made absent for the greedy (which then neither takes it again nor as a recompute). A forced
//! swap is taken even where finalize's kinds leave swaps out, and even without a budget.
//!
//! Invariant: the residency handed on is the residency with the forced swaps taken, in the
//! greedy's model (a swap frees its value over its window and adds nothing elsewhere).

use super::options::Options;
use crate::format::{Decision, DecisionKind, Plan};
use crate::index::CandidateIx;

/// What the forced swaps took.
#[derive(Debug, Default)]
pub(super) struct Forced {
    /// The swaps, in candidate order.
    pub decisions: Vec<Decision>,
    /// Bytes they move each way.
    pub swap_bytes: i64,
    /// Σ each swap's exposed transfer time alone, µs ([`crate::cost`]).
    pub alone_us: f64,
    /// Σ one-way transfer times, µs.
    pub transfer_us: f64,
}

/// Takes `plan`'s forced swaps on `resident` (bytes per point, `value_bytes` per value) and
/// makes their options absent in `options` (see the module docs). A forced candidate without a
/// swap option of a non-empty window, or whose value has no bytes, is skipped.
pub(super) fn take(
    plan: &Plan,
    options: &mut Options<'_>,
    value_bytes: &[i64],
    resident: &mut [i64],
) -> Forced {
    let mut out = Forced::default();
    let n = resident.len();
    for &c in &plan.forced_swaps {
        let Some(cand) = plan.candidates.get(c.index()) else {
            continue;
        };
        let ix: CandidateIx = c.into();
        let swap = options
            .of_candidate(ix)
            .find(|&i| options.kind_of(i) == DecisionKind::Swap);
        let bytes = value_bytes.get(cand.value.index()).copied().unwrap_or(0);
        let Some(i) = swap.filter(|_| bytes > 0) else {
            continue;
        };
        let o = options.get(i);
        let (l, t) = (o.window.start.index(), o.window.after().min(n));
        for slot in resident.iter_mut().take(t).skip(l) {
            *slot -= bytes;
        }
        options.take_before(ix);
        out.decisions.push(Decision {
            candidate: c,
            kind: DecisionKind::Swap,
        });
        out.swap_bytes += bytes;
        out.alone_us += o.cost_us;
        out.transfer_us += o.transfer_us;
    }
    out
}
