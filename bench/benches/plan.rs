//! Benchmarks of planning:
//! - `compile/*`: the whole pipeline (canonicalize, schedule with variants, candidates, plan)
//!   on GPT-2 small and the 24-layer d=1024 export, import excluded. Target: ≤ 10 s for the
//!   24-layer one on a 2-core machine.
//! - `finalize/*`: finalizing the GPT-2 small plan at a shape not seen before (target ≤ 1 ms),
//!   with and without a budget (50% of the scheduled peak), and from the plan cache (target
//!   ≤ 10 µs); the 24-layer d=1024 export (GPT-2 medium) at B=8, S=1024 under 50% of its
//!   scheduled peak on `h100-sxm-pcie5`, with arena offsets, its variants prepared once as a
//!   runtime holds them (target ≤ 1 ms), and from the cache. Measured figures: docs/results/.
//!
//! Run: `cargo bench -p ebb-bench --bench plan`.
// `criterion_group!` defines an undocumented `pub fn`; a bench has no API to document.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion};
use ebb_pipeline::{compile, CompileOptions};
use ebb_plan::cache::PlanCache;
use ebb_plan::finalize::{finalize, FinalizeOptions, Finalizer};
use ebb_testkit::{bs as bind, jax_fixture as fixture};
use std::sync::Arc;
use std::time::Duration;

fn bench_compile(c: &mut Criterion) {
    let mut group = c.benchmark_group("compile");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(15));
    for name in ["gpt2_small", "gpt2_24l"] {
        let (g, _) = ebb_import::stablehlo::import_file(&fixture(name)).expect("fixture imports");
        group.bench_function(name, |b| {
            b.iter(|| compile(g.clone(), &CompileOptions::default()).expect("compiles"))
        });
    }
    group.finish();
}

fn bench_finalize(c: &mut Criterion) {
    let (g, _) =
        ebb_import::stablehlo::import_file(&fixture("gpt2_small")).expect("fixture imports");
    let plan = compile(g, &CompileOptions::default())
        .expect("compiles")
        .plan;
    let mut group = c.benchmark_group("finalize");
    // A new shape every iteration: S cycles through 1..=1024 so nothing is reused.
    let mut s = 0i64;
    // Variants prepared once, as the runtime's plan cache holds them.
    let fin = Finalizer::new(&plan);
    fin.prepare_all();
    let no_offsets = FinalizeOptions {
        offsets: false,
        ..Default::default()
    };
    group.bench_function("gpt2_small_new_shape", |bch| {
        bch.iter(|| {
            s = s % 1024 + 1;
            fin.finalize(&bind(4, s), &no_offsets).expect("finalizes")
        })
    });
    group.bench_function("gpt2_small_new_shape_with_offsets", |bch| {
        bch.iter(|| {
            s = s % 1024 + 1;
            fin.finalize(&bind(4, s), &FinalizeOptions::default())
                .expect("finalizes")
        })
    });
    let peak = finalize(&plan, &bind(4, 512), &no_offsets)
        .expect("finalizes")
        .peak_bytes_scheduled;
    let budget = FinalizeOptions {
        budget: Some(peak / 2),
        offsets: false,
        ..Default::default()
    };
    group.bench_function("gpt2_small_budget_half_B4_S512", |bch| {
        bch.iter(|| fin.finalize(&bind(4, 512), &budget).expect("finalizes"))
    });
    group.bench_function("gpt2_small_budget_half_B4_S512_unprepared", |bch| {
        bch.iter(|| finalize(&plan, &bind(4, 512), &budget).expect("finalizes"))
    });
    let mut cache = PlanCache::new(Arc::new(plan.clone()), 64);
    let opts = FinalizeOptions::default();
    cache.get(&bind(4, 512), &opts).expect("finalizes");
    group.bench_function("gpt2_small_cache_hit", |bch| {
        bch.iter(|| cache.get(&bind(4, 512), &opts).expect("cached"))
    });
    group.finish();
}

fn bench_finalize_medium(c: &mut Criterion) {
    let (g, _) = ebb_import::stablehlo::import_file(&fixture("gpt2_24l")).expect("fixture imports");
    let plan = Arc::new(
        compile(g, &CompileOptions::default())
            .expect("compiles")
            .plan,
    );
    let b = bind(8, 1024);
    let fin = Finalizer::new(plan.clone());
    fin.prepare_all();
    let scheduled = fin
        .finalize(&b, &FinalizeOptions::default())
        .expect("finalizes")
        .peak_bytes_scheduled;
    let opts = FinalizeOptions {
        budget: Some(scheduled / 2),
        device: ebb_plan::device::DeviceProfile::named("h100-sxm-pcie5").expect("a named profile"),
        ..Default::default()
    };
    let mut group = c.benchmark_group("finalize");
    group.sample_size(30);
    group.bench_function("gpt2_24l_B8_S1024_budget_half_offsets", |bch| {
        bch.iter(|| fin.finalize(&b, &opts).expect("finalizes"))
    });
    let mut cache = PlanCache::new(plan, 64);
    cache.prepare_all();
    cache.get(&b, &opts).expect("finalizes");
    group.bench_function("gpt2_24l_cache_hit", |bch| {
        bch.iter(|| cache.get(&b, &opts).expect("cached"))
    });
    group.finish();
}

criterion_group!(
    benches,
    bench_compile,
    bench_finalize,
    bench_finalize_medium
);
criterion_main!(benches);
