//! Tensors crossing the Python boundary through DLPack (the protocol of `__dlpack__` and
//! `__dlpack_device__`, <https://dmlc.github.io/dlpack/latest/python_spec.html>; the structs
//! and capsules are dlpark's).
//!
//! In: any producer (numpy >= 1.22, torch, JAX, CuPy). A contiguous host tensor (`kDLCPU`,
//! `kDLCUDAHost`, `kDLCUDAManaged`) aligned for its type is read in place, without a copy
//! (`ebb_runtime::raw::from_foreign`: the producer's tensor is released when the step no
//! longer needs it; a kernel that would write it — a donated input updated in place — writes a
//! copy, so the caller's memory is never written); a strided or misaligned one is gathered
//! into a copy. A CUDA tensor (`kDLCUDA`) is taken only by the CUDA executor: it must be
//! contiguous, on the executor's device, and is copied device to device into its arena
//! offset on the executor's compute stream, which is passed to the producer as DLPack's
//! `stream` so that the producer's pending writes are ordered before the copy.
//!
//! Out: [`PyTensor`] exposes `__dlpack__`/`__dlpack_device__` over memory it owns (a host
//! tensor of the step's outputs, or a CUDA allocation holding a copy of the output), so
//! `np.from_dlpack` and `torch.from_dlpack` take it without a copy (`jax.dlpack.from_dlpack`
//! too where the address is aligned as XLA requires; it copies otherwise); the memory lives until the last consumer's deleter runs, independent of the `Runtime`.

use crate::EbbError;
use dlpark::ffi::{
    DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned,
};
use dlpark::metadata::Dynamic;
use dlpark::python::consumer::stream::{self, DlpackStream, StreamArg};
use dlpark::python::{export_dlpack, DlpackExporter, ExportRequest, ImportRequest};
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use ebb_ir::DType;
use ebb_runtime::raw::numpy_name;
use ebb_runtime::{DeviceBuffer, StepInput, StepTensor, Tensor};
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use std::sync::Arc;

/// Every element type with its DLPack type code and width in bits.
const DTYPES: [(DType, DLDataTypeCode, u8); 12] = [
    (DType::F32, DLDataTypeCode::FLOAT, 32),
    (DType::F64, DLDataTypeCode::FLOAT, 64),
    (DType::F16, DLDataTypeCode::FLOAT, 16),
    (DType::BF16, DLDataTypeCode::BFLOAT, 16),
    (DType::I1, DLDataTypeCode::BOOL, 8),
    (DType::I8, DLDataTypeCode::INT, 8),
    (DType::I16, DLDataTypeCode::INT, 16),
    (DType::I32, DLDataTypeCode::INT, 32),
    (DType::I64, DLDataTypeCode::INT, 64),
    (DType::U8, DLDataTypeCode::UINT, 8),
    (DType::U32, DLDataTypeCode::UINT, 32),
    (DType::U64, DLDataTypeCode::UINT, 64),
];

/// The element type of a DLPack dtype (one lane), if Ebb has it.
fn dtype_of(t: DLDataType) -> Option<DType> {
    DTYPES
        .iter()
        .find(|&&(_, code, bits)| t.lanes == 1 && t.code == code && t.bits == bits)
        .map(|&(d, ..)| d)
}

/// The DLPack dtype of an element type.
fn dl_dtype(d: DType) -> DLDataType {
    let (code, bits) = DTYPES
        .iter()
        .find(|&&(e, ..)| e == d)
        .map_or((DLDataTypeCode::UINT, 8), |&(_, c, b)| (c, b));
    DLDataType {
        code,
        bits,
        lanes: 1,
    }
}

/// The consumer stream handed to a CUDA producer: the executor's compute stream.
struct ComputeStream(u64);

// SAFETY: the handle is a live `CUstream` of the runtime's device, which outlives the import.
unsafe impl DlpackStream for ComputeStream {
    fn as_python_arg(&self, _py: Python<'_>, _device: DLDevice) -> PyResult<StreamArg> {
        Ok(stream::cuda(self.0 as *mut std::ffi::c_void))
    }
}

