//! Runs the Python package's tests (`python/tests/test_*.py`, pytest) from `cargo test`: the
//! `ebb` package is assembled in a scratch directory from `python/ebb/*.py` and the extension
//! module cargo just built (`lib_ebb.so` as `ebb/_ebb.abi3.so`), and pytest runs with the
//! Python of `$EBB_PYTHON`, else the repository's `.venv-jax` (made by
//! `scripts/setup-debian.sh`, which installs JAX, numpy and pytest there).
//!
//! The files run as three tests (one pytest process each) so that the test harness runs them
//! side by side: the optax round trips, the tests that import torch (the PyTorch export tests,
//! which trace, and the DLPack tests), and the rest. A new `test_*.py` file runs in the last group unless listed.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The files of the two slow groups; every other `python/tests/test_*.py` runs in
/// [`pytest_api_and_boundaries`].
const SLOW_FILES: [&str; 3] = ["test_runtime_steps.py", "test_torch.py", "test_dlpack.py"];

#[test]
fn pytest_runtime_steps() {
    run_pytest("steps", &["test_runtime_steps.py"]);
}

#[test]
fn pytest_torch() {
    run_pytest("torch", &["test_torch.py", "test_dlpack.py"]);
}

#[test]
fn pytest_api_and_boundaries() {
    let mut rest: Vec<String> = std::fs::read_dir(repo().join("python/tests"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("test_") && n.ends_with(".py"))
        .filter(|n| !SLOW_FILES.contains(&n.as_str()))
        .collect();
    rest.sort();
    assert!(!rest.is_empty(), "no other python/tests/test_*.py file");
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    run_pytest("api", &rest);
}

/// Runs pytest on `files` (names in `python/tests/`) with the `ebb` package assembled in its own
/// scratch directory `python-{tag}`; panics with pytest's output when a test fails.
fn run_pytest(tag: &str, files: &[&str]) {
    let repo = repo();
    let python = ebb_testkit::test_python();
    // A test build leaves the library in deps/ (`cargo build` also copies it up).
    let lib = ebb_testkit::deps_dir().join("lib_ebb.so");
    assert!(lib.exists(), "{} was not built", lib.display());
    let site = ebb_testkit::scratch(&format!("python-{tag}"));
    let pkg = site.join("ebb");
    std::fs::create_dir_all(&pkg).unwrap();
    for entry in std::fs::read_dir(repo.join("python/ebb")).unwrap() {
        let p = entry.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, pkg.join(p.file_name().unwrap())).unwrap();
        }
    }
    std::fs::copy(&lib, pkg.join("_ebb.abi3.so")).unwrap();
    // The binaries lie next to `deps/`.
    let ebb_bin = ebb_testkit::deps_dir().with_file_name("ebb");
    assert!(
        ebb_bin.exists(),
        "{} was not built: run the workspace's tests (`cargo test --workspace`), which build it",
        ebb_bin.display()
    );
    let out = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .args(files.iter().map(|f| format!("python/tests/{f}")))
        .current_dir(&repo)
        .env("PYTHONPATH", &*site)
        .env("EBB_REPO", &repo)
        .env("EBB_BIN", &ebb_bin)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "pytest failed:\n{text}");
}
