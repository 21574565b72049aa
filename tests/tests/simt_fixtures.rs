//! The GPU executor on the simulated device (`--executor simt --check`) over every JAX and
//! ONNX fixture, with no budget and under half of the scheduled peak (or the smallest feasible
//! budget where half is infeasible, as `run_planned.rs`), priced on an H100 so that both
//! recompute and swap decisions are taken: the outputs equal the reference executor's (bit for
//! bit, or within the stated tolerance of the GPU's `log`/`exp`/`pow`), the measured peak
//! equals the planned one and the plan checker's, and the command sequence passes the hazard
//! check; every GPU kernel of the step compiles to PTX (`sm_80`, self-contained). Also:
//! dropping one event from a swapping step's commands is caught by the checker,
//! and a reload onto bytes still live is too.
//!
//! GPT-2 small and the 24-layer GPT-2 are left out (3 and 8.5 GB arenas at the smallest
//! shapes); `scripts/gpu-check.sh` runs GPT-2 small under `--executor simt`.

use ebb_ir::Bindings;
use ebb_pipeline::run::{self, InputSource, RunOptions};
use ebb_pipeline::{Budget, CompileOptions, Pricing};
use ebb_plan::finalize::{finalize, FinalizeError};
use ebb_plan::format::{DecisionKind, Plan};
use ebb_runtime::exec::device::{hazard, program::Cmd, DeviceProgram, KernelCache, COMPUTE, COPY};
use ebb_runtime::{Executor, Program};
use ebb_testkit::{jax_fixtures_dir, onnx_fixtures_dir};
use std::path::PathBuf;

/// The largest relative error accepted against the reference where outputs are not
/// bit-identical (`ebb run --device-tolerance`'s default).
const TOLERANCE: f64 = 1e-5;

/// The fixture's model and (for an ONNX Runtime optimizer model) its training model.
fn paths(name: &str) -> (PathBuf, Option<PathBuf>) {
    match name.strip_prefix("onnx/") {
        Some(n) => {
            let d = onnx_fixtures_dir();
            let train = n
                .contains("_optimizer")
                .then(|| d.join(format!("{}.onnx", n.replace("_optimizer", "_training"))));
            (d.join(format!("{n}.onnx")), train)
        }
        None => (jax_fixtures_dir().join(format!("{name}.mlir")), None),
    }
}

fn compile(name: &str) -> Plan {
    let (model, train) = paths(name);
    ebb_pipeline::api::load_or_compile_with(
        &model,
        None,
        train.as_deref(),
        &CompileOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{name}: {e:#}"))
}

/// The bindings of the fixture's first reference (`refs[0].bindings` of its json) of the
/// model's symbols (an ONNX Runtime optimizer model has none).
fn bindings(name: &str) -> Bindings {
    let (model, _) = paths(name);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(model.with_extension("json")).unwrap()).unwrap();
    let b = &meta["refs"][0]["bindings"];
    let symbols = meta["symbols"].as_array().cloned().unwrap_or_default();
    let text: Vec<String> = b
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| symbols.iter().any(|s| s.as_str() == Some(k.as_str())))
                .map(|(k, v)| format!("{k}={v}"))
                .collect()
        })
        .unwrap_or_default();
    ebb_pipeline::parse_bindings(&text.join(",")).unwrap()
}

fn h100() -> Pricing {
    Pricing {
        device: ebb_runtime::device::resolve("h100-sxm-pcie5").unwrap(),
        kinds: vec![DecisionKind::Recompute, DecisionKind::Swap],
    }
}

/// Half of the scheduled peak, or the smallest feasible budget above it.
fn half_budget(plan: &Plan, b: &Bindings) -> i64 {
    let p = h100();
    let scheduled = finalize(plan, b, &p.finalize_options(None, false))
        .unwrap()
        .peak_bytes_scheduled;
    let half = scheduled / 2;
    match finalize(plan, b, &p.finalize_options(Some(half), false)) {
        Err(FinalizeError::Infeasible { smallest, .. }) => smallest,
        r => {
            r.unwrap();
            half
        }
    }
}

/// `ebb run --executor simt --check` at the fixture's bindings under `budget`.
fn run_simt(name: &str, plan: &Plan, b: &Bindings, budget: Option<i64>) -> run::RunReport {
    run_simt_within(name, plan, b, budget, TOLERANCE)
}

