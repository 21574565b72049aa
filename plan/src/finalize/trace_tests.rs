//! The greedy's traces replayed against its full search (`finalize/greedy.rs`): a trace kept
//! from a search at one target, replayed at the target its options were scored over, takes
//! exactly the decisions of a full search there: whether that search met its own (lower)
//! target or stopped short of it (a partial trace, up to the lowest peak it reached).

use super::greedy::{self, Chosen};
use super::options::Options;
use super::segtree::PeakTree;
use super::{bound, evaluate, FinalizeOptions, Prepared};
use crate::format::Plan;
use ebb_ir::{Bindings, BindingsExt};

/// A forward/backward chain of `f` forward ops and their `f` backward mirrors: activation `i`
/// (`B·S·size[i]` bytes) is made at point `i` and read at point `2f − 1 − i`; each is a
/// candidate (recompute of its op, or swap prefetched one point early). Seeded sizes and
/// FLOPs so that scores differ.
fn chain_plan(f: usize, next: &mut impl FnMut(u64) -> u64) -> Plan {
    let n = 2 * f;
    let mut values = Vec::new();
    let mut candidates = Vec::new();
    for i in 0..f {
        let size = 1 + next(64);
        values.push(serde_json::json!({
            "node": i, "output": 0, "bytes": format!("{size}*B*S"),
            "def": i, "last_use": n - 1 - i, "class": "intermediate"
        }));
        let regen = n - 1 - i;
        if regen > i + 2 {
            candidates.push(serde_json::json!({
                "value": i, "evict_after": i, "regenerate_before": regen,
                "prefetch_at": regen - 1, "recompute": [i], "recompute_reads": [],
                "bytes_saved": format!("{size}*B*S"),
                "recompute_flops": format!("{}*B*S*S", 1 + next(5000)),
                "transient_bytes": "0", "swap_bytes": format!("{size}*B*S"),
                "kinds": ["recompute", "swap"]
            }));
        }
    }
    // One output per backward op (the gradients), small.
    for p in f..n {
        values.push(serde_json::json!({
            "node": p, "output": 0, "bytes": "64*S",
            "def": p, "last_use": n - 1, "class": "output"
        }));
    }
    let flops: Vec<String> = (0..n)
        .map(|_| format!("{}*B*S*S", 1 + next(5000)))
        .collect();
    let bytes: Vec<String> = (0..n).map(|_| format!("{}*B*S", 1 + next(64))).collect();
    let kinds: Vec<&str> = (0..n)
        .map(|p| if p % 3 == 0 { "vector" } else { "matrix" })
        .collect();
    let plan = serde_json::json!({
        "version": crate::format::PLAN_VERSION,
        "graph_name": "chain",
        "symbols": {"symbols": [{"name": "B", "lo": 1}, {"name": "S", "lo": 1, "hi": 4096}],
                    "equalities": []},
        "assertions": [], "ops": n, "schedule": (0..n).collect::<Vec<_>>(),
        "values": values, "candidates": candidates, "peak_terms": [],
        "point_flops": flops, "point_bytes": bytes, "point_kinds": kinds
    });
    serde_json::from_value(plan).expect("a valid plan")
}

/// What two decisions must agree on.
fn summary(c: &Chosen) -> (Vec<crate::format::Decision>, i64, i64, u64, u64) {
    (
        c.decisions.clone(),
        c.recompute_flops,
        c.swap_bytes,
        c.recompute_us.to_bits(),
        c.exposed_transfer_us.to_bits(),
    )
}

#[test]
fn a_replayed_trace_decides_as_a_full_search_at_its_scored_target() {
    let mut next = ebb_testkit::lcg(0x5eed_0040);
    let (mut full_traces, mut partial_traces) = (0, 0);
    for case in 0..24 {
        let plan = chain_plan(12 + next(30) as usize, &mut next);
        let prep = Prepared::new(&plan);
        let b = Bindings::parse(&format!("B={},S={}", 1 + next(8), 16 + next(512))).unwrap();
        let opts = FinalizeOptions::default();
        let shaped = evaluate(&plan, &prep, 0, &b, &opts).expect("evaluates");
        let resident = &shaped.resident;
        let peak = resident.iter().copied().max().unwrap();
        let options = || {
            Options::new(
                &prep,
                &shaped.vals,
                &shaped.costs,
                &shaped.value_bytes,
                &opts,
            )
        };
        let lowest = bound::lowest_reachable(&prep, &shaped.vals, &options(), resident).unwrap();
        let candidates = plan.candidates.len();
        let step_us = shaped.costs.step_us();
        // The target the options are scored over (where the replay decides) and the lower
        // one the search fills to: sometimes below what the greedy reaches.
        let span = (peak - lowest.max(0)).max(1);
        let scored_over = peak - span * (1 + next(60) as i64) / 100;
        let fill_to = scored_over - span * next(120) as i64 / 100;
        let search = |budget| {
            greedy::choose(
                &mut options(),
                &prep.cover,
                candidates,
                PeakTree::new(resident),
                resident,
                budget,
                step_us,
                false,
            )
        };
        let kept = greedy::trace(
            &mut options(),
            &prep.cover,
            candidates,
            resident,
            fill_to,
            scored_over,
            step_us,
        );
        let (trace, partial) = match kept {
            Ok(t) => (t, false),
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
        match search(scored_over) {
            Ok((c, Some(_))) => {
                // A partial trace reaches every target from its lowest peak up.
                let replayed = replayed.unwrap_or_else(|| {
                    panic!("case {case}: the trace (partial {partial}) reaches its scored target")
                });
                assert_eq!(
                    summary(&replayed),
                    summary(&c),
                    "case {case}, partial {partial}"
                );
                if partial {
                    partial_traces += 1;
                } else {
                    full_traces += 1;
                }
            }
            // The scored search does not meet it (the budget-independent run decided, or
            // none does): its lowest peak is above it, and so is the trace's.
            Ok((_, None)) | Err(_) => assert!(replayed.is_none() && partial, "case {case}"),
        }
    }
    assert!(
        full_traces >= 3 && partial_traces >= 3,
        "both kinds of trace are exercised: {full_traces} full, {partial_traces} partial"
    );
}
