//! Elementwise kernels (`ebb_runtime::exec::elementwise`): NaN propagation, comparisons, bf16.

use ebb_ir::graph::Relation;
use ebb_ir::OpKind;
use ebb_runtime::exec::elementwise::{binary, compare};
use ebb_runtime::tensor::Data;
use half::bf16;

#[test]
fn max_min_propagate_nan() {
    let r = binary(
        OpKind::Maximum,
        &Data::F32(vec![f32::NAN, 1.0].into()),
        &Data::F32(vec![0.0, 2.0].into()),
    )
    .unwrap();
    let Data::F32(v) = r else { panic!() };
    assert!(v[0].is_nan());
    assert_eq!(v[1], 2.0);
}

#[test]
fn compare_float_and_total_order() {
    let a = Data::F32(vec![f32::NAN, 1.0, -0.0].into());
    let b = Data::F32(vec![f32::NAN, 2.0, 0.0].into());
    assert_eq!(
        compare(&a, &b, Relation::Eq, false).unwrap(),
        Data::I1(vec![false, false, true].into())
    );
    assert_eq!(
        compare(&a, &b, Relation::Ne, false).unwrap(),
        Data::I1(vec![true, true, false].into())
    );
    assert_eq!(
        compare(&a, &b, Relation::Lt, true).unwrap(),
        Data::I1(vec![false, true, true].into())
    );
}

#[test]
fn bf16_rounds_after_each_op() {
    let a = Data::BF16(vec![bf16::from_f32(1.0)].into());
    let b = Data::BF16(vec![bf16::from_f32(1.0 / 512.0)].into());
    assert_eq!(
        binary(OpKind::Add, &a, &b).unwrap(),
        Data::BF16(vec![bf16::from_f32(1.0)].into())
    );
}
