//! Finalize alone on the plans the long-tail benchmark dumps (`EBB_LONGTAIL_DUMP=DIR cargo
//! bench -p ebb-bench --bench finalize_longtail`), without compiling a fixture: for
//! profiling (`perf record`) and byte-identity checks of finalize and the arena.
//!
//! `cargo run --release -p ebb-plan --example finalize_lab -- DIR FIXTURE [DEVICE [MODE
//! [SHAPE [LOOPS]]]]`: DEVICE `h100-sxm-pcie5` (default) or `cpu` (the dumped measured
//! profile), MODE one of the benchmark's (`fixed-mid-median` default, `fixed-fits-all`,
//! `po-50%`), budgets as the benchmark sets them. Without SHAPE: each shape finalized 3 times,
//! the median process CPU time and wall time per shape printed with the decisions taken, the
//! added time (% of the modelled step), arena / planned peak and a digest of its result, then
//! p50 / p90 / max and a digest over all. With SHAPE (`B=8,S=256`): that shape finalized LOOPS times
//! (default 300), for a profiler.

use ebb_ir::{Bindings, BindingsExt};
use ebb_plan::device::DeviceProfile;
use ebb_plan::finalize::{FinalizeOptions, Finalizer};
use ebb_plan::format::Plan;
use ebb_testkit::longtail::{digest, process_cpu_ms as cpu_ms, Budgets, DIGEST_START, MODES};
use std::time::Instant;

/// What went wrong, for the message `main` prints.
type Failure = Box<dyn std::error::Error>;

fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: &str| args.get(i).cloned().unwrap_or_else(|| d.to_string());
    let dir = std::path::PathBuf::from(arg(0, "."));
    let fixture = arg(1, "gpt2_24l");
    let device = arg(2, "h100-sxm-pcie5");
    let mode = arg(3, "fixed-mid-median");
    let read = |name: String| -> Result<String, Failure> {
        let path = dir.join(&name);
        std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "{}: {e} (a folder EBB_LONGTAIL_DUMP wrote?)",
                path.display()
            )
            .into()
        })
    };
    let plan: Plan = serde_json::from_str(&read(format!("{fixture}.plan.json"))?)?;
    let shapes: Vec<(String, i64)> =
        serde_json::from_str(&read(format!("{fixture}.shapes.json"))?)?;
    let device: DeviceProfile = if device == "cpu" {
        serde_json::from_str(&read("cpu.device.json".into())?)?
    } else {
        DeviceProfile::named(&device)?
    };
    let shapes: Vec<(Bindings, i64)> = shapes
        .iter()
        .map(|(b, po)| Ok((Bindings::parse(b)?, *po)))
        .collect::<Result<_, Failure>>()?;
    let fin = Finalizer::new(&plan);
    fin.prepare_all();
    let base = FinalizeOptions {
        device,
        ..Default::default()
    };
    let bindings: Vec<Bindings> = shapes.iter().map(|(b, _)| b.clone()).collect();
    let program_order: Vec<i64> = shapes.iter().map(|&(_, po)| po).collect();
    let budgets = Budgets::new(&fin, &bindings, &base)?
        .of(&mode, &program_order)
        .ok_or_else(|| format!("MODE {mode}: not one of {MODES:?}"))?;
    let opts = |i: usize| FinalizeOptions {
        budget: Some(budgets[i]),
        ..base.clone()
    };
    // With `EBB_ATLAS=N` and a budget fixed over the shapes: an atlas of N sample lengths,
    // geometric over S = 32..1024 at B=8 (`Finalizer::prepare_atlas`).
    if let Some(n) = std::env::var("EBB_ATLAS").ok().and_then(|n| n.parse().ok()) {
        let (c, t) = (cpu_ms(), Instant::now());
        let entries = if budgets.iter().all(|&x| x == budgets[0]) {
            fin.prepare_atlas(&atlas_grid(n)?, &opts(0))
        } else if mode == "po-50%" {
            // A budget per shape: half the program-order peak at each sample length,
            // interpolated (linearly in S) between the dumped shapes' peaks.
            let mut known: Vec<(i64, i64)> = shapes
                .iter()
                .filter_map(|(b, po)| Some((b.get(&ebb_ir::dim::Symbol::new("S")).copied()?, *po)))
                .collect();
            known.sort_unstable();
            known.dedup();
            let po_at = |s: i64| -> i64 {
                let k = known
                    .partition_point(|&(x, _)| x < s)
                    .clamp(1, known.len() - 1);
                let ((s0, p0), (s1, p1)) = (known[k - 1], known[k]);
                p0 + ((p1 - p0) as f64 * (s - s0) as f64 / (s1 - s0).max(1) as f64) as i64
            };
            let samples: Vec<(Bindings, i64)> = atlas_grid(n)?
                .into_iter()
                .filter_map(|b| {
                    let s = b.get(&ebb_ir::dim::Symbol::new("S")).copied()?;
                    Some((b, po_at(s) / 2))
                })
                .collect();
            fin.prepare_atlas_relative(&samples, &base)
        } else {
            0
        };
        eprintln!(
            "atlas: {entries} entries of {n} samples in {:.1} ms ({:.1} ms cpu)",
            t.elapsed().as_secs_f64() * 1e3,
            cpu_ms() - c
        );
    }
    if let Some(shape) = args.get(4) {
        let i = shapes
            .iter()
            .position(|(b, _)| &b.to_text() == shape)
            .ok_or_else(|| format!("{shape} is not a shape of the dump"))?;
        let loops: usize = arg(5, "300").parse().map_err(|e| format!("LOOPS: {e}"))?;
        let (c, t) = (cpu_ms(), Instant::now());
        for _ in 0..loops {
            std::hint::black_box(fin.finalize(&shapes[i].0, &opts(i)).ok());
        }
        println!(
            "{shape}: {:.3} ms wall, {:.3} ms cpu (process) per finalize",
            t.elapsed().as_secs_f64() * 1e3 / loops as f64,
            (cpu_ms() - c) / loops as f64
        );
        return Ok(());
    }
    let mut all = DIGEST_START;
    let mut times = Vec::new();
    let mut walls = Vec::new();
    for (i, (b, _)) in shapes.iter().enumerate() {
        let mut ts = Vec::new();
        let mut ws = Vec::new();
        let mut last = None;
        let hits = fin.atlas_hits();
        for _ in 0..3 {
            let (c, t) = (cpu_ms(), Instant::now());
            last = Some(fin.finalize(b, &opts(i)));
            ws.push(t.elapsed().as_secs_f64() * 1e3);
            ts.push(cpu_ms() - c);
        }
        ts.sort_by(f64::total_cmp);
        ws.sort_by(f64::total_cmp);
        walls.push(ws[1]);
        let Some(last) = last else {
            continue;
        };
        let h = digest(DIGEST_START, &last);
        all = digest(all, &last);
        let (dec, arena, added) = last.as_ref().map_or((0, 0.0, 0.0), |c| {
            (
                c.decisions.len(),
                c.arena.arena_bytes as f64 / c.peak_bytes_planned.max(1) as f64,
                100.0 * c.overhead_us / c.step_us.max(f64::MIN_POSITIVE),
            )
        });
        println!(
            "{:<12} cpu {:>8.3} ms  wall {:>8.3} ms  decisions {dec:>4}  added {added:>7.3}%  arena/planned {arena:.4}  atlas {}  {h:016x}",
            b.to_text(),
            ts[1],
            ws[1],
            fin.atlas_hits() - hits,
        );
        times.push(ts[1]);
    }
    if times.is_empty() {
        return Err(format!("{fixture}.shapes.json lists no shape").into());
    }
    if fin.atlas_hits() > 0 {
        println!("atlas fast path: {} finalizes", fin.atlas_hits());
    }
    times.sort_by(f64::total_cmp);
    walls.sort_by(f64::total_cmp);
    let q = |v: &[f64], f: f64| v[((v.len() - 1) as f64 * f).round() as usize];
    println!(
        "cpu (process) p50 {:.3} p90 {:.3} max {:.3} ms; wall p50 {:.3} p90 {:.3} max {:.3} ms; digest {all:016x}",
        q(&times, 0.5),
        q(&times, 0.9),
        q(&times, 1.0),
        q(&walls, 0.5),
        q(&walls, 0.9),
        q(&walls, 1.0)
    );
    Ok(())
}

/// `n` sample bindings for an atlas: B=8 and S geometric over 32..=1024, de-duplicated.
fn atlas_grid(n: usize) -> Result<Vec<Bindings>, Failure> {
    let mut lengths: Vec<i64> = (0..n)
        .map(|i| (32.0 * 32f64.powf(i as f64 / (n.max(2) - 1) as f64)).round() as i64)
        .collect();
    lengths.dedup();
    lengths
        .iter()
        .map(|s| Ok(Bindings::parse(&format!("B=8,S={s}"))?))
        .collect()
}
