//! `ebb._ebb`: the extension module behind the `ebb` Python package (python/ebb). The Python
//! layer converts numpy arrays and JSON; this module holds the plan, the runtime and the
//! packing oracle and maps Ebb's errors to typed exceptions:
//!
//! - `EbbError` (base): everything else;
//! - `ImportFailed`: a model that does not import (file, op, location);
//! - `PlanError`: a plan file that does not read or verify against its embedded graph;
//! - `ShapeError`: bindings that name unknown symbols or violate a fact or shape assertion;
//! - `InfeasibleBudget`: a budget below the smallest feasible one, which the exception carries
//!   as `smallest_feasible_bytes` (`None` when a sequence does not fit within the added-time
//!   cap of `pack`);
//! - `DeviceUnavailable`: an executor whose device cannot be used here (no NVIDIA driver, no
//!   GPU), with the cause;
//! - `ValueError` (Python's): an unknown device or profile name, listing the choices.
//!
//! Step inputs and outputs cross through DLPack ([`dlpack`]).

mod dlpack;

use anyhow::{Context, Result};
use ebb_ir::{Bindings, Graph, Symbol};
use ebb_pipeline::size::{self, Budget};
use ebb_pipeline::{self as pipeline, CompileOptions, Kinds, Pricing};
use ebb_plan::device::DeviceProfile;
use ebb_plan::finalize::FinalizeError;
use ebb_plan::format::Plan;
use ebb_plan::pack::{PackError, PackOptions};
use ebb_runtime::raw::{from_raw, numpy_name};
use ebb_runtime::{Executor, Runtime, StepInput};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::collections::BTreeMap;
use std::path::PathBuf;

create_exception!(ebb, EbbError, PyException, "An error from Ebb.");
create_exception!(
    ebb,
    ImportFailed,
    EbbError,
    "A model that Ebb cannot import."
);
create_exception!(
    ebb,
    PlanError,
    EbbError,
    "A plan that does not read or verify."
);
create_exception!(
    ebb,
    ShapeError,
    EbbError,
    "Bindings the plan does not accept."
);
create_exception!(
    ebb,
    DeviceUnavailable,
    EbbError,
    "An executor whose device cannot be used (no NVIDIA driver, no GPU), with the cause."
);
create_exception!(
    ebb,
    InfeasibleBudget,
    EbbError,
    "A budget below the smallest feasible one (`smallest_feasible_bytes`)."
);

/// The Python exception for `e`, by the first typed error in its chain.
fn py_err(e: anyhow::Error) -> PyErr {
    let msg = format!("{e:#}");
    Python::attach(|py| {
        for cause in e.chain() {
            // `RuntimeError::Finalize` is transparent: its source is not the FinalizeError.
            let finalize = cause.downcast_ref::<FinalizeError>().or_else(|| {
                match cause.downcast_ref::<ebb_runtime::RuntimeError>() {
                    Some(ebb_runtime::RuntimeError::Finalize(f)) => Some(f),
                    _ => None,
                }
            });
            if let Some(f) = finalize {
                return match f {
                    FinalizeError::Infeasible { smallest, .. } => {
                        let err = InfeasibleBudget::new_err(msg.clone());
                        let _ = err.value(py).setattr("smallest_feasible_bytes", *smallest);
                        err
                    }
                    FinalizeError::Fact(_) | FinalizeError::Assertion { .. } => {
                        ShapeError::new_err(msg.clone())
                    }
                    FinalizeError::Eval { .. } => EbbError::new_err(msg.clone()),
                };
            }
            if let Some(p) = cause.downcast_ref::<PackError>() {
                return match p {
                    PackError::DoesNotFit { .. } => {
                        let err = InfeasibleBudget::new_err(msg.clone());
                        let _ = err.value(py).setattr("smallest_feasible_bytes", py.None());
                        err
                    }
                    PackError::TooLong { .. } | PackError::Symbol(_) => {
                        ShapeError::new_err(msg.clone())
                    }
                    _ => EbbError::new_err(msg.clone()),
                };
            }
            if let Some(ebb_runtime::RuntimeError::Device(
                ebb_runtime::exec::device::DeviceError::Unavailable(_),
            )) = cause.downcast_ref::<ebb_runtime::RuntimeError>()
            {
                return DeviceUnavailable::new_err(msg.clone());
            }
            if cause.is::<ebb_ir::dim::BindingsError>() {
                return ShapeError::new_err(msg.clone());
            }
            if cause.is::<ebb_passes::plan::PlanVerifyError>() {
                return PlanError::new_err(msg.clone());
            }
            if cause.is::<ebb_import::stablehlo::ImportError>()
                || cause.is::<ebb_import::onnx::OnnxError>()
            {
                return ImportFailed::new_err(msg.clone());
            }
        }
        EbbError::new_err(msg)
    })
}

