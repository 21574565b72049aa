//! Tests of the `ebb` command line: exit codes, error locations and the JSON summary.

use ebb_testkit::jax_fixture;
use std::process::Command;

#[test]
fn cli_exits_non_zero_with_location_on_malformed_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bad = dir.join("bad.mlir");
    std::fs::write(
        &bad,
        "\"builtin.module\"() ({\n  %0 = \"x.y\"(%q) :\n}) : () -> ()\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(["import", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.mlir:2:") || err.contains("bad.mlir:3:"),
        "{err}"
    );
}

#[test]
fn cli_missing_file_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(["import", "/nonexistent/x.mlir"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot read /nonexistent/x.mlir"), "{err}");
}

#[test]
fn cli_stats_json_has_the_documented_fields() {
    let out = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args([
            "import",
            jax_fixture("mlp_sgd").to_str().unwrap(),
            "--emit",
            "stats",
            "--json",
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for k in [
        "ops",
        "symbols",
        "unresolved_dims",
        "parameter_bytes",
        "inputs",
        "outputs",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    assert_eq!(v["symbols"], serde_json::json!(["B"]));
    assert_eq!(v["unresolved_dims"], 0);
}

/// Asserts that a run of `ebb` succeeded, showing its standard error when it did not.
fn assert_ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ebb(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn run_json_has_the_documented_fields_and_a_checked_timeline() {
    let dir = std::env::temp_dir().join(format!("ebb-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("mem.svg");
    let fixture = jax_fixture("gpt_block_sgd");
    let out = ebb(&[
        "run",
        fixture.to_str().unwrap(),
        "--bind",
        "B=4,S=64",
        "--budget",
        "70%",
        "--check",
        "--json",
        "--timeline",
        svg.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for k in [
        "peak_bytes_program_order",
        "peak_bytes_scheduled",
        "peak_bytes_planned",
        "measured_peak_bytes",
        "arena_bytes",
        "finalize_us",
        "outputs_match_reference",
        "wall_ms",
        "checker_peak_bytes",
    ] {
        assert!(v.get(k).is_some(), "missing `{k}` in {v}");
    }
    assert_eq!(v["outputs_match_reference"], true);
    assert_eq!(v["measured_peak_bytes"], v["peak_bytes_planned"]);
    assert_eq!(v["checker_peak_bytes"], v["peak_bytes_planned"]);
    assert!(v["peak_bytes_planned"].as_i64() <= v["budget_bytes"].as_i64());
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.contains("budget"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn run_with_an_infeasible_budget_states_the_smallest_feasible_one() {
    let fixture = jax_fixture("mlp_sgd");
    let out = ebb(&[
        "run",
        fixture.to_str().unwrap(),
        "--bind",
        "B=8",
        "--budget",
        "1KiB",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("infeasible") && stderr.contains("smallest feasible budget"),
        "{stderr}"
    );
}

#[test]
fn run_with_npz_inputs_compares_with_the_framework_outputs() {
    let fixture = jax_fixture("mlp_sgd");
    let npz = jax_fixture("mlp_sgd").with_extension("ref0.npz");
    let out = ebb(&[
        "run",
        fixture.to_str().unwrap(),
        "--bind",
        "B=8",
        "--inputs",
        npz.to_str().unwrap(),
        "--json",
    ]);
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let err = v["npz_max_rel_err"].as_f64().unwrap();
    assert!(err < 1e-5, "relative error {err} against JAX's outputs");
}

/// The numerics report of `ebb run --inputs REF.npz`, text and `--json`, on a Lion step whose
/// key bias has a zero gradient in exact arithmetic: every output's name, pytree path, shape,
/// errors and count over the tolerance; the key bias passes by its sensitivity to round-off.
#[test]
fn run_reports_numerics_per_output_in_text_and_json() {
    let fixture = jax_fixture("attn_kbias_lion");
    let npz = fixture.with_extension("ref0.npz");
    let args = [
        "run",
        fixture.to_str().unwrap(),
        "--bind",
        "B=2,S=8",
        "--inputs",
        npz.to_str().unwrap(),
    ];
    let out = ebb(&[&args[..], &["--json"]].concat());
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = &v["numerics"];
    assert_eq!(n["passed"], true);
    assert_eq!(n["tolerance"], 0.02);
    assert!(n["rule"].as_str().unwrap().contains("normwise"));
    let outputs = n["outputs"].as_array().unwrap();
    assert_eq!(outputs.len(), 22);
    for o in outputs {
        for k in [
            "name",
            "path",
            "shape",
            "reference_shape",
            "compared",
            "max_abs_err",
            "max_rel_err",
            "normwise_rel_err",
            "over_tolerance",
            "sensitivity",
            "passed",
            "verdict",
        ] {
            assert!(o.get(k).is_some(), "{k} missing in {o}");
        }
    }
    let bk = outputs
        .iter()
        .find(|o| o["path"] == "result[1]['bk']")
        .unwrap();
    assert_eq!(bk["compared"], "update");
    assert_eq!(bk["shape"], serde_json::json!([16]));
    assert!(bk["normwise_rel_err"].as_f64().unwrap() > 0.02);
    assert!(bk["sensitivity"].as_f64().unwrap() > 0.1);
    assert!(bk["over_tolerance"].as_u64().unwrap() > 0);
    let text = ebb(&args);
    assert_ok(&text);
    let t = String::from_utf8_lossy(&text.stdout);
    assert!(t.contains("22 of 22 outputs pass"), "{t}");
    assert!(
        t.lines()
            .any(|l| l.contains("result[1]['bk']") && l.contains("within 8 x its sensitivity")),
        "{t}"
    );
}

#[test]
fn compile_prints_the_ir_after_the_named_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let plan = dir.join("plan.json");
    let fixture = jax_fixture("mlp_sgd");
    let out = ebb(&[
        "compile",
        fixture.to_str().unwrap(),
        "-o",
        plan.to_str().unwrap(),
        "--print-after",
        "cse",
        "--stop-after",
        "4",
    ]);
    assert_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    // unroll, fold and forward_slices run first, then cse (pass run 4); --stop-after 4 ends
    // the pipeline there, and the output is the graph at that point, not a plan.
    assert_eq!(err.matches("// ----- IR after").count(), 1, "{err}");
    assert!(
        err.contains("// ----- IR after cse (pass run 4) -----\ngraph @main {"),
        "{err}"
    );
    assert!(err.contains("stopped after cse (pass run 4)"), "{err}");
    let written = std::fs::read_to_string(&plan).unwrap();
    ebb_ir::text::parse(&written).expect("--stop-after writes textual IR");
    let bad = ebb(&[
        "compile",
        fixture.to_str().unwrap(),
        "-o",
        plan.to_str().unwrap(),
        "--print-after",
        "hoist",
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown pass `hoist`"));
}

/// Tests that every pipeline stage runs through the pass manager: the JSON report lists the
/// groups canonicalize, donate, rewrite, licm, dot_accumulate, fuse, schedule and plan with per-pass timing;
/// `--stop-after schedule` ends before the plan; an unknown stop point is a clear error.
#[test]
fn compile_runs_every_stage_as_a_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let out_path = dir.join("plan.json");
    let fixture = jax_fixture("mlp_sgd");
    let compile = |extra: &[&str]| {
        let mut args = vec![
            "compile",
            fixture.to_str().unwrap(),
            "-o",
            out_path.to_str().unwrap(),
            "--json",
        ];
        args.extend_from_slice(extra);
        ebb(&args)
    };
    let out = compile(&["--print-after", "schedule"]);
    assert_ok(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let groups: Vec<&str> = report["passes"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group"].as_str().unwrap())
        .collect();
    // The default pipeline: fusion on (with its default rewrite, transpose folding).
    assert_eq!(
        groups,
        [
            "canonicalize",
            "donate",
            "rewrite",
            "licm",
            "dot_accumulate",
            "fuse",
            "schedule",
            "plan"
        ]
    );
    let runs = report["passes"]["runs"].as_array().unwrap();
    let last = &runs[runs.len() - 1];
    assert_eq!(last["pass"], "plan");
    assert!(last["time_us"].is_u64());
    assert_eq!(last["result"]["changes"], report["candidates"]);
    assert!(report["schedule"].is_object());
    ebb_plan::format::Plan::from_json(&std::fs::read_to_string(&out_path).unwrap()).unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("// ----- IR after schedule"));

    let out = compile(&["--stop-after", "schedule"]);
    assert_ok(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["passes"]["stop_reason"], "stop_after");
    assert_eq!(
        report["passes"]["runs"].as_array().unwrap().last().unwrap()["pass"],
        "schedule"
    );
    assert!(report["schedule"].is_object());
    assert_eq!(report["candidates"], 0);
    ebb_ir::text::parse(&std::fs::read_to_string(&out_path).unwrap()).unwrap();

    let bad = compile(&["--stop-after", "hoist"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("--stop-after: unknown pass `hoist`"), "{err}");
}

/// Tests `--donate` and `--fusion` on `ebb plan`: a model file compiled with them reports the
/// donated bytes, the fusion groups and what holds the peak (by class, summing to the peak);
/// the defaults are `--fusion on --donate auto` (the same report as the explicit flags);
/// a plan file refuses other values (it was compiled already); an unknown input is named.
#[test]
fn plan_reports_donation_fusion_and_the_peak_breakdown() {
    let fixture = jax_fixture("mlp_sgd");
    let f = fixture.to_str().unwrap();
    let plan = |extra: &[&str]| {
        let mut args = vec!["plan", f, "--bind", "B=8", "--json"];
        args.extend_from_slice(extra);
        ebb(&args)
    };
    let json = |out: &std::process::Output| -> serde_json::Value {
        assert_ok(out);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let kept = json(&plan(&["--fusion", "off", "--donate", "keep"]));
    assert_eq!(kept["donated_bytes"], 0);
    assert_eq!(kept["fusion_groups"], 0);
    let r = json(&plan(&["--donate", "auto", "--fusion", "on"]));
    let default = json(&plan(&[]));
    for k in [
        "peak_bytes_scheduled",
        "peak_bytes_program_order",
        "donated_bytes",
        "fusion_groups",
    ] {
        assert_eq!(
            default[k], r[k],
            "{k}: the default is --fusion on --donate auto"
        );
    }
    assert!(r["donated_bytes"].as_i64().unwrap() > 0);
    assert!(r["fusion_groups"].as_i64().unwrap() > 0);
    assert!(r["materialized_values"].as_i64() < kept["materialized_values"].as_i64());
    assert!(r["peak_bytes_scheduled"].as_i64() < kept["peak_bytes_scheduled"].as_i64());
    let p = &r["peak"];
    let sum: i64 = ["inputs", "donated", "outputs", "intermediates", "transient"]
        .iter()
        .map(|k| p[k].as_i64().unwrap())
        .sum();
    // Every figure is non-negative; an in-place write's shared bytes are counted once.
    for k in ["transient", "in_place"] {
        assert!(p[k].as_i64().unwrap() >= 0, "{k}: {p}");
    }
    assert_eq!(
        sum - p["in_place"].as_i64().unwrap(),
        r["peak_bytes_scheduled"].as_i64().unwrap()
    );

    let out = plan(&["--donate", "nope"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("`nope` is not an input"));
    // `--rewrite` is shared too: `none` turns off fusion's default transpose folding, and an
    // unknown group is named.
    let plain = json(&plan(&[
        "--donate",
        "auto",
        "--fusion",
        "on",
        "--rewrite",
        "none",
    ]));
    assert!(plain["peak_bytes_scheduled"].as_i64() >= r["peak_bytes_scheduled"].as_i64());
    let out = plan(&["--rewrite", "nope"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown rule group `nope`"));

    let dir = tempfile::tempdir().unwrap();
    let planned = dir.path().join("p.json");
    let out = ebb(&["compile", f, "-o", planned.to_str().unwrap()]);
    assert!(out.status.success());
    let out = ebb(&[
        "plan",
        planned.to_str().unwrap(),
        "--bind",
        "B=8",
        "--donate",
        "keep",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass them to `ebb compile`"));
    let out = ebb(&[
        "plan",
        planned.to_str().unwrap(),
        "--bind",
        "B=8",
        "--fusion",
        "off",
    ]);
    assert!(!out.status.success());
    let out = ebb(&[
        "plan",
        planned.to_str().unwrap(),
        "--bind",
        "B=8",
        "--rewrite",
        "none",
    ]);
    assert!(!out.status.success());
}

#[test]
fn device_profiles_price_the_decisions_and_are_named_in_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = tmp.path().join("gpt.json");
    let gpt = jax_fixture("gpt2_tiny_adamw");
    let out = ebb(&[
        "compile",
        gpt.to_str().unwrap(),
        "-o",
        plan.to_str().unwrap(),
        "--device",
        "a100-40g-pcie4",
    ]);
    assert_ok(&out);
    let text = std::fs::read_to_string(&plan).unwrap();
    let p: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(p["device"]["name"], "a100-40g-pcie4");
    // `ebb plan` on the compiled plan at B=8, S=256 with `extra` arguments.
    let plan_with = |extra: &[&str]| {
        let mut args = vec!["plan", plan.to_str().unwrap(), "--bind", "B=8,S=256"];
        args.extend_from_slice(extra);
        ebb(&args)
    };
    let report = |extra: &[&str]| -> serde_json::Value {
        let out = plan_with(&[&["--budget", "70%", "--json"], extra].concat());
        assert_ok(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // The plan's device by default; --device overrides it; --kinds restricts the choice.
    let a100 = report(&[]);
    assert_eq!(a100["device"], "a100-40g-pcie4");
    let h100 = report(&["--device", "h100-sxm-pcie5"]);
    assert_eq!(h100["device"], "h100-sxm-pcie5");
    assert!(
        h100["step_us_modelled"].as_f64().unwrap() < a100["step_us_modelled"].as_f64().unwrap()
    );
    let recompute = report(&["--kinds", "recompute"]);
    assert_eq!(recompute["swap_decisions"], 0);
    assert!(recompute["recompute_decisions"].as_u64().unwrap() > 0);
    let custom = report(&["--device", "custom:flops=10T,hbm=1T,link=1G"]);
    assert!(custom["device"].as_str().unwrap().starts_with("custom:"));
    for r in [&a100, &h100, &recompute, &custom] {
        let added = r["added_us"].as_f64().unwrap();
        let parts =
            r["recompute_us"].as_f64().unwrap() + r["exposed_transfer_us"].as_f64().unwrap();
        assert!((added - parts).abs() <= 1e-9 * added.max(1.0), "{r}");
    }
    // The text report states the added time and the device.
    let out = plan_with(&["--budget", "70%"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("added step time on a100-40g-pcie4"), "{text}");
    // Unknown devices and bad specifications are clear errors.
    for (bad, says) in [
        ("tpu-v9", "unknown device `tpu-v9`"),
        ("custom:flops=1T", "`hbm=` is required"),
    ] {
        let out = plan_with(&["--device", bad]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{err}");
    }
}

/// `--allow-unsupported` lists every op the build cannot import (with its count and first
/// location) and exits 0; without it the import fails at the first; a model without such
/// ops imports as usual.
#[test]
fn cli_allow_unsupported_lists_every_unsupported_op() {
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(jax_fixture("mlp_sgd")).unwrap();
    let n = text.matches("\"stablehlo.maximum\"").count();
    assert!(n >= 2);
    let bad = tmp.path().join("mlp_fft.mlir");
    std::fs::write(
        &bad,
        text.replace("\"stablehlo.maximum\"", "\"stablehlo.fft\"")
            .replacen("\"stablehlo.negate\"", "\"chlo.erf_inv\"", 1),
    )
    .unwrap();
    let fails = ebb(&["import", bad.to_str().unwrap()]);
    assert!(!fails.status.success());
    let out = ebb(&[
        "import",
        bad.to_str().unwrap(),
        "--allow-unsupported",
        "--json",
    ]);
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["imported"], false);
    let ops = v["unsupported_ops"].as_array().unwrap();
    let fft = ops.iter().find(|u| u["op"] == "stablehlo.fft").unwrap();
    assert_eq!(fft["count"].as_u64().unwrap() as usize, n);
    assert!(fft["first"].as_str().unwrap().contains(".py:"), "{fft}");
    assert!(ops.iter().any(|u| u["op"] == "chlo.erf_inv"), "{v}");
    let fine = ebb(&[
        "import",
        jax_fixture("mlp_sgd").to_str().unwrap(),
        "--allow-unsupported",
    ]);
    assert!(fine.status.success());
    assert!(String::from_utf8_lossy(&fine.stdout).contains("unresolved dims: 0"));
}

#[test]
fn run_saves_its_outputs_as_npz() {
    let dir = ebb_testkit::scratch("save-outputs");
    let saved = dir.join("out.npz");
    let fixture = jax_fixture("mlp_sgd");
    let reference = ebb_testkit::jax_fixtures_dir().join("mlp_sgd.ref0.npz");
    let out = ebb(&[
        "run",
        fixture.to_str().unwrap(),
        "--bind",
        "B=8",
        "--inputs",
        reference.to_str().unwrap(),
        "--save-outputs",
        saved.to_str().unwrap(),
    ]);
    assert_ok(&out);
    let got = ebb_runtime::npz::load_npz(&saved).unwrap();
    let want = ebb_runtime::npz::load_npz(&reference).unwrap();
    let outs: Vec<&String> = want.keys().filter(|k| k.starts_with("out_")).collect();
    assert_eq!(got.len(), outs.len());
    for k in outs {
        assert!(got[k].rel_err(&want[k]) < 1e-4, "{k}");
    }
}

#[test]
fn an_ort_optimizer_model_compiles_with_params_from_its_training_model() {
    let dir = ebb_testkit::scratch("params-from");
    let onnx = ebb_testkit::onnx_fixtures_dir();
    let optimizer = onnx.join("ort_mlp_optimizer.onnx");
    let training = onnx.join("ort_mlp_training.onnx");
    let plan = dir.join("opt.plan.json");
    let without = ebb(&["import", optimizer.to_str().unwrap()]);
    assert_eq!(without.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&without.stderr).contains("--params-from TRAINING.onnx"));
    let out = ebb(&[
        "compile",
        optimizer.to_str().unwrap(),
        "--params-from",
        training.to_str().unwrap(),
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert_ok(&out);
    let out = ebb(&["plan", plan.to_str().unwrap(), "--bind", "", "--json"]);
    assert_ok(&out);
    // The optimizer model as its own training model: named as the culprit.
    let bad = ebb(&[
        "import",
        optimizer.to_str().unwrap(),
        "--params-from",
        optimizer.to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--params-from"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

/// Tests that `ebb plan`, `ebb run` and `ebb bench` take a raw ONNX Runtime optimizer model
/// with `--params-from` as `ebb compile` does: the plan's figures equal those of the compiled
/// plan file, the run is checked (bit-identical to the run without decisions, peak proven)
/// under 50% of its peak or the smallest feasible budget, and the flag is refused with a plan
/// file (compiled already) and a StableHLO model.
#[test]
fn plan_run_and_bench_take_params_from_for_an_ort_optimizer_model() {
    let dir = ebb_testkit::scratch("params-from-run");
    let onnx = ebb_testkit::onnx_fixtures_dir();
    let optimizer = onnx.join("ort_mlp_optimizer.onnx");
    let training = onnx.join("ort_mlp_training.onnx");
    let (opt, tr) = (optimizer.to_str().unwrap(), training.to_str().unwrap());
    let plan = dir.join("opt.plan.json");
    assert_ok(&ebb(&[
        "compile",
        opt,
        "--params-from",
        tr,
        "-o",
        plan.to_str().unwrap(),
    ]));
    let report = |out: std::process::Output| -> serde_json::Value {
        assert_ok(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let from_plan = report(ebb(&[
        "plan",
        plan.to_str().unwrap(),
        "--bind",
        "",
        "--json",
    ]));
    let direct = report(ebb(&[
        "plan",
        opt,
        "--params-from",
        tr,
        "--bind",
        "",
        "--json",
    ]));
    for k in [
        "peak_bytes_program_order",
        "peak_bytes_scheduled",
        "lower_bound_bytes",
    ] {
        assert_eq!(direct[k], from_plan[k], "{k}");
    }
    // Random inputs: the optimizer's reference npz names its sequence elements as the
    // training model's inputs, which `--inputs` does not map yet. Under 50% of the program-order peak, or the smallest feasible budget the refusal names.
    let run_at = |budget: &str| {
        ebb(&[
            "run",
            opt,
            "--params-from",
            tr,
            "--bind",
            "",
            "--check",
            "--json",
            "--budget",
            budget,
        ])
    };
    let mut budget = "50%".to_string();
    let mut run = run_at(&budget);
    let e = String::from_utf8_lossy(&run.stderr).to_string();
    if let Some(rest) = e
        .split("smallest feasible budget for this plan at these shapes is ")
        .nth(1)
    {
        budget = rest.split(' ').next().unwrap().to_string();
        run = run_at(&budget);
    }
    let run = report(run);
    assert_eq!(run["outputs_match_reference"], true);
    assert_eq!(run["measured_peak_bytes"], run["peak_bytes_planned"]);
    assert_eq!(run["checker_peak_bytes"], run["peak_bytes_planned"]);
    let without = ebb(&["run", opt, "--bind", ""]);
    assert_eq!(without.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&without.stderr).contains("--params-from TRAINING.onnx"));
    for cmd in [
        vec![
            "plan",
            plan.to_str().unwrap(),
            "--params-from",
            tr,
            "--bind",
            "",
        ],
        vec![
            "run",
            plan.to_str().unwrap(),
            "--params-from",
            tr,
            "--bind",
            "",
        ],
        vec![
            "bench",
            plan.to_str().unwrap(),
            "--params-from",
            tr,
            "--shapes",
            "x=1",
        ],
    ] {
        let bad = ebb(&cmd);
        assert_eq!(bad.status.code(), Some(1), "{cmd:?}");
        let e = String::from_utf8_lossy(&bad.stderr);
        assert!(
            e.contains("--params-from applies when compiling a model file"),
            "{e}"
        );
    }
    let mlir = ebb_testkit::jax_fixture("mlp_sgd");
    let bad = ebb(&[
        "plan",
        mlir.to_str().unwrap(),
        "--params-from",
        tr,
        "--bind",
        "B=2",
    ]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--params-from applies to ONNX Runtime"));
}

/// `ebb ops --json` lists every front end's ops from the importers' tables.
#[test]
fn ops_lists_each_front_end() {
    let out = ebb(&["ops", "--json"]);
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lists = v.as_array().unwrap();
    let find = |fe: &str| {
        lists
            .iter()
            .find(|l| l["front_end"] == fe)
            .unwrap_or_else(|| panic!("no {fe} in {v}"))["ops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o.as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert!(find("stablehlo").contains(&"stablehlo.case".to_string()));
    assert!(find("onnx:ai.onnx").contains(&"Conv".to_string()));
    assert!(find("onnx:com.microsoft").contains(&"ConvGrad".to_string()));
    let md = ebb(&["ops", "--markdown"]);
    assert!(String::from_utf8_lossy(&md.stdout).starts_with("<!-- BEGIN ops"));
}

/// `--unroll` (on by default) unrolls the scan fixture's two loops, which `--json` lists; with
/// `--unroll off` each kept loop gets a note naming its location and the reason.
#[test]
fn compile_reports_loops_unrolled_and_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = tmp.path().join("plan.json");
    let fixture = jax_fixture("gpt2_tiny_scan");
    let (f, p) = (fixture.to_str().unwrap(), plan.to_str().unwrap());
    let on = ebb(&["compile", f, "-o", p, "--json"]);
    assert_ok(&on);
    let v: serde_json::Value = serde_json::from_slice(&on.stdout).unwrap();
    let trips: Vec<u64> = v["unroll"]["unrolled"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["trip_count"].as_u64().unwrap())
        .collect();
    assert_eq!(trips, [2, 2], "{}", v["unroll"]);
    assert!(!String::from_utf8_lossy(&on.stderr).contains("note:"));
    let off = ebb(&["compile", f, "-o", p, "--unroll", "off"]);
    assert_ok(&off);
    let err = String::from_utf8_lossy(&off.stderr);
    assert_eq!(
        err.matches("note: the `while` loop at jit(gpt_adamw_step)")
            .count(),
        2,
        "{err}"
    );
    assert!(err.contains("unrolling is off (--unroll off)"), "{err}");
}

#[test]
fn plan_budget_curve_prints_json_text_and_a_plot() {
    let tmp = tempfile::tempdir().unwrap();
    let svg = tmp.path().join("curve.svg");
    let fixture = jax_fixture("gpt2_tiny_adamw");
    let args = [
        "plan",
        fixture.to_str().unwrap(),
        "--bind",
        "B=8,S=256",
        "--device",
        "h100-sxm-pcie5",
        "--budget-curve",
        "5",
    ];
    let mut json = args.to_vec();
    json.extend(["--plot", svg.to_str().unwrap(), "--json"]);
    let out = ebb(&json);
    assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let points = v["points"].as_array().unwrap();
    assert!(points.len() >= 5, "{v}");
    assert_eq!(
        points[0]["budget_bytes"], v["smallest_feasible_bytes"],
        "the curve starts at the smallest feasible budget"
    );
    for key in [
        "peak_bytes_scheduled",
        "no_decisions_arena_bytes",
        "rule",
        "points_from_smaller_budget",
    ] {
        assert!(!v[key].is_null(), "{key} in {v}");
    }
    for p in points.iter().filter(|p| p["fits"] == true) {
        assert!(
            p["arena_bytes"].as_i64() <= p["budget_bytes"].as_i64(),
            "{p}"
        );
    }
    let doc = std::fs::read_to_string(&svg).unwrap();
    assert!(doc.trim_end().ends_with("</svg>") && doc.matches("</svg>").count() == 1);
    let text = ebb(&args);
    assert_ok(&text);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("smallest feasible budget") && text.contains("decided at"),
        "{text}"
    );
    // One budget or the curve, not both; and at least the two end points.
    assert!(!ebb(&[&args[..], &["--budget", "50%"]].concat())
        .status
        .success());
    let one = ebb(&[&args[..6], &["--budget-curve", "1"]].concat());
    assert!(String::from_utf8_lossy(&one.stderr).contains("at least 2 points"));
}

/// Tests that where the reported schedule peaks above program order or above the lowest
/// schedule variant (a scan step under a budget keeps a variant that peaks above program
/// order), `plan` and `run` name the variant kept and why, in text and JSON, and that `50%`
/// says of what.
#[test]
fn a_schedule_above_program_order_is_explained() {
    let fixture = jax_fixture("gpt2_tiny_scan");
    let f = fixture.to_str().unwrap();
    // Compiled once: the plan file serves every `ebb plan` and `ebb run` below.
    let dir = ebb_testkit::scratch("above");
    let plan = dir.join("scan.plan.json");
    assert_ok(&ebb(&["compile", f, "-o", plan.to_str().unwrap()]));
    let f = plan.to_str().unwrap();
    let mut above = 0;
    for budget in ["50%", "70%", "90%"] {
        let out = ebb(&[
            "plan",
            f,
            "--bind",
            "B=8,S=256",
            "--budget",
            budget,
            "--json",
        ]);
        assert_ok(&out);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["budget_fraction_of"], "peak_bytes_program_order");
        let (sched, po, best) = (
            v["peak_bytes_scheduled"].as_i64().unwrap(),
            v["peak_bytes_program_order"].as_i64().unwrap(),
            v["peak_bytes_scheduled_best"].as_i64().unwrap(),
        );
        let note = v["schedule_note"].as_str().unwrap_or("");
        if sched > po || sched > best {
            above += 1;
            assert!(
                note.contains("schedule variant") || note.contains("program order"),
                "{v}"
            );
        } else {
            assert!(v["schedule_note"].is_null(), "{v}");
        }
        let text = ebb(&["plan", f, "--bind", "B=8,S=256", "--budget", budget]);
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(
            text.contains("of the program-order peak at these shapes"),
            "{text}"
        );
        assert_eq!(text.contains("note: "), !note.is_empty(), "{text}");
    }
    assert!(
        above > 0,
        "the scan step keeps a variant above the lowest at some budget"
    );
    let run = ebb(&["run", f, "--bind", "B=8,S=256", "--budget", "50%"]);
    assert_ok(&run);
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(
        text.contains("50.0% of the program-order peak at these shapes"),
        "{text}"
    );
    let run = ebb(&["run", f, "--bind", "B=8,S=256", "--budget", "50%", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(v["budget_fraction"], 0.5);
    assert_eq!(v["budget_fraction_of"], "peak_bytes_program_order");
    assert!(
        v.get("schedule_note").is_some() && v.get("schedule_variant").is_some(),
        "{v}"
    );
}

/// `ebb plan` prints the same report from a stamped binary plan (read without its fusion
/// regions' ops) as from the JSON plan of the same compile (read and verified in full): the
/// text without its timing line, and `--json` without the two timings, with and without a
/// budget and for both kinds of fractional budget.
#[test]
fn plan_output_from_a_binary_plan_is_the_json_plans() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = jax_fixture("gpt2_tiny_adamw");
    let json = dir.path().join("p.json");
    let bin = dir.path().join("p.bin");
    for (path, format) in [(&json, "json"), (&bin, "binary")] {
        let out = ebb(&[
            "compile",
            fixture.to_str().unwrap(),
            "-o",
            path.to_str().unwrap(),
            "--plan-format",
            format,
            "--device",
            "h100-sxm-pcie5",
        ]);
        assert_ok(&out);
    }
    let report = |path: &std::path::Path, extra: &[&str]| {
        let mut args = vec![
            "plan",
            path.to_str().unwrap(),
            "--bind",
            "B=8,S=256",
            "--device",
            "h100-sxm-pcie5",
        ];
        args.extend_from_slice(extra);
        let out = ebb(&args);
        assert_ok(&out);
        String::from_utf8(out.stdout).unwrap()
    };
    for budget in [
        &[][..],
        &["--budget", "30MiB"],
        &["--budget", "50%"],
        &["--budget", "60%scheduled"],
    ] {
        let text = |path| {
            report(path, budget)
                .lines()
                .filter(|l| !l.starts_with("candidates: "))
                .map(|l| format!("{l}\n"))
                .collect::<String>()
        };
        let (a, b) = (text(&json), text(&bin));
        assert!(a.contains("peak, program order:"), "{a}");
        assert_eq!(a, b, "{budget:?}");
        let value = |path| {
            let mut v: serde_json::Value =
                serde_json::from_str(&report(path, &[budget, &["--json"]].concat())).unwrap();
            v["finalize_us"] = 0.into();
            v["prepare_us"] = 0.into();
            v
        };
        assert_eq!(value(&json), value(&bin), "{budget:?}");
    }
}

/// `compiler/build.rs` links `ebb` with `-no-pie`: its ELF header's `e_type` (bytes 16–17,
/// little-endian) is `ET_EXEC` (2), not `ET_DYN` (3, a PIE), so the dynamic loader applies no
/// relative relocations at start-up (a cold `ebb plan` is a few milliseconds in all).
#[test]
fn cli_binary_is_linked_position_dependent() {
    let bytes = std::fs::read(env!("CARGO_BIN_EXE_ebb")).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF");
    let e_type = u16::from_le_bytes([bytes[16], bytes[17]]);
    assert_eq!(e_type, 2, "`ebb` is not ET_EXEC (e_type {e_type})");
}

/// `src/bin/ebb/link.rs` keeps LLVM's other backends and MLIR's registry of every dialect and
/// pass out of the `ebb` binary (their static constructors ran at every start). Each C++ file
/// linked with a static constructor leaves a `_GLOBAL__sub_I_<file>` symbol: the host backend's
/// are there (the positive control: the binary is not stripped), no other backend's, and not
/// the XeGPU passes that only MLIR's registry of every pass links.
#[test]
fn cli_binary_links_only_the_llvm_backends_it_uses() {
    let bytes = std::fs::read(env!("CARGO_BIN_EXE_ebb")).unwrap();
    let has = |file: &str| {
        let name = format!("_GLOBAL__sub_I_{file}");
        memchr::memmem::find(&bytes, name.as_bytes()).is_some()
    };
    if cfg!(all(target_arch = "x86_64", feature = "jit")) {
        assert!(
            has("X86TargetMachine.cpp"),
            "no constructor symbols: stripped?"
        );
        for other in ["AArch64", "AMDGPU", "Hexagon", "RISCV", "Mips", "ARM"] {
            let file = format!("{other}TargetMachine.cpp");
            assert!(!has(&file), "`ebb` links {file}");
        }
        assert!(
            !has("XeGPUPropagateLayout.cpp"),
            "`ebb` links MLIR's registry of every pass"
        );
    }
}

/// `compiler/build.rs` links the C++ standard library into `ebb` statically: the binary's
/// dynamic section names no `libstdc++.so` (whose ~4 500 symbol relocations the dynamic loader
/// looked up at every start). The positive control: it still names `libc.so.6`.
#[test]
fn cli_binary_links_the_cpp_standard_library_statically() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    let bytes = std::fs::read(env!("CARGO_BIN_EXE_ebb")).unwrap();
    let has = |name: &str| memchr::memmem::find(&bytes, name.as_bytes()).is_some();
    assert!(has("libc.so.6\0"), "no `libc.so.6` in the dynamic section");
    assert!(!has("libstdc++.so.6\0"), "`ebb` needs the shared libstdc++");
}

/// `compiler/ebb.order` (the functions a cold `ebb plan` runs, laid out together by
/// `compiler/build.rs`) still names the binary's functions: of its C++ names (LLVM's and MLIR's,
/// which change only with LLVM; the Rust names change with the toolchain and features), at
/// least 90% are symbols of `ebb`. When this fails, run `scripts/link-order.sh`.
#[test]
fn link_order_file_names_the_binarys_functions() {
    let order = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/ebb.order")).unwrap();
    let cxx: Vec<&str> = order
        .lines()
        .filter(|l| !l.starts_with('#') && l.starts_with("_Z"))
        .filter(|l| !is_rust_legacy_symbol(l))
        .collect();
    assert!(cxx.len() > 500, "only {} C++ names in ebb.order", cxx.len());
    let bytes = std::fs::read(env!("CARGO_BIN_EXE_ebb")).unwrap();
    // Every NUL-terminated string of the binary that could be a C++ name (the symbol table's
    // string table among them), gathered in one pass.
    let names: std::collections::HashSet<&[u8]> = bytes
        .split(|&b| b == 0)
        .filter(|s| s.starts_with(b"_Z"))
        .collect();
    let found = cxx.iter().filter(|n| names.contains(n.as_bytes())).count();
    assert!(
        found * 10 >= cxx.len() * 9,
        "{found} of {} C++ names of ebb.order are symbols of `ebb`: run scripts/link-order.sh",
        cxx.len()
    );
}

/// A Rust symbol in the legacy mangling: `_ZN…17h<16 hex digits>E`.
fn is_rust_legacy_symbol(name: &str) -> bool {
    name.len() > 20
        && name.ends_with('E')
        && name[name.len() - 20..].starts_with("17h")
        && name[name.len() - 17..name.len() - 1]
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
}
