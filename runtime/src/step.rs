//! The embedding API: a trainer compiles its step once (`ebb_pipeline::api::Compiler`), makes one
//! [`Runtime`] from the plan, and calls [`Runtime::step`] with every batch's shapes and inputs.
//!
//! Each step: the plan is finalized at the batch's bindings under the budget (from the LRU
//! [`PlanCache`] when the shape was seen before), the chosen schedule variant is made into an
//! executable [`Program`], the decisions into [`Events`](crate::exec::Events) (on the CPU, kept
//! with the arena offsets for the next steps at the same finalized plan and bindings), and the
//! step runs on the executor set ([`Runtime::set_executor`]: the CPU's by default, on a thread
//! of rayon's global pool — on the caller's thread when no kernel of the step splits its work
//! at its shapes — or a device's) with evictions, recomputes and swaps performed.
//! [`StepReport`] says what it cost.
//!
//! Invariant checked on every step: the executor's measured peak (device bytes, the plan
//! checker's model) equals the finalized plan's `peak_bytes_planned`; a difference is a bug and
//! is reported as [`RuntimeError::Accounting`].

use crate::buffer::{ArenaAllocError, ArenaMemory, ArenaUsage};
use crate::error::ExecError;
use crate::exec::device::{self, Device, DeviceProgram, KernelCache, StepInput, StepTensor};
use crate::exec::jit::KernelMemo;
use crate::exec::pool::BufferPool;
use crate::exec::{Events, ExecStats, Executor, Offsets, Prepared, Program};
use crate::tensor::Tensor;
use ebb_ir::{Bindings, Graph, NodeId};
use ebb_plan::cache::PlanCache;
use ebb_plan::finalize::{ConcretePlan, FinalizeError, FinalizeOptions};
use ebb_plan::format::{DecisionKind, Plan};
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