/// Where the step runs, for reading its inputs: the executor's CUDA compute stream and device
/// ordinal, or `None` for an executor that takes host tensors only.
pub type CudaTarget = Option<(u64, i32)>;

/// A step input read from a DLPack producer (see the module docs); `keep` holds a device
/// input's memory until the step returns.
pub struct Imported {
    /// The input.
    pub input: StepInput,
    /// The producer's tensor, released after the step.
    pub keep: Option<Box<dyn Send>>,
}

/// `true` when `obj` is a DLPack producer.
pub fn is_producer(obj: &Bound<'_, PyAny>) -> bool {
    obj.hasattr("__dlpack__").unwrap_or(false)
}

/// Reads input `i` from the DLPack producer `obj`; see the module docs.
///
/// # Errors
/// `EbbError` for a dtype Ebb does not take, a device the executor cannot read, or a CUDA
/// tensor that is not contiguous; the producer's own exceptions pass through.
pub fn import(obj: &Bound<'_, PyAny>, i: usize, cuda: CudaTarget) -> PyResult<Imported> {
    let req = ImportRequest::new(obj.as_borrowed())?;
    let device = req.device().ok();
    let on_cuda = device.is_some_and(|d| d.device_type == DLDeviceType::CUDA);
    let stream = match (on_cuda, cuda) {
        (true, Some((s, _))) => Some(ComputeStream(s)),
        _ => None,
    };
    let imported = req.import(stream.as_ref().map(|s| s as &dyn DlpackStream), None)?;
    let t = imported
        .validate()
        .map_err(|e| EbbError::new_err(format!("input {i}: {e}")))?;
    let dtype = dtype_of(t.dtype()).ok_or_else(|| {
        EbbError::new_err(format!(
            "input {i} has DLPack dtype (code {}, {} bits, {} lanes); Ebb takes bool, \
             int8/16/32/64, uint8/32/64, float16/32/64 and bfloat16",
            t.dtype().code.0,
            t.dtype().bits,
            t.dtype().lanes
        ))
    })?;
    let shape: Vec<usize> = t.shape().iter().map(|&d| d.max(0) as usize).collect();
    let n: usize = shape.iter().product();
    let dev = t.device();
    // SAFETY: the producer's data pointer with its byte offset, valid while `imported` lives.
    let base = unsafe { (t.data_ptr() as *const u8).add(t.byte_offset() as usize) };
    let where_ = |d: DLDevice| format!("device type {} (id {})", d.device_type.0, d.device_id);
    match dev.device_type {
        DLDeviceType::CPU | DLDeviceType::CUDAHOST | DLDeviceType::CUDAMANAGED => {
            let strides = t
                .strides_or_compact()
                .map_err(|e| EbbError::new_err(format!("input {i}: {e}")))?
                .into_owned();
            if n > 0 && t.is_compact().unwrap_or(false) {
                // Read in place, the producer's tensor kept alive by the step's tensor.
                let owner: Arc<dyn Send + Sync> = Arc::new(SendImported(imported));
                // SAFETY: `n` elements of `dtype` at `base`, alive while `owner` is; the
                // runtime never writes them (a write copies first).
                let tensor = unsafe {
                    ebb_runtime::raw::from_foreign(dtype, shape.clone(), base, owner.clone())
                };
                if let Some(tensor) = tensor {
                    return Ok(Imported {
                        input: StepInput::Host(tensor),
                        keep: None,
                    });
                }
                // Misaligned, or bool bytes other than 0 and 1: copied.
                return copied(base, dtype, shape, &strides, i);
            }
            copied(base, dtype, shape, &strides, i)
        }
        DLDeviceType::CUDA => {
            let Some((_, ordinal)) = cuda else {
                return Err(EbbError::new_err(format!(
                    "input {i} is on a CUDA device; this Runtime's executor takes host \
                     tensors (make it with device=\"cuda\", or move the input to the host)"
                )));
            };
            if dev.device_id != ordinal {
                return Err(EbbError::new_err(format!(
                    "input {i} is on cuda:{}; the Runtime runs on cuda:{ordinal}",
                    dev.device_id
                )));
            }
            if !t.is_compact().unwrap_or(false) {
                return Err(EbbError::new_err(format!(
                    "input {i} is a strided CUDA tensor; pass a contiguous one \
                     (torch: x.contiguous())"
                )));
            }
            Ok(Imported {
                input: StepInput::Device {
                    ptr: base as u64,
                    dtype,
                    shape,
                },
                keep: Some(Box::new(SendImported(imported))),
            })
        }
        d => Err(EbbError::new_err(format!(
            "input {i} is on {}; Ebb reads host (kDLCPU) and CUDA tensors",
            where_(DLDevice {
                device_type: d,
                device_id: dev.device_id
            })
        ))),
    }
}

