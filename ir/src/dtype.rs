//! Element types of tensors, with their sizes in bytes and StableHLO/MLIR spellings.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Element type of a tensor. Names follow MLIR (`f32`, `bf16`, `i1`, `ui8`, ...).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// IEEE-754 binary32, 4 bytes.
    F32,
    /// bfloat16 (8 exponent bits, 7 mantissa bits), 2 bytes.
    BF16,
    /// IEEE-754 binary16, 2 bytes.
    F16,
    /// IEEE-754 binary64, 8 bytes.
    F64,
    /// Boolean; stored as one byte per element.
    I1,
    /// Signed 8-bit integer, 1 byte.
    I8,
    /// Signed 16-bit integer, 2 bytes.
    I16,
    /// Signed 32-bit integer, 4 bytes.
    I32,
    /// Signed 64-bit integer, 8 bytes.
    I64,
    /// Unsigned 8-bit integer (`ui8`), 1 byte.
    U8,
    /// Unsigned 32-bit integer (`ui32`), 4 bytes.
    U32,
    /// Unsigned 64-bit integer (`ui64`), 8 bytes.
    U64,
}

impl DType {
    /// All element types, in declaration order.
    pub const ALL: [DType; 12] = [
        DType::F32,
        DType::BF16,
        DType::F16,
        DType::F64,
        DType::I1,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U32,
        DType::U64,
    ];

    /// Storage size of one element in bytes (`i1` takes one byte, as in XLA).
    pub fn size_bytes(self) -> u64 {
        match self {
            DType::I1 | DType::I8 | DType::U8 => 1,
            DType::BF16 | DType::F16 | DType::I16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// MLIR spelling (`f32`, `bf16`, `i1`, `ui8`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::BF16 => "bf16",
            DType::F16 => "f16",
            DType::F64 => "f64",
            DType::I1 => "i1",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "ui8",
            DType::U32 => "ui32",
            DType::U64 => "ui64",
        }
    }

    /// True for floating-point types.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::BF16 | DType::F16 | DType::F64)
    }

    /// True for integer types (signed or unsigned), not `i1`.
    pub fn is_int(self) -> bool {
        matches!(
            self,
            DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::U32 | DType::U64
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Error for an element type name that Ebb does not support.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported element type `{0}` (supported: f32, bf16, f16, f64, i1, i8, i16, i32, i64, ui8, ui32, ui64)")]
pub struct UnknownDType(pub String);

impl FromStr for DType {
    type Err = UnknownDType;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DType::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .or(match s {
                "u8" => Some(DType::U8),
                "u32" => Some(DType::U32),
                "u64" => Some(DType::U64),
                _ => None,
            })
            .ok_or_else(|| UnknownDType(s.to_string()))
    }
}
