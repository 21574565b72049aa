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
    ("py_step", py_step),
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

/// The Python extension's step boundary (`ebb.Runtime.step` through `ebb._ebb`): raw input
/// tensors as `(bytes, numpy dtype name, shape)` converted by [`ebb_runtime::raw::from_raw`]
/// and stepped by a runtime of `mlp_sgd` at `B` from the first byte (0 to 15). Each input's
/// dtype name, shape and bytes come from the data: a byte selects the dtype (the right one,
/// another, or a name numpy has and Ebb lacks), another bends the shape, and the data's bytes
/// fill the tensor (cut short or padded by a third byte).
pub fn py_step(data: &[u8]) {
    use ebb_runtime::raw::{from_raw, numpy_name};
    use std::sync::{Mutex, OnceLock};
    static RT: OnceLock<Option<Mutex<ebb_runtime::Runtime>>> = OnceLock::new();
    let rt = RT.get_or_init(|| {
        let g = crate::import_fixture("mlp_sgd");
        let plan = pipeline::compile(g, &pipeline::CompileOptions::default())
            .ok()?
            .plan;
        ebb_runtime::Runtime::new(plan, None).ok().map(Mutex::new)
    });
    let (Some(rt), Some((&b, mut rest))) = (rt, data.split_first()) else {
        return;
    };
    let Ok(mut rt) = rt.lock() else {
        return;
    };
    let bind = ebb_ir::BindingsExt::from_pairs(&[("B", i64::from(b % 16))]);
    let mut inputs = Vec::new();
    for i in 0..rt.graph().inputs().len() {
        let Ok((dtype, mut shape)) = ebb_runtime::inputs::input_shape(rt.graph(), i, &bind) else {
            return;
        };
        let [pick, bend, fill, tail @ ..] = rest else {
            return;
        };
        rest = tail;
        let name = match pick % 8 {
            0..=4 => numpy_name(dtype),
            5 => numpy_name(ebb_ir::DType::ALL[usize::from(*pick) % ebb_ir::DType::ALL.len()]),
            6 => "complex64",
            _ => "",
        };
        match bend % 8 {
            0 if !shape.is_empty() => shape[0] += 1,
            1 => shape.push(1),
            2 => {
                shape.pop();
            }
            3 if !shape.is_empty() => shape[0] = usize::MAX / 2,
            _ => {}
        }
        let n: usize = shape.iter().fold(1usize, |a, &d| a.saturating_mul(d));
        let want = n.saturating_mul(dtype.size_bytes() as usize).min(1 << 20);
        let len = match fill % 4 {
            0 => want.saturating_sub(1),
            1 => want + 1,
            _ => want,
        };
        let bytes: Vec<u8> = rest.iter().copied().cycle().take(len).collect();
        match from_raw(bytes, name, shape) {
            Ok(t) => inputs.push(t),
            Err(_) => return,
        }
    }
    let _ = rt.step(&bind, inputs);
}

/// The seed corpus of target `name` from the repository's fixtures (small ones: the fuzzer
/// mutates them, and each run should take milliseconds). Empty for an unknown name.
pub fn seeds(name: &str) -> Vec<Vec<u8>> {
    let jax = |f: &str| std::fs::read(crate::jax_fixture(f)).unwrap_or_default();
    let onnx_file = |f: &str| std::fs::read(crate::onnx_fixture(f)).unwrap_or_default();
    let strings = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect();
    match name {
        "stablehlo_text" => vec![
            jax("mlp_sgd"),
            jax("mlp_bf16"),
            jax("cnn_sgd"),
            crate::nested_case_module(ebb_ir::graph::MAX_IMPORT_REGION_DEPTH).into_bytes(),
            crate::nested_case_module(ebb_ir::graph::MAX_IMPORT_REGION_DEPTH + 1).into_bytes(),
        ],
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
        "py_step" => vec![
            [8u8, 0, 4, 2].repeat(8),
            [4u8, 1, 0, 7, 5, 3, 1].repeat(6),
            [0u8, 6, 3, 0].repeat(8),
        ],
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
