//! Tests that the canonicalization passes (`fold`, `cse`, `dce` to a fixed point) keep every
//! real JAX fixture valid, keep its interface, are idempotent, and shrink it; snapshots the
//! op counts before and after. `gpt2_24l` is left out to save time, except in the ignored
//! timing test (`cargo test --release -p ebb-tests --test integration canon_fixtures --
//! --ignored --nocapture`).

use ebb_import::stablehlo::import_file;
use ebb_ir::{Graph, Op, TensorType};
use ebb_passes::canon;
use ebb_passes::manager::{PassReport, StopReason};
use ebb_testkit::{jax_fixture, jax_fixture_names};
use std::fmt::Write;
use std::time::Instant;

/// (name, type) pairs of a graph's inputs or outputs.
type Named = Vec<(String, TensorType)>;

/// Input (name, type) pairs and output (name, type) pairs: the graph's interface.
fn interface(g: &Graph) -> (Named, Named) {
    let ins = g
        .inputs()
        .iter()
        .map(|&id| (g.input_name(id).to_string(), g.node(id).outputs[0].clone()))
        .collect();
    let outs = g
        .outputs()
        .iter()
        .zip(&g.output_names)
        .map(|(v, n)| (n.clone(), g.value_type(*v).clone()))
        .collect();
    (ins, outs)
}

/// Ops the fold pass should have left no instance of: all-constant `dim_constant`s and
/// identity `transpose`s / `convert`s / `reshape`s.
fn leftover_foldable(g: &Graph) -> usize {
    let mut n = 0;
    for &id in g.order() {
        let node = g.node(id);
        let same_type = || {
            g.operands(id)
                .first()
                .is_some_and(|v| g.value_type(*v) == &node.outputs[0])
        };
        n += match &node.op {
            Op::DimConstant(ds) => usize::from(ds.iter().all(|d| d.as_const().is_some())),
            Op::Convert(_) | Op::Reshape(_) => usize::from(same_type()),
            Op::Transpose(p) => usize::from(p.iter().copied().eq(0..p.len() as i64)),
            _ => 0,
        };
        n += node.regions.iter().map(leftover_foldable).sum::<usize>();
    }
    n
}

/// Sum of the changes reported by `pass` over the report.
fn changes(report: &PassReport, pass: &str) -> usize {
    report
        .runs
        .iter()
        .filter(|r| r.pass == pass)
        .map(|r| r.result.changes)
        .sum()
}

#[test]
fn canonicalization_keeps_fixtures_valid_and_shrinks_them() {
    let names: Vec<String> = jax_fixture_names()
        .into_iter()
        .filter(|n| n != "gpt2_24l")
        .collect();
    assert!(
        names.len() >= 7,
        "expected the committed fixtures, found {names:?}"
    );
    let mut table = String::new();
    writeln!(
        table,
        "{:<16} {:>7} {:>7} {:>6} {:>6} {:>6} {:>5}",
        "fixture", "before", "after", "folded", "merged", "dead", "iters"
    )
    .unwrap();
    for name in &names {
        let (mut g, _) = import_file(&jax_fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let iface = interface(&g);
        let assertions = g.assertions.clone();
        let report = canon::pipeline(8)
            .run(&mut g)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        ebb_ir::verify::verify(&g).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(report.stop_reason, StopReason::FixedPoint, "{name}");
        assert_eq!(interface(&g), iface, "{name}: inputs and outputs are kept");
        assert_eq!(
            g.assertions, assertions,
            "{name}: shape assertions are kept"
        );
        // Unrolled loops add their copies first (the scan, the dropout's threefry loops).
        let unrolled: i64 = report
            .runs
            .iter()
            .filter(|r| r.pass == "unroll")
            .map(|r| r.ops_after as i64 - r.ops_before as i64)
            .sum();
        let before = (report.ops_before as i64 + unrolled) as usize;
        assert!(
            report.ops_after < before,
            "{name}: nothing to canonicalize?"
        );
        let (merged_or_dead, folded) = (
            changes(&report, "cse") + changes(&report, "dce"),
            changes(&report, "fold") + changes(&report, "forward_slices"),
        );
        let removed = before - report.ops_after;
        // A fold change removes one op (bypassed or folded into a constant its replacement
        // took the place of), or adds one (the scalar constant of rule 8, which CSE merges).
        assert!(
            removed + folded >= merged_or_dead && removed <= merged_or_dead + folded,
            "{name}: merged and dead ops, plus bypassed identity ops, account for the {removed} removed ops"
        );
        assert_eq!(leftover_foldable(&g), 0, "{name}: foldable ops left");
        let again = canon::pipeline(8).run(&mut g).unwrap();
        assert!(
            !again.changed(),
            "{name}: second run changed the graph: {:?}",
            again.totals()
        );
        writeln!(
            table,
            "{:<16} {:>7} {:>7} {:>6} {:>6} {:>6} {:>5}",
            name,
            report.ops_before,
            report.ops_after,
            changes(&report, "fold"),
            changes(&report, "cse"),
            changes(&report, "dce"),
            report.iterations
        )
        .unwrap();
    }
    insta::assert_snapshot!(table);
}

/// Prints import and canonicalization times of the largest fixtures (not a pass/fail test:
/// timings depend on the machine).
#[test]
#[ignore]
fn canonicalization_timing_on_the_largest_fixtures() {
    for name in ["gpt2_small", "gpt2_24l"] {
        let t = Instant::now();
        let (mut g, _) = import_file(&jax_fixture(name)).unwrap();
        let import = t.elapsed();
        let report = canon::pipeline(8).run(&mut g).unwrap();
        println!(
            "{name}: import {:.1} ms, canonicalize {:.1} ms ({} -> {} ops, {} iterations)",
            import.as_secs_f64() * 1e3,
            report.total_us as f64 / 1e3,
            report.ops_before,
            report.ops_after,
            report.iterations
        );
        for t in report.totals() {
            println!(
                "  {:<5} runs {} changes {:>5} time {:>8.2} ms",
                t.pass,
                t.runs,
                t.changes,
                t.time_us as f64 / 1e3
            );
        }
        let verify_us: u64 = report.runs.iter().map(|r| r.verify_us).sum();
        println!("  verify time {:.2} ms", verify_us as f64 / 1e3);
    }
}
