//! A program with its decisions, lowered for a device: the sequence of commands in issue
//! order ([`Cmd`]), each on a stream, with the events between the streams and the memory
//! bookkeeping (claims, releases, transient charges) of the plan's model.
//!
//! Per program point `p` (the CPU executor's order, `exec/evict.rs`):
//! 1. reloads due at `p` (the plan's prefetch point): a copy on the copy stream from the
//!    value's host-pool slot to its planned offset;
//! 2. recomputes due at `p`: the candidate's ops lowered again on the compute stream, their
//!    temporaries in scratch, the value at its planned offset; their results are held but
//!    no op's transient bytes are charged (the plan checker's model of a regeneration), also
//!    for an op run on the host;
//! 3. the op: its results claimed at their planned offsets (a result written in place takes
//!    its operand's bytes), its device work ([`super::lower`]) or a host call, its transient
//!    bytes charged;
//! 4. values freed after `p` released;
//! 5. evictions after `p`: the value's bytes released; for a swap, a copy on the copy stream
//!    to a host-pool slot.
//!
//! Events are placed where the bytes demand them, and only there: before a command is
//! emitted, every earlier command of the other stream that touches a common byte, one of the
//! two writing it, and is not yet ordered before it (vector clocks, as in
//! [`super::hazard`]) gets an event recorded right after it, which the command's stream waits
//! for. So an offload waits for the kernel that wrote the value, a reload for the last
//! kernels that used its bytes, the first reader of a reloaded value for the reload, and the
//! first kernel to reuse an offloaded value's bytes for the offload; the compute stream never
//! waits for a copy whose bytes it does not touch (the plan prices the others as hidden).
//! Each wait is necessary: without it the hazard checker finds a race.
//!
//! Graph inputs are uploaded to their planned offsets first; outputs are read back from
//! theirs after the last point. Every device command names the bytes it reads and writes
//! ([`super::Access`]) for [`super::hazard::check`].

use super::lower::{Io, KernelCache, Lower, Lowered, Work};
use super::{
    Access, DevPtr, DevRange, Event, HostCall, Space, Stream, Transfer, COMPUTE, COPY, STREAMS,
};
use crate::error::ExecError;
use crate::exec::evict::{Back, Events};
use crate::exec::{OutType, Program};
use ebb_plan::arena::Arena;
use ebb_plan::format::{Plan, ValueClass};
use std::collections::HashMap;
use std::sync::Arc;

/// What a command is about, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    /// Program point.
    pub point: usize,
    /// The op or the transfer (`` `dot_general` (node 12) ``, `reload of value 7`).
    pub what: String,
}

/// One command (see the module docs).
#[derive(Clone, Debug)]
pub enum Cmd {
    /// Program point `p` starts (statistics, the transient charge ends).
    Point(usize),
    /// A value comes to hold bytes.
    Claim {
        /// The bytes.
        range: DevRange,
        /// Executor value id.
        value: u32,
    },
    /// Bytes are released.
    Release {
        /// The bytes.
        range: DevRange,
    },
    /// The op running now charges transient bytes.
    Charge(u64),
    /// Graph input `index` uploaded to `dst` on the compute stream.
    Input {
        /// Graph input index.
        index: usize,
        /// Destination.
        dst: DevPtr,
        /// Bytes written.
        access: Access,
        /// Label.
        label: Label,
    },
    /// Device work on a stream.
    Work {
        /// Stream.
        stream: Stream,
        /// What runs.
        work: Work,
        /// Bytes read and written.
        access: Access,
        /// Label.
        label: Label,
    },
    /// An op run on the host, in compute-stream order.
    Host {
        /// The call.
        call: HostCall,
        /// Whether the op's transient bytes (what its host kernel reports) are charged: true
        /// for the op of a point, false for an op rerun by a recompute (the plan's model
        /// counts a recompute's results only, as for its device-lowered ops).
        charge: bool,
        /// Bytes read and written.
        access: Access,
        /// Label.
        label: Label,
    },
    /// Records an event on a stream.
    Record {
        /// Stream.
        stream: Stream,
        /// Event.
        event: Event,
    },
    /// A stream waits for an event.
    Wait {
        /// Stream.
        stream: Stream,
        /// Event.
        event: Event,
    },
}

