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

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(e: i64, m: i64) -> ReducePrecisionSpec {
        ReducePrecisionSpec::new(e, m).unwrap()
    }

    #[test]
    fn f32_with_f32_format_is_the_identity() {
        let s = spec(8, 23);
        assert!(s.is_identity_on(DType::F32));
        assert!(!s.is_identity_on(DType::F64));
        assert!(spec(11, 52).is_identity_on(DType::BF16));
        for x in [
            0.0f32,
            -0.0,
            1.5,
            -3.25e-40,
            f32::MAX,
            f32::MIN_POSITIVE,
            f32::INFINITY,
        ] {
            assert_eq!(s.apply_f32(x).to_bits(), x.to_bits());
        }
        assert!(s.apply_f32(f32::NAN).is_nan());
    }

    /// To bfloat16's format and back equals rounding to bf16 (round to nearest even) for
    /// normal values.
    #[test]
    fn bf16_format_rounds_to_nearest_even() {
        let s = spec(8, 7);
        for x in [
            1.0f32,
            1.003_906_2,
            1.011_718_8,
            2.5e-3,
            -2.718_281_7,
            1e30,
            -1e-30,
            65504.0,
        ] {
            let b = x.to_bits();
            let want = f32::from_bits((b + 0x7fff + ((b >> 16) & 1)) & 0xffff_0000);
            assert_eq!(s.apply_f32(x), want, "{x}");
        }
        // A tie goes to the even mantissa: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
        assert_eq!(s.apply_f32(1.0 + 2f32.powi(-8)), 1.0);
        assert_eq!(
            s.apply_f32(1.0 + 3.0 * 2f32.powi(-8)),
            1.0 + 2.0 * 2f32.powi(-7)
        );
    }

    /// To IEEE half's format: overflow to infinity, underflow (and half's denormals) to zero.
    #[test]
    fn f16_format_saturates_and_flushes() {
        let s = spec(5, 10);
        assert_eq!(s.apply_f32(1.0e5), f32::INFINITY);
        assert_eq!(s.apply_f32(-1.0e5), f32::NEG_INFINITY);
        assert_eq!(s.apply_f32(65504.0), 65504.0);
        // 65520 rounds up past half's largest finite value.
        assert_eq!(s.apply_f32(65520.0), f32::INFINITY);
        assert_eq!(s.apply_f32(1.0e-6).to_bits(), 0);
        assert_eq!(s.apply_f32(-1.0e-6).to_bits(), (-0.0f32).to_bits());
        // The smallest normal half survives, one below it flushes.
        assert_eq!(s.apply_f32(2f32.powi(-14)), 2f32.powi(-14));
        assert_eq!(s.apply_f32(2f32.powi(-15)), 0.0);
        assert_eq!(
            s.apply_f32(0.1),
            crate::op::f16_bits_to_f32(crate::op::f32_to_f16_bits(0.1))
        );
    }

    #[test]
    fn nan_is_kept_even_without_mantissa() {
        let nan = f32::from_bits(0x7fc0_1234);
        assert_eq!(spec(5, 2).apply_f32(nan).to_bits(), nan.to_bits());
        assert_eq!(spec(5, 0).apply_f32(nan).to_bits(), nan.to_bits());
        assert!(spec(11, 10).apply_f64(f64::NAN).is_nan());
        assert_eq!(spec(8, 7).apply_f64(1.0 + 2f64.powi(-9)), 1.0);
    }

    /// Bits XLA:CPU gives for `lax.reduce_precision` under JAX 0.10 (ties, overflow past the
    /// largest finite value, flushing below the smallest normal one, NaN with and without
    /// mantissa bits, a negative denormal): every one reproduced.
    #[test]
    fn matches_xla_bit_for_bit() {
        let xs: [u32; 16] = [
            0x3f900000, 0x3fb00000, 0x3f880000, 0xbf980000, 0x477fe000, 0x477ff000, 0x47c35000,
            0x387fda40, 0x387ba882, 0x38800000, 0x38000000, 0x800116c2, 0x7f7fc99e, 0x3dcccccd,
            0x7fc00000, 0xff800000,
        ];
        let want: [(i64, i64, [u32; 16]); 5] = [
            (
                5,
                2,
                [
                    0x3f800000, 0x3fc00000, 0x3f800000, 0xbfa00000, 0x7f800000, 0x7f800000,
                    0x7f800000, 0x38800000, 0x38800000, 0x38800000, 0x00000000, 0x80000000,
                    0x7f800000, 0x3dc00000, 0x7fc00000, 0xff800000,
                ],
            ),
            (
                4,
                3,
                [
                    0x3f900000, 0x3fb00000, 0x3f800000, 0xbfa00000, 0x7f800000, 0x7f800000,
                    0x7f800000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x80000000,
                    0x7f800000, 0x3dd00000, 0x7fc00000, 0xff800000,
                ],
            ),
            (
                5,
                10,
                [
                    0x3f900000, 0x3fb00000, 0x3f880000, 0xbf980000, 0x477fe000, 0x7f800000,
                    0x7f800000, 0x00000000, 0x00000000, 0x38800000, 0x00000000, 0x80000000,
                    0x7f800000, 0x3dccc000, 0x7fc00000, 0xff800000,
                ],
            ),
            (
                2,
                0,
                [
                    0x3f800000, 0x3f800000, 0x3f800000, 0xbf800000, 0x7f800000, 0x7f800000,
                    0x7f800000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x80000000,
                    0x7f800000, 0x00000000, 0x7fc00000, 0xff800000,
                ],
            ),
            (
                8,
                7,
                [
                    0x3f900000, 0x3fb00000, 0x3f880000, 0xbf980000, 0x47800000, 0x47800000,
                    0x47c30000, 0x38800000, 0x387c0000, 0x38800000, 0x38000000, 0x80010000,
                    0x7f800000, 0x3dcd0000, 0x7fc00000, 0xff800000,
                ],
            ),
        ];
        for (e, m, out) in want {
            let s = spec(e, m);
            for (x, y) in xs.iter().zip(out) {
                assert_eq!(
                    s.apply_f32(f32::from_bits(*x)).to_bits(),
                    y,
                    "e{e}m{m} of {x:#010x}"
                );
            }
        }
    }

    /// Tests that reducing a 16-bit float in its own bits (as the executor does for `bf16`
    /// and `f16` tensors) equals reducing the same value as an `f32`, for every one of the
    /// 65 536 bit patterns and formats narrower than the 16-bit type.
    #[test]
    fn sixteen_bit_types_agree_with_f32_on_every_value() {
        for (e, m) in [(8, 7), (5, 2), (4, 3), (8, 0), (2, 1)] {
            let s = spec(e, m);
            for b in 0..=u16::MAX {
                let x = f32::from_bits(u32::from(b) << 16);
                let want = s.apply_f32(x).to_bits();
                let got = u32::from(s.apply_bits(b.into(), 16, 7) as u16) << 16;
                if x.is_nan() {
                    assert_eq!(got, u32::from(b) << 16);
                } else {
                    assert_eq!(got, want, "bf16 e{e}m{m} of {b:#06x}");
                }
            }
        }
        // With f16's own 5 exponent bits nothing is flushed (XLA reduces in the tensor's own
        // type), so f16 denormals survive there: (5, 10) is the identity on f16.
        for b in 0..=u16::MAX {
            if !crate::op::f16_bits_to_f32(b).is_nan() {
                assert_eq!(spec(5, 10).apply_bits(b.into(), 16, 10) as u16, b);
            }
        }
        for (e, m) in [(4, 10), (4, 3), (3, 7), (2, 0)] {
            let s = spec(e, m);
            for b in 0..=u16::MAX {
                let x = crate::op::f16_bits_to_f32(b);
                let got = s.apply_bits(b.into(), 16, 10) as u16;
                if x.is_nan() {
                    assert_eq!(got, b);
                } else {
                    let want = s.apply_f32(x);
                    assert_eq!(
                        crate::op::f16_bits_to_f32(got),
                        want,
                        "f16 e{e}m{m} of {b:#06x}"
                    );
                }
            }
        }
    }

    #[test]
    fn bad_specs_are_refused() {
        assert!(ReducePrecisionSpec::new(0, 3).is_err());
        assert!(ReducePrecisionSpec::new(5, -1).is_err());
    }
}