fn bindings(b: &BTreeMap<String, i64>) -> Bindings {
    b.iter().map(|(k, v)| (Symbol::new(k), *v)).collect()
}

/// A budget: bytes (int) or text (`40GiB`, `50%` of the program-order peak,
/// `50%scheduled`).
#[derive(FromPyObject)]
enum BudgetArg {
    Bytes(i64),
    Text(String),
}

impl BudgetArg {
    fn budget(&self) -> Result<Budget> {
        Ok(match self {
            BudgetArg::Bytes(b) => Budget::Bytes(*b),
            BudgetArg::Text(t) => size::parse_budget(t).with_context(|| format!("budget `{t}`"))?,
        })
    }

    fn bytes(&self) -> Result<i64> {
        match self.budget()? {
            Budget::Bytes(b) => Ok(b),
            _ => anyhow::bail!("this budget must be bytes (an int, or `40GiB`), not a percentage"),
        }
    }
}

fn kinds(name: &str) -> Result<Kinds> {
    name.parse().map_err(|e| anyhow::anyhow!("kinds: {e}"))
}

/// A compiled symbolic plan with its embedded graph (see `ebb.Plan`).
#[pyclass(module = "ebb._ebb", name = "Plan", frozen)]
struct PyPlan {
    plan: Plan,
    graph: Graph,
}

impl PyPlan {
    fn pricing(&self, device: Option<&str>, kinds_name: &str) -> Result<Pricing> {
        Pricing::resolve(device, kinds(kinds_name)?, &self.plan)
    }

    fn checked(&self, b: &BTreeMap<String, i64>) -> Result<Bindings> {
        let b = bindings(b);
        pipeline::check_plan_bindings(&self.plan, &b)?;
        Ok(b)
    }
}

#[pymethods]
impl PyPlan {
    /// Imports a model file (`.mlir` StableHLO generic form, `.onnx`) and compiles it.
    #[staticmethod]
    #[pyo3(signature = (path, device=None, fusion=true, donate="auto", unroll=true))]
    fn compile_file(
        py: Python<'_>,
        path: PathBuf,
        device: Option<String>,
        fusion: bool,
        donate: &str,
        unroll: bool,
    ) -> PyResult<PyPlan> {
        let donate = donate.to_string();
        py.detach(move || -> Result<PyPlan> {
            let opts = CompileOptions::builder()
                .fusion(fusion)
                .donate(donate.parse().map_err(|e| anyhow::anyhow!("donate: {e}"))?)
                .unroll(unroll)
                .device(
                    device
                        .as_deref()
                        .map(pipeline::resolve_device)
                        .transpose()?,
                )
                .build();
            let (g, _) = ebb_import::import_file(&path, None)?;
            let compiled = pipeline::compile(g, &opts)?;
            Ok(PyPlan {
                plan: compiled.plan,
                graph: compiled.graph,
            })
        })
        .map_err(py_err)
    }

