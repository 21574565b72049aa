//! The CUDA device: cudarc's driver API and cuBLAS, both loaded at run time, so the build
//! needs no CUDA installation.
//!
//! [`Cuda::new`] first opens the driver and cuBLAS libraries itself (the names cudarc would
//! try), and returns [`DeviceError::Unavailable`] naming the library and the loader's message
//! when one is missing: cudarc panics on a missing library, so no cudarc function that loads
//! one is called before. Then: the primary context of device 0, two non-blocking streams
//! ([`super::COMPUTE`], [`super::COPY`]), one cuBLAS handle on the compute stream in the
//! default math mode (no TF32: `f32` GEMMs compute in `f32`). Device memory is two
//! allocations (arena, scratch), the host pool is pinned (`cuMemAllocHost`), kernels are PTX
//! modules ([`ebb_codegen::gpu::ptx`], or the plan's stored PTX through [`Cuda::set_ptx`])
//! loaded once per kernel and launched on a grid of [`Launch::grid`] blocks of
//! [`Launch::BLOCK`] threads, events are driver events recorded and waited for exactly as the
//! command sequence says. A host call synchronizes the compute stream, copies its operands
//! to the host, runs the CPU kernel and copies the results back.
//!
//! Embedding: a caller's device tensor ([`super::StepInput::Device`]) is copied device to
//! device into its arena offset on the compute stream, whose handle the caller gets
//! ([`Device::stream_handle`]) to order its own writes before; an output kept on the device
//! ([`Device::export`]) is a new allocation ([`CudaBuffer`]) holding a copy of the arena
//! bytes, made after every stream finished, freed when the caller drops it.
//!
//! Numerics: the kernels are the simt device's (same IR); a GEMM sums in cuBLAS's order,
//! not `matrixmultiply`'s, so outputs downstream of a `dot_general` differ from the CPU
//! reference by rounding (`ebb run --device-tolerance`).

use super::{
    DevPtr, DevRange, Device, DeviceBuffer, DeviceError, Event, GemmCall, GemmType, HostCall,
    HostFn, Launch, Space, Stream, Transfer, STREAMS,
};
use cudarc::cublas::{result as blas, sys as blas_sys};
use cudarc::driver::{result as cu, sys as cu_sys, CudaContext};
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::Arc;

/// Opens the first of cudarc's candidate names for library `lib` (`cuda`, `cublas`), or
/// says which names were tried and why the first failed.
fn probe(lib: &str, what: &str) -> Result<(), DeviceError> {
    let names = cudarc::get_lib_name_candidates(lib);
    let mut first_err = None;
    for n in &names {
        // SAFETY: loading a shared library runs its initializers; the driver's and
        // cuBLAS's are safe to run (cudarc loads the same files).
        match unsafe { libloading::Library::new(n) } {
            Ok(_) => return Ok(()),
            Err(e) => {
                first_err.get_or_insert(e.to_string());
            }
        }
    }
    Err(DeviceError::Unavailable(format!(
        "{what} cannot be loaded ({}; tried {}): the CUDA executor needs the NVIDIA driver \
         (libcuda) and cuBLAS (libcublas) on the library path",
        first_err.unwrap_or_default(),
        names.join(", ")
    )))
}

fn call<T>(what: &str, r: Result<T, impl std::fmt::Debug>) -> Result<T, DeviceError> {
    r.map_err(|e| DeviceError::Call {
        what: what.to_string(),
        msg: format!("{e:?}"),
    })
}

/// The CUDA device; see the module docs.
pub struct Cuda {
    ctx: Arc<CudaContext>,
    streams: [cu_sys::CUstream; STREAMS],
    events: Vec<cu_sys::CUevent>,
    arena: (cu_sys::CUdeviceptr, u64),
    scratch: (cu_sys::CUdeviceptr, u64),
    pool: (*mut u8, u64),
    blas: blas_sys::cublasHandle_t,
    kernels: HashMap<String, (cu_sys::CUmodule, cu_sys::CUfunction)>,
    /// Functions by kernel description's address (the `Arc` kept, so the address is not
    /// reused): a launch finds its function without hashing the kernel's key.
    by_kernel: HashMap<usize, (Arc<ebb_codegen::gpu::GpuKernel>, cu_sys::CUfunction)>,
    ptx: HashMap<String, String>,
    /// Host bytes of uploads in flight (kept until the next synchronization).
    staging: Vec<Vec<u8>>,
    free_at_start: usize,
}

