//! The device interface: what an executor needs from an accelerator to run a finalized plan,
//! and the executor that runs one through it.
//!
//! A [`Device`] offers: two device allocations made once per step ([`Space::Arena`] of the
//! plan's `arena_bytes`, every value at its planned offset; [`Space::Scratch`] for
//! recomputed values' temporaries and kernel workspace), a pinned host pool for swapped
//! values, kernel launches ([`Launch`]), GEMMs ([`GemmCall`]), asynchronous copies
//! ([`Transfer`]) and events between streams ([`COMPUTE`] runs kernels, [`COPY`] moves swapped
//! values), plus host calls (an op without a device kernel, run on the host on its operands'
//! bytes in stream order; [`HostCall`]).
//!
//! Implementations: [`simt::Simt`] (the GPU kernels' IR on the host, streams on threads) and,
//! with the `cuda` feature, `cuda::Cuda` (cudarc's driver API and cuBLAS, loaded at run time).
//! The CPU executor ([`super::Program::run_with`]) is the host implementation of the same
//! operations called in place: one allocation of `arena_bytes` ([`crate::buffer::ArenaMemory`]),
//! a host pool of bit copies, kernels and `matrixmultiply` GEMMs on one synchronous stream.
//!
//! [`program::DeviceProgram`] lowers a [`super::Program`] with its decisions and arena layout
//! to the command sequence a device runs ([`program::Cmd`]); [`hazard::check`] proves that
//! sequence free of races between streams and of writes onto live bytes, independently of
//! any device.

pub mod hazard;
mod lower;
pub mod program;
mod region;
mod run;
pub mod simt;
mod tracker;

pub use lower::{KernelCache, Work};
pub use program::DeviceProgram;
pub use run::DeviceStats;

#[cfg(feature = "cuda")]
pub mod cuda;

use crate::error::ExecError;
use crate::tensor::Tensor;
use ebb_codegen::gpu::GpuKernel;
use ebb_ir::DType;
use std::sync::Arc;

/// A stream: commands on one stream run in issue order.
pub type Stream = usize;
/// The stream kernels, GEMMs and host calls run on.
pub const COMPUTE: Stream = 0;
/// The stream offloads and reloads run on.
pub const COPY: Stream = 1;
/// Number of streams.
pub const STREAMS: usize = 2;

/// An event: recorded on one stream, waited for by another.
pub type Event = u32;

/// A device allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Space {
    /// The plan's arena: values at their planned offsets.
    Arena,
    /// Temporaries of recomputations and kernel workspace.
    Scratch,
}

/// A device address: an offset in one of the two allocations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DevPtr {
    /// Which allocation.
    pub space: Space,
    /// Byte offset in it.
    pub offset: u64,
}

impl DevPtr {
    /// The address `bytes` further.
    pub fn add(self, bytes: u64) -> DevPtr {
        DevPtr {
            offset: self.offset + bytes,
            ..self
        }
    }
}

/// A byte range of device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevRange {
    /// First byte.
    pub ptr: DevPtr,
    /// Length in bytes.
    pub bytes: u64,
}

impl DevRange {
    /// Whether the two ranges share a byte.
    pub fn overlaps(&self, o: &DevRange) -> bool {
        self.ptr.space == o.ptr.space
            && self.bytes > 0
            && o.bytes > 0
            && self.ptr.offset < o.ptr.offset + o.bytes
            && o.ptr.offset < self.ptr.offset + self.bytes
    }
}

/// The bytes a command reads and writes (what the hazard checker compares).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// Ranges read.
    pub reads: Vec<DevRange>,
    /// Ranges written.
    pub writes: Vec<DevRange>,
}

/// An asynchronous copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transfer {
    /// Device to the pinned host pool at byte `host` (an offload).
    ToHost {
        /// Source.
        src: DevPtr,
        /// Byte offset in the host pool.
        host: u64,
    },
    /// The pinned host pool at byte `host` to the device (a reload).
    ToDevice {
        /// Byte offset in the host pool.
        host: u64,
        /// Destination.
        dst: DevPtr,
    },
    /// Device to device.
    Device {
        /// Source.
        src: DevPtr,
        /// Destination.
        dst: DevPtr,
    },
}

/// A kernel launch: `kernel` over `n` elements with its buffer addresses and parameters
/// (the ABI of [`ebb_codegen::gpu`]; `params[0] == n`).
#[derive(Clone, Debug)]
pub struct Launch {
    /// The kernel.
    pub kernel: Arc<GpuKernel>,
    /// Buffer arguments.
    pub bufs: Vec<DevPtr>,
    /// `i64` arguments.
    pub params: Vec<i64>,
}

