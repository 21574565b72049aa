//! `ebb bench` over a real fixture: the JSON schema (snapshot, timings redacted), the markdown
//! table, the XLA column merged from a stand-in peer, and the path without JAX.

use ebb_compiler::bench::shapes::ShapeSource;
use ebb_compiler::bench::{self, BenchOptions, BenchReport};
use ebb_testkit::jax_fixture as fixture;
use std::process::Command;

fn opts(name: &str, shapes: &[&str], budget: Option<&str>) -> BenchOptions {
    BenchOptions {
        input: fixture(name),
        format: None,
        params_from: None,
        shapes: ShapeSource::List {
            shapes: shapes.iter().map(|s| s.to_string()).collect(),
        },
        budget: budget.map(str::to_string),
        xla: false,
        xla_time_runs: 0,
        exec_runs: 0,
        exact_time_limit_s: None,
        timeline_at: None,
        compile: Default::default(),
        // A fixed profile: the measured `cpu` would make the snapshot machine-dependent.
        device: ebb_compiler::flags::DeviceFlags {
            device: Some("h100-sxm-pcie5".into()),
            kinds: ebb_compiler::flags::KindsArg::Both,
        },
    }
}

/// Replaces every timing (and the machine-specific input path) by a placeholder.
fn redact(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                let timing = [
                    "compile_ms_symbolic",
                    "compile_ms_precise",
                    "compile_ms_precise_total",
                    "finalize_us",
                    "compile_ms",
                    "solve_ms",
                ]
                .contains(&k.as_str());
                if timing && !x.is_null() {
                    *x = serde_json::Value::String("[timing]".into());
                } else if k == "input" {
                    *x = serde_json::Value::String("[input]".into());
                } else {
                    redact(x);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(redact),
        _ => {}
    }
}

fn zero_timings(r: &mut BenchReport) {
    r.compile_ms_symbolic = Some(0.0);
    r.summary.compile_ms_precise_total = 0.0;
    for row in &mut r.rows {
        row.compile_ms_precise = 0.0;
        if let Some(b) = &mut row.budget {
            b.finalize_us = 0.0;
        }
    }
    r.input = "gpt2_tiny_adamw.mlir".into();
}

#[test]
fn json_schema_and_markdown_on_the_2_layer_gpt() {
    // Unsorted and with a duplicate: rows come back sorted by S, once each.
    let o = opts(
        "gpt2_tiny_adamw",
        &["B=8,S=128", "B=2,S=16", "B=4,S=64", "B=2,S=16"],
        Some("50%"),
    );
    let mut r = bench::run(&o, &mut ()).unwrap();
    assert_eq!(r.schema_version, bench::SCHEMA_VERSION);
    assert_eq!(r.fixture.as_deref(), Some("gpt2_tiny_adamw"));
    assert_eq!(r.x_symbol, "S");
    let ss: Vec<i64> = r.rows.iter().map(|x| x.bind["S"]).collect();
    assert_eq!(ss, [16, 64, 128]);
    for row in &r.rows {
        // Both plans are never better than the lower bound; the symbolic one never worse than
        // program order (the ratio to the precise plan is a measurement, in the snapshot).
        assert!(row.lower_bound_bytes <= row.peak_bytes_scheduled);
        assert!(row.lower_bound_bytes <= row.peak_bytes_precise);
        assert!(row.peak_bytes_scheduled <= row.peak_bytes_program_order);
        let ratio = row.peak_bytes_scheduled as f64 / row.peak_bytes_precise as f64;
        assert!((row.symbolic_over_precise - ratio).abs() < 1e-12);
        let b = row.budget.as_ref().unwrap();
        assert_eq!(b.budget_bytes, row.peak_bytes_program_order / 2);
        if b.feasible {
            assert!(b.peak_bytes_planned.unwrap() <= b.budget_bytes);
        } else {
            assert!(b.smallest_feasible_bytes.unwrap() > b.budget_bytes);
        }
    }
    let t = r.timeline.as_ref().unwrap();
    assert!(!t.before.is_empty());
    if let Some(after) = &t.after {
        assert_eq!(after.len(), t.before.len());
        assert!(after.iter().all(|&x| x <= t.budget_bytes.unwrap()));
    }
    let mut v = serde_json::to_value(&r).unwrap();
    redact(&mut v);
    insta::assert_snapshot!("gpt2_tiny_json", serde_json::to_string_pretty(&v).unwrap());
    zero_timings(&mut r);
    insta::assert_snapshot!("gpt2_tiny_markdown", bench::render::markdown(&r));

    let dir = std::env::temp_dir().join(format!("ebb-bench-plots-{}", std::process::id()));
    let files = bench::plot::write_plots(&r, &dir, "gpt2_tiny").unwrap();
    assert_eq!(files.len(), 2);
    for f in &files {
        let svg = std::fs::read_to_string(f).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("</svg>"),
            "{}",
            f.display()
        );
    }
    let peak = std::fs::read_to_string(&files[0]).unwrap();
    assert!(peak.contains("Ebb precise (--bind)") && peak.contains("lower bound"));
    std::fs::remove_dir_all(&dir).ok();
}

