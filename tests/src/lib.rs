//! Shared helpers for Ebb's workspace-level integration tests (`tests/tests/*.rs`): fixture
//! paths and metadata.

use std::path::PathBuf;

/// Directory of the committed JAX fixtures (`tests/fixtures/jax`).
pub fn jax_fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join("jax")
}

/// Path of fixture `name` (`mlp_sgd` -> `tests/fixtures/jax/mlp_sgd.mlir`).
pub fn jax_fixture(name: &str) -> PathBuf {
    jax_fixtures_dir().join(format!("{name}.mlir"))
}

/// Names of all committed JAX fixtures (the `.mlir` files), sorted.
pub fn jax_fixture_names() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(jax_fixtures_dir())
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_suffix(".mlir"))
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The metadata JSON written next to fixture `name` by `examples/export/export_all.py`.
pub fn jax_metadata(name: &str) -> serde_json::Value {
    let p = jax_fixtures_dir().join(format!("{name}.json"));
    let text =
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON in {}: {e}", p.display()))
}
