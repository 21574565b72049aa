//! The runtime from C: run the step itself under a budget on an executor picked by name
//! (`cpu`, `reference`, `simt`, `cuda`), with inputs and outputs as raw tensors
//! (`EbbTensor`: address, numpy dtype name, shape). `tests/c/step.c` is a complete example.
//!
//! Memory: input tensors are read during `ebb_runtime_step` only (host inputs are copied into
//! the step's own buffers; a CUDA input of device 0 is copied device to device into its arena
//! offset, and the caller's work writing it must be complete before the call). Output
//! addresses belong to the `EbbStep` and stay valid until `ebb_step_free`; with
//! `outputs_on_device` and the `cuda` executor they are CUDA device addresses of device 0
//! (each output its own allocation holding a copy, complete when the call returns).

use crate::{guard, opt_text, text, EbbPlan};
use anyhow::{anyhow, bail, Context, Result};
use ebb_ir::DType;
use ebb_pipeline::{self as pipeline, Kinds, Pricing};
use ebb_runtime::raw::{from_native_bytes, numpy_name};
use ebb_runtime::{Executor, Runtime, RuntimeError, StepInput, StepReport, StepTensor};
use std::ffi::{c_char, c_void, CStr, CString};

/// A runtime: the plan, its budget, the finalized plans per shape, the executor.
pub struct EbbRuntime {
    rt: Runtime,
    /// Its budget at each shape.
    budget: pipeline::StepBudget,
}

/// One step's outputs and report.
pub struct EbbStep {
    outputs: Vec<StepTensor>,
    shapes: Vec<Vec<i64>>,
    report: StepReport,
}

/// Where a tensor's bytes are.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EbbMemory {
    /// Host memory.
    Host = 0,
    /// Device memory of CUDA device 0.
    Cuda = 1,
}

/// A dense row-major tensor in the machine's byte order (`bool` one byte per element).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EbbTensor {
    /// Address of element 0 (may be NULL when the tensor has no elements).
    pub data: *const c_void,
    /// Element type by its numpy name: `float32`, `float16`, `bfloat16`, `float64`, `bool`,
    /// `int8`, `int16`, `int32`, `int64`, `uint8`, `uint32`, `uint64`.
    pub dtype: *const c_char,
    /// Number of dimensions.
    pub ndim: usize,
    /// `ndim` extents, outermost first (may be NULL when `ndim` is 0).
    pub shape: *const i64,
    /// Where the bytes are.
    pub memory: EbbMemory,
}

/// Outcome of a call that returns a status.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EbbStatus {
    /// Done.
    Ok = 0,
    /// A bad argument: NULL, not UTF-8, an unknown name (the message lists the choices).
    InvalidArgument = 1,
    /// The executor's device cannot be used here (no NVIDIA driver, no GPU); the message
    /// names the cause.
    DeviceUnavailable = 2,
}

/// The NUL-terminated numpy name of `d`.
fn dtype_name(d: DType) -> &'static CStr {
    match d {
        DType::F32 => c"float32",
        DType::BF16 => c"bfloat16",
        DType::F16 => c"float16",
        DType::F64 => c"float64",
        DType::I1 => c"bool",
        DType::I8 => c"int8",
        DType::I16 => c"int16",
        DType::I32 => c"int32",
        DType::I64 => c"int64",
        DType::U8 => c"uint8",
        DType::U32 => c"uint32",
        DType::U64 => c"uint64",
    }
}

/// Input `i` as a step input.
unsafe fn input(t: &EbbTensor, i: usize) -> Result<StepInput> {
    let name = text(t.dtype, "dtype").with_context(|| format!("input {i}"))?;
    let dtype = DType::ALL
        .into_iter()
        .find(|d| numpy_name(*d) == name)
        .ok_or_else(|| anyhow!("input {i}: unknown dtype `{name}`"))?;
    let dims: &[i64] = if t.ndim == 0 {
        &[]
    } else if t.shape.is_null() {
        bail!("input {i}: shape is NULL");
    } else {
        std::slice::from_raw_parts(t.shape, t.ndim)
    };
    let shape = dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| anyhow!("input {i}: extent {d}")))
        .collect::<Result<Vec<_>>>()?;
    let bytes = shape.iter().product::<usize>() * dtype.size_bytes() as usize;
    if bytes > 0 && t.data.is_null() {
        bail!("input {i}: data is NULL");
    }
    Ok(match t.memory {
        EbbMemory::Host => {
            let data: &[u8] = if bytes == 0 {
                &[]
            } else {
                std::slice::from_raw_parts(t.data as *const u8, bytes)
            };
            StepInput::Host(
                from_native_bytes(dtype, shape, data).map_err(|e| anyhow!("input {i}: {e}"))?,
            )
        }
        EbbMemory::Cuda => StepInput::Device {
            ptr: t.data as u64,
            dtype,
            shape,
        },
    })
}

