//! The CPU executor: runs an imported [`Graph`] at concrete [`Bindings`] in a given schedule,
//! freeing every intermediate after its last use and accounting resident memory the way the
//! planner models it.
//!
//! # Use
//! [`execute`] runs once; [`Program::new`] validates a schedule and evaluates all shapes once,
//! then [`Program::run`] can be called repeatedly (loop bodies use this; a program keeps its
//! run's working vectors from one run to the next, emptied, so that a loop body's iteration
//! allocates none of them).
//!
//! # Memory accounting (same model as `ebb_passes::memory`)
//! Program point `p` is the execution of `schedule[p]`. Graph inputs (parameters, optimizer
//! state, batch) are resident at every point, donated inputs up to their last read (they are
//! dropped then: the caller gave their buffers to the step); op results from their def point to their last
//! use, inclusive (so during op `p` both its operands and its results are resident); graph
//! outputs from their def point to the end; a result without users only at its def point.
//! A value's size is its type's `size_bytes` at the bindings. A `while` op is charged, at its
//! own point, the largest per-iteration peak of its regions minus the regions' inputs
//! (regions without non-scalar values, i.e. reduction and comparator bodies, are not charged).
//! [`ExecStats::resident_bytes`] records the total at every point.
//!
//! Invariants: results are computed by deterministic kernels (fixed work partitioning, no
//! atomics), so the outputs are bit-identical under every valid schedule; every kernel result
//! is checked against the op's declared type at the bindings before it is stored.

#[doc(hidden)]
pub mod arith;
mod build;
mod claimed;
mod control;
mod conv;
mod conv_depthwise;
mod conv_gemm;
mod conv_plan;
mod conv_rows_batch;
pub mod device;
pub(crate) mod direct;
mod dot;
#[doc(hidden)]
pub mod elementwise;
pub mod evict;
#[doc(hidden)]
pub mod fastmath;
mod fusion;
mod gather_scatter;
mod gemm_direct;
pub(crate) mod jit;
#[doc(hidden)]
pub mod layout;
mod operands;
mod overwrite;
pub(crate) mod par;
mod placement;
pub mod pool;
#[doc(hidden)]
pub mod random;
mod reduce;
mod region;
mod scalar_body;
mod scatter_window;
mod scratch;
mod serial;
mod shape_ops;
mod small_k;
mod sort;
mod window_rows;

use crate::error::{ExecError, OpError};
use crate::tensor::{Buf, Data, Elem, Tensor};
use ebb_ir::{Bindings, DType, Graph, Node, NodeId, Op, OpKind, Point};
use operands::Operands;
use pool::BufferPool;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[doc(hidden)]
pub use direct::direct_results;
pub use dot::with_f64_dot;
pub(crate) use dot::{f64_dot, f64_dot_set};
pub use evict::{Back, Events, Evict};
#[doc(hidden)]
pub use gemm_direct::{direct_add_and_packed, direct_and_packed};
pub use overwrite::{overwritten_carries, unfilled_inits};
pub(crate) use placement::Offsets;
pub use placement::Placement;
pub use serial::no_kernel_splits;
#[doc(hidden)]
pub use small_k::small_k_both;

const NONE: u32 = u32::MAX;

/// Memory and time of one execution. Bytes are storage bytes (`TensorType::size_bytes`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExecStats {
    /// Resident bytes at each program point (see the module docs), indexed like the schedule.
    pub resident_bytes: Vec<u64>,
    /// Largest device bytes during the regenerations and reloads before each point (0 where
    /// there are none; see [`evict`]).
    pub regen_peak: Vec<u64>,
    /// The largest entry of `resident_bytes` and `regen_peak` (the input bytes for an empty
    /// schedule).
    pub peak_bytes: u64,
    /// Largest bytes held in the host pool by offloaded (swapped) values.
    pub host_peak_bytes: u64,
    /// Wall time spent regenerating (recompute) and reloading values.
    pub regen_time: Duration,
    /// First program point where `peak_bytes` is reached (0 for an empty schedule).
    pub peak_point: Point,
    /// Bytes of the graph inputs (resident throughout).
    pub input_bytes: u64,
    /// Wall time of each op, indexed like the schedule (empty for a nested program: loop
    /// bodies and branches are not timed op by op).
    pub op_time: Vec<Duration>,
    /// Arena-backed runs ([`Program::with_arena`]): bytes of results their kernels wrote at
    /// the planned offset directly.
    pub arena_direct_bytes: u64,
    /// Arena-backed runs: bytes of results copied to their planned offset after the kernel
    /// (views such as `reshape`, in-place updates, interpreted kernels, reloads, recomputes).
    pub arena_copied_bytes: u64,
    /// Arena-backed runs: bytes of results left on the heap because their planned range was
    /// still held (0 for every plan the checker accepts; see `exec/placement.rs`).
    pub arena_unplaced_bytes: u64,
    /// Arena-backed runs: bytes of results written in place into a donated input's buffer,
    /// which stays where the caller keeps it, and left there (the plan lays such a result out
    /// in its operand's range, which the run never claims; see `exec/placement.rs`).
    pub in_place_kept_bytes: u64,
    /// Bytes of loop-fusion results written straight into the operand of the
    /// `dynamic_update_slice` that reads them ([`direct`]), which then copies nothing.
    pub direct_bytes: u64,
}

impl ExecStats {
    /// The statistics before the first point of a run of `points` points whose inputs hold
    /// `input_bytes`, with room for `timed` op times: what a fresh run starts from, in this
    /// value's vectors (cleared, their memory kept).
    fn reset(&mut self, points: usize, input_bytes: u64, timed: usize) {
        // Every field named, so that a new one is reset here too.
        let ExecStats {
            resident_bytes,
            regen_peak,
            peak_bytes,
            host_peak_bytes,
            regen_time,
            peak_point,
            input_bytes: inputs,
            op_time,
            arena_direct_bytes,
            arena_copied_bytes,
            arena_unplaced_bytes,
            in_place_kept_bytes,
            direct_bytes,
        } = self;
        resident_bytes.clear();
        resident_bytes.reserve(points);
        regen_peak.clear();
        regen_peak.resize(points, 0);
        *peak_bytes = input_bytes;
        *host_peak_bytes = 0;
        *regen_time = Duration::ZERO;
        *peak_point = Point::new(0);
        *inputs = input_bytes;
        op_time.clear();
        op_time.reserve(timed);
        *arena_direct_bytes = 0;
        *arena_copied_bytes = 0;
        *arena_unplaced_bytes = 0;
        *in_place_kept_bytes = 0;
        *direct_bytes = 0;
    }

