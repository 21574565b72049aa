//! Tests of `op::reduce_precision` (`ir/src/op/reduce_precision.rs`).

use ebb_ir::op::*;
use ebb_ir::DType;

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
        ebb_ir::op::f16_bits_to_f32(ebb_ir::op::f32_to_f16_bits(0.1))
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
                0x3f800000, 0x3fc00000, 0x3f800000, 0xbfa00000, 0x7f800000, 0x7f800000, 0x7f800000,
                0x38800000, 0x38800000, 0x38800000, 0x00000000, 0x80000000, 0x7f800000, 0x3dc00000,
                0x7fc00000, 0xff800000,
            ],
        ),
        (
            4,
            3,
            [
                0x3f900000, 0x3fb00000, 0x3f800000, 0xbfa00000, 0x7f800000, 0x7f800000, 0x7f800000,
                0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x80000000, 0x7f800000, 0x3dd00000,
                0x7fc00000, 0xff800000,
            ],
        ),
        (
            5,
            10,
            [
                0x3f900000, 0x3fb00000, 0x3f880000, 0xbf980000, 0x477fe000, 0x7f800000, 0x7f800000,
                0x00000000, 0x00000000, 0x38800000, 0x00000000, 0x80000000, 0x7f800000, 0x3dccc000,
                0x7fc00000, 0xff800000,
            ],
        ),
        (
            2,
            0,
            [
                0x3f800000, 0x3f800000, 0x3f800000, 0xbf800000, 0x7f800000, 0x7f800000, 0x7f800000,
                0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x80000000, 0x7f800000, 0x00000000,
                0x7fc00000, 0xff800000,
            ],
        ),
        (
            8,
            7,
            [
                0x3f900000, 0x3fb00000, 0x3f880000, 0xbf980000, 0x47800000, 0x47800000, 0x47c30000,
                0x38800000, 0x387c0000, 0x38800000, 0x38000000, 0x80010000, 0x7f800000, 0x3dcd0000,
                0x7fc00000, 0xff800000,
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
        if !ebb_ir::op::f16_bits_to_f32(b).is_nan() {
            assert_eq!(spec(5, 10).apply_bits(b.into(), 16, 10) as u16, b);
        }
    }
    for (e, m) in [(4, 10), (4, 3), (3, 7), (2, 0)] {
        let s = spec(e, m);
        for b in 0..=u16::MAX {
            let x = ebb_ir::op::f16_bits_to_f32(b);
            let got = s.apply_bits(b.into(), 16, 10) as u16;
            if x.is_nan() {
                assert_eq!(got, b);
            } else {
                let want = s.apply_f32(x);
                assert_eq!(
                    ebb_ir::op::f16_bits_to_f32(got),
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
