//! One op of a program at the bindings, lowered to device work: kernel launches
//! ([`ebb_codegen::gpu`]), GEMMs, copies and uploads, each with the bytes it reads and writes;
//! or [`Lowered::Host`] for an op without a device kernel (it then runs on the host in stream
//! order, [`super::HostCall`]).
//!
//! | op | device work |
//! |---|---|
//! | elementwise, `iota`, splat `constant`, loop `fusion` | fusion kernel (a one-member region for a single op) |
//! | other `constant`, `dim_constant` | upload of the literal's bytes |
//! | `reshape`, `optimization_barrier` | device-to-device copy |
//! | `broadcast_in_dim`, `transpose`, `slice`, `reverse`, `concatenate`, `pad`, `dynamic_slice`, `dynamic_update_slice` | copy kernel |
//! | `reduce` (one input, a monoid body) | reduce kernel |
//! | `dot_general` (`f32`) | GEMM, with a copy into workspace for an operand whose dimension groups are not one strided matrix stack |
//!
//! Everything else (`gather`, `scatter`, `convolution`, `reduce_window`, `select_and_scatter`,
//! `sort`, `while`, `case`, `rng_bit_generator`, input fusions, element types the kernels do
//! not implement) is [`Lowered::Host`].
//!
//! Invariant: every kernel computes its elements with the reference executor's operations in
//! its order ([`ebb_codegen::gpu`]), and the GEMM is the host's, so on the simt device the
//! results are bit-identical to the CPU executor's except where a GPU kernel's `log`/`exp`/
//! `pow` differs from the C library's ([`ebb_codegen::gpu`]'s math module).

use super::{Access, DevPtr, DevRange, GemmCall, GemmType, Launch, Transfer};
use crate::exec::region::{recognize, Body, Monoid};
use crate::exec::OutType;
use crate::tensor::Tensor;
use ebb_codegen::gpu::{CopyKernel, GpuKernel, ReduceKernel, ReduceOp};
use ebb_codegen::{KernelLayout, Target};
use ebb_ir::{Bindings, DType, Graph, Node, Op};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Device work of an op.
#[derive(Clone, Debug)]
pub enum Work {
    /// A kernel launch.
    Launch(Launch),
    /// A GEMM.
    Gemm(GemmCall),
    /// A device-to-device copy of `bytes` bytes.
    Copy {
        /// The copy.
        t: Transfer,
        /// Length.
        bytes: u64,
    },
    /// Host bytes (a literal) written to `dst`.
    Upload {
        /// Destination.
        dst: DevPtr,
        /// The bytes.
        data: Arc<Vec<u8>>,
    },
}

impl Work {
    /// Short name for messages.
    pub fn what(&self) -> &'static str {
        match self {
            Work::Launch(_) => "kernel",
            Work::Gemm(_) => "GEMM",
            Work::Copy { .. } => "copy",
            Work::Upload { .. } => "upload",
        }
    }
}

/// What an op lowers to.
pub enum Lowered {
    /// Device work in order, and the workspace bytes it uses.
    Device(Vec<(Work, Access)>, u64),
    /// Run the op's CPU kernel on the host.
    Host,
}

/// An operand or result: its address and type at the bindings.
pub struct Io<'a> {
    /// Address.
    pub ptr: DevPtr,
    /// Concrete type.
    pub ty: &'a OutType,
}

impl Io<'_> {
    fn elems(&self) -> usize {
        self.ty.shape.iter().product()
    }

    fn range(&self) -> DevRange {
        DevRange {
            ptr: self.ptr,
            bytes: self.ty.bytes(),
        }
    }
}

/// Kernels made for ops, kept per op so a step does not rebuild them (regions are cloned
/// into a kernel once).
#[derive(Default)]
pub struct KernelCache {
    by_node: Mutex<HashMap<(usize, u64), Option<Arc<GpuKernel>>>>,
}

