//! Tests of `op` (`ir/src/op/mod.rs`).

use ebb_ir::op::*;

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