/// [`run_simt`] accepting relative errors up to `tolerance` against the reference.
fn run_simt_within(
    name: &str,
    plan: &Plan,
    b: &Bindings,
    budget: Option<i64>,
    tolerance: f64,
) -> run::RunReport {
    let opts = RunOptions {
        budget: budget.map(Budget::Bytes),
        inputs: InputSource::Random(7),
        check: true,
        max_host_memory: None,
        executor: Executor::Simt,
        device_tolerance: tolerance,
        pricing: Some(h100()),
        ..RunOptions::new(b.clone())
    };
    let r = run::run(plan.clone(), &opts, &mut |_, _| {})
        .unwrap_or_else(|e| panic!("{name} budget {budget:?}: {e:#}"))
        .report;
    let planned = r
        .plan
        .peak_bytes_planned
        .unwrap_or(r.plan.peak_bytes_scheduled);
    assert_eq!(
        r.measured_peak_bytes as i64, planned,
        "{name}: measured vs planned"
    );
    assert_eq!(
        r.checker_peak_bytes,
        Some(planned),
        "{name}: checker vs planned"
    );
    assert_eq!(
        r.outputs_within_tolerance,
        Some(true),
        "{name}: outputs {:?}",
        r.reference_max_rel_err
    );
    let d = r.device.as_ref().expect("a device report");
    assert!(
        d.hazards.is_some(),
        "{name}: the simt step is hazard-checked"
    );
    assert!(d.run.arena_high_water_bytes as i64 <= r.plan.arena_bytes.unwrap_or(0));
    // Every fusion (loop and input) runs on the device, as one kernel or member by member.
    assert!(
        !d.program.host_ops.iter().any(|(k, _)| k == "fusion"),
        "{name}: fusions on the host: {:?}",
        d.program.host_ops
    );
    eprintln!(
        "{name} {b:?} budget {budget:?}: peak {} = planned = checker; {} recompute + {} swap; \
         bit-identical {:?} (rel err {:.1e}); {} launches of {} kernels, {} GEMMs, {} host calls {:?}",
        r.measured_peak_bytes,
        r.plan.recompute_decisions,
        r.plan.swap_decisions,
        r.outputs_match_reference,
        r.reference_max_rel_err.unwrap_or(0.0),
        d.program.launches,
        d.program.kernels,
        d.program.gemms,
        d.program.host_calls,
        d.program.host_ops
    );
    r
}

/// Every GPU kernel of `plan` (all schedule variants) at `b` compiles to PTX for the virtual
/// architecture, as `ebb compile --target cuda` stores it: one `.entry` of the kernel's name,
/// self-contained (no calls the driver would have to link, no `.extern`), PTX ISA 8.1 with its
/// parameters in one block of at most `MAX_PARAM_BYTES` with the buffers' pointers.
fn assert_ptx(name: &str, plan: &Plan, b: &Bindings) {
    let kernels = ebb_runtime::step::plan_kernels(plan, std::slice::from_ref(b))
        .unwrap_or_else(|e| panic!("{name}: PTX: {e}"));
    assert!(!kernels.is_empty(), "{name}: no GPU kernels");
    for k in &kernels {
        assert_eq!(k.arch, "sm_80", "{name}/{}", k.name);
        let target = format!(".target {}", k.arch);
        assert!(k.ptx.contains(&target), "{name}/{}: {}", k.name, k.ptx);
        let entry = format!(".entry {}", k.name);
        assert_eq!(k.ptx.matches(&entry).count(), 1, "{name}/{}", k.name);
        assert!(!k.ptx.contains("call.uni"), "{name}/{}: {}", k.name, k.ptx);
        assert!(!k.ptx.contains(".extern"), "{name}/{}: {}", k.name, k.ptx);
        // Loadable: the PTX ISA version that allows over 4 KB of parameters, within the limit.
        assert!(k.ptx.contains(".version 8.1"), "{name}/{}", k.name);
        // Buffers' pointers, then the parameter block read in place (no per-thread copy).
        let pointers = k.ptx.matches(".param .u64 .ptr").count();
        let block: usize = k
            .ptx
            .split(".param .align 8 .b8 ")
            .skip(1)
            .map(|rest| {
                let n = &rest[rest.find('[').unwrap() + 1..rest.find(']').unwrap()];
                n.parse::<usize>().unwrap()
            })
            .sum();
        let bytes = 8 * pointers + block;
        assert!(
            bytes <= 32_764, // `ebb_codegen::gpu::MAX_PARAM_BYTES`
            "{name}/{}: {bytes} bytes of parameters",
            k.name
        );
        assert!(block > 0, "{name}/{}: no parameter block", k.name);
    }
}

