//! A check, for the tests, that the greedy's traces replay as its full search decides
//! (`finalize/greedy.rs`): a trace kept from a search filled to one target with the options
//! scored over another, replayed at the scored target, takes exactly the decisions a full
//! search there takes, whether the traced search met its own (lower) target or stopped short
//! of it (a partial trace, kept up to the lowest peak it reached); and the traced run's own
//! decisions at its target are those of its replay there.

use super::greedy::{self, Chosen};
use super::options::Options;
use super::segtree::PeakTree;
use super::{bound, evaluate, FinalizeError, FinalizeOptions, Prepared};
use crate::format::{Decision, Plan};
use ebb_ir::Bindings;

/// What [`replay_matches_search`] compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compared {
    /// The replay of a trace that met its target decided as the search.
    Full,
    /// The replay of a partial trace decided as the search.
    Partial,
    /// The scored search does not meet the target (nor does the replay): nothing to compare.
    Unmet,
}

/// Plan `plan` (variant 0) at bindings `b` on the device of `opts`: `targets(peak, lowest)`
/// (the peak without decisions and [`bound::lowest_reachable`], bytes) gives `(scored_over,
/// fill_to)`; a trace filled to `fill_to` with the options scored over `scored_over` is
/// replayed at `scored_over` and compared with the full search there (decisions, recomputed
/// FLOPs, swapped bytes and both times, bit for bit).
///
/// # Errors
/// A message naming the difference; [`FinalizeError`]s as text.
pub fn replay_matches_search(
    plan: &Plan,
    b: &Bindings,
    opts: &FinalizeOptions,
    targets: impl FnOnce(i64, i64) -> (i64, i64),
) -> Result<Compared, String> {
    let prep = Prepared::new(plan);
    let shaped = evaluate(plan, &prep, 0, b, opts).map_err(|e: FinalizeError| e.to_string())?;
    let resident = &shaped.resident;
    let options = || {
        Options::new(
            &prep,
            &shaped.vals,
            &shaped.costs,
            &shaped.value_bytes,
            opts,
        )
    };
    let peak = resident.iter().copied().max().unwrap_or(0);
    let lowest = bound::lowest_reachable(&prep, &shaped.vals, &options(), resident)
        .ok_or("negative transient bytes")?;
    let (scored_over, fill_to) = targets(peak, lowest);
    let (candidates, step_us) = (plan.candidates.len(), shaped.costs.step_us());
    let (trace, partial) = match greedy::trace(
        &mut options(),
        &prep.cover,
        candidates,
        resident,
        fill_to,
        scored_over,
        step_us,
    ) {
        Ok((t, traced)) => {
            // The traced run's own second look is its replay's at `fill_to`.
            if let Some(traced) = traced {
                let replayed = greedy::replay(
                    &mut options(),
                    &prep.cover,
                    candidates,
                    resident,
                    &t,
                    fill_to,
                    step_us,
                );
                if replayed.as_ref().map(summary) != Some(summary(&traced)) {
                    return Err(format!(
                        "the traced run at {fill_to} decides {:?}, its replay there {:?}",
                        summary(&traced),
                        replayed.as_ref().map(summary)
                    ));
                }
            }
            (t, false)
        }
        Err(t) => (t, true),
    };
    let replayed = greedy::replay(
        &mut options(),
        &prep.cover,
        candidates,
        resident,
        &trace,
        scored_over,
        step_us,
    );
    let searched = greedy::choose(
        &mut options(),
        &prep.cover,
        candidates,
        PeakTree::new(resident),
        resident,
        scored_over,
        step_us,
        false,
    );
    match (searched, replayed) {
        (Ok((c, Some(_))), Some(r)) if summary(&c) == summary(&r) => Ok(if partial {
            Compared::Partial
        } else {
            Compared::Full
        }),
        (Ok((c, Some(_))), r) => Err(format!(
            "the search at {scored_over} decides {:?}, the replay of the trace filled to \
             {fill_to} (partial: {partial}) {:?}",
            summary(&c),
            r.as_ref().map(summary)
        )),
        // The scored search stops short of the target (the budget-independent run decided, or
        // none meets it): so does the trace, whose lowest peak is above it.
        (_, None) if partial => Ok(Compared::Unmet),
        (_, r) => Err(format!(
            "the scored search misses {scored_over}, the replay gives {:?}",
            r.as_ref().map(summary)
        )),
    }
}

/// What two decisions must agree on: the decisions, recomputed FLOPs, swapped bytes, and the
/// recompute and exposed transfer times' bits.
fn summary(c: &Chosen) -> (Vec<Decision>, i64, i64, u64, u64) {
    (
        c.decisions.clone(),
        c.recompute_flops,
        c.swap_bytes,
        c.recompute_us.to_bits(),
        c.exposed_transfer_us.to_bits(),
    )
}
