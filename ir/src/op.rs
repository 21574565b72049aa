//! The op set: StableHLO operations (named as in the StableHLO spec) plus the few Ebb-specific
//! ops that the importer and the planner need (`input`, `dim_constant`).
//!
//! Ops carry their configuration as named attributes ([`Attr`]). Dynamic StableHLO ops
//! (`dynamic_broadcast_in_dim`, `dynamic_reshape`, `dynamic_iota`, `real_dynamic_slice`,
//! `dynamic_gather`) are imported as their static counterparts with symbolic attributes
//! (`Attr::Dims`), so that every shape in the graph is a [`DimExpr`] over named symbols.

use crate::dim::DimExpr;
use crate::dtype::DType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

macro_rules! op_kinds {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// Operation kind. The textual name is the StableHLO spec name (without the
        /// `stablehlo.` prefix) for StableHLO ops.
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
        pub enum OpKind { $($(#[$doc])* $variant,)* }

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
        }
    };
}

op_kinds! {
    /// A graph input (parameter, optimizer state, batch). Attrs: `index: I64`, `name: Str`.
    Input = "input",
    /// A literal tensor. Attrs: `value: Literal`.
    Constant = "constant",
    /// An integer tensor whose elements are symbolic dimensions, evaluated at run time from the
    /// bindings (e.g. `B` converted to a float for a mean). Attrs: `values: Dims`.
    DimConstant = "dim_constant",
    Abs = "abs",
    Negate = "negate",
    Exponential = "exponential",
    ExponentialMinusOne = "exponential_minus_one",
    Log = "log",
    LogPlusOne = "log_plus_one",
    Logistic = "logistic",
    Sqrt = "sqrt",
    Rsqrt = "rsqrt",
    Cbrt = "cbrt",
    Tanh = "tanh",
    Sine = "sine",
    Cosine = "cosine",
    Floor = "floor",
    Ceil = "ceil",
    Sign = "sign",
    RoundNearestEven = "round_nearest_even",
    RoundNearestAfz = "round_nearest_afz",
    Not = "not",
    IsFinite = "is_finite",
    /// Element type conversion. Attrs: `dtype: DType`.
    Convert = "convert",
    Add = "add",
    Subtract = "subtract",
    Multiply = "multiply",
    Divide = "divide",
    Remainder = "remainder",
    Maximum = "maximum",
    Minimum = "minimum",
    Power = "power",
    Atan2 = "atan2",
    And = "and",
    Or = "or",
    Xor = "xor",
    ShiftLeft = "shift_left",
    ShiftRightLogical = "shift_right_logical",
    ShiftRightArithmetic = "shift_right_arithmetic",
    /// Attrs: `comparison_direction: Str` (EQ, NE, GE, GT, LE, LT), `compare_type: Str`.
    Compare = "compare",
    Select = "select",
    Clamp = "clamp",
    /// Attrs: `broadcast_dimensions: Ints`, `shape: Dims` (result shape).
    BroadcastInDim = "broadcast_in_dim",
    /// Attrs: `shape: Dims` (result shape).
    Reshape = "reshape",
    /// Attrs: `permutation: Ints`.
    Transpose = "transpose",
    /// Attrs: `dimension: I64`.
    Concatenate = "concatenate",
    /// Attrs: `start_indices, limit_indices, strides: Dims`.
    Slice = "slice",
    /// Operands: tensor, then one scalar start index per dimension. Attrs: `slice_sizes: Dims`.
    DynamicSlice = "dynamic_slice",
    /// Operands: tensor, update, then one scalar start index per dimension.
    DynamicUpdateSlice = "dynamic_update_slice",
    /// Attrs: `edge_padding_low, edge_padding_high, interior_padding: Ints`.
    Pad = "pad",
    /// Attrs: `dimensions: Ints`.
    Reverse = "reverse",
    /// Attrs: `iota_dimension: I64`, `shape: Dims`, `dtype: DType`.
    Iota = "iota",
    /// Operands: inputs..., init values.... Attrs: `dimensions: Ints`. One region (the body).
    Reduce = "reduce",
    /// Attrs: `window_dimensions, window_strides, base_dilations, window_dilations: Ints`,
    /// `padding: Ints` (flattened [low, high] pairs). One region.
    ReduceWindow = "reduce_window",
    /// Attrs: `select_and_scatter` window attrs as for reduce_window. Two regions.
    SelectAndScatter = "select_and_scatter",
    /// Attrs: `lhs_batching_dimensions, rhs_batching_dimensions, lhs_contracting_dimensions,
    /// rhs_contracting_dimensions: Ints`.
    DotGeneral = "dot_general",
    /// Attrs: `window_strides, padding (flattened pairs), lhs_dilation, rhs_dilation: Ints`,
    /// `dimension_numbers: Str` (StableHLO `[b, 0, 1, f]x[o, i, 0, 1]->[b, 0, 1, f]` form),
    /// `feature_group_count, batch_group_count: I64`.
    Convolution = "convolution",
    /// Attrs: `offset_dims, collapsed_slice_dims, operand_batching_dims,
    /// start_indices_batching_dims, start_index_map: Ints`, `index_vector_dim: I64`,
    /// `slice_sizes: Dims`, `indices_are_sorted: Bool`.
    Gather = "gather",
    /// Attrs: `update_window_dims, inserted_window_dims, input_batching_dims,
    /// scatter_indices_batching_dims, scatter_dims_to_operand_dims: Ints`,
    /// `index_vector_dim: I64`, `indices_are_sorted, unique_indices: Bool`. One region.
    Scatter = "scatter",
    /// Attrs: `dimension: I64`, `is_stable: Bool`. One region (comparator).
    Sort = "sort",
    /// Loop: regions `cond` and `body`; operands are the loop-carried values.
    While = "while",
    /// Identity on its operands that the scheduler must not look through.
    OptimizationBarrier = "optimization_barrier",
    /// Attrs: `call_target_name: Str`, `backend_config: Str`.
    CustomCall = "custom_call",
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
                | Floor
                | Ceil
                | Sign
                | RoundNearestEven
                | RoundNearestAfz
                | Not
                | IsFinite
                | Convert
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

    /// Number of regions the op must carry.
    pub fn num_regions(self) -> usize {
        match self {
            OpKind::Reduce | OpKind::ReduceWindow | OpKind::Scatter | OpKind::Sort => 1,
            OpKind::SelectAndScatter | OpKind::While => 2,
            _ => 0,
        }
    }
}

/// A literal tensor value, stored as little-endian bytes of the element type, row-major.
/// A splat literal stores a single element.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct Literal {
    /// Element type of the stored bytes.
    pub dtype: DType,
    /// True if `data` holds one element to repeat over the whole shape.
    pub splat: bool,
    /// Raw little-endian element bytes.
    pub data: Vec<u8>,
}

