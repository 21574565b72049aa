//! Dev-only test kit of the Ebb workspace: the helpers that the integration tests and benches
//! of `ebb-passes`, `ebb-runtime`, `ebb-compiler` and `ebb-tests` share, defined once here
//! instead of copied into every test file.
//!
//! Used only as a dev-dependency (`publish = false`). The base crate depends on `ebb-ir` (and
//! `serde_json`) only; the helpers that need a heavier crate sit behind a feature:
//! - `passes`: [`before_after`] (a pass's before/after IR snapshot);
//! - `runtime`: [`load_ref`] (a reference archive's inputs and expected outputs);
//! - `compiler`: [`import_fixture`] (a JAX fixture through the StableHLO front end, which links
//!   LLVM/MLIR), [`import_path`], [`compile_fixture`] and the other fixture compile helpers;
//! - `plan`: [`longtail`] (the long-tail finalize benchmark's budgets, a digest of finalize's
//!   results, the process's CPU time);
//! - `fuzz` (all three): [`fuzz`], the fuzz targets and their seed corpora.
//!
//! The base crate also holds [`graph`] (textual IR parsed and verified), [`ty`] (a tensor type
//! from dimension texts) and [`Lcg`] (the tests' one pseudo-random generator).
//!
//! Every crate's tests are integration tests (`CRATE/tests/`; no library builds a unit-test
//! harness), so all of them can use this crate, `ebb-ir`'s included.

use ebb_ir::{Bindings, DType, DimExpr, Graph, Symbol, TensorType};
use std::path::{Path, PathBuf};

#[cfg(feature = "compiler")]
pub use compile::{
    compile_fixture, compile_path, compiled, fixture_path, import_path, onnx_import_options,
};
pub use ebb_ir::BindingsExt;
pub use random::{lcg, Lcg};

#[cfg(feature = "compiler")]
mod compile;
#[cfg(feature = "fuzz")]
pub mod fuzz;
#[cfg(feature = "plan")]
pub mod longtail;
mod random;

/// Parses the textual IR `text` and verifies it.
///
/// # Panics
/// When it does not parse or verify (with the error and the text).
pub fn graph(text: &str) -> Graph {
    let g = ebb_ir::text::parse(text)
        .unwrap_or_else(|e| panic!("the test graph does not parse: {e}\n{text}"));
    ebb_ir::verify::verify(&g)
        .unwrap_or_else(|e| panic!("the test graph does not verify: {e}\n{text}"));
    g
}

/// A tensor type from an element type and dimension texts (`ty(DType::F32, &["B", "64"])`).
///
/// # Panics
/// On a dimension that does not parse.
pub fn ty(dtype: DType, dims: &[&str]) -> TensorType {
    TensorType::new(
        dtype,
        dims.iter()
            .map(|s| {
                s.parse::<DimExpr>()
                    .unwrap_or_else(|e| panic!("bad dimension `{s}`: {e}"))
            })
            .collect(),
    )
}

/// Bindings from `(name, value)` pairs (`bind(&[("B", 8), ("S", 256)])`); a later pair of the
/// same name wins. Same as [`Bindings::from_pairs`](BindingsExt::from_pairs).
pub fn bind(pairs: &[(&str, i64)]) -> Bindings {
    Bindings::from_pairs(pairs)
}

/// The bindings `{B: b, S: s}` of the batch and sequence symbols used by every fixture.
pub fn bs(b: i64, s: i64) -> Bindings {
    bind(&[("B", b), ("S", s)])
}

/// The directory of the committed fixtures, `tests/fixtures` at the workspace root.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

/// The directory of the JAX fixtures, `tests/fixtures/jax`.
pub fn jax_fixtures_dir() -> PathBuf {
    fixtures_dir().join("jax")
}

/// The directory of the ONNX fixtures, `tests/fixtures/onnx`.
pub fn onnx_fixtures_dir() -> PathBuf {
    fixtures_dir().join("onnx")
}

/// Path of JAX fixture `name` (`mlp_sgd` -> `tests/fixtures/jax/mlp_sgd.mlir`).
pub fn jax_fixture(name: &str) -> PathBuf {
    jax_fixtures_dir().join(format!("{name}.mlir"))
}

