//! `reduce_precision` (StableHLO spec, "reduce_precision"): each element is converted to a
//! floating-point format with `exponent_bits` exponent and `mantissa_bits` mantissa bits and
//! back to its own type.
//!
//! The bit manipulation is XLA's (`ReducePrecision` in the HLO evaluator and the CPU/GPU
//! elemental emitters): round to nearest even by adding a bias and masking the dropped
//! mantissa bits (a carry into the exponent is correct), then, when the exponent shrinks,
//! values above the largest finite exponent become a signed infinity and values at or below
//! the smallest normal exponent a signed zero (denormals of the reduced format flush to zero).
//! A NaN input is returned unchanged, also with no mantissa bits (as XLA:CPU does under
//! JAX 0.10: checked bit for bit against `lax.reduce_precision`, see the tests).

use crate::dtype::DType;

/// The target format of a `reduce_precision` op. Text attrs: `exponent_bits`,
/// `mantissa_bits`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ReducePrecisionSpec {
    /// Exponent bits of the target format (at least 1).
    pub exponent_bits: u32,
    /// Mantissa bits of the target format, without the implicit leading bit.
    pub mantissa_bits: u32,
}

impl ReducePrecisionSpec {
    /// The spec, or a message when `exponent_bits < 1` or either count is negative.
    pub fn new(exponent_bits: i64, mantissa_bits: i64) -> Result<Self, String> {
        if !(1..=64).contains(&exponent_bits) {
            return Err(format!("exponent_bits {exponent_bits} is not in [1, 64]"));
        }
        if !(0..=64).contains(&mantissa_bits) {
            return Err(format!("mantissa_bits {mantissa_bits} is not in [0, 64]"));
        }
        Ok(ReducePrecisionSpec {
            exponent_bits: exponent_bits as u32,
            mantissa_bits: mantissa_bits as u32,
        })
    }

    /// Whether the op is the identity on elements of type `d`: the target format holds every
    /// value of `d` (`f32` with 8 and 23 bits, as `jax.checkpoint` policies emit it).
    pub fn is_identity_on(&self, d: DType) -> bool {
        float_format(d).is_some_and(|(e, m)| self.exponent_bits >= e && self.mantissa_bits >= m)
    }

    /// Applies the reduction to the bits of one float of `nbits` bits (16, 32 or 64) with
    /// `src_mantissa_bits` explicit mantissa bits.
    pub fn apply_bits(&self, x: u64, nbits: u32, src_mantissa_bits: u32) -> u64 {
        let src_exponent_bits = nbits - 1 - src_mantissa_bits;
        let all = if nbits == 64 {
            u64::MAX
        } else {
            (1u64 << nbits) - 1
        };
        let sign_mask = 1u64 << (nbits - 1);
        let exp_mask = ((1u64 << src_exponent_bits) - 1) << src_mantissa_bits;
        let is_nan = (x & !sign_mask & all) > exp_mask;
        let mut v = x;
        if self.mantissa_bits < src_mantissa_bits {
            let shift = src_mantissa_bits - self.mantissa_bits;
            let last = 1u64 << shift;
            let base_bias = (last >> 1).wrapping_sub(1);
            let bias = ((v & last) >> shift).wrapping_add(base_bias);
            v = v.wrapping_add(bias) & !(last - 1) & all;
        }
        if self.exponent_bits < src_exponent_bits {
            let bias = (1u64 << (src_exponent_bits - 1)) - 1;
            let reduced_bias = (1u64 << (self.exponent_bits - 1)) - 1;
            let max_exp = (bias + reduced_bias) << src_mantissa_bits;
            let min_exp = (bias - reduced_bias) << src_mantissa_bits;
            let e = v & exp_mask;
            let zero = v & sign_mask;
            if e > max_exp {
                v = zero | exp_mask;
            }
            if e <= min_exp {
                v = zero;
            }
        }
        if is_nan {
            x
        } else {
            v
        }
    }

    /// [`Self::apply_bits`] on an `f32`.
    pub fn apply_f32(&self, x: f32) -> f32 {
        f32::from_bits(self.apply_bits(x.to_bits() as u64, 32, 23) as u32)
    }

    /// [`Self::apply_bits`] on an `f64`.
    pub fn apply_f64(&self, x: f64) -> f64 {
        f64::from_bits(self.apply_bits(x.to_bits(), 64, 52))
    }
}

/// `(exponent bits, explicit mantissa bits)` of a float element type; `None` for others.
pub fn float_format(d: DType) -> Option<(u32, u32)> {
    match d {
        DType::F32 => Some((8, 23)),
        DType::F64 => Some((11, 52)),
        DType::BF16 => Some((8, 7)),
        DType::F16 => Some((5, 10)),
        _ => None,
    }
}
