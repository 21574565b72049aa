//! Trains the bundled 2-layer GPT (JAX export, AdamW) for a few steps on batches of varying
//! sequence length under one fixed device budget, through Ebb's embedding API: compile once
//! (`Compiler::compile_file`), then `Runtime::step` per batch (finalize at the batch's shape —
//! cached when seen before — and execute with the plan's evictions, recomputes and swaps).
//!
//! Run: `cargo run --release -p ebb-compiler --example train_loop [-- STEPS]`
//!
//! The initial parameters and optimizer state are JAX's own (the fixture's reference inputs,
//! `tests/fixtures/jax/gpt2_tiny_adamw.ref0.npz`); the data is a fixed periodic token stream,
//! so the loss must go down. The step's inputs are the 85 parameter/optimizer-state tensors
//! followed by `tokens` and `targets` (both `i32[B, S]`); its outputs are the loss followed by
//! the 85 updated tensors, which feed the next step.

use anyhow::{ensure, Context, Result};
use ebb_pipeline::api::Compiler;
use ebb_pipeline::{self as pipeline, parse_bindings};
use ebb_runtime::inputs::npz_inputs;
use ebb_runtime::{Runtime, Tensor};
use std::path::Path;

const FIXTURE: &str = "tests/fixtures/jax/gpt2_tiny_adamw";
const BATCH: i64 = 8;
const SEQ_LENS: [i64; 4] = [37, 128, 201, 64];
const VOCAB: usize = 256;

/// `tokens[b, t] = (7·(t + 3b)) mod 61`, `targets` the next token of the same stream.
fn batch(s: usize) -> Result<(Tensor, Tensor)> {
    let b = BATCH as usize;
    let tok = |b: usize, t: usize| ((7 * (t + 3 * b)) % 61 % VOCAB) as i32;
    let mut x = Vec::with_capacity(b * s);
    let mut y = Vec::with_capacity(b * s);
    for i in 0..b {
        for t in 0..s {
            x.push(tok(i, t));
            y.push(tok(i, t + 1));
        }
    }
    Ok((
        Tensor::from_i32(vec![b, s], x)?,
        Tensor::from_i32(vec![b, s], y)?,
    ))
}

fn main() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::env::set_current_dir(&root).context("cannot enter the repository root")?;
    let steps: usize = match std::env::args().nth(1) {
        Some(s) => s.parse().context("STEPS must be a number")?,
        None => 12,
    };
    let plan = Compiler::default().compile_file(Path::new(&format!("{FIXTURE}.mlir")))?;
    // One fixed budget: half the program-order peak at the longest sequence.
    let longest = SEQ_LENS.iter().max().copied().unwrap_or(1);
    let b_max = parse_bindings(&format!("B={BATCH},S={longest}"))?;
    let po = pipeline::plan_report(&plan, &b_max, None)?.peak_bytes_program_order;
    let budget = po / 2;
    let mut rt = Runtime::new(plan, Some(budget))?;
    let n_in = rt.graph().inputs().len();
    let (init, _) = npz_inputs(Path::new(&format!("{FIXTURE}.ref0.npz")), n_in)?;
    let mut state: Vec<Tensor> = init[..n_in - 2].to_vec();
    println!(
        "2-layer GPT, AdamW, B={BATCH}, budget {:.1} MiB (50% of the program-order peak at S={longest})",
        budget as f64 / 1048576.0
    );
    println!(
        "{:>4} {:>4} {:>9} {:>12} {:>12} {:>9} {:>8} {:>9} {:>6}",
        "step",
        "S",
        "loss",
        "planned MiB",
        "measured MiB",
        "decisions",
        "fin. us",
        "wall ms",
        "cache"
    );
    let mut losses = Vec::new();
    for step in 0..steps {
        let s = SEQ_LENS[step % SEQ_LENS.len()];
        let bind = parse_bindings(&format!("B={BATCH},S={s}"))?;
        let (tokens, targets) = batch(s as usize)?;
        let mut inputs = state.clone();
        inputs.push(tokens);
        inputs.push(targets);
        let out = rt.step(&bind, inputs)?;
        let r = &out.report;
        let loss = out.outputs[0].to_f64_vec()[0];
        println!(
            "{step:>4} {s:>4} {loss:>9.5} {:>12.2} {:>12.2} {:>9} {:>8.0} {:>9.1} {:>6}",
            r.peak_bytes_planned as f64 / 1048576.0,
            r.measured_peak_bytes as f64 / 1048576.0,
            r.recompute_decisions + r.swap_decisions,
            r.finalize_us,
            r.wall_ms,
            if r.cache_hit { "hit" } else { "miss" }
        );
        ensure!(r.peak_bytes_planned <= budget, "over budget");
        losses.push((s, loss));
        state = out.outputs[1..].to_vec();
    }
    // Compare each sequence length's first and last loss (lengths differ in difficulty).
    for &s in &SEQ_LENS {
        let l: Vec<f64> = losses.iter().filter(|x| x.0 == s).map(|x| x.1).collect();
        if let (Some(first), Some(last)) = (l.first(), l.last()) {
            if l.len() > 1 {
                println!("S={s}: loss {first:.4} -> {last:.4}");
                ensure!(last < first, "the loss did not go down at S={s}");
            }
        }
    }
    Ok(())
}
