//! The golden set: finalize's decisions, costs and arena offsets over fixtures × compile
//! configurations × shapes × budgets × devices × offsets, each case reduced to a digest, and
//! the table of digests kept as an insta snapshot (`snapshots/…golden__golden_set.snap`).
//!
//! A change meant to leave the runtime's decisions byte-identical (a refactor, a faster
//! finalize) must leave this snapshot unchanged; a change meant to alter them shows here, case
//! by case, which results moved. Each row gives the figures a reader checks first (variant,
//! decisions taken as recomputes/swaps, planned peak, arena bytes, added µs) and two SHA-256
//! prefixes, `#decisions/offsets`: the first over every decision, value size, resident byte per
//! point, regeneration peak and cost field (as `f64` bits), the second over the arena (its
//! size, fragmentation, and every allocation's interval and offset). A change of the layout
//! alone moves only the second.
//!
//! Devices: `h100-sxm-pcie5` (built in) and a fixed `custom:` CPU-like profile (the `cpu`
//! profile is measured on the machine, so it cannot be golden). Compile configurations are
//! spelled out (fusion off with the import's donations; fusion on with `--donate auto`), so
//! that a change of the pipeline's defaults does not move the set.

use ebb_passes::donate::DonatePolicy;
use ebb_pipeline::{compile, CompileOptions};
use ebb_plan::device::{DeviceId, DeviceProfile};
use ebb_plan::finalize::{ConcretePlan, FinalizeError, FinalizeOptions, Finalizer};
use ebb_plan::format::{DecisionKind, Plan};
use ebb_testkit::{bs, import_fixture};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

/// A CPU-like profile with fixed figures (matrix 1 TFLOP/s, memory 50 GB/s, link 20 GB/s).
pub(crate) const CPU_LIKE: &str = "custom:flops=1T,hbm=50G,link=20G";

/// Sequence lengths of the fixtures bounded by `S <= 512`: short, middle, the bound, and odd
/// lengths of the long tail.
const TINY_LENGTHS: [i64; 5] = [37, 128, 255, 379, 512];

/// Sequence lengths of GPT-2 small (`S <= 1024`).
const SMALL_LENGTHS: [i64; 5] = [37, 128, 379, 700, 1024];

