//! Op scheduling on the real JAX fixtures: the scheduled peak is never above program order's,
//! the lower bound is below both, and the pass is fast on the 12- and 24-layer GPT-2 graphs.
//!
//! Run with `cargo test --release -p ebb-tests --test integration schedule_fixtures --
//! --nocapture` to see the numbers and timings.

use ebb_ir::Bindings;
use ebb_passes::memory::{liveness, lower_bound, program_order};
use ebb_passes::schedule::{schedule_checked, ScheduleOptions};
use ebb_testkit::{bs as bind, import_fixture as import};
use std::time::Instant;

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
    println!(
        "{name}: {} ops, schedule_checked {t_sched:?}, 2x liveness {t_live:?}",
        g.op_count()
    );
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
        assert!(
            ps <= pp,
            "{name} at {b:?}: scheduled {ps} > program order {pp}"
        );
        assert!(
            lb <= ps && lb <= pp,
            "{name} at {b:?}: lower bound {lb} above a peak"
        );
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

/// The peak report of gpt2_tiny_adamw at B=8, S=256, snapshotted so that changes to the
/// memory model or the scheduler are reviewed.
#[test]
fn gpt2_tiny_adamw_peak_report_snapshot() {
    let g = import("gpt2_tiny_adamw");
    let b = bind(8, 256);
    let (s, report) = schedule_checked(&g, &ScheduleOptions::default(), std::slice::from_ref(&b));
    let live_p = liveness(&g, &program_order(&g));
    let live_s = liveness(&g, &s);
    let (pp, pp_at) = live_p.peak(&b).unwrap();
    let (ps, ps_at) = live_s.peak(&b).unwrap();
    let sym = live_p.symbolic_peak(&g.scope);
    let text = format!(
        "ops: {}\nprogram order peak: {pp} bytes at point {pp_at} (`{}`)\nscheduled peak: {ps} bytes at point {ps_at} (`{}`)\nlower bound: {}\nsymbolic peak of program order ({} terms): {sym}\n\n{report}",
        g.op_count(),
        g.node(program_order(&g)[pp_at.index()]).kind(),
        g.node(s[ps_at.index()]).kind(),
        lower_bound(&g, &b).unwrap(),
        sym.terms.len(),
    );
    assert_eq!(sym.eval(&b).unwrap(), pp);
    insta::assert_snapshot!(text);
}

/// Timing on the 24-layer fixture (22k ops before canonicalization): liveness, symbolic peak
/// and the checked schedule. Prints the figures; asserts a generous time limit.
#[test]
fn gpt2_24l_schedules_quickly() {
    let t = Instant::now();
    let g = import("gpt2_24l");
    let t_import = t.elapsed();
    let sweep: Vec<Bindings> = [128, 512, 1024].iter().map(|&s| bind(4, s)).collect();
    let t = Instant::now();
    let live = liveness(&g, &program_order(&g));
    let t_live = t.elapsed();
    let t = Instant::now();
    let sp = live.symbolic_peak(&g.scope);
    let t_sym = t.elapsed();
    let t = Instant::now();
    let (s, report) = schedule_checked(&g, &ScheduleOptions::default(), &sweep);
    let t_sched = t.elapsed();
    println!(
        "gpt2_24l: {} ops; import {t_import:?}, liveness {t_live:?}, symbolic peak {t_sym:?} ({} terms), schedule_checked {t_sched:?}",
        g.op_count(),
        sp.terms.len()
    );
    println!("{report}");
    assert_eq!(s.len(), g.op_count());
    assert!(t_live.as_secs_f64() + t_sched.as_secs_f64() < 10.0);
}
