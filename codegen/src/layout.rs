//! What the generated kernel of a fusion region reads, computes and writes
//! ([`KernelLayout::of`]), independent of the shapes; and the layout of the runtime parameters
//! it takes ([`KernelLayout::param_count`]).
//!
//! A kernel evaluates the region's members element by element over a range of the flat
//! (row-major) iteration space, the same iteration space as the chunked interpreter's
//! (`ebb_ir::op::fusion`): for a loop fusion the results' elements, for an input fusion the
//! elements of its `reduce` root's operand (the kernel then writes that operand's values,
//! one reduce row at a time, and the caller folds each row). Members read their operands at the
//! same flat index, except the *index-mapped* members: an expanding `broadcast_in_dim` of a
//! region input (or of a splat constant) and `iota`, whose offset at each index is given by a
//! per-dimension `(divisor, extent, stride)` map (see [`crate::lower`]).
//!
//! Invariant: a region accepted here is evaluated by [`crate::lower`] with exactly the
//! per-element operations of the reference executor (same order, same rounding).

use crate::Target;
use ebb_ir::op::fusion::{
    aligned_inputs, member_last_uses, reads_aligned, reduce_root_columns, reduce_root_prefix,
};
use ebb_ir::{DType, Graph, NodeId, Op, OpKind, ValueRef};

/// A region the code generator does not handle (the caller falls back to the interpreter).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{op}` {reason}")]
pub struct Unsupported {
    /// The op's name.
    pub op: String,
    /// Why.
    pub reason: String,
}

fn unsupported(kind: OpKind, reason: &str) -> Unsupported {
    Unsupported {
        op: kind.name().to_string(),
        reason: reason.to_string(),
    }
}

/// How a region input is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputRead {
    /// At the flat index (a member reads it aligned).
    Aligned,
    /// Element 0 only (a one-element input read by elementwise members), or through an index
    /// map (the operand of an expanding `broadcast_in_dim`), or not at all.
    Whole,
}

/// An index-mapped member: an expanding `broadcast_in_dim` or an `iota`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapMember {
    /// The member.
    pub id: NodeId,
    /// Rank of its result (the number of `(divisor, extent, stride)` triples it takes).
    pub rank: usize,
}

/// Whether the kernel computes a loop fusion's results or an input fusion's reduce operand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Loop fusion: the stores are the region outputs.
    Loop,
    /// Input fusion: the one store is operand 0 of the `reduce` root `root`, whose leading
    /// `prefix` dimensions are kept (the rows); the dimensions after them are reduced, or mix
    /// reduced and kept ones (group normalization's statistics: the caller then reduces each
    /// row with the reference `reduce` kernel).
    Input {
        /// The `reduce` root.
        root: NodeId,
        /// Kept leading dimensions.
        prefix: usize,
    },
    /// Column input fusion: the one store is operand 0 of the `reduce` root `root`
    /// ([`reduce_root_columns`]), whose leading `reduced` dimensions are reduced; the caller
    /// folds the rows (one index of those dimensions each) into per-column accumulators.
    Columns {
        /// The `reduce` root.
        root: NodeId,
        /// Reduced leading dimensions.
        reduced: usize,
    },
}

impl Mode {
    /// The `reduce` root of an input fusion of either kind.
    pub fn root(&self) -> Option<NodeId> {
        match *self {
            Mode::Loop => None,
            Mode::Input { root, .. } | Mode::Columns { root, .. } => Some(root),
        }
    }
}

/// The shape-independent description of a fusion region's kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelLayout {
    /// Loop or input fusion.
    pub mode: Mode,
    /// How each region input is read, in region input order.
    pub inputs: Vec<InputRead>,
    /// Index-mapped members in program order.
    pub maps: Vec<MapMember>,
    /// Members evaluated per element, in program order (the `reduce` root excluded).
    pub members: Vec<NodeId>,
    /// Values written, in store order (buffer pointers follow the inputs' in this order).
    pub stores: Vec<ValueRef>,
}

/// Element types the kernels compute in.
pub fn supported_dtype(d: DType) -> bool {
    matches!(
        d,
        DType::F32
            | DType::I1
            | DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
            | DType::U8
            | DType::U32
            | DType::U64
    )
}

/// Element types the kernels compute in on `target`: [`supported_dtype`] and `bf16`, held
/// in `f32` registers and rounded after each op (the reference executor's semantics); on the
/// host also `f16`, the same way (converted with LLVM's `half` type: F16C's instructions
/// where the CPU has them).
pub fn supported_dtype_on(d: DType, target: Target) -> bool {
    supported_dtype(d) || d == DType::BF16 || d == DType::F16 && target == Target::Host
}

