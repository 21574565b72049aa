//! The JIT: a pool of compile threads per process ([`compile_threads`]: one per core, at most
//! 8) turns kernels into object code, each thread owning its LLVM context and target machine
//! (an LLVM context is not thread-safe; distinct contexts compile in parallel); callers send
//! kernels to build to the pool and wait for the object, which [`crate::loader`] links into
//! the process (once per symbol, so two threads compiling the same kernel at once link it
//! once). Kernels are cached by their key — the region's structure (symbolic shapes, so one kernel serves every binding), the
//! stride classes and the in-place stores — for the life of the process (a second shape, or a
//! second layer with the same group, compiles nothing) and on disk ([`crate::disk_cache`]: a
//! second process running the same plan compiles nothing either; it links the cached object).
//!
//! Pipeline per kernel: [`crate::lower::emit`], LLVM's `default<O3>` for the host CPU (its
//! name and features as the functions' `target-cpu`/`target-features`, so the loop vectorizer
//! and the code generator use AVX2/AVX-512 where the CPU has them), object code from the host
//! target machine at `-O3` (position-independent), linked by ORC's LLJIT.
//! No fast-math flags: results are the IEEE results of the operations emitted.

use crate::lower::emit;
use crate::spec::{structure_key, KernelSpec};
use crate::spec::{COMPILED, COMPILE_US, LOADED, LOAD_US, REUSED};
use crate::{disk_cache, loader, CodegenError, Kernel, KernelFn};
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine,
};
use inkwell::values::AsValueRef;
use inkwell::OptimizationLevel;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Builds a module's functions and returns the entry's name ([`module`]).
pub type ModuleBuilder =
    Box<dyn for<'ctx> FnOnce(&'ctx Context, &Module<'ctx>) -> Result<String, String> + Send>;

/// What the compile thread builds.
enum Job {
    /// A host fusion kernel: the spec's owned parts.
    Fusion {
        region: ebb_ir::Graph,
        layout: crate::KernelLayout,
        classes: Vec<crate::StrideClass>,
        in_place: Vec<(usize, usize)>,
    },
    /// Any module ([`module`]) and the LLVM pass pipeline it is optimized with.
    Module(ModuleBuilder, Pipeline),
}

/// The LLVM pass pipeline a [`module`] is optimized with before code generation.
///
/// Neither changes a result's bits: the generated IR carries no fast-math flags, so LLVM may
/// not reassociate or contract at any level ([`crate::math`]'s invariant).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pipeline {
    /// `default<O3>`: the kernels a step runs on the host.
    Speed,
    /// `default<O1>` and LLVM's `-O0` code generator: code that checks rather than serves (the
    /// simulated GPU's kernels), where compile time matters more than run time (the dropout
    /// GPT step's largest fused kernels take ~3,400 `i64` parameters).
    CompileTime,
}

impl Job {
    /// The pipeline the job's module is optimized with.
    fn pipeline(&self) -> Pipeline {
        match self {
            Job::Fusion { .. } => Pipeline::Speed,
            Job::Module(_, p) => *p,
        }
    }
}

impl Pipeline {
    /// The pipeline's text for `LLVMRunPasses`.
    fn passes(self) -> &'static str {
        match self {
            Pipeline::Speed => "default<O3>",
            Pipeline::CompileTime => "default<O1>",
        }
    }
}

/// A request to the compile thread: what to build, the entry's symbol and where to answer
/// (with the object code).
struct Request {
    job: Job,
    symbol: String,
    reply: Sender<Result<Vec<u8>, String>>,
}

type Cache = Mutex<HashMap<String, Result<Kernel, CodegenError>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The number of compile threads: the machine's cores (`available_parallelism`), at most 8.
/// Requests from one caller are answered in order; requests from concurrent callers (test
/// threads, streams of the simulated device) compile side by side.
pub fn compile_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

fn compiler() -> &'static Mutex<Option<Sender<Request>>> {
    static TX: OnceLock<Mutex<Option<Sender<Request>>>> = OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = channel::<Request>();
        let rx = std::sync::Arc::new(Mutex::new(rx));
        let mut any = false;
        for i in 0..compile_threads() {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("ebb-jit-{i}"))
                .spawn(move || {
                    let ctx = Context::create();
                    let speed = host_machine(OptimizationLevel::Aggressive);
                    // Made at the first job that asks for it (most processes never do).
                    let mut quick = None;
                    loop {
                        // One thread waits on the queue at a time; the lock is released before
                        // compiling.
                        let req = match rx.lock() {
                            Ok(rx) => rx.recv(),
                            Err(_) => return,
                        };
                        let Ok(req) = req else { return };
                        let tm = match req.job.pipeline() {
                            Pipeline::Speed => &speed,
                            Pipeline::CompileTime => {
                                quick.get_or_insert_with(|| host_machine(OptimizationLevel::None))
                            }
                        };
                        let out = match tm {
                            Ok(tm) => compile(&ctx, tm, req.job, &req.symbol),
                            Err(e) => Err(e.clone()),
                        };
                        // The requester may have given up; nothing to do then.
                        let _ = req.reply.send(out);
                    }
                });
            any |= spawned.is_ok();
        }
        Mutex::new(any.then_some(tx))
    })
}

