//! The JIT: one compile thread per process owns the LLVM context and the MCJIT engines (LLVM
//! contexts are not thread-safe); callers send it kernels to build and wait for the machine
//! code's address. Kernels are cached by their key — the region's textual IR (symbolic
//! shapes, so one kernel serves every binding), the stride classes and the in-place stores —
//! for the life of the process: a second shape, or a second layer with the same group,
//! compiles nothing.
//!
//! Pipeline per kernel: [`crate::lower::emit`], LLVM's `default<O3>` for the host CPU (its
//! name and features as the functions' `target-cpu`/`target-features`, so the loop vectorizer
//! and MCJIT's code generator use AVX2/AVX-512 where the CPU has them), MCJIT at `-O3`.
//! No fast-math flags: results are the IEEE results of the operations emitted.

use crate::lower::{emit, KernelSpec};
use crate::{CodegenError, Kernel, KernelFn};
use inkwell::context::Context;
use inkwell::execution_engine::ExecutionEngine;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, InitializationConfig, RelocMode, Target, TargetMachine};
use inkwell::OptimizationLevel;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Process-wide JIT counters (see [`crate::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JitStats {
    /// Kernels compiled.
    pub kernels_compiled: u64,
    /// Kernel requests served from the cache.
    pub kernels_reused: u64,
    /// Total compile time (IR, optimization, machine code), µs.
    pub compile_us: u64,
}

static COMPILED: AtomicU64 = AtomicU64::new(0);
static REUSED: AtomicU64 = AtomicU64::new(0);
static COMPILE_US: AtomicU64 = AtomicU64::new(0);

/// Current counters.
pub fn stats() -> JitStats {
    JitStats {
        kernels_compiled: COMPILED.load(Ordering::Relaxed),
        kernels_reused: REUSED.load(Ordering::Relaxed),
        compile_us: COMPILE_US.load(Ordering::Relaxed),
    }
}

/// Builds a module's functions and returns the entry's name.
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
    /// Any module ([`module`]).
    Module(ModuleBuilder),
}

/// A request to the compile thread: what to build and where to answer.
struct Request {
    job: Job,
    reply: Sender<Result<usize, String>>,
}

type Cache = Mutex<HashMap<String, Result<Kernel, CodegenError>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn compiler() -> &'static Mutex<Option<Sender<Request>>> {
    static TX: OnceLock<Mutex<Option<Sender<Request>>>> = OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = channel::<Request>();
        let spawned = std::thread::Builder::new()
            .name("ebb-jit".into())
            .spawn(move || {
                let ctx = Context::create();
                let mut engines: Vec<ExecutionEngine> = Vec::new();
                let tm = host_machine();
                for (n, req) in rx.into_iter().enumerate() {
                    let out = match &tm {
                        Ok(tm) => compile(&ctx, tm, req.job, n, &mut engines),
                        Err(e) => Err(e.clone()),
                    };
                    // The requester may have given up; nothing to do then.
                    let _ = req.reply.send(out);
                }
            });
        Mutex::new(spawned.ok().map(|_| tx))
    })
}

/// The host CPU's target machine (and its name and features).
fn host_machine() -> Result<(TargetMachine, String, String), String> {
    Target::initialize_native(&InitializationConfig::default())?;
    let triple = TargetMachine::get_default_triple();
    let target = Target::from_triple(&triple).map_err(|e| e.to_string())?;
    let cpu = TargetMachine::get_host_cpu_name().to_string();
    let features = TargetMachine::get_host_cpu_features().to_string();
    let tm = target
        .create_target_machine(
            &triple,
            &cpu,
            &features,
            OptimizationLevel::Aggressive,
            RelocMode::Default,
            CodeModel::JITDefault,
        )
        .ok_or_else(|| format!("LLVM has no target machine for {triple}"))?;
    Ok((tm, cpu, features))
}

fn compile<'ctx>(
    ctx: &'ctx Context,
    (tm, cpu, features): &(TargetMachine, String, String),
    job: Job,
    n: usize,
    engines: &mut Vec<ExecutionEngine<'ctx>>,
) -> Result<usize, String> {
    let name = format!("ebb_kernel_{n}");
    let module = ctx.create_module(&name);
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    let (entry, region) = match job {
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
            emit(ctx, &module, &spec, &name, cpu, features).map_err(|e| e.to_string())?;
            (name.clone(), Some(region))
        }
        Job::Module(build) => {
            let entry = build(ctx, &module)?;
            // The host's CPU for every function, so the vectorizer sees its features.
            for f in module.get_functions() {
                f.add_attribute(
                    inkwell::attributes::AttributeLoc::Function,
                    ctx.create_string_attribute("target-cpu", cpu),
                );
                f.add_attribute(
                    inkwell::attributes::AttributeLoc::Function,
                    ctx.create_string_attribute("target-features", features),
                );
            }
            (entry, None)
        }
    };
    module.verify().map_err(|e| format!("invalid IR: {e}"))?;
    module
        .run_passes("default<O3>", tm, PassBuilderOptions::create())
        .map_err(|e| e.to_string())?;
    if let Some(dir) = std::env::var_os("EBB_JIT_DUMP") {
        // Debugging aid: the optimized IR of every kernel, and the region it was made from.
        let dir = std::path::Path::new(&dir);
        let _ = module.print_to_file(dir.join(format!("{name}.ll")));
        if let Some(region) = &region {
            let _ = std::fs::write(dir.join(format!("{name}.ebb")), region.to_string());
        }
    }
    let engine = module
        .create_jit_execution_engine(OptimizationLevel::Aggressive)
        .map_err(|e| e.to_string())?;
    let addr = engine
        .get_function_address(&entry)
        .map_err(|e| e.to_string())?;
    engines.push(engine);
    Ok(addr)
}

/// Counts a kernel the caller took from its own cache of this module's kernels (as
/// [`stats`]' `kernels_reused`).
pub fn count_reuse() {
    REUSED.fetch_add(1, Ordering::Relaxed);
}

/// The kernel of `spec`, from the cache or compiled now (blocking on the compile thread).
///
/// # Errors
/// [`CodegenError::Jit`] when LLVM cannot build the kernel (the same error is returned for
/// the same key afterwards, without retrying).
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
    let res = submit(Job::Fusion {
        region: spec.region.clone(),
        layout: spec.layout.clone(),
        classes: spec.classes.to_vec(),
        in_place: spec.in_place.to_vec(),
    })
    .map(|addr| {
        // SAFETY: `addr` is the entry of a function with the kernel ABI, emitted by `emit`
        // and kept alive by its engine for the life of the process.
        let f: KernelFn = unsafe { std::mem::transmute::<usize, KernelFn>(addr) };
        Kernel { f }
    });
    COMPILED.fetch_add(1, Ordering::Relaxed);
    COMPILE_US.fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
    cache()
        .lock()
        .map_err(|_| poisoned())?
        .insert(key, res.clone());
    res
}

/// The region's structure: per member in program order its op, result element types and
/// ranks, and operands by position; then the outputs. Names, source locations and extents
/// are left out (the kernel takes extents as parameters; what the shapes decide, which reads
/// are aligned and which broadcasts are index maps, is in the
/// [`KernelLayout`](crate::layout::KernelLayout), part of the
/// cache key too), so the same group in every layer, and the optimizer update of every
/// parameter shape, share one kernel. Payloads are kept except the shapes of
/// `broadcast_in_dim`, `reshape` and `iota`, which the kernel reads only through index maps.
pub fn structure_key(region: &ebb_ir::Graph) -> String {
    use std::fmt::Write;
    let pos: HashMap<ebb_ir::NodeId, usize> = region
        .order()
        .iter()
        .enumerate()
        .map(|(k, &id)| (id, k))
        .collect();
    let at = |v: &ebb_ir::ValueRef| (pos.get(&v.node).copied().unwrap_or(usize::MAX), v.output);
    let mut key = String::new();
    for &id in region.order() {
        let node = region.node(id);
        let op = match &node.op {
            // Input names differ between groups; the index is the position.
            ebb_ir::Op::Input(_) => "input".to_string(),
            ebb_ir::Op::BroadcastInDim(b) => format!("broadcast_in_dim {:?}", b.dims),
            ebb_ir::Op::Reshape(_) | ebb_ir::Op::Iota(_) => node.kind().name().to_string(),
            op => format!("{op:?}"),
        };
        let ins: Vec<_> = region.operands(id).iter().map(at).collect();
        let types: Vec<_> = node.outputs.iter().map(|t| (t.dtype, t.rank())).collect();
        let _ = writeln!(key, "{op} {types:?} {ins:?}");
    }
    let outs: Vec<_> = region.outputs().iter().map(at).collect();
    let _ = write!(key, "-> {outs:?}");
    key
}

/// Sends `job` to the compile thread and waits for the entry's address.
fn submit(job: Job) -> Result<usize, CodegenError> {
    let (reply, rx) = channel();
    let sent = compiler()
        .lock()
        .map_err(|_| poisoned())?
        .as_ref()
        .map(|tx| tx.send(Request { job, reply }).is_ok())
        .unwrap_or(false);
    if !sent {
        return Err(CodegenError::Jit("cannot start the compile thread".into()));
    }
    match rx.recv() {
        Ok(Ok(addr)) if addr != 0 => Ok(addr),
        Ok(Ok(_)) => Err(CodegenError::Jit("null kernel address".into())),
        Ok(Err(e)) => Err(CodegenError::Jit(e)),
        Err(_) => Err(CodegenError::Jit("the compile thread stopped".into())),
    }
}

type ModuleCache = Mutex<HashMap<String, Result<usize, CodegenError>>>;

/// The entry address of the module `build` makes (optimized at `default<O3>` for the host
/// CPU, MCJIT), cached by `key` for the life of the process (counted in [`stats`]).
///
/// # Errors
/// [`CodegenError::Jit`] when the builder or LLVM fails (the same error is returned for the
/// same key afterwards).
pub fn module(key: String, build: ModuleBuilder) -> Result<usize, CodegenError> {
    static CACHE: OnceLock<ModuleCache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(r) = cache.lock().map_err(|_| poisoned())?.get(&key) {
        REUSED.fetch_add(1, Ordering::Relaxed);
        return r.clone();
    }
    let t0 = Instant::now();
    let res = submit(Job::Module(build));
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
