//! `case` without copies on the real bf16 loss-scaled step (`gpt_bf16_scaled`:
//! `optax.apply_if_finite` around AdamW, whose skip branch returns the old moments): the
//! symbolic plan's scheduled peak is at most XLA's at every measured shape, donated and not.
//!
//! XLA's figures (bytes: arguments + outputs − aliased + temp of
//! `jax.jit(step).lower(...).compile().memory_analysis()`, JAX 0.10.2 on the CPU) are
//! committed here, as `examples/export/xla_peer.py` printed them:
//! `python examples/export/xla_peer.py --fixture gpt_bf16_scaled --shapes
//! 'B=2,S=8;B=8,S=32;B=8,S=128;B=32,S=128'` (`total_bytes`, `donated_total_bytes`); the run
//! side by side with Ebb is `ebb bench ... --xla` (docs/results/2026-11-28-case-without-copies.md).

use ebb_passes::donate::DonatePolicy;
use ebb_pipeline::{self as pipeline, CompileOptions};

/// (B, S, XLA total bytes without donation, with every argument donated).
const XLA: &[(i64, i64, i64, i64)] = &[
    (2, 8, 945_917, 676_461),
    (8, 32, 2_728_829, 2_457_197),
    (8, 128, 10_866_557, 10_585_709),
    (32, 128, 42_319_677, 42_030_701),
];

/// Tests that the fused plan's scheduled peak is at most XLA's in the same donation mode at
/// every shape of [`XLA`].
#[test]
fn bf16_loss_scaled_peak_is_at_most_xla() {
    for (donate, donated) in [(DonatePolicy::Auto, true), (DonatePolicy::None, false)] {
        let opts = CompileOptions::builder()
            .fusion(true)
            .donate(donate)
            .build();
        let plan = ebb_testkit::compile_fixture("gpt_bf16_scaled", &opts).plan;
        for &(b, s, plain, all) in XLA {
            let bind = ebb_testkit::bs(b, s);
            let r = pipeline::plan_report(&plan, &bind, None).unwrap();
            let xla = if donated { all } else { plain };
            println!(
                "B={b} S={s} donated={donated}: Ebb {} bytes, XLA {xla} bytes",
                r.peak_bytes_scheduled
            );
            assert!(
                r.peak_bytes_scheduled <= xla,
                "B={b} S={s} donated={donated}: Ebb {} > XLA {xla}",
                r.peak_bytes_scheduled
            );
        }
    }
}
