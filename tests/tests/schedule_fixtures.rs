//! Op scheduling on the real JAX fixtures: the scheduled peak is never above program order's,
//! the lower bound is below both, and the pass is fast on the 12- and 24-layer GPT-2 graphs.
//!
//! Run with `cargo test --release -p ebb-tests --test schedule_fixtures -- --nocapture` to see
//! the numbers and timings.

use ebb_ir::{Bindings, Graph, Symbol};
use ebb_passes::memory::{liveness, lower_bound, program_order};
use ebb_passes::schedule::{schedule_checked, ScheduleOptions};
use std::path::Path;
use std::time::Instant;

fn import(name: &str) -> Graph {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/jax/{name}.mlir"));
    match ebb_compiler::stablehlo::import_file(&p) {
        Ok((g, _)) => g,
        Err(e) => panic!("importing {name}: {e}"),
    }
}

fn bind(b: i64, s: i64) -> Bindings {
    [(Symbol::new("B"), b), (Symbol::new("S"), s)].into_iter().collect()
}

fn mib(x: i64) -> String {
    format!("{:.1} MiB", x as f64 / (1024.0 * 1024.0))
}

/// Schedules `name` checked on B=4, S in {128, 512, 1024}; asserts and prints the peaks.
fn check_fixture(name: &str) {
    let g = import(name);
    let sweep: Vec<Bindings> = [128, 512, 1024].iter().map(|&s| bind(4, s)).collect();
    let t = Instant::now();
    let (s, report) = schedule_checked(&g, &ScheduleOptions::default(), &sweep);
    let t_sched = t.elapsed();
    let t = Instant::now();
    let live_s = liveness(&g, &s);
    let live_p = liveness(&g, &program_order(&g));
    let t_live = t.elapsed();
    println!("{name}: {} ops, schedule_checked {t_sched:?}, 2x liveness {t_live:?}", g.op_count());
    println!("{report}");
    for b in &sweep {
        let (ps, _) = live_s.peak(b).unwrap();
        let (pp, _) = live_p.peak(b).unwrap();
        let lb = lower_bound(&g, b).unwrap();
        println!(
            "  {name} {:?}: program order {} scheduled {} lower bound {} ({:+.2}%)",
            b.values().collect::<Vec<_>>(),
            mib(pp),
            mib(ps),
            mib(lb),
            (ps as f64 / pp as f64 - 1.0) * 100.0
        );
        assert!(ps <= pp, "{name} at {b:?}: scheduled {ps} > program order {pp}");
        assert!(lb <= ps && lb <= pp, "{name} at {b:?}: lower bound {lb} above a peak");
    }
}

#[test]
fn gpt2_tiny_adamw_scheduled_peak_is_never_above_program_order() {
    check_fixture("gpt2_tiny_adamw");
}

#[test]
fn gpt2_small_scheduled_peak_is_never_above_program_order() {
    check_fixture("gpt2_small");
}