/// Why a [`Runtime`] cannot be made or a step cannot run.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The plan does not embed its graph, or the embedded graph does not parse or verify.
    #[error("plan graph: {0}")]
    Graph(String),
    /// The shapes violate an assertion or fact, or the budget is infeasible (the error states
    /// the smallest feasible budget).
    #[error(transparent)]
    Finalize(#[from] FinalizeError),
    /// The executor failed (inputs that do not match the bindings, a kernel error).
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// The arena of the finalized plan cannot be allocated.
    #[error(transparent)]
    Memory(#[from] ArenaAllocError),
    /// The device executor's device is not available (no driver, no GPU) or failed.
    #[error("device: {0}")]
    Device(device::DeviceError),
    /// The device executor's command sequence has a race between streams or writes onto
    /// live bytes (a bug in Ebb: please report it).
    #[error(transparent)]
    Hazard(#[from] device::hazard::Hazard),
    /// The measured peak differs from the finalized plan's (a bug in Ebb: please report it).
    #[error("measured peak {measured} bytes differs from the planned {planned} bytes")]
    Accounting {
        /// Bytes the plan promised.
        planned: i64,
        /// Bytes the executor measured.
        measured: u64,
    },
}

/// What one step cost (bytes, FLOPs, µs, ms).
#[derive(Clone, Debug, Serialize)]
pub struct StepReport {
    /// The plan variant (schedule) finalized for these bindings.
    pub variant: usize,
    /// The finalized plan came from the cache.
    pub cache_hit: bool,
    /// Time to finalize (or fetch from the cache), µs.
    pub finalize_us: f64,
    /// Device budget in bytes, if any.
    pub budget_bytes: Option<i64>,
    /// Peak of the schedule without decisions, bytes.
    pub peak_bytes_scheduled: i64,
    /// Peak the finalized plan promises, bytes.
    pub peak_bytes_planned: i64,
    /// Peak the executor measured, bytes (equals `peak_bytes_planned`).
    pub measured_peak_bytes: u64,
    /// Arena size of the layout, bytes.
    pub arena_bytes: i64,
    /// Whether the step ran out of the arena (results at their planned offsets; see
    /// [`crate::exec::Placement`]).
    pub arena_backed: bool,
    /// Measured in the arena (0 when not arena-backed): the highest byte used, the largest
    /// bytes held at once, and the claims made and refused.
    pub arena_usage: ArenaUsage,
    /// Bytes of results their kernels wrote at the planned offset directly.
    pub arena_direct_bytes: u64,
    /// Bytes of results copied to their planned offset after the kernel (views, in-place
    /// updates, interpreted kernels, reloads, recomputes).
    pub arena_copied_bytes: u64,
    /// Bytes of results left off the arena because their range was still held (a bug if not
    /// 0).
    pub arena_unplaced_bytes: u64,
    /// Bytes of results written in place into a donated input's buffer and left there (the
    /// caller's buffer stands for the range the plan gives them; see
    /// [`crate::exec::Placement`]).
    pub in_place_kept_bytes: u64,
    /// Recompute decisions taken.
    pub recompute_decisions: usize,
    /// Swap decisions taken.
    pub swap_decisions: usize,
    /// FLOPs spent recomputing.
    pub recompute_flops: i64,
    /// FLOPs of the step without recomputation.
    pub step_flops: i64,
    /// Bytes offloaded to the host pool (each is reloaded).
    pub swap_bytes: i64,
    /// Largest bytes held in the host pool.
    pub host_peak_bytes: u64,
    /// Wall time of the execution, ms.
    pub wall_ms: f64,
    /// Part of `wall_ms` spent recomputing and reloading, ms.
    pub regen_ms: f64,
    /// Which kernels ran the fusion groups.
    pub executor: Executor,
    /// The step ran on the caller's thread: a CPU step none of whose kernels splits its work
    /// over threads at its shapes (`false`: it was handed to a thread of rayon's pool, or ran
    /// on a device).
    pub caller_thread: bool,
    /// Fusion kernels JIT-compiled during the step (the process-wide counter's change; 0
    /// once every group of the plan has been seen, at any binding, in this process or — with
    /// the on-disk kernel cache — in an earlier one on this machine).
    pub kernels_compiled: u64,
    /// Fusion kernels whose object code came from the on-disk kernel cache during the step
    /// (`ebb_codegen::disk_cache`: linked, not compiled).
    pub kernels_loaded: u64,
    /// Fusion kernels taken from the process-wide cache during the step.
    pub kernels_reused: u64,
    /// Part of `wall_ms` spent compiling kernels (and linking them), ms.
    pub jit_compile_ms: f64,
    /// Part of `wall_ms` spent reading kernels from the on-disk cache and linking them, ms.
    pub jit_load_ms: f64,
    /// Bytes of results written into recycled buffers (see [`crate::exec::pool`]) instead of
    /// newly allocated ones.
    pub recycled_bytes: u64,
    /// With a device executor ([`Executor::is_device`]): the lowered program, the hazard
    /// check and what the device measured.
    pub device: Option<DeviceReport>,
}

/// What a device executor's step did.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceReport {
    /// Sizes and counts of the command sequence.
    pub program: device::program::ProgramStats,
    /// The hazard check of the sequence (the simulated device checks every step).
    pub hazards: Option<device::hazard::HazardStats>,
    /// What the device run measured.
    pub run: device::DeviceStats,
}

/// One step's results.
pub struct StepOutput {
    /// The graph outputs, in graph output order.
    pub outputs: Vec<Tensor>,
    /// The figures.
    pub report: StepReport,
    /// The executor's per-point statistics.
    pub stats: ExecStats,
    /// The finalized plan that was executed.
    pub concrete: Arc<ConcretePlan>,
}

/// One step's results from [`Runtime::step_io`]: outputs on the host or in device memory.
pub struct StepIo {
    /// The graph outputs, in graph output order.
    pub outputs: Vec<StepTensor>,
    /// The figures.
    pub report: StepReport,
}

/// A compiled step ready to run at any shape; see the module docs.
pub struct Runtime {
    plan: Arc<Plan>,
    graph: Graph,
    cache: PlanCache,
    opts: FinalizeOptions,
    executor: Executor,
    pool: Arc<BufferPool>,
    memo: Arc<KernelMemo>,
    /// Arenas of recent steps; one still holds the outputs the caller keeps.
    arenas: Vec<Arc<ArenaMemory>>,
    arena_backed: bool,
    /// The device of a device executor, made at its first step.
    device: Option<Box<dyn Device + Send>>,
    /// Device kernels per op, kept across steps.
    kernels: Arc<KernelCache>,
    /// The last device step's lowered program and its hazard check, by its finalized plan
    /// (held, so that pointer equality identifies it): a step at the same shape and budget
    /// runs it again instead of lowering the program anew.
    lowered: Option<(
        Arc<ConcretePlan>,
        Arc<DeviceProgram>,
        Option<device::hazard::HazardStats>,
    )>,
    /// What recent CPU steps prepared from their finalized plan and bindings, most recent
    /// last (at most [`READY_KEPT`]).
    ready: Vec<Ready>,
    /// Whether CPU steps time each op ([`crate::exec::ExecStats::op_time`]).
    op_timing: bool,
}

/// What a CPU step prepares from its finalized plan and bindings before it runs (the
/// program's value ids, types and frees, its events, its arena offsets), kept for the next
/// steps at the same shape: a step at a shape seen recently skips all of it.
struct Ready {
    /// The finalized plan (held, so that pointer equality identifies it).
    concrete: Arc<ConcretePlan>,
    bindings: Bindings,
    prepared: Arc<Prepared>,
    events: Arc<Events>,
    /// Made at the first arena-backed step.
    offsets: Option<Arc<Offsets>>,
    /// No kernel of the step splits its work over threads at these bindings
    /// ([`crate::exec::no_kernel_splits`]): the step runs on the caller's thread.
    serial: bool,
}

/// Shapes whose [`Ready`] a [`Runtime`] keeps.
const READY_KEPT: usize = 8;

/// The program of a CPU step at `b` with the finalized plan `concrete` of schedule variant
/// `plan`, out of the arena `mem` when given, its events, and whether it runs on the caller's
/// thread (no kernel splits its work): from `ready` when a recent step had the same plan and
/// bindings, else prepared now and kept there.
///
/// # Errors
/// [`RuntimeError::Graph`] for a schedule outside the graph; [`RuntimeError::Exec`] when the
/// program, its events or its offsets cannot be made.
fn ready_program<'g>(
    ready: &mut Vec<Ready>,
    graph: &'g Graph,
    plan: &Plan,
    (b, concrete): (&Bindings, &Arc<ConcretePlan>),
    mem: Option<Arc<ArenaMemory>>,
) -> Result<(Program<'g>, Arc<Events>, bool), RuntimeError> {
    let seen = ready
        .iter()
        .position(|r| Arc::ptr_eq(&r.concrete, concrete) && r.bindings == *b);
    let mut r = match seen {
        Some(i) => ready.remove(i),
        None => {
            let schedule = schedule_nodes(graph, plan)?;
            let program = Program::new(graph, &schedule, b)?;
            let events = Arc::new(program.events(plan, &concrete.decisions)?);
            Ready {
                concrete: concrete.clone(),
                bindings: b.clone(),
                prepared: program.prepared(),
                events,
                offsets: None,
                serial: crate::exec::no_kernel_splits(graph, b),
            }
        }
    };
    let mut program = Program::from_prepared(graph, r.prepared.clone());
    if let Some(m) = mem {
        program = match &r.offsets {
            Some(o) => program.with_arena_offsets(o.clone(), m)?,
            None => {
                let p = program.with_arena(plan, &concrete.arena, m)?;
                r.offsets = p.arena_offsets();
                p
            }
        };
    }
    let (events, serial) = (r.events.clone(), r.serial);
    ready.push(r);
    if ready.len() > READY_KEPT {
        ready.remove(0);
    }
    Ok((program, events, serial))
}