    /// Reads a plan file written by `ebb compile` or `Plan.save`, verified against its graph.
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<PyPlan> {
        py.detach(move || -> Result<PyPlan> {
            let (plan, graph) = ebb_pipeline::api::read_plan_and_graph(&path)?;
            Ok(PyPlan { plan, graph })
        })
        .map_err(py_err)
    }

    /// Writes the plan as JSON (atomically: a temporary file renamed over `path`).
    fn save(&self, path: PathBuf) -> PyResult<()> {
        ebb_pipeline::output::write_file(&path, self.plan.to_json().as_bytes())
            .map_err(|e| py_err(e.into()))
    }

    /// Names of the symbolic dimensions.
    #[getter]
    fn symbols(&self) -> Vec<String> {
        self.plan
            .symbols
            .symbols()
            .iter()
            .map(|s| s.name().to_string())
            .collect()
    }

    /// The device profile recorded at compile time, if any.
    #[getter]
    fn device(&self) -> Option<String> {
        self.plan.device.as_ref().map(|d| d.name.to_string())
    }

    /// Peak bytes of the plan's schedule at the bindings, without decisions.
    fn peak_bytes(&self, bind: BTreeMap<String, i64>) -> PyResult<i64> {
        (|| -> Result<i64> {
            let b = self.checked(&bind)?;
            Ok(self.plan.best_variant(&b)?.1)
        })()
        .map_err(py_err)
    }

    /// Peak bytes executing the graph in program order at the bindings.
    fn program_order_peak_bytes(&self, bind: BTreeMap<String, i64>) -> PyResult<i64> {
        (|| -> Result<i64> {
            let b = self.checked(&bind)?;
            let order = ebb_passes::memory::program_order(&self.graph);
            Ok(ebb_passes::memory::liveness(&self.graph, &order)
                .peak(&b)?
                .0)
        })()
        .map_err(py_err)
    }

    /// Lower bound on any schedule's peak at the bindings: persistent bytes plus the
    /// largest single op's operands and results.
    fn lower_bound_bytes(&self, bind: BTreeMap<String, i64>) -> PyResult<i64> {
        (|| -> Result<i64> {
            let b = self.checked(&bind)?;
            Ok(ebb_passes::memory::lower_bound(&self.graph, &b)?)
        })()
        .map_err(py_err)
    }

    /// The `ebb plan --json` report at the bindings (finalized under `budget`, its decisions
    /// proven by the plan checker), as JSON text.
    #[pyo3(signature = (bind, budget=None, device=None, kinds="both"))]
    fn finalize_json(
        &self,
        py: Python<'_>,
        bind: BTreeMap<String, i64>,
        budget: Option<BudgetArg>,
        device: Option<String>,
        kinds: &str,
    ) -> PyResult<String> {
        let pricing = self.pricing(device.as_deref(), kinds).map_err(py_err)?;
        let budget = budget
            .as_ref()
            .map(BudgetArg::budget)
            .transpose()
            .map_err(py_err)?;
        py.detach(|| -> Result<String> {
            let b = self.checked(&bind)?;
            let (report, _) =
                pipeline::plan_report_proven_on(&self.plan, &self.graph, &b, budget, &pricing)?;
            Ok(serde_json::to_string(&report)?)
        })
        .map_err(py_err)
    }

    /// The budget curve at the bindings (`ebb plan --budget-curve N --json`'s report), as
    /// JSON text.
    #[pyo3(signature = (bind, points=pipeline::DEFAULT_CURVE_POINTS, device=None, kinds="both"))]
    fn budget_curve_json(
        &self,
        py: Python<'_>,
        bind: BTreeMap<String, i64>,
        points: usize,
        device: Option<String>,
        kinds: &str,
    ) -> PyResult<String> {
        let pricing = self.pricing(device.as_deref(), kinds).map_err(py_err)?;
        py.detach(|| -> Result<String> {
            let b = self.checked(&bind)?;
            let curve = pipeline::budget_curve(&self.plan, &self.graph, &b, &pricing, points)?;
            Ok(serde_json::to_string(&curve)?)
        })
        .map_err(py_err)
    }