    /// Total op time per op kind, largest first: `(kind, count, time)`.
    pub fn time_by_kind(&self, g: &Graph, schedule: &[NodeId]) -> Vec<(OpKind, usize, Duration)> {
        let mut acc: std::collections::BTreeMap<OpKind, (usize, Duration)> = Default::default();
        for (id, t) in schedule.iter().zip(&self.op_time) {
            if g.contains(*id) {
                let e = acc.entry(g.node(*id).kind()).or_default();
                e.0 += 1;
                e.1 += *t;
            }
        }
        let mut v: Vec<_> = acc.into_iter().map(|(k, (n, t))| (k, n, t)).collect();
        v.sort_by_key(|x| std::cmp::Reverse(x.2));
        v
    }

    /// The `k` ops that took longest, slowest first: `(node, time)`.
    pub fn slowest(&self, schedule: &[NodeId], k: usize) -> Vec<(NodeId, Duration)> {
        let mut v: Vec<(NodeId, Duration)> = schedule
            .iter()
            .copied()
            .zip(self.op_time.iter().copied())
            .collect();
        v.sort_by_key(|x| std::cmp::Reverse(x.1));
        v.truncate(k);
        v
    }
}

/// The non-input ops of `g` in program order: a valid schedule for [`execute`].
pub fn program_schedule(g: &Graph) -> Vec<NodeId> {
    g.order()
        .iter()
        .copied()
        .filter(|&id| g.contains(id) && g.node(id).kind() != OpKind::Input)
        .collect()
}

/// Executes `g` at `bindings` in the order `schedule` (the non-input ops, each exactly once, in
/// any topological order) on `inputs` (in graph input order). Returns the graph outputs and the
/// memory/time statistics.
///
/// # Errors
/// [`ExecError`]: a schedule that is not a topological order of the non-input ops, input
/// tensors that do not match the input types at the bindings, types that cannot be evaluated,
/// unsupported ops (`custom_call`), or kernel errors, each naming the op and its location.
pub fn execute(
    g: &Graph,
    schedule: &[NodeId],
    bindings: &Bindings,
    inputs: Vec<Tensor>,
) -> Result<(Vec<Tensor>, ExecStats), ExecError> {
    Program::new(g, schedule, bindings)?.run(inputs)
}

/// Concrete element type and shape of a value at the bindings.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OutType {
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl OutType {
    fn bytes(&self) -> u64 {
        self.shape.iter().product::<usize>() as u64 * self.dtype.size_bytes()
    }
}

/// Whether two shapes are equal, compared in place (a slice `==` calls `memcmp`, which
/// costs more than the comparison for the few dimensions of a shape, checked for every
/// input and result of every step, at every iteration of a loop body).
#[inline]
pub(crate) fn same_dims(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

fn fmt_type(dtype: DType, shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("{dtype}[{}]", dims.join(","))
}

/// How long a value stays resident (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    Input,
    /// A donated input: freed after its last read.
    Donated,
    Output,
    Intermediate,
}

/// One program point.
struct Step {
    node: NodeId,
    /// Operand value ids.
    operands: Vec<u32>,
    /// Whether the operand can be moved into the kernel (this is its last use).
    take: Vec<bool>,
    /// Whether the operand is moved out of its slot into the kernel's operands: taken, and its
    /// value read nowhere else in the step (a value read twice is borrowed at every read and
    /// freed after the step; see [`operands::Operands`]).
    moved: Vec<bool>,
    /// Whether the operand is held unchanged while this step's results live (a graph input
    /// not donated; a sliced operand whose last reader comes after the slice's readers, see
    /// `build::hold_sliced`).
    held: Vec<bool>,
    /// First result value id (results are consecutive).
    first_result: u32,
    /// Result types at the bindings.
    out: Vec<OutType>,
    /// Intermediates to drop after this point.
    frees: Vec<u32>,
    /// Results written into the buffer of an operand that dies here
    /// ([`ebb_ir::op::in_place_writes`]).
    in_place: Vec<ebb_ir::op::InPlace>,
    /// Bytes of those operands: allocated once for operand and result.
    in_place_bytes: u64,
    /// A `fusion`'s kernel parameters at the bindings, computed at its first run and kept
    /// with the prepared program (a step repeated at a shape does not evaluate them again).
    launch: std::sync::OnceLock<jit::Launch>,
    /// The op's regions (a `while`'s `cond` and `body`, a `case`'s branches) prepared at the
    /// bindings, at their first run, and kept with the prepared program.
    regions: Vec<std::sync::OnceLock<Arc<Prepared>>>,
    /// A `while`'s carried values that the loop overwrites whole before reading them
    /// ([`overwrite::overwritten_carries`]).
    overwritten: Vec<usize>,
    /// Whether the op is a `broadcast_in_dim` that only initializes such a carried value
    /// ([`overwrite::initializes_overwritten`]): its kernel need not fill its buffer.
    unread: bool,
    /// Results written into the operand of the `dynamic_update_slice` that reads them
    /// ([`direct`]).
    direct: Vec<direct::Direct>,
}

