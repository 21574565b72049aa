//! Fuzz targets: each takes arbitrary bytes and drives one of Ebb's input boundaries the way
//! the CLI does. A target must return for every input; a panic, an abort, a hang or an
//! unbounded allocation is a bug.
//!
//! The same functions run under two drivers:
//! - libFuzzer, coverage-guided, through `fuzz/` (`libfuzzer-sys`, instrumented with rustc's
//!   stable SanitizerCoverage flags): `scripts/fuzz.sh TARGET SECONDS`;
//! - the test suite's smoke run (`tests/tests/fuzz_smoke.rs`): the seeds below and seeded
//!   mutations of them, without instrumentation, on every CI run.
//!
//! [`seeds`] builds each target's seed corpus from the repository's real fixtures.

use ebb_import::{onnx, stablehlo};
use ebb_pipeline as pipeline;
use ebb_plan::finalize::{finalize, FinalizeOptions};
use ebb_plan::format::Plan;
use std::io::Cursor;

/// A fuzz target: its name (the `fuzz/` binary and the corpus folder) and its function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, by name.
pub const TARGETS: &[Target] = &[
    ("stablehlo_text", stablehlo_text),
    ("onnx_proto", onnx_proto),
    ("ir_text", ir_text),
    ("plan_load", plan_load),
    ("dim_param", dim_param),
    ("npz", npz),
    ("cli_args", cli_args),
];

/// Graphs with at most this many ops (program order) that a target imported are also
/// compiled: the passes see fuzzed graphs too, while large inputs stay fast to run.
const COMPILE_OPS: usize = 400;

/// Compiles a small imported graph with the default pipeline; errors are fine.
fn compile_small(g: ebb_ir::Graph) {
    if g.order().len() <= COMPILE_OPS {
        let _ = pipeline::compile(g, &pipeline::CompileOptions::default());
    }
}

/// StableHLO text as `ebb compile file.mlir` reads it: UTF-8 and NUL checks with a location,
/// MLIR parsing (melior), import, then the pipeline on small graphs.
pub fn stablehlo_text(data: &[u8]) {
    let Ok(text) = ebb_import::text::decode(data.to_vec(), "fuzz.mlir") else {
        return;
    };
    if ebb_import::text::check_no_nul(&text, "fuzz.mlir").is_err() {
        return;
    }
    if let Ok((g, _)) = stablehlo::import_str(&text, "fuzz.mlir") {
        compile_small(g);
    }
}

/// An ONNX model's protobuf bytes: decoding (prost), import, then the pipeline on small graphs.
pub fn onnx_proto(data: &[u8]) {
    if let Ok((g, _)) = onnx::import_bytes(data, "fuzz.onnx", None) {
        compile_small(g);
    }
}

/// Ebb's textual IR (the graph a plan embeds): parse and verify; a graph that verifies must
/// print and parse back to itself.
pub fn ir_text(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(g) = ebb_ir::text::parse(text) else {
        return;
    };
    if ebb_ir::verify::verify(&g).is_err() {
        return;
    }
    let printed = ebb_ir::text::print(&g);
    match ebb_ir::text::parse(&printed) {
        Ok(again) => assert_eq!(
            ebb_ir::text::print(&again),
            printed,
            "a verified graph does not print and parse back to itself"
        ),
        Err(e) => panic!("a verified graph prints text that does not parse: {e}\n{printed}"),
    }
}

/// A plan file as `ebb plan` reads it: JSON, version, indices, verification against the
/// embedded graph; a plan that verifies is finalized at representative bindings with and
/// without a budget of half its peak, and its decisions go through the independent checker
/// as `ebb plan` proves them. Verification does not re-derive every claim of a candidate
/// (transient bytes, the reads of a recompute): an edited claim may make the checker reject
/// the decisions, which the CLI reports as an error; what must never happen is a panic.
pub fn plan_load(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(plan) = Plan::from_json(text) else {
        return;
    };
    let Ok(g) = ebb_passes::plan::verify_plan(&plan) else {
        return;
    };
    for b in g.scope.representative_bindings(2) {
        let Ok((_, peak)) = plan.best_variant(&b) else {
            continue;
        };
        for budget in [None, Some(peak / 2 + 1)] {
            let opts = FinalizeOptions {
                budget,
                ..FinalizeOptions::default()
            };
            let Ok(c) = finalize(&plan, &b, &opts) else {
                continue;
            };
            let _ = pipeline::prove_at(&plan, &g, &b, &c);
        }
    }
}

/// An ONNX `dim_param` (`batch`, `2*seq+1`, ...).
pub fn dim_param(data: &[u8]) {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = onnx::dims::parse_dim_param(s);
    }
}

/// An `.npz` archive as `ebb run --inputs file.npz` reads it: every array.
pub fn npz(data: &[u8]) {
    let Ok(mut z) = ebb_runtime::npz::Npz::from_reader(Cursor::new(data), "fuzz.npz") else {
        return;
    };
    for name in z.names() {
        let _ = z.get(&name);
    }
}

/// The CLI's `--bind`, `--budget` and `--max-host-memory` parsers on one string.
pub fn cli_args(data: &[u8]) {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = pipeline::parse_bindings(s);
        let _ = pipeline::parse_budget(s);
        let _ = pipeline::parse_bytes(s);
    }
}

/// The seed corpus of target `name` from the repository's fixtures (small ones: the fuzzer
/// mutates them, and each run should take milliseconds). Empty for an unknown name.
pub fn seeds(name: &str) -> Vec<Vec<u8>> {
    let jax = |f: &str| std::fs::read(crate::jax_fixture(f)).unwrap_or_default();
    let onnx_file = |f: &str| std::fs::read(crate::onnx_fixture(f)).unwrap_or_default();
    let strings = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect();
    match name {
        "stablehlo_text" => vec![jax("mlp_sgd"), jax("mlp_bf16"), jax("cnn_sgd")],
        "onnx_proto" => vec![
            onnx_file("ort_mlp_training"),
            onnx_file("ort_mlp_optimizer"),
            onnx_file("torch_mlp_sgd"),
        ],
        "ir_text" => ["mlp_sgd", "cnn_sgd"]
            .iter()
            .map(|f| ebb_ir::text::print(&crate::import_fixture(f)).into_bytes())
            .collect(),
        "plan_load" => ["mlp_sgd", "cnn_sgd"]
            .iter()
            .map(|f| {
                let g = crate::import_fixture(f);
                pipeline::compile(g, &pipeline::CompileOptions::default())
                    .map(|c| c.plan.to_json().into_bytes())
                    .unwrap_or_default()
            })
            .collect(),
        "dim_param" => strings(&[
            "batch",
            "B",
            "2*S",
            "S*B+1",
            "seq_len - 1",
            "floor(S/2)",
            "(B*S)//4",
            "batch_size",
            "unk__12",
        ]),
        "npz" => ["mlp_sgd.ref0.npz", "mlp_bf16.ref1.npz"]
            .iter()
            .map(|f| std::fs::read(crate::jax_fixtures_dir().join(f)).unwrap_or_default())
            .collect(),
        "cli_args" => strings(&[
            "B=4,S=128",
            "B=8",
            "50%",
            "50%scheduled",
            "2GiB",
            "1.5GB",
            "40000",
            "512MiB",
        ]),
        _ => Vec::new(),
    }
    .into_iter()
    .filter(|s: &Vec<u8>| !s.is_empty())
    .collect()
}