/// Sizes and counts of a lowered program.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProgramStats {
    /// The arena allocation, bytes.
    pub arena_bytes: u64,
    /// The scratch allocation (recompute temporaries, kernel workspace), bytes.
    pub scratch_bytes: u64,
    /// The pinned host pool, bytes.
    pub pool_bytes: u64,
    /// Kernel launches.
    pub launches: u64,
    /// GEMMs.
    pub gemms: u64,
    /// Device-to-device copies and uploads.
    pub copies: u64,
    /// Offloads and reloads.
    pub swaps: u64,
    /// Ops run on the host (no device kernel).
    pub host_calls: u64,
    /// Kinds of the ops run on the host, with counts, largest first.
    pub host_ops: Vec<(String, u64)>,
    /// Distinct kernels (by symbol).
    pub kernels: u64,
}

/// A program lowered for a device; see the module docs.
pub struct DeviceProgram {
    /// The commands in issue order.
    pub cmds: Vec<Cmd>,
    /// Sizes and counts.
    pub stats: ProgramStats,
    /// Graph outputs: where they end and their types.
    pub(crate) outputs: Vec<(DevRange, OutType)>,
    /// Concrete type of every executor value.
    pub(crate) types: Vec<OutType>,
}

/// The device intervals of each value: `(start, end, offset)` by executor value id.
type Intervals = Vec<Vec<(usize, usize, u64)>>;

struct Builder<'a, 'g> {
    prog: &'a Program<'g>,
    types: &'a [OutType],
    lower: Lower<'a>,
    ivals: Intervals,
    cmds: Vec<Cmd>,
    next_event: Event,
    sync: Sync,
    scratch_top: u64,
    pool_top: u64,
    host_slot: HashMap<u32, u64>,
    stats: ProgramStats,
    kernels: std::collections::HashSet<String>,
    host_ops: HashMap<String, u64>,
}

fn align(x: u64) -> u64 {
    x.div_ceil(256) * 256
}

impl Builder<'_, '_> {
    fn bad(&self, msg: String) -> ExecError {
        ExecError::Plan {
            graph: self.prog.g.name.clone(),
            msg,
        }
    }

    fn event(&mut self) -> Event {
        self.next_event += 1;
        self.next_event - 1
    }

    /// The bytes of value `v` at point `p` (the interval holding `p`; `start`: the one
    /// starting at `p`).
    fn range(&self, v: u32, p: usize, start: bool) -> Result<DevRange, ExecError> {
        let bytes = self.prog.prep.sizes[v as usize];
        if bytes == 0 {
            return Ok(DevRange {
                ptr: DevPtr {
                    space: Space::Arena,
                    offset: 0,
                },
                bytes: 0,
            });
        }
        self.ivals[v as usize]
            .iter()
            .find(|&&(s, e, _)| if start { s == p } else { s <= p && p <= e })
            .map(|&(_, _, offset)| DevRange {
                ptr: DevPtr {
                    space: Space::Arena,
                    offset,
                },
                bytes,
            })
            .ok_or_else(|| {
                self.bad(format!(
                    "value {v} has no planned offset {} point {p}",
                    if start { "starting at" } else { "at" }
                ))
            })
    }

    fn label(&self, p: usize, step: usize) -> Label {
        let s = &self.prog.prep.steps[step];
        Label {
            point: p,
            what: format!(
                "`{}` (node {})",
                self.prog.g.node(s.node).kind().name(),
                s.node.index()
            ),
        }
    }

    /// Emits compute work ([`Builder::emit`]).
    fn compute(&mut self, cmd: Cmd) {
        self.emit(cmd);
    }

    /// Emits a command; device work first waits for the unordered conflicting commands of
    /// the other streams (see the module docs).
    fn emit(&mut self, cmd: Cmd) {
        let Some((stream, access, _)) = cmd.device_work() else {
            self.cmds.push(cmd);
            return;
        };
        let access = access.clone();
        for (other, idx, snap) in self.sync.conflicts(stream, &access) {
            let event = match self.sync.recorded.get(&idx) {
                Some(&e) => e,
                None => {
                    let e = self.event();
                    self.sync.recorded.insert(idx, e);
                    self.sync.inserts.push((idx, other, e));
                    e
                }
            };
            self.sync.join(stream, &snap);
            self.cmds.push(Cmd::Wait { stream, event });
        }
        let idx = self.cmds.len();
        self.cmds.push(cmd);
        self.sync.issue(stream, idx, &access);
    }

