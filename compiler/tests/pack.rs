//! The batch-packing oracle (`ebb_plan::pack`, `ebb pack`) on the 2-layer GPT: every batch of
//! every policy fits when finalized again independently (and the checker proves it), every
//! length is packed exactly once, and Ebb's packing needs no more steps than the baselines.

use ebb_ir::{Bindings, Symbol};
use ebb_pipeline::api::Compiler;
use ebb_pipeline::{self as pipeline, Pricing};
use ebb_plan::device::DeviceProfile;
use ebb_plan::finalize::{finalize, FinalizeOptions};
use ebb_plan::format::{DecisionKind, Plan};
use ebb_plan::pack::{pack, PackError, PackOptions, Packing, Policy};
use ebb_testkit::{bs as bind, jax_fixture};
use proptest::prelude::*;
use std::process::Command;
use std::sync::OnceLock;

fn plan() -> &'static Plan {
    static PLAN: OnceLock<Plan> = OnceLock::new();
    PLAN.get_or_init(|| {
        Compiler::default()
            .compile_file(&jax_fixture("gpt2_tiny_adamw"))
            .unwrap()
    })
}

/// Half the scheduled peak of a 16 × 256 batch.
fn budget() -> i64 {
    let r = pipeline::plan_report(plan(), &bind(16, 256), None).unwrap();
    r.peak_bytes_scheduled / 2
}

fn options(budget: i64) -> PackOptions {
    PackOptions {
        batch_symbol: Symbol::new("B"),
        seq_symbol: Symbol::new("S"),
        fixed: Bindings::new(),
        budget,
        device: DeviceProfile::named("h100-sxm-pcie5").unwrap(),
        kinds: vec![DecisionKind::Recompute, DecisionKind::Swap],
        max_added_fraction: 0.1,
        bucket_width: 64,
    }
}

/// Lengths from a seeded linear congruential generator: mostly short, a few long.
fn lengths(n: usize, seed: u64) -> Vec<i64> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (x >> 33) as f64 / (1u64 << 31) as f64;
            (8.0 * (u * 4.2).exp()).round().clamp(1.0, 512.0) as i64
        })
        .collect()
}

/// The invariants of one packing, checked against an independent finalize of every batch.
fn check(p: &Packing, lengths: &[i64], opts: &PackOptions) {
    let mut seen = vec![0u32; lengths.len()];
    for b in &p.batches {
        assert_eq!(b.batch, b.indices.len() as i64, "{:?}", p.policy);
        let longest = b.indices.iter().map(|&i| lengths[i]).max().unwrap();
        assert!(b.seq >= longest, "{:?}: S={} < {longest}", p.policy, b.seq);
        assert_eq!(b.tokens, b.indices.iter().map(|&i| lengths[i]).sum::<i64>());
        assert_eq!(b.padding_tokens, b.batch * b.seq - b.tokens);
        for &i in &b.indices {
            seen[i] += 1;
        }
        let kinds = if p.decisions {
            opts.kinds.clone()
        } else {
            vec![]
        };
        // As the oracle finalizes (no offsets: with offsets the choice between plan variants
        // also weighs whether the arena fits the budget), under the target a finalize with
        // offsets decides under.
        let target = FinalizeOptions {
            budget: Some(opts.budget),
            ..Default::default()
        }
        .decisions_target();
        let fo = FinalizeOptions {
            budget: target,
            device: opts.device.clone(),
            kinds,
            offsets: false,
        };
        let c = finalize(plan(), &bind(b.batch, b.seq), &fo).unwrap();
        assert!(c.peak_bytes_planned <= opts.budget);
        assert_eq!(c.peak_bytes_planned, b.cost.peak_bytes);
        assert!(c.overhead_us <= opts.max_added_fraction * c.step_us + 1e-9);
        if !p.decisions {
            assert!(c.decisions.is_empty());
        }
    }
    assert!(
        seen.iter().all(|&n| n == 1),
        "{:?}: not a partition",
        p.policy
    );
}

