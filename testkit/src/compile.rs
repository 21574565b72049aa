//! Fixtures imported and compiled through the pipeline (feature `compiler`): the per-file
//! import and compile helpers of the integration tests, defined once.
//!
//! Imports and compiles of fixture files are memoized for the test process (the pipeline is
//! deterministic in its input and options): the tests of one binary compile the same fixture
//! with the same options many times (a third of the tests crate's compile time was repeats).

use crate::{jax_fixture, onnx_fixture, onnx_metadata};
use ebb_import::onnx::ImportOptions;
use ebb_ir::{DType, Graph, TensorType};
use ebb_pipeline::{CompileOptions, Compiled};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// Files larger than this (bytes) are imported and compiled afresh each time: a memoized
/// result stays in memory until the test process exits.
const MEMO_MAX_FILE_BYTES: u64 = 1 << 20;

/// The value of `key` in the process-wide memo `memo`, made by `make` on the first request;
/// concurrent requests for one key wait for that one computation. Not memoized (made afresh)
/// when `path` is over [`MEMO_MAX_FILE_BYTES`] or unreadable.
fn memoized<T: Clone + Send + Sync + 'static>(
    memo: &'static OnceLock<Mutex<HashMap<String, Arc<OnceLock<T>>>>>,
    path: &Path,
    key: String,
    make: impl FnOnce() -> T,
) -> T {
    let small = std::fs::metadata(path).is_ok_and(|m| m.len() <= MEMO_MAX_FILE_BYTES);
    if !small {
        return make();
    }
    let cell = {
        let mut map = memo
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        Arc::clone(map.entry(key).or_default())
    };
    cell.get_or_init(make).clone()
}

/// The path of fixture `name`: `onnx/NAME` for an ONNX fixture
/// (`tests/fixtures/onnx/NAME.onnx`), else a JAX one (`tests/fixtures/jax/NAME.mlir`).
pub fn fixture_path(name: &str) -> PathBuf {
    match name.strip_prefix("onnx/") {
        Some(n) => onnx_fixture(n),
        None => jax_fixture(name),
    }
}

/// Import options for ONNX fixture `name`: an ONNX Runtime optimizer model gets the element
/// types of its sequence inputs from its training model's parameter inputs (`elements` in its
/// metadata JSON); other models the defaults.
///
/// # Panics
/// On metadata that lacks what an optimizer model's needs (a test fixture error).
pub fn onnx_import_options(name: &str) -> ImportOptions {
    let mut opts = ImportOptions::default();
    let m = onnx_metadata(name);
    if m["kind"] != "ort_optimizer_model" {
        return opts;
    }
    let train = onnx_metadata(&name.replace("_optimizer", "_training"));
    let shape_of = |p: &str| -> TensorType {
        let i = train["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == p)
            .unwrap_or_else(|| panic!("{p} not a training input"));
        let dims: Vec<i64> = i["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_i64().unwrap())
            .collect();
        TensorType::fixed(DType::F32, &dims)
    };
    for i in m["inputs"].as_array().unwrap() {
        if i["type"] == "sequence" {
            let elems = i["elements"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| shape_of(e.as_str().unwrap()))
                .collect();
            opts.sequence_elements
                .insert(i["name"].as_str().unwrap().to_string(), elems);
        }
    }
    opts
}

/// Imports the model at `path`: `.onnx` through the ONNX front end with
/// [`onnx_import_options`] of its stem, anything else by its extension (`.mlir`: StableHLO).
///
/// # Panics
/// When the import fails (naming the file).
pub fn import_path(path: &Path) -> Graph {
    static MEMO: OnceLock<Mutex<HashMap<String, Arc<OnceLock<Graph>>>>> = OnceLock::new();
    memoized(&MEMO, path, path.display().to_string(), || {
        import_afresh(path)
    })
}

/// [`import_path`] without the memo.
fn import_afresh(path: &Path) -> Graph {
    let imported = if path.extension().is_some_and(|e| e == "onnx") {
        let name = path.file_stem().unwrap_or_default().to_string_lossy();
        ebb_import::onnx::import_file_with(path, &onnx_import_options(&name))
            .map_err(|e| e.to_string())
    } else {
        ebb_import::import_file(path, None).map_err(|e| format!("{e:#}"))
    };
    imported
        .unwrap_or_else(|e| panic!("import {}: {e}", path.display()))
        .0
}

/// Imports and compiles the model at `path` with `opts` ([`import_path`], then the pipeline);
/// memoized for the process by path and options (the module docs).
///
/// # Panics
/// When the import or the compile fails (naming the file).
pub fn compile_path(path: &Path, opts: &CompileOptions) -> Compiled {
    static MEMO: OnceLock<Mutex<HashMap<String, Arc<OnceLock<Compiled>>>>> = OnceLock::new();
    let key = format!("{}\n{opts:?}", path.display());
    memoized(&MEMO, path, key, || {
        ebb_pipeline::compile(import_path(path), opts)
            .unwrap_or_else(|e| panic!("compile {}: {e:#}", path.display()))
    })
}

/// Fixture `name` ([`fixture_path`]) imported and compiled with `opts`.
///
/// # Panics
/// As [`compile_path`].
pub fn compile_fixture(name: &str, opts: &CompileOptions) -> Compiled {
    compile_path(&fixture_path(name), opts)
}

/// Fixture `name` compiled with the default options ([`CompileOptions::default`]).
///
/// # Panics
/// As [`compile_path`].
pub fn compiled(name: &str) -> Compiled {
    compile_fixture(name, &CompileOptions::default())
}