impl Literal {
    /// Number of stored elements (1 for a splat).
    pub fn stored_elements(&self) -> usize {
        self.data.len() / self.dtype.size_bytes() as usize
    }

    /// A splat literal of one f64 value converted to `dtype` (integers truncate).
    pub fn splat_f64(dtype: DType, v: f64) -> Literal {
        let data = match dtype {
            DType::F32 => (v as f32).to_le_bytes().to_vec(),
            DType::F64 => v.to_le_bytes().to_vec(),
            DType::BF16 => ((v as f32).to_bits() >> 16).to_le_bytes()[..2].to_vec(),
            DType::F16 => f32_to_f16_bits(v as f32).to_le_bytes().to_vec(),
            DType::I1 | DType::I8 | DType::U8 => vec![v as i64 as u8],
            DType::I16 => (v as i16).to_le_bytes().to_vec(),
            DType::I32 => (v as i32).to_le_bytes().to_vec(),
            DType::U32 => (v as u32).to_le_bytes().to_vec(),
            DType::I64 => (v as i64).to_le_bytes().to_vec(),
        };
        Literal {
            dtype,
            splat: true,
            data,
        }
    }

    /// Element `i` of the stored data as f64 (for printing and constant folding).
    pub fn get_f64(&self, i: usize) -> Option<f64> {
        let n = self.dtype.size_bytes() as usize;
        let b = self.data.get(i * n..(i + 1) * n)?;
        Some(match self.dtype {
            DType::F32 => f32::from_le_bytes(b.try_into().ok()?) as f64,
            DType::F64 => f64::from_le_bytes(b.try_into().ok()?),
            DType::BF16 => {
                f32::from_bits((u16::from_le_bytes(b.try_into().ok()?) as u32) << 16) as f64
            }
            DType::F16 => f16_bits_to_f32(u16::from_le_bytes(b.try_into().ok()?)) as f64,
            DType::I1 | DType::U8 => b[0] as f64,
            DType::I8 => b[0] as i8 as f64,
            DType::I16 => i16::from_le_bytes(b.try_into().ok()?) as f64,
            DType::I32 => i32::from_le_bytes(b.try_into().ok()?) as f64,
            DType::U32 => u32::from_le_bytes(b.try_into().ok()?) as f64,
            DType::I64 => i64::from_le_bytes(b.try_into().ok()?) as f64,
        })
    }

