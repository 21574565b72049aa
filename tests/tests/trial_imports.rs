//! Ops a new-user trial found unimported on real exports, each on a fixture made by
//! the project's export scripts: `ckpt_cumsum_key` (JAX) holds `stablehlo.reduce_precision`
//! (`jax.checkpoint` with a policy), `custom_call @stablehlo.dynamic_reduce_window`
//! (`jnp.cumsum` over the symbolic `S`) and Shardy's `sdy.mesh`/`sdy.sharding_constraint`
//! (a typed `jax.random.key` input); `torch_mlp_ce_nll_sgd` (torch.onnx, dynamo) holds
//! `ai.onnx::NegativeLogLikelihoodLoss` (`F.cross_entropy` traced as written). Small
//! hand-written modules check the StableHLO ops' semantics against direct computations (the
//! ONNX lowering's are in `compiler/src/onnx/tests_nll.rs`).

use ebb_import::stablehlo::{import_str, unsupported_ops};
use ebb_ir::op::ReducePrecisionSpec;
use ebb_ir::{Bindings, Op};
use ebb_pipeline::run::InputSource::Npz;
use ebb_pipeline::{self as pipeline, CompileOptions};
use ebb_plan::format::Plan;
use ebb_runtime::{execute, program_schedule, Tensor};
use ebb_testkit::{fixture_refs, jax_fixture, jax_fixtures_dir, jax_metadata};

const JAX: &str = "ckpt_cumsum_key";

/// Tests that the fixture imports with every dimension named, that nothing in it is listed as
/// unsupported, and that the cumulative sum became a `reduce_window` whose window is `[1, S,
/// 1]` padded by `S - 1` (no opaque `custom_call` left).
#[test]
fn ckpt_cumsum_key_imports_with_a_symbolic_window() {
    let path = jax_fixture(JAX);
    let text = std::fs::read_to_string(&path).unwrap();
    for op in [
        "stablehlo.reduce_precision",
        "dynamic_reduce_window",
        "sdy.mesh",
        "sdy.sharding_constraint",
    ] {
        assert!(text.contains(op), "the export holds {op}");
    }
    assert!(unsupported_ops(&text, JAX).unwrap().is_empty());
    let (g, stats) = ebb_import::stablehlo::import_file(&path).unwrap();
    assert_eq!(stats.unresolved_dims, 0);
    let ops: Vec<&Op> = g.order().iter().map(|&id| &g.node(id).op).collect();
    assert!(!ops.iter().any(|o| matches!(o, Op::CustomCall(_))));
    let windows: Vec<String> = ops
        .iter()
        .filter_map(|o| match o {
            Op::ReduceWindow(w) if w.static_dimensions().is_none() => Some(format!(
                "{:?} {:?}",
                w.dimensions
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>(),
                w.padding
                    .iter()
                    .map(|(l, h)| format!("{l},{h}"))
                    .collect::<Vec<_>>()
            )),
            _ => None,
        })
        .collect();
    // The forward cumsum pads below, its transpose (the backward) above.
    assert_eq!(
        windows,
        [
            r#"["1", "S", "1"] ["0,0", "S - 1,0", "0,0"]"#,
            r#"["1", "S", "1"] ["0,0", "0,S - 1", "0,0"]"#
        ]
    );
    assert!(ops.iter().any(|o| matches!(o, Op::ReducePrecision(_))));
}

/// Tests that a `custom_call` with a dynamic result whose target the importer does not take
/// is listed by the triage (`--allow-unsupported`) under its target, and that importing it is
/// an error naming the target, not a panic.
#[test]
fn an_unknown_dynamic_custom_call_is_listed_by_target() {
    let text = std::fs::read_to_string(jax_fixture(JAX))
        .unwrap()
        .replace("\"stablehlo.dynamic_reduce_window\"", "\"my.dynamic_op\"");
    let found = unsupported_ops(&text, JAX).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].op, "stablehlo.custom_call @my.dynamic_op");
    assert_eq!(found[0].count, 2);
    let e = import_str(&text, JAX).unwrap_err().to_string();
    assert!(
        e.contains("custom_call @my.dynamic_op is not supported"),
        "{e}"
    );
}

/// Runs `plan` checked at every reference under 50% of its program-order peak, or at the
/// smallest feasible budget where that is below the lower bound: measured peak == planned ==
/// checker's, outputs bit-identical to the run without decisions and within `tol` (relative)
/// of the framework's.
pub(crate) fn runs_checked_at_every_ref(
    what: &str,
    plan: &Plan,
    refs: &[(std::path::PathBuf, Bindings)],
    tol: f64,
) {
    assert!(!refs.is_empty(), "{what}: no references");
    for (npz, b) in refs {
        let r = crate::donation_fixtures::run_checked_under_half(what, plan, b, Npz(npz.clone()));
        let rep = &r.report;
        let planned = rep.plan.peak_bytes_planned.unwrap();
        assert!(planned <= rep.plan.budget_bytes.unwrap(), "{what} {b:?}");
        assert_eq!(rep.measured_peak_bytes as i64, planned, "{what} {b:?}");
        assert_eq!(rep.checker_peak_bytes, Some(planned), "{what} {b:?}");
        assert_eq!(rep.outputs_match_reference, Some(true), "{what} {b:?}");
        let rel = rep.npz_max_rel_err.unwrap();
        assert!(rel < tol, "{what} {b:?}: rel err {rel}");
        eprintln!(
            "{what} {b:?}: budget {}, planned = measured {planned}, rel err {rel:.3e}",
            rep.plan.budget_bytes.unwrap()
        );
    }
}