#[test]
fn every_batch_of_every_policy_fits_and_the_checker_proves_it() {
    let (lengths, opts) = (lengths(600, 7), options(budget()));
    let r = pack(plan(), &lengths, &opts).unwrap();
    assert_eq!(r.packings.len(), 5, "with and without decisions");
    for p in &r.packings {
        check(p, &lengths, &opts);
    }
    let ebb = &r.packings[0];
    assert_eq!(ebb.policy, Policy::Ebb);
    for p in &r.packings[1..] {
        assert!(
            ebb.steps <= p.steps,
            "{:?}: {} < {}",
            p.policy,
            p.steps,
            ebb.steps
        );
    }
    assert!(r.gain_vs_fixed_tokens >= 1.0 && r.gain_vs_buckets >= 1.0);
    // Some batches need decisions (the budget is half a 16 × 256 batch's peak).
    assert!(ebb
        .batches
        .iter()
        .any(|b| b.cost.recompute_decisions + b.cost.swap_decisions > 0));
    // The independent checker proves the decisions of Ebb's largest batches.
    let g = pipeline::plan_graph(plan()).unwrap();
    let pricing = Pricing {
        device: opts.device.clone(),
        kinds: opts.kinds.clone(),
    };
    for b in ebb.batches.iter().take(3) {
        let (_, c) = pipeline::plan_report_finalized(
            plan(),
            &bind(b.batch, b.seq),
            Some(ebb_pipeline::size::Budget::Bytes(opts.budget)),
            &pricing,
        )
        .unwrap();
        pipeline::prove_at(plan(), &g, &bind(b.batch, b.seq), &c).unwrap();
    }
}

#[test]
fn errors_name_the_length_and_the_smallest_feasible_budget() {
    let opts = options(budget());
    assert!(matches!(pack(plan(), &[], &opts), Err(PackError::Empty)));
    assert!(matches!(
        pack(plan(), &[4, 0], &opts),
        Err(PackError::BadLength {
            index: 1,
            length: 0
        })
    ));
    let e = pack(plan(), &[4, 513], &opts).unwrap_err();
    assert!(
        matches!(
            e,
            PackError::TooLong {
                index: 1,
                max: 512,
                ..
            }
        ),
        "{e}"
    );
    let e = pack(plan(), &[300], &options(1 << 20))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("length 300") && e.contains("smallest feasible budget"),
        "{e}"
    );
    let mut bad = options(budget());
    bad.seq_symbol = Symbol::new("T");
    let e = pack(plan(), &[4], &bad).unwrap_err().to_string();
    assert!(e.contains("no symbol `T`"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    /// Random lengths and budgets: the invariants hold for Ebb's packing, and it never needs
    /// more steps than token-budget batching.
    #[test]
    fn packings_are_partitions_that_fit(seed in 0u64..1000, n in 1usize..120, frac in 0.3f64..1.5) {
        let opts = options((budget() as f64 * frac) as i64);
        let lengths = lengths(n, seed);
        match pack(plan(), &lengths, &opts) {
            Ok(r) => {
                check(&r.packings[0], &lengths, &opts);
                prop_assert!(r.packings[0].steps <= r.packings[1].steps);
            }
            Err(PackError::DoesNotFit { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn cli_packs_a_lengths_file_and_reports_json() {
    let dir = ebb_testkit::scratch("pack-cli");
    let file = dir.join("lengths.txt");
    let text: Vec<String> = lengths(300, 3).iter().map(|l| l.to_string()).collect();
    std::fs::write(&file, text.join("\n")).unwrap();
    let budget = budget().to_string();
    let fixture = jax_fixture("gpt2_tiny_adamw");
    let args = [
        "pack",
        fixture.to_str().unwrap(),
        "--lengths",
        file.to_str().unwrap(),
        "--budget",
        budget.as_str(),
        "--device",
        "h100-sxm-pcie5",
    ];
    let ebb = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_ebb"))
            .args(args)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = ebb(&["--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["lengths"], 300);
    assert_eq!(v["device"], "h100-sxm-pcie5");
    assert_eq!(v["packings"][0]["policy"], "ebb");
    assert!(v["gain_vs_fixed_tokens"].as_f64().unwrap() >= 1.0);
    let text = ebb(&[]);
    let t = String::from_utf8_lossy(&text.stdout);
    assert!(
        t.contains("| ebb |") && t.contains("| fixed tokens |"),
        "{t}"
    );
    std::fs::write(&file, "12, 40, x").unwrap();
    let bad = ebb(&[]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("length #2 `x` is not an integer"));
}