    /// Lowers step `si` at point `p` with operand and result addresses given, and emits it;
    /// workspace from `ws` on.
    fn op(
        &mut self,
        p: usize,
        si: usize,
        ins: &[DevRange],
        outs: &[DevRange],
        ws: u64,
        charge: bool,
    ) -> Result<(), ExecError> {
        let prog = self.prog;
        let s = &prog.prep.steps[si];
        let label = self.label(p, si);
        let types = self.types;
        let in_io: Vec<Io> = s
            .operands
            .iter()
            .zip(ins)
            .map(|(&v, r)| Io {
                ptr: r.ptr,
                ty: &types[v as usize],
            })
            .collect();
        let out_io: Vec<Io> = s
            .out
            .iter()
            .zip(outs)
            .map(|(t, r)| Io { ptr: r.ptr, ty: t })
            .collect();
        let ws_ptr = DevPtr {
            space: Space::Scratch,
            offset: ws,
        };
        match self.lower.op(s.node, &in_io, &out_io, ws_ptr) {
            Lowered::Device(work, ws_bytes) => {
                self.stats.scratch_bytes = self.stats.scratch_bytes.max(ws + ws_bytes);
                for (w, access) in work {
                    match &w {
                        Work::Launch(l) => {
                            self.stats.launches += 1;
                            self.kernels.insert(l.kernel.name());
                        }
                        Work::Gemm(_) => self.stats.gemms += 1,
                        Work::Copy { .. } | Work::Upload { .. } => self.stats.copies += 1,
                    }
                    self.compute(Cmd::Work {
                        stream: COMPUTE,
                        work: w,
                        access,
                        label: label.clone(),
                    });
                }
                if charge {
                    let t = crate::exec::control::static_region_bytes(
                        prog.g,
                        s.node,
                        &s.out,
                        &s.in_place,
                        &prog.prep.bindings,
                    )?;
                    self.cmds.push(Cmd::Charge(t));
                }
            }
            Lowered::Host => {
                self.stats.host_calls += 1;
                *self
                    .host_ops
                    .entry(prog.g.node(s.node).kind().name().to_string())
                    .or_default() += 1;
                let access = Access {
                    reads: ins.to_vec(),
                    writes: outs.to_vec(),
                };
                self.compute(Cmd::Host {
                    call: HostCall {
                        step: si,
                        operands: ins.to_vec(),
                        results: outs.to_vec(),
                    },
                    charge,
                    access,
                    label,
                });
            }
        }
        Ok(())
    }
}