/// Path of ONNX fixture `name` (`torch_mlp_sgd` -> `tests/fixtures/onnx/torch_mlp_sgd.onnx`).
pub fn onnx_fixture(name: &str) -> PathBuf {
    onnx_fixtures_dir().join(format!("{name}.onnx"))
}

/// Names (without extension) of the files in `dir` ending in `.ext`, sorted; empty if `dir`
/// cannot be read.
fn names_with_ext(dir: &Path, ext: &str) -> Vec<String> {
    let suffix = format!(".{ext}");
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_suffix(suffix.as_str()))
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Names of all committed JAX fixtures (the `.mlir` files), sorted.
pub fn jax_fixture_names() -> Vec<String> {
    names_with_ext(&jax_fixtures_dir(), "mlir")
}

/// Names of all committed ONNX fixtures (the `.onnx` files), sorted.
pub fn onnx_fixture_names() -> Vec<String> {
    names_with_ext(&onnx_fixtures_dir(), "onnx")
}

/// Reads and parses a JSON file; panics naming the file on errors.
fn read_json(p: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON in {}: {e}", p.display()))
}

/// The metadata JSON written next to JAX fixture `name` by `examples/export/export_all.py`.
pub fn jax_metadata(name: &str) -> serde_json::Value {
    read_json(&jax_fixtures_dir().join(format!("{name}.json")))
}

/// The metadata JSON written next to ONNX fixture `name` by
/// `examples/export/onnx/export_onnx.py`.
pub fn onnx_metadata(name: &str) -> serde_json::Value {
    read_json(&onnx_fixtures_dir().join(format!("{name}.json")))
}

/// The reference archives listed under `refs` in a fixture's metadata, each with its
/// bindings: `(dir/file, bindings)` per entry `{"file": .., "bindings": {"B": .., ..}}`.
pub fn fixture_refs(meta: &serde_json::Value, dir: &Path) -> Vec<(PathBuf, Bindings)> {
    meta["refs"]
        .as_array()
        .expect("metadata has `refs`")
        .iter()
        .map(|r| {
            let b: Bindings = r["bindings"]
                .as_object()
                .expect("a ref has `bindings`")
                .iter()
                .map(|(k, v)| (Symbol::new(k), v.as_i64().expect("integer binding")))
                .collect();
            (dir.join(r["file"].as_str().expect("a ref has `file`")), b)
        })
        .collect()
}

/// Imports JAX fixture `name` through the StableHLO front end (panics naming the fixture on
/// errors).
#[cfg(feature = "compiler")]
pub fn import_fixture(name: &str) -> ebb_ir::Graph {
    ebb_import::stablehlo::import_file(&jax_fixture(name))
        .unwrap_or_else(|e| panic!("import {name}: {e}"))
        .0
}

/// The unfused configuration that keeps every input resident (`--fusion off --donate keep`):
/// what tests whose figures were measured without fusion and donation compile with.
#[cfg(feature = "compiler")]
pub fn unfused_options() -> ebb_pipeline::CompileOptions {
    ebb_pipeline::CompileOptions::builder()
        .fusion(false)
        .donate("keep".parse().expect("a donation policy"))
        .build()
}

/// Runs `pass` on the graph `text` (parsed and verified, verified again after the pass);
/// returns the snapshot text `// before\n<IR>\n// after: N change(s)\n<IR>` and the result.
#[cfg(feature = "passes")]
pub fn before_after(
    text: &str,
    pass: &dyn ebb_passes::manager::Pass,
) -> (String, ebb_passes::manager::PassResult) {
    use ebb_ir::text::print;
    use ebb_ir::verify::verify;
    let mut g = graph(text);
    let before = print(&g);
    let name = pass.name();
    let r = pass
        .run(&mut g, &mut ebb_passes::manager::PassContext::new())
        .unwrap_or_else(|e| panic!("{name} runs: {e}"));
    verify(&g).unwrap_or_else(|e| panic!("graph verifies after {name}: {e}"));
    (
        format!(
            "// before\n{before}\n// after: {} change(s)\n{}",
            r.changes,
            print(&g)
        ),
        r,
    )
}

