//! `finalize/longtail`: finalize at every shape of a seeded long-tail distribution, in a warm
//! runtime (a [`Finalizer`] prepared once, as a trainer's runtime holds it), with arena
//! offsets, reported as a distribution over the shapes rather than one point.
//!
//! Cases: GPT-2 small and the 24-layer d=1024 GPT (`gpt2_24l`), compiled with the pipeline's
//! defaults; B=8 and 64 sequence lengths drawn from the long-tail distribution of `ebb bench
//! --dist longtail` (log-normal over 32..1024, seed 7; de-duplicated); devices
//! `h100-sxm-pcie5` and the measured `cpu`; three budget modes:
//! - `fixed-mid-median`: midway between the smallest feasible budget and the scheduled peak at
//!   the median length, in bytes, for every shape (no decision at the short shapes, decisions
//!   at the longer ones, infeasible at the longest);
//! - `fixed-fits-all`: the largest scheduled peak of the sweep, in bytes (no decision anywhere);
//! - `po-50%`: half of each shape's own program-order peak (what `--budget 50%` means).
//!
//! Per shape, the median of 5 finalizes is its time (wall, and the process's CPU time over all
//! threads); the table gives p50 / p90 / max over the shapes, the largest arena / planned peak,
//! how many shapes were infeasible, and how many finalizes took the atlas's fast path: under a
//! budget fixed over the shapes, the [`Finalizer`] prepares an atlas first ([`Finalizer::prepare_atlas`]
//! at 32 lengths geometric over 32..1024, not the shapes measured), under `po-50%` an atlas
//! keyed by the budget's share of the peak ([`Finalizer::prepare_atlas_relative`], the same
//! lengths each under half its own program-order peak); `EBB_LONGTAIL_ATLAS=0`: none. Last, a digest (FNV-1a) of every result (decisions,
//! added time, planned peak, arena and every offset) over all cases: two builds whose decisions
//! and offsets are byte-identical print the same digest. The table is
//! printed and written to `target/finalize_longtail.json`; then criterion times each case with
//! the shapes taken round-robin (`finalize/longtail/<fixture>/<device>/<mode>`).
//!
//! Run: `cargo bench -p ebb-bench --bench finalize_longtail` (with `EBB_TABLE_ONLY=1` in the
//! environment, only the table). `EBB_LONGTAIL_FIXTURES=gpt2_24l` (comma-separated) restricts the
//! fixtures, `EBB_LONGTAIL_REPEATS=N` sets the finalizes timed per shape (default 5), and
//! `EBB_LONGTAIL_DUMP=DIR` writes each fixture's plan (`DIR/<fixture>.plan.json`) and its shapes
//! with their program-order peaks (`DIR/<fixture>.shapes.json`), and the measured `cpu` profile
//! (`DIR/cpu.device.json`), for profiling finalize alone (`plan/examples/finalize_lab.rs`).

use criterion::Criterion;
use ebb_compiler::bench::shapes::{sample_longtail, LongTail};
use ebb_ir::{Bindings, BindingsExt};
use ebb_passes::memory;
use ebb_pipeline::{compile, CompileOptions};
use ebb_plan::device::DeviceProfile;
use ebb_plan::finalize::{FinalizeOptions, Finalizer};
use ebb_plan::format::Plan;
use ebb_testkit::jax_fixture;
use ebb_testkit::longtail::{
    atlas_samples, digest, process_cpu_ms as cpu_ms, Budgets, DIGEST_START, MODES,
};
use serde::Serialize;
use std::time::{Duration, Instant};

/// Writes `fixture`'s plan, its shapes with their program-order peaks and the measured `cpu`
/// profile into `dir` (`EBB_LONGTAIL_DUMP`).
fn dump(
    dir: &std::path::Path,
    fixture: &str,
    plan: &Plan,
    shapes_po: &[(String, i64)],
) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join(format!("{fixture}.plan.json")),
        serde_json::to_string(plan)?,
    )?;
    std::fs::write(
        dir.join(format!("{fixture}.shapes.json")),
        serde_json::to_string(shapes_po)?,
    )?;
    std::fs::write(
        dir.join("cpu.device.json"),
        serde_json::to_string(&ebb_runtime::device::cpu())?,
    )?;
    Ok(())
}

/// Finalizes timed per shape by default; their median is the shape's time.
const REPEATS: usize = 5;

