//! Literal tensor values (`constant`) as little-endian element bytes, and IEEE half-precision
//! conversions.

use crate::dtype::DType;
use serde::{Deserialize, Serialize};

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
            DType::U64 => (v as u64).to_le_bytes().to_vec(),
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
            DType::U64 => u64::from_le_bytes(b.try_into().ok()?) as f64,
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
            DType::U64 => u64::from_le_bytes(b.try_into().ok()?) as i64,
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