impl DeviceProgram {
    /// Lowers `prog` (the plan variant `plan`, finalized with the layout `arena` and the
    /// decisions `events`) for a device; see the module docs.
    ///
    /// # Errors
    /// [`ExecError::Plan`] when the layout does not place a value where the program needs
    /// it, or a type cannot be evaluated.
    pub fn new(
        prog: &Program,
        plan: &Plan,
        arena: &Arena,
        events: &Events,
        cache: &KernelCache,
    ) -> Result<DeviceProgram, ExecError> {
        let g = prog.g;
        let bad = |msg: String| ExecError::Plan {
            graph: g.name.clone(),
            msg,
        };
        // Concrete type of every value.
        let mut types: Vec<OutType> = prog.prep.inputs.clone();
        for s in &prog.prep.steps {
            types.extend(s.out.iter().cloned());
        }
        if types.len() != prog.prep.num_values {
            return Err(bad("value types do not match the program".into()));
        }
        // Device intervals of every value.
        let order = g.order();
        let mut ivals: Intervals = vec![Vec::new(); prog.prep.num_values];
        for a in &arena.allocations {
            let pv = plan
                .values
                .get(a.value.index())
                .ok_or_else(|| bad(format!("the layout places a missing value {}", a.value)))?;
            let v = order
                .get(pv.node.index())
                .and_then(|n| prog.prep.base.get(n.index()))
                .and_then(|&b| b.checked_add(pv.output))
                .filter(|&v| (v as usize) < prog.prep.num_values)
                .ok_or_else(|| bad(format!("value {} is not computed", a.value)))?;
            let _ = matches!(pv.class, ValueClass::Input);
            ivals[v as usize].push((
                a.start.index(),
                a.end.index(),
                u64::try_from(a.offset).map_err(|_| bad(format!("offset {}", a.offset)))?,
            ));
        }
        let mut b = Builder {
            prog,
            types: &types,
            lower: Lower {
                graph: g,
                bindings: &prog.prep.bindings,
                cache,
            },
            ivals,
            cmds: Vec::new(),
            next_event: 0,
            sync: Sync::default(),
            scratch_top: 0,
            pool_top: 0,
            host_slot: HashMap::new(),
            stats: ProgramStats {
                arena_bytes: u64::try_from(arena.arena_bytes).unwrap_or(0),
                ..Default::default()
            },
            kernels: Default::default(),
            host_ops: HashMap::new(),
        };
        b.cmds.push(Cmd::Point(0));
        for i in 0..prog.prep.inputs.len() {
            let r = b.range(i as u32, 0, false)?;
            b.cmds.push(Cmd::Claim {
                range: r,
                value: i as u32,
            });
            if r.bytes > 0 {
                b.emit(Cmd::Input {
                    index: i,
                    dst: r.ptr,
                    access: Access {
                        reads: Vec::new(),
                        writes: vec![r],
                    },
                    label: Label {
                        point: 0,
                        what: format!("upload of input {i}"),
                    },
                });
            }
        }
        for p in 0..prog.prep.steps.len() {
            if p > 0 {
                b.cmds.push(Cmd::Point(p));
            }
            if let Some(backs) = events.before.get(p) {
                for back in backs {
                    match back {
                        Back::Reload { value } => b.reload(*value, p)?,
                        Back::Recompute { value, steps } => b.recompute(*value, steps, p)?,
                    }
                }
            }
            b.step(p)?;
            if let Some(outs) = events.after.get(p) {
                for e in outs {
                    let r = b.range(e.value, p, false)?;
                    b.cmds.push(Cmd::Release { range: r });
                    if !e.to_host || r.bytes == 0 {
                        continue;
                    }
                    let slot = b.pool_top;
                    b.pool_top += align(r.bytes);
                    b.host_slot.insert(e.value, slot);
                    b.stats.swaps += 1;
                    b.emit(Cmd::Work {
                        stream: COPY,
                        work: Work::Copy {
                            t: Transfer::ToHost {
                                src: r.ptr,
                                host: slot,
                            },
                            bytes: r.bytes,
                        },
                        access: Access {
                            reads: vec![r],
                            writes: Vec::new(),
                        },
                        label: Label {
                            point: p,
                            what: format!("offload of value {}", e.value),
                        },
                    });
                }
            }
        }
        let last = prog.prep.steps.len().saturating_sub(1);
        let mut outputs = Vec::with_capacity(prog.prep.outputs.len());
        for &v in &prog.prep.outputs {
            outputs.push((b.range(v, last, false)?, types[v as usize].clone()));
        }
        let mut cmds = b.cmds;
        let mut inserts = std::mem::take(&mut b.sync.inserts);
        inserts.sort_unstable_by(|x, y| y.0.cmp(&x.0));
        for (idx, stream, event) in inserts {
            cmds.insert(idx + 1, Cmd::Record { stream, event });
        }
        let mut stats = b.stats;
        stats.pool_bytes = b.pool_top;
        stats.scratch_bytes = stats.scratch_bytes.max(b.scratch_top);
        stats.kernels = b.kernels.len() as u64;
        let mut host_ops: Vec<(String, u64)> = b.host_ops.into_iter().collect();
        host_ops.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        stats.host_ops = host_ops;
        Ok(DeviceProgram {
            cmds,
            stats,
            outputs,
            types,
        })
    }
}

