//! `ebb_runtime::f16_conv` against `half`'s conversions, bit for bit, on every f16 pattern.

use ebb_runtime::f16_conv::{f16_to_f32, f16_to_f32_slice, f32_to_f16_slice};
use half::f16;

/// Every `f16` bit pattern widens to `half`'s bits, scalar and slice.
#[test]
fn widening_matches_half_on_every_pattern() {
    let all: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    let mut got = vec![0f32; all.len()];
    f16_to_f32_slice(&all, &mut got);
    for (&h, &g) in all.iter().zip(&got) {
        let want = h.to_f32().to_bits();
        assert_eq!(f16_to_f32(h).to_bits(), want, "scalar {:#06x}", h.to_bits());
        assert_eq!(g.to_bits(), want, "slice {:#06x}", h.to_bits());
    }
}

/// Narrowing matches `f16::from_f32` on every `f16` value, the midpoints and their
/// neighbours, the overflow edge and NaN payloads, including a tail shorter than 8.
#[test]
fn narrowing_matches_half() {
    let mut xs = vec![
        f32::INFINITY,
        f32::NEG_INFINITY,
        65520.0,
        65519.996,
        -65520.0,
    ];
    xs.extend([0x7f80_0001u32, 0xffc1_2345, 0x7fbf_ffff].map(f32::from_bits));
    for b in 0..=u16::MAX {
        let x = f16::from_bits(b).to_f32();
        let u = x.to_bits();
        let (up, down) = (u.wrapping_add(0x1000), u.wrapping_add(0xfff));
        xs.extend([x, f32::from_bits(up), f32::from_bits(down)]);
    }
    let mut got = vec![f16::ZERO; xs.len()];
    f32_to_f16_slice(&xs, &mut got);
    for (&x, &g) in xs.iter().zip(&got) {
        assert_eq!(
            g.to_bits(),
            f16::from_f32(x).to_bits(),
            "{:#010x}",
            x.to_bits()
        );
    }
    let mut tail = [f16::ZERO; 5];
    f32_to_f16_slice(&xs[..5], &mut tail);
    assert_eq!(tail.as_slice(), &got[..5]);
}