// SAFETY: the driver handles are usable from any thread once the context is bound to it,
// which every method does first; the pinned pool is owned memory.
unsafe impl Send for Cuda {}

impl Cuda {
    /// Opens device 0; see the module docs.
    ///
    /// # Errors
    /// [`DeviceError::Unavailable`]: no driver or cuBLAS library, no GPU, or the driver
    /// refuses to start.
    pub fn new() -> Result<Cuda, DeviceError> {
        probe("cuda", "the NVIDIA driver library")?;
        probe("cublas", "the cuBLAS library")?;
        let ctx = CudaContext::new(0)
            .map_err(|e| DeviceError::Unavailable(format!("CUDA device 0: {e:?}")))?;
        let (free_at_start, _) = call("cuMemGetInfo", cu::mem_get_info())?;
        let mut streams = [std::ptr::null_mut(); STREAMS];
        for s in &mut streams {
            *s = call(
                "cuStreamCreate",
                cu::stream::create(cu::stream::StreamKind::NonBlocking),
            )?;
        }
        let blas = call("cublasCreate", blas::create_handle())?;
        // SAFETY: a live handle and stream.
        unsafe {
            call(
                "cublasSetStream",
                blas::set_stream(blas, streams[super::COMPUTE] as _),
            )?;
            call(
                "cublasSetMathMode",
                blas_sys::cublasSetMathMode(blas, blas_sys::cublasMath_t::CUBLAS_DEFAULT_MATH)
                    .result(),
            )?;
        }
        Ok(Cuda {
            ctx,
            streams,
            events: Vec::new(),
            arena: (0, 0),
            scratch: (0, 0),
            pool: (std::ptr::null_mut(), 0),
            blas,
            kernels: HashMap::new(),
            by_kernel: HashMap::new(),
            ptx: HashMap::new(),
            staging: Vec::new(),
            free_at_start,
        })
    }

    /// PTX to use for kernels by symbol (a plan's stored kernels) instead of generating it.
    pub fn set_ptx(&mut self, ptx: HashMap<String, String>) {
        self.ptx = ptx;
    }

    /// The device's name, as the driver reports it.
    pub fn device_name(&self) -> String {
        self.ctx.name().unwrap_or_default()
    }

    fn bind(&self) -> Result<(), DeviceError> {
        call("cuCtxSetCurrent", self.ctx.bind_to_thread())
    }

    fn ptr(&self, p: DevPtr) -> cu_sys::CUdeviceptr {
        let base = match p.space {
            Space::Arena => self.arena.0,
            Space::Scratch => self.scratch.0,
        };
        base + p.offset
    }

    fn bounds(&self, r: DevRange) -> Result<(), DeviceError> {
        let size = match r.ptr.space {
            Space::Arena => self.arena.1,
            Space::Scratch => self.scratch.1,
        };
        if r.ptr.offset + r.bytes > size {
            return Err(DeviceError::Call {
                what: "access".into(),
                msg: format!(
                    "bytes [{}, {}) are outside the {:?} of {size} bytes",
                    r.ptr.offset,
                    r.ptr.offset + r.bytes,
                    r.ptr.space
                ),
            });
        }
        Ok(())
    }

    fn event(&mut self, e: Event) -> Result<cu_sys::CUevent, DeviceError> {
        while self.events.len() <= e as usize {
            let ev = call(
                "cuEventCreate",
                cu::event::create(cu_sys::CUevent_flags::CU_EVENT_DISABLE_TIMING),
            )?;
            self.events.push(ev);
        }
        Ok(self.events[e as usize])
    }

