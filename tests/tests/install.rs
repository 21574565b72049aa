//! Installing Ebb as the documentation says (slow: each builds Ebb again from scratch in its own
//! target directory, several minutes; run with `cargo test -p ebb-tests --test integration
//! install -- --ignored`):
//! - a crate outside this repository that depends on `ebb-runtime` (by path) builds after one
//!   step, `source scripts/llvm-env.sh` (the three LLVM/MLIR prefixes of .cargo/config.toml);
//! - `cargo install --path compiler` puts a working `ebb` in the install root's `bin`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
#[ignore = "builds ebb-runtime and LLVM's bindings from scratch (minutes)"]
fn a_crate_outside_the_repo_builds_with_the_env_file() {
    let dir = ebb_testkit::scratch("outside");
    let repo = repo().canonicalize().unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"embeds-ebb\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\nebb-runtime = {{ path = \"{}/runtime\" }}\n",
            repo.display()
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("src/main.rs"),
        "fn main() {\n    println!(\"{:?}\", ebb_runtime::Executor::default());\n}\n",
    )
    .unwrap();
    // The repository's lock file: the same dependency versions, fetched already (offline).
    std::fs::copy(repo.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}/scripts/llvm-env.sh && cargo run --offline --quiet",
            repo.display()
        ))
        .current_dir(&*dir)
        .env_remove("MLIR_SYS_220_PREFIX")
        .env_remove("LLVM_SYS_221_PREFIX")
        .env_remove("TABLEGEN_220_PREFIX")
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Jit"));
}

#[test]
#[ignore = "builds the ebb CLI from scratch in release mode (minutes)"]
fn cargo_install_puts_ebb_on_the_path() {
    let dir = ebb_testkit::scratch("install");
    let out = Command::new("cargo")
        .args([
            "install",
            "--offline",
            "--locked",
            "--path",
            "compiler",
            "--root",
        ])
        .arg(&*dir)
        .arg("--target-dir")
        .arg(dir.join("target"))
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ebb = dir.join("bin/ebb");
    let v = Command::new(&ebb).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("ebb "));
    let plan = Command::new(&ebb)
        .args(["plan", "--bind", "B=8"])
        .arg(ebb_testkit::jax_fixture("mlp_sgd"))
        .output()
        .unwrap();
    assert!(
        plan.status.success(),
        "{}",
        String::from_utf8_lossy(&plan.stderr)
    );
}
