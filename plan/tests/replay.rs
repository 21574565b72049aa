//! The finalize greedy's traces replayed against its full search
//! (`ebb_plan::finalize::replay_check`): a trace kept from a search at one target, replayed at
//! the target its options were scored over, takes exactly the decisions of a full search there,
//! whether that search met its own (lower) target or stopped short of it (a partial trace).

use ebb_ir::{Bindings, BindingsExt};
use ebb_plan::finalize::replay_check::{replay_matches_search, Compared};
use ebb_plan::finalize::FinalizeOptions;
use ebb_plan::format::{DecisionKind, Plan};

/// A schedule of `n` ops, each making one value (`B·S·size` bytes) read until a seeded later
/// point, so that lifetimes overlap unevenly (several peaks, windows not nested); each value
/// that lives long enough is a candidate (recompute of its op, or swap prefetched one point
/// early) freeing it between its op and a seeded point before its last read. Seeded sizes and
/// FLOPs so that scores differ.
pub fn random_plan(n: usize, next: &mut impl FnMut(u64) -> u64) -> Plan {
    let mut values = Vec::new();
    let mut candidates = Vec::new();
    for i in 0..n {
        let size = 1 + next(64);
        let last_use = (i + 1 + next(n as u64 / 2) as usize).min(n - 1);
        values.push(serde_json::json!({
            "node": i, "output": 0, "bytes": format!("{size}*B*S"),
            "def": i, "last_use": last_use, "class": "intermediate"
        }));
        if last_use > i + 3 {
            let regen = i + 3 + next((last_use - i - 2) as u64) as usize;
            candidates.push(serde_json::json!({
                "value": i, "evict_after": i, "regenerate_before": regen,
                "prefetch_at": regen - 1, "recompute": [i], "recompute_reads": [],
                "bytes_saved": format!("{size}*B*S"),
                "recompute_flops": format!("{}*B*S*S", 1 + next(5000)),
                "transient_bytes": format!("{}*B*S", next(4)),
                "swap_bytes": format!("{size}*B*S"),
                "kinds": ["recompute", "swap"]
            }));
        }
    }
    let flops: Vec<String> = (0..n)
        .map(|_| format!("{}*B*S*S", 1 + next(5000)))
        .collect();
    let bytes: Vec<String> = (0..n).map(|_| format!("{}*B*S", 1 + next(64))).collect();
    let kinds: Vec<&str> = (0..n)
        .map(|p| if p % 3 == 0 { "vector" } else { "matrix" })
        .collect();
    let plan = serde_json::json!({
        "version": ebb_plan::format::PLAN_VERSION,
        "graph_name": "random",
        "symbols": {"symbols": [{"name": "B", "lo": 1}, {"name": "S", "lo": 1, "hi": 4096}],
                    "equalities": []},
        "assertions": [], "ops": n, "schedule": (0..n).collect::<Vec<_>>(),
        "values": values, "candidates": candidates, "peak_terms": [],
        "point_flops": flops, "point_bytes": bytes, "point_kinds": kinds
    });
    serde_json::from_value(plan).expect("a valid plan")
}

#[test]
fn a_replayed_trace_decides_as_a_full_search_at_its_scored_target() {
    let mut next = ebb_testkit::lcg(0x5eed_0040);
    let (mut full, mut partial) = (0, 0);
    for case in 0..32 {
        let plan = random_plan(24 + next(60) as usize, &mut next);
        let b = Bindings::parse(&format!("B={},S={}", 1 + next(8), 16 + next(512))).unwrap();
        // The target the options are scored over (where the replay decides) and the lower one
        // the search fills to: sometimes below what the greedy reaches.
        let (a, c) = (40 + next(58) as i64, next(150) as i64);
        // Swaps that compute hides cost nothing, whatever their scores: every other case
        // recomputes only, so that where the options are scored matters.
        let kinds = if case % 2 == 0 {
            vec![DecisionKind::Recompute]
        } else {
            vec![DecisionKind::Recompute, DecisionKind::Swap]
        };
        let opts = FinalizeOptions {
            kinds,
            ..FinalizeOptions::default()
        };
        let compared = replay_matches_search(&plan, &b, &opts, |peak, lowest| {
            let lowest = lowest.max(0);
            let scored_over = peak - (peak - lowest) * a / 100;
            (scored_over, scored_over - (scored_over - lowest) * c / 100)
        });
        match compared {
            Ok(Compared::Full) => full += 1,
            Ok(Compared::Partial) => partial += 1,
            Ok(Compared::Unmet) => {}
            Err(e) => panic!("case {case}: {e}"),
        }
    }
    assert!(
        full >= 3 && partial >= 3,
        "both kinds of trace are exercised: {full} full, {partial} partial"
    );
}