fn ebb(args: &[&str], envs: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ebb"));
    c.args(args);
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// `--xla` without a usable Python is an error naming the interpreter and how to get one,
/// before the sweep; a peer that starts but gives no column (here: an interpreter that is not
/// Python) fails after printing the table without the XLA column.
#[test]
fn without_jax_xla_is_an_error_with_a_plain_message() {
    let f = fixture("mlp_sgd");
    let args = [
        "bench",
        f.to_str().unwrap(),
        "--shapes",
        "B=8;B=16",
        "--xla",
    ];
    let out = ebb(&args, &[("EBB_PYTHON", "/nonexistent")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("cannot run `/nonexistent`") && stderr.contains("EBB_PYTHON"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "refused before the sweep");

    let out = ebb(&args, &[("EBB_PYTHON", "/bin/false")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("--xla: no XLA column"), "{stderr}");
    assert!(
        stdout.contains("XLA: not available") && !stdout.contains("XLA total"),
        "{stdout}"
    );
    assert!(stdout.contains("| 16 |"), "{stdout}");
}

/// Without a terminal, long work prints progress lines on stderr (`EBB_PROGRESS_SECS=0`: at
/// every tenth of a phase), where a bar would be hidden.
#[test]
fn progress_lines_when_stderr_is_not_a_terminal() {
    let f = fixture("mlp_sgd");
    let out = ebb(
        &["bench", f.to_str().unwrap(), "--shapes", "B=8;B=16"],
        &[("EBB_PROGRESS_SECS", "0")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("ebb bench: ebb 1/2"), "{stderr}");
    assert!(stderr.contains("ebb bench: ebb 2/2"), "{stderr}");
    let out = ebb(
        &["run", f.to_str().unwrap(), "--bind", "B=8"],
        &[("EBB_PROGRESS_SECS", "0")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("ebb run: executing") && stderr.contains("(100%"),
        "{stderr}"
    );
}

#[test]
fn xla_column_is_merged_from_the_peer() {
    // A stand-in peer speaking the protocol of examples/export/xla_peer.py, run by /bin/sh.
    let dir = std::env::temp_dir().join(format!("ebb-bench-peer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let peer = dir.join("peer.sh");
    std::fs::write(
        &peer,
        r#"while [ $# -gt 1 ]; do case "$1" in --fixture) fx=$2;; --module) mod=$2;; --signature) sig=$2;; --shapes) sh=$2;; --time-runs) tr=$2;; esac; shift 2; done
test "$fx" = mlp_sgd && test "$sh" = "B=8;B=16" && test "$tr" = 2 && case "$mod" in */mlp_sgd.mlir) ;; *) false;; esac && case "$sig" in '{"inputs":["f32['*'"symbols":["B"]}') ;; *) false;; esac || { echo '{"error": "bad_shapes", "message": "args"}'; exit 2; }
echo '{"jax_version": "0.10.2"}'
echo '{"bind": {"B": 8}, "argument_bytes": 400, "output_bytes": 300, "alias_bytes": 100, "temp_bytes": 400, "total_bytes": 1000, "compile_ms": 1.5, "donated_alias_bytes": 300, "donated_temp_bytes": 400, "donated_total_bytes": 800, "step_ms": 2.5}'
echo '{"bind": {"B": 16}, "argument_bytes": 400, "output_bytes": 300, "alias_bytes": 0, "temp_bytes": 1300, "total_bytes": 2000, "compile_ms": 1.5, "donated_alias_bytes": 300, "donated_temp_bytes": 1200, "donated_total_bytes": 1600, "step_ms": 4.5}'
"#,
    )
    .unwrap();
    let json = dir.join("r.json");
    let f = fixture("mlp_sgd");
    let out = ebb(
        &[
            "bench",
            f.to_str().unwrap(),
            "--shapes",
            "B=16;B=8",
            "--xla",
            "--xla-time-runs",
            "2",
            "--json",
            json.to_str().unwrap(),
        ],
        &[
            ("EBB_PYTHON", "/bin/sh"),
            ("EBB_XLA_PEER", peer.to_str().unwrap()),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("XLA total")
            && stdout.contains("Ebb/XLA donated")
            && stdout.contains("XLA step ms")
            && stdout.contains("JAX 0.10.2"),
        "{stdout}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["xla"]["available"], true);
    let expected = [(1000.0, 800.0, 2.5), (2000.0, 1600.0, 4.5)];
    for (row, (total, donated, ms)) in v["rows"].as_array().unwrap().iter().zip(expected) {
        let x = &row["xla"];
        assert_eq!(x["total_bytes"].as_f64().unwrap(), total);
        assert_eq!(x["total_bytes_donated"].as_f64().unwrap(), donated);
        assert_eq!(x["step_ms"].as_f64().unwrap(), ms);
        let peak = row["peak_bytes_scheduled"].as_f64().unwrap();
        assert!((x["ebb_over_xla"].as_f64().unwrap() - peak / total).abs() < 1e-12);
        assert!((x["ebb_over_xla_donated"].as_f64().unwrap() - peak / donated).abs() < 1e-12);
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A module whose `.json` metadata names no fixture (a user's own export) goes to the peer
/// as `--module` with its signature (symbols, `@main`'s argument and result types), without
/// `--fixture`.
#[test]
fn xla_column_for_a_module_without_fixture_metadata() {
    let dir = std::env::temp_dir().join(format!("ebb-bench-module-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let own = dir.join("own_step.mlir");
    std::fs::copy(fixture("mlp_sgd"), &own).unwrap();
    let peer = dir.join("peer.sh");
    std::fs::write(
        &peer,
        r#"while [ $# -gt 1 ]; do case "$1" in --fixture) fx=$2;; --module) mod=$2;; --signature) sig=$2;; esac; shift 2; done
test -z "$fx" && test "$mod" = "$(dirname "$0")/own_step.mlir" && case "$sig" in *'"outputs":["f32[]",'*'"symbols":["B"]}') ;; *) false;; esac || { echo '{"error": "bad_module", "message": "args"}'; exit 2; }
echo '{"jax_version": "0.10.2"}'
echo '{"bind": {"B": 8}, "argument_bytes": 400, "output_bytes": 300, "alias_bytes": 100, "temp_bytes": 400, "total_bytes": 1000, "compile_ms": 1.5, "donated_alias_bytes": 300, "donated_temp_bytes": 400, "donated_total_bytes": 800, "step_ms": 2.5}'
"#,
    )
    .unwrap();
    let out = ebb(
        &["bench", own.to_str().unwrap(), "--shapes", "B=8", "--xla"],
        &[
            ("EBB_PYTHON", "/bin/sh"),
            ("EBB_XLA_PEER", peer.to_str().unwrap()),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("XLA total"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_shapes_are_clear_errors() {
    let f = fixture("gpt2_tiny_adamw");
    let out = ebb(
        &["bench", f.to_str().unwrap(), "--shapes", "B=2,S=600"],
        &[],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("B=2,S=600") && stderr.contains("512"),
        "{stderr}"
    );
    let out = ebb(&["bench", f.to_str().unwrap()], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--shapes"));
}

#[cfg(feature = "exact")]
#[test]
fn exact_column_is_never_above_the_greedy() {
    let mut o = opts("gpt2_tiny_adamw", &["B=4,S=64", "B=8,S=128"], Some("50%"));
    o.exact_time_limit_s = Some(60.0);
    let r = bench::run(&o, &mut ()).unwrap();
    for row in &r.rows {
        let b = row.budget.as_ref().unwrap();
        let e = row.exact.as_ref().unwrap();
        assert!(b.feasible, "{row:?}");
        assert_eq!(e.status, "optimal", "{e:?}");
        let (opt, greedy) = (
            e.optimum_overhead_us.unwrap(),
            e.greedy_overhead_us.unwrap(),
        );
        assert!(opt <= greedy + 1e-9, "{e:?}");
        assert!(e.greedy_gap.unwrap() >= -1e-12);
        assert!(e.optimum_peak_bytes.unwrap() <= b.budget_bytes);
    }
    assert!(r.summary.max_greedy_gap.is_some());
    let md = bench::render::markdown(&r);
    assert!(
        md.contains("| optimal |") && md.contains("greedy gap"),
        "{md}"
    );
}

#[cfg(feature = "exact")]
#[test]
fn exact_needs_a_budget() {
    let mut o = opts("gpt2_tiny_adamw", &["B=4,S=64"], None);
    o.exact_time_limit_s = Some(1.0);
    let e = bench::run(&o, &mut ()).unwrap_err().to_string();
    assert!(e.contains("--exact needs --budget"), "{e}");
}

/// Without the `exact` feature the flag is still accepted and the run fails with how to build
/// `ebb` with it.
#[cfg(not(feature = "exact"))]
#[test]
fn exact_without_the_feature_says_how_to_enable_it() {
    let f = fixture("mlp_sgd");
    let out = ebb(
        &[
            "bench",
            f.to_str().unwrap(),
            "--shapes",
            "B=8",
            "--budget",
            "50%",
            "--exact",
            "1",
        ],
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("`exact` feature")
            && stderr.contains("cargo build --release -p ebb-compiler --features exact"),
        "{stderr}"
    );
}