/// The host CPU's name and features (as LLVM names them).
fn host_cpu() -> &'static (String, String) {
    static CPU: OnceLock<(String, String)> = OnceLock::new();
    CPU.get_or_init(|| {
        (
            TargetMachine::get_host_cpu_name().to_string(),
            TargetMachine::get_host_cpu_features().to_string(),
        )
    })
}

/// The host CPU's target machine (and its name and features) generating code at `level`
/// (`Aggressive`: `-O3`; `None`: LLVM's fast instruction selection and register allocation),
/// position-independent (ORC links it anywhere in memory).
fn host_machine(level: OptimizationLevel) -> Result<(TargetMachine, String, String), String> {
    Target::initialize_native(&InitializationConfig::default())?;
    let triple = TargetMachine::get_default_triple();
    let target = Target::from_triple(&triple).map_err(|e| e.to_string())?;
    let (cpu, features) = host_cpu().clone();
    let tm = target
        .create_target_machine(
            &triple,
            &cpu,
            &features,
            level,
            RelocMode::PIC,
            CodeModel::Default,
        )
        .ok_or_else(|| format!("LLVM has no target machine for {triple}"))?;
    Ok((tm, cpu, features))
}

/// The object code of `job`, whose entry function is named `name` (every other function it
/// defines is internal, so that objects linked into one process never clash).
fn compile(
    ctx: &Context,
    (tm, cpu, features): &(TargetMachine, String, String),
    job: Job,
    name: &str,
) -> Result<Vec<u8>, String> {
    let module = ctx.create_module(name);
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    let passes = job.pipeline();
    let region = match job {
        Job::Fusion {
            region,
            layout,
            classes,
            in_place,
        } => {
            let spec = KernelSpec {
                region: &region,
                layout: &layout,
                classes: &classes,
                in_place: &in_place,
            };
            emit(ctx, &module, &spec, name, cpu, features).map_err(|e| e.to_string())?;
            Some(region)
        }
        Job::Module(build, _) => {
            let entry = build(ctx, &module)?;
            for f in module.get_functions() {
                if f.count_basic_blocks() == 0 {
                    continue; // a declaration (libm)
                }
                if f.get_name().to_str() == Ok(entry.as_str()) {
                    let c = std::ffi::CString::new(name).map_err(|e| e.to_string())?;
                    // SAFETY: renames a function of a module this thread owns.
                    unsafe {
                        llvm_sys::core::LLVMSetValueName2(f.as_value_ref(), c.as_ptr(), name.len())
                    };
                } else {
                    f.set_linkage(Linkage::Internal);
                }
                // The host's CPU for every function, so the vectorizer sees its features.
                f.add_attribute(
                    inkwell::attributes::AttributeLoc::Function,
                    ctx.create_string_attribute("target-cpu", cpu),
                );
                f.add_attribute(
                    inkwell::attributes::AttributeLoc::Function,
                    ctx.create_string_attribute("target-features", features),
                );
            }
            if module.get_function(name).is_none() {
                return Err(format!("the module defines no entry `{entry}`"));
            }
            None
        }
    };
    module.verify().map_err(|e| format!("invalid IR: {e}"))?;
    module
        .run_passes(passes.passes(), tm, PassBuilderOptions::create())
        .map_err(|e| e.to_string())?;
    if let Some(dir) = std::env::var_os("EBB_JIT_DUMP") {
        // Debugging aid: the optimized IR of every kernel, and the region it was made from.
        let dir = std::path::Path::new(&dir);
        let _ = module.print_to_file(dir.join(format!("{name}.ll")));
        if let Some(region) = &region {
            let _ = std::fs::write(dir.join(format!("{name}.ebb")), region.to_string());
        }
    }
    let object = tm
        .write_to_memory_buffer(&module, FileType::Object)
        .map_err(|e| e.to_string())?;
    Ok(object.as_slice().to_vec())
}

/// The on-disk cache key of a kernel whose in-process key is `key`: the code generator's
/// build, LLVM's version, the target and the host CPU, then `key` (see [`disk_cache`]).
fn disk_key(key: &str) -> String {
    let (cpu, features) = host_cpu();
    let (mut major, mut minor, mut patch) = (0, 0, 0);
    // SAFETY: writes three integers.
    unsafe { llvm_sys::core::LLVMGetVersion(&mut major, &mut minor, &mut patch) };
    format!(
        "{}\nllvm {major}.{minor}.{patch}\ntriple {}\ncpu {cpu}\nfeatures {features}\n{key}",
        disk_cache::build_id(),
        TargetMachine::get_default_triple()
    )
}

