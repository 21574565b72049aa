//! The e-graph rewrite groups (`ebb_passes::rewrite`) on the real JAX fixtures: each group
//! runs on the imported training step, the result verifies and keeps the interface, never
//! materializes more bytes than the input under the cost model, and the change in peak
//! memory (`ebb_passes::memory` liveness over the program order) is reported at B=8,S=256
//! and B=4,S=1024. Without rules the fixture comes back unchanged.
//!
//! Run with `cargo test --release -p ebb-tests --test integration rewrite_fixtures --
//! --nocapture` to see the figures (one line per fixture and group).

use ebb_ir::{Bindings, Graph};
use ebb_passes::memory::{liveness, program_order};
use ebb_passes::rewrite::{rewrite, Limits, RewriteReport, RuleGroup, StopReason};
use ebb_testkit::{bs as bind, import_fixture as fixture};
use std::time::Instant;

/// Peak bytes of `g` in program order (`ebb_passes::memory`: inputs resident for the whole
/// step, every other value from its op to its last use, outputs to the end).
fn peak(g: &Graph, b: &Bindings) -> i64 {
    liveness(g, &program_order(g))
        .peak(b)
        .expect("sizes evaluate")
        .0
}

/// Bytes of all values produced by ops (inputs excluded), the quantity extraction minimizes.
fn materialized(g: &Graph, b: &Bindings) -> i64 {
    g.order()
        .iter()
        .filter(|id| g.node(**id).kind() != ebb_ir::OpKind::Input)
        .flat_map(|id| g.node(*id).outputs.iter())
        .map(|t| t.size_bytes().eval(b).expect("size evaluates"))
        .sum()
}

fn mib(x: i64) -> f64 {
    x as f64 / (1 << 20) as f64
}

/// Runs every group alone and all together on fixture `name`; checks the invariants and
/// prints the figures.
fn run_fixture(name: &str) -> Vec<(String, RewriteReport, [i64; 4])> {
    let g = fixture(name);
    let shapes = [bind(8, 256), bind(4, 1024)];
    let base = [peak(&g, &shapes[0]), peak(&g, &shapes[1])];
    let mut out = Vec::new();
    let mut runs: Vec<(String, Vec<RuleGroup>)> = RuleGroup::ALL
        .iter()
        .map(|g| (g.name().to_string(), vec![*g]))
        .collect();
    runs.push(("all".into(), RuleGroup::ALL.to_vec()));
    for (label, groups) in runs {
        let t = Instant::now();
        let (r, rep) = rewrite(&g, &groups, &Limits::default())
            .unwrap_or_else(|e| panic!("{name} {label}: {e}"));
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(r.inputs().len(), g.inputs().len());
        assert_eq!(r.outputs().len(), g.outputs().len());
        assert_eq!(r.output_names, g.output_names);
        assert_eq!(r.assertions, g.assertions);
        for (a, b) in r.outputs().iter().zip(g.outputs()) {
            assert_eq!(
                r.value_type(*a),
                g.value_type(*b),
                "{name} {label}: output type changed"
            );
        }
        for (after, before) in rep.bytes_after.iter().zip(&rep.bytes_before) {
            assert!(
                after <= before,
                "{name} {label}: extraction materializes more bytes ({after} > {before})"
            );
        }
        assert!(
            !matches!(rep.stop_reason, StopReason::Other(_)),
            "{name} {label}: {:?}",
            rep.stop_reason
        );
        let p = [peak(&r, &shapes[0]), peak(&r, &shapes[1])];
        let applied: usize = rep.applied.values().sum();
        println!(
            "{name:16} {label:18} {secs:6.2}s stop={:?} iters={} enodes={} applied={applied} changed={} ops {}->{} \
             peak@B8S256 {:.2}->{:.2} MiB ({:+.2}%) peak@B4S1024 {:.2}->{:.2} MiB ({:+.2}%)",
            rep.stop_reason,
            rep.iterations,
            rep.egraph_nodes,
            rep.classes_changed,
            rep.ops_before,
            rep.ops_after,
            mib(base[0]),
            mib(p[0]),
            100.0 * (p[0] - base[0]) as f64 / base[0] as f64,
            mib(base[1]),
            mib(p[1]),
            100.0 * (p[1] - base[1]) as f64 / base[1] as f64,
        );
        let (m0, m1) = (materialized(&g, &shapes[1]), materialized(&r, &shapes[1]));
        println!(
            "    materialized@B4S1024 {:.2}->{:.2} MiB ({:+.2}%)",
            mib(m0),
            mib(m1),
            100.0 * (m1 - m0) as f64 / m0 as f64
        );
        println!(
            "    times: encode {:.0} ms, saturate {:.0} ms, extract+emit {:.0} ms, total {:.0} ms",
            rep.encode_ms, rep.saturate_ms, rep.extract_ms, rep.total_ms
        );
        for (rule, n) in rep.applied.iter().filter(|(_, n)| **n > 0) {
            println!("    {rule}: {n}");
        }
        out.push((label, rep, [base[0], p[0], base[1], p[1]]));
    }
    out
}

#[test]
fn tests_that_no_rules_give_back_gpt2_tiny_adamw_unchanged() {
    let g = fixture("gpt2_tiny_adamw");
    let (out, rep) = rewrite(&g, &[], &Limits::default()).expect("rewrite");
    assert_eq!(ebb_ir::text::print(&out), ebb_ir::text::print(&g));
    assert_eq!(rep.classes_changed, 0);
}

#[test]
fn tests_that_every_group_rewrites_gpt2_tiny_adamw() {
    let runs = run_fixture("gpt2_tiny_adamw");
    let fold = &runs
        .iter()
        .find(|(l, ..)| l == "fold_transpose_dot")
        .expect("run")
        .1;
    assert!(
        fold.applied.values().sum::<usize>() > 0,
        "JAX's backward matmuls take transposed operands"
    );
}

#[test]
fn tests_that_every_group_rewrites_gpt2_small() {
    let runs = run_fixture("gpt2_small");
    for (label, rep, _) in &runs {
        assert!(rep.total_ms < 10_000.0, "{label}: {} ms", rep.total_ms);
    }
}

#[test]
#[ignore = "22k ops; run with --ignored --release for the timing figure"]
fn tests_that_every_group_rewrites_gpt2_24l() {
    run_fixture("gpt2_24l");
}

#[test]
fn tests_that_every_group_handles_the_other_fixtures() {
    // `while` loops (scan), optimization barriers (remat), bf16, convolutions, no S symbol.
    for name in [
        "mlp_sgd",
        "mlp_bf16",
        "cnn_sgd",
        "gpt2_tiny_remat",
        "gpt2_tiny_scan",
    ] {
        let g = fixture(name);
        let (out, _) = rewrite(&g, &[], &Limits::default()).expect("round trip");
        assert_eq!(ebb_ir::text::print(&out), ebb_ir::text::print(&g), "{name}");
        {
            let groups = RuleGroup::ALL.to_vec();
            let (r, rep) =
                rewrite(&g, &groups, &Limits::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(r.outputs().len(), g.outputs().len());
            assert!(
                rep.bytes_after
                    .iter()
                    .zip(&rep.bytes_before)
                    .all(|(a, b)| a <= b),
                "{name}"
            );
            let applied: usize = rep.applied.values().sum();
            println!(
                "{name:16} all: applied={applied} changed={} ops {}->{} bytes {:?}->{:?}",
                rep.classes_changed,
                rep.ops_before,
                rep.ops_after,
                rep.bytes_before,
                rep.bytes_after
            );
        }
    }
}