/// The fixtures measured: `EBB_LONGTAIL_FIXTURES` (comma-separated), else both.
fn fixtures() -> Vec<String> {
    match std::env::var("EBB_LONGTAIL_FIXTURES") {
        Ok(list) => list.split(',').map(|f| f.trim().to_string()).collect(),
        Err(_) => vec!["gpt2_small".into(), "gpt2_24l".into()],
    }
}

/// Finalizes timed per shape: `EBB_LONGTAIL_REPEATS`, else [`REPEATS`].
fn repeats() -> usize {
    std::env::var("EBB_LONGTAIL_REPEATS")
        .ok()
        .and_then(|r| r.parse().ok())
        .filter(|&r| r > 0)
        .unwrap_or(REPEATS)
}

/// One case's distribution over the shapes.
#[derive(Serialize)]
struct Row {
    fixture: String,
    device: String,
    mode: String,
    shapes: usize,
    infeasible: usize,
    p50_ms: f64,
    p90_ms: f64,
    max_ms: f64,
    /// Process CPU time per finalize (all threads), ms: p50 / p90 / max over the shapes.
    p50_cpu_ms: f64,
    p90_cpu_ms: f64,
    max_cpu_ms: f64,
    /// The shape of the slowest finalize.
    max_at: String,
    /// Largest arena / planned peak over the feasible shapes with a budget.
    max_arena_over_planned: f64,
    /// Largest arena / budget over the feasible shapes.
    max_arena_over_budget: f64,
    /// Finalizes (of shapes × repeats) that took the atlas's fast path.
    atlas_hits: usize,
    /// CPU time of preparing the atlas, ms (0: none).
    atlas_prepare_cpu_ms: f64,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn shapes(plan: &Plan) -> Vec<Bindings> {
    sample_longtail(&LongTail::finalize_benchmark(), &plan.symbols).expect("long-tail shapes")
}

fn main() {
    let quick = std::env::var_os("EBB_TABLE_ONLY").is_some();
    // `EBB_LONGTAIL_ATLAS=0`: no atlas (the full finalize at every shape).
    let atlas = std::env::var("EBB_LONGTAIL_ATLAS").map_or(true, |v| v != "0");
    let mut rows = Vec::new();
    let mut criterion = Criterion::default()
        .configure_from_args()
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    let repeats = repeats();
    // Over every result of every case, in order: a byte-identity check across builds.
    let mut all_digest = DIGEST_START;
    for fixture in fixtures() {
        let fixture = fixture.as_str();
        let (g, _) = ebb_import::stablehlo::import_file(&jax_fixture(fixture)).expect("imports");
        let compiled = compile(g, &CompileOptions::default()).expect("compiles");
        let (graph, plan) = (compiled.graph, compiled.plan);
        let shapes = shapes(&plan);
        let liveness = memory::liveness(&graph, &memory::program_order(&graph));
        let program_order: Vec<i64> = shapes
            .iter()
            .map(|b| liveness.peak(b).expect("sizes evaluate").0)
            .collect();
        if let Some(dir) = std::env::var_os("EBB_LONGTAIL_DUMP") {
            let dir = std::path::Path::new(&dir);
            let shapes_po: Vec<(String, i64)> = shapes
                .iter()
                .zip(&program_order)
                .map(|(b, &p)| (b.to_text(), p))
                .collect();
            if let Err(e) = dump(dir, fixture, &plan, &shapes_po) {
                eprintln!("EBB_LONGTAIL_DUMP={}: {e}", dir.display());
                std::process::exit(2);
            }
        }
        let fin = Finalizer::new(&plan);
        fin.prepare_all();
        for device in [
            DeviceProfile::named("h100-sxm-pcie5").expect("named profile"),
            ebb_runtime::device::cpu(),
        ] {
            let base = FinalizeOptions {
                device: device.clone(),
                ..Default::default()
            };
            let modes = Budgets::new(&fin, &shapes, &base)
                .expect("every long-tail shape finalizes without a budget");
            for mode in MODES {
                let budgets = modes.of(mode, &program_order).expect("one of MODES");
                // A budget fixed over the shapes: its atlas, prepared once at sample lengths
                // (not the shapes measured), as a runtime holding that budget would; a budget
                // per shape (`po-50%`): an atlas keyed by the budget's share of the peak, from
                // the same sample lengths each under half its own program-order peak.
                let atlas_ms = match (atlas, budgets.first()) {
                    (true, Some(&budget)) if budgets.iter().all(|&x| x == budget) => {
                        let c = cpu_ms();
                        fin.prepare_atlas(
                            &atlas_samples(&plan),
                            &FinalizeOptions {
                                budget: Some(budget),
                                ..base.clone()
                            },
                        );
                        cpu_ms() - c
                    }
                    (true, Some(_)) if mode == "po-50%" => {
                        let samples: Vec<(Bindings, i64)> = atlas_samples(&plan)
                            .into_iter()
                            .map(|b| {
                                let po = liveness.peak(&b).expect("sizes evaluate").0;
                                (b, po / 2)
                            })
                            .collect();
                        let c = cpu_ms();
                        fin.prepare_atlas_relative(&samples, &base);
                        cpu_ms() - c
                    }
                    _ => 0.0,
                };
                let hits_before = fin.atlas_hits();
                let mut times = Vec::new();
                let mut cpu_times = Vec::new();
                let (mut infeasible, mut worst, mut over_planned, mut over_budget) =
                    (0, (0.0, String::new()), 0.0f64, 0.0f64);
                for (b, &budget) in shapes.iter().zip(&budgets) {
                    let opts = FinalizeOptions {
                        budget: Some(budget),
                        ..base.clone()
                    };
                    let mut ts = Vec::with_capacity(repeats);
                    let mut cs = Vec::with_capacity(repeats);
                    let mut last = None;
                    for _ in 0..repeats {
                        let c = cpu_ms();
                        let t = Instant::now();
                        last = Some(fin.finalize(b, &opts));
                        ts.push(t.elapsed().as_secs_f64() * 1e3);
                        cs.push(cpu_ms() - c);
                    }
                    ts.sort_by(f64::total_cmp);
                    cs.sort_by(f64::total_cmp);
                    let ms = ts[repeats / 2];
                    cpu_times.push(cs[repeats / 2]);
                    if ms > worst.0 {
                        worst = (ms, b.to_text());
                    }
                    times.push(ms);
                    let last = last.expect("timed");
                    all_digest = digest(all_digest, &last);
                    match last {
                        Ok(cp) => {
                            let arena = cp.arena.arena_bytes as f64;
                            over_planned = over_planned.max(arena / cp.peak_bytes_planned as f64);
                            over_budget = over_budget.max(arena / budget as f64);
                        }
                        Err(_) => infeasible += 1,
                    }
                }
                times.sort_by(f64::total_cmp);
                cpu_times.sort_by(f64::total_cmp);
                let row = Row {
                    fixture: fixture.into(),
                    device: device.name.to_string(),
                    mode: mode.into(),
                    shapes: shapes.len(),
                    infeasible,
                    p50_ms: quantile(&times, 0.5),
                    p90_ms: quantile(&times, 0.9),
                    max_ms: worst.0,
                    p50_cpu_ms: quantile(&cpu_times, 0.5),
                    p90_cpu_ms: quantile(&cpu_times, 0.9),
                    max_cpu_ms: cpu_times.last().copied().unwrap_or(0.0),
                    max_at: worst.1,
                    max_arena_over_planned: over_planned,
                    max_arena_over_budget: over_budget,
                    atlas_hits: fin.atlas_hits() - hits_before,
                    atlas_prepare_cpu_ms: atlas_ms,
                };
                println!(
                    "{:<11} {:<15} {:<18} shapes {:>2} infeasible {:>2}  p50 {:>7.3} ms  p90 {:>7.3} ms  max {:>8.3} ms ({})  cpu {:.3} / {:.3} / {:.3} ms  arena/planned <= {:.4}  arena/budget <= {:.4}  atlas {} of {} finalizes (prepared in {:.1} ms cpu)",
                    row.fixture, row.device, row.mode, row.shapes, row.infeasible, row.p50_ms,
                    row.p90_ms, row.max_ms, row.max_at, row.p50_cpu_ms, row.p90_cpu_ms,
                    row.max_cpu_ms, row.max_arena_over_planned, row.max_arena_over_budget,
                    row.atlas_hits, row.shapes * repeats, row.atlas_prepare_cpu_ms
                );
                rows.push(row);
                if !quick {
                    let mut k = 0usize;
                    let id = format!("longtail/{fixture}/{}/{mode}", device.name);
                    criterion.bench_function(&id, |bch| {
                        bch.iter(|| {
                            k = (k + 1) % shapes.len();
                            let opts = FinalizeOptions {
                                budget: Some(budgets[k]),
                                ..base.clone()
                            };
                            fin.finalize(&shapes[k], &opts)
                        })
                    });
                }
            }
        }
    }
    println!("digest of all results {all_digest:016x}");
    let out =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/finalize_longtail.json");
    let _ = std::fs::write(
        &out,
        serde_json::to_string_pretty(&rows).expect("serializes"),
    );
    if !quick {
        criterion.final_summary();
    }
}
