//! Runs the Python package's tests (`python/tests/test_*.py`, pytest) from `cargo test`: the
//! `ebb` package is assembled in a scratch directory from `python/ebb/*.py` and the extension
//! module cargo just built (`lib_ebb.so` as `ebb/_ebb.abi3.so`), and pytest runs with the
//! Python of `$EBB_PYTHON`, else the repository's `.venv-jax` (made by
//! `scripts/setup-debian.sh`, which installs JAX, numpy and pytest there).

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

#[test]
fn pytest_python_tests() {
    let repo = repo();
    let python = ebb_testkit::test_python();
    // A test build leaves the library in deps/ (`cargo build` also copies it up).
    let lib = ebb_testkit::deps_dir().join("lib_ebb.so");
    assert!(lib.exists(), "{} was not built", lib.display());
    let site = ebb_testkit::scratch("python");
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
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "python/tests",
        ])
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
