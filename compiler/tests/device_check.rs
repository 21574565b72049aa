//! `ebb run --executor simt --check`: the GPU check tells a contraction summed in another
//! order (which moves a cancelling output, the attention key bias's gradient, far beyond
//! `--device-tolerance`) from a wrong one. The simulated device's GEMM stands in for
//! another library's through `EBB_SIMT_GEMM` (`reversed`, `faulty`).

use ebb_testkit::jax_fixtures_dir;
use std::process::{Command, Output};

fn run(gemm: &str) -> Output {
    let d = jax_fixtures_dir();
    Command::new(env!("CARGO_BIN_EXE_ebb"))
        .env("EBB_SIMT_GEMM", gemm)
        .args(["run", d.join("attn_kbias_adam.mlir").to_str().unwrap()])
        .args([
            "--bind",
            "B=2,S=8",
            "--executor",
            "simt",
            "--check",
            "--json",
        ])
        .args([
            "--inputs",
            d.join("attn_kbias_adam.ref0.npz").to_str().unwrap(),
        ])
        .output()
        .unwrap()
}

#[test]
fn another_summation_order_passes_as_accurate_as_the_reference() {
    let out = run("reversed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["outputs_within_tolerance"], true);
    // Some outputs are over --device-tolerance and pass only by the accuracy rule.
    let weighed: Vec<&serde_json::Value> = r["reference_output_errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["rel_err"].as_f64().unwrap() > e["tolerance"].as_f64().unwrap())
        .collect();
    assert!(!weighed.is_empty(), "{r}");
    for e in weighed {
        let (dev, own) = (
            e["against_f64_dot"][0].as_f64().unwrap(),
            e["against_f64_dot"][1].as_f64().unwrap(),
        );
        assert!(dev <= 4.0 * own + e["tolerance"].as_f64().unwrap(), "{e}");
    }
}

#[test]
fn a_wrong_gemm_fails_naming_the_outputs() {
    let out = run("faulty");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the outputs differ from the reference executor's beyond their tolerance"),
        "{err}"
    );
    assert!(err.contains("output 1 (result[1]['bk']) f32[16]"), "{err}");
    assert!(err.contains("(more than 4x)"), "{err}");
}
