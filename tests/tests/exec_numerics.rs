//! Tests that the CPU executor (`ebb_runtime::execute`) reproduces JAX's numerics on the real
//! fixtures, is deterministic under every valid schedule, and accounts resident memory exactly
//! as the planner's memory model does.
//!
//! Reference data: `tests/fixtures/jax/<name>.ref{0,1}.npz` hold `in_i` (the inputs in graph
//! input order) and `out_i` (the outputs of `jax.jit(step)` on CPU), at the bindings listed in
//! `<name>.json` under `refs`.
//!
//! Metric: per output, `max |got - want| / max(max |want|, 1e-30)` (the error relative to the
//! output's scale, so that elements near zero in a gradient do not dominate).

use ebb_ir::{Bindings, Graph, NodeId, OpKind};
use ebb_runtime::{execute, program_schedule, Tensor};
use ebb_testkit::{
    fixture_refs, import_fixture as import, jax_fixtures_dir, jax_metadata as meta, load_ref,
};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

/// The reference files of a fixture with their bindings.
fn refs(name: &str) -> Vec<(PathBuf, Bindings)> {
    fixture_refs(&meta(name), &jax_fixtures_dir())
}

/// A schedule different from program order: reverse postorder of a depth-first search along
/// users, started from the roots in reverse program order.
fn rpo_schedule(g: &Graph) -> Vec<NodeId> {
    let order = g.order().to_vec();
    let mut seen: HashSet<NodeId> = HashSet::new();
    let mut post: Vec<NodeId> = Vec::new();
    for &root in order.iter().rev() {
        if seen.contains(&root) || !g.operands(root).is_empty() {
            continue;
        }
        // iterative DFS: (node, next user index)
        let mut stack: Vec<(NodeId, usize, Vec<NodeId>)> = Vec::new();
        seen.insert(root);
        let users: Vec<NodeId> = dedup(g.users(root).into_iter().map(|u| u.0).collect());
        stack.push((root, 0, users));
        while let Some((n, i, users)) = stack.last_mut() {
            if *i < users.len() {
                let u = users[*i];
                *i += 1;
                if seen.insert(u) {
                    let us = dedup(g.users(u).into_iter().map(|x| x.0).collect());
                    stack.push((u, 0, us));
                }
            } else {
                post.push(*n);
                stack.pop();
            }
        }
    }
    post.reverse();
    post.into_iter()
        .filter(|&id| g.node(id).kind() != OpKind::Input)
        .collect()
}

fn dedup(mut v: Vec<NodeId>) -> Vec<NodeId> {
    v.dedup();
    v
}

/// AdamW hyperparameters of a fixture (`config.optimizer` in its json), if it uses AdamW.
struct AdamW {
    lr: f64,
    b1: f64,
    b2: f64,
    eps: f64,
}

fn adamw(m: &serde_json::Value) -> Option<AdamW> {
    let s = m["config"]["optimizer"]
        .as_str()?
        .strip_prefix("optax.adamw(")?
        .strip_suffix(')')?;
    let kv: BTreeMap<&str, f64> = s
        .split(',')
        .filter_map(|p| p.trim().split_once('='))
        .map(|(k, v)| (k, v.parse().unwrap()))
        .collect();
    Some(AdamW {
        lr: kv["lr"],
        b1: kv["b1"],
        b2: kv["b2"],
        eps: kv["eps"],
    })
}

/// The error of one output.
struct OutputErr {
    /// Worst element error in units of its tolerance (<= 1 passes).
    units: f64,
    /// The plain relative error ([`rel_err`]).
    rel: f64,
    /// Whether this is a parameter returned by an AdamW step (held to the conditioned
    /// tolerance).
    adam_param: bool,
}