/// Which kernels run `fusion` groups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Executor {
    /// Kernels generated by `ebb_codegen` and JIT-compiled once per group structure; regions
    /// it does not handle are interpreted.
    #[default]
    Jit,
    /// The chunked interpreter only: the numerics oracle of the tests.
    Reference,
    /// The GPU executor on the simulated device ([`device::simt`]): the GPU kernels' code on
    /// the host, streams on threads, every command sequence checked for hazards.
    Simt,
    /// The GPU executor on an NVIDIA GPU ([`device`]'s `cuda` module; the `cuda` feature).
    Cuda,
}

impl Executor {
    /// The names an embedding selects an executor by (Python's `Runtime(device=...)`, the C
    /// ABI's `ebb_runtime_set_executor`): `cpu` ([`Executor::Jit`]), `reference`, `simt`,
    /// `cuda`.
    pub const NAMES: [&'static str; 4] = ["cpu", "reference", "simt", "cuda"];

    /// The executor named `name` (one of [`Executor::NAMES`], or `jit` for `cpu`).
    pub fn from_name(name: &str) -> Option<Executor> {
        Some(match name {
            "cpu" | "jit" => Executor::Jit,
            "reference" => Executor::Reference,
            "simt" => Executor::Simt,
            "cuda" => Executor::Cuda,
            _ => return None,
        })
    }

    /// Whether this executor runs the step through a [`device::Device`].
    pub fn is_device(self) -> bool {
        matches!(self, Executor::Simt | Executor::Cuda)
    }
}

/// What [`Program::new`] derives from the graph, the schedule and the bindings alone (value
/// ids, each step's operands, result types and frees, the in-place writes): shared by the
/// programs of one graph, schedule and bindings ([`Program::prepared`],
/// [`Program::from_prepared`]), so that a step repeated at a shape skips it.
pub(crate) struct Prepared {
    bindings: Bindings,
    steps: Vec<Step>,
    inputs: Vec<OutType>,
    outputs: Vec<u32>,
    /// Per output: whether the same value is an output again later in the list (the run then
    /// leaves it a clone, and moves it out at its last mention).
    output_again: Vec<bool>,
    sizes: Vec<u64>,
    num_values: usize,
    /// Value id of result 0 of each node, by node index (`NONE` if not computed).
    base: Vec<u32>,
    /// Step index of each node, by node index (`NONE` for inputs).
    step_of: Vec<u32>,
    /// What the graph computes when it is a scalar region body (a `reduce`'s, a `scatter`'s,
    /// a comparator), recognized at its first call ([`region::RegionFn::of`]) and kept with
    /// the prepared program.
    body: std::sync::OnceLock<region::Body>,
    /// The scalar region body compiled to instructions where its ops allow, at its first call
    /// likewise ([`scalar_body::ScalarBody::compile`]).
    scalar: std::sync::OnceLock<Option<scalar_body::ScalarBody>>,
}

/// A graph with a validated schedule and all types evaluated at the bindings, ready to run.
pub struct Program<'g> {
    g: &'g Graph,
    executor: Executor,
    pool: Arc<BufferPool>,
    memo: Option<Arc<jit::KernelMemo>>,
    placement: Option<Placement>,
    prep: Arc<Prepared>,
    /// Whether [`ExecStats::op_time`] is measured.
    timed: bool,
    /// Small `constant` and `dim_constant` results, by step: computed at the first run and
    /// shared by the later ones (the bindings are fixed, so they never change).
    consts: Vec<std::sync::OnceLock<Tensor>>,
    /// The node of each step, by step (looked up once, not at every run of a loop body).
    nodes: Vec<&'g Node>,
    /// The run's working vectors, kept between runs of this program (a loop body's
    /// iterations) instead of allocated at every run; `None` while a run holds them.
    scratch: std::sync::Mutex<Option<Scratch>>,
}

/// The working vectors of [`Program::run_with`], cleared and kept between runs
/// ([`Program::scratch`]): what they hold never carries from one run to the next.
#[derive(Default)]
struct Scratch {
    /// One slot per value, all `None` between runs.
    slots: Vec<Option<Tensor>>,
    /// Each step's results, moved out into their slots (empty between runs).
    results: Vec<Tensor>,
    /// The inputs' vector of the last run, emptied: the next run's outputs go into it.
    outs: Vec<Tensor>,
    /// The vectors of each step's operands (empty between steps).
    operands: operands::Storage,
}

/// `constant` and `dim_constant` results of at most this many bytes are computed once per
/// [`Program`] (a loop body's are then built once per loop, not once per iteration).
const CONST_CACHE_BYTES: u64 = 4 << 10;