impl Runtime {
    /// A runtime for `plan` (as written by `ebb compile`, with its embedded graph) under a
    /// device budget in bytes (`None`: no budget), pricing decisions on the plan's device
    /// ([`Plan::device`]) or, when it names none, the default profile.
    ///
    /// The plan is trusted as given. A plan read from a file should be verified against its
    /// embedded graph first: `ebb_pipeline::api::read_plan` does, as does
    /// `ebb_passes::plan::verify_plan`.
    ///
    /// # Errors
    /// [`RuntimeError::Graph`] when the plan has no embedded graph or it does not verify.
    pub fn new(plan: Plan, budget: Option<i64>) -> Result<Runtime, RuntimeError> {
        let device = plan.device.clone().unwrap_or_default();
        Runtime::with_options(
            plan,
            FinalizeOptions {
                budget,
                device,
                ..Default::default()
            },
            64,
        )
    }

    /// As [`Runtime::new`] with explicit finalize options and cache capacity (plans kept).
    ///
    /// # Errors
    /// As [`Runtime::new`].
    pub fn with_options(
        plan: Plan,
        opts: FinalizeOptions,
        cache_capacity: usize,
    ) -> Result<Runtime, RuntimeError> {
        let text = plan
            .graph_ir
            .as_deref()
            .ok_or_else(|| RuntimeError::Graph("the plan does not embed its graph".into()))?;
        let graph = ebb_ir::text::parse(text).map_err(|e| RuntimeError::Graph(e.to_string()))?;
        ebb_ir::verify::verify(&graph).map_err(|e| RuntimeError::Graph(e.to_string()))?;
        let plan = Arc::new(plan);
        let cache = PlanCache::new(plan.clone(), cache_capacity);
        // Prepared now, so a step's finalize is only what depends on its shapes.
        cache.prepare_all();
        Ok(Runtime {
            cache,
            plan,
            graph,
            opts,
            executor: Executor::default(),
            pool: Arc::new(BufferPool::new(0)),
            memo: Arc::default(),
            arenas: Vec::new(),
            arena_backed: true,
            device: None,
            kernels: Arc::default(),
            lowered: None,
            ready: Vec::new(),
            op_timing: false,
        })
    }

    /// Runs fusion groups with `executor`'s kernels from the next step on (default
    /// [`Executor::Jit`]; [`Executor::Reference`] interprets them).
    pub fn set_executor(&mut self, executor: Executor) {
        if executor != self.executor {
            self.device = None;
            self.lowered = None;
        }
        self.executor = executor;
    }

