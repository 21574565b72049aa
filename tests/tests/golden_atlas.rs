//! The golden set of the plan atlas's fast path (`finalize/atlas.rs`): on `gpt2_24l` (the
//! long-tail benchmark's fixture and compile configuration), atlases prepared at the
//! benchmark's 32 sample lengths for a budget fixed in bytes ([`Finalizer::prepare_atlas`])
//! and for half of each shape's program-order peak ([`Finalizer::prepare_atlas_relative`]),
//! then finalizes at the long-tail lengths that are not among the samples; each result reduced
//! to the golden set's digest (`golden.rs`), with whether the fast path gave it, and the table
//! kept as an insta snapshot (`snapshots/…golden_atlas__golden_atlas.snap`).
//!
//! A change meant to leave the fast path's decisions and offsets byte-identical must leave this
//! snapshot unchanged (the golden set, `golden.rs`, finalizes without an atlas). Each row: the
//! device and budget mode, the shape, `fast` (the atlas's fast path) or `full` (the full
//! finalize), the variant, decisions as recomputes/swaps, planned peak, arena bytes, added µs,
//! the full finalize's added µs at that shape (for a fast-path row), and the digests
//! `#decisions/offsets`.
//!
//! Modes and shapes as `bench/benches/finalize_longtail.rs` sets them (`ebb_testkit::longtail`):
//! `fixed-mid-median` (midway between the smallest feasible budget and the scheduled peak at
//! the median length), `fixed-fits-all` (the largest scheduled peak) and `po-50%` (half of each
//! shape's own program-order peak); B=8 and the 64 lengths of the long-tail distribution
//! (`LongTail::finalize_benchmark`: seed 7, lengths 32..1024), less those among the atlas's
//! samples; devices `h100-sxm-pcie5` and the fixed CPU-like profile of `golden.rs` (the
//! measured `cpu` profile cannot be golden). Every fast-path result is also checked: planned
//! peak and arena within the budget, arena within 1.05 of the planned peak, offsets that never
//! overlap, and added time within one point of the step of the full finalize's.

use super::golden::{digest, CPU_LIKE};
use ebb_compiler::bench::shapes::{sample_longtail, LongTail};
use ebb_ir::{dim::Symbol, Bindings};
use ebb_passes::donate::DonatePolicy;
use ebb_passes::memory;
use ebb_passes::rewrite::RuleGroup;
use ebb_pipeline::{compile, CompileOptions};
use ebb_plan::arena::check_layout;
use ebb_plan::device::{DeviceId, DeviceProfile};
use ebb_plan::finalize::{ConcretePlan, FinalizeError, FinalizeOptions, Finalizer};
use ebb_plan::format::DecisionKind;
use ebb_testkit::import_fixture;
use ebb_testkit::longtail::{atlas_samples, Budgets, MODES};
use std::fmt::Write as _;

/// The sequence length of `b`.
fn seq(b: &Bindings) -> i64 {
    b.get(&Symbol::new("S")).copied().unwrap_or(0)
}

/// One row of the table (see the module docs), after checking a fast-path result against
/// the full finalize `full` and the `budget`.
fn row(
    case: &str,
    fast: bool,
    r: &Result<ConcretePlan, FinalizeError>,
    full: Option<&Result<ConcretePlan, FinalizeError>>,
    budget: i64,
) -> String {
    let cp = match r {
        Ok(cp) => cp,
        Err(FinalizeError::Infeasible { smallest, .. }) => {
            return format!("full infeasible, smallest {smallest}");
        }
        Err(e) => return format!("full error: {e}"),
    };
    let recomputes = cp
        .decisions
        .iter()
        .filter(|d| d.kind == DecisionKind::Recompute)
        .count();
    let mut out = format!(
        "{} v{} r{recomputes} s{} peak {} arena {} added {:.3}us",
        if fast { "fast" } else { "full" },
        cp.variant,
        cp.decisions.len() - recomputes,
        cp.peak_bytes_planned,
        cp.arena.arena_bytes,
        cp.overhead_us,
    );
    if fast {
        assert!(cp.peak_bytes_planned <= budget, "{case}: planned peak");
        assert!(cp.arena.arena_bytes <= budget, "{case}: arena");
        assert!(
            cp.arena.arena_bytes as f64 <= 1.05 * cp.peak_bytes_planned as f64,
            "{case}: arena / planned peak"
        );
        check_layout(&cp.arena).unwrap_or_else(|e| panic!("{case}: {e}"));
        match full {
            Some(Ok(f)) => {
                assert!(
                    cp.overhead_us <= f.overhead_us + 0.01 * f.step_us,
                    "{case}: {:.3} µs added, the full finalize {:.3} µs (step {:.1} µs)",
                    cp.overhead_us,
                    f.overhead_us,
                    f.step_us
                );
                let _ = write!(out, " (full {:.3}us)", f.overhead_us);
            }
            _ => out.push_str(" (full infeasible)"),
        }
    }
    let _ = write!(out, " #{}", digest(cp));
    out
}