fn fixture(name: &str) {
    fixture_within(name, TOLERANCE);
}

fn fixture_within(name: &str, tolerance: f64) {
    let plan = compile(name);
    let b = bindings(name);
    assert_ptx(name, &plan, &b);
    run_simt_within(name, &plan, &b, None, tolerance);
    let budget = half_budget(&plan, &b);
    let r = run_simt_within(name, &plan, &b, Some(budget), tolerance);
    if budget < r.plan.peak_bytes_scheduled {
        assert!(
            r.plan.recompute_decisions + r.plan.swap_decisions > 0,
            "{name}: a budget below the scheduled peak takes decisions"
        );
    }
}

/// The VAE's Adam step on random inputs: Adam's first update `g / (sqrt(g²) + eps)` turns the
/// round-off of near-zero gradients into updates up to the learning rate, and the GPU lowering
/// sums each convolution in another order than the CPU's `exec/conv.rs`, so the outputs agree
/// within 1e-3 of their largest magnitude (2.8e-4 measured), not 1e-5.
#[test]
fn vae_convt() {
    fixture_within("vae_convt", 1e-3);
}

macro_rules! fixtures {
    ($($test:ident => $name:expr),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                fixture($name);
            }
        )*
    };
}

fixtures! {
    ckpt_cumsum_key => "ckpt_cumsum_key",
    cnn_poly_sgd => "cnn_poly_sgd",
    cnn_sgd => "cnn_sgd",
    gpt2_tiny_adamw => "gpt2_tiny_adamw",
    gpt2_tiny_dropout => "gpt2_tiny_dropout",
    gpt2_tiny_offload => "gpt2_tiny_offload",
    gpt2_tiny_remat => "gpt2_tiny_remat",
    gpt2_tiny_scan => "gpt2_tiny_scan",
    gpt2_tiny_scan_offload => "gpt2_tiny_scan_offload",
    mlp_bf16 => "mlp_bf16",
    mlp_sgd => "mlp_sgd",
    resnet_bn => "resnet_bn",
    unet_gn => "unet_gn",
    shifted_lm_take => "shifted_lm_take",
    ort_cnn_bn_optimizer => "onnx/ort_cnn_bn_optimizer",
    ort_cnn_bn_training => "onnx/ort_cnn_bn_training",
    ort_cnn_optimizer => "onnx/ort_cnn_optimizer",
    ort_cnn_training => "onnx/ort_cnn_training",
    ort_gpt2_tiny_dropout_optimizer => "onnx/ort_gpt2_tiny_dropout_optimizer",
    ort_gpt2_tiny_dropout_training => "onnx/ort_gpt2_tiny_dropout_training",
    ort_gpt2_tiny_optimizer => "onnx/ort_gpt2_tiny_optimizer",
    ort_gpt2_tiny_training => "onnx/ort_gpt2_tiny_training",
    ort_mlp_optimizer => "onnx/ort_mlp_optimizer",
    ort_mlp_tanh_optimizer => "onnx/ort_mlp_tanh_optimizer",
    ort_mlp_tanh_training => "onnx/ort_mlp_tanh_training",
    ort_mlp_training => "onnx/ort_mlp_training",
    torch_gpt2_tiny_adam => "onnx/torch_gpt2_tiny_adam",
    torch_gpt2_tiny_ce_adam => "onnx/torch_gpt2_tiny_ce_adam",
    torch_gpt2_tiny_sgd => "onnx/torch_gpt2_tiny_sgd",
    torch_mlp_adam => "onnx/torch_mlp_adam",
    torch_mlp_ce_nll_sgd => "onnx/torch_mlp_ce_nll_sgd",
    torch_mlp_sgd => "onnx/torch_mlp_sgd",
    torch_moe_top2_sgd => "onnx/torch_moe_top2_sgd",
}

/// The command sequence of `name` at its bindings under the smallest feasible budget priced
/// for swaps only (offloads and reloads on the copy stream).
fn swapping_commands(name: &str) -> Vec<Cmd> {
    let mut p = h100();
    p.kinds = vec![DecisionKind::Swap];
    tightest_commands(name, &p)
}