    /// The executor later steps run on.
    pub fn executor(&self) -> Executor {
        self.executor
    }

    /// Makes the device of a device executor now (it is otherwise made at the first step), so
    /// that a missing driver or GPU is found before any step; nothing for the CPU executors.
    ///
    /// # Errors
    /// [`RuntimeError::Device`]: the device is not available (no driver, no GPU, a build
    /// without the `cuda` feature), with the cause.
    pub fn open_device(&mut self) -> Result<(), RuntimeError> {
        if self.executor.is_device() {
            self.device()?;
        }
        Ok(())
    }

    /// The driver handle of the device's compute stream and the device ordinal (a `CUstream`
    /// for [`Executor::Cuda`]), for a caller that orders the work writing its device inputs
    /// before the step (DLPack's `stream` argument); `None` for executors without driver
    /// streams. Makes the device if needed.
    ///
    /// # Errors
    /// As [`Runtime::open_device`].
    pub fn device_stream(&mut self) -> Result<Option<(u64, i32)>, RuntimeError> {
        if !self.executor.is_device() {
            return Ok(None);
        }
        Ok(self.device()?.stream_handle(device::COMPUTE))
    }

    /// The device of a device executor, made now if needed.
    fn device(&mut self) -> Result<&mut (dyn Device + Send + 'static), RuntimeError> {
        if self.device.is_none() {
            let d: Box<dyn Device + Send> = match self.executor {
                Executor::Simt if !cfg!(feature = "jit") => {
                    return Err(RuntimeError::Device(device::DeviceError::Unavailable(
                        "the simulated device runs generated kernels, and this build of Ebb \
                         has no code generator: build with the `jit` feature (the `ebb` CLI's \
                         default)"
                            .into(),
                    )))
                }
                Executor::Simt => {
                    Box::new(device::simt::Simt::new().map_err(RuntimeError::Device)?)
                }
                Executor::Cuda => new_cuda(&self.plan)?,
                e => {
                    return Err(RuntimeError::Device(device::DeviceError::Unavailable(
                        format!("{e:?} is not a device executor"),
                    )))
                }
            };
            self.device = Some(d);
        }
        self.device.as_deref_mut().ok_or_else(|| {
            RuntimeError::Device(device::DeviceError::Unavailable("no device".into()))
        })
    }

    /// Times each op of later CPU steps (`true`: their [`crate::exec::ExecStats::op_time`],
    /// one clock read per op, about 1% of a sub-millisecond step on this project's VM) or not
    /// (`false`, the default: `op_time` stays empty). `ebb run` times its first and last step.
    pub fn set_op_timing(&mut self, on: bool) {
        self.op_timing = on;
    }

    /// Runs later steps out of an arena of the finalized plan's `arena_bytes` with every result
    /// at its planned offset (`true`, the default), or on heap buffers (`false`).
    pub fn set_arena_backed(&mut self, on: bool) {
        self.arena_backed = on;
        if !on {
            self.arenas.clear();
        }
    }

    /// An arena of at least `bytes` that no tensor uses: a kept one, or a new one. At most two
    /// are kept (the one the caller's outputs of the last step live in, and the next).
    fn arena_for(
        arenas: &mut Vec<Arc<ArenaMemory>>,
        bytes: u64,
    ) -> Result<Arc<ArenaMemory>, RuntimeError> {
        let free = |m: &Arc<ArenaMemory>| Arc::strong_count(m) == 1;
        arenas.retain(|m| !free(m) || m.bytes() >= bytes);
        if let Some(m) = arenas.iter().find(|m| free(m)) {
            m.reset_usage();
            return Ok(m.clone());
        }
        let m = ArenaMemory::new(bytes)?;
        arenas.push(m.clone());
        if arenas.len() > 2 {
            arenas.remove(0);
        }
        Ok(m)
    }

    /// The planned graph (its inputs and outputs are the step's).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The symbolic plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Finalized plans held by the plan cache (at most the capacity given to
    /// [`Runtime::with_options`]).
    pub fn cached_plans(&self) -> usize {
        self.cache.len()
    }

    /// How many of this runtime's finalizes (cache misses) took a plan atlas's fast path
    /// ([`Runtime::prepare_atlas`], [`Runtime::prepare_atlas_relative`]) instead of the full
    /// search.
    pub fn atlas_hits(&self) -> usize {
        self.cache.atlas_hits()
    }

    /// Prepares a plan atlas for this runtime's finalize options (its budget, device and
    /// offsets), from full finalizes at `samples` (shapes spread over the range the trainer
    /// meets, e.g. a geometric grid of sequence lengths): later steps at new shapes under the
    /// same options replay the nearest sample's decisions and layout order, checked exactly,
    /// instead of searching (`ebb_plan::finalize`'s atlas; its decisions may differ from the
    /// full search's). Returns the atlas's number of entries (0: the samples need no
    /// decisions, or the plan has several schedule variants). Costs one full finalize per
    /// sample, now.
    pub fn prepare_atlas(&self, samples: &[Bindings]) -> usize {
        self.cache.prepare_atlas(samples, &self.opts)
    }