impl<'g> Program<'g> {
    /// Validates `schedule` against `g` and evaluates every result type at `bindings`.
    ///
    /// # Errors
    /// [`ExecError::Schedule`] when `schedule` is not a topological order of exactly the
    /// non-input ops of `g`; [`ExecError::Shape`] when a type cannot be evaluated.
    pub fn new(
        g: &'g Graph,
        schedule: &[NodeId],
        bindings: &Bindings,
    ) -> Result<Program<'g>, ExecError> {
        let mut values = build::Values::of_inputs(g, bindings)?;
        let (mut steps, def) = values.steps(g, schedule, bindings)?;
        let outputs = values.outputs(g)?;
        let (class, last_use) = build::mark_takes(g, &mut steps, &outputs, values.count);
        build::in_place(g, &mut steps, &values.sizes)?;
        build::place_frees(&mut steps, &class, &last_use, &def);
        build::mark_overwritten(g, &mut steps, bindings);
        direct::mark(g, &mut steps, values.inputs.len(), &def, &outputs);
        let mut step_of = vec![NONE; values.base.len()];
        for (p, s) in steps.iter().enumerate() {
            step_of[s.node.index()] = p as u32;
        }
        let output_again = (0..outputs.len())
            .map(|i| outputs[i + 1..].contains(&outputs[i]))
            .collect();
        let prep = Prepared {
            bindings: bindings.clone(),
            steps,
            inputs: values.inputs,
            outputs,
            output_again,
            sizes: values.sizes,
            num_values: values.count,
            base: values.base,
            step_of,
            body: std::sync::OnceLock::new(),
            scalar: std::sync::OnceLock::new(),
        };
        Ok(Program::from_prepared(g, Arc::new(prep)))
    }

    /// The program of `prep`, which [`Program::prepared`] returned for a program of `g` (the
    /// same graph: value ids and steps index it).
    pub(crate) fn from_prepared(g: &'g Graph, prep: Arc<Prepared>) -> Program<'g> {
        let consts = (0..prep.steps.len())
            .map(|_| std::sync::OnceLock::new())
            .collect();
        let nodes = prep.steps.iter().map(|s| g.node(s.node)).collect();
        Program {
            g,
            executor: Executor::default(),
            pool: BufferPool::none().clone(),
            memo: None,
            placement: None,
            prep,
            timed: true,
            consts,
            nodes,
            scratch: std::sync::Mutex::new(None),
        }
    }

    /// What this program derived from its graph, schedule and bindings, to make another
    /// program of them with [`Program::from_prepared`].
    pub(crate) fn prepared(&self) -> Arc<Prepared> {
        self.prep.clone()
    }

    /// The program run without timing its ops ([`ExecStats::op_time`] stays empty): for
    /// nested programs (loop bodies, branches), run many times, whose op times nobody reads,
    /// and a runtime's steps unless asked (`Runtime::set_op_timing`).
    pub(crate) fn untimed(mut self) -> Self {
        self.timed = false;
        self
    }

    /// The program run with `executor`'s fusion kernels (default [`Executor::Jit`]).
    pub fn with_executor(mut self, executor: Executor) -> Self {
        self.executor = executor;
        self
    }

    /// The program run recycling freed buffers through `pool` (see [`pool`]; by default a
    /// pool of capacity 0, which keeps nothing).
    pub fn with_pool(mut self, pool: Arc<BufferPool>) -> Self {
        self.pool = pool;
        self
    }

    /// The program run keeping its fusion kernels' layouts and kernels in `memo` (see
    /// [`jit::KernelMemo`]: only for a graph that outlives the memo unchanged).
    pub(crate) fn with_kernel_memo(mut self, memo: Arc<jit::KernelMemo>) -> Self {
        self.memo = Some(memo);
        self
    }

    /// Bytes of the graph inputs at the bindings.
    pub fn input_bytes(&self) -> u64 {
        self.prep.sizes[..self.prep.inputs.len()].iter().sum()
    }

    /// The transient bytes a run of this program (a region) charges to the enclosing op,
    /// computed without running it: the peak over its points of the resident bytes (results
    /// added, an operand written in place counted once, frees after the point), plus each
    /// point's own region memory (a `fusion`'s tile buffers, a nested `case`'s largest branch,
    /// a nested `while`'s larger region), minus the input bytes. Equal to what [`Program::run`]
    /// measures as `peak_bytes - input_bytes` without events, for every `case` branch taken;
    /// what `case` charges for the branches it does not take.
    ///
    /// # Errors
    /// [`ExecError`] when a nested region's types cannot be evaluated at the bindings.
    pub(crate) fn static_transient(&self) -> Result<u64, ExecError> {
        let mut resident = self.input_bytes();
        let mut peak = resident;
        for s in &self.prep.steps {
            resident += s.out.iter().map(OutType::bytes).sum::<u64>();
            let own = control::static_region_bytes(
                self.g,
                s.node,
                &s.out,
                &s.in_place,
                &self.prep.bindings,
            )?;
            peak = peak.max((resident + own).saturating_sub(s.in_place_bytes));
            for &v in &s.frees {
                resident -= self.prep.sizes[v as usize];
            }
        }
        Ok(peak - self.input_bytes())
    }

    /// Number of program points (scheduled ops).
    pub fn points(&self) -> usize {
        self.prep.steps.len()
    }

    /// Runs the program on `inputs` (graph input order); see [`execute`].
    ///
    /// # Errors
    /// As [`execute`].
    pub fn run(&self, inputs: Vec<Tensor>) -> Result<(Vec<Tensor>, ExecStats), ExecError> {
        self.run_with(inputs, None, &mut |_| {})
    }

    /// Runs the program on `inputs` performing `events` (evictions, regenerations, reloads;
    /// see [`evict`]), calling `on_point(p)` after each point (for progress reporting).
    ///
    /// # Errors
    /// As [`execute`], and [`ExecError::Plan`] when an event does not fit the run (a value
    /// read while evicted, a reload of a value that is not offloaded).
    pub fn run_with(
        &self,
        inputs: Vec<Tensor>,
        events: Option<&Events>,
        on_point: &mut dyn FnMut(usize),
    ) -> Result<(Vec<Tensor>, ExecStats), ExecError> {
        let mut stats = ExecStats::default();
        let outs = self.run_stats(inputs, events, on_point, &mut stats)?;
        Ok((outs, stats))
    }

    /// [`Program::run`] writing the statistics over `stats` (its vectors cleared and reused:
    /// a loop runs its body with one [`ExecStats`] for all iterations). `stats` is then
    /// exactly what [`Program::run`] returns.
    ///
    /// # Errors
    /// As [`execute`] (`stats` is then unspecified).
    pub(crate) fn run_reusing(
        &self,
        inputs: Vec<Tensor>,
        stats: &mut ExecStats,
    ) -> Result<Vec<Tensor>, ExecError> {
        self.run_stats(inputs, None, &mut |_| {}, stats)
    }

    /// [`Program::run_with`] writing the statistics over `stats`.
    fn run_stats(
        &self,
        mut inputs: Vec<Tensor>,
        events: Option<&Events>,
        on_point: &mut dyn FnMut(usize),
        stats: &mut ExecStats,
    ) -> Result<Vec<Tensor>, ExecError> {
        let g = self.g;
        // Tensors dropped during the run (freed values, consumed operands) recycle their
        // buffers through the pool.
        let _recycling = self.pool.activate();
        let mut host: HashMap<u32, Tensor> = HashMap::new();
        let mut host_bytes = 0u64;
        if inputs.len() != self.prep.inputs.len() {
            return Err(ExecError::InputCount {
                graph: g.name.clone(),
                expected: self.prep.inputs.len(),
                got: inputs.len(),
            });
        }
        let mut scratch = self
            .scratch
            .try_lock()
            .ok()
            .and_then(|mut s| s.take())
            .unwrap_or_default();
        let mut slots = std::mem::take(&mut scratch.slots);
        if slots.len() != self.prep.num_values {
            slots = vec![None; self.prep.num_values];
        }
        for (i, (t, ty)) in inputs.drain(..).zip(&self.prep.inputs).enumerate() {
            if t.dtype() != ty.dtype || !same_dims(t.shape(), &ty.shape) {
                let id = g.inputs()[i];
                return Err(ExecError::InputMismatch {
                    graph: g.name.clone(),
                    index: i,
                    name: g.input_name(id).to_string(),
                    expected: fmt_type(ty.dtype, &ty.shape),
                    got: fmt_type(t.dtype(), t.shape()),
                });
            }
            slots[i] = Some(t);
        }
        let input_bytes = self.input_bytes();
        stats.reset(
            self.prep.steps.len(),
            input_bytes,
            if self.timed { self.prep.steps.len() } else { 0 },
        );
        let mut resident = input_bytes;
        // An op's time runs from the end of the previous op (or of its own regenerations and
        // reloads) to its own end: one clock read per op.
        let mut clock = self.timed.then(Instant::now);
        // Each step's results, moved out into their slots: one vector for the whole run.
        let mut results = std::mem::take(&mut scratch.results);
        let mut storage = std::mem::take(&mut scratch.operands);
        // The `dynamic_update_slice` steps whose update a fusion has written in place.
        let mut written: smallvec::SmallVec<[u32; 16]> = smallvec::SmallVec::new();
        for (p, s) in self.prep.steps.iter().enumerate() {
            if let Some(back) = events
                .and_then(|e| e.before.get(p))
                .filter(|b| !b.is_empty())
            {
                let t0 = Instant::now();
                for b in back {
                    if let Back::Reload { value } = b {
                        host_bytes -= self.prep.sizes[*value as usize];
                    }
                    let peak =
                        self.bring_back(b, p, &mut slots, &mut host, &mut resident, stats)?;
                    stats.regen_peak[p] = stats.regen_peak[p].max(peak);
                }
                let t1 = Instant::now();
                stats.regen_time += t1 - t0;
                clock = clock.map(|_| t1);
            }
            let node = self.nodes[p];
            // A `dynamic_update_slice` whose update a fusion wrote in place ([`direct`]): its
            // result is its operand, moved on without running the kernel (and without an
            // arena: direct writes are made only in runs without one).
            let skip = written.iter().position(|&q| q as usize == p);
            let arena = match skip {
                Some(_) => None,
                None => self
                    .placement
                    .as_ref()
                    .map(|pl| (pl, pl.slots(&s.out, s.first_result, &s.in_place))),
            };
            let (transient, outside) = if let Some(k) = skip {
                written.swap_remove(k);
                let x = s.operands[0] as usize;
                let t = slots[x].take().ok_or_else(|| {
                    op_err(node, OpError::Invalid("operand 0 was freed early".into()))
                })?;
                results.push(t);
                (0, Vec::new())
            } else {
                // Direct results' targets, out of their slots while the kernel writes them.
                let mut targets: smallvec::SmallVec<[(usize, Tensor); 4]> =
                    smallvec::SmallVec::new();
                // Not in runs with an arena or with evictions (a value regenerated between
                // the fusion and the update would lack the row).
                if !s.direct.is_empty()
                    && self.placement.is_none()
                    && events.is_none()
                    && self.executor == Executor::Jit
                {
                    for (k, d) in s.direct.iter().enumerate() {
                        if let Some(t) = slots.get_mut(d.target as usize).and_then(Option::take) {
                            targets.push((k, t));
                        }
                    }
                }
                let mut dests: smallvec::SmallVec<[direct::Dest; 4]> = smallvec::SmallVec::new();
                for (k, t) in targets.iter_mut() {
                    let d = &s.direct[*k];
                    let starts: Option<smallvec::SmallVec<[&Tensor; 4]>> = d
                        .starts
                        .iter()
                        .map(|&v| slots[v as usize].as_ref())
                        .collect();
                    let Some(o) = s.out.get(d.result) else {
                        continue;
                    };
                    if let Some(dest) =
                        starts.and_then(|st| direct::claim(d, t, &st, o.dtype, &o.shape))
                    {
                        dests.push(dest);
                    }
                }
                let mut operands = operands_of(node, s, &mut slots, storage)?;
                let outside = match arena {
                    Some(_) if !s.in_place.is_empty() => {
                        placement::outside_arena(&s.in_place, &operands)
                    }
                    _ => Vec::new(),
                };
                let transient = self.run_kernel_into(
                    p,
                    s,
                    &mut operands,
                    arena.as_ref().map(|a| &a.1),
                    &dests,
                    &mut results,
                )?;
                // The owned operands the kernel left are dropped here, and the borrows end.
                storage = operands.release();
                for d in &dests {
                    if let Some(t) = results.get(d.result).filter(|t| t.data().is_view()) {
                        stats.direct_bytes += t.size_bytes();
                        written.push(d.update);
                    }
                }
                drop(dests);
                for (k, t) in targets {
                    slots[s.direct[k].target as usize] = Some(t);
                }
                (transient, outside)
            };
            for (i, mut t) in results.drain(..).enumerate() {
                let v = s.first_result + i as u32;
                // A result nothing reads (freed at its own point: a `while`'s carried value
                // returned unchanged, which no op uses) is not copied to its range.
                let dead = s.frees.contains(&v);
                if let (Some((pl, kept)), false) = (&arena, dead) {
                    if placement::kept_in_operand(&outside, i, &t) {
                        stats.in_place_kept_bytes += t.size_bytes();
                    } else if let Some(off) = pl.at_def(v) {
                        t = pl.place(t, off, kept.remaining(i), stats);
                    }
                }
                resident += self.prep.sizes[v as usize];
                slots[v as usize] = Some(t);
            }
            // An operand written in place holds a result: its bytes are counted once.
            let now = (resident + transient).saturating_sub(s.in_place_bytes);
            let here = now.max(stats.regen_peak[p]);
            if here > stats.peak_bytes || stats.resident_bytes.is_empty() {
                stats.peak_bytes = here;
                stats.peak_point = Point::new(p);
            }
            stats.resident_bytes.push(now);
            for &v in &s.frees {
                slots[v as usize] = None;
                resident -= self.prep.sizes[v as usize];
            }
            if let Some(out) = events.and_then(|e| e.after.get(p)) {
                for e in out {
                    let t = slots[e.value as usize]
                        .take()
                        .ok_or_else(|| ExecError::Plan {
                            graph: g.name.clone(),
                            msg: format!(
                                "point {p}: eviction of value {}, which is not resident",
                                e.value
                            ),
                        })?;
                    resident -= self.prep.sizes[e.value as usize];
                    if e.to_host {
                        host_bytes += self.prep.sizes[e.value as usize];
                        host.insert(e.value, t.deep_copy());
                    }
                }
                stats.host_peak_bytes = stats.host_peak_bytes.max(host_bytes);
            }
            if let Some(start) = clock {
                let now = Instant::now();
                stats.op_time.push(now - start);
                clock = Some(now);
            }
            on_point(p);
        }
        let mut outs = std::mem::take(&mut scratch.outs);
        outs.reserve(self.prep.outputs.len());
        let outputs = &self.prep.outputs;
        for (i, &v) in outputs.iter().enumerate() {
            // The run ends here: a value's slot is moved out at its last mention as an output.
            let slot = &mut slots[v as usize];
            let t = if self.prep.output_again[i] {
                slot.clone()
            } else {
                slot.take()
            };
            let t = t.ok_or_else(|| ExecError::Schedule {
                graph: g.name.clone(),
                msg: format!("output {i} was not computed"),
            })?;
            // A view reads an input of this run in place: it leaves the run as a copy, so
            // that it never keeps that input's buffer alive beyond the run.
            outs.push(if t.data().is_view() { t.deep_copy() } else { t });
        }
        // What is left in the slots (inputs nobody took) is dropped here, at the run's end,
        // and the emptied vectors are kept for the next run.
        slots.iter_mut().for_each(|s| *s = None);
        results.clear();
        scratch.slots = slots;
        scratch.results = results;
        scratch.outs = inputs;
        scratch.operands = storage;
        if let Ok(mut s) = self.scratch.try_lock() {
            *s = Some(scratch);
        }
        Ok(outs)
    }
}