    /// Packs sequence lengths into batches that fit `budget` (`ebb pack --json`'s report).
    #[pyo3(signature = (lengths, budget, device=None, kinds="both", max_added=0.1,
        bucket_width=64, batch_symbol="B", seq_symbol="S", fixed=None))]
    #[allow(clippy::too_many_arguments)]
    fn pack_json(
        &self,
        py: Python<'_>,
        lengths: Vec<i64>,
        budget: BudgetArg,
        device: Option<String>,
        kinds: &str,
        max_added: f64,
        bucket_width: i64,
        batch_symbol: &str,
        seq_symbol: &str,
        fixed: Option<BTreeMap<String, i64>>,
    ) -> PyResult<String> {
        let pricing = self.pricing(device.as_deref(), kinds).map_err(py_err)?;
        let opts = PackOptions {
            batch_symbol: Symbol::new(batch_symbol),
            seq_symbol: Symbol::new(seq_symbol),
            fixed: fixed.as_ref().map(bindings).unwrap_or_default(),
            budget: budget.bytes().map_err(py_err)?,
            device: pricing.device,
            kinds: pricing.kinds,
            max_added_fraction: max_added,
            bucket_width,
        };
        if !(max_added.is_finite() && max_added >= 0.0) || bucket_width < 1 {
            return Err(py_err(anyhow::anyhow!(
                "max_added must be a fraction >= 0 and bucket_width positive"
            )));
        }
        py.detach(|| -> Result<String> {
            let r = ebb_plan::pack::pack(&self.plan, &lengths, &opts)?;
            Ok(serde_json::to_string(&r)?)
        })
        .map_err(py_err)
    }

    /// Element type (numpy name) and shape of every graph input at the bindings, in the
    /// order `Runtime.step` takes them, with their names.
    fn input_specs(
        &self,
        bind: BTreeMap<String, i64>,
    ) -> PyResult<Vec<(String, String, Vec<usize>)>> {
        (|| -> Result<_> {
            let b = self.checked(&bind)?;
            let g = &self.graph;
            (0..g.inputs().len())
                .map(|i| {
                    let (d, shape) =
                        ebb_runtime::inputs::input_shape(g, i, &b).map_err(anyhow::Error::msg)?;
                    Ok((
                        g.input_name(g.inputs()[i]).to_string(),
                        numpy_name(d).to_string(),
                        shape,
                    ))
                })
                .collect()
        })()
        .map_err(py_err)
    }
}

/// A tensor crossing the boundary as raw bytes (little-endian, C order), numpy dtype name,
/// shape: the fallback for numpy arrays DLPack cannot carry (ml_dtypes' bfloat16).
type RawTensor = (Vec<u8>, String, Vec<usize>);

/// The executor and the pricing of `ebb.Runtime(device=..., profile=...)`: `device` names the
/// executor (`cpu`, `simt`, `cuda`, `reference`; default `cpu`) or, as before executors were
/// selectable, a device profile (CPU executor priced on it). Decisions are priced on
/// `profile` if given, else the profile `device` names (`cpu` prices on the measured `cpu`
/// profile), else the plan's recorded profile, else `h100-sxm-pcie5` for `simt`/`cuda` and
/// the measured `cpu` for the CPU executors.
///
/// # Errors
/// `ValueError` for an unknown device or profile name, listing the choices.
fn runtime_target(
    plan: &Plan,
    device: Option<&str>,
    profile: Option<&str>,
    kinds_name: &str,
) -> PyResult<(Executor, Pricing)> {
    let value_err = |e: anyhow::Error| PyValueError::new_err(format!("{e:#}"));
    let named_profile = |name: &str| {
        ebb_runtime::device::resolve(name).map_err(|e| {
            PyValueError::new_err(format!(
                "{e}; `device` is an executor ({}) or a device profile",
                Executor::NAMES.join(", ")
            ))
        })
    };
    let (executor, implied) = match device {
        None => (Executor::Jit, None),
        Some(name) => match Executor::from_name(name) {
            Some(e) => (e, (name == "cpu").then(ebb_runtime::device::cpu)),
            None => (Executor::Jit, Some(named_profile(name)?)),
        },
    };
    let device_profile = match (profile, implied, &plan.device) {
        (Some(p), _, _) => ebb_runtime::device::resolve(p)
            .map_err(|e| PyValueError::new_err(format!("profile: {e}")))?,
        (None, Some(p), _) => p,
        (None, None, Some(p)) => p.clone(),
        (None, None, None) if executor.is_device() => DeviceProfile::h100_sxm_pcie5(),
        (None, None, None) => ebb_runtime::device::cpu(),
    };
    Ok((
        executor,
        Pricing {
            device: device_profile,
            kinds: kinds(kinds_name).map_err(value_err)?.decision_kinds(),
        },
    ))
}