    /// Prepares a plan atlas for a budget that is a share of each shape's peak (`50%`, which
    /// a trainer resolves to other bytes at each shape and sets with
    /// [`Runtime::set_budget`]): full finalizes at each sample under its own budget (bytes),
    /// with this runtime's device, kinds and offsets. A later step at a new shape whose budget
    /// is within `ebb_plan::finalize::RELATIVE_WITHIN` of an entry's share of its peak replays
    /// that entry, checked exactly, instead of searching. Returns the atlas's number of
    /// entries (0: the samples need no decisions, or the plan has several schedule variants).
    /// Costs one full finalize per sample, now.
    pub fn prepare_atlas_relative(&self, samples: &[(Bindings, i64)]) -> usize {
        self.cache.prepare_atlas_relative(samples, &self.opts)
    }

    /// Changes the device budget (bytes) for later steps.
    pub fn set_budget(&mut self, budget: Option<i64>) {
        self.opts.budget = budget;
    }

    /// Hands back tensors the caller no longer needs (typically the previous step's outputs
    /// once the trainer has read them): buffers no other tensor shares are kept for later
    /// steps' results of the same type and length (see [`crate::exec::pool`]), up to the
    /// planned arena's size, instead of being returned to the allocator. Inputs passed by
    /// value to [`Runtime::step`] and not held elsewhere are recycled that way already.
    pub fn recycle(&self, tensors: Vec<Tensor>) {
        let _on = self.pool.activate();
        drop(tensors);
    }

    /// Finalizes the plan at `b` (cached): the plan, whether it was a cache hit, and the time
    /// it took in µs.
    ///
    /// # Errors
    /// [`RuntimeError::Finalize`].
    pub fn finalize(
        &mut self,
        b: &Bindings,
    ) -> Result<(Arc<ConcretePlan>, bool, f64), RuntimeError> {
        let hits = self.cache.hits;
        let t = Instant::now();
        let c = self.cache.get(b, &self.opts)?;
        Ok((c, self.cache.hits > hits, t.elapsed().as_secs_f64() * 1e6))
    }

    /// Runs one step at bindings `b` on `inputs` (graph input order); see the module docs.
    ///
    /// # Errors
    /// [`RuntimeError`]: invalid shapes, infeasible budget, inputs that do not match, kernel
    /// errors, or an accounting mismatch.
    pub fn step(&mut self, b: &Bindings, inputs: Vec<Tensor>) -> Result<StepOutput, RuntimeError> {
        self.step_with_progress(b, inputs, &mut |_, _| {})
    }

    /// As [`Runtime::step`], calling `progress(point, points)` after every program point.
    ///
    /// # Errors
    /// As [`Runtime::step`].
    pub fn step_with_progress(
        &mut self,
        b: &Bindings,
        inputs: Vec<Tensor>,
        progress: &mut Progress<'_>,
    ) -> Result<StepOutput, RuntimeError> {
        let inputs = inputs.into_iter().map(StepInput::Host).collect();
        let (outputs, report, stats, concrete) = self.run_step(b, inputs, false, progress)?;
        let outputs = outputs
            .into_iter()
            .filter_map(|t| match t {
                StepTensor::Host(t) => Some(t),
                StepTensor::Device { .. } => None,
            })
            .collect();
        Ok(StepOutput {
            outputs,
            report,
            stats,
            concrete,
        })
    }

    /// As [`Runtime::step`] with inputs that may be in device memory
    /// ([`StepInput::Device`], for [`Executor::Cuda`]) and, with `on_device` and
    /// [`Executor::Cuda`], outputs copied into device allocations the caller owns
    /// ([`StepTensor::Device`]) instead of read back to the host (the other executors return
    /// host tensors).
    ///
    /// # Errors
    /// As [`Runtime::step`], and [`RuntimeError::Device`] for a device input to an executor
    /// without device memory.
    pub fn step_io(
        &mut self,
        b: &Bindings,
        inputs: Vec<StepInput>,
        on_device: bool,
    ) -> Result<StepIo, RuntimeError> {
        let on_device = on_device && self.executor == Executor::Cuda;
        let (outputs, report, ..) = self.run_step(b, inputs, on_device, &mut |_, _| {})?;
        Ok(StepIo { outputs, report })
    }