/// The operands of step `s` (node `node`): an operand at its last use moved out of its slot
/// (owned), the others borrowed where their slots hold them ([`Operands`]), in one pass.
///
/// # Errors
/// [`ExecError::Op`] when an operand's slot is empty (freed early).
fn operands_of<'a>(
    node: &Node,
    s: &Step,
    slots: &'a mut [Option<Tensor>],
    storage: operands::Storage,
) -> Result<Operands<'a>, ExecError> {
    let early = |k: usize| {
        op_err(
            node,
            OpError::Invalid(format!("operand {k} was freed early")),
        )
    };
    let mut operands = Operands::in_storage(storage);
    let n = slots.len();
    let base = slots.as_mut_ptr();
    for (k, (&v, &moved)) in s.operands.iter().zip(&s.moved).enumerate() {
        let v = v as usize;
        if v >= n {
            return Err(early(k));
        }
        // SAFETY: `v < n`, and every access goes through `base`, derived from the exclusive
        // borrow `slots` of `'a`. A moved value is read by no other operand of the step
        // (`Step::moved`), so the slots emptied here are never borrowed, and the borrowed
        // slots are not written while `'a` lasts.
        if moved {
            let t = unsafe { (*base.add(v)).take() }.ok_or_else(|| early(k))?;
            operands.push_owned(t);
        } else {
            let t: &'a Tensor = unsafe { (*base.add(v)).as_ref() }.ok_or_else(|| early(k))?;
            operands.push_held(t);
        }
    }
    Ok(operands)
}

