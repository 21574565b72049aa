//! `ebb_pipeline::device_check`: per-output errors of a GPU executor against the reference,
//! and the tolerance each output is held to.

use ebb_ir::DType;
use ebb_pipeline::device_check::{coarsest_float, compare, describe, tolerance_of};
use ebb_runtime::Tensor;

fn f32s(v: &[f32]) -> Tensor {
    Tensor::from_f32(vec![v.len()], v.to_vec()).unwrap()
}

fn as_type(t: &Tensor, d: DType) -> Tensor {
    Tensor::new(t.shape().to_vec(), t.data().convert(d)).unwrap()
}

#[test]
fn tolerances_follow_the_element_type() {
    assert_eq!(tolerance_of(DType::F32, 1e-5), 1e-5);
    assert_eq!(tolerance_of(DType::I32, 1e-5), 1e-5);
    assert_eq!(tolerance_of(DType::BF16, 1e-5), 2.0 / 128.0);
    assert_eq!(tolerance_of(DType::F16, 1e-5), 2.0 / 1024.0);
    // A looser --device-tolerance wins.
    assert_eq!(tolerance_of(DType::BF16, 0.5), 0.5);
}

#[test]
fn identical_outputs_are_not_listed() {
    let a = f32s(&[1.0, 2.0, 3.0]);
    assert!(compare(&[a.clone()], &[a], &[], None, 1e-5).is_empty());
}

#[test]
fn the_largest_difference_is_located() {
    let want = f32s(&[1.0, -4.0, 2.0, 0.5]);
    let got = f32s(&[1.0, -4.0, 2.001, 0.5]);
    let e = compare(&[got], &[want], &["w".into()], None, 1e-5);
    assert_eq!(e.len(), 1);
    let e = &e[0];
    assert_eq!(
        (e.index, e.name.as_str(), e.ty.as_str()),
        (0, "w", "f32[4]")
    );
    let (i, x, y) = e.worst.unwrap();
    assert_eq!(i, 2);
    assert!((x - 2.001).abs() < 1e-6 && y == 2.0);
    // 0.001 / max |y| = 0.001 / 4
    assert!((e.rel_err - 0.00025).abs() < 1e-7, "{}", e.rel_err);
    assert!(!e.passed());
    let text = describe(&[e.clone()]);
    assert!(
        text.starts_with("output 0 (w) f32[4]: relative error 2.5"),
        "{text}"
    );
    assert!(text.contains("element 2"), "{text}");
}

#[test]
fn a_nan_on_one_side_fails_and_is_located() {
    let want = f32s(&[1.0, 2.0, 3.0]);
    let got = f32s(&[1.0, f32::NAN, 3.5]);
    let e = &compare(&[got], &[want], &[], None, 1.0)[0];
    assert!(e.rel_err.is_infinite() && !e.passed());
    assert_eq!(e.worst.map(|w| w.0), Some(1));
}

#[test]
fn a_bf16_step_is_held_to_bf16_precision() {
    // f32 outputs of a step that rounds to bf16 somewhere: 1.0 against 1 + 2^-7.
    let want = f32s(&[1.0, 0.25]);
    let got = f32s(&[1.0078125, 0.25]);
    let e = &compare(
        &[got.clone()],
        &[want.clone()],
        &[],
        Some(DType::BF16),
        1e-5,
    )[0];
    assert!(e.passed(), "{e:?}");
    // The same difference in an f32-only step is not within tolerance.
    let e = &compare(&[got], &[want], &[], None, 1e-5)[0];
    assert!(!e.passed());
}

#[test]
fn the_coarsest_type_is_found_inside_regions() {
    let f32_step = ebb_testkit::import_path(&ebb_testkit::jax_fixture("mlp_sgd"));
    assert_eq!(coarsest_float(&f32_step), None);
    let bf16_step = ebb_testkit::import_path(&ebb_testkit::jax_fixture("mlp_bf16"));
    assert_eq!(coarsest_float(&bf16_step), Some(DType::BF16));
}

#[test]
fn bf16_outputs_are_compared_by_value_and_named_by_type() {
    // A bf16 output one bf16 ulp (2^-7 at 1.0) off: within bf16 precision, located anyway.
    let want = as_type(&f32s(&[1.0, 0.25]), DType::BF16);
    let got = as_type(&f32s(&[1.0078125, 0.25]), DType::BF16);
    let e = &compare(&[got], &[want], &[], Some(DType::BF16), 1e-5)[0];
    assert!(e.passed(), "{e:?}");
    assert_eq!(e.ty, "bf16[2]");
    assert_eq!(e.worst.map(|w| w.0), Some(0));
}