    /// A step on any executor: outputs, report, statistics, finalized plan.
    fn run_step(
        &mut self,
        b: &Bindings,
        inputs: Vec<StepInput>,
        on_device: bool,
        progress: &mut Progress<'_>,
    ) -> Result<StepParts, RuntimeError> {
        let (concrete, cache_hit, finalize_us) = self.finalize(b)?;
        let plan = self
            .plan
            .variant(concrete.variant)
            .unwrap_or(self.plan.as_ref());
        if self.executor.is_device() {
            let schedule = schedule_nodes(&self.graph, plan)?;
            let plan = plan.clone();
            return self.device_step(
                b,
                (inputs, on_device),
                progress,
                concrete,
                cache_hit,
                finalize_us,
                &plan,
                &schedule,
            );
        }
        let inputs = inputs
            .into_iter()
            .enumerate()
            .map(|(i, t)| match t {
                StepInput::Host(t) => Ok(t),
                StepInput::Device { .. } => Err(RuntimeError::Device(
                    device::DeviceError::Unavailable(format!(
                        "input {i} is in device memory; the {:?} executor takes host tensors",
                        self.executor
                    )),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        // Freed buffers are recycled across steps, up to the planned arena's size.
        self.pool
            .set_capacity(u64::try_from(concrete.arena.arena_bytes).unwrap_or(0));
        let mem = if self.arena_backed {
            Some(Runtime::arena_for(
                &mut self.arenas,
                u64::try_from(concrete.arena.arena_bytes).unwrap_or(0),
            )?)
        } else {
            None
        };
        let (program, events, serial) = ready_program(
            &mut self.ready,
            &self.graph,
            plan,
            (b, &concrete),
            mem.clone(),
        )?;
        let mut program = program
            .with_executor(self.executor)
            .with_pool(self.pool.clone())
            .with_kernel_memo(self.memo.clone());
        if !self.op_timing {
            program = program.untimed();
        }
        let points = program.points();
        let jit0 = ebb_codegen::stats();
        let reused0 = self.pool.reused_bytes();
        let t = Instant::now();
        let run = || program.run_with(inputs, Some(&events), &mut |p| progress(p, points));
        let (outputs, stats) = if serial { run() } else { on_pool(run) }?;
        let wall_ms = t.elapsed().as_secs_f64() * 1e3;
        let jit1 = ebb_codegen::stats();
        if i64::try_from(stats.peak_bytes).ok() != Some(concrete.peak_bytes_planned) {
            return Err(RuntimeError::Accounting {
                planned: concrete.peak_bytes_planned,
                measured: stats.peak_bytes,
            });
        }
        let count = |k: DecisionKind| concrete.decisions.iter().filter(|d| d.kind == k).count();
        let report = StepReport {
            variant: concrete.variant,
            cache_hit,
            finalize_us,
            budget_bytes: concrete.budget,
            peak_bytes_scheduled: concrete.peak_bytes_scheduled,
            peak_bytes_planned: concrete.peak_bytes_planned,
            measured_peak_bytes: stats.peak_bytes,
            arena_bytes: concrete.arena.arena_bytes,
            arena_backed: mem.is_some(),
            arena_usage: mem.map(|m| m.usage()).unwrap_or_default(),
            arena_direct_bytes: stats.arena_direct_bytes,
            arena_copied_bytes: stats.arena_copied_bytes,
            arena_unplaced_bytes: stats.arena_unplaced_bytes,
            in_place_kept_bytes: stats.in_place_kept_bytes,
            recompute_decisions: count(DecisionKind::Recompute),
            swap_decisions: count(DecisionKind::Swap),
            recompute_flops: concrete.recompute_flops,
            step_flops: concrete.step_flops,
            swap_bytes: concrete.swap_bytes,
            host_peak_bytes: stats.host_peak_bytes,
            wall_ms,
            regen_ms: stats.regen_time.as_secs_f64() * 1e3,
            executor: self.executor,
            caller_thread: serial,
            kernels_compiled: jit1.kernels_compiled - jit0.kernels_compiled,
            kernels_loaded: jit1.kernels_loaded - jit0.kernels_loaded,
            kernels_reused: jit1.kernels_reused - jit0.kernels_reused,
            jit_compile_ms: (jit1.compile_us - jit0.compile_us) as f64 / 1e3,
            jit_load_ms: (jit1.load_us - jit0.load_us) as f64 / 1e3,
            recycled_bytes: self.pool.reused_bytes() - reused0,
            device: None,
        };
        let outputs = outputs.into_iter().map(StepTensor::Host).collect();
        Ok((outputs, report, stats, concrete))
    }
}

/// A step's progress callback: `(point, points)` after every program point, called on the
/// thread that runs the step (a thread of rayon's global pool, or the caller's for a step
/// none of whose kernels splits its work; see [`on_pool`]).
pub type Progress<'a> = dyn FnMut(usize, usize) + Send + 'a;

/// `f()` run on a thread of rayon's global pool (directly when the caller is one).
///
/// A step's kernels split their work with rayon. From a thread outside the pool every split
/// is a job injected into the pool and a wait on a lock for its end (two thread wake-ups per
/// kernel, tens of µs each, more than a small kernel's whole work); from inside the pool a
/// split is a local `join` that another worker may steal, and the step hands over to the
/// pool once.
///
/// The caller's [`crate::exec::with_f64_dot`] setting holds on that thread too. The pool's
/// other workers stay awake while the step runs ([`crate::warm`]), so a split does not wait
/// for a sleeping worker to wake up.
///
/// A CPU step none of whose kernels splits its work at its bindings
/// ([`crate::exec::no_kernel_splits`]) gains nothing from the pool and runs on the caller's
/// thread instead, without the hand-off.
fn on_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let f64_dot = crate::exec::f64_dot();
    crate::warm::with_warm_workers(crate::warm::enabled(), || {
        crate::exec::f64_dot_set(f64_dot, f)
    })
}

/// What [`Runtime::run_step`] returns: outputs, report, statistics, the finalized plan.
type StepParts = (Vec<StepTensor>, StepReport, ExecStats, Arc<ConcretePlan>);

impl Runtime {
    /// A step through the device executor: the program lowered with its decisions and arena
    /// layout, checked for hazards (on the simulated device), run on the device.
    #[allow(clippy::too_many_arguments)]
    fn device_step(
        &mut self,
        b: &Bindings,
        (inputs, on_device): (Vec<StepInput>, bool),
        progress: &mut Progress<'_>,
        concrete: Arc<ConcretePlan>,
        cache_hit: bool,
        finalize_us: f64,
        plan: &Plan,
        schedule: &[NodeId],
    ) -> Result<StepParts, RuntimeError> {
        let check = self.executor == Executor::Simt;
        let kernels = self.kernels.clone();
        let graph = std::mem::replace(&mut self.graph, Graph::new("moved"));
        let kept = self
            .lowered
            .as_ref()
            .filter(|(c, ..)| Arc::ptr_eq(c, &concrete))
            .map(|(_, l, h)| (l.clone(), *h));
        let out = (|| {
            let program = Program::new(&graph, schedule, b)?
                .with_executor(Executor::Jit)
                .with_pool(self.pool.clone())
                .with_kernel_memo(self.memo.clone());
            let (lowered, hazards) = match kept {
                Some(k) => k,
                None => {
                    let events = program.events(plan, &concrete.decisions)?;
                    let lowered = Arc::new(DeviceProgram::new(
                        &program,
                        plan,
                        &concrete.arena,
                        &events,
                        &kernels,
                    )?);
                    let hazards = if check {
                        Some(device::hazard::check(&lowered.cmds)?)
                    } else {
                        None
                    };
                    self.lowered = Some((concrete.clone(), lowered.clone(), hazards));
                    (lowered, hazards)
                }
            };
            let points = program.points();
            let jit0 = ebb_codegen::stats();
            let t = Instant::now();
            let dev = self.device()?;
            let (outputs, run) = lowered.run(&program, dev, inputs, on_device, &mut |p| {
                progress(p, points)
            })?;
            let wall_ms = t.elapsed().as_secs_f64() * 1e3;
            let jit1 = ebb_codegen::stats();
            Ok::<_, RuntimeError>((
                outputs,
                run,
                lowered.stats.clone(),
                hazards,
                wall_ms,
                jit0,
                jit1,
            ))
        })();
        self.graph = graph;
        let (outputs, run, program, hazards, wall_ms, jit0, jit1) = out?;
        if i64::try_from(run.peak_bytes).ok() != Some(concrete.peak_bytes_planned) {
            return Err(RuntimeError::Accounting {
                planned: concrete.peak_bytes_planned,
                measured: run.peak_bytes,
            });
        }
        let stats = ExecStats {
            resident_bytes: run.per_point.clone(),
            regen_peak: vec![0; run.per_point.len()],
            peak_bytes: run.peak_bytes,
            peak_point: ebb_ir::Point::new(run.peak_point),
            ..Default::default()
        };
        let count = |k: DecisionKind| concrete.decisions.iter().filter(|d| d.kind == k).count();
        let report = StepReport {
            variant: concrete.variant,
            cache_hit,
            finalize_us,
            budget_bytes: concrete.budget,
            peak_bytes_scheduled: concrete.peak_bytes_scheduled,
            peak_bytes_planned: concrete.peak_bytes_planned,
            measured_peak_bytes: run.peak_bytes,
            arena_bytes: concrete.arena.arena_bytes,
            arena_backed: true,
            arena_usage: crate::buffer::ArenaUsage {
                high_water_bytes: run.arena_high_water_bytes,
                ..Default::default()
            },
            arena_direct_bytes: 0,
            arena_copied_bytes: 0,
            arena_unplaced_bytes: 0,
            in_place_kept_bytes: 0,
            recompute_decisions: count(DecisionKind::Recompute),
            swap_decisions: count(DecisionKind::Swap),
            recompute_flops: concrete.recompute_flops,
            step_flops: concrete.step_flops,
            swap_bytes: concrete.swap_bytes,
            host_peak_bytes: program.pool_bytes,
            wall_ms,
            regen_ms: 0.0,
            executor: self.executor,
            caller_thread: false,
            kernels_compiled: jit1.kernels_compiled - jit0.kernels_compiled,
            kernels_loaded: jit1.kernels_loaded - jit0.kernels_loaded,
            kernels_reused: jit1.kernels_reused - jit0.kernels_reused,
            jit_compile_ms: (jit1.compile_us - jit0.compile_us) as f64 / 1e3,
            jit_load_ms: (jit1.load_us - jit0.load_us) as f64 / 1e3,
            recycled_bytes: 0,
            device: Some(DeviceReport {
                program,
                hazards,
                run,
            }),
        };
        Ok((outputs, report, stats, concrete))
    }
}

/// The GPU kernels of `plan` (every schedule variant) at the bindings `shapes`, with their
/// PTX ([`ebb_codegen::gpu::ptx`]): what `ebb compile --target cuda` stores with the plan.
///
/// # Errors
/// [`RuntimeError::Graph`] for a plan without its graph; [`RuntimeError::Exec`] when the
/// shapes do not evaluate; [`RuntimeError::Device`] when a kernel's PTX cannot be generated.
pub fn plan_kernels(
    plan: &Plan,
    shapes: &[Bindings],
) -> Result<Vec<ebb_plan::format::PlanKernel>, RuntimeError> {
    let rt = Runtime::new(plan.clone(), None)?;
    let cache = KernelCache::default();
    let mut kernels: std::collections::BTreeMap<String, Arc<ebb_codegen::gpu::GpuKernel>> =
        Default::default();
    let variants = std::iter::once(plan).chain(plan.alternatives.iter());
    for variant in variants {
        let schedule = schedule_nodes(rt.graph(), variant)?;
        for b in shapes {
            let prog = Program::new(rt.graph(), &schedule, b)?;
            for k in device::program::device_kernels(&prog, &cache) {
                kernels.entry(k.name()).or_insert(k);
            }
        }
    }
    kernels
        .into_iter()
        .map(|(name, k)| {
            let ptx = ebb_codegen::gpu::ptx(&k).map_err(|e| {
                RuntimeError::Device(device::DeviceError::Kernel {
                    name: name.clone(),
                    msg: e.to_string(),
                })
            })?;
            Ok(ebb_plan::format::PlanKernel {
                name,
                arch: ebb_codegen::gpu::SM.to_string(),
                ptx,
            })
        })
        .collect()
}

/// The CUDA device (the `cuda` feature).
#[cfg(feature = "cuda")]
fn new_cuda(plan: &Plan) -> Result<Box<dyn Device + Send>, RuntimeError> {
    if !cfg!(feature = "jit") && plan.kernels.is_empty() {
        return Err(RuntimeError::Device(device::DeviceError::Unavailable(
            "this plan carries no PTX and this build of Ebb has no code generator: compile \
             the plan with `ebb compile FILE --target cuda` (a build with the `jit` feature) \
             or run it with such a build"
                .into(),
        )));
    }
    let mut d = device::cuda::Cuda::new().map_err(RuntimeError::Device)?;
    // The plan's stored kernels (`ebb compile --target cuda`) are loaded instead of generated.
    d.set_ptx(
        plan.kernels
            .iter()
            .map(|k| (k.name.clone(), k.ptx.clone()))
            .collect(),
    );
    Ok(Box::new(d))
}

/// Without the `cuda` feature: an error saying so.
#[cfg(not(feature = "cuda"))]
fn new_cuda(_plan: &Plan) -> Result<Box<dyn Device + Send>, RuntimeError> {
    Err(RuntimeError::Device(device::DeviceError::Unavailable(
        "this build of Ebb has no CUDA executor: build with the `cuda` feature \
         (cargo build --features cuda)"
            .into(),
    )))
}

/// The schedule of `plan` (program-order positions of `graph`) as node ids.
///
/// # Errors
/// [`RuntimeError::Graph`] when a position is not a node of the graph.
pub fn schedule_nodes(graph: &Graph, plan: &Plan) -> Result<Vec<NodeId>, RuntimeError> {
    let order = graph.order();
    plan.schedule
        .iter()
        .map(|&pos| {
            order.get(pos.index()).copied().ok_or_else(|| {
                RuntimeError::Graph(format!(
                    "the plan schedules position {pos}; the graph has {}",
                    order.len()
                ))
            })
        })
        .collect()
}