impl Program<'_> {
    /// Runs the kernel of step `s` (at point `p`) on `operands` and checks its results against
    /// the op's types at the bindings. Returns the results and the op's region transient
    /// bytes.
    fn run_kernel(
        &self,
        p: usize,
        s: &Step,
        operands: Vec<Tensor>,
        slots: Option<&placement::Slots>,
    ) -> Result<(Vec<Tensor>, u64), ExecError> {
        let mut results = Vec::with_capacity(s.out.len());
        let mut operands = Operands::from_vec(operands);
        let transient = self.run_kernel_into(p, s, &mut operands, slots, &[], &mut results)?;
        Ok((results, transient))
    }

    /// [`Program::run_kernel`] appending the results to `results` (empty on entry, so that a
    /// run reuses one vector for every step). Returns the op's region transient bytes.
    fn run_kernel_into(
        &self,
        p: usize,
        s: &Step,
        operands: &mut Operands<'_>,
        slots: Option<&placement::Slots>,
        direct: &[direct::Dest],
        results: &mut Vec<Tensor>,
    ) -> Result<u64, ExecError> {
        let node = self.nodes[p];
        let constant = matches!(node.op, Op::Constant(_) | Op::DimConstant(_)) && slots.is_none();
        if let Some(t) = self
            .consts
            .get(p)
            .and_then(|c| c.get())
            .filter(|_| constant)
        {
            results.push(t.clone());
            return Ok(0);
        }
        let ctx = Ctx {
            node,
            out: &s.out,
            bindings: &self.prep.bindings,
            transient: Cell::new(0),
            in_place: &s.in_place,
            held: &s.held,
            executor: self.executor,
            pool: &self.pool,
            memo: self.memo.as_ref(),
            slots,
            launch: Some(&s.launch),
            regions: &s.regions,
            overwritten: &s.overwritten,
            unread: s.unread,
            direct,
        };
        dispatch(&ctx, operands, results).map_err(|e| match e {
            KernelFailure::Op(source) => op_err(node, source),
            KernelFailure::Exec(e) => e,
        })?;
        if let ([t], true) = (results.as_slice(), constant) {
            if t.size_bytes() <= CONST_CACHE_BYTES {
                if let Some(c) = self.consts.get(p) {
                    let _ = c.set(t.clone());
                }
            }
        }
        if results.len() != s.out.len() {
            return Err(op_err(
                node,
                OpError::Invalid(format!(
                    "kernel returned {} results, expected {}",
                    results.len(),
                    s.out.len()
                )),
            ));
        }
        for (i, (t, ot)) in results.iter().zip(&s.out).enumerate() {
            if t.dtype() != ot.dtype || !same_dims(t.shape(), &ot.shape) {
                return Err(op_err(
                    node,
                    OpError::Invalid(format!(
                        "result {i} is {} but the op's type is {}",
                        fmt_type(t.dtype(), t.shape()),
                        fmt_type(ot.dtype, &ot.shape)
                    )),
                ));
            }
        }
        Ok(ctx.transient.get())
    }
}