/// An imported producer tensor kept alive across the step (released, from any thread, by its
/// deleter).
struct SendImported(#[allow(dead_code)] dlpark::python::ImportedDlpack);

// SAFETY: DLPack deleters may be called from any thread (the spec requires producers to allow
// it, taking the GIL themselves where they need it); the handle is only held, never used,
// until it is dropped.
unsafe impl Send for SendImported {}
// SAFETY: as above: shared references never touch the handle.
unsafe impl Sync for SendImported {}

/// Input `i` copied out of host memory at `base` (gathered by `strides`).
fn copied(
    base: *const u8,
    dtype: DType,
    shape: Vec<usize>,
    strides: &[i64],
    i: usize,
) -> PyResult<Imported> {
    let n: usize = shape.iter().product();
    let mut bytes = vec![0u8; n * dtype.size_bytes() as usize];
    if n > 0 {
        gather(
            base,
            &shape,
            strides,
            dtype.size_bytes() as usize,
            &mut bytes,
        );
    }
    let tensor = ebb_runtime::raw::from_native_bytes(dtype, shape, &bytes)
        .map_err(|e| EbbError::new_err(format!("input {i}: {e}")))?;
    Ok(Imported {
        input: StepInput::Host(tensor),
        keep: None,
    })
}

/// Copies the `shape` tensor of `size`-byte elements at `base` with element `strides` into
/// `out` in row-major order.
fn gather(base: *const u8, shape: &[usize], strides: &[i64], size: usize, out: &mut [u8]) {
    let contiguous = {
        let mut expect = 1i64;
        shape.iter().zip(strides).rev().all(|(&d, &s)| {
            let ok = d <= 1 || s == expect;
            expect *= d as i64;
            ok
        })
    };
    if contiguous {
        // SAFETY: a contiguous tensor of `out.len()` bytes at `base`.
        unsafe { std::ptr::copy_nonoverlapping(base, out.as_mut_ptr(), out.len()) };
        return;
    }
    let mut index = vec![0usize; shape.len()];
    for chunk in out.chunks_exact_mut(size) {
        let off: i64 = index.iter().zip(strides).map(|(&i, &s)| i as i64 * s).sum();
        // SAFETY: every index is inside the shape, so the element lies in the producer's
        // tensor.
        unsafe {
            std::ptr::copy_nonoverlapping(
                base.offset((off * size as i64) as isize),
                chunk.as_mut_ptr(),
                size,
            )
        };
        for d in (0..shape.len()).rev() {
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

/// What a [`PyTensor`] holds.
enum Held {
    /// A host tensor.
    Host(Tensor),
    /// A device allocation with its type.
    Device {
        buf: Box<dyn DeviceBuffer>,
        dtype: DType,
        shape: Vec<usize>,
    },
}

impl Held {
    fn dtype(&self) -> DType {
        match self {
            Held::Host(t) => t.dtype(),
            Held::Device { dtype, .. } => *dtype,
        }
    }

    fn shape(&self) -> &[usize] {
        match self {
            Held::Host(t) => t.shape(),
            Held::Device { shape, .. } => shape,
        }
    }

    fn ptr(&self) -> *mut std::ffi::c_void {
        let p = match self {
            Held::Host(t) if t.size_bytes() > 0 => t.as_ptr() as u64,
            Held::Device { buf, .. } => buf.ptr(),
            Held::Host(_) => 0,
        };
        p as *mut std::ffi::c_void
    }

    fn device(&self) -> DLDevice {
        match self {
            Held::Host(_) => DLDevice {
                device_type: DLDeviceType::CPU,
                device_id: 0,
            },
            Held::Device { buf, .. } => DLDevice {
                device_type: DLDeviceType::CUDA,
                device_id: buf.ordinal(),
            },
        }
    }
}

/// A step output that owns its memory (host, or a CUDA allocation) and hands it out through
/// DLPack without a copy: `np.from_dlpack(t)`, `torch.from_dlpack(t)`,
/// `jax.dlpack.from_dlpack(t)` (JAX copies a host address not aligned as XLA requires). The
/// memory lives as long as this object or any tensor made
/// from it. `as_bits` views a `bfloat16` tensor as `uint16` (for numpy, which has no
/// DLPack bfloat16).
#[pyclass(module = "ebb._ebb", name = "Tensor", frozen)]
pub struct PyTensor {
    held: Arc<Held>,
    /// Exported as unsigned integers of the element's width (bfloat16 as uint16).
    bits: bool,
}

impl PyTensor {
    /// A tensor owning a step output.
    pub fn new(t: StepTensor) -> PyTensor {
        let held = match t {
            StepTensor::Host(t) => Held::Host(t),
            StepTensor::Device { buf, dtype, shape } => Held::Device { buf, dtype, shape },
        };
        PyTensor {
            held: Arc::new(held),
            bits: false,
        }
    }

    fn export_dtype(&self) -> DLDataType {
        let d = self.held.dtype();
        if self.bits && d == DType::BF16 {
            return DLDataType {
                code: DLDataTypeCode::UINT,
                bits: 16,
                lanes: 1,
            };
        }
        dl_dtype(d)
    }

    fn managed<M: ManagedTensorBase>(&self) -> PyResult<Managed<M>> {
        let shape: Vec<i64> = self.held.shape().iter().map(|&d| d as i64).collect();
        let mut init = Dynamic::compact(shape)
            .initialize_as::<M>(self.held.clone())
            .map_err(|e| PyBufferError::new_err(e.to_string()))?;
        init.set_data(self.held.ptr())
            .set_dtype(self.export_dtype())
            .set_device(self.held.device());
        // SAFETY: data, dtype, device and compact strides describe memory `held` owns, which
        // the context (a clone of the `Arc`) keeps alive until the consumer's deleter runs.
        Ok(unsafe { init.finish() })
    }
}

impl DlpackExporter for PyTensor {
    fn device(&self) -> DLDevice {
        self.held.device()
    }

    fn flags(&self) -> DlpackFlags {
        DlpackFlags::empty()
    }

    fn prepare_export(&self, _py: Python<'_>, _request: &ExportRequest<'_>) -> PyResult<()> {
        // Ready: host memory, or a device copy completed before the step returned.
        Ok(())
    }

    fn export_legacy(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensor>> {
        self.managed()
    }

    fn export_versioned(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensorVersioned>> {
        self.managed()
    }
}

#[pymethods]
impl PyTensor {
    /// The DLPack capsule of this tensor (the Python array API's `__dlpack__`).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let request = ExportRequest::parse(stream.as_ref(), max_version, dl_device, copy)?;
        export_dlpack(self, py, request)
    }

    /// `(device type, device id)`: `(1, 0)` on the host, `(2, ordinal)` on a CUDA device.
    fn __dlpack_device__(&self) -> (u32, i32) {
        let d = self.held.device();
        (d.device_type.0, d.device_id)
    }

    /// Shape, outermost first.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.held.shape().to_vec()
    }

    /// Element type (numpy's name; `bfloat16` is ml_dtypes').
    #[getter]
    fn dtype(&self) -> &'static str {
        numpy_name(self.held.dtype())
    }

    /// `cpu` or `cuda:N`.
    #[getter]
    fn device(&self) -> String {
        match &*self.held {
            Held::Host(_) => "cpu".into(),
            Held::Device { buf, .. } => format!("cuda:{}", buf.ordinal()),
        }
    }

    /// The same memory exported as unsigned integers of the element's width where DLPack
    /// consumers lack the type (`bfloat16` as `uint16`); other types unchanged.
    fn as_bits(&self) -> PyTensor {
        PyTensor {
            held: self.held.clone(),
            bits: true,
        }
    }
}