/// Tests that the step plans and runs checked under a budget, plain and with fusion and
/// donation, within float rounding of JAX's outputs at both references.
#[test]
fn ckpt_cumsum_key_runs_checked_under_a_budget() {
    let refs = fixture_refs(&jax_metadata(JAX), &jax_fixtures_dir());
    assert_eq!(refs.len(), 2);
    let fused = CompileOptions::builder()
        .fusion(true)
        .donate(ebb_passes::donate::DonatePolicy::Auto)
        .build();
    for (tag, opts) in [("plain", ebb_testkit::unfused_options()), ("fused", fused)] {
        let (g, _) = ebb_import::import_file(&jax_fixture(JAX), None).unwrap();
        let plan = pipeline::compile(g, &opts).unwrap().plan;
        runs_checked_at_every_ref(&format!("{JAX} {tag}"), &plan, &refs, 1e-5);
    }
}

/// A module of one `f32[N]` input whose body is `ops` (MLIR generic form, reading `%arg0`
/// and returning `%r`).
fn module(n: usize, ops: &str) -> String {
    format!(
        r#""builtin.module"() ({{
  "func.func"() <{{function_type = (tensor<{n}xf32>) -> tensor<{n}xf32>, sym_name = "main"}}> ({{
  ^bb0(%arg0: tensor<{n}xf32>):
{ops}
    "func.return"(%r) : (tensor<{n}xf32>) -> ()
  }}) : () -> ()
  "sdy.mesh"() <{{mesh = #sdy.mesh<[]>, sym_name = "empty_mesh"}}> : () -> ()
}}) : () -> ()"#
    )
}

fn run_module(text: &str, x: &[f32]) -> Vec<f32> {
    let (g, _) = import_str(text, "t.mlir").unwrap_or_else(|e| panic!("{e}"));
    let sched = program_schedule(&g);
    let (out, _) = execute(
        &g,
        &sched,
        &Bindings::new(),
        vec![Tensor::from_f32(vec![x.len()], x.to_vec()).unwrap()],
    )
    .unwrap();
    out[0].to_f64_vec().iter().map(|&v| v as f32).collect()
}

/// Tests `reduce_precision` to IEEE half's format (5/10 bits) behind a Shardy
/// `sharding_constraint`: rounding to nearest even, overflow to infinity, flushing below
/// half's normal range, NaN kept, each as [`ReducePrecisionSpec`] computes it and as half
/// rounds where the value is representable.
#[test]
fn reduce_precision_behind_a_sharding_constraint_rounds_to_the_format() {
    let text = module(
        6,
        r#"    %c = "sdy.sharding_constraint"(%arg0) <{sharding = #sdy.sharding<@empty_mesh, [{}]>}> : (tensor<6xf32>) -> tensor<6xf32>
    %r = "stablehlo.reduce_precision"(%c) <{exponent_bits = 5 : i32, mantissa_bits = 10 : i32}> : (tensor<6xf32>) -> tensor<6xf32>"#,
    );
    let x = [0.1f32, 1.0 + 2f32.powi(-11), 1.0e5, 1.0e-6, f32::NAN, -2.71];
    let got = run_module(&text, &x);
    let spec = ReducePrecisionSpec::new(5, 10).unwrap();
    for (g, &v) in got.iter().zip(&x) {
        assert_eq!(g.to_bits(), spec.apply_f32(v).to_bits(), "{v}");
    }
    // Directly: 0.1 as half, a tie to even, overflow, flush, NaN.
    assert_eq!(got[0], 0.099975586);
    assert_eq!(got[1], 1.0);
    assert_eq!(got[2], f32::INFINITY);
    assert_eq!(got[3], 0.0);
    assert!(got[4].is_nan());
    assert_eq!(got[5], -2.710_937_5);
}

/// Tests that `reduce_precision` with `f32`'s own format is imported and is the identity,
/// and that an exponent of 0 bits is an error naming the op, not a panic.
#[test]
fn reduce_precision_identity_and_bad_attributes() {
    let text = module(
        3,
        r#"    %r = "stablehlo.reduce_precision"(%arg0) <{exponent_bits = 8 : i32, mantissa_bits = 23 : i32}> : (tensor<3xf32>) -> tensor<3xf32>"#,
    );
    let x = [1.0e-40f32, 3.4e38, -7.25];
    let got = run_module(&text, &x);
    assert_eq!(
        got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        x.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    let bad = text.replace("exponent_bits = 8", "exponent_bits = 0");
    let e = import_str(&bad, "t.mlir").unwrap_err().to_string();
    assert!(
        e.contains("reduce_precision") && e.contains("exponent_bits"),
        "{e}"
    );
}

const ONNX: &str = "torch_mlp_ce_nll_sgd";

/// Tests that the torch export with `NegativeLogLikelihoodLoss` imports with its `batch`
/// symbol and runs checked under a budget within float rounding of ONNX Runtime's outputs on
/// the file, at both references (each with one ignored label).
#[test]
fn torch_nll_loss_step_runs_checked_under_a_budget() {
    let path = ebb_testkit::onnx_fixture(ONNX);
    let (g, stats) = ebb_import::import_file(&path, None).unwrap();
    assert_eq!(stats.unresolved_dims, 0);
    let symbols: Vec<String> = g
        .scope
        .symbols()
        .iter()
        .map(|s| s.name().to_string())
        .collect();
    assert_eq!(symbols, ["batch"]);
    let meta = ebb_testkit::onnx_metadata(ONNX);
    assert_eq!(meta["op_names"]["ai.onnx::NegativeLogLikelihoodLoss"], 1);
    let refs = fixture_refs(&meta, &ebb_testkit::onnx_fixtures_dir());
    assert_eq!(refs.len(), 2);
    let plan = pipeline::compile(g, &CompileOptions::default())
        .unwrap()
        .plan;
    runs_checked_at_every_ref(ONNX, &plan, &refs, 1e-5);
}
