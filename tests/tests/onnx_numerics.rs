//! The CPU executor on imported ONNX fixtures reproduces ONNX Runtime's outputs.
//!
//! Reference data: `tests/fixtures/onnx/<name>.ref{0,1}.npz` hold `in_i` (graph inputs in
//! order) and `out_i` (onnxruntime's outputs, CPU, one thread) at the bindings listed in
//! `<name>.json` under `refs`.
//!
//! Metric (as in `exec_numerics.rs`): per output, `max |got − want| / max(max |want|, 1e-30)`.
//! Tolerance: 1e-5; 1e-4 for the parameters and moments returned by an AdamW step, whose
//! update `lr·m̂/(√v̂ + eps)` amplifies gradient rounding differences where `v̂` is tiny; the
//! torch AdamW parameters additionally get the gradient-conditioned bound of
//! [`adam_param_units`] (the ORT optimizer fixtures take the gradient as an input, so the
//! plain 1e-4 holds there).

use ebb_ir::Graph;
use ebb_runtime::npz::load_npz;
use ebb_runtime::{execute, program_schedule, Tensor};
use std::collections::BTreeMap;

use ebb_testkit::fixture_refs;
use onnx_common::{dir, meta};

use crate::onnx_common;

fn import(name: &str) -> Graph {
    let opts = onnx_common::options(name);
    let path = ebb_testkit::onnx_fixture(name);
    let zero: Vec<String> = meta(name)["refs_dropout_ratio_zero"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    if zero.is_empty() {
        return ebb_import::onnx::import_file_with(&path, &opts)
            .unwrap_or_else(|e| panic!("import {name}: {e}"))
            .0;
    }
    // The references ran with every Dropout ratio at 0 (the masks are random): so does this
    // import.
    let bytes = std::fs::read(&path).unwrap();
    let mut model = ebb_import::onnx::decode_model(&bytes, name).unwrap();
    let graph = model.graph.as_mut().unwrap();
    let zeroed = |t: &mut ebb_import::onnx::proto::TensorProto| {
        t.float_data.iter_mut().for_each(|x| *x = 0.0);
        if let Some(r) = t.raw_data.as_mut() {
            r.iter_mut().for_each(|b| *b = 0);
        }
    };
    let mut done = 0;
    for t in graph.initializer.iter_mut() {
        if zero.iter().any(|z| Some(z.as_str()) == t.name.as_deref()) {
            zeroed(t);
            done += 1;
        }
    }
    for n in graph.node.iter_mut() {
        if n.op_type.as_deref() == Some("Constant") && zero.contains(&n.output[0]) {
            for a in n.attribute.iter_mut() {
                if let Some(t) = a.t.as_mut() {
                    zeroed(t);
                    done += 1;
                }
            }
        }
    }
    assert_eq!(done, zero.len(), "{name}: ratio values not found");
    ebb_import::onnx::import_model(&model, name, None, &opts)
        .unwrap_or_else(|e| panic!("import {name}: {e}"))
        .0
}

/// npz member names of the graph inputs, in Ebb's input order (`in_i`, or `in_i.j` for
/// element `j` of sequence input `i`), and of the in-place results by Ebb output name
/// (`<input>@after` → `after_in_i`, `<input>[j]@after` → `after_in_i.j`).
fn npz_names(m: &serde_json::Value) -> (Vec<String>, BTreeMap<String, String>) {
    let mut ins = Vec::new();
    let mut after = BTreeMap::new();
    for (i, x) in m["inputs"].as_array().unwrap().iter().enumerate() {
        let name = x["name"].as_str().unwrap();
        match x["elements"].as_array() {
            Some(el) => {
                for j in 0..el.len() {
                    ins.push(format!("in_{i}.{j}"));
                    after.insert(format!("{name}[{j}]@after"), format!("after_in_{i}.{j}"));
                }
            }
            None => {
                ins.push(format!("in_{i}"));
                after.insert(format!("{name}@after"), format!("after_in_{i}"));
            }
        }
    }
    (ins, after)
}

/// AdamW hyper-parameters of a torch fixture (`config.optimizer`, `AdamW(lr=.., betas=(..,
/// ..), eps=.., weight_decay=..)`).
struct AdamW {
    lr: f64,
    b1: f64,
    b2: f64,
    eps: f64,
}

fn adamw(m: &serde_json::Value) -> Option<AdamW> {
    let s = m["config"]["optimizer"].as_str()?.strip_prefix("AdamW(")?;
    let num = |key: &str| -> Option<f64> {
        let rest = &s[s.find(key)? + key.len()..];
        let end = rest.find([',', ')']).unwrap_or(rest.len());
        rest[..end].trim().parse().ok()
    };
    let betas = &s[s.find("betas=(")? + 7..];
    let (b1, rest) = betas.split_once(',')?;
    let b2 = rest.split_once(')')?.0;
    Some(AdamW {
        lr: num("lr=")?,
        b1: b1.trim().parse().ok()?,
        b2: b2.trim().parse().ok()?,
        eps: num("eps=")?,
    })
}

/// The error of one output: the plain relative error ([`rel_err`]) and the worst element
/// error in units of its tolerance (<= 1 passes).
struct OutputErr {
    rel: f64,
    units: f64,
}

/// Error of a parameter returned by a torch AdamW step, in units of its tolerance.
///
/// The update `lr·m̂/(√v̂ + eps)` is ill-conditioned in the gradient where `|g|` is near or
/// below `eps`: there both values are rounding noise (e.g. the attention key bias, whose exact
/// gradient is zero), and a gradient difference far below `tol` moves the parameter by up to
/// `lr`. As in `exec_numerics.rs`, the gradient is recovered from the reference
/// (`g = (m' − β₁m)/(1 − β₁)`), `dg = tol·max|g|`, and each element may differ by
/// `tol·max|p'| + lr·max over g±dg of |u(g±dg) − u(g)|` with `u` the bias-corrected direction
/// at step `t = step + 1`.
fn adam_param_units(
    got: &Tensor,
    want: &Tensor,
    p_name: &str,
    ins: &BTreeMap<String, Tensor>,
    wants: &BTreeMap<String, Tensor>,
    opt: &AdamW,
    tol: f64,
) -> f64 {
    let key = p_name.strip_prefix("params.").unwrap();
    let m = ins[&format!("adam.m.{key}")].to_f64_vec();
    let v = ins[&format!("adam.v.{key}")].to_f64_vec();
    let t = ins["adam.step"].to_f64_vec()[0] + 1.0;
    let m1 = wants[&format!("new_adam.m.{key}")].to_f64_vec();
    let g: Vec<f64> = m1
        .iter()
        .zip(&m)
        .map(|(m1, m)| (m1 - opt.b1 * m) / (1.0 - opt.b1))
        .collect();
    let dg = tol * g.iter().fold(0f64, |a, x| a.max(x.abs()));
    let (bc1, bc2) = (1.0 - opt.b1.powf(t), 1.0 - opt.b2.powf(t));
    let u = |i: usize, g: f64| {
        let mh = (opt.b1 * m[i] + (1.0 - opt.b1) * g) / bc1;
        let vh = (opt.b2 * v[i] + (1.0 - opt.b2) * g * g) / bc2;
        mh / (vh.sqrt() + opt.eps)
    };
    let (a, b) = (got.to_f64_vec(), want.to_f64_vec());
    let scale = b.iter().fold(0f64, |x, y| x.max(y.abs())).max(1e-30);
    let mut worst = 0f64;
    for i in 0..a.len() {
        let spread = (u(i, g[i] + dg) - u(i, g[i]))
            .abs()
            .max((u(i, g[i] - dg) - u(i, g[i])).abs());
        let allowed = tol * scale + opt.lr * spread;
        worst = worst.max((a[i] - b[i]).abs() / allowed);
    }
    worst
}

/// Whether output `name` of an AdamW step is a parameter or moment (see the module docs).
fn adam_state(name: &str) -> bool {
    name.starts_with("new_params") || name.starts_with("new_adam") || name.ends_with("]@after")
}

/// Runs every reference of `name`; returns the worst error per output name, over refs.
fn run(name: &str) -> Vec<(String, OutputErr)> {
    let g = import(name);
    let m = meta(name);
    let opt = adamw(&m);
    let adam = name.contains("adam") || name.contains("optimizer");
    let out_names: Vec<String> = g.output_names.clone();
    let (in_npz, after) = npz_names(&m);
    let in_names: Vec<String> = m["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap().to_string())
        .collect();
    let mut worst: Vec<OutputErr> = (0..out_names.len())
        .map(|_| OutputErr {
            rel: 0.0,
            units: 0.0,
        })
        .collect();
    for (path, b) in fixture_refs(&m, &dir()) {
        let mut all: BTreeMap<String, Tensor> = load_npz(&path).unwrap();
        assert_eq!(in_npz.len(), g.inputs().len());
        let ins: Vec<Tensor> = in_npz
            .iter()
            .map(|n| all.remove(n).unwrap_or_else(|| panic!("{name}: no {n}")))
            .collect();
        // Inputs by ONNX name (tensor inputs only; used by the AdamW bound).
        let by_name: BTreeMap<String, Tensor> = in_npz
            .iter()
            .zip(&ins)
            .filter_map(|(k, t)| {
                let i: usize = k.strip_prefix("in_")?.parse().ok()?;
                Some((in_names[i].clone(), t.clone()))
            })
            .collect();
        let (got, _) = execute(&g, &program_schedule(&g), &b, ins)
            .unwrap_or_else(|e| panic!("{name} at {b:?}: {e}"));
        assert_eq!(got.len(), out_names.len());
        let keys: Vec<String> = (0..got.len())
            .map(|i| {
                after
                    .get(&out_names[i])
                    .cloned()
                    .unwrap_or(format!("out_{i}"))
            })
            .collect();
        let wants: BTreeMap<String, Tensor> = keys
            .iter()
            .zip(&out_names)
            .map(|(k, o)| {
                let t = all.remove(k).unwrap_or_else(|| panic!("{name}: no {k}"));
                (o.clone(), t)
            })
            .collect();
        for (i, t) in got.iter().enumerate() {
            let o = &out_names[i];
            let want = &wants[o];
            let rel = t.rel_err(want);
            let tol = if adam && adam_state(o) { 1e-4 } else { 1e-5 };
            let units = match (&opt, o.strip_prefix("new_")) {
                (Some(opt), Some(p)) if p.starts_with("params.") => {
                    adam_param_units(t, want, p, &by_name, &wants, opt, tol)
                }
                _ => rel / tol,
            };
            worst[i].rel = worst[i].rel.max(rel);
            worst[i].units = worst[i].units.max(units);
        }
    }
    out_names.into_iter().zip(worst).collect()
}

fn check(name: &str) {
    let mut bad = Vec::new();
    let mut max = 0f64;
    for (o, e) in run(name) {
        max = max.max(e.rel);
        if e.units.is_nan() || e.units > 1.0 {
            bad.push(format!(
                "{o}: rel {:.3e}, {:.2} x its tolerance",
                e.rel, e.units
            ));
        }
    }
    eprintln!("{name}: max rel err {max:.3e}");
    assert!(bad.is_empty(), "{name}: {bad:#?}");
}

#[test]
fn torch_mlp_sgd() {
    check("torch_mlp_sgd");
}

#[test]
fn torch_mlp_adam() {
    check("torch_mlp_adam");
}

#[test]
fn torch_gpt2_tiny_sgd() {
    check("torch_gpt2_tiny_sgd");
}

#[test]
fn torch_gpt2_tiny_adam() {
    check("torch_gpt2_tiny_adam");
}

/// A top-2 MoE router: `torch.topk` (ONNX `TopK`, a stable sort and a slice), the chosen
/// experts gathered (`GatherElements`) and their gradients scattered back.
#[test]
fn torch_moe_top2_sgd() {
    check("torch_moe_top2_sgd");
}

/// `F.cross_entropy` as users write it: GatherElements forward, ScatterElements backward.
#[test]
fn torch_gpt2_tiny_ce_adam() {
    check("torch_gpt2_tiny_ce_adam");
}

/// `F.cross_entropy` traced as written: `NegativeLogLikelihoodLoss` (one ignored label per
/// batch) against ONNX Runtime's outputs on the file.
#[test]
fn torch_mlp_ce_nll_sgd() {
    check("torch_mlp_ce_nll_sgd");
}

#[test]
fn ort_mlp_training() {
    check("ort_mlp_training");
}

/// Tanh activations: ONNX Runtime differentiates them with `com.microsoft` `TanhGrad`.
#[test]
fn ort_mlp_tanh_training() {
    check("ort_mlp_tanh_training");
}

#[test]
fn ort_mlp_tanh_optimizer() {
    check("ort_mlp_tanh_optimizer");
}

#[test]
fn ort_mlp_optimizer() {
    check("ort_mlp_optimizer");
}

/// A CNN: `Conv`, `MaxPool` (its `Indices` kept for the gradient), `ReduceMean` global
/// pooling; ORT's `ConvGrad`, `MaxPoolGrad` and `Scale`.
#[test]
fn ort_cnn_training() {
    check("ort_cnn_training");
}

/// Batch norm in training mode: ORT rewrites it to `BatchNormInternal` (batch statistics,
/// saved mean and inverse std) with `BatchNormalizationGrad`.
#[test]
fn ort_cnn_bn_training() {
    check("ort_cnn_bn_training");
}

#[test]
fn ort_cnn_optimizer() {
    check("ort_cnn_optimizer");
}

/// Training-mode `Dropout` and ORT's `DropoutGrad`, checked with every ratio at 0 (the
/// references' masks are ORT's random numbers); the dropout-active run is checked by
/// `run_planned` (bit-identical under a budget) and `onnx_import` (mask statistics).
#[test]
fn ort_gpt2_tiny_dropout_training() {
    check("ort_gpt2_tiny_dropout_training");
}

#[test]
fn ort_gpt2_tiny_training() {
    check("ort_gpt2_tiny_training");
}

#[test]
fn ort_gpt2_tiny_optimizer() {
    check("ort_gpt2_tiny_optimizer");
}