/// A runtime for `plan` under `budget_bytes` (negative: no budget), pricing decisions on
/// `profile` (NULL: the plan's device, else the measured `cpu`), on the `cpu` executor until
/// `ebb_runtime_set_executor`. NULL on error.
///
/// # Safety
/// `plan` is a live plan (it may be freed afterwards); `profile` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn ebb_runtime_new(
    plan: *const EbbPlan,
    budget_bytes: i64,
    profile: *const c_char,
) -> *mut EbbRuntime {
    guard(std::ptr::null_mut(), || {
        let budget = (budget_bytes >= 0).then_some(pipeline::Budget::Bytes(budget_bytes));
        new_runtime(plan, budget, profile)
    })
}

/// A runtime for `plan` under `budget` as `ebb run --budget` takes it: bytes (`16GiB`,
/// `1500000000`), a share of each step's program-order peak (`50%`) or of its scheduled peak
/// (`50%scheduled`), or NULL for none. A share is resolved at each new shape, once (the
/// first builds the plan's program-order liveness, about 20 ms on a 24-layer GPT; later ones
/// evaluate it), and `ebb_runtime_prepare_atlas` then keys the atlas by the share. Otherwise
/// as `ebb_runtime_new`. NULL on error (a budget that does not parse, an unknown profile).
///
/// # Safety
/// `plan` is a live plan (it may be freed afterwards); `budget` and `profile` NULL or
/// NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn ebb_runtime_new_budget(
    plan: *const EbbPlan,
    budget: *const c_char,
    profile: *const c_char,
) -> *mut EbbRuntime {
    guard(std::ptr::null_mut(), || {
        let budget = opt_text(budget, "budget")?
            .map(|t| pipeline::parse_budget(t).with_context(|| format!("budget `{t}`")))
            .transpose()?;
        new_runtime(plan, budget, profile)
    })
}

/// The runtime of `ebb_runtime_new` and `ebb_runtime_new_budget`.
unsafe fn new_runtime(
    plan: *const EbbPlan,
    budget: Option<pipeline::Budget>,
    profile: *const c_char,
) -> Result<*mut EbbRuntime> {
    let p = plan.as_ref().context("plan is NULL")?;
    let pricing = Pricing::resolve(opt_text(profile, "profile")?, Kinds::Both, &p.plan)?;
    let budget = pipeline::StepBudget::new(budget);
    let opts = pricing.finalize_options(budget.fixed_bytes(), true);
    let rt = Runtime::with_options((*p.plan).clone(), opts, 64)?;
    Ok(Box::into_raw(Box::new(EbbRuntime { rt, budget })))
}

/// Releases a runtime (NULL is ignored).
///
/// # Safety
/// `rt` came from `ebb_runtime_new` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn ebb_runtime_free(rt: *mut EbbRuntime) {
    if !rt.is_null() {
        drop(Box::from_raw(rt));
    }
}

/// Runs later steps on the executor `name`: `cpu` (generated kernels), `reference` (the
/// interpreter), `simt` (the GPU executor on a simulated device), `cuda` (CUDA device 0; the
/// NVIDIA driver and cuBLAS are loaded now). Returns `EBB_STATUS_OK`,
/// `EBB_STATUS_INVALID_ARGUMENT` for an unknown name or `EBB_STATUS_DEVICE_UNAVAILABLE` when
/// the device cannot be used (the executor is then unchanged); `ebb_last_error` says why.
///
/// # Safety
/// `rt` is a live runtime; `name` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn ebb_runtime_set_executor(
    rt: *mut EbbRuntime,
    name: *const c_char,
) -> EbbStatus {
    let mut status = EbbStatus::InvalidArgument;
    let done = guard(EbbStatus::InvalidArgument, || {
        let r = rt.as_mut().context("runtime is NULL")?;
        let name = text(name, "executor")?;
        let e = Executor::from_name(name).ok_or_else(|| {
            anyhow!(
                "unknown executor `{name}` (known: {})",
                Executor::NAMES.join(", ")
            )
        })?;
        let before = r.rt.executor();
        r.rt.set_executor(e);
        if let Err(err) = r.rt.open_device() {
            r.rt.set_executor(before);
            if matches!(err, RuntimeError::Device(_)) {
                status = EbbStatus::DeviceUnavailable;
            }
            return Err(anyhow::Error::new(err).context(format!("executor `{name}`")));
        }
        Ok(EbbStatus::Ok)
    });
    if done == EbbStatus::Ok {
        done
    } else {
        status
    }
}

/// Prepares a plan atlas for the runtime's budget and pricing from full finalizes at the
/// `n_samples` shapes `samples` (each `"B=8,S=512"`, spread over the range the trainer meets):
/// later steps at new shapes replay the nearest sample's decisions and arena layout order,
/// checked exactly (the full search where the check fails), instead of searching. Returns the
/// atlas's number of entries (0: the samples need no decisions, or the plan has several
/// schedule variants), or -1 on error (a sample that does not bind the plan's symbols;
/// `ebb_last_error` says why). Costs one full finalize per sample, during the call.
///
/// # Safety
/// `rt` is a live runtime; `samples` points at `n_samples` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn ebb_runtime_prepare_atlas(
    rt: *const EbbRuntime,
    samples: *const *const c_char,
    n_samples: usize,
) -> i64 {
    guard(-1, || {
        let r = rt.as_ref().context("runtime is NULL")?;
        let texts: &[*const c_char] = if n_samples == 0 {
            &[]
        } else if samples.is_null() {
            bail!("samples is NULL");
        } else {
            std::slice::from_raw_parts(samples, n_samples)
        };
        let samples = texts
            .iter()
            .map(|&t| pipeline::parse_bindings(text(t, "sample")?))
            .collect::<Result<Vec<_>>>()?;
        Ok(r.budget.prepare_atlas(&r.rt, &samples)? as i64)
    })
}