    /// Element `i` as i64, for integer literals (shape computations).
    pub fn get_i64(&self, i: usize) -> Option<i64> {
        let n = self.dtype.size_bytes() as usize;
        let b = self.data.get(i * n..(i + 1) * n)?;
        Some(match self.dtype {
            DType::I1 | DType::U8 => b[0] as i64,
            DType::I8 => b[0] as i8 as i64,
            DType::I16 => i16::from_le_bytes(b.try_into().ok()?) as i64,
            DType::I32 => i32::from_le_bytes(b.try_into().ok()?) as i64,
            DType::U32 => u32::from_le_bytes(b.try_into().ok()?) as i64,
            DType::I64 => i64::from_le_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }
}

/// IEEE half-precision bits from an f32 (round to nearest even; no NaN payloads).
pub fn f32_to_f16_bits(v: f32) -> u16 {
    let x = v.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = m >> shift;
        let rem = m & ((1 << shift) - 1);
        let mid = 1 << (shift - 1);
        let r = if rem > mid || (rem == mid && half & 1 == 1) {
            half + 1
        } else {
            half
        };
        return sign | r as u16;
    }
    let half = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    let r = if rem > 0x1000 || (rem == 0x1000 && half & 1 == 1) {
        half + 1
    } else {
        half
    };
    sign | r as u16
}

/// f32 from IEEE half-precision bits.
pub fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = if exp == 0 {
        if man == 0 {
            sign
        } else {
            let mut e = 127 - 15 + 1;
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((m & 0x3ff) << 13)
        }
    } else if exp == 0x1f {
        sign | 0x7f80_0000 | (man << 13)
    } else {
        sign | ((exp + 127 - 15) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}

/// A named attribute value.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub enum Attr {
    /// An integer.
    I64(i64),
    /// A list of integers (dimension numbers, permutations, window sizes).
    Ints(Vec<i64>),
    /// A list of symbolic dimensions (result shapes, slice bounds).
    Dims(Vec<DimExpr>),
    /// A string (comparison direction, custom-call target, ...).
    Str(String),
    /// A boolean.
    Bool(bool),
    /// A float.
    F64(f64),
    /// An element type.
    DType(DType),
    /// A literal tensor value (for `constant`).
    Literal(Literal),
}

/// Ordered attribute dictionary of an op.
pub type Attrs = BTreeMap<String, Attr>;

/// Error reading an attribute that is missing or has the wrong kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("op `{op}`: attribute `{name}` {problem}")]
pub struct AttrError {
    /// Op name.
    pub op: String,
    /// Attribute name.
    pub name: String,
    /// What is wrong (`is missing`, `is not a list of integers`, ...).
    pub problem: String,
}

/// Typed accessors for attribute dictionaries; errors name the op and the attribute.
pub trait AttrsExt {
    /// An `I64` attribute.
    fn int(&self, op: OpKind, name: &str) -> Result<i64, AttrError>;
    /// An `Ints` attribute.
    fn ints(&self, op: OpKind, name: &str) -> Result<&[i64], AttrError>;
    /// An `Ints` attribute, or an empty list when missing.
    fn ints_or_empty(&self, op: OpKind, name: &str) -> Result<&[i64], AttrError>;
    /// A `Dims` attribute.
    fn dims(&self, op: OpKind, name: &str) -> Result<&[DimExpr], AttrError>;
    /// A `Str` attribute.
    fn str(&self, op: OpKind, name: &str) -> Result<&str, AttrError>;
    /// A `DType` attribute.
    fn dtype(&self, op: OpKind, name: &str) -> Result<DType, AttrError>;
    /// A `Literal` attribute.
    fn literal(&self, op: OpKind, name: &str) -> Result<&Literal, AttrError>;
}

fn attr_err(op: OpKind, name: &str, problem: &str) -> AttrError {
    AttrError {
        op: op.name().into(),
        name: name.into(),
        problem: problem.into(),
    }
}

impl AttrsExt for Attrs {
    fn int(&self, op: OpKind, name: &str) -> Result<i64, AttrError> {
        match self.get(name) {
            Some(Attr::I64(v)) => Ok(*v),
            Some(_) => Err(attr_err(op, name, "is not an integer")),
            None => Err(attr_err(op, name, "is missing")),
        }
    }
    fn ints(&self, op: OpKind, name: &str) -> Result<&[i64], AttrError> {
        match self.get(name) {
            Some(Attr::Ints(v)) => Ok(v),
            Some(_) => Err(attr_err(op, name, "is not a list of integers")),
            None => Err(attr_err(op, name, "is missing")),
        }
    }
    fn ints_or_empty(&self, op: OpKind, name: &str) -> Result<&[i64], AttrError> {
        match self.get(name) {
            None => Ok(&[]),
            Some(_) => self.ints(op, name),
        }
    }
    fn dims(&self, op: OpKind, name: &str) -> Result<&[DimExpr], AttrError> {
        match self.get(name) {
            Some(Attr::Dims(v)) => Ok(v),
            Some(_) => Err(attr_err(op, name, "is not a list of dimensions")),
            None => Err(attr_err(op, name, "is missing")),
        }
    }
    fn str(&self, op: OpKind, name: &str) -> Result<&str, AttrError> {
        match self.get(name) {
            Some(Attr::Str(v)) => Ok(v),
            Some(_) => Err(attr_err(op, name, "is not a string")),
            None => Err(attr_err(op, name, "is missing")),
        }
    }
    fn dtype(&self, op: OpKind, name: &str) -> Result<DType, AttrError> {
        match self.get(name) {
            Some(Attr::DType(v)) => Ok(*v),
            Some(_) => Err(attr_err(op, name, "is not an element type")),
            None => Err(attr_err(op, name, "is missing")),
        }
    }
    fn literal(&self, op: OpKind, name: &str) -> Result<&Literal, AttrError> {
        match self.get(name) {
            Some(Attr::Literal(v)) => Ok(v),
            Some(_) => Err(attr_err(op, name, "is not a literal")),
            None => Err(attr_err(op, name, "is missing")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_names_round_trip() {
        for &k in OpKind::ALL {
            assert_eq!(OpKind::from_name(k.name()), Some(k));
        }
    }

    #[test]
    fn f16_round_trip() {
        for v in [0.0f32, 1.0, -2.5, 65504.0, 1e-5, 0.1] {
            let back = f16_bits_to_f32(f32_to_f16_bits(v));
            assert!((back - v).abs() <= v.abs() * 1e-3 + 1e-7, "{v} -> {back}");
        }
    }
}