/// Elementwise kinds the lowering implements (per element type and target, see
/// [`crate::lower`]; on the GPU, the functions only the C library provides are not, nor
/// `remainder`, which NVPTX expands inexactly).
fn supported_elementwise(kind: OpKind, dtype: DType, target: Target) -> bool {
    use OpKind::*;
    if matches!(dtype, DType::BF16 | DType::F16) {
        // (`f16` reaches here on the host only: [`supported_dtype_on`] refuses it elsewhere.)
        // `bf16`/`f16` ops the reference computes as `f32` ops rounded once. `exponential`,
        // `tanh` and `log_plus_one` are `fastmath.rs`'s there, as for `f32` (the first two on
        // every target, `log_plus_one` on the host only, as for `f32`); its other
        // transcendental functions are the C library's: the host kernel calls the same
        // functions, the GPU has none.
        if target == Target::Host
            && matches!(
                kind,
                ExponentialMinusOne
                    | Log
                    | LogPlusOne
                    | Logistic
                    | Cbrt
                    | Sine
                    | Cosine
                    | Remainder
            )
        {
            return true;
        }
        return matches!(
            kind,
            Exponential
                | Tanh
                | Add
                | Subtract
                | Multiply
                | Divide
                | Maximum
                | Minimum
                | Negate
                | Abs
                | Sqrt
                | Rsqrt
                | Floor
                | Ceil
                | Sign
                | RoundNearestEven
                | RoundNearestAfz
                | IsFinite
                | Select
                | Compare
                | Convert
        );
    }
    let float = dtype == DType::F32;
    if target == Target::Gpu
        && matches!(
            kind,
            Remainder | Atan2 | ExponentialMinusOne | LogPlusOne | Cbrt | Sine | Cosine
        )
    {
        return false;
    }
    match kind {
        Convert | Select | Compare => true,
        ReducePrecision => float,
        BitcastConvert => dtype.size_bytes() == 4,
        Add | Subtract | Multiply | Maximum | Minimum | And | Or | Xor | Not | Negate | Abs => true,
        // Integer bounds (a `dynamic_slice`'s start indices): `max` then `min`, on the host.
        Clamp => !float && dtype != DType::I1 && target == Target::Host,
        ShiftLeft | ShiftRightLogical | ShiftRightArithmetic => !float && dtype != DType::I1,
        Divide | Remainder => dtype != DType::I1,
        Power | Atan2 => float,
        Exponential | ExponentialMinusOne | Log | LogPlusOne | Logistic | Sqrt | Rsqrt | Cbrt
        | Tanh | Sine | Cosine | Floor | Ceil | Sign | RoundNearestEven | RoundNearestAfz
        | IsFinite => float,
        _ => false,
    }
}

/// Whether every dimension of a value's type is statically 1.
fn one_element(g: &Graph, v: ValueRef) -> bool {
    g.value_type(v)
        .shape
        .iter()
        .all(|d| d.as_const() == Some(1))
}

impl KernelLayout {
    /// Analyzes a `fusion` op's region (loop fusion, input fusion under a
    /// [`reduce_root_prefix`] root reducing every dimension after its kept prefix, or under a
    /// [`reduce_root_columns`] root).
    ///
    /// # Errors
    /// [`Unsupported`] naming the first member the lowering does not implement.
    pub fn of(region: &Graph) -> Result<KernelLayout, Unsupported> {
        KernelLayout::of_target(region, Target::Host)
    }