/// A 16-hex-digit SHA-256 prefix of `s`.
fn sha_prefix(s: &str) -> String {
    let h = Sha256::digest(s.as_bytes());
    h[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The digests of one finalized plan, `decisions/offsets`: every field a decision or a reported
/// figure depends on, then the arena, each written in a fixed textual order (independent of the
/// types' serialization).
pub(crate) fn digest(cp: &ConcretePlan) -> String {
    let mut s = String::new();
    let _ = write!(s, "v{} ", cp.variant);
    for d in &cp.decisions {
        let k = match d.kind {
            DecisionKind::Recompute => 'r',
            DecisionKind::Swap => 's',
        };
        let _ = write!(s, "{}{k},", d.candidate.index());
    }
    let _ = write!(
        s,
        "|{:?}|{}|{}|{:?}|{:?}|{}|{}|{:x}|{:x}|{:x}|{:x}|{}|",
        cp.value_bytes,
        cp.peak_bytes_scheduled,
        cp.peak_bytes_planned,
        cp.resident,
        cp.regen_peak,
        cp.recompute_flops,
        cp.swap_bytes,
        cp.overhead_us.to_bits(),
        cp.recompute_us.to_bits(),
        cp.exposed_transfer_us.to_bits(),
        cp.step_us.to_bits(),
        cp.step_flops,
    );
    let decisions = sha_prefix(&s);
    let mut s = String::new();
    let a = &cp.arena;
    let _ = write!(s, "{}|{:x}|", a.arena_bytes, a.fragmentation.to_bits());
    for x in &a.allocations {
        let _ = write!(
            s,
            "{}:{}-{}@{}+{},",
            x.value.index(),
            x.start.index(),
            x.end.index(),
            x.offset,
            x.bytes
        );
    }
    for (op, res) in &a.shared {
        let _ = write!(s, "{}={},", op.index(), res.index());
    }
    format!("{decisions}/{}", sha_prefix(&s))
}

/// One row of the table for finalizing `plan` at `B=8, S=s` under `budget`, and the case's
/// figures for comparing decisions across builds (`case` names it; see [`figures`]).
fn row(
    fin: &Finalizer<&Plan>,
    s: i64,
    budget: Option<i64>,
    opts: &FinalizeOptions,
    case: &str,
    tsv: &mut String,
) -> String {
    let opts = FinalizeOptions {
        budget,
        ..opts.clone()
    };
    let result = fin.finalize(&bs(8, s), &opts);
    figures(tsv, case, budget, &result);
    match result {
        Ok(cp) => {
            let r = cp
                .decisions
                .iter()
                .filter(|d| d.kind == DecisionKind::Recompute)
                .count();
            format!(
                "v{} r{} s{} peak {} arena {} added {:.3}us #{}",
                cp.variant,
                r,
                cp.decisions.len() - r,
                cp.peak_bytes_planned,
                cp.arena.arena_bytes,
                cp.overhead_us,
                digest(&cp)
            )
        }
        Err(FinalizeError::Infeasible { smallest, .. }) => {
            format!("infeasible, smallest {smallest}")
        }
        Err(e) => format!("error: {e}"),
    }
}

/// Appends one tab-separated line of the case's figures to `tsv`: case, budget (bytes, -1 for
/// none), added µs, step µs, arena bytes, planned peak bytes (or the error). Written to the
/// file `EBB_GOLDEN_TSV` names, for `scripts/golden_compare.py` (the "no worse than before"
/// check of a change that moves decisions: added time within 1% of the step where the old
/// arena fits).
fn figures(
    tsv: &mut String,
    case: &str,
    budget: Option<i64>,
    result: &Result<ConcretePlan, FinalizeError>,
) {
    let _ = write!(tsv, "{case}\t{}\t", budget.unwrap_or(-1));
    let _ = match result {
        Ok(cp) => writeln!(
            tsv,
            "{}\t{}\t{}\t{}",
            cp.overhead_us, cp.step_us, cp.arena.arena_bytes, cp.peak_bytes_planned
        ),
        Err(e) => writeln!(tsv, "err {e}"),
    };
}

/// The compile configurations: fusion off with the import's donations, fusion on with every
/// input that has a same-typed output donated.
const CONFIGS: [(&str, bool, DonatePolicy); 2] = [
    ("unfused,keep", false, DonatePolicy::Keep),
    ("fused,auto", true, DonatePolicy::Auto),
];

/// The table of one fixture: per configuration, device, offsets mode and shape, no budget and
/// budgets of 75%, 50% and 30% of the shape's scheduled peak.
fn table(
    fixture: &str,
    configs: &[(&str, bool, DonatePolicy)],
    devices: &[&str],
    offsets_modes: &[bool],
    lengths: &[i64],
    tsv: &mut String,
) -> String {
    let graph = import_fixture(fixture);
    let mut out = String::new();
    for (config, fusion, donate) in configs.iter().cloned() {
        let compiled = compile(
            graph.clone(),
            &CompileOptions::builder()
                .fusion(fusion)
                .donate(donate)
                .rewrite(Vec::new())
                .build(),
        )
        .unwrap_or_else(|e| panic!("{fixture} ({config}) compiles: {e:#}"));
        let plan = &compiled.plan;
        let fin = Finalizer::new(plan);
        for device in devices {
            let device = DeviceProfile::named(device).expect("device profile");
            for &offsets in offsets_modes {
                let opts = FinalizeOptions {
                    device: device.clone(),
                    offsets,
                    ..Default::default()
                };
                for &s in lengths {
                    let peak = fin
                        .finalize(
                            &bs(8, s),
                            &FinalizeOptions {
                                budget: None,
                                ..opts.clone()
                            },
                        )
                        .map(|cp| cp.peak_bytes_scheduled)
                        .unwrap_or_else(|e| panic!("{fixture} S={s}: {e}"));
                    for (label, budget) in [
                        ("none", None),
                        ("75%", Some(peak * 3 / 4)),
                        ("50%", Some(peak / 2)),
                        ("30%", Some(peak * 3 / 10)),
                    ] {
                        let case = format!(
                            "{fixture} {config} {} offsets={offsets} B=8 S={s} {label}",
                            match &device.name {
                                DeviceId::Custom(_) => "cpu-like".to_string(),
                                name => name.to_string(),
                            }
                        );
                        let row = row(&fin, s, budget, &opts, &case, tsv);
                        let _ = writeln!(out, "{case}: {row}");
                    }
                }
            }
        }
    }
    out
}

/// Tests that finalize's decisions, costs and offsets are those of the committed golden set on
/// the JAX exports of the 2-layer GPT (AdamW), the 2-layer GPT scanned over its layers, GPT-2
/// small (every configuration, both devices, with and without offsets) and the 24-layer
/// d=1024 GPT (unfused, `h100-sxm-pcie5`, with offsets: the finalize benchmark's case).
#[test]
fn golden_set() {
    let devices = ["h100-sxm-pcie5", CPU_LIKE];
    let mut all = String::new();
    let mut tsv = String::new();
    for (fixture, lengths) in [
        ("gpt2_tiny_adamw", &TINY_LENGTHS),
        ("gpt2_tiny_scan", &TINY_LENGTHS),
        ("gpt2_small", &SMALL_LENGTHS),
    ] {
        all.push_str(&table(
            fixture,
            &CONFIGS,
            &devices,
            &[true, false],
            lengths,
            &mut tsv,
        ));
    }
    all.push_str(&table(
        "gpt2_24l",
        &CONFIGS[..1],
        &devices[..1],
        &[true],
        &[115, 534, 1024],
        &mut tsv,
    ));
    if let Some(path) = std::env::var_os("EBB_GOLDEN_TSV") {
        std::fs::write(&path, &tsv).expect("EBB_GOLDEN_TSV is writable");
    }
    insta::assert_snapshot!("golden_set", all);
}
