//! Tests of the `ebb` command line: exit codes, error locations and the JSON summary.

use std::path::PathBuf;
use std::process::Command;

fn jax_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/jax")
        .join(format!("{name}.mlir"))
}

#[test]
fn cli_exits_non_zero_with_location_on_malformed_file() {
    let dir = std::env::temp_dir().join(format!("ebb-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