impl Builder<'_, '_> {
    /// The op of point `p` (see the module docs, 3 and 4).
    fn step(&mut self, p: usize) -> Result<(), ExecError> {
        let s = &self.prog.prep.steps[p];
        let mut ins = Vec::with_capacity(s.operands.len());
        for &v in &s.operands {
            ins.push(self.range(v, p, false)?);
        }
        let mut outs = Vec::with_capacity(s.out.len());
        let mut transferred = Vec::new();
        for i in 0..s.out.len() {
            let v = s.first_result + i as u32;
            let r = self.range(v, p, true)?;
            match s.in_place.iter().find(|w| w.result == i) {
                Some(w) if r.bytes > 0 => {
                    let from = ins[w.operand];
                    if from.ptr != r.ptr {
                        return Err(self.bad(format!(
                            "point {p}: result {i} is written in place into operand {}, but                              the layout places them apart",
                            w.operand
                        )));
                    }
                    transferred.push(s.operands[w.operand]);
                }
                _ => self.cmds.push(Cmd::Claim { range: r, value: v }),
            }
            outs.push(r);
        }
        self.op(p, p, &ins, &outs, 0, true)?;
        for &v in &s.frees {
            if !transferred.contains(&v) {
                let r = self.range(v, p, false)?;
                self.cmds.push(Cmd::Release { range: r });
            }
        }
        Ok(())
    }

    /// A reload before point `p` (see the module docs, 1).
    fn reload(&mut self, v: u32, p: usize) -> Result<(), ExecError> {
        let r = self.range(v, p, true)?;
        let slot = self.host_slot.remove(&v).ok_or_else(|| {
            self.bad(format!(
                "point {p}: reload of value {v}, which is not offloaded"
            ))
        })?;
        self.cmds.push(Cmd::Claim { range: r, value: v });
        if r.bytes == 0 {
            return Ok(());
        }
        self.stats.swaps += 1;
        self.emit(Cmd::Work {
            stream: COPY,
            work: Work::Copy {
                t: Transfer::ToDevice {
                    host: slot,
                    dst: r.ptr,
                },
                bytes: r.bytes,
            },
            access: Access {
                reads: Vec::new(),
                writes: vec![r],
            },
            label: Label {
                point: p,
                what: format!("reload of value {v}"),
            },
        });
        Ok(())
    }

    /// A recompute of `v` by `steps` before point `p` (see the module docs, 2).
    fn recompute(&mut self, v: u32, steps: &[usize], p: usize) -> Result<(), ExecError> {
        let prog = self.prog;
        // Last reader (index into `steps`) of every value the recompute produces.
        let mut last: HashMap<u32, usize> = HashMap::new();
        for (k, &si) in steps.iter().enumerate() {
            let s = &prog.prep.steps[si];
            for o in &s.operands {
                if let Some(x) = last.get_mut(o) {
                    *x = k;
                }
            }
            for i in 0..s.out.len() as u32 {
                last.insert(s.first_result + i, k);
            }
        }
        let mut temps: HashMap<u32, DevRange> = HashMap::new();
        let mut top = 0u64;
        let mut produced = false;
        for (k, &si) in steps.iter().enumerate() {
            let s = &prog.prep.steps[si];
            let mut ins = Vec::with_capacity(s.operands.len());
            for &o in &s.operands {
                ins.push(match temps.get(&o) {
                    Some(r) => *r,
                    None => self.range(o, p, false)?,
                });
            }
            let mut outs = Vec::with_capacity(s.out.len());
            for i in 0..s.out.len() as u32 {
                let u = s.first_result + i;
                let bytes = prog.prep.sizes[u as usize];
                let r = if u == v {
                    produced = true;
                    self.range(v, p, true)?
                } else {
                    let r = DevRange {
                        ptr: DevPtr {
                            space: Space::Scratch,
                            offset: top,
                        },
                        bytes,
                    };
                    top += align(bytes);
                    self.scratch_top = self.scratch_top.max(top);
                    temps.insert(u, r);
                    r
                };
                self.cmds.push(Cmd::Claim { range: r, value: u });
                outs.push(r);
            }
            self.op(p, si, &ins, &outs, top, false)?;
            let mut done: Vec<u32> = last
                .iter()
                .filter(|&(&u, &l)| l == k && u != v)
                .map(|(&u, _)| u)
                .collect();
            done.sort_unstable();
            for u in done {
                if let Some(r) = temps.remove(&u) {
                    self.cmds.push(Cmd::Release { range: r });
                }
            }
        }
        if !produced {
            return Err(self.bad(format!(
                "point {p}: the recompute does not produce value {v}"
            )));
        }
        Ok(())
    }
}

