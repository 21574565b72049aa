//! The embedding API's compile half: a trainer calls [`Compiler::compile_file`] once and hands
//! the [`Plan`] to `ebb_runtime::Runtime`, whose `step` runs every batch.
//!
//! ```no_run
//! use ebb_pipeline::api::Compiler;
//! use ebb_runtime::{inputs::random_inputs, Runtime};
//! let plan = Compiler::default().compile_file("tests/fixtures/jax/gpt2_tiny_adamw.mlir".as_ref())?;
//! let mut rt = Runtime::new(plan, Some(64 << 20))?; // 64 MiB device budget
//! let b = ebb_pipeline::parse_bindings("B=8,S=128")?;
//! let inputs = random_inputs(rt.graph(), &b, 0).map_err(anyhow::Error::msg)?;
//! let out = rt.step(&b, inputs)?;
//! println!("peak {} bytes, finalize {:.0} us", out.report.measured_peak_bytes, out.report.finalize_us);
//! # Ok::<(), anyhow::Error>(())
//! ```

use crate::{self as pipeline, CompileOptions, Compiled};
use anyhow::Result;
use ebb_import::{self as frontend, Format};
use ebb_ir::Graph;
use ebb_plan::format::Plan;
use std::path::Path;

/// Compiles training steps into symbolic memory plans (see [`pipeline::compile`]).
#[derive(Clone, Debug, Default)]
pub struct Compiler {
    /// Pipeline options (bindings for a precise plan, rewrites, sweep, variants).
    pub options: CompileOptions,
}

impl Compiler {
    /// A compiler with `options`.
    pub fn new(options: CompileOptions) -> Compiler {
        Compiler { options }
    }

    /// Imports `path` (`.mlir` StableHLO or `.onnx`) and compiles it into a plan that embeds
    /// its graph.
    ///
    /// # Errors
    /// Import errors (file, location, op) and pipeline errors.
    pub fn compile_file(&self, path: &Path) -> Result<Plan> {
        let (g, _) = frontend::import_file(path, None)?;
        Ok(self.compile(g)?.plan)
    }

    /// Compiles an imported graph.
    ///
    /// # Errors
    /// Pipeline errors (a pass breaking the graph, a scheduling failure).
    pub fn compile(&self, graph: Graph) -> Result<Compiled> {
        pipeline::compile(graph, &self.options)
    }
}

/// Reads a plan file written by `ebb compile`, or imports and compiles a model file (`.mlir`,
/// `.onnx`, or any file with `format`) with `options`.
///
/// # Errors
/// Unreadable or invalid plan JSON (with the path), and import/compile errors.
pub fn load_or_compile(
    path: &Path,
    format: Option<Format>,
    options: &CompileOptions,
) -> Result<Plan> {
    load_or_compile_with(path, format, None, options)
}

/// [`load_or_compile`], importing an ONNX Runtime optimizer model with the sequence elements
/// of the training model `params_from` ([`frontend::import_file_with`]).
///
/// # Errors
/// As [`load_or_compile`]; `params_from` with a model that is not ONNX, or an unreadable
/// training model.
pub fn load_or_compile_with(
    path: &Path,
    format: Option<Format>,
    params_from: Option<&Path>,
    options: &CompileOptions,
) -> Result<Plan> {
    if frontend::is_model_file(path, format) {
        let (g, _) = frontend::import_file_with(path, format, params_from)?;
        return Ok(pipeline::compile(g, options)?.plan);
    }
    read_plan(path)
}

/// [`load_or_compile_with`], with the plan's graph: the one a plan file's verification parsed
/// ([`read_plan_and_graph`]), or the compiled plan's embedded graph ([`pipeline::plan_graph`]),
/// so that a caller reporting on the plan does not parse it again. A plan read from a binary
/// file has no `graph_ir` (the graph is returned instead).
///
/// # Errors
/// As [`load_or_compile_with`].
pub fn load_or_compile_graph_with(
    path: &Path,
    format: Option<Format>,
    params_from: Option<&Path>,
    options: &CompileOptions,
) -> Result<(Plan, Graph)> {
    if frontend::is_model_file(path, format) {
        let (g, _) = frontend::import_file_with(path, format, params_from)?;
        let plan = pipeline::compile(g, options)?.plan;
        let g = pipeline::plan_graph(&plan)?;
        return Ok((plan, g));
    }
    // The caller has the graph: a binary plan's text is not printed for it.
    crate::plan_file::read_plan_file(path, false)
}

/// [`load_or_compile_graph_with`] for a report at bindings (`ebb plan`): a stamped binary plan
/// file loads with its fusion regions elided ([`crate::plan_file::read_plan_file_for_report`]);
/// the graph serves [`crate::plan_report_proven_on`] and nothing that prints, verifies or
/// executes it.
///
/// # Errors
/// As [`load_or_compile_with`].
pub fn load_or_compile_for_report(
    path: &Path,
    format: Option<Format>,
    params_from: Option<&Path>,
    options: &CompileOptions,
) -> Result<(Plan, Graph)> {
    if frontend::is_model_file(path, format) {
        return load_or_compile_graph_with(path, format, params_from, options);
    }
    crate::plan_file::read_plan_file_for_report(path)
}

/// Reads a plan file written by `ebb compile` and verifies it against its embedded graph
/// ([`ebb_passes::plan::verify_plan`]: graph digest, symbol facts, value table, costs,
/// candidates, and the independent checker at representative bindings). The file may be JSON
/// or binary ([`crate::plan_file`]): a binary plan whose stamp matches its bytes was verified
/// so when it was written, and is only checked for structure (see [`ebb_plan::binary`]).
///
/// # Errors
/// Unreadable or invalid plan JSON or binary, or a failed verification, each with the path.
pub fn read_plan(path: &Path) -> Result<Plan> {
    Ok(read_plan_and_graph(path)?.0)
}

/// [`read_plan`], with the embedded graph its verification parsed (or, for a binary plan, the
/// graph it holds). The plan always has its graph's text in `graph_ir`.
///
/// # Errors
/// As [`read_plan`].
pub fn read_plan_and_graph(path: &Path) -> Result<(Plan, Graph)> {
    crate::plan_file::read_plan_file(path, true)
}
