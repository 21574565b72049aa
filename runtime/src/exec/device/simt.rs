//! The simulated device: device memory is host memory, each stream is a thread running its
//! commands in issue order, events are counters the waiting stream blocks on, and kernels are
//! the GPU kernels' own LLVM IR compiled for the host with the thread and block indices bound
//! to loops over the launch grid ([`ebb_codegen::gpu::simt`]); a launch's blocks are spread
//! over the CPU's threads. GEMMs run the CPU executor's GEMM. Host calls run on the issuing
//! thread once the compute stream has drained.
//!
//! The environment variable `EBB_SIMT_GEMM` stands the GEMM in for another library's, to test
//! the GPU check (`ebb_pipeline::device_check`) without a GPU: `reversed` sums each dot
//! product in `f32` in reverse order (a legitimate other order, as cuBLAS's blocking is);
//! `faulty` does so and scales each result's first element by 1.001 (a wrong kernel).
//!
//! With [`super::hazard::check`] over the same command sequence, this is how CI runs the
//! GPU executor without a GPU: the same launches, copies and events as on a GPU, the same
//! kernels' code, and every race the events would leave caught before it can corrupt a run.
//!
//! Invariant: a stream thread touches device memory only through the pointers of the commands
//! it runs, and memory is reallocated only when every stream is idle.

use super::{
    DevPtr, DevRange, Device, DeviceError, Event, GemmCall, GemmType, HostCall, HostFn, Launch,
    Space, Stream, Transfer, STREAMS,
};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

type Job = Box<dyn FnOnce() -> Result<(), DeviceError> + Send>;

/// `EBB_SIMT_GEMM` (see the module docs; read once per process): `None` for the CPU
/// executor's GEMM, `Some(faulty)` for the reversed-order stand-in.
fn stand_in() -> Option<bool> {
    static MODE: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    *MODE.get_or_init(|| match std::env::var("EBB_SIMT_GEMM").as_deref() {
        Ok("reversed") => Some(false),
        Ok("faulty") => Some(true),
        _ => None,
    })
}

/// `c = a · b` per batch, each dot product summed in `f32` from the last term to the first;
/// with `faulty`, each batch's `c[0][0]` scaled by 1.001.
///
/// # Safety
/// The views of `g` lie in their buffers and `c` holds `batch · m · n` elements distinct
/// from them.
unsafe fn reversed_gemm(g: &GemmCall, a: *const f32, b: *const f32, c: *mut f32, faulty: bool) {
    for bt in 0..g.batch {
        for i in 0..g.m {
            for j in 0..g.n {
                let mut acc = 0f32;
                for p in (0..g.k).rev() {
                    let ia = bt as isize * g.a.4 + i as isize * g.a.2 + p as isize * g.a.3;
                    let ib = bt as isize * g.b.4 + p as isize * g.b.2 + j as isize * g.b.3;
                    // SAFETY: inside the views (the caller's contract).
                    acc += unsafe { *a.offset(ia) * *b.offset(ib) };
                }
                if faulty && i == 0 && j == 0 {
                    acc *= 1.001;
                }
                // SAFETY: inside `c`.
                unsafe { *c.add((bt * g.m + i) * g.n + j) = acc };
            }
        }
    }
}

/// Host memory standing for a device allocation (8-byte aligned, zeroed).
#[derive(Default)]
struct Mem(Vec<u64>);

impl Mem {
    fn new(bytes: u64) -> Result<Mem, DeviceError> {
        let words = usize::try_from(bytes.div_ceil(8))
            .map_err(|_| DeviceError::Unavailable(format!("{bytes} bytes do not fit")))?;
        let mut v = Vec::new();
        v.try_reserve_exact(words).map_err(|_| {
            DeviceError::Unavailable(format!(
                "cannot allocate {bytes} bytes of simulated device memory"
            ))
        })?;
        v.resize(words, 0);
        Ok(Mem(v))
    }

    fn bytes(&self) -> u64 {
        self.0.len() as u64 * 8
    }

    fn base(&mut self) -> *mut u8 {
        self.0.as_mut_ptr().cast()
    }
}

/// An address usable from any thread (the module invariant keeps it valid).
#[derive(Clone, Copy)]
struct Addr(*mut u8);
// SAFETY: see the module invariant.
unsafe impl Send for Addr {}
unsafe impl Sync for Addr {}

struct StreamThread {
    tx: Option<Sender<Job>>,
    handle: Option<JoinHandle<()>>,
    /// (issued, done) job counts.
    count: Arc<(Mutex<(u64, u64)>, Condvar)>,
}

/// An event: how many records were issued, how many completed.
#[derive(Default)]
struct EventState {
    issued: AtomicU64,
    done: (Mutex<u64>, Condvar),
}