    fn function(&mut self, l: &Launch) -> Result<cu_sys::CUfunction, DeviceError> {
        let at = Arc::as_ptr(&l.kernel) as usize;
        if let Some((_, f)) = self.by_kernel.get(&at) {
            return Ok(*f);
        }
        let name = l.kernel.name();
        if let Some(&(_, f)) = self.kernels.get(&name) {
            self.by_kernel.insert(at, (l.kernel.clone(), f));
            return Ok(f);
        }
        let kerr = |msg: String| DeviceError::Kernel {
            name: name.clone(),
            msg,
        };
        let ptx = match self.ptx.get(&name) {
            Some(p) => p.clone(),
            None => ebb_codegen::gpu::ptx(&l.kernel).map_err(|e| kerr(e.to_string()))?,
        };
        let text = CString::new(ptx).map_err(|e| kerr(e.to_string()))?;
        // SAFETY: a NUL-terminated PTX image; the context is bound.
        let module = unsafe { cu::module::load_data(text.as_ptr() as *const c_void) }
            .map_err(|e| kerr(format!("cuModuleLoadData: {e:?}")))?;
        let cname = CString::new(name.clone()).map_err(|e| kerr(e.to_string()))?;
        // SAFETY: a loaded module.
        let f = unsafe { cu::module::get_function(module, cname) }
            .map_err(|e| kerr(format!("cuModuleGetFunction: {e:?}")))?;
        self.kernels.insert(name, (module, f));
        self.by_kernel.insert(at, (l.kernel.clone(), f));
        Ok(f)
    }

    fn free_all(&mut self) {
        let _ = self.synchronize();
        // SAFETY: our own allocations, freed once (zeroed after).
        unsafe {
            for m in [&mut self.arena, &mut self.scratch] {
                if m.0 != 0 {
                    let _ = cu::free_sync(m.0);
                }
                *m = (0, 0);
            }
            if !self.pool.0.is_null() {
                let _ = cu::free_host(self.pool.0 as *mut c_void);
            }
            self.pool = (std::ptr::null_mut(), 0);
        }
    }
}

impl Drop for Cuda {
    fn drop(&mut self) {
        if self.bind().is_err() {
            return;
        }
        self.free_all();
        // SAFETY: handles created by `new`/`event`/`function`, destroyed once.
        unsafe {
            let _ = blas::destroy_handle(self.blas);
            for &e in &self.events {
                let _ = cu::event::destroy(e);
            }
            for &(m, _) in self.kernels.values() {
                let _ = cu::module::unload(m);
            }
            for &s in &self.streams {
                let _ = cu::stream::destroy(s);
            }
        }
    }
}

/// A device allocation handed to the caller (a step output kept on the device); freed on
/// drop, from any thread (the context is bound first).
pub struct CudaBuffer {
    ctx: Arc<CudaContext>,
    ptr: cu_sys::CUdeviceptr,
    bytes: u64,
}

// SAFETY: a device address and a context handle, usable from any thread once bound.
unsafe impl Send for CudaBuffer {}
// SAFETY: as above; shared access only reads the address.
unsafe impl Sync for CudaBuffer {}

impl DeviceBuffer for CudaBuffer {
    fn ptr(&self) -> u64 {
        if self.bytes == 0 {
            0
        } else {
            self.ptr
        }
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }

    fn ordinal(&self) -> i32 {
        i32::try_from(self.ctx.ordinal()).unwrap_or(0)
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: our allocation, freed once; the copy into it completed before it was
            // handed out and the caller's uses of it are over when it drops it.
            let _ = unsafe { cu::free_sync(self.ptr) };
        }
    }
}

/// How cuBLAS (column-major) reads a strided `rows × cols` matrix's transpose: operation and
/// leading dimension, where one stride is 1 (the lowering guarantees it).
fn transposed(
    rows: usize,
    cols: usize,
    rs: isize,
    cs: isize,
) -> Option<(blas_sys::cublasOperation_t, i32)> {
    use blas_sys::cublasOperation_t::{CUBLAS_OP_N, CUBLAS_OP_T};
    // The transpose (cols × rows) column-major: element (j, i) at j + i·ld, i.e. cs == 1.
    if cs == 1 || cols == 1 {
        let ld = if rows == 1 { cols.max(1) as isize } else { rs };
        return i32::try_from(ld).ok().map(|ld| (CUBLAS_OP_N, ld));
    }
    // The matrix itself column-major (element (i, j) at i + j·ld), transposed by cuBLAS.
    if rs == 1 || rows == 1 {
        let ld = if cols == 1 { rows.max(1) as isize } else { cs };
        return i32::try_from(ld).ok().map(|ld| (CUBLAS_OP_T, ld));
    }
    None
}