/// Inputs `in_0..in_{n_in}` and expected outputs `out_0..out_{n_out}` of a reference archive
/// (`<fixture>.ref{0,1}.npz`); panics if one is missing.
#[cfg(feature = "runtime")]
pub fn load_ref(
    path: &Path,
    n_in: usize,
    n_out: usize,
) -> (Vec<ebb_runtime::Tensor>, Vec<ebb_runtime::Tensor>) {
    let mut all = ebb_runtime::npz::load_npz(path)
        .unwrap_or_else(|e| panic!("cannot load {}: {e}", path.display()));
    let mut take = |k: String| {
        all.remove(&k)
            .unwrap_or_else(|| panic!("{}: no {k}", path.display()))
    };
    let ins = (0..n_in).map(|i| take(format!("in_{i}"))).collect();
    let outs = (0..n_out).map(|i| take(format!("out_{i}"))).collect();
    (ins, outs)
}

/// A scratch directory for one test, removed when dropped; it dereferences to its [`Path`].
pub struct Scratch(tempfile::TempDir);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

/// A fresh scratch directory in the system's temporary directory, named `ebb-{tag}-…`.
///
/// # Panics
/// When the directory cannot be created (a test environment failure).
pub fn scratch(tag: &str) -> Scratch {
    Scratch(
        tempfile::Builder::new()
            .prefix(&format!("ebb-{tag}-"))
            .tempdir()
            .expect("a scratch directory in the temporary directory"),
    )
}

/// The Python the tests run (pytest, the exporters' scripts): `$EBB_PYTHON`, else the
/// repository's `.venv-jax` (made by `scripts/setup-debian.sh`, with JAX, numpy, pytest).
///
/// # Panics
/// When neither exists, with the command that creates it.
pub fn test_python() -> PathBuf {
    let python = std::env::var("EBB_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| fixtures_dir().join("../../.venv-jax/bin/python"));
    assert!(
        python.exists(),
        "no Python environment at {}: run `bash scripts/setup-debian.sh` (it creates .venv-jax \
         with JAX, numpy and pytest) or set EBB_PYTHON",
        python.display()
    );
    python
}

/// `target/<profile>/deps`, the directory of the running test binary: where a test build leaves
/// the workspace's cdylibs (`libebb_capi.so`, `lib_ebb.so`); its parent holds the binaries
/// (`ebb`).
///
/// # Panics
/// When the test binary's path cannot be read.
pub fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .expect("the test binary lies in a directory")
        .to_path_buf()
}

/// A StableHLO module `@main(%a: tensor<4xf32>, %i: tensor<i32>)` whose result is computed
/// inside `depth` nested `stablehlo.case` ops (one branch each), so its regions nest `depth`
/// deep: the reliability tests' and the fuzzer's seed at the nesting bound.
pub fn nested_case_module(depth: usize) -> String {
    let t = "tensor<4xf32>";
    let mut body = String::new();
    for k in 0..depth {
        body += &format!("%v{k} = \"stablehlo.case\"(%i) ({{\n");
    }
    body += &format!("%v{depth} = \"stablehlo.add\"(%a, %a) : ({t}, {t}) -> {t}\n");
    for k in (0..depth).rev() {
        body += &format!(
            "\"stablehlo.return\"(%v{}) : ({t}) -> ()\n}}) : (tensor<i32>) -> {t}\n",
            k + 1
        );
    }
    format!(
        "\"builtin.module\"() ({{\n\"func.func\"() <{{function_type = ({t}, tensor<i32>) -> {t}, sym_name = \"main\"}}> ({{\n^bb0(%a: {t}, %i: tensor<i32>):\n{body}\"func.return\"(%v0) : ({t}) -> ()\n}}) : () -> ()\n}}) : () -> ()\n"
    )
}

/// Runs `f` on every item of `items` on up to `available_parallelism` threads (each takes the
/// next unstarted item), and returns when all are done: the fixture sweeps that would otherwise
/// be one long serial test, the last to finish in the suite.
///
/// # Panics
/// When `f` panicked on any item (after every thread has stopped; the item's message is printed
/// by the panicking thread).
pub fn par_for_each<T: Sync>(items: &[T], f: impl Fn(&T) + Sync) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(items.len());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) {
                    f(item);
                }
            });
        }
    });
}