/// The kernel function's symbol: from the key's SHA-256, so that it is the same in every
/// process (a cached object defines it) and distinct between kernels.
fn symbol_of(key: &str) -> String {
    let h = Sha256::digest(key.as_bytes());
    let hex: String = h[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("ebb_kernel_{hex}")
}

/// Compiles the kernel of `req` on the compile thread; its object code.
fn compile_on_thread(
    req: Request,
    rx: std::sync::mpsc::Receiver<Result<Vec<u8>, String>>,
) -> Result<Vec<u8>, String> {
    let sent = compiler()
        .lock()
        .map_err(|_| "the compile thread's lock is poisoned".to_string())?
        .as_ref()
        .map(|tx| tx.send(req).is_ok())
        .unwrap_or(false);
    if !sent {
        return Err("cannot start the compile thread".into());
    }
    rx.recv()
        .map_err(|_| "the compile thread stopped".to_string())?
}

/// The kernel at `addr` (from the loader).
fn kernel_at(addr: usize) -> Result<Kernel, CodegenError> {
    if addr == 0 {
        return Err(CodegenError::Jit("null kernel address".into()));
    }
    // SAFETY: `addr` is the entry of a function with the kernel ABI, emitted by `emit` and
    // linked by the loader, whose memory lives for the rest of the process.
    let f: KernelFn = unsafe { std::mem::transmute::<usize, KernelFn>(addr) };
    Ok(Kernel { f })
}

/// The kernel of `spec`: from the process's cache, else the object code from the on-disk
/// cache ([`disk_cache`]), else compiled now (blocking on the compile thread) and stored there;
/// the object is linked into the process by [`loader`].
///
/// # Errors
/// [`CodegenError::Jit`] when LLVM cannot build or link the kernel (the same error is returned
/// for the same key afterwards, without retrying).
pub fn kernel(spec: &KernelSpec) -> Result<Kernel, CodegenError> {
    let key = format!(
        "{}\n{:?}\n{:?}\n{:?}",
        structure_key(spec.region),
        spec.layout,
        spec.classes,
        spec.in_place
    );
    if let Some(k) = cache().lock().map_err(|_| poisoned())?.get(&key) {
        REUSED.fetch_add(1, Ordering::Relaxed);
        return k.clone();
    }
    let t0 = Instant::now();
    let symbol = symbol_of(&key);
    let disk = disk_cache::kernels_dir().map(|dir| (dir, disk_key(&key)));
    let cached = disk
        .as_ref()
        .and_then(|(dir, k)| disk_cache::load(dir, k))
        .and_then(|object| loader::load(&object, &symbol).ok());
    let res = match cached {
        Some(addr) => {
            LOADED.fetch_add(1, Ordering::Relaxed);
            LOAD_US.fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
            kernel_at(addr)
        }
        None => {
            let (reply, rx) = channel();
            let req = Request {
                job: Job::Fusion {
                    region: spec.region.clone(),
                    layout: spec.layout.clone(),
                    classes: spec.classes.to_vec(),
                    in_place: spec.in_place.to_vec(),
                },
                symbol: symbol.clone(),
                reply,
            };
            let res = compile_on_thread(req, rx).and_then(|object| {
                if let Some((dir, k)) = &disk {
                    // Without the cache the kernel still runs: a write error is not one.
                    let _ = disk_cache::store(dir, k, &object, disk_cache::max_bytes());
                }
                loader::load(&object, &symbol)
            });
            COMPILED.fetch_add(1, Ordering::Relaxed);
            COMPILE_US.fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
            res.map_err(CodegenError::Jit).and_then(kernel_at)
        }
    };
    cache()
        .lock()
        .map_err(|_| poisoned())?
        .insert(key, res.clone());
    res
}

type ModuleCache = Mutex<HashMap<String, Result<usize, CodegenError>>>;

/// The entry address of the module `build` makes (optimized by `pipeline` for the host CPU,
/// compiled to object code and linked by [`loader`]), cached by `key` (and `pipeline`) for the
/// life of the process (counted in [`stats`]; not in the on-disk cache).
///
/// # Errors
/// [`CodegenError::Jit`] when the builder or LLVM fails (the same error is returned for the
/// same key afterwards).
pub fn module(
    key: String,
    build: ModuleBuilder,
    pipeline: Pipeline,
) -> Result<usize, CodegenError> {
    let key = format!("{pipeline:?}\n{key}");
    static CACHE: OnceLock<ModuleCache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(r) = cache.lock().map_err(|_| poisoned())?.get(&key) {
        REUSED.fetch_add(1, Ordering::Relaxed);
        return r.clone();
    }
    let t0 = Instant::now();
    let symbol = symbol_of(&format!("module\n{key}"));
    let (reply, rx) = channel();
    let req = Request {
        job: Job::Module(build, pipeline),
        symbol: symbol.clone(),
        reply,
    };
    let res = compile_on_thread(req, rx)
        .and_then(|object| loader::load(&object, &symbol))
        .and_then(|a| {
            if a == 0 {
                Err("null entry address".into())
            } else {
                Ok(a)
            }
        })
        .map_err(CodegenError::Jit);
    COMPILED.fetch_add(1, Ordering::Relaxed);
    COMPILE_US.fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
    cache
        .lock()
        .map_err(|_| poisoned())?
        .insert(key, res.clone());
    res
}

fn poisoned() -> CodegenError {
    CodegenError::Jit("the kernel cache lock is poisoned".into())
}
