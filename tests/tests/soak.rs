//! The soak run: the runtime, embedded as a trainer embeds it, runs 1 000
//! steps of the `mlp_sgd` training step at random batch sizes (256 distinct shapes, more than
//! the plan cache holds) under a fixed device budget that forces evictions at the larger
//! shapes. Every step's measured peak equals its plan's, the plan cache stays within its
//! capacity, and the process's resident memory stays flat after a warm-up.
//!
//! Resident memory is a whole-process figure, and the other tests of this binary run on
//! other threads: the test re-runs this binary as a child process that runs only
//! [`soak_child`] (selected by the `EBB_SOAK_CHILD` environment variable), and reads the
//! child's report.

use ebb_pipeline::api::Compiler;
use ebb_plan::finalize::{FinalizeError, FinalizeOptions};
use ebb_runtime::inputs::random_inputs;
use ebb_runtime::{Runtime, RuntimeError};
use ebb_testkit::{bind, jax_fixture};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use std::process::Command;

const STEPS: usize = 1000;
const WARM_UP: usize = 300;
const CACHE: usize = 16;
const MAX_B: i64 = 256;

/// Resident set size of this process in bytes (`/proc/self/statm`, pages of 4 KiB).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn soak_child() {
    if std::env::var_os("EBB_SOAK_CHILD").is_none() {
        return; // Only in the child process started by the test below.
    }
    let plan = Compiler::default()
        .compile_file(&jax_fixture("mlp_sgd"))
        .unwrap();
    // A budget of 60% of the largest shape's scheduled peak, or the smallest feasible one.
    let big = bind(&[("B", MAX_B)]);
    let peak = plan.best_variant(&big).unwrap().1;
    let mut budget = peak * 6 / 10;
    let opts = |budget| FinalizeOptions {
        budget: Some(budget),
        ..FinalizeOptions::default()
    };
    if let Err(FinalizeError::Infeasible { smallest, .. }) =
        ebb_plan::finalize::finalize(&plan, &big, &opts(budget))
    {
        budget = smallest;
    }
    let mut rt = Runtime::with_options(plan, opts(budget), CACHE).unwrap();
    let mut rng = Pcg64::seed_from_u64(7);
    let (mut rss_warm, mut decided, mut max_cached) = (0, 0, 0);
    for step in 0..STEPS {
        let b = bind(&[("B", rng.random_range(1..=MAX_B))]);
        let inputs = random_inputs(rt.graph(), &b, step as u64).unwrap();
        let out = match rt.step(&b, inputs) {
            Ok(o) => o,
            Err(RuntimeError::Finalize(e)) => panic!("step {step} at {b:?}: {e}"),
            Err(e) => panic!("step {step} at {b:?}: {e}"),
        };
        let r = &out.report;
        assert_eq!(
            r.measured_peak_bytes as i64, r.peak_bytes_planned,
            "step {step} at {b:?}: measured != planned"
        );
        assert!(r.peak_bytes_planned <= budget, "step {step}: over budget");
        decided += usize::from(r.recompute_decisions + r.swap_decisions > 0);
        max_cached = max_cached.max(rt.cached_plans());
        if step + 1 == WARM_UP {
            rss_warm = rss_bytes();
        }
    }
    let rss_end = rss_bytes();
    println!("SOAK steps={STEPS} budget={budget} decided={decided} max_cached={max_cached} rss_warm={rss_warm} rss_end={rss_end}");
}

#[test]
fn a_thousand_random_shape_steps_keep_memory_flat_and_peaks_exact() {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([
            "soak::soak_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("EBB_SOAK_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "soak child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The report may follow the test harness's `test soak::soak_child ... ` on its line.
    let line = stdout
        .lines()
        .find_map(|l| l.find("SOAK ").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("no report from the child:\n{stdout}"));
    eprintln!("{line}");
    let field = |k: &str| -> i64 {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(field("decided") > 0, "the budget never forced a decision");
    assert!(field("max_cached") <= CACHE as i64);
    let growth = field("rss_end") - field("rss_warm");
    assert!(
        growth <= 8 << 20,
        "resident memory grew by {growth} bytes over the last {} steps",
        STEPS - WARM_UP
    );
}