/// What the simulated device did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SimtStats {
    /// Kernel launches.
    pub launches: u64,
    /// Blocks run.
    pub blocks: u64,
    /// GEMMs.
    pub gemms: u64,
    /// Copies (uploads included) and their bytes.
    pub copies: u64,
    /// Bytes copied.
    pub copy_bytes: u64,
    /// Host calls.
    pub host_calls: u64,
}

/// The simulated device; see the module docs.
pub struct Simt {
    arena: Mem,
    scratch: Mem,
    pool: Mem,
    streams: Vec<StreamThread>,
    events: Vec<Arc<EventState>>,
    error: Arc<Mutex<Option<DeviceError>>>,
    /// What it did.
    pub stats: SimtStats,
}

impl Simt {
    /// A simulated device with [`STREAMS`] stream threads.
    ///
    /// # Errors
    /// A stream thread cannot be started.
    pub fn new() -> Result<Simt, DeviceError> {
        let error: Arc<Mutex<Option<DeviceError>>> = Arc::default();
        let mut streams = Vec::new();
        for s in 0..STREAMS {
            let (tx, rx) = channel::<Job>();
            let count: Arc<(Mutex<(u64, u64)>, Condvar)> = Arc::default();
            let (c, err) = (count.clone(), error.clone());
            let handle = std::thread::Builder::new()
                .name(format!("simt-stream-{s}"))
                .spawn(move || {
                    for job in rx {
                        // After a failure the stream drains without running anything.
                        let failed = err.lock().map(|e| e.is_some()).unwrap_or(true);
                        if !failed {
                            if let Err(e) = job() {
                                if let Ok(mut slot) = err.lock() {
                                    slot.get_or_insert(e);
                                }
                            }
                        }
                        let (m, cv) = &*c;
                        if let Ok(mut g) = m.lock() {
                            g.1 += 1;
                        }
                        cv.notify_all();
                    }
                })
                .map_err(|e| DeviceError::Unavailable(format!("simt stream thread: {e}")))?;
            streams.push(StreamThread {
                tx: Some(tx),
                handle: Some(handle),
                count,
            });
        }
        Ok(Simt {
            arena: Mem::default(),
            scratch: Mem::default(),
            pool: Mem::default(),
            streams,
            events: Vec::new(),
            error,
            stats: SimtStats::default(),
        })
    }

    fn failed(&self) -> Result<(), DeviceError> {
        match self.error.lock() {
            Ok(mut e) => match e.take() {
                Some(err) => Err(err),
                None => Ok(()),
            },
            Err(_) => Err(DeviceError::Unavailable("a stream thread panicked".into())),
        }
    }

    fn submit(&mut self, stream: Stream, job: Job) -> Result<(), DeviceError> {
        let st = self
            .streams
            .get(stream)
            .ok_or_else(|| DeviceError::Unavailable(format!("no stream {stream}")))?;
        if let Ok(mut g) = st.count.0.lock() {
            g.0 += 1;
        }
        st.tx
            .as_ref()
            .and_then(|tx| tx.send(job).ok())
            .ok_or_else(|| DeviceError::Unavailable(format!("stream {stream} stopped")))
    }

    /// Waits until `stream` has run everything issued to it.
    fn drain(&self, stream: Stream) -> Result<(), DeviceError> {
        let st = &self.streams[stream];
        let (m, cv) = &*st.count;
        let mut g = m
            .lock()
            .map_err(|_| DeviceError::Unavailable("stream lock".into()))?;
        while g.1 < g.0 {
            g = cv
                .wait(g)
                .map_err(|_| DeviceError::Unavailable("stream lock".into()))?;
        }
        Ok(())
    }

    fn base(&mut self, space: Space) -> Addr {
        Addr(match space {
            Space::Arena => self.arena.base(),
            Space::Scratch => self.scratch.base(),
        })
    }