impl Launch {
    /// Threads per block.
    pub const BLOCK: u32 = 256;
    /// Most blocks per launch (the grid-stride loop covers the rest).
    pub const MAX_GRID: u32 = 1 << 16;

    /// Blocks of the launch grid for its `n` elements.
    pub fn grid(&self) -> u32 {
        let n = u64::try_from(self.params.first().copied().unwrap_or(0)).unwrap_or(0);
        n.div_ceil(u64::from(Launch::BLOCK))
            .clamp(1, u64::from(Launch::MAX_GRID)) as u32
    }
}

/// Element type of a GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmType {
    /// `f32` in, out and accumulated (no TF32).
    F32,
}

/// `C[b] = A[b]·B[b]` for `b < batch`: `A[b]` is `m×k` at `a + b·sa` with row stride `rsa`
/// and column stride `csa` (elements), `B[b]` `k×n` likewise, `C` row-major `[batch, m, n]`
/// contiguous. One of each operand's two strides is 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GemmCall {
    /// Element type.
    pub dtype: GemmType,
    /// Batch count, rows of C, contraction length, columns of C.
    pub batch: usize,
    /// Rows of `A` and `C`.
    pub m: usize,
    /// Contraction length.
    pub k: usize,
    /// Columns of `B` and `C`.
    pub n: usize,
    /// `A`: address, elements reachable from it, row/column/batch strides.
    pub a: (DevPtr, usize, isize, isize, isize),
    /// `B`: as `a`.
    pub b: (DevPtr, usize, isize, isize, isize),
    /// `C`.
    pub c: DevPtr,
}

/// An op run on the host in stream order: its operands' bytes are read from the device, the
/// CPU kernel of step `step` computes the results, which are written at their addresses.
#[derive(Clone, Debug)]
pub struct HostCall {
    /// Program step whose kernel runs.
    pub step: usize,
    /// Operand ranges (in operand order).
    pub operands: Vec<DevRange>,
    /// Result ranges (in result order).
    pub results: Vec<DevRange>,
}

/// A step input of a device executor: a host tensor (uploaded), or a contiguous row-major
/// tensor already in the memory of the device that runs the step (a framework's CUDA tensor,
/// copied device to device into its arena offset). The caller keeps a device input's memory
/// alive and unchanged until the step returns, and orders the work that wrote it before the
/// device's compute stream ([`crate::Runtime::device_stream`]).
pub enum StepInput {
    /// A host tensor.
    Host(Tensor),
    /// Device memory.
    Device {
        /// Device address of element 0.
        ptr: u64,
        /// Element type.
        dtype: DType,
        /// Shape, outermost first.
        shape: Vec<usize>,
    },
}

/// Device memory a device handed out (a step output kept on the device): the caller owns it,
/// dropping it frees it, from any thread.
pub trait DeviceBuffer: Send + Sync {
    /// Device address of byte 0 (0 for an empty buffer).
    fn ptr(&self) -> u64;
    /// Size, bytes.
    fn bytes(&self) -> u64;
    /// Ordinal of the device that holds it.
    fn ordinal(&self) -> i32;
}

/// A step output: a host tensor, or a buffer in device memory with its type.
pub enum StepTensor {
    /// On the host.
    Host(Tensor),
    /// In device memory, owned by the caller.
    Device {
        /// The memory.
        buf: Box<dyn DeviceBuffer>,
        /// Element type.
        dtype: DType,
        /// Shape, outermost first (row-major, contiguous).
        shape: Vec<usize>,
    },
}

/// Why a device cannot run a step.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// The device (driver, library) is not there or refused to start.
    #[error("{0}")]
    Unavailable(String),
    /// A device call failed.
    #[error("{what}: {msg}")]
    Call {
        /// What was being done.
        what: String,
        /// The driver's message.
        msg: String,
    },
    /// A kernel could not be generated or loaded.
    #[error("kernel {name}: {msg}")]
    Kernel {
        /// The kernel's symbol.
        name: String,
        /// Why.
        msg: String,
    },
    /// An op run on the host failed.
    #[error(transparent)]
    Host(#[from] Box<ExecError>),
}

/// The host side of a [`HostCall`]: given the operands' bytes, the results' bytes and the
/// op's transient bytes (run by the executor, which owns the program).
pub type HostFn<'a> =
    dyn FnMut(&HostCall, Vec<Vec<u8>>) -> Result<(Vec<Vec<u8>>, u64), ExecError> + 'a;

