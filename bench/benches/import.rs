//! Benchmark: StableHLO import time and peak resident memory on the GPT-2 small fixture
//! (11.4k MLIR ops, 1.8 MB of generic-form text). Target: under 3 s and under 1 GiB
//! on a 2-core machine.
//!
//! Run: `cargo bench -p ebb-bench --bench import`. Peak RSS is the process's `VmHWM`
//! (Linux), measured after the timing loop, so it covers the largest single import.
// `criterion_group!` defines an undocumented `pub fn`; a bench has no API to document.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion};
use ebb_testkit::jax_fixture as fixture;
use std::time::Duration;

fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn bench_import(c: &mut Criterion) {
    let mut group = c.benchmark_group("import");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for name in ["gpt2_small", "gpt2_24l"] {
        let path = fixture(name);
        group.bench_function(name, |b| {
            b.iter(|| ebb_import::stablehlo::import_file(&path).expect("fixture imports"));
        });
    }
    group.finish();
    if let Some(kib) = peak_rss_kib() {
        println!(
            "peak RSS (VmHWM) of the benchmark process: {:.1} MiB",
            kib as f64 / 1024.0
        );
    }
}

criterion_group!(benches, bench_import);
criterion_main!(benches);