/// The step under a budget on one executor (see `ebb.Runtime`). Usable from any Python
/// thread: the runtime sits behind a mutex, waited for and held with the GIL released, so
/// steps from several threads run one after another while other Python code goes on.
/// A [`PyRuntime`]'s mutable part.
struct RuntimeState {
    /// The runtime.
    rt: Runtime,
    /// Its budget at each shape (a fractional one resolved per shape, once).
    budget: pipeline::StepBudget,
}

#[pyclass(module = "ebb._ebb", name = "Runtime", frozen)]
struct PyRuntime {
    /// The runtime and the budget bytes resolved per shape, behind one lock.
    inner: std::sync::Mutex<RuntimeState>,
    /// The executor.
    executor: Executor,
    /// The CUDA executor's compute stream and device ordinal (device inputs are ordered
    /// before it); `None` for the others.
    cuda: dlpack::CudaTarget,
}

#[pymethods]
impl PyRuntime {
    #[new]
    #[pyo3(signature = (plan, budget=None, device=None, kinds="both", profile=None))]
    fn new(
        py: Python<'_>,
        plan: &PyPlan,
        budget: Option<BudgetArg>,
        device: Option<String>,
        kinds: &str,
        profile: Option<String>,
    ) -> PyResult<PyRuntime> {
        let (executor, pricing) =
            runtime_target(&plan.plan, device.as_deref(), profile.as_deref(), kinds)?;
        let budget = budget
            .as_ref()
            .map(BudgetArg::budget)
            .transpose()
            .map_err(py_err)?;
        let budget = pipeline::StepBudget::new(budget);
        let bytes = budget.fixed_bytes();
        let p = plan.plan.clone();
        let (rt, cuda) = py
            .detach(move || -> Result<_> {
                let mut rt = Runtime::with_options(p, pricing.finalize_options(bytes, true), 64)?;
                rt.set_executor(executor);
                // A missing driver or GPU is an error now, not at the first step.
                rt.open_device()?;
                let cuda = if executor == Executor::Cuda {
                    rt.device_stream()?
                } else {
                    None
                };
                Ok((rt, cuda))
            })
            .map_err(py_err)?;
        Ok(PyRuntime {
            inner: std::sync::Mutex::new(RuntimeState { rt, budget }),
            executor,
            cuda,
        })
    }

    /// How many finalizes at new shapes took the plan atlas's fast path.
    #[getter]
    fn atlas_hits(&self, py: Python<'_>) -> PyResult<usize> {
        py.detach(|| {
            self.inner
                .lock()
                .map(|s| s.rt.atlas_hits())
                .map_err(|_| py_err(anyhow::anyhow!("an earlier step of this Runtime failed")))
        })
    }