/// An accelerator (see the module docs). Commands are issued in program order; each runs
/// after the commands issued before it on its stream and after the events its stream waits
/// for.
pub trait Device {
    /// A short name (`simt`, `cuda`).
    fn name(&self) -> &'static str;

    /// Allocates `space` with `bytes` bytes (once per step; the previous allocation is freed,
    /// or kept when it has exactly this size).
    ///
    /// # Errors
    /// Out of device memory, or a driver error.
    fn alloc(&mut self, space: Space, bytes: u64) -> Result<(), DeviceError>;

    /// Allocates the pinned host pool of `bytes` bytes.
    ///
    /// # Errors
    /// Out of host memory, or a driver error.
    fn alloc_host_pool(&mut self, bytes: u64) -> Result<(), DeviceError>;

    /// Copies `data` from (pageable) host memory to `dst`, on `stream`.
    ///
    /// # Errors
    /// A driver error.
    fn upload(&mut self, stream: Stream, dst: DevPtr, data: &[u8]) -> Result<(), DeviceError>;

    /// Reads `src` back, after every stream has finished.
    ///
    /// # Errors
    /// A driver error.
    fn download(&mut self, src: DevRange) -> Result<Vec<u8>, DeviceError>;

    /// An asynchronous copy of `bytes` bytes on `stream`.
    ///
    /// # Errors
    /// A driver error.
    fn copy(&mut self, stream: Stream, t: Transfer, bytes: u64) -> Result<(), DeviceError>;

    /// Launches a kernel on `stream`.
    ///
    /// # Errors
    /// The kernel cannot be built or loaded, or a driver error.
    fn launch(&mut self, stream: Stream, l: &Launch) -> Result<(), DeviceError>;

    /// A GEMM on `stream`.
    ///
    /// # Errors
    /// A library error.
    fn gemm(&mut self, stream: Stream, g: &GemmCall) -> Result<(), DeviceError>;

    /// Runs `h` on the host after the work issued on `stream` so far, before the work issued
    /// later; returns the op's transient bytes.
    ///
    /// # Errors
    /// The host kernel fails, or a driver error.
    fn host_call(
        &mut self,
        stream: Stream,
        h: &HostCall,
        run: &mut HostFn,
    ) -> Result<u64, DeviceError>;

    /// Records `e` on `stream` (it completes when the work issued before it there has).
    ///
    /// # Errors
    /// A driver error.
    fn record(&mut self, stream: Stream, e: Event) -> Result<(), DeviceError>;

    /// Makes `stream` wait for the last record of `e`.
    ///
    /// # Errors
    /// A driver error.
    fn wait(&mut self, stream: Stream, e: Event) -> Result<(), DeviceError>;

    /// Waits for every stream.
    ///
    /// # Errors
    /// A driver error, or an asynchronous failure of earlier work.
    fn synchronize(&mut self) -> Result<(), DeviceError>;

    /// Device memory held now (allocations, workspace), bytes, where the device can tell.
    fn device_bytes(&self) -> Option<u64> {
        None
    }

    /// Copies `bytes` bytes from device address `src` (memory of this device the caller owns)
    /// to `dst`, on `stream`.
    ///
    /// # Errors
    /// A device without addressable memory of its own (the simulated one), or a driver error.
    fn upload_device(
        &mut self,
        _stream: Stream,
        _dst: DevPtr,
        _src: u64,
        _bytes: u64,
    ) -> Result<(), DeviceError> {
        Err(DeviceError::Unavailable(format!(
            "the {} device takes host tensors only",
            self.name()
        )))
    }

    /// A copy of `src` in a new device allocation the caller owns, made after every stream
    /// has finished (the bytes are ready when this returns).
    ///
    /// # Errors
    /// A device without addressable memory of its own (the simulated one), or a driver error.
    fn export(&mut self, _src: DevRange) -> Result<Box<dyn DeviceBuffer>, DeviceError> {
        Err(DeviceError::Unavailable(format!(
            "the {} device hands out host tensors only",
            self.name()
        )))
    }

    /// The driver handle of `stream` (a `CUstream` for CUDA) and the device ordinal, for a
    /// caller that orders its own work before the step's (DLPack's `stream` argument); `None`
    /// for a device without driver streams.
    fn stream_handle(&self, _stream: Stream) -> Option<(u64, i32)> {
        None
    }
}
