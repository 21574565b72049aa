//! One op of a program at the bindings, lowered to device work: kernel launches
//! ([`ebb_codegen::gpu`]), GEMMs, copies and uploads, each with the bytes it reads and writes;
//! or [`Lowered::Host`] for an op without a device kernel (it then runs on the host in stream
//! order, [`super::HostCall`]).
//!
//! | op | device work |
//! |---|---|
//! | elementwise, `iota`, splat `constant`, loop `fusion` | fusion kernel (a one-member region for a single op) |
//! | input `fusion`, a loop `fusion` without one kernel | its members' work, one by one ([`super::region`]) |
//! | other `constant`, `dim_constant` | upload of the literal's bytes |
//! | `reshape`, `optimization_barrier`, `annotate_device_placement` | device-to-device copy |
//! | `broadcast_in_dim`, `transpose`, `slice`, `reverse`, `concatenate`, `pad`, `dynamic_slice`, `dynamic_update_slice` | copy kernel |
//! | `reduce` (one input, a monoid body) | reduce kernel |
//! | `dot_general` (`f32`) | GEMM, with a copy into workspace for an operand whose dimension groups are not one strided matrix stack |
//! | `convolution` (`f32`) | transposes to `[N, C, S...]`/`[O, I, K...]`, per feature group an im2col kernel and a batched GEMM (the reference's im2col order and GEMM shapes), a transpose to the result layout |
//! | `gather` | gather kernel |
//! | `rng_bit_generator` (`ui32`/`ui64` bits) | threefry kernel |
//! | `scatter` (one input, a monoid or overwriting body, indexed dimensions of window extent 1 or a single scatter) | copy of the input (unless in place), scatter kernel |
//!
//! | `reduce_window` (one input, a monoid body), `select_and_scatter` (a `compare` select, a monoid scatter) | window kernel |
//!
//! Everything else (`while`, `case`, `sort`, `custom_call`, other scatters, window ops with
//! other bodies, element types the kernels do not implement) is
//! [`Lowered::Host`].
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

    pub(super) fn range(&self) -> DevRange {
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

/// Whether `EBB_DEVICE_HOST` (read once) lists op kind `kind`.
fn forced_to_host(kind: &str) -> bool {
    static KINDS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    KINDS
        .get_or_init(|| {
            std::env::var("EBB_DEVICE_HOST")
                .map(|v| v.split(',').map(|k| k.trim().to_string()).collect())
                .unwrap_or_default()
        })
        .iter()
        .any(|k| k == kind)
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

/// A copy of every element of `dst` (dense), read from `src` at `base + Σ index · strides`
/// (plus `dynamic` offsets): broadcast, transpose, slice, reverse and dynamic slice.
fn read_into(
    dst: &Io,
    src: DevPtr,
    base: i64,
    strides: Vec<i64>,
    dynamic: Vec<(DevPtr, DType, i64, i64)>,
) -> Launch {
    copy_launch(
        elem_bytes(dst.ty.dtype),
        &dst.ty.shape,
        Side {
            ptr: src,
            base,
            strides,
            dynamic,
        },
        Side::dense(dst.ptr, &dst.ty.shape),
    )
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

/// Dimension numbers as indices below `rank`.
fn dims_below(v: &[i64], rank: usize) -> Option<Vec<usize>> {
    v.iter()
        .map(|&d| usize::try_from(d).ok().filter(|&d| d < rank))
        .collect()
}

/// An index tensor read as `IndexReader` does (`exec/gather_scatter.rs`): the strides of its
/// batch dimensions (every dimension but `index_vector_dim`), the index vector's stride and
/// length.
fn index_layout(idx: &OutType, ivd: i64) -> Option<(Vec<i64>, i64, usize)> {
    let rank = idx.shape.len();
    let ivd = usize::try_from(ivd).ok().filter(|&v| v <= rank)?;
    let st = strides(&idx.shape);
    let batch = (0..rank).filter(|&d| d != ivd).map(|d| st[d]).collect();
    let (vs, n) = if ivd < rank {
        (st[ivd], idx.shape[ivd])
    } else {
        (0, 1)
    };
    Some((batch, vs, n))
}

/// `full_batching_index`: operand dimension -> position in the batch index.
fn batching(
    op_batch: &[usize],
    idx_batch: &[usize],
    ivd: i64,
    rank: usize,
) -> Option<Vec<Option<usize>>> {
    if op_batch.len() != idx_batch.len() {
        return None;
    }
    let ivd = usize::try_from(ivd).ok()?;
    let mut m = vec![None; rank];
    for (&o, &s) in op_batch.iter().zip(idx_batch) {
        if s == ivd {
            return None;
        }
        m[o] = Some(if s < ivd { s } else { s - 1 });
    }
    Some(m)
}

/// The gather kernel's launch (see [`ebb_codegen::gpu::gather`]).
fn gather(gd: &ebb_ir::op::GatherDims, ins: &[Io], outs: &[Io], b: &Bindings) -> Option<Launch> {
    let ([x, idx], [out]) = (ins, outs) else {
        return None;
    };
    if !idx.ty.dtype.is_int() || x.ty.dtype != out.ty.dtype {
        return None;
    }
    let (xr, rr) = (x.ty.shape.len(), out.ty.shape.len());
    let offset_dims = dims_below(&gd.offset_dims, rr)?;
    let collapsed = dims_below(&gd.collapsed_slice_dims, xr)?;
    let op_batch = dims_below(&gd.operand_batching_dims, xr)?;
    let idx_batch = dims_below(&gd.start_indices_batching_dims, idx.ty.shape.len())?;
    let start_map = dims_below(&gd.start_index_map, xr)?;
    let sizes: Vec<i64> = gd
        .slice_sizes
        .iter()
        .map(|d| d.eval(b).ok())
        .collect::<Option<_>>()?;
    if sizes.len() != xr {
        return None;
    }
    let (batch_strides, vec_stride, nvec) = index_layout(idx.ty, gd.index_vector_dim)?;
    if nvec != start_map.len() {
        return None;
    }
    let batch_dims: Vec<usize> = (0..rr).filter(|d| !offset_dims.contains(d)).collect();
    let window_op_dims: Vec<usize> = (0..xr)
        .filter(|d| !collapsed.contains(d) && !op_batch.contains(d))
        .collect();
    if batch_dims.len() != batch_strides.len() || window_op_dims.len() != offset_dims.len() {
        return None;
    }
    let bmap = batching(&op_batch, &idx_batch, gd.index_vector_dim, xr)?;
    let xst = strides(&x.ty.shape);
    let mut params = vec![out.elems() as i64];
    for d in 0..rr {
        let (is, xs) = match batch_dims.iter().position(|&b| b == d) {
            Some(k) => (
                batch_strides[k],
                (0..xr)
                    .filter(|&od| bmap[od] == Some(k))
                    .map(|od| xst[od])
                    .sum(),
            ),
            None => {
                let k = offset_dims.iter().position(|&o| o == d)?;
                (0, xst[window_op_dims[k]])
            }
        };
        params.extend([out.ty.shape[d] as i64, is, xs]);
    }
    params.push(vec_stride);
    for &d in &start_map {
        params.extend([(x.ty.shape[d] as i64 - sizes[d]).max(0), xst[d]]);
    }
    let kernel = ebb_codegen::gpu::GatherKernel {
        elem_bytes: elem_bytes(out.ty.dtype),
        index: idx.ty.dtype,
        rank: rr as u8,
        nvec: nvec as u8,
    };
    Some(Launch {
        kernel: Arc::new(GpuKernel::Gather(kernel)),
        bufs: vec![x.ptr, idx.ptr, out.ptr],
        params,
    })
}

/// A one-input scatter with a monoid or overwriting body whose windows cannot meet: the
/// input copied to the result (unless in place) and the scatter kernel (see
/// [`ebb_codegen::gpu::gather`]).
fn scatter(
    node: &Node,
    sd: &ebb_ir::op::ScatterDims,
    ins: &[Io],
    outs: &[Io],
) -> Option<Vec<(Work, Access)>> {
    let ([x, idx, upd], [out]) = (ins, outs) else {
        return None;
    };
    let op = match recognize(node.regions.first()?) {
        Body::Monoid(m) => Some(match m {
            Monoid::Add => ReduceOp::Add,
            Monoid::Mul => ReduceOp::Mul,
            Monoid::Max => ReduceOp::Max,
            Monoid::Min => ReduceOp::Min,
            Monoid::And => ReduceOp::And,
            Monoid::Or => ReduceOp::Or,
        }),
        Body::Overwrite => None,
        _ => return None,
    };
    let dtype = out.ty.dtype;
    if x.ty.dtype != dtype
        || upd.ty.dtype != dtype
        || !idx.ty.dtype.is_int()
        || !ebb_codegen::gpu::gather::scatter_supported(dtype, op)
    {
        return None;
    }
    let (xs, us) = (&x.ty.shape, &upd.ty.shape);
    let (xr, ur) = (xs.len(), us.len());
    let uwd = dims_below(&sd.update_window_dims, ur)?;
    let inserted = dims_below(&sd.inserted_window_dims, xr)?;
    let in_batch = dims_below(&sd.input_batching_dims, xr)?;
    let idx_batch = dims_below(&sd.scatter_indices_batching_dims, idx.ty.shape.len())?;
    let to_op = dims_below(&sd.scatter_dims_to_operand_dims, xr)?;
    let (batch_strides, vec_stride, nvec) = index_layout(idx.ty, sd.index_vector_dim)?;
    if nvec != to_op.len() {
        return None;
    }
    let scatter_dims: Vec<usize> = (0..ur).filter(|d| !uwd.contains(d)).collect();
    let window_op_dims: Vec<usize> = (0..xr)
        .filter(|d| !inserted.contains(d) && !in_batch.contains(d))
        .collect();
    if scatter_dims.len() != batch_strides.len() || window_op_dims.len() != uwd.len() {
        return None;
    }
    let bmap = batching(&in_batch, &idx_batch, sd.index_vector_dim, xr)?;
    let wshape: Vec<usize> = uwd.iter().map(|&d| us[d]).collect();
    let (xst, ust) = (strides(xs), strides(us));
    let nw: usize = wshape.iter().product();
    let ns: usize = scatter_dims.iter().map(|&d| us[d]).product();
    // Windows of different scatters meet only along an indexed dimension they span (and
    // only when there are several).
    for &d in &to_op {
        if let Some(k) = window_op_dims.iter().position(|&w| w == d) {
            if wshape[k] != 1 && ns > 1 {
                return None;
            }
        }
    }
    let mut params = vec![nw as i64, ns as i64];
    for d in 0..xr {
        params.extend([xs[d] as i64, xst[d]]);
    }
    for (k, &d) in uwd.iter().enumerate() {
        params.extend([us[d] as i64, window_op_dims[k] as i64, ust[d]]);
    }
    for (k, &d) in scatter_dims.iter().enumerate() {
        let xd = (0..xr)
            .find(|&od| bmap[od] == Some(k))
            .map_or(-1, |od| od as i64);
        params.extend([us[d] as i64, ust[d], batch_strides[k], xd]);
    }
    params.push(vec_stride);
    params.extend(to_op.iter().map(|&d| d as i64));
    let mut work = Vec::new();
    if x.ptr != out.ptr && out.ty.bytes() > 0 {
        work.push((
            Work::Copy {
                t: Transfer::Device {
                    src: x.ptr,
                    dst: out.ptr,
                },
                bytes: out.ty.bytes(),
            },
            access(vec![x.range()], vec![out.range()]),
        ));
    }
    if nw > 0 && ns > 0 {
        let kernel = ebb_codegen::gpu::ScatterKernel {
            dtype,
            op,
            index: idx.ty.dtype,
            rank: xr as u8,
            window: uwd.len() as u8,
            scatter: scatter_dims.len() as u8,
            nvec: nvec as u8,
        };
        work.push((
            Work::Launch(Launch {
                kernel: Arc::new(GpuKernel::Scatter(kernel)),
                bufs: vec![out.ptr, idx.ptr, upd.ptr],
                params,
            }),
            access(
                vec![idx.range(), upd.range(), out.range()],
                vec![out.range()],
            ),
        ));
    }
    Some(work)
}

/// The fusion kernel of `convert` from `from` to `to` over `n` elements, `src` to `dst`
/// (a one-member region over a vector of symbolic length; kernels kept per pair of types).
fn convert_launch(from: DType, to: DType, n: usize, src: DevPtr, dst: DevPtr) -> Option<Launch> {
    type Kernels = Mutex<HashMap<(DType, DType), Option<Arc<GpuKernel>>>>;
    static KERNELS: std::sync::OnceLock<Kernels> = std::sync::OnceLock::new();
    let kernels = KERNELS.get_or_init(Default::default);
    let mut m = kernels.lock().ok()?;
    let kernel = m
        .entry((from, to))
        .or_insert_with(|| {
            let mut r = Graph::new("convert");
            let sym = r.scope.declare("n");
            let ty = |d: DType| ebb_ir::TensorType::new(d, vec![ebb_ir::DimExpr::sym(sym.name())]);
            let x = r.add_input("x", ty(from));
            let id = r.add_node(Node::new(Op::Convert(to), vec![ty(to)]), &[x]);
            r.set_outputs(vec![ebb_ir::ValueRef::new(id, 0)], vec!["y".into()]);
            let layout = KernelLayout::of_target(&r, Target::Gpu).ok()?;
            Some(Arc::new(GpuKernel::Fusion { region: r, layout }))
        })
        .clone()?;
    let GpuKernel::Fusion { layout, .. } = kernel.as_ref() else {
        return None;
    };
    let mut params = vec![0i64; 1 + layout.param_count()];
    params[0] = n as i64;
    params[1] = 1;
    Some(Launch {
        kernel,
        bufs: vec![src, dst],
        params,
    })
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
    ///
    /// An op whose kind is listed in the environment variable `EBB_DEVICE_HOST`
    /// (comma-separated op names, e.g. `fusion,reduce`) runs on the host: a way to find which
    /// ops' device work makes outputs differ from the reference executor's.
    pub fn op(&self, id: ebb_ir::NodeId, ins: &[Io], outs: &[Io], ws: DevPtr) -> Lowered {
        let node = self.graph.node(id);
        if forced_to_host(node.kind().name()) {
            return Lowered::Host;
        }
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
            Op::AnnotateDevicePlacement(_) => self.moves(&ins[..1], outs),
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
                let l = read_into(dst, src.ptr, 0, ss, Vec::new());
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
                let l = read_into(dst, src.ptr, 0, ss, Vec::new());
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
                let l = read_into(dst, src.ptr, base, ss, Vec::new());
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
                let l = read_into(dst, src.ptr, base, ss, Vec::new());
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
                let l = read_into(dst, src.ptr, 0, ist, dynamic);
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
            Op::Convolution(spec) => self.convolution(spec, ins, outs, ws),
            Op::ReduceWindow(w) => match self.window(node, w, ins, outs, false) {
                Some(l) => one(Work::Launch(l)),
                None => Lowered::Host,
            },
            Op::SelectAndScatter(w) => match self.window(node, w, ins, outs, true) {
                Some(l) => one(Work::Launch(l)),
                None => Lowered::Host,
            },
            Op::RngBitGenerator(spec) => match (ins, outs) {
                ([state], [next, bits])
                    if state.ty.dtype == DType::U64
                        && state.elems() == 2
                        && next.elems() == 2
                        && matches!(spec.dtype, DType::U32 | DType::U64)
                        && bits.ty.dtype == spec.dtype
                        && bits.elems() > 0 =>
                {
                    let wide = spec.dtype == DType::U64;
                    let n = bits.elems();
                    let blocks = if wide { n } else { n.div_ceil(2) };
                    one(Work::Launch(Launch {
                        kernel: Arc::new(GpuKernel::Rng(ebb_codegen::gpu::RngKernel { wide })),
                        bufs: vec![state.ptr, next.ptr, bits.ptr],
                        params: vec![blocks as i64, n as i64, blocks as i64],
                    }))
                }
                _ => Lowered::Host,
            },
            Op::Gather(gd) => match gather(gd, ins, outs, self.bindings) {
                Some(l) => one(Work::Launch(l)),
                None => Lowered::Host,
            },
            Op::Scatter(sd) => match scatter(node, sd, ins, outs) {
                Some(work) => Lowered::Device(work, 0),
                None => Lowered::Host,
            },
            Op::Fusion(_) => match self.fusion(id, ins, outs) {
                Some(l) => one(Work::Launch(l)),
                None => self.region(node, ins, outs, ws),
            },
            Op::Iota(_) => match self.fusion(id, ins, outs) {
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

    /// The window kernel of a `reduce_window` or `select_and_scatter` (see
    /// [`ebb_codegen::gpu::window`]).
    fn window(
        &self,
        node: &Node,
        w: &ebb_ir::op::Window,
        ins: &[Io],
        outs: &[Io],
        select: bool,
    ) -> Option<Launch> {
        let monoid = |r: &Graph| match recognize(r) {
            Body::Monoid(m) => Some(match m {
                Monoid::Add => ReduceOp::Add,
                Monoid::Mul => ReduceOp::Mul,
                Monoid::Max => ReduceOp::Max,
                Monoid::Min => ReduceOp::Min,
                Monoid::And => ReduceOp::And,
                Monoid::Or => ReduceOp::Or,
            }),
            _ => None,
        };
        let (x, windows, dir, op, bufs, n) = if select {
            let ([x, src, init], [out], [sel, sc]) = (ins, outs, node.regions.as_slice()) else {
                return None;
            };
            let Body::Compare { dir, total: false } = recognize(sel) else {
                return None;
            };
            if [src.ty.dtype, init.ty.dtype, out.ty.dtype]
                .iter()
                .any(|&d| d != x.ty.dtype)
            {
                return None;
            }
            (
                x,
                src,
                Some(dir),
                monoid(sc)?,
                vec![x.ptr, src.ptr, init.ptr, out.ptr],
                x.elems(),
            )
        } else {
            let ([x, init], [out]) = (ins, outs) else {
                return None;
            };
            if init.ty.dtype != x.ty.dtype || out.ty.dtype != x.ty.dtype {
                return None;
            }
            (
                x,
                out,
                None,
                monoid(node.regions.first()?)?,
                vec![x.ptr, init.ptr, out.ptr],
                out.elems(),
            )
        };
        let dtype = x.ty.dtype;
        if !ebb_codegen::gpu::window::window_supported(dtype, op) {
            return None;
        }
        let r = x.ty.shape.len();
        let eval = |d: &ebb_ir::DimExpr| d.eval(self.bindings).ok();
        let win: Vec<i64> = w.dimensions.iter().map(eval).collect::<Option<_>>()?;
        let pad: Vec<i64> = w
            .padding
            .iter()
            .map(|(l, _)| eval(l))
            .collect::<Option<_>>()?;
        if [
            win.len(),
            w.strides.len(),
            w.base_dilations.len(),
            w.window_dilations.len(),
            pad.len(),
        ]
        .iter()
        .any(|&l| l != r)
            || windows.ty.shape.len() != r
            || win
                .iter()
                .chain(&w.strides)
                .chain(&w.base_dilations)
                .chain(&w.window_dilations)
                .any(|&v| v <= 0)
        {
            return None;
        }
        let ist = strides(&x.ty.shape);
        let mut params = vec![n as i64, win.iter().product::<i64>()];
        for d in 0..r {
            params.extend([
                windows.ty.shape[d] as i64,
                x.ty.shape[d] as i64,
                win[d],
                w.strides[d],
                w.window_dilations[d],
                w.base_dilations[d],
                pad[d],
                ist[d],
            ]);
        }
        let kernel = ebb_codegen::gpu::WindowKernel {
            dtype,
            rank: r as u8,
            op,
            select: dir,
        };
        Some(Launch {
            kernel: Arc::new(GpuKernel::Window(kernel)),
            bufs,
            params,
        })
    }

    /// `convolution` of `f32` operands (the same sums as the CPU's `exec/conv.rs`, in another
    /// order: results agree within the device tolerance, not bit for bit): the operands
    /// transposed into canonical layouts in workspace, per feature group the column stack of
    /// every batch item (im2col) and one GEMM per batch item (batched when there is one
    /// group), the canonical result transposed into the output.
    fn convolution(
        &self,
        spec: &ebb_ir::op::ConvSpec,
        ins: &[Io],
        outs: &[Io],
        ws: DevPtr,
    ) -> Lowered {
        let ([x, w], [out]) = (ins, outs) else {
            return Lowered::Host;
        };
        if [x.ty.dtype, w.ty.dtype, out.ty.dtype]
            .iter()
            .any(|&d| d != DType::F32)
        {
            return Lowered::Host;
        }
        let dn = &spec.dims;
        let sd = dn.input_spatial.len();
        let (xsh, wsh, osh) = (&x.ty.shape, &w.ty.shape, &out.ty.shape);
        if xsh.len() != sd + 2
            || wsh.len() != sd + 2
            || osh.len() != sd + 2
            || dn.kernel_spatial.len() != sd
            || dn.output_spatial.len() != sd
            || spec.window_strides.len() != sd
            || spec.lhs_dilation.len() != sd
            || spec.rhs_dilation.len() != sd
            || spec.padding.len() != sd
        {
            return Lowered::Host;
        }
        let perm_x: Vec<usize> = [dn.input_batch, dn.input_feature]
            .into_iter()
            .chain(dn.input_spatial.iter().copied())
            .collect();
        let perm_w: Vec<usize> = [dn.kernel_output_feature, dn.kernel_input_feature]
            .into_iter()
            .chain(dn.kernel_spatial.iter().copied())
            .collect();
        if perm_x.iter().chain(&perm_w).any(|&d| d >= sd + 2) {
            return Lowered::Host;
        }
        let xs: Vec<usize> = perm_x.iter().map(|&d| xsh[d]).collect();
        let wsz: Vec<usize> = perm_w.iter().map(|&d| wsh[d]).collect();
        let q: Vec<usize> = dn
            .output_spatial
            .iter()
            .map(|&d| osh.get(d).copied().unwrap_or(0))
            .collect();
        let (nb, c, o, i) = (xs[0], xs[1], wsz[0], wsz[1]);
        let fgc = spec.feature_group_count.max(1) as usize;
        let bgc = spec.batch_group_count.max(1) as usize;
        let groups = fgc.max(bgc);
        if (fgc > 1 && bgc > 1) || c != i * fgc || o % groups != 0 || nb % bgc != 0 {
            return Lowered::Host;
        }
        if spec
            .window_strides
            .iter()
            .chain(&spec.lhs_dilation)
            .chain(&spec.rhs_dilation)
            .any(|&v| v <= 0)
        {
            return Lowered::Host;
        }
        let (nb_out, og) = (nb / bgc, o / groups);
        let ks: usize = wsz[2..].iter().product();
        let os: usize = q.iter().product();
        if nb_out * o * os == 0 || i * ks == 0 {
            return Lowered::Host;
        }
        let mut work = Vec::new();
        let mut used = 0u64;
        let mut alloc = |elems: usize| {
            let p = ws.add(used);
            used += (4 * elems as u64).div_ceil(256) * 256;
            DevRange {
                ptr: p,
                bytes: 4 * elems as u64,
            }
        };
        // Canonical operands.
        let canon = |io: &Io, perm: &[usize], shape: &[usize], dst: DevRange| {
            let st = strides(&io.ty.shape);
            let l = copy_launch(
                4,
                shape,
                Side {
                    strides: perm.iter().map(|&d| st[d]).collect(),
                    ..Side::dense(io.ptr, &[])
                },
                Side::dense(dst.ptr, shape),
            );
            (Work::Launch(l), access(vec![io.range()], vec![dst]))
        };
        let xr = alloc(xs.iter().product());
        let wr = alloc(wsz.iter().product());
        work.push(canon(x, &perm_x, &xs, xr));
        work.push(canon(w, &perm_w, &wsz, wr));
        let cols = alloc(nb_out * i * ks * os);
        let res = alloc(nb_out * o * os);
        let xst = strides(&xs);
        for grp in 0..groups {
            let n0 = if bgc > 1 { grp * nb_out } else { 0 };
            let c0 = if fgc > 1 { grp * i } else { 0 };
            let mut params = vec![
                (nb_out * i * ks * os) as i64,
                i as i64,
                ks as i64,
                os as i64,
                n0 as i64 * xst[0] + c0 as i64 * xst[1],
                xst[0],
                xst[1],
            ];
            for d in 0..sd {
                params.extend([
                    wsz[2 + d] as i64,
                    q[d] as i64,
                    xs[2 + d] as i64,
                    spec.window_strides[d],
                    spec.rhs_dilation[d],
                    spec.lhs_dilation[d],
                    spec.padding[d].0,
                    xst[2 + d],
                ]);
            }
            let l = Launch {
                kernel: Arc::new(GpuKernel::Im2col(ebb_codegen::gpu::Im2colKernel {
                    spatial: sd as u8,
                })),
                bufs: vec![xr.ptr, cols.ptr],
                params,
            };
            work.push((Work::Launch(l), access(vec![xr], vec![cols])));
            // [og, i·ks] × [i·ks, os] per batch item, into the canonical result.
            let k = i * ks;
            let a = (
                wr.ptr.add(4 * (grp * og * k) as u64),
                og * k,
                k as isize,
                1,
                0,
            );
            let per_item = |nn: usize, batch: usize| GemmCall {
                dtype: GemmType::F32,
                batch,
                m: og,
                k,
                n: os,
                a,
                b: (
                    cols.ptr.add(4 * (nn * k * os) as u64),
                    batch * k * os,
                    os as isize,
                    1,
                    (k * os) as isize,
                ),
                c: res.ptr.add(4 * ((nn * o + grp * og) * os) as u64),
            };
            if groups == 1 {
                work.push((
                    Work::Gemm(per_item(0, nb_out)),
                    access(vec![wr, cols], vec![res]),
                ));
            } else {
                for nn in 0..nb_out {
                    work.push((
                        Work::Gemm(per_item(nn, 1)),
                        access(vec![wr, cols], vec![res]),
                    ));
                }
            }
        }
        // [N', O, Q...] -> the output layout.
        let cshape: Vec<usize> = [nb_out, o].into_iter().chain(q.iter().copied()).collect();
        let cst = strides(&cshape);
        let mut ost = vec![0i64; sd + 2];
        ost[dn.output_batch] = cst[0];
        ost[dn.output_feature] = cst[1];
        for (j, &d) in dn.output_spatial.iter().enumerate() {
            ost[d] = cst[2 + j];
        }
        let l = copy_launch(
            4,
            osh,
            Side {
                strides: ost,
                ..Side::dense(res.ptr, &[])
            },
            Side::dense(out.ptr, osh),
        );
        work.push((Work::Launch(l), access(vec![res], vec![out.range()])));
        Lowered::Device(work, used)
    }

    /// `dot_general` computed in `f32` (`f32` and `bf16` operands and result, as
    /// `exec/dot.rs`): `bf16` operands converted into `f32` workspace, the operands as
    /// `[batch, rows, cols]` matrix stacks (copied into workspace when their dimension groups
    /// are not a strided stack with a unit stride), one batched GEMM, into workspace and
    /// converted for a `bf16` result.
    fn dot(&self, dd: &ebb_ir::op::DotDims, ins: &[Io], outs: &[Io], ws: DevPtr) -> Lowered {
        let ([l0, r0], [out0]) = (ins, outs) else {
            return Lowered::Host;
        };
        let ok = |d: DType| matches!(d, DType::F32 | DType::BF16);
        if !ok(l0.ty.dtype) || !ok(r0.ty.dtype) || !ok(out0.ty.dtype) {
            return Lowered::Host;
        }
        let mut work = Vec::new();
        let mut ws_used = 0u64;
        let f32_types: Vec<OutType> = [l0, r0, out0]
            .iter()
            .map(|io| OutType {
                dtype: DType::F32,
                shape: io.ty.shape.clone(),
            })
            .collect();
        // Operands in `f32`: converted into workspace where they are `bf16`.
        let mut as_f32 = |io: &Io, ty: &OutType| -> Option<DevPtr> {
            if io.ty.dtype == DType::F32 {
                return Some(io.ptr);
            }
            let dst = ws.add(ws_used);
            ws_used += ty.bytes().div_ceil(256) * 256;
            let l = convert_launch(io.ty.dtype, DType::F32, io.elems(), io.ptr, dst)?;
            let range = DevRange {
                ptr: dst,
                bytes: ty.bytes(),
            };
            work.push((Work::Launch(l), access(vec![io.range()], vec![range])));
            Some(dst)
        };
        let (Some(lp), Some(rp)) = (as_f32(l0, &f32_types[0]), as_f32(r0, &f32_types[1])) else {
            return Lowered::Host;
        };
        let cp = if out0.ty.dtype == DType::F32 {
            out0.ptr
        } else {
            let p = ws.add(ws_used);
            ws_used += f32_types[2].bytes().div_ceil(256) * 256;
            p
        };
        let (l, r, out) = (
            &Io {
                ptr: lp,
                ty: &f32_types[0],
            },
            &Io {
                ptr: rp,
                ty: &f32_types[1],
            },
            &Io {
                ptr: cp,
                ty: &f32_types[2],
            },
        );
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
        if out0.ty.dtype != DType::F32 {
            let Some(l) = convert_launch(DType::F32, out0.ty.dtype, out0.elems(), cp, out0.ptr)
            else {
                return Lowered::Host;
            };
            work.push((
                Work::Launch(l),
                access(vec![out.range()], vec![out0.range()]),
            ));
        }
        Lowered::Device(work, ws_used)
    }
}
