//! The op set: StableHLO operations (named as in the StableHLO spec) plus the few Ebb-specific
//! ops that the importer and the planner need (`input`, `dim_constant`).
//!
//! An op is an [`Op`]: its kind with a typed payload ([`schema`]) where the kind has
//! configuration — `Op::Compare(CompareSpec { direction, .. })`, `Op::DotGeneral(DotDims)`,
//! `Op::Convolution(ConvSpec)`, `Op::BroadcastInDim(BroadcastSpec)`, ... Payloads are built and
//! validated once, by the front ends and the textual-IR parser ([`codec`], the only place that
//! knows attribute names); everything else matches on fields. [`OpKind`] is the payload-free
//! discriminant (names, tables, e-graph nodes). Dynamic StableHLO ops (`dynamic_broadcast_in_dim`,
//! `dynamic_reshape`, `dynamic_iota`, `real_dynamic_slice`, `dynamic_gather`) are imported as
//! their static counterparts with symbolic payloads, so that every shape in the graph is a
//! [`DimExpr`] over named symbols.

pub mod accumulate;
mod attr;
pub mod codec;
pub mod fusion;
mod literal;
mod reduce_precision;
pub mod schema;

pub use accumulate::{accumulate_product_bytes, ACCUMULATE_DEPTH};
pub use attr::{Attr, AttrError, Attrs};
pub use fusion::{
    case_forwards, fusion_tile_bytes, fusion_tile_bytes_in, in_place_bytes, in_place_writes,
    remember_fusion_tile_bytes, remember_in_place_writes, while_forwards, InPlace, FUSION_CHUNK,
    STORED_ANALYSES_VERSION,
};
pub use literal::{f16_bits_to_f32, f32_to_f16_bits, Literal};
pub use reduce_precision::{float_format, ReducePrecisionSpec};
pub use schema::*;