impl KernelCache {
    /// The kernel of `node` (keyed by its address and `variant`), made by `make` once.
    fn get(
        &self,
        node: &Node,
        variant: u64,
        make: impl FnOnce() -> Option<GpuKernel>,
    ) -> Option<Arc<GpuKernel>> {
        let key = (node as *const Node as usize, variant);
        if let Some(k) = self.by_node.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return k;
        }
        let k = make().map(Arc::new);
        if let Ok(mut m) = self.by_node.lock() {
            m.insert(key, k.clone());
        }
        k
    }
}

/// Row-major element strides.
fn strides(shape: &[usize]) -> Vec<i64> {
    let mut st = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        st[d] = st[d + 1] * shape[d + 1] as i64;
    }
    st
}

fn elem_bytes(d: DType) -> u8 {
    d.size_bytes() as u8
}

/// A side of a copy: buffer, base offset and per-dimension strides (elements), and dynamic
/// indices `(buffer, index type, limit, stride)`.
struct Side {
    ptr: DevPtr,
    base: i64,
    strides: Vec<i64>,
    dynamic: Vec<(DevPtr, DType, i64, i64)>,
}

impl Side {
    fn dense(ptr: DevPtr, shape: &[usize]) -> Side {
        Side {
            ptr,
            base: 0,
            strides: strides(shape),
            dynamic: Vec::new(),
        }
    }
}

/// A copy-kernel launch over `ext` from `src` to `dst`.
fn copy_launch(elem: u8, ext: &[usize], src: Side, dst: Side) -> Launch {
    let n: usize = ext.iter().product();
    let kernel = CopyKernel {
        elem_bytes: elem,
        rank: ext.len() as u8,
        dyn_src: src.dynamic.iter().map(|d| d.1).collect(),
        dyn_dst: dst.dynamic.iter().map(|d| d.1).collect(),
    };
    let mut params = vec![n as i64, src.base, dst.base];
    for k in 0..ext.len() {
        params.extend([ext[k] as i64, src.strides[k], dst.strides[k]]);
    }
    let mut bufs = vec![src.ptr, dst.ptr];
    for (p, _, limit, stride) in src.dynamic.iter().chain(&dst.dynamic) {
        bufs.push(*p);
        params.extend([*limit, *stride]);
    }
    Launch {
        kernel: Arc::new(GpuKernel::Copy(kernel)),
        bufs,
        params,
    }
}

fn access(reads: Vec<DevRange>, writes: Vec<DevRange>) -> Access {
    Access { reads, writes }
}

/// A region of one op over fresh inputs of its operands' types (the parent's symbol scope).
fn singleton(
    g_scope: &ebb_ir::SymbolScope,
    node: &Node,
    operand_types: &[ebb_ir::TensorType],
) -> Graph {
    let mut r = Graph::new("op");
    r.scope = g_scope.clone();
    let ins: Vec<_> = operand_types
        .iter()
        .enumerate()
        .map(|(k, t)| r.add_input(&format!("in{k}"), t.clone()))
        .collect();
    let mut n = Node::new(node.op.clone(), node.outputs.clone());
    n.regions = node.regions.clone();
    let id = r.add_node(n, &ins);
    let outs: Vec<_> = (0..node.outputs.len())
        .map(|k| ebb_ir::ValueRef::new(id, k as u32))
        .collect();
    let names = (0..outs.len()).map(|k| format!("out{k}")).collect();
    r.set_outputs(outs, names);
    r
}

/// The lowering context: the graph (for operand types and the symbol scope), the bindings
/// and the kernel cache.
pub struct Lower<'a> {
    /// The graph the op belongs to.
    pub graph: &'a Graph,
    /// Symbol values.
    pub bindings: &'a Bindings,
    /// Kernels per op.
    pub cache: &'a KernelCache,
}