impl Device for Cuda {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn alloc(&mut self, space: Space, bytes: u64) -> Result<(), DeviceError> {
        self.bind()?;
        self.synchronize()?;
        let slot = match space {
            Space::Arena => &mut self.arena,
            Space::Scratch => &mut self.scratch,
        };
        // A step at the shape of the last one keeps its allocation (the device holds exactly
        // the bytes the plan asks for either way; `cuMemFree` + `cuMemAlloc` per step cost
        // far more than a small step's kernels).
        if slot.0 != 0 && slot.1 == bytes {
            return Ok(());
        }
        if slot.0 != 0 {
            // SAFETY: our allocation, no work in flight.
            call("cuMemFree", unsafe { cu::free_sync(slot.0) })?;
            *slot = (0, 0);
        }
        let n = usize::try_from(bytes.max(1))
            .map_err(|_| DeviceError::Unavailable(format!("{bytes} bytes")))?;
        // SAFETY: a plain allocation.
        let p = unsafe { cu::malloc_sync(n) }.map_err(|e| DeviceError::Call {
            what: format!("cuMemAlloc of {bytes} bytes for the {space:?}"),
            msg: format!("{e:?}"),
        })?;
        *slot = (p, bytes);
        Ok(())
    }

    fn alloc_host_pool(&mut self, bytes: u64) -> Result<(), DeviceError> {
        self.bind()?;
        self.synchronize()?;
        // The pool of the last step when it has the size asked for (pinning host memory,
        // `cuMemAllocHost`, takes milliseconds).
        if !self.pool.0.is_null() && self.pool.1 == bytes {
            return Ok(());
        }
        if !self.pool.0.is_null() {
            // SAFETY: our pinned allocation, no copy in flight.
            call("cuMemFreeHost", unsafe {
                cu::free_host(self.pool.0 as *mut c_void)
            })?;
            self.pool = (std::ptr::null_mut(), 0);
        }
        if bytes == 0 {
            return Ok(());
        }
        let n = usize::try_from(bytes)
            .map_err(|_| DeviceError::Unavailable(format!("{bytes} bytes")))?;
        // SAFETY: a plain pinned allocation.
        let p = unsafe { cu::malloc_host(n, 0) }.map_err(|e| DeviceError::Call {
            what: format!("cuMemAllocHost of {bytes} bytes (the host pool)"),
            msg: format!("{e:?}"),
        })?;
        self.pool = (p as *mut u8, bytes);
        Ok(())
    }

    fn upload(&mut self, stream: Stream, dst: DevPtr, data: &[u8]) -> Result<(), DeviceError> {
        self.bind()?;
        self.bounds(DevRange {
            ptr: dst,
            bytes: data.len() as u64,
        })?;
        let d = self.ptr(dst);
        self.staging.push(data.to_vec());
        let src = self
            .staging
            .last()
            .map(|v| v.as_slice())
            .unwrap_or_default();
        // SAFETY: checked range; `src` lives in `staging` until the next synchronization.
        call("cuMemcpyHtoDAsync", unsafe {
            cu::memcpy_htod_async(d, src, self.streams[stream])
        })
    }

    fn download(&mut self, src: DevRange) -> Result<Vec<u8>, DeviceError> {
        self.bind()?;
        self.synchronize()?;
        self.bounds(src)?;
        let mut out = vec![0u8; src.bytes as usize];
        // SAFETY: checked range, no work in flight.
        call("cuMemcpyDtoH", unsafe {
            cu::memcpy_dtoh_sync(&mut out, self.ptr(src.ptr))
        })?;
        Ok(out)
    }