/// Runs one step at `bindings` (`"B=8,S=512"`) on `n_inputs` inputs in the step's input
/// order; with `outputs_on_device` and the `cuda` executor the outputs stay in device memory.
/// NULL on error (unknown symbols, an infeasible budget, inputs whose type or shape differ
/// from the plan's, a device failure). Free with `ebb_step_free`.
///
/// # Safety
/// `rt` is a live runtime, `bindings` NUL-terminated, `inputs` points at `n_inputs` tensors
/// whose memory is readable for the call: host memory is copied during the call; CUDA memory
/// (`EBB_MEMORY_CUDA`: device 0, the `cuda` executor only) is copied device to device, and
/// the work writing it must be complete before the call.
#[no_mangle]
pub unsafe extern "C" fn ebb_runtime_step(
    rt: *mut EbbRuntime,
    bindings: *const c_char,
    inputs: *const EbbTensor,
    n_inputs: usize,
    outputs_on_device: bool,
) -> *mut EbbStep {
    guard(std::ptr::null_mut(), || {
        let r = rt.as_mut().context("runtime is NULL")?;
        let b = pipeline::parse_bindings(text(bindings, "bindings")?)?;
        pipeline::check_plan_bindings(r.rt.plan(), &b)?;
        r.budget.apply(&mut r.rt, &b)?;
        let ins: &[EbbTensor] = if n_inputs == 0 {
            &[]
        } else if inputs.is_null() {
            bail!("inputs is NULL");
        } else {
            std::slice::from_raw_parts(inputs, n_inputs)
        };
        let ins = ins
            .iter()
            .enumerate()
            .map(|(i, t)| input(t, i))
            .collect::<Result<Vec<_>>>()?;
        let out = r.rt.step_io(&b, ins, outputs_on_device)?;
        let shapes = out
            .outputs
            .iter()
            .map(|t| {
                let s = match t {
                    StepTensor::Host(t) => t.shape(),
                    StepTensor::Device { shape, .. } => shape,
                };
                s.iter().map(|&d| d as i64).collect()
            })
            .collect();
        Ok(Box::into_raw(Box::new(EbbStep {
            outputs: out.outputs,
            shapes,
            report: out.report,
        })))
    })
}

/// Releases a step and its outputs (NULL is ignored).
///
/// # Safety
/// `step` came from `ebb_runtime_step` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn ebb_step_free(step: *mut EbbStep) {
    if !step.is_null() {
        drop(Box::from_raw(step));
    }
}

/// Number of outputs; 0 for NULL.
///
/// # Safety
/// `step` is NULL or a live step.
#[no_mangle]
pub unsafe extern "C" fn ebb_step_output_count(step: *const EbbStep) -> usize {
    step.as_ref().map_or(0, |s| s.outputs.len())
}

/// Writes output `i` (graph output order) to `out`: its address, dtype, shape and memory,
/// valid until `ebb_step_free`. False when out of range or an argument is NULL.
///
/// # Safety
/// `step` is NULL or a live step; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ebb_step_output(
    step: *const EbbStep,
    i: usize,
    out: *mut EbbTensor,
) -> bool {
    let (Some(s), Some(out)) = (step.as_ref(), out.as_mut()) else {
        return false;
    };
    let (Some(t), Some(shape)) = (s.outputs.get(i), s.shapes.get(i)) else {
        return false;
    };
    let (data, dtype, memory) = match t {
        StepTensor::Host(t) => (t.as_ptr() as *const c_void, t.dtype(), EbbMemory::Host),
        StepTensor::Device { buf, dtype, .. } => {
            (buf.ptr() as *const c_void, *dtype, EbbMemory::Cuda)
        }
    };
    *out = EbbTensor {
        data,
        dtype: dtype_name(dtype).as_ptr(),
        ndim: shape.len(),
        shape: shape.as_ptr(),
        memory,
    };
    true
}

/// The step's report (peaks planned and measured in bytes, decisions, times in ms and µs,
/// the executor) as JSON; NULL on error. Free with `ebb_string_free`.
///
/// # Safety
/// `step` is a live step.
#[no_mangle]
pub unsafe extern "C" fn ebb_step_report_json(step: *const EbbStep) -> *mut c_char {
    guard(std::ptr::null_mut(), || {
        let s = step.as_ref().context("step is NULL")?;
        Ok(CString::new(serde_json::to_string_pretty(&s.report)?)?.into_raw())
    })
}