fn loc_of(node: &Node) -> String {
    node.loc
        .clone()
        .unwrap_or_else(|| "unknown location".into())
}

fn op_err(node: &Node, source: OpError) -> ExecError {
    ExecError::Op {
        op: node.kind().name().into(),
        loc: loc_of(node),
        source,
    }
}

pub(crate) fn eval_type(
    g: &Graph,
    node: &Node,
    dtype: DType,
    shape: &[ebb_ir::DimExpr],
    b: &Bindings,
) -> Result<OutType, ExecError> {
    let mut dims = Vec::with_capacity(shape.len());
    for d in shape {
        let v = d.eval(b).map_err(|e| ExecError::Shape {
            graph: g.name.clone(),
            op: node.kind().name().into(),
            loc: loc_of(node),
            msg: e.to_string(),
        })?;
        let v = usize::try_from(v).map_err(|_| ExecError::Shape {
            graph: g.name.clone(),
            op: node.kind().name().into(),
            loc: loc_of(node),
            msg: format!("dimension {d} is negative ({v})"),
        })?;
        dims.push(v);
    }
    Ok(OutType { dtype, shape: dims })
}

/// What a kernel sees: its node, its result types at the bindings, the bindings, and a slot
/// for the transient bytes of its regions.
pub(crate) struct Ctx<'a> {
    pub node: &'a Node,
    pub out: &'a [OutType],
    pub bindings: &'a Bindings,
    pub transient: Cell<u64>,
    /// Results the kernel may write into the buffer of an operand it is the last reader of
    /// ([`ebb_ir::op::in_place_writes`]); a loop `fusion`'s kernel reuses the buffer only when
    /// it owns it alone, a `case` returns a forwarded operand itself.
    pub in_place: &'a [ebb_ir::op::InPlace],
    /// Per operand: whether it is held unchanged while the results live (a graph input not
    /// donated, or a sliced operand read again only after them), so that a view of it may be
    /// returned instead of a copy (see `shape_ops::slice_view`).
    pub held: &'a [bool],
    /// Which kernels run fusion groups (nested programs inherit it).
    pub executor: Executor,
    /// Recycled buffers for large results (nested programs share it).
    pub pool: &'a Arc<BufferPool>,
    /// Layouts and kernels kept across steps (nested programs share it).
    pub memo: Option<&'a Arc<jit::KernelMemo>>,
    /// The claimed arena ranges of the results in an arena-backed run ([`placement`]).
    pub slots: Option<&'a placement::Slots>,
    /// Where a `fusion` keeps its kernel parameters at the bindings across runs of one
    /// prepared program (`None`: computed at every run).
    pub launch: Option<&'a std::sync::OnceLock<jit::Launch>>,
    /// Where the op's regions keep their prepared programs across runs of one prepared
    /// program, by region index (empty: prepared at every run).
    pub regions: &'a [std::sync::OnceLock<Arc<Prepared>>],
    /// A `while`'s carried values that the loop overwrites whole before reading them
    /// ([`overwrite::overwritten_carries`]): they start in the loop result's range uncopied.
    pub overwritten: &'a [usize],
    /// Whether the result's contents are never read before being overwritten
    /// ([`overwrite::initializes_overwritten`]): a splat `broadcast_in_dim` leaves them stale.
    pub unread: bool,
    /// Where a loop `fusion` may write results straight into the operand of the
    /// `dynamic_update_slice` that reads them ([`direct`]; empty: nowhere).
    pub direct: &'a [direct::Dest<'a>],
}

impl Ctx<'_> {
    /// A buffer of `n` elements for the op's single result: its planned arena range when the
    /// run is arena-backed and the range has this type and length, else a recycled or new
    /// heap buffer (stale contents: the kernel overwrites every element).
    pub fn take_vec<T: Elem>(&self, n: usize) -> Buf<T> {
        self.slots
            .and_then(|s| s.take_at(0, T::DTYPE, n))
            .and_then(T::unwrap)
            .unwrap_or_else(|| self.pool.take_vec(n))
    }

    /// The claimed arena range of result `i` if the run is arena-backed and the range has
    /// `dtype` and `n` elements and is still unused (stale contents: the kernel overwrites
    /// every element); `None` otherwise, nothing taken. A kernel that does not use it drops
    /// it (the range is released) or leaves it to the executor.
    pub(crate) fn claimed(&self, i: usize, dtype: DType, n: usize) -> Option<Data> {
        self.slots.and_then(|s| s.take_at(i, dtype, n))
    }

    /// [`Ctx::take_vec`] for result `i` of an element type known at run time (the range of
    /// that result, not of another one of the same type and length).
    pub fn take_result(&self, i: usize, dtype: DType, n: usize) -> Data {
        self.slots
            .and_then(|s| s.take_at(i, dtype, n))
            .unwrap_or_else(|| self.pool.take_or_zeros(dtype, n))
    }

    /// Result 0 computed in `f32` (`c`) as `dtype`: a `bf16` or `f16` result is rounded
    /// straight into its range ([`Ctx::take_result`]), other types through
    /// [`Data::into_dtype`].
    pub(crate) fn result_from_f32(&self, c: Buf<f32>, dtype: DType) -> Data {
        if matches!(dtype, DType::BF16 | DType::F16) {
            match self.take_result(0, dtype, c.len()) {
                Data::BF16(mut out) => {
                    crate::tensor::f32_to_bf16_into(&c, &mut out);
                    return Data::BF16(out);
                }
                Data::F16(mut out) => {
                    crate::tensor::f32_to_f16_into(&c, &mut out);
                    return Data::F16(out);
                }
                _ => {}
            }
        }
        Data::F32(c).into_dtype(dtype)
    }

    /// The single result type.
    pub fn out0(&self) -> Result<&OutType, OpError> {
        self.out
            .first()
            .ok_or_else(|| OpError::Invalid("op has no result".into()))
    }
}