    fn copy(&mut self, stream: Stream, t: Transfer, bytes: u64) -> Result<(), DeviceError> {
        self.bind()?;
        let s = self.streams[stream];
        let n = bytes as usize;
        let pool = |host: u64| -> Result<*mut u8, DeviceError> {
            if host + bytes > self.pool.1 {
                return Err(DeviceError::Call {
                    what: "swap".into(),
                    msg: "outside the host pool".into(),
                });
            }
            Ok(self.pool.0.wrapping_add(host as usize))
        };
        match t {
            Transfer::ToHost { src, host } => {
                self.bounds(DevRange { ptr: src, bytes })?;
                let h = pool(host)?;
                // SAFETY: the pinned pool outlives the copy (freed after synchronizing).
                let dst = unsafe { std::slice::from_raw_parts_mut(h, n) };
                call("cuMemcpyDtoHAsync", unsafe {
                    cu::memcpy_dtoh_async(dst, self.ptr(src), s)
                })
            }
            Transfer::ToDevice { host, dst } => {
                self.bounds(DevRange { ptr: dst, bytes })?;
                let h = pool(host)?;
                // SAFETY: as above.
                let src = unsafe { std::slice::from_raw_parts(h as *const u8, n) };
                call("cuMemcpyHtoDAsync", unsafe {
                    cu::memcpy_htod_async(self.ptr(dst), src, s)
                })
            }
            Transfer::Device { src, dst } => {
                self.bounds(DevRange { ptr: src, bytes })?;
                self.bounds(DevRange { ptr: dst, bytes })?;
                // SAFETY: checked ranges.
                call("cuMemcpyDtoDAsync", unsafe {
                    cu::memcpy_dtod_async(self.ptr(dst), self.ptr(src), n, s)
                })
            }
        }
    }

    fn launch(&mut self, stream: Stream, l: &Launch) -> Result<(), DeviceError> {
        self.bind()?;
        let k = &l.kernel;
        if l.bufs.len() != k.buffers() || l.params.len() != k.params() {
            return Err(DeviceError::Kernel {
                name: k.name(),
                msg: "argument count".into(),
            });
        }
        let f = self.function(l)?;
        // The kernel ABI (`ebb_codegen::gpu`): one 64-bit pointer per buffer, then the
        // parameter block (`8·params` bytes, one `.param` array).
        let mut ptrs: Vec<u64> = l.bufs.iter().map(|&b| self.ptr(b)).collect();
        let mut block: Vec<i64> = l.params.clone();
        let mut args: Vec<*mut c_void> = ptrs
            .iter_mut()
            .map(|v| v as *mut u64 as *mut c_void)
            .collect();
        args.push(block.as_mut_ptr() as *mut c_void);
        // SAFETY: the arguments follow the kernel's ABI (64-bit pointers, then the block of
        // `params.len()` 64-bit integers); the lowering keeps every index inside its buffer.
        call("cuLaunchKernel", unsafe {
            cu::launch_kernel(
                f,
                (l.grid(), 1, 1),
                (Launch::BLOCK, 1, 1),
                0,
                self.streams[stream],
                &mut args,
            )
        })
    }

    fn gemm(&mut self, stream: Stream, g: &GemmCall) -> Result<(), DeviceError> {
        self.bind()?;
        let GemmType::F32 = g.dtype;
        if stream != super::COMPUTE {
            return Err(DeviceError::Call {
                what: "GEMM".into(),
                msg: "GEMMs run on the compute stream".into(),
            });
        }
        let bad = |what: &str| DeviceError::Call {
            what: "GEMM".into(),
            msg: format!("{what} has no unit stride"),
        };
        // C^T (n × m, column-major = C row-major) = B^T · A^T.
        let (op_b, ldb) = transposed(g.k, g.n, g.b.2, g.b.3).ok_or_else(|| bad("B"))?;
        let (op_a, lda) = transposed(g.m, g.k, g.a.2, g.a.3).ok_or_else(|| bad("A"))?;
        let int = |v: usize| i32::try_from(v).map_err(|_| bad("a dimension over 2^31"));
        let (alpha, beta) = (1f32, 0f32);
        // SAFETY: views checked by the lowering against their ranges; C distinct from A, B.
        call("cublasSgemmStridedBatched", unsafe {
            blas::sgemm_strided_batched(
                self.blas,
                op_b,
                op_a,
                int(g.n)?,
                int(g.m)?,
                int(g.k)?,
                &alpha,
                self.ptr(g.b.0) as *const f32,
                ldb,
                g.b.4 as i64,
                self.ptr(g.a.0) as *const f32,
                lda,
                g.a.4 as i64,
                &beta,
                self.ptr(g.c) as *mut f32,
                int(g.n)?,
                (g.m * g.n) as i64,
                int(g.batch)?,
            )
        })
    }