/// The error of each output (see [`OutputErr`]).
///
/// Every output is compared with [`rel_err`] against `tol`, except the parameters returned by
/// an AdamW step. Those are ill-conditioned in the gradient: the update `lr * m/(sqrt(v)+eps)`
/// is close to `lr * sign(g)` wherever `|g|` is near or below `eps` (for example the key bias
/// of attention, whose exact gradient is zero, so JAX's and our values are both rounding
/// noise), and there a gradient difference far below `tol` moves the parameter by up to `lr`.
/// For each such element the test recovers the gradient `g` from JAX's outputs
/// (`g = (mu' - b1 mu)/(1 - b1)`), takes the gradient tolerance `dg = tol * max|g|` (the same
/// relative tolerance the `mu` and `nu` outputs are held to), and allows
/// `tol * max|p'| + lr * max over g±dg of |u(g±dg) - u(g)|` with `u` the bias-corrected Adam
/// direction at step `t = count + 1` (optax's `scale_by_adam`; weight decay does not depend on
/// `g`).
fn compare_outputs(
    name: &str,
    g: &Graph,
    ins: &[Tensor],
    got: &[Tensor],
    want: &[Tensor],
    tol: f64,
) -> Vec<OutputErr> {
    let m = meta(name);
    let opt = adamw(&m);
    let in_paths: Vec<String> = m["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["path"].as_str().unwrap().to_string())
        .collect();
    let out_paths: Vec<String> = m["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["path"].as_str().unwrap().to_string())
        .collect();
    // AdamW's state, alone or wrapped (`optax.apply_if_finite`'s `inner_state`).
    let find = |paths: &[String], p: &str| {
        ["[0]", ".inner_state[0]"].iter().find_map(|w| {
            let q = p.replacen("opt_state[0]", &format!("opt_state{w}"), 1);
            paths.iter().position(|x| *x == q)
        })
    };
    let mut res = Vec::new();
    for (i, (a, e)) in got.iter().zip(want).enumerate() {
        let r = a.rel_err(e);
        let leaf = out_paths[i].strip_prefix("new_params");
        let adam = opt.as_ref().zip(leaf).and_then(|(o, leaf)| {
            let mu_in = find(&in_paths, &format!("opt_state[0].mu{leaf}"))?;
            let mu_out = find(&out_paths, &format!("new_opt_state[0].mu{leaf}"))?;
            let nu_out = find(&out_paths, &format!("new_opt_state[0].nu{leaf}"))?;
            let count = find(&in_paths, "opt_state[0].count")?;
            Some((o, mu_in, mu_out, nu_out, ins[count].to_f64_vec()[0] + 1.0))
        });
        let units = match adam {
            None => r / tol,
            Some((o, mu_in, mu_out, nu_out, t)) => {
                let (x, y) = (a.to_f64_vec(), e.to_f64_vec());
                let mu0 = ins[mu_in].to_f64_vec();
                let (mu1, nu1) = (want[mu_out].to_f64_vec(), want[nu_out].to_f64_vec());
                let grad: Vec<f64> = mu1
                    .iter()
                    .zip(&mu0)
                    .map(|(m1, m0)| (m1 - o.b1 * m0) / (1.0 - o.b1))
                    .collect();
                let dg = tol * grad.iter().fold(0f64, |acc, v| acc.max(v.abs()));
                let scale = y.iter().fold(0f64, |acc, v| acc.max(v.abs())).max(1e-30);
                let (c1, c2) = (1.0 - o.b1.powf(t), 1.0 - o.b2.powf(t));
                let nu0: Vec<f64> = nu1
                    .iter()
                    .zip(&grad)
                    .map(|(n1, gg)| (n1 - (1.0 - o.b2) * gg * gg) / o.b2)
                    .collect();
                let u = |k: usize, gg: f64| {
                    let m = o.b1 * mu0[k] + (1.0 - o.b1) * gg;
                    let v = (o.b2 * nu0[k] + (1.0 - o.b2) * gg * gg).max(0.0);
                    (m / c1) / ((v / c2).sqrt() + o.eps)
                };
                (0..x.len())
                    .map(|k| {
                        let du = (u(k, grad[k] + dg) - u(k, grad[k]))
                            .abs()
                            .max((u(k, grad[k] - dg) - u(k, grad[k])).abs());
                        (x[k] - y[k]).abs() / (tol * scale + o.lr * du)
                    })
                    .fold(0f64, f64::max)
            }
        };
        assert!(
            units <= 1.0,
            "{name}: output {i} `{}` rel err {r:e} ({units:.2} x tolerance)",
            g.output_names[i]
        );
        res.push(OutputErr {
            units,
            rel: r,
            adam_param: adam.is_some(),
        });
    }
    res
}

/// Runs every reference of `name`; returns, per reference, the worst error in tolerance units,
/// the worst plain relative error of the outputs other than AdamW parameters, and that of the
/// AdamW parameters (0 when there are none).
fn check_fixture(name: &str, tol: f64) -> Vec<(f64, f64, f64)> {
    let g = import(name);
    let sched = program_schedule(&g);
    let mut worst = Vec::new();
    for (path, b) in refs(name) {
        let (ins, want) = load_ref(&path, g.inputs().len(), g.outputs().len());
        let t = Instant::now();
        let (got, stats) =
            execute(&g, &sched, &b, ins.clone()).unwrap_or_else(|e| panic!("{name} at {b:?}: {e}"));
        let dt = t.elapsed();
        assert_eq!(got.len(), want.len());
        let errs = compare_outputs(name, &g, &ins, &got, &want, tol);
        let w = errs.iter().fold((0f64, 0f64, 0f64), |acc, e| {
            let (plain, adam) = if e.adam_param {
                (acc.1, acc.2.max(e.rel))
            } else {
                (acc.1.max(e.rel), acc.2)
            };
            (acc.0.max(e.units), plain, adam)
        });
        println!(
            "{name} {b:?}: worst {:.3} x tolerance; worst rel err {:.3e} (AdamW params: {:.3e}); {dt:?}; peak {} bytes",
            w.0, w.1, w.2, stats.peak_bytes
        );
        worst.push(w);
    }
    worst
}

#[test]
fn mlp_sgd_matches_jax() {
    check_fixture("mlp_sgd", 1e-5);
}

#[test]
fn gpt2_tiny_adamw_matches_jax() {
    check_fixture("gpt2_tiny_adamw", 1e-5);
}

#[test]
fn gpt2_tiny_scan_matches_jax() {
    check_fixture("gpt2_tiny_scan", 1e-5);
}

/// Dropout masks from `jax.random.bernoulli` (threefry2x32 in a `while`, `ui64` products,
/// `bitcast_convert` to `f32`) must be bit-exact for the loss to match; the `lax.cond` clip
/// takes the pass-through branch at ref0 and the scaling branch at ref1.
#[test]
fn gpt2_tiny_dropout_matches_jax() {
    check_fixture("gpt2_tiny_dropout", 1e-5);
}

/// Batch norm in training mode (batch statistics, running averages as outputs), residual
/// blocks, stride-2 and 1x1 convolutions, SGD with momentum.
#[test]
fn resnet_bn_matches_jax() {
    check_fixture("resnet_bn", 1e-5);
}

/// A small UNet: group norm + SiLU after every 3x3 convolution, stride-2 downsamples, a
/// nearest-neighbour upsample and a stride-2 `conv_transpose` (lhs-dilated convolutions),
/// skip concatenations, MSE, SGD with momentum.
#[test]
fn unet_gn_matches_jax() {
    check_fixture("unet_gn", 1e-5);
}

/// A convolutional VAE: stride-2 encoder, reparameterization from a noise input, a
/// `conv_transpose` decoder, the negative ELBO, Adam.
#[test]
fn vae_convt_matches_jax() {
    check_fixture("vae_convt", 1e-5);
}

#[test]
fn cnn_sgd_matches_jax() {
    check_fixture("cnn_sgd", 1e-5);
}

/// Images `(B, 8*h, 8*w, 3)`: JAX's divmod assertions become facts, the weight-gradient
/// convolutions have symbolic kernel sizes, the loss uses `take_along_axis`.
#[test]
fn cnn_poly_sgd_matches_jax() {
    check_fixture("cnn_poly_sgd", 1e-5);
}

/// Inputs whose dimensions are expressions of the symbols: tokens `(B, S+1)` sliced into
/// inputs and targets, per-token weights `(B*S,)`; the embedding read by `jnp.take`
/// (`mode="fill"`).
#[test]
fn shifted_lm_take_matches_jax() {
    check_fixture("shifted_lm_take", 1e-5);
}

/// bf16 has an 8-bit significand (relative spacing 2^-8 = 3.9e-3): one rounding of a logit
/// differently from XLA moves a result by up to half of that, and the bf16 matmuls feed the
/// f32 loss and gradients, so the tolerance is a few bf16 ulps.
#[test]
fn mlp_bf16_matches_jax_within_bf16_rounding() {
    check_fixture("mlp_bf16", 2e-2);
}

/// bf16 compute from f32 master weights with dynamic loss scaling through
/// `optax.apply_if_finite`: ref0 takes the update branch of its `case`, ref1 (an infinite
/// scale) the skip branch, which returns the old moments unchanged.
#[test]
fn gpt_bf16_scaled_matches_jax() {
    check_fixture("gpt_bf16_scaled", 2e-2);
}

/// The same step computing in `f16` (11-bit significand, loss scaling against its narrow
/// range): both branches of the `case` against JAX.
#[test]
fn gpt_f16_scaled_matches_jax() {
    check_fixture("gpt_f16_scaled", 2e-2);
}

#[test]
fn outputs_are_bit_identical_under_two_schedules() {
    for name in ["mlp_sgd", "gpt2_tiny_adamw", "gpt2_tiny_scan", "cnn_sgd"] {
        let g = import(name);
        let a = program_schedule(&g);
        let b = rpo_schedule(&g);
        assert_eq!(a.len(), b.len());
        assert_ne!(a, b, "{name}: the two schedules should differ");
        let (path, bind) = refs(name).remove(1);
        let (ins, _) = load_ref(&path, g.inputs().len(), g.outputs().len());
        let (oa, _) = execute(&g, &a, &bind, ins.clone()).unwrap();
        let (ob, _) = execute(&g, &b, &bind, ins).unwrap();
        for (i, (x, y)) in oa.iter().zip(&ob).enumerate() {
            assert!(x.bits_eq(y), "{name}: output {i} differs between schedules");
        }
    }
}

#[test]
fn resident_bytes_match_the_planner_model() {
    let cases = [
        ("mlp_sgd", 1),
        ("gpt2_tiny_adamw", 1),
        ("gpt2_tiny_scan", 1),
        ("cnn_sgd", 1),
        // Both `case` branches: the executor charges the branch it does not take as the
        // planner does.
        ("gpt2_tiny_dropout", 0),
        ("gpt2_tiny_dropout", 1),
        // Results written over forwarded and dying operands, in both branches.
        ("gpt_bf16_scaled", 0),
        ("gpt_bf16_scaled", 1),
    ];
    for (name, r) in cases {
        let g = import(name);
        for sched in [program_schedule(&g), rpo_schedule(&g)] {
            let (path, bind) = refs(name).remove(r);
            let (ins, _) = load_ref(&path, g.inputs().len(), g.outputs().len());
            let (_, stats) = execute(&g, &sched, &bind, ins).unwrap();
            let live = ebb_passes::memory::liveness(&g, &sched);
            let model = live.resident_bytes(&bind).unwrap();
            let got: Vec<i64> = stats.resident_bytes.iter().map(|&x| x as i64).collect();
            assert_eq!(got, model, "{name}: executor and planner disagree");
            assert_eq!(stats.peak_bytes as i64, live.peak(&bind).unwrap().0);
        }
    }
}

#[test]
fn rejects_inputs_of_the_wrong_shape() {
    let g = import("mlp_sgd");
    let (path, _) = refs("mlp_sgd").remove(0);
    let (ins, _) = load_ref(&path, g.inputs().len(), g.outputs().len());
    let b = ebb_testkit::bind(&[("B", 5)]);
    let e = execute(&g, &program_schedule(&g), &b, ins).unwrap_err();
    assert!(e.to_string().contains("expected f32[5,64]"), "{e}");
}

/// One training step of the tiny GPT at B=8, S=256 (release build):
/// `cargo test --release -p ebb-tests --test integration exec_numerics -- --ignored --nocapture`.
#[test]
#[ignore]
fn measure_gpt2_tiny_adamw_step() {
    let g = import("gpt2_tiny_adamw");
    let (path, _) = refs("gpt2_tiny_adamw").remove(0);
    let (mut ins, _) = load_ref(&path, g.inputs().len(), g.outputs().len());
    let (bv, sv) = (8usize, 256usize);
    let b = ebb_testkit::bs(bv as i64, sv as i64);
    // tokens and targets: deterministic pseudo-random ids in [0, 256)
    let mut x = 12345u64;
    let mut ids = |n: usize| -> Vec<i32> {
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 33) % 256) as i32
            })
            .collect()
    };
    let n = ins.len();
    ins[n - 2] = Tensor::from_i32(vec![bv, sv], ids(bv * sv)).unwrap();
    ins[n - 1] = Tensor::from_i32(vec![bv, sv], ids(bv * sv)).unwrap();
    let sched = program_schedule(&g);
    let _ = execute(&g, &sched, &b, ins.clone()).unwrap();
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..5 {
        let t = Instant::now();
        let (outs, stats) = execute(&g, &sched, &b, ins.clone()).unwrap();
        times.push(t.elapsed());
        last = Some((outs, stats));
    }
    times.sort();
    let (outs, stats) = last.unwrap();
    println!(
        "gpt2_tiny_adamw B=8 S=256: median {:?} (min {:?}), loss {:?}, peak {:.1} MiB",
        times[2],
        times[0],
        outs[0].to_f64_vec(),
        stats.peak_bytes as f64 / 1048576.0
    );
    for (k, cnt, t) in stats.time_by_kind(&g, &sched).into_iter().take(10) {
        println!("  {:<20} {cnt:>5} ops {t:?}", k.name());
    }
    if std::env::var("EBB_TOP_OPS").is_ok() {
        let mut v: Vec<(std::time::Duration, usize)> =
            stats.op_time.iter().copied().zip(0..).collect();
        v.sort_by(|a, b| b.cmp(a));
        for (t, p) in v.into_iter().take(25) {
            let n = g.node(sched[p]);
            let ops: Vec<String> = g
                .operands(sched[p])
                .iter()
                .map(|o| g.value_type(*o).to_string())
                .collect();
            println!(
                "  {t:>12?} {} ({}) -> {}",
                n.kind(),
                ops.join(", "),
                n.outputs[0]
            );
        }
    }
}
