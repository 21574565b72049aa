//! A lower bound on every peak the greedy of `finalize/greedy.rs` can reach at one shape, so
//! that finalize knows a budget is infeasible before any search.
//!
//! Any set of options (at most one per candidate) leaves at point `p` the resident bytes less
//! the bytes of the taken options whose windows cover `p`, plus their transients (never
//! negative; see below). A candidate's options free the same bytes (its value's), so at `p`
//! it frees at most its bytes where one of its present windows covers `p`. Hence
//! `resident[p] − Σ_c bytes_c · [p ∈ ∪ windows of c]` bounds every reachable residency at `p`
//! from below, and its maximum over the points bounds every reachable peak: where it exceeds
//! a budget, every greedy run fails there (the greedy's lowest peak is one of its states'),
//! and finalize goes straight to the budget-independent run whose lowest peak it reports.
//! O(options + points).

use super::options::Options;
use super::prepared::Prepared;
use crate::format::DecisionKind;
use crate::index::{CandidateIx, ExprValues};

/// The largest, over the points, of the resident bytes less everything some option could free
/// there (see the module docs): no greedy state has a lower peak. `resident`: bytes per point
/// before any decision; `options`: the finalize's options (kinds allowed, value sizes).
/// `None` where a recompute's transient bytes are negative at these shapes (the bound would
/// not hold).
pub(super) fn lowest_reachable(
    prep: &Prepared,
    vals: &ExprValues,
    options: &Options<'_>,
    resident: &[i64],
) -> Option<i64> {
    let n = resident.len();
    let mut diff = vec![0i64; n + 1];
    for c in 0..prep.candidates.len() {
        let c = CandidateIx::new(c);
        // The present windows of `c`, each freeing `bytes` (the same for every option).
        let mut hull: Option<(usize, usize)> = None;
        let mut bytes = 0i64;
        for i in options.of_candidate(c) {
            if !options.present(i) {
                continue;
            }
            if options.kind_of(i) == DecisionKind::Recompute
                && vals[prep.candidates[c].transient_bytes] < 0
            {
                return None;
            }
            let w = options.window_of(i);
            let (l, r) = (w.start.index(), w.end.index().min(n.saturating_sub(1)));
            if l > r {
                continue;
            }
            bytes = options.bytes_of(i);
            hull = Some(match hull {
                // Disjoint windows: the first one's part added now.
                Some((hl, hr)) if r + 1 < hl || hr + 1 < l => {
                    diff[hl] -= bytes;
                    diff[hr + 1] += bytes;
                    (l, r)
                }
                Some((hl, hr)) => (hl.min(l), hr.max(r)),
                None => (l, r),
            });
        }
        if let Some((l, r)) = hull {
            diff[l] -= bytes;
            diff[r + 1] += bytes;
        }
    }
    let mut acc = 0i64;
    let mut lowest = i64::MIN;
    for (x, d) in resident.iter().zip(&diff) {
        acc += d;
        lowest = lowest.max(x + acc);
    }
    Some(lowest)
}