impl Lower<'_> {
    /// Lowers op `id` of the graph reading `ins` and writing `outs`, with workspace from `ws`
    /// on.
    pub fn op(&self, id: ebb_ir::NodeId, ins: &[Io], outs: &[Io], ws: DevPtr) -> Lowered {
        let node = self.graph.node(id);
        let reads: Vec<DevRange> = ins.iter().map(Io::range).collect();
        let writes: Vec<DevRange> = outs.iter().map(Io::range).collect();
        let one = |w: Work| Lowered::Device(vec![(w, access(reads.clone(), writes.clone()))], 0);
        let kind = node.kind();
        match &node.op {
            Op::Constant(lit) => {
                if lit.splat {
                    if let Some(l) = self.fusion(id, ins, outs) {
                        return one(Work::Launch(l));
                    }
                }
                let Ok(t) = Tensor::from_literal(lit, outs[0].ty.shape.clone()) else {
                    return Lowered::Host;
                };
                if t.dtype() != outs[0].ty.dtype {
                    return Lowered::Host;
                }
                one(Work::Upload {
                    dst: outs[0].ptr,
                    data: Arc::new(t.to_le_bytes()),
                })
            }
            Op::DimConstant(vals) => {
                // As the CPU kernel (`shape_ops::dim_constant`): the values, one repeated.
                let n = outs[0].elems();
                let mut v = Vec::with_capacity(vals.len());
                for d in vals {
                    match d.eval(self.bindings) {
                        Ok(x) => v.push(x),
                        Err(_) => return Lowered::Host,
                    }
                }
                let v = match (v.len(), n) {
                    (a, b) if a == b => v,
                    (1, _) => vec![v[0]; n],
                    _ => return Lowered::Host,
                };
                let data = crate::tensor::Data::I64(crate::buffer::Buf::from(v))
                    .into_dtype(outs[0].ty.dtype);
                let t = Tensor::from_parts(outs[0].ty.shape.clone(), data);
                one(Work::Upload {
                    dst: outs[0].ptr,
                    data: Arc::new(t.to_le_bytes()),
                })
            }
            Op::Reshape(_) => self.moves(&ins[..1], outs),
            Op::OptimizationBarrier => self.moves(ins, outs),
            Op::BroadcastInDim(bc) => {
                let (src, dst) = (&ins[0], &outs[0]);
                let ist = strides(&src.ty.shape);
                let mut ss = vec![0i64; dst.ty.shape.len()];
                for (k, &d) in bc.dims.iter().enumerate() {
                    let Some(slot) = usize::try_from(d).ok().and_then(|d| ss.get_mut(d)) else {
                        return Lowered::Host;
                    };
                    if src.ty.shape[k] != 1 {
                        *slot = ist[k];
                    }
                }
                let l = copy_launch(
                    elem_bytes(dst.ty.dtype),
                    &dst.ty.shape,
                    Side {
                        strides: ss,
                        ..Side::dense(src.ptr, &[])
                    },
                    Side::dense(dst.ptr, &dst.ty.shape),
                );
                one(Work::Launch(l))
            }
            Op::Transpose(perm) => {
                let (src, dst) = (&ins[0], &outs[0]);
                let ist = strides(&src.ty.shape);
                let Some(ss) = perm
                    .iter()
                    .map(|&p| usize::try_from(p).ok().and_then(|p| ist.get(p).copied()))
                    .collect::<Option<Vec<_>>>()
                else {
                    return Lowered::Host;
                };
                let l = copy_launch(
                    elem_bytes(dst.ty.dtype),
                    &dst.ty.shape,
                    Side {
                        strides: ss,
                        ..Side::dense(src.ptr, &[])
                    },
                    Side::dense(dst.ptr, &dst.ty.shape),
                );
                one(Work::Launch(l))
            }
            Op::Slice(spec) => {
                let (src, dst) = (&ins[0], &outs[0]);
                let ist = strides(&src.ty.shape);
                let mut base = 0i64;
                let mut ss = Vec::new();
                for k in 0..ist.len() {
                    let (Some(st), Some(sd)) = (spec.start.get(k), spec.strides.get(k)) else {
                        return Lowered::Host;
                    };
                    let (Ok(st), Ok(sd)) = (st.eval(self.bindings), sd.eval(self.bindings)) else {
                        return Lowered::Host;
                    };
                    base += st * ist[k];
                    ss.push(sd * ist[k]);
                }
                let l = copy_launch(
                    elem_bytes(dst.ty.dtype),
                    &dst.ty.shape,
                    Side {
                        ptr: src.ptr,
                        base,
                        strides: ss,
                        dynamic: Vec::new(),
                    },
                    Side::dense(dst.ptr, &dst.ty.shape),
                );
                one(Work::Launch(l))
            }
            Op::Reverse(dims) => {
                let (src, dst) = (&ins[0], &outs[0]);
                let mut ss = strides(&src.ty.shape);
                let mut base = 0i64;
                for &d in dims {
                    let Some(d) = usize::try_from(d).ok().filter(|&d| d < ss.len()) else {
                        return Lowered::Host;
                    };
                    base += (src.ty.shape[d] as i64 - 1).max(0) * ss[d];
                    ss[d] = -ss[d];
                }
                let l = copy_launch(
                    elem_bytes(dst.ty.dtype),
                    &dst.ty.shape,
                    Side {
                        ptr: src.ptr,
                        base,
                        strides: ss,
                        dynamic: Vec::new(),
                    },
                    Side::dense(dst.ptr, &dst.ty.shape),
                );
                one(Work::Launch(l))
            }
            Op::Concatenate(axis) => {
                let dst = &outs[0];
                let Some(axis) = usize::try_from(*axis)
                    .ok()
                    .filter(|&a| a < dst.ty.shape.len())
                else {
                    return Lowered::Host;
                };
                let ost = strides(&dst.ty.shape);
                let mut at = 0i64;
                let mut work = Vec::new();
                for src in ins {
                    if src.elems() > 0 {
                        let l = copy_launch(
                            elem_bytes(dst.ty.dtype),
                            &src.ty.shape,
                            Side::dense(src.ptr, &src.ty.shape),
                            Side {
                                ptr: dst.ptr,
                                base: at * ost[axis],
                                strides: ost.clone(),
                                dynamic: Vec::new(),
                            },
                        );
                        work.push((
                            Work::Launch(l),
                            access(vec![src.range()], vec![dst.range()]),
                        ));
                    }
                    at += src.ty.shape[axis] as i64;
                }
                Lowered::Device(work, 0)
            }
            Op::Pad(p) => self.pad(p, ins, outs),
            Op::DynamicSlice(_) => {
                let (src, dst) = (&ins[0], &outs[0]);
                let ist = strides(&src.ty.shape);
                let dynamic = (0..ist.len())
                    .map(|k| {
                        let lim = src.ty.shape[k] as i64 - dst.ty.shape[k] as i64;
                        (ins[1 + k].ptr, ins[1 + k].ty.dtype, lim, ist[k])
                    })
                    .collect();
                let l = copy_launch(
                    elem_bytes(dst.ty.dtype),
                    &dst.ty.shape,
                    Side {
                        ptr: src.ptr,
                        base: 0,
                        strides: ist,
                        dynamic,
                    },
                    Side::dense(dst.ptr, &dst.ty.shape),
                );
                one(Work::Launch(l))
            }
            Op::DynamicUpdateSlice => {
                let (base, upd, dst) = (&ins[0], &ins[1], &outs[0]);
                let mut work = Vec::new();
                if base.ptr != dst.ptr {
                    work.push((
                        Work::Copy {
                            t: Transfer::Device {
                                src: base.ptr,
                                dst: dst.ptr,
                            },
                            bytes: dst.ty.bytes(),
                        },
                        access(vec![base.range()], vec![dst.range()]),
                    ));
                }
                let ost = strides(&dst.ty.shape);
                let dynamic = (0..ost.len())
                    .map(|k| {
                        let lim = dst.ty.shape[k] as i64 - upd.ty.shape[k] as i64;
                        (ins[2 + k].ptr, ins[2 + k].ty.dtype, lim, ost[k])
                    })
                    .collect();
                if upd.elems() > 0 {
                    let l = copy_launch(
                        elem_bytes(dst.ty.dtype),
                        &upd.ty.shape,
                        Side::dense(upd.ptr, &upd.ty.shape),
                        Side {
                            ptr: dst.ptr,
                            base: 0,
                            strides: ost,
                            dynamic,
                        },
                    );
                    let mut r: Vec<DevRange> = ins[1..].iter().map(Io::range).collect();
                    if base.ptr == dst.ptr {
                        r.push(dst.range());
                    }
                    work.push((Work::Launch(l), access(r, vec![dst.range()])));
                }
                Lowered::Device(work, 0)
            }
            Op::Reduce(dims) => match self.reduce(node, dims, ins, outs) {
                Some(l) => one(Work::Launch(l)),
                None => Lowered::Host,
            },
            Op::DotGeneral(dd) => self.dot(dd, ins, outs, ws),
            Op::Fusion(_) | Op::Iota(_) => match self.fusion(id, ins, outs) {
                Some(l) => one(Work::Launch(l)),
                None => Lowered::Host,
            },
            _ if kind.is_elementwise() => match self.fusion(id, ins, outs) {
                Some(l) => one(Work::Launch(l)),
                None => Lowered::Host,
            },
            _ => Lowered::Host,
        }
    }

    /// Results that are their operands' bytes (`reshape`, `optimization_barrier`).
    fn moves(&self, ins: &[Io], outs: &[Io]) -> Lowered {
        let mut work = Vec::new();
        for (src, dst) in ins.iter().zip(outs) {
            if src.ptr != dst.ptr && dst.ty.bytes() > 0 {
                work.push((
                    Work::Copy {
                        t: Transfer::Device {
                            src: src.ptr,
                            dst: dst.ptr,
                        },
                        bytes: dst.ty.bytes(),
                    },
                    access(vec![src.range()], vec![dst.range()]),
                ));
            }
        }
        Lowered::Device(work, 0)
    }

    /// `pad`: the padding value everywhere, then the operand at its positions (negative
    /// padding crops it).
    fn pad(&self, p: &ebb_ir::op::PadSpec, ins: &[Io], outs: &[Io]) -> Lowered {
        let (src, val, dst) = (&ins[0], &ins[1], &outs[0]);
        let rank = dst.ty.shape.len();
        if p.low.len() != rank || p.high.len() != rank || p.interior.len() != rank {
            return Lowered::Host;
        }
        let elem = elem_bytes(dst.ty.dtype);
        let mut work = Vec::new();
        if dst.elems() > 0 {
            let fill = copy_launch(
                elem,
                &dst.ty.shape,
                Side {
                    strides: vec![0; rank],
                    ..Side::dense(val.ptr, &[])
                },
                Side::dense(dst.ptr, &dst.ty.shape),
            );
            work.push((
                Work::Launch(fill),
                access(vec![val.range()], vec![dst.range()]),
            ));
        }
        let (ist, ost) = (strides(&src.ty.shape), strides(&dst.ty.shape));
        let (mut sbase, mut dbase) = (0i64, 0i64);
        let (mut ext, mut ss, mut ds) = (Vec::new(), Vec::new(), Vec::new());
        for k in 0..rank {
            let (n, out) = (src.ty.shape[k] as i64, dst.ty.shape[k] as i64);
            let (low, step) = (p.low[k], p.interior[k] + 1);
            if step < 1 {
                return Lowered::Host;
            }
            // operand element j lands at low + j·step; keep those inside [0, out)
            let first = if low >= 0 {
                0
            } else {
                (-low + step - 1) / step
            };
            let last = if out - 1 - low < 0 {
                -1
            } else {
                ((out - 1 - low) / step).min(n - 1)
            };
            let count = (last - first + 1).max(0);
            ext.push(count as usize);
            ss.push(ist[k]);
            ds.push(step * ost[k]);
            sbase += first * ist[k];
            dbase += (low + first * step) * ost[k];
        }
        if ext.iter().all(|&e| e > 0) {
            let l = copy_launch(
                elem,
                &ext,
                Side {
                    ptr: src.ptr,
                    base: sbase,
                    strides: ss,
                    dynamic: Vec::new(),
                },
                Side {
                    ptr: dst.ptr,
                    base: dbase,
                    strides: ds,
                    dynamic: Vec::new(),
                },
            );
            work.push((
                Work::Launch(l),
                access(vec![src.range(), dst.range()], vec![dst.range()]),
            ));
        }
        Lowered::Device(work, 0)
    }

    /// The fusion kernel of a loop `fusion`, or of a one-member region for a single op.
    fn fusion(&self, id: ebb_ir::NodeId, ins: &[Io], outs: &[Io]) -> Option<Launch> {
        let node = self.graph.node(id);
        let operand_types: Vec<ebb_ir::TensorType> = self
            .graph
            .operands(id)
            .iter()
            .map(|v| self.graph.value_type(*v).clone())
            .collect();
        let kernel = self.cache.get(node, 0, || {
            let region = match (&node.op, node.regions.as_slice()) {
                (Op::Fusion(_), [r]) => r.clone(),
                (Op::Fusion(_), _) => return None,
                _ => singleton(&self.graph.scope, node, &operand_types),
            };
            let layout = KernelLayout::of_target(&region, Target::Gpu).ok()?;
            Some(GpuKernel::Fusion { region, layout })
        })?;
        let GpuKernel::Fusion { region, layout } = kernel.as_ref() else {
            return None;
        };
        if ins.len() != layout.inputs.len() || outs.len() != layout.stores.len() {
            return None;
        }
        let n = outs.first().map_or(0, Io::elems);
        if outs.iter().any(|o| o.elems() != n) {
            return None;
        }
        let (p, _) = crate::exec::jit::params(region, layout, self.bindings, Some(1), n).ok()?;
        let mut params = vec![n as i64];
        params.extend(p);
        params[1] = 1;
        params[2] = 0;
        let bufs = ins.iter().chain(outs).map(|io| io.ptr).collect();
        Some(Launch {
            kernel,
            bufs,
            params,
        })
    }

    /// The reduce kernel of a one-input `reduce` with a monoid body.
    fn reduce(&self, node: &Node, dims: &[i64], ins: &[Io], outs: &[Io]) -> Option<Launch> {
        let ([x, init], [out]) = (ins, outs) else {
            return None;
        };
        let dtype = x.ty.dtype;
        if init.ty.dtype != dtype || out.ty.dtype != dtype {
            return None;
        }
        let Body::Monoid(m) = recognize(node.regions.first()?) else {
            return None;
        };
        let op = match m {
            Monoid::Add => ReduceOp::Add,
            Monoid::Mul => ReduceOp::Mul,
            Monoid::Max => ReduceOp::Max,
            Monoid::Min => ReduceOp::Min,
            Monoid::And => ReduceOp::And,
            Monoid::Or => ReduceOp::Or,
        };
        if !ebb_codegen::gpu::reduce::reduce_supported(dtype, op) {
            return None;
        }
        let shape = &x.ty.shape;
        let mut red = vec![false; shape.len()];
        for &d in dims {
            *red.get_mut(usize::try_from(d).ok()?)? = true;
        }
        let (s, r) = crate::exec::reduce::merge(shape, &red);
        let st = strides(&s);
        let inner = r.last().copied().unwrap_or(false);
        let last = s.len().saturating_sub(1);
        let mut params = vec![out.elems() as i64];
        let mut kept = 0u8;
        for k in (0..s.len()).filter(|&k| !r[k]) {
            params.extend([s[k] as i64, st[k]]);
            kept += 1;
        }
        let mut reduced = 0u8;
        for k in (0..s.len()).filter(|&k| r[k] && !(inner && k == last)) {
            params.extend([s[k] as i64, st[k]]);
            reduced += 1;
        }
        params.push(if inner { s[last] as i64 } else { 0 });
        if x.elems() == 0 && out.elems() > 0 {
            return None;
        }
        let kernel = ReduceKernel {
            dtype,
            op,
            kept,
            reduced,
            inner,
        };
        Some(Launch {
            kernel: Arc::new(GpuKernel::Reduce(kernel)),
            bufs: vec![x.ptr, init.ptr, out.ptr],
            params,
        })
    }

    /// `dot_general` of `f32` operands into `f32`: the operands as `[batch, rows, cols]`
    /// matrix stacks (copied into workspace when their dimension groups are not a strided
    /// stack with a unit stride), one batched GEMM.
    fn dot(&self, dd: &ebb_ir::op::DotDims, ins: &[Io], outs: &[Io], ws: DevPtr) -> Lowered {
        let ([l, r], [out]) = (ins, outs) else {
            return Lowered::Host;
        };
        if l.ty.dtype != DType::F32 || r.ty.dtype != DType::F32 || out.ty.dtype != DType::F32 {
            return Lowered::Host;
        }
        let (ls, rs) = (&l.ty.shape, &r.ty.shape);
        let dims = |v: &[i64], n: usize| crate::exec::dot::dims_of(v, "", n).ok();
        let (Some(lb), Some(rb), Some(lc), Some(rc)) = (
            dims(&dd.lhs_batch, ls.len()),
            dims(&dd.rhs_batch, rs.len()),
            dims(&dd.lhs_contract, ls.len()),
            dims(&dd.rhs_contract, rs.len()),
        ) else {
            return Lowered::Host;
        };
        let lf: Vec<usize> = (0..ls.len())
            .filter(|d| !lb.contains(d) && !lc.contains(d))
            .collect();
        let rf: Vec<usize> = (0..rs.len())
            .filter(|d| !rb.contains(d) && !rc.contains(d))
            .collect();
        let prod = |s: &[usize], g: &[usize]| g.iter().map(|&d| s[d]).product::<usize>();
        let (bt, m, k, n) = (prod(ls, &lb), prod(ls, &lf), prod(ls, &lc), prod(rs, &rf));
        if k == 0 || bt * m * n == 0 {
            return Lowered::Host;
        }
        let mut work = Vec::new();
        let mut ws_used = 0u64;
        let mut reads = vec![l.range(), r.range()];
        let mut stack = |io: &Io, groups: [&[usize]; 3], rows: usize, cols: usize| {
            let shape = &io.ty.shape;
            if let Some([sb, sr, sc]) = crate::exec::dot::group_strides(shape, groups) {
                if sr == 1 || sc == 1 || rows <= 1 || cols <= 1 {
                    return (io.ptr, io.elems(), sr, sc, sb);
                }
            }
            // Copy into workspace as a contiguous [batch, rows, cols] stack.
            let perm: Vec<usize> = groups.iter().flat_map(|g| g.iter().copied()).collect();
            let ist = strides(shape);
            let ext: Vec<usize> = perm.iter().map(|&d| shape[d]).collect();
            let dst = ws.add(ws_used);
            let bytes = io.ty.bytes();
            let l = copy_launch(
                4,
                &ext,
                Side {
                    strides: perm.iter().map(|&d| ist[d]).collect(),
                    ..Side::dense(io.ptr, &[])
                },
                Side::dense(dst, &ext),
            );
            let range = DevRange { ptr: dst, bytes };
            work.push((Work::Launch(l), access(vec![io.range()], vec![range])));
            reads.push(range);
            ws_used += bytes.div_ceil(256) * 256;
            (dst, io.elems(), cols as isize, 1, (rows * cols) as isize)
        };
        let a = stack(l, [&lb, &lf, &lc], m, k);
        let b = stack(r, [&rb, &rc, &rf], k, n);
        let call = GemmCall {
            dtype: GemmType::F32,
            batch: bt,
            m,
            k,
            n,
            a: (a.0, a.1, a.2, a.3, a.4),
            b: (b.0, b.1, b.2, b.3, b.4),
            c: out.ptr,
        };
        work.push((Work::Gemm(call), access(reads, vec![out.range()])));
        Lowered::Device(work, ws_used)
    }
}