    fn host_call(
        &mut self,
        stream: Stream,
        h: &HostCall,
        run: &mut HostFn,
    ) -> Result<u64, DeviceError> {
        self.bind()?;
        // SAFETY: a live stream.
        call("cuStreamSynchronize", unsafe {
            cu::stream::synchronize(self.streams[stream])
        })?;
        let mut bytes = Vec::with_capacity(h.operands.len());
        for r in &h.operands {
            self.bounds(*r)?;
            let mut v = vec![0u8; r.bytes as usize];
            // SAFETY: checked range; its writer (the compute stream) is done.
            call("cuMemcpyDtoH", unsafe {
                cu::memcpy_dtoh_sync(&mut v, self.ptr(r.ptr))
            })?;
            bytes.push(v);
        }
        let (results, transient) = run(h, bytes).map_err(|e| DeviceError::Host(Box::new(e)))?;
        for (r, v) in h.results.iter().zip(&results) {
            self.bounds(*r)?;
            // SAFETY: checked range.
            call("cuMemcpyHtoD", unsafe {
                cu::memcpy_htod_sync(self.ptr(r.ptr), v)
            })?;
        }
        Ok(transient)
    }

    fn record(&mut self, stream: Stream, e: Event) -> Result<(), DeviceError> {
        self.bind()?;
        let ev = self.event(e)?;
        // SAFETY: live event and stream.
        call("cuEventRecord", unsafe {
            cu::event::record(ev, self.streams[stream])
        })
    }

    fn wait(&mut self, stream: Stream, e: Event) -> Result<(), DeviceError> {
        self.bind()?;
        let ev = self.event(e)?;
        // SAFETY: live event and stream.
        call("cuStreamWaitEvent", unsafe {
            cu::stream::wait_event(
                self.streams[stream],
                ev,
                cu_sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        })
    }

    fn synchronize(&mut self) -> Result<(), DeviceError> {
        self.bind()?;
        for &s in &self.streams {
            // SAFETY: a live stream.
            call("cuStreamSynchronize", unsafe { cu::stream::synchronize(s) })?;
        }
        self.staging.clear();
        Ok(())
    }

    fn device_bytes(&self) -> Option<u64> {
        let (free, _) = cu::mem_get_info().ok()?;
        Some(self.free_at_start.saturating_sub(free) as u64)
    }

    fn upload_device(
        &mut self,
        stream: Stream,
        dst: DevPtr,
        src: u64,
        bytes: u64,
    ) -> Result<(), DeviceError> {
        self.bind()?;
        self.bounds(DevRange { ptr: dst, bytes })?;
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: checked destination; the caller keeps `src` (`bytes` bytes of this device's
        // memory) alive until the step has synchronized, and ordered its writers before
        // this stream.
        call("cuMemcpyDtoDAsync", unsafe {
            cu::memcpy_dtod_async(self.ptr(dst), src, bytes as usize, self.streams[stream])
        })
    }

    fn export(&mut self, src: DevRange) -> Result<Box<dyn DeviceBuffer>, DeviceError> {
        self.bind()?;
        self.synchronize()?;
        self.bounds(src)?;
        // SAFETY: a plain allocation (at least one byte, so an empty output has an address).
        let ptr = unsafe { cu::malloc_sync(src.bytes.max(1) as usize) }.map_err(|e| {
            DeviceError::Call {
                what: format!("cuMemAlloc of {} bytes for an output", src.bytes),
                msg: format!("{e:?}"),
            }
        })?;
        let buf = CudaBuffer {
            ctx: self.ctx.clone(),
            ptr,
            bytes: src.bytes,
        };
        if src.bytes > 0 {
            let s = self.streams[super::COMPUTE];
            // SAFETY: checked source, a fresh destination of its size; the copy is complete
            // when the stream is (a device-to-device `cuMemcpyDtoD` would not wait for it).
            unsafe {
                call(
                    "cuMemcpyDtoDAsync",
                    cu::memcpy_dtod_async(ptr, self.ptr(src.ptr), src.bytes as usize, s),
                )?;
                call("cuStreamSynchronize", cu::stream::synchronize(s))?;
            }
        }
        Ok(Box::new(buf))
    }

    fn stream_handle(&self, stream: Stream) -> Option<(u64, i32)> {
        let ordinal = i32::try_from(self.ctx.ordinal()).unwrap_or(0);
        Some((self.streams[stream] as u64, ordinal))
    }
}