    /// [`KernelLayout::of`] for `target`: on [`Target::Gpu`] loop fusions only (a reduction
    /// root is the reduce kernel's, [`crate::gpu::reduce`]) and the ops the GPU lowering
    /// implements.
    ///
    /// # Errors
    /// [`Unsupported`] naming the first member the lowering does not implement.
    pub fn of_target(region: &Graph, target: Target) -> Result<KernelLayout, Unsupported> {
        let (order, _) = member_last_uses(region);
        let root = order.last().copied();
        let mode = match root.and_then(|r| Some((r, reduce_root_prefix(region, r)?))) {
            Some((root, prefix)) => {
                if !matches!(region.node(root).op, Op::Reduce(_)) {
                    return Err(unsupported(OpKind::Reduce, "is not a reduce"));
                }
                Mode::Input { root, prefix }
            }
            None => match root.and_then(|r| Some((r, reduce_root_columns(region, r)?))) {
                Some((root, reduced)) => Mode::Columns { root, reduced },
                None => Mode::Loop,
            },
        };
        let aligned = aligned_inputs(region);
        let inputs = aligned
            .iter()
            .map(|&a| {
                if a {
                    InputRead::Aligned
                } else {
                    InputRead::Whole
                }
            })
            .collect();
        let mut maps = Vec::new();
        let mut members = Vec::new();
        for &id in &order {
            if mode.root() == Some(id) {
                continue;
            }
            let node = region.node(id);
            let kind = node.kind();
            let [out] = node.outputs.as_slice() else {
                return Err(unsupported(kind, "has several results"));
            };
            if !supported_dtype_on(out.dtype, target) {
                return Err(unsupported(kind, &format!("of element type {}", out.dtype)));
            }
            let ins = region.operands(id);
            for v in &ins {
                if !supported_dtype_on(region.value_type(*v).dtype, target) {
                    return Err(unsupported(kind, "reads an unsupported element type"));
                }
            }
            match &node.op {
                Op::Reshape(_) => {}
                Op::BroadcastInDim(_) if reads_aligned(region, id, 0) => {}
                Op::BroadcastInDim(_) => {
                    let src = ins[0];
                    let from_input = region.node(src.node).kind() == OpKind::Input;
                    let from_splat =
                        matches!(&region.node(src.node).op, Op::Constant(l) if l.splat);
                    if !from_input && !from_splat {
                        return Err(unsupported(kind, "expands a computed value"));
                    }
                    maps.push(MapMember {
                        id,
                        rank: out.rank(),
                    });
                }
                Op::Iota(_) => maps.push(MapMember {
                    id,
                    rank: out.rank(),
                }),
                Op::Constant(l) if l.splat && l.dtype == out.dtype => {}
                Op::Constant(_) => return Err(unsupported(kind, "is not a splat of its type")),
                Op::Compare(spec) if spec.total_order() => {
                    return Err(unsupported(kind, "in the total order"))
                }
                _ if node.kind().is_elementwise() => {
                    let dt = ins
                        .first()
                        .map_or(out.dtype, |v| region.value_type(*v).dtype);
                    if !supported_elementwise(kind, dt, target) {
                        return Err(unsupported(kind, &format!("on {dt}")));
                    }
                    for (k, v) in ins.iter().enumerate() {
                        let is_input = region.node(v.node).kind() == OpKind::Input;
                        if !(reads_aligned(region, id, k) || is_input && one_element(region, *v)) {
                            return Err(unsupported(kind, "reads an operand of another shape"));
                        }
                    }
                }
                _ => return Err(unsupported(kind, "is not elementwise")),
            }
            members.push(id);
        }
        if target == Target::Gpu && mode != Mode::Loop {
            return Err(unsupported(OpKind::Reduce, "as a fusion root on the GPU"));
        }
        let stores = match mode {
            Mode::Loop => region.outputs().to_vec(),
            Mode::Input { root, .. } | Mode::Columns { root, .. } => {
                // The kernel writes the operand's values as `f32` (a `bf16`/`f16` one exactly).
                let ins = region.operands(root);
                if !matches!(
                    region.value_type(ins[0]).dtype,
                    DType::F32 | DType::BF16 | DType::F16
                ) {
                    return Err(unsupported(OpKind::Reduce, "of a non-float operand"));
                }
                vec![ins[0]]
            }
        };
        for v in &stores {
            if region.node(v.node).kind() == OpKind::Input {
                return Err(unsupported(OpKind::Input, "is a result of the region"));
            }
        }
        Ok(KernelLayout {
            mode,
            inputs,
            maps,
            members,
            stores,
        })
    }

    /// Number of `i64` runtime parameters: the row length and the store base index, then per
    /// index-mapped member its inner stride, the number of `(divisor, extent, stride)` triples
    /// in use, and room for `rank` triples; then the outer dimensions (at
    /// [`KernelLayout::outer_param`]): their number `K` (0: none, every row's offsets are
    /// computed from the triples), room for [`KernelLayout::outer_capacity`] extents, and per
    /// index-mapped member as many carry deltas (see [`crate::lower`]).
    pub fn param_count(&self) -> usize {
        let d = self.outer_capacity();
        self.outer_param() + 1 + d + self.maps.len() * d
    }

    /// Index of the outer-dimension count `K` (after the maps' parameters).
    pub fn outer_param(&self) -> usize {
        2 + self.maps.iter().map(|m| 2 + 3 * m.rank).sum::<usize>()
    }

    /// Room for outer dimensions: the index maps' ranks summed (each map's block boundaries,
    /// at most its rank minus one, and the row length's).
    pub fn outer_capacity(&self) -> usize {
        self.maps.iter().map(|m| m.rank).sum()
    }

    /// Index of map `m`'s first parameter (its inner stride).
    pub fn map_param(&self, m: usize) -> usize {
        2 + self.maps[..m].iter().map(|m| 2 + 3 * m.rank).sum::<usize>()
    }
}