/// The smallest feasible budget of `plan` at `b` priced by `p`.
fn smallest_budget(plan: &Plan, b: &Bindings, p: &Pricing) -> i64 {
    match finalize(plan, b, &p.finalize_options(Some(1), true)) {
        Err(FinalizeError::Infeasible { smallest, .. }) => smallest,
        r => r.unwrap().peak_bytes_planned,
    }
}

/// The command sequence of `name` at its bindings under the smallest feasible budget priced
/// by `p`.
fn tightest_commands(name: &str, p: &Pricing) -> Vec<Cmd> {
    let plan = compile(name);
    let b = bindings(name);
    let smallest = smallest_budget(&plan, &b, p);
    let concrete = finalize(&plan, &b, &p.finalize_options(Some(smallest), true)).unwrap();
    let rt = ebb_runtime::Runtime::new(plan.clone(), None).unwrap();
    let g = rt.graph();
    let variant = plan.variant(concrete.variant).unwrap_or(&plan);
    let schedule = ebb_runtime::step::schedule_nodes(g, variant).unwrap();
    let prog = Program::new(g, &schedule, &b).unwrap();
    let events = prog.events(variant, &concrete.decisions).unwrap();
    assert!(!events.is_empty(), "{name}: decisions are taken");
    let cache = KernelCache::default();
    DeviceProgram::new(&prog, variant, &concrete.arena, &events, &cache)
        .unwrap()
        .cmds
}

/// What a wait orders: the compute stream after a reload or an offload, the copy stream
/// before an offload or a reload.
fn wait_kind(cmds: &[Cmd], i: usize) -> &'static str {
    let Cmd::Wait { stream, event } = cmds[i] else {
        unreachable!()
    };
    if stream == COPY {
        let next = cmds[i + 1..].iter().find_map(|c| match c {
            Cmd::Work { label, .. } => Some(label.what.clone()),
            _ => None,
        });
        return match next {
            Some(w) if w.starts_with("offload") => "copy stream before an offload",
            _ => "copy stream before a reload",
        };
    }
    // The copy-stream work just before the record of `event`.
    let rec = cmds
        .iter()
        .position(
            |c| matches!(c, Cmd::Record { event: e, stream } if *e == event && *stream == COPY),
        )
        .unwrap();
    match cmds[..rec].iter().rev().find_map(|c| match c {
        Cmd::Work { label, .. } => Some(label.what.clone()),
        _ => None,
    }) {
        Some(w) if w.starts_with("offload") => "compute stream after an offload",
        _ => "compute stream after a reload",
    }
}

/// Drops each of the sequence's waits in turn: the loss of every one the lowering emits is
/// caught (the lowering emits no wait that the clocks already imply), for each kind of wait.
#[test]
fn a_dropped_event_is_caught_by_the_hazard_checker() {
    let cmds = swapping_commands("gpt2_tiny_adamw");
    hazard::check(&cmds).expect("the full sequence is race-free");
    let waits: Vec<usize> = cmds
        .iter()
        .enumerate()
        .filter(|(_, c)| matches!(c, Cmd::Wait { .. }))
        .map(|(i, _)| i)
        .collect();
    let mut kinds: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for &i in &waits {
        let mut dropped = cmds.clone();
        let c = dropped.remove(i);
        let caught = hazard::check(&dropped).err();
        let k = kinds.entry(wait_kind(&cmds, i)).or_default();
        k.0 += 1;
        if let Some(e) = &caught {
            k.1 += 1;
            if k.1 == 1 {
                eprintln!("dropping {c:?}: {e}");
            }
        }
    }
    eprintln!("waits dropped one at a time, (count, caught) by kind: {kinds:?}");
    assert_eq!(kinds.len(), 4, "every kind of wait occurs: {kinds:?}");
    for (k, (n, caught)) in &kinds {
        assert_eq!(n, caught, "{k}: a dropped wait that is not caught");
    }
    let _ = COMPUTE;
}