    /// The executor's name (`cpu`, `reference`, `simt`, `cuda`).
    #[getter]
    fn executor(&self) -> &'static str {
        match self.executor {
            Executor::Jit => "cpu",
            Executor::Reference => "reference",
            Executor::Simt => "simt",
            Executor::Cuda => "cuda",
        }
    }

    /// Prepares a plan atlas from full finalizes at `samples` (see
    /// `ebb.Runtime.prepare_atlas`); the number of entries. Under a fractional budget each
    /// sample is finalized under its own resolved bytes and the atlas is keyed by the
    /// budget's share of the peak ([`Runtime::prepare_atlas_relative`]).
    fn prepare_atlas(
        &self,
        py: Python<'_>,
        samples: Vec<BTreeMap<String, i64>>,
    ) -> PyResult<usize> {
        py.detach(|| -> Result<usize> {
            let state = self.inner.lock().map_err(|_| {
                anyhow::anyhow!(
                    "an earlier step of this Runtime failed with a panic; create a new Runtime"
                )
            })?;
            let samples: Vec<Bindings> = samples.iter().map(bindings).collect();
            state.budget.prepare_atlas(&state.rt, &samples)
        })
        .map_err(py_err)
    }

    /// Runs one step: inputs in graph input order, each a DLPack producer or a raw
    /// `(bytes, dtype, shape)` tuple; returns the outputs as DLPack tensors (on the CUDA
    /// device for the CUDA executor, else on the host) and the step report as JSON text.
    fn step<'py>(
        &self,
        py: Python<'py>,
        bind: BTreeMap<String, i64>,
        inputs: Vec<Bound<'py, PyAny>>,
    ) -> PyResult<(Vec<dlpack::PyTensor>, String)> {
        let mut tensors = Vec::with_capacity(inputs.len());
        let mut keep = Vec::new();
        for (i, x) in inputs.iter().enumerate() {
            if dlpack::is_producer(x) {
                let imported = dlpack::import(x, i, self.cuda)?;
                tensors.push(imported.input);
                keep.extend(imported.keep);
            } else if x.is_instance_of::<PyTuple>() {
                let (data, dtype, shape): RawTensor = x.extract()?;
                let t = from_raw(data, &dtype, shape)
                    .map_err(|e| py_err(anyhow::anyhow!("input {i}: {e}")))?;
                tensors.push(StepInput::Host(t));
            } else {
                return Err(py_err(anyhow::anyhow!(
                    "input {i} is a {}, not a DLPack tensor",
                    x.get_type().name()?
                )));
            }
        }
        let on_device = self.executor == Executor::Cuda;
        let result = py.detach(|| -> Result<_> {
            let mut state = self.inner.lock().map_err(|_| {
                anyhow::anyhow!(
                    "an earlier step of this Runtime failed with a panic; create a new Runtime"
                )
            })?;
            let RuntimeState { rt, budget } = &mut *state;
            let b = bindings(&bind);
            rt.plan().symbols.check_known(&b)?;
            budget.apply(rt, &b)?;
            let out = rt.step_io(&b, tensors, on_device)?;
            let report = serde_json::to_string(&out.report)?;
            Ok((out.outputs, report))
        });
        // The producers' tensors are released with the GIL held.
        drop(keep);
        let (outputs, report) = result.map_err(py_err)?;
        let outputs = outputs.into_iter().map(dlpack::PyTensor::new).collect();
        Ok((outputs, report))
    }
}

#[pymodule]
fn _ebb(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyPlan>()?;
    m.add_class::<PyRuntime>()?;
    m.add_class::<dlpack::PyTensor>()?;
    m.add("EbbError", py.get_type::<EbbError>())?;
    m.add("ImportFailed", py.get_type::<ImportFailed>())?;
    m.add("PlanError", py.get_type::<PlanError>())?;
    m.add("ShapeError", py.get_type::<ShapeError>())?;
    m.add("InfeasibleBudget", py.get_type::<InfeasibleBudget>())?;
    m.add("DeviceUnavailable", py.get_type::<DeviceUnavailable>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