/// Tests that the atlas's fast path on `gpt2_24l` gives the committed decisions, costs and
/// offsets at every long-tail shape (see the module docs), and which shapes it serves.
#[test]
fn golden_atlas() {
    let fixture = "gpt2_24l";
    let graph = import_fixture(fixture);
    // The pipeline's defaults today, spelled out: a change of the defaults does not move the
    // set.
    let compiled = compile(
        graph,
        &CompileOptions::builder()
            .fusion(true)
            .donate(DonatePolicy::Auto)
            .rewrite(vec![RuleGroup::FoldTransposeDot])
            .build(),
    )
    .unwrap_or_else(|e| panic!("{fixture} compiles: {e:#}"));
    let (graph, plan) = (&compiled.graph, &compiled.plan);
    let liveness = memory::liveness(graph, &memory::program_order(graph));
    let program_order = |b: &Bindings| liveness.peak(b).expect("sizes evaluate").0;
    let samples = atlas_samples(plan);
    let sampled: Vec<i64> = samples.iter().map(seq).collect();
    let all_shapes =
        sample_longtail(&LongTail::finalize_benchmark(), &plan.symbols).expect("long-tail shapes");
    let po: Vec<i64> = all_shapes.iter().map(program_order).collect();
    let relative: Vec<(Bindings, i64)> = samples
        .iter()
        .map(|b| (b.clone(), program_order(b) / 2))
        .collect();
    let mut all = String::new();
    for device in ["h100-sxm-pcie5", CPU_LIKE] {
        let device = DeviceProfile::named(device).expect("device profile");
        let name = match &device.name {
            DeviceId::Custom(_) => "cpu-like".to_string(),
            name => name.to_string(),
        };
        let base = FinalizeOptions {
            device,
            ..Default::default()
        };
        let plain = Finalizer::new(plan);
        let budgets = Budgets::new(&plain, &all_shapes, &base).expect("finalizes unbudgeted");
        for mode in MODES {
            let budgets = budgets.of(mode, &po).expect("one of MODES");
            let fin = Finalizer::new(plan);
            let entries = if mode == "po-50%" {
                fin.prepare_atlas_relative(&relative, &base)
            } else {
                fin.prepare_atlas(
                    &samples,
                    &FinalizeOptions {
                        budget: Some(budgets[0]),
                        ..base.clone()
                    },
                )
            };
            let mut hits = 0;
            for (b, &budget) in all_shapes.iter().zip(&budgets) {
                let s = seq(b);
                if sampled.contains(&s) {
                    continue;
                }
                let opts = FinalizeOptions {
                    budget: Some(budget),
                    ..base.clone()
                };
                let before = fin.atlas_hits();
                let r = fin.finalize(b, &opts);
                let fast = fin.atlas_hits() > before;
                hits += usize::from(fast);
                let full = fast.then(|| plain.finalize(b, &opts));
                let case = format!("{name} {mode} S={s}");
                let row = row(&case, fast, &r, full.as_ref(), budget);
                let _ = writeln!(all, "{case}: {row}");
            }
            let _ = writeln!(
                all,
                "{name} {mode}: {entries} entries, fast path at {hits} shapes"
            );
        }
    }
    insta::assert_snapshot!("golden_atlas", all);
}