/// Recomputes of input fusions (a `reduce` root: layer norms, softmax) run on the device,
/// member by member with their intermediates in workspace, not on the host: at the smallest
/// feasible budget of the fusion-compiled GPT-2 step such recomputes are taken, no command
/// runs on the host, and the measured peak equals the planned one (workspace is scratch,
/// outside the arena the plan lays out).
#[test]
fn recomputed_input_fusions_run_on_the_device() {
    let name = "onnx/torch_gpt2_tiny_sgd";
    let cmds = tightest_commands(name, &h100());
    let host = cmds
        .iter()
        .filter(|c| matches!(c, Cmd::Host { .. }))
        .count();
    assert_eq!(host, 0, "no op of this step runs on the host");
    let plan = compile(name);
    let b = bindings(name);
    let smallest = smallest_budget(&plan, &b, &h100());
    let r = run_simt(name, &plan, &b, Some(smallest));
    assert!(r.plan.recompute_decisions > 0, "recomputes are taken");
}

/// A reload landing on bytes another value still holds is refused.
#[test]
fn a_reload_onto_live_bytes_is_caught() {
    let mut cmds = swapping_commands("gpt2_tiny_adamw");
    // Move the first reload's claim onto the first input's bytes (held throughout).
    let input = cmds
        .iter()
        .find_map(|c| match c {
            Cmd::Claim { range, .. } if range.bytes > 0 => Some(*range),
            _ => None,
        })
        .unwrap();
    let reload = cmds
        .iter()
        .position(|c| matches!(c, Cmd::Work { label, .. } if label.what.starts_with("reload")))
        .unwrap();
    let claim = (0..reload)
        .rev()
        .find(|&i| matches!(cmds[i], Cmd::Claim { .. }))
        .unwrap();
    if let Cmd::Claim { range, .. } = &mut cmds[claim] {
        range.ptr = input.ptr;
    }
    let e = hazard::check(&cmds).expect_err("a reload onto live bytes");
    assert!(e.to_string().contains("still holds"), "{e}");
}

/// `--executor cuda` where no GPU is usable fails with a message naming the cause (without
/// the `cuda` feature: the feature; with it, on a machine without the NVIDIA driver: the
/// driver library), never a panic. On a machine with a GPU the step runs instead.
#[test]
fn the_cuda_executor_without_a_driver_is_a_clean_error() {
    let plan = compile("mlp_sgd");
    let b = bindings("mlp_sgd");
    let mut rt = ebb_runtime::Runtime::new(plan, None).unwrap();
    rt.set_executor(Executor::Cuda);
    let inputs = ebb_runtime::inputs::random_inputs(rt.graph(), &b, 7).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.step(&b, inputs)))
        .expect("no panic");
    match r {
        Err(e) => {
            let msg = e.to_string();
            eprintln!("--executor cuda: {msg}");
            if cfg!(feature = "cuda") {
                assert!(
                    msg.contains("NVIDIA driver")
                        || msg.contains("CUDA device")
                        || msg.contains("cuBLAS"),
                    "{msg}"
                );
            } else {
                assert!(msg.contains("`cuda` feature"), "{msg}");
            }
        }
        Ok(out) => {
            assert!(cfg!(feature = "cuda"), "a CUDA step without the feature");
            eprintln!(
                "a GPU is present: measured {} bytes",
                out.report.measured_peak_bytes
            );
        }
    }
}

/// A step at the shape of the last one runs the lowered program kept from it (no new
/// lowering or hazard check): on one runtime, steps at B=8, again B=8, B=3 and B=8 give, each,
/// the outputs of a fresh runtime's first step at that shape.
#[test]
fn a_repeated_shape_runs_the_kept_lowered_program() {
    let plan = compile("mlp_sgd");
    let shapes = ["B=8", "B=8", "B=3", "B=8"];
    let bind = |s: &str| ebb_pipeline::parse_bindings(s).unwrap();
    let fresh = |s: &str| {
        let mut rt = ebb_runtime::Runtime::new(plan.clone(), None).unwrap();
        rt.set_executor(Executor::Simt);
        let inputs = ebb_runtime::inputs::random_inputs(rt.graph(), &bind(s), 7).unwrap();
        rt.step(&bind(s), inputs).unwrap().outputs
    };
    let mut rt = ebb_runtime::Runtime::new(plan.clone(), None).unwrap();
    rt.set_executor(Executor::Simt);
    for s in shapes {
        let inputs = ebb_runtime::inputs::random_inputs(rt.graph(), &bind(s), 7).unwrap();
        let got = rt.step(&bind(s), inputs).unwrap().outputs;
        let want = fresh(s);
        assert_eq!(got.len(), want.len());
        for (x, y) in got.iter().zip(&want) {
            assert!(x.bits_eq(y), "{s}");
        }
    }
}