/// A kernel error: either an op-level problem (wrapped with the op's name by the caller) or
/// an executor error already complete (custom calls, nested failures).
pub(crate) enum KernelFailure {
    Op(OpError),
    Exec(ExecError),
}

impl From<OpError> for KernelFailure {
    fn from(e: OpError) -> Self {
        KernelFailure::Op(e)
    }
}

/// Checks the operand count of a kernel.
pub(crate) fn arity(ops: &[Tensor], n: usize, op: OpKind) -> Result<(), OpError> {
    if ops.len() != n {
        return Err(OpError::Invalid(format!(
            "`{op}` expects {n} operands, got {}",
            ops.len()
        )));
    }
    Ok(())
}

/// Runs the kernel of `ctx`'s op on `ops`, appending its results to `out` (a single result is
/// pushed, without a vector of its own).
fn dispatch(ctx: &Ctx, ops: &mut Operands<'_>, out: &mut Vec<Tensor>) -> Result<(), KernelFailure> {
    let kind = ctx.node.kind();
    match &ctx.node.op {
        Op::Input(_) => Err(OpError::Invalid("an input cannot be executed".into()).into()),
        Op::Constant(lit) => one(out, shape_ops::constant(ctx, lit)),
        Op::DimConstant(vals) => one(out, shape_ops::dim_constant(ctx, vals)),
        _ if kind.is_elementwise() => one(out, elementwise::run(ctx, ops.take_vec())),
        Op::BroadcastInDim(_)
        | Op::Reshape(_)
        | Op::Transpose(_)
        | Op::Concatenate(_)
        | Op::Slice(_)
        | Op::DynamicSlice(_)
        | Op::DynamicUpdateSlice
        | Op::Pad(_)
        | Op::Reverse(_)
        | Op::Iota(_) => one(out, shape_ops::run(ctx, ops)),
        Op::Reduce(dims) => many(
            out,
            reduce::reduce(ctx, dims, ops.take_vec()).map_err(Into::into),
        ),
        Op::ReduceWindow(w) => many(
            out,
            reduce::reduce_window(ctx, w, ops.take_vec()).map_err(Into::into),
        ),
        Op::SelectAndScatter(w) => one(out, reduce::select_and_scatter(ctx, w, ops.take_vec())),
        Op::DotGeneral(dd) => one(out, dot::dot_general(ctx, dd, ops)),
        Op::Convolution(spec) => one(out, conv::convolution(ctx, spec, ops.take_vec())),
        Op::Gather(gd) => one(out, gather_scatter::gather(ctx, gd, ops.take_vec())),
        Op::Scatter(sd) => many(
            out,
            gather_scatter::scatter(ctx, sd, ops.take_vec()).map_err(Into::into),
        ),
        Op::While => many(out, control::while_loop(ctx, ops.take_vec())),
        Op::Case => many(out, control::case(ctx, ops.take_vec())),
        Op::RngBitGenerator(spec) => many(
            out,
            random::rng_bit_generator(ctx, spec, ops.take_vec()).map_err(Into::into),
        ),
        Op::Fusion(_) if ctx.executor != Executor::Reference => match jit::fusion(ctx, ops, out) {
            Some(r) => r,
            None => many(out, fusion::fusion(ctx, ops.take_vec())),
        },
        Op::Fusion(_) => many(out, fusion::fusion(ctx, ops.take_vec())),
        Op::Sort(spec) => many(
            out,
            sort::sort(ctx, spec, ops.take_vec()).map_err(Into::into),
        ),
        // The placement is the plan's business (a swap it performs around the op); the value
        // itself passes through.
        Op::OptimizationBarrier => many(out, Ok(ops.take_vec())),
        Op::AnnotateDevicePlacement(_) => {
            let mut ops = ops.take_vec();
            ops.truncate(1);
            many(out, Ok(ops))
        }
        Op::CustomCall(cc) => Err(KernelFailure::Exec(ExecError::Unsupported {
            op: kind.name().into(),
            detail: format!(" (target \"{}\")", cc.target),
            loc: loc_of(ctx.node),
        })),
        _ => Err(KernelFailure::Exec(ExecError::Unsupported {
            op: kind.name().into(),
            detail: String::new(),
            loc: loc_of(ctx.node),
        })),
    }
}

/// Appends a kernel's single result to `out`.
fn one(out: &mut Vec<Tensor>, t: Result<Tensor, OpError>) -> Result<(), KernelFailure> {
    out.push(t?);
    Ok(())
}

/// Appends a kernel's results to `out` (empty on entry: the kernel's vector becomes it).
fn many(out: &mut Vec<Tensor>, r: Result<Vec<Tensor>, KernelFailure>) -> Result<(), KernelFailure> {
    let r = r?;
    if out.is_empty() {
        *out = r;
    } else {
        out.extend(r);
    }
    Ok(())
}