use crate::dim::DimExpr;
use crate::dtype::DType;
use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! ops {
    ($($(#[$doc:meta])* $variant:ident = $name:literal $(($payload:ty))?,)*) => {
        /// Operation kind. The textual name is the StableHLO spec name (without the
        /// `stablehlo.` prefix) for StableHLO ops.
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
        pub enum OpKind { $($(#[$doc])* $variant,)* }

        /// An op: its kind and, where the kind has configuration, the typed payload.
        #[derive(Clone, PartialEq, Eq, Hash, Debug)]
        pub enum Op { $($(#[$doc])* $variant $(($payload))?,)* }

        impl OpKind {
            /// All op kinds.
            pub const ALL: &'static [OpKind] = &[$(OpKind::$variant,)*];

            /// Textual name, e.g. `dot_general`.
            pub fn name(self) -> &'static str {
                match self { $(OpKind::$variant => $name,)* }
            }

            /// Looks an op kind up by its textual name (`dot_general`, not `stablehlo.dot_general`).
            pub fn from_name(name: &str) -> Option<OpKind> {
                match name { $($name => Some(OpKind::$variant),)* _ => None }
            }

            /// Whether ops of this kind carry no payload (elementwise ops other than `convert`
            /// and `compare`, `select`, `clamp`, `dynamic_update_slice`, `while`,
            /// `optimization_barrier`).
            pub fn is_payload_free(self) -> bool {
                Op::simple(self).is_some()
            }
        }

        impl Op {
            /// The op's kind.
            pub fn kind(&self) -> OpKind {
                match self { $(ops!(@pat $variant $(($payload))?) => OpKind::$variant,)* }
            }

            /// The op of a payload-free kind (`add`, `select`, `while`, ...); `None` for kinds
            /// that need a payload.
            pub fn simple(kind: OpKind) -> Option<Op> {
                match kind { $(OpKind::$variant => ops!(@unit $variant $(($payload))?),)* }
            }
        }
    };
    (@pat $variant:ident ($payload:ty)) => { Op::$variant(_) };
    (@pat $variant:ident) => { Op::$variant };
    (@unit $variant:ident ($payload:ty)) => { None };
    (@unit $variant:ident) => { Some(Op::$variant) };
}

ops! {
    /// A graph input (parameter, optimizer state, batch). Text attrs: `index`, `name`.
    Input = "input" (InputSpec),
    /// A literal tensor. Text attr: `value`.
    Constant = "constant" (Literal),
    /// An integer tensor whose elements are symbolic dimensions, evaluated at run time from the
    /// bindings (e.g. `B` converted to a float for a mean). Text attr: `values`.
    DimConstant = "dim_constant" (Vec<DimExpr>),
    /// Elementwise absolute value `|x|`.
    Abs = "abs",
    /// Elementwise `-x`.
    Negate = "negate",
    /// Elementwise `e^x`.
    Exponential = "exponential",
    /// Elementwise `e^x - 1`, accurate near 0.
    ExponentialMinusOne = "exponential_minus_one",
    /// Elementwise natural logarithm.
    Log = "log",
    /// Elementwise `ln(1 + x)`, accurate near 0.
    LogPlusOne = "log_plus_one",
    /// Elementwise logistic sigmoid `1 / (1 + e^-x)`.
    Logistic = "logistic",
    /// Elementwise square root.
    Sqrt = "sqrt",
    /// Elementwise reciprocal square root `1 / sqrt(x)`.
    Rsqrt = "rsqrt",
    /// Elementwise cube root.
    Cbrt = "cbrt",
    /// Elementwise hyperbolic tangent.
    Tanh = "tanh",
    /// Elementwise sine (radians).
    Sine = "sine",
    /// Elementwise cosine (radians).
    Cosine = "cosine",
    /// Elementwise tangent (radians).
    Tan = "tan",
    /// Elementwise round toward negative infinity.
    Floor = "floor",
    /// Elementwise round toward positive infinity.
    Ceil = "ceil",
    /// Elementwise sign: -1, 0 or 1 (NaN for NaN; `-0.0` for `-0.0`).
    Sign = "sign",
    /// Elementwise round to the nearest integer, ties to even.
    RoundNearestEven = "round_nearest_even",
    /// Elementwise round to the nearest integer, ties away from zero.
    RoundNearestAfz = "round_nearest_afz",
    /// Elementwise logical not (`i1`) or bitwise not (integers).
    Not = "not",
    /// Elementwise: whether each float element is neither infinite nor NaN (an `i1` result).
    IsFinite = "is_finite",
    /// Element type conversion to the payload's type. Text attr: `dtype`.
    Convert = "convert" (DType),
    /// Reinterprets each element's bits as the payload's type, which has the same size in
    /// bytes (StableHLO `bitcast_convert` between equal widths, e.g. `ui32` to `f32` in JAX's
    /// uniform sampling). Text attr: `dtype`.
    BitcastConvert = "bitcast_convert" (DType),
    /// Rounds each float element to a narrower format and back (see [`ReducePrecisionSpec`]).
    /// Text attrs: `exponent_bits`, `mantissa_bits`.
    ReducePrecision = "reduce_precision" (ReducePrecisionSpec),
    /// Elementwise `lhs + rhs` (logical or on `i1`).
    Add = "add",
    /// Elementwise `lhs - rhs`.
    Subtract = "subtract",
    /// Elementwise `lhs * rhs` (logical and on `i1`).
    Multiply = "multiply",
    /// Elementwise `lhs / rhs` (integer division rounds toward zero).
    Divide = "divide",
    /// Elementwise remainder of `lhs / rhs`, with the sign of `lhs`.
    Remainder = "remainder",
    /// Elementwise maximum (NaN if either is NaN).
    Maximum = "maximum",
    /// Elementwise minimum (NaN if either is NaN).
    Minimum = "minimum",
    /// Elementwise `lhs^rhs`.
    Power = "power",
    /// Elementwise `atan2(lhs, rhs)` (radians).
    Atan2 = "atan2",
    /// Elementwise logical (`i1`) or bitwise and.
    And = "and",
    /// Elementwise logical (`i1`) or bitwise or.
    Or = "or",
    /// Elementwise logical (`i1`) or bitwise exclusive or.
    Xor = "xor",
    /// Elementwise `lhs << rhs` (0 when `rhs` is at least the bit width).
    ShiftLeft = "shift_left",
    /// Elementwise logical `lhs >> rhs`, shifting in zeros.
    ShiftRightLogical = "shift_right_logical",
    /// Elementwise arithmetic `lhs >> rhs`, shifting in the sign bit.
    ShiftRightArithmetic = "shift_right_arithmetic",
    /// Text attrs: `comparison_direction` (EQ, NE, GE, GT, LE, LT), `compare_type`.
    Compare = "compare" (CompareSpec),
    /// Elementwise `pred ? on_true : on_false`; operands: `pred` (`i1`, same shape or scalar),
    /// `on_true`, `on_false`.
    Select = "select",
    /// Elementwise `min(max(operand, min), max)`; operands: `min`, `operand`, `max` (`min`, `max`
    /// scalars or the operand's shape).
    Clamp = "clamp",
    /// Text attrs: `broadcast_dimensions`, `shape` (result shape).
    BroadcastInDim = "broadcast_in_dim" (BroadcastSpec),
    /// The payload is the result shape. Text attr: `shape`.
    Reshape = "reshape" (Vec<DimExpr>),
    /// The payload is the permutation. Text attr: `permutation`.
    Transpose = "transpose" (Vec<i64>),
    /// The payload is the concatenated dimension. Text attr: `dimension`.
    Concatenate = "concatenate" (i64),
    /// Text attrs: `start_indices`, `limit_indices`, `strides`.
    Slice = "slice" (SliceSpec),
    /// Operands: tensor, then one scalar start index per dimension. The payload is
    /// `slice_sizes`.
    DynamicSlice = "dynamic_slice" (Vec<DimExpr>),
    /// Operands: tensor, update, then one scalar start index per dimension.
    DynamicUpdateSlice = "dynamic_update_slice",
    /// Text attrs: `edge_padding_low`, `edge_padding_high`, `interior_padding`.
    Pad = "pad" (PadSpec),
    /// The payload is the reversed `dimensions`.
    Reverse = "reverse" (Vec<i64>),
    /// Text attrs: `iota_dimension`, `shape`, `dtype`.
    Iota = "iota" (IotaSpec),
    /// Operand: the state, `ui64[2]` (`[key, counter]`). Results: the next state and random
    /// bits of the payload's shape and type, a pure function of the state (so a recomputed
    /// value equals the original). Text attrs: `rng_algorithm`, `shape`, `dtype`.
    RngBitGenerator = "rng_bit_generator" (RngSpec),
    /// Operands: inputs..., init values.... The payload is the reduced `dimensions`. One region
    /// (the body).
    Reduce = "reduce" (Vec<i64>),
    /// Text attrs: `window_dimensions`, `window_strides`, `base_dilations`,
    /// `window_dilations`, `padding` (flattened pairs). One region.
    ReduceWindow = "reduce_window" (Window),
    /// Window as for `reduce_window`. Two regions (select, scatter).
    SelectAndScatter = "select_and_scatter" (Window),
    /// Text attrs: `lhs_batching_dimensions`, `rhs_batching_dimensions`,
    /// `lhs_contracting_dimensions`, `rhs_contracting_dimensions`, `dtype` (mixed precision).
    /// Operands: lhs, rhs and, in Ebb's dot-accumulate form (made by
    /// `ebb_passes::dot_accumulate`), an accumulator `c` of the result's type: the result is
    /// `add(c, dot_general(lhs, rhs))`, the product computed as for two operands and `c` added
    /// once, elementwise, as the left operand of that `add` (the same bits).
    DotGeneral = "dot_general" (DotDims),
    /// Text attrs: `window_strides`, `padding` (flattened pairs), `lhs_dilation`,
    /// `rhs_dilation`, `dimension_numbers` (`[b,0,1,f]x[o,i,0,1]->[b,0,1,f]`),
    /// `feature_group_count`, `batch_group_count`, `dtype`.
    Convolution = "convolution" (ConvSpec),
    /// Text attrs: the [`GatherDims`] field names.
    Gather = "gather" (GatherDims),
    /// Text attrs: the [`ScatterDims`] field names. One region.
    Scatter = "scatter" (ScatterDims),
    /// Text attrs: `dimension`, `is_stable`. One region (comparator).
    Sort = "sort" (SortSpec),
    /// Loop: regions `cond` and `body`; operands are the loop-carried values.
    While = "while",
    /// Conditional (StableHLO `case`; `if` imports as a two-branch `case` with the branches
    /// swapped): operand 0 is the branch index (an `i32` scalar), the others are the values
    /// the branches read, which every branch region takes as its inputs, in order. One region
    /// per branch (at least one); the results are the taken branch's outputs. An index outside
    /// `[0, N)` runs the last branch (spec, "case").
    Case = "case",
    /// Identity on its operands that the scheduler must not look through.
    OptimizationBarrier = "optimization_barrier",
    /// Text attrs: `call_target_name`, `backend_config`, `has_side_effect`.
    CustomCall = "custom_call" (CustomCallSpec),
    /// The user's placement of a value (JAX's `custom_call @annotate_device_placement`, from a
    /// `jax.checkpoint` offload policy or `jax.device_put` to a memory kind): the identity on
    /// its one operand, whose result is to live in the payload's memory. A result placed on
    /// the host is offloaded by the plan (a swap it must perform unless the offload policy
    /// says otherwise); placed on the device, it is the reload point. An optional second
    /// operand only orders the op after its producer (the result of the `optimization_barrier`
    /// that the host value passed around at import). Text attr: `memory_kind`.
    AnnotateDevicePlacement = "annotate_device_placement" (MemoryKind),
    /// A fusion group made by the fusion pass (`ebb_passes::fuse`): one region whose inputs are
    /// the operands and whose outputs are the results; the region's internal values are never
    /// materialized. Text attr: `kind` (`loop`, `input`).
    Fusion = "fusion" (FusionKind),
}

impl Op {
    /// An `input` op for argument `index` named `name`.
    pub fn input(index: usize, name: &str) -> Op {
        Op::Input(InputSpec {
            index,
            name: name.to_string(),
            aliasing_output: None,
        })
    }

    /// Applies `f` to every symbolic dimension of the payload (result shapes, slice bounds,
    /// slice sizes, dimension constants), e.g. to substitute symbols.
    pub fn map_dims(&mut self, f: &dyn Fn(&DimExpr) -> DimExpr) {
        let map = |v: &mut Vec<DimExpr>| v.iter_mut().for_each(|d| *d = f(d));
        match self {
            Op::DimConstant(v) | Op::Reshape(v) | Op::DynamicSlice(v) => map(v),
            Op::BroadcastInDim(b) => map(&mut b.shape),
            Op::Slice(s) => {
                map(&mut s.start);
                map(&mut s.limit);
                map(&mut s.strides);
            }
            Op::Iota(i) => map(&mut i.shape),
            Op::RngBitGenerator(r) => map(&mut r.shape),
            Op::Gather(g) => map(&mut g.slice_sizes),
            Op::ReduceWindow(w) | Op::SelectAndScatter(w) => w.map_dims(f),
            _ => {}
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl OpKind {
    /// Elementwise ops with one operand.
    pub fn is_unary_elementwise(self) -> bool {
        use OpKind::*;
        matches!(
            self,
            Abs | Negate
                | Exponential
                | ExponentialMinusOne
                | Log
                | LogPlusOne
                | Logistic
                | Sqrt
                | Rsqrt
                | Cbrt
                | Tanh
                | Sine
                | Cosine
                | Tan
                | Floor
                | Ceil
                | Sign
                | RoundNearestEven
                | RoundNearestAfz
                | Not
                | IsFinite
                | Convert
                | BitcastConvert
                | ReducePrecision
        )
    }

    /// Elementwise ops with two operands of equal shape.
    pub fn is_binary_elementwise(self) -> bool {
        use OpKind::*;
        matches!(
            self,
            Add | Subtract
                | Multiply
                | Divide
                | Remainder
                | Maximum
                | Minimum
                | Power
                | Atan2
                | And
                | Or
                | Xor
                | ShiftLeft
                | ShiftRightLogical
                | ShiftRightArithmetic
                | Compare
        )
    }

    /// Elementwise ops of any arity (unary, binary, `select`, `clamp`).
    pub fn is_elementwise(self) -> bool {
        self.is_unary_elementwise()
            || self.is_binary_elementwise()
            || matches!(self, OpKind::Select | OpKind::Clamp)
    }

    /// The number of operands the op takes when that is fixed by its kind: 1 for unary and
    /// 2 for binary elementwise ops, 3 for `select` and `clamp`; `None` for the others (their
    /// shape rules check their operand counts against their payloads).
    pub fn fixed_arity(self) -> Option<usize> {
        if self.is_unary_elementwise() {
            Some(1)
        } else if self.is_binary_elementwise() {
            Some(2)
        } else if matches!(self, OpKind::Select | OpKind::Clamp) {
            Some(3)
        } else {
            None
        }
    }

    /// Whether an op of this kind may carry `n` regions: [`OpKind::num_regions`] exactly, or
    /// at least one for `case` (one per branch).
    pub fn accepts_regions(self, n: usize) -> bool {
        match self {
            OpKind::Case => n >= 1,
            _ => n == self.num_regions(),
        }
    }

    /// Number of regions the op must carry (for `case`, which has one per branch: 1, the
    /// fewest; see [`OpKind::accepts_regions`]).
    pub fn num_regions(self) -> usize {
        match self {
            OpKind::Reduce
            | OpKind::ReduceWindow
            | OpKind::Scatter
            | OpKind::Sort
            | OpKind::Case
            | OpKind::Fusion => 1,
            OpKind::SelectAndScatter | OpKind::While => 2,
            _ => 0,
        }
    }
}