type Clock = [u64; STREAMS];

/// An access of an issued command: its stream's count, the command's index and its
/// stream's clock after it, the bytes and whether they are written.
struct Past {
    clock: u64,
    idx: usize,
    snap: Clock,
    range: DevRange,
    write: bool,
}

/// The builder's view of the streams' order (see the module docs).
#[derive(Default)]
struct Sync {
    vc: [Clock; STREAMS],
    hist: [Vec<Past>; STREAMS],
    /// Events recorded after a command (by its index).
    recorded: HashMap<usize, Event>,
    /// Records to insert after a command: (its index, its stream, event).
    inserts: Vec<(usize, Stream, Event)>,
    issued: u64,
}

impl Sync {
    /// Per other stream, its latest command that conflicts with `a` on `stream` and is not
    /// ordered before it: (stream, command index, clock after it).
    fn conflicts(&self, stream: Stream, a: &Access) -> Vec<(Stream, usize, Clock)> {
        let mut out = Vec::new();
        for other in (0..STREAMS).filter(|&s| s != stream) {
            let seen = self.vc[stream][other];
            let hit = self.hist[other]
                .iter()
                .rev()
                .filter(|p| p.clock > seen)
                .find(|p| {
                    a.writes.iter().any(|r| r.overlaps(&p.range))
                        || p.write && a.reads.iter().any(|r| r.overlaps(&p.range))
                });
            if let Some(p) = hit {
                out.push((other, p.idx, p.snap));
            }
        }
        out
    }

    fn join(&mut self, stream: Stream, snap: &Clock) {
        for s in 0..STREAMS {
            self.vc[stream][s] = self.vc[stream][s].max(snap[s]);
        }
    }

    /// Command `idx` with access `a` is issued on `stream`.
    fn issue(&mut self, stream: Stream, idx: usize, a: &Access) {
        self.vc[stream][stream] += 1;
        let (clock, snap) = (self.vc[stream][stream], self.vc[stream]);
        for (write, ranges) in [(false, &a.reads), (true, &a.writes)] {
            for r in ranges.iter().filter(|r| r.bytes > 0) {
                self.hist[stream].push(Past {
                    clock,
                    idx,
                    snap,
                    range: *r,
                    write,
                });
            }
        }
        self.issued += 1;
        if self.issued % 64 == 0 {
            // Forget what every other stream is ordered after.
            let vc = self.vc;
            for (s, h) in self.hist.iter_mut().enumerate() {
                h.retain(|p| (0..STREAMS).any(|o| o != s && vc[o][s] < p.clock));
            }
        }
    }
}

/// The device kernels `prog`'s ops lower to at its bindings (addresses aside), by symbol.
pub fn device_kernels(
    prog: &Program,
    cache: &KernelCache,
) -> Vec<Arc<ebb_codegen::gpu::GpuKernel>> {
    let mut types: Vec<OutType> = prog.prep.inputs.clone();
    for s in &prog.prep.steps {
        types.extend(s.out.iter().cloned());
    }
    let lower = Lower {
        graph: prog.g,
        bindings: &prog.prep.bindings,
        cache,
    };
    let at = DevPtr {
        space: Space::Arena,
        offset: 0,
    };
    let mut out: std::collections::BTreeMap<String, Arc<ebb_codegen::gpu::GpuKernel>> =
        Default::default();
    for s in &prog.prep.steps {
        let ins: Vec<Io> = s
            .operands
            .iter()
            .map(|&v| Io {
                ptr: at,
                ty: &types[v as usize],
            })
            .collect();
        let outs: Vec<Io> = s.out.iter().map(|t| Io { ptr: at, ty: t }).collect();
        if let Lowered::Device(work, _) = lower.op(s.node, &ins, &outs, at) {
            for (w, _) in work {
                if let Work::Launch(l) = w {
                    out.entry(l.kernel.name()).or_insert(l.kernel);
                }
            }
        }
    }
    out.into_values().collect()
}