    fn bounds(&self, r: DevRange) -> Result<(), DeviceError> {
        let size = match r.ptr.space {
            Space::Arena => self.arena.bytes(),
            Space::Scratch => self.scratch.bytes(),
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

    fn addr(&mut self, p: DevPtr) -> Addr {
        // SAFETY (of later use): offsets were checked against the allocation by the caller.
        let b = self.base(p.space);
        Addr(b.0.wrapping_add(p.offset as usize))
    }

    fn event(&mut self, e: Event) -> Arc<EventState> {
        let i = e as usize;
        while self.events.len() <= i {
            self.events.push(Arc::default());
        }
        self.events[i].clone()
    }
}

impl Drop for Simt {
    fn drop(&mut self) {
        for s in &mut self.streams {
            s.tx = None;
            if let Some(h) = s.handle.take() {
                let _ = h.join();
            }
        }
    }
}

impl Device for Simt {
    fn name(&self) -> &'static str {
        "simt"
    }

    fn alloc(&mut self, space: Space, bytes: u64) -> Result<(), DeviceError> {
        self.synchronize()?;
        let m = Mem::new(bytes)?;
        match space {
            Space::Arena => self.arena = m,
            Space::Scratch => self.scratch = m,
        }
        Ok(())
    }

    fn alloc_host_pool(&mut self, bytes: u64) -> Result<(), DeviceError> {
        self.synchronize()?;
        self.pool = Mem::new(bytes)?;
        Ok(())
    }

    fn upload(&mut self, stream: Stream, dst: DevPtr, data: &[u8]) -> Result<(), DeviceError> {
        self.bounds(DevRange {
            ptr: dst,
            bytes: data.len() as u64,
        })?;
        self.stats.copies += 1;
        self.stats.copy_bytes += data.len() as u64;
        let d = self.addr(dst);
        let data = data.to_vec();
        self.submit(
            stream,
            Box::new(move || {
                let d = d;
                // SAFETY: the range was checked against the allocation.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), d.0, data.len()) };
                Ok(())
            }),
        )
    }

    fn download(&mut self, src: DevRange) -> Result<Vec<u8>, DeviceError> {
        self.synchronize()?;
        self.bounds(src)?;
        let s = self.addr(src.ptr);
        let mut out = vec![0u8; src.bytes as usize];
        // SAFETY: checked range; every stream is idle.
        unsafe { std::ptr::copy_nonoverlapping(s.0, out.as_mut_ptr(), out.len()) };
        Ok(out)
    }

    fn copy(&mut self, stream: Stream, t: Transfer, bytes: u64) -> Result<(), DeviceError> {
        let pool = Addr(self.pool.base());
        let pool_bytes = self.pool.bytes();
        let (src, dst) = match t {
            Transfer::ToHost { src, host } => {
                self.bounds(DevRange { ptr: src, bytes })?;
                if host + bytes > pool_bytes {
                    return Err(DeviceError::Call {
                        what: "offload".into(),
                        msg: "outside the host pool".into(),
                    });
                }
                (self.addr(src), Addr(pool.0.wrapping_add(host as usize)))
            }
            Transfer::ToDevice { host, dst } => {
                self.bounds(DevRange { ptr: dst, bytes })?;
                if host + bytes > pool_bytes {
                    return Err(DeviceError::Call {
                        what: "reload".into(),
                        msg: "outside the host pool".into(),
                    });
                }
                (Addr(pool.0.wrapping_add(host as usize)), self.addr(dst))
            }
            Transfer::Device { src, dst } => {
                self.bounds(DevRange { ptr: src, bytes })?;
                self.bounds(DevRange { ptr: dst, bytes })?;
                (self.addr(src), self.addr(dst))
            }
        };
        self.stats.copies += 1;
        self.stats.copy_bytes += bytes;
        self.submit(
            stream,
            Box::new(move || {
                let (s, d) = (src, dst);
                // SAFETY: checked ranges; `copy` allows overlap.
                unsafe { std::ptr::copy(s.0, d.0, bytes as usize) };
                Ok(())
            }),
        )
    }

    fn launch(&mut self, stream: Stream, l: &Launch) -> Result<(), DeviceError> {
        let k = &l.kernel;
        if l.bufs.len() != k.buffers() || l.params.len() != k.params() {
            return Err(DeviceError::Kernel {
                name: k.name(),
                msg: format!(
                    "{} buffers and {} parameters passed, the kernel takes {} and {}",
                    l.bufs.len(),
                    l.params.len(),
                    k.buffers(),
                    k.params()
                ),
            });
        }
        let f = ebb_codegen::gpu::simt(k).map_err(|e| DeviceError::Kernel {
            name: k.name(),
            msg: e.to_string(),
        })?;
        let mut args: Vec<u64> = Vec::with_capacity(l.bufs.len() + l.params.len());
        for &b in &l.bufs {
            args.push(self.addr(b).0 as u64);
        }
        args.extend(l.params.iter().map(|&p| p as u64));
        let grid = l.grid();
        let block = Launch::BLOCK;
        self.stats.launches += 1;
        self.stats.blocks += u64::from(grid);
        self.submit(
            stream,
            Box::new(move || {
                const PER: u32 = 16;
                let chunks = grid.div_ceil(PER);
                let run = |c: u32| {
                    let (b0, b1) = (c * PER, ((c + 1) * PER).min(grid));
                    // SAFETY: the arguments follow the kernel's ABI; the lowering sized every
                    // index the parameters reach inside its buffers; blocks write disjoint
                    // elements (each thread its own).
                    unsafe { f(args.as_ptr(), grid, block, b0, b1) };
                };
                if chunks > 1 {
                    (0..chunks).into_par_iter().for_each(run);
                } else {
                    run(0);
                }
                Ok(())
            }),
        )
    }

    fn gemm(&mut self, stream: Stream, g: &GemmCall) -> Result<(), DeviceError> {
        let GemmType::F32 = g.dtype;
        let (a, b, c) = (self.addr(g.a.0), self.addr(g.b.0), self.addr(g.c));
        for (p, len) in [(g.a.0, g.a.1), (g.b.0, g.b.1), (g.c, g.batch * g.m * g.n)] {
            self.bounds(DevRange {
                ptr: p,
                bytes: 4 * len as u64,
            })?;
        }
        let g = g.clone();
        self.stats.gemms += 1;
        self.submit(
            stream,
            Box::new(move || {
                let (a, b, c) = (a, b, c);
                // SAFETY: the three views lie in their checked ranges; `c` is a result range
                // distinct from the operands.
                if let Some(faulty) = stand_in() {
                    // SAFETY: as below.
                    unsafe {
                        reversed_gemm(
                            &g,
                            a.0 as *const f32,
                            b.0 as *const f32,
                            c.0 as *mut f32,
                            faulty,
                        )
                    };
                    return Ok(());
                }
                unsafe {
                    crate::exec::dot::gemm_f32_raw(
                        (g.batch, g.m, g.k, g.n),
                        a.0 as *const f32,
                        (g.a.1, g.a.2, g.a.3, g.a.4),
                        b.0 as *const f32,
                        (g.b.1, g.b.2, g.b.3, g.b.4),
                        c.0 as *mut f32,
                    )
                }
                .map_err(|e| DeviceError::Call {
                    what: "GEMM".into(),
                    msg: e.to_string(),
                })
            }),
        )
    }

    fn host_call(
        &mut self,
        stream: Stream,
        h: &HostCall,
        run: &mut HostFn,
    ) -> Result<u64, DeviceError> {
        self.drain(stream)?;
        self.failed()?;
        let mut bytes = Vec::with_capacity(h.operands.len());
        for r in &h.operands {
            self.bounds(*r)?;
            let s = self.addr(r.ptr);
            let mut v = vec![0u8; r.bytes as usize];
            // SAFETY: checked range; the stream that writes it has drained (other streams
            // touch other bytes: the hazard check).
            unsafe { std::ptr::copy_nonoverlapping(s.0, v.as_mut_ptr(), v.len()) };
            bytes.push(v);
        }
        let (results, transient) = run(h, bytes).map_err(|e| DeviceError::Host(Box::new(e)))?;
        for (r, v) in h.results.iter().zip(&results) {
            if v.len() as u64 != r.bytes {
                return Err(DeviceError::Call {
                    what: format!("host call of step {}", h.step),
                    msg: format!("{} result bytes for a range of {}", v.len(), r.bytes),
                });
            }
            self.bounds(*r)?;
            let d = self.addr(r.ptr);
            // SAFETY: checked range.
            unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), d.0, v.len()) };
        }
        self.stats.host_calls += 1;
        Ok(transient)
    }

    fn record(&mut self, stream: Stream, e: Event) -> Result<(), DeviceError> {
        let ev = self.event(e);
        let gen = ev.issued.fetch_add(1, Ordering::SeqCst) + 1;
        self.submit(
            stream,
            Box::new(move || {
                let (m, cv) = &ev.done;
                if let Ok(mut d) = m.lock() {
                    *d = (*d).max(gen);
                }
                cv.notify_all();
                Ok(())
            }),
        )
    }

    fn wait(&mut self, stream: Stream, e: Event) -> Result<(), DeviceError> {
        let ev = self.event(e);
        let gen = ev.issued.load(Ordering::SeqCst);
        if gen == 0 {
            return Ok(());
        }
        self.submit(
            stream,
            Box::new(move || {
                let (m, cv) = &ev.done;
                let mut d = m
                    .lock()
                    .map_err(|_| DeviceError::Unavailable("event lock".into()))?;
                while *d < gen {
                    d = cv
                        .wait(d)
                        .map_err(|_| DeviceError::Unavailable("event lock".into()))?;
                }
                Ok(())
            }),
        )
    }

    fn synchronize(&mut self) -> Result<(), DeviceError> {
        for s in 0..self.streams.len() {
            self.drain(s)?;
        }
        self.failed()
    }

    fn device_bytes(&self) -> Option<u64> {
        Some(self.arena.bytes() + self.scratch.bytes())
    }
}
