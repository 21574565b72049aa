//! Tests of `numerics` (`pipeline/src/numerics.rs`).

use ebb_pipeline::numerics::*;
use ebb_runtime::tensor::Tensor;

#[test]
fn nonfinite_positions_must_match() {
    let inf = f64::INFINITY;
    assert_eq!(diff(&[inf, 1.0], &[inf, 1.0], None).nonfinite_mismatches, 0);
    assert_eq!(diff(&[f64::NAN], &[f64::NAN], None).nonfinite_mismatches, 0);
    assert_eq!(diff(&[inf], &[-inf], None).nonfinite_mismatches, 1);
    assert_eq!(diff(&[f64::NAN], &[1.0], None).nonfinite_mismatches, 1);
    assert_eq!(diff(&[1.0], &[inf], None).nonfinite_mismatches, 1);
}

#[test]
fn updates_are_compared_against_the_reference_update() {
    // w = 10, reference update -0.1, ours -0.2: 1% of the value, 100% of the update.
    let d = diff(&[9.8], &[9.9], Some(&[10.0]));
    assert!((d.normwise() - 1.0).abs() < 1e-9);
    let v = diff(&[9.8], &[9.9], None);
    assert!(v.normwise() < 0.011);
    // An input the reference leaves unchanged is compared by value.
    assert_eq!(diff(&[3.0], &[3.0], Some(&[3.0])).normwise(), 0.0);
    // So is an output that is not the update of its paired input (a loss of 5 paired with
    // a loss scale of 32768): twice the loss is off by its whole value.
    let loss = diff(&[10.0], &[5.0], Some(&[32768.0]));
    assert!(!loss.by_update);
    assert!((loss.normwise() - 1.0).abs() < 1e-12);
    assert!(d.by_update);
}

#[test]
fn one_ulp_perturbation_changes_every_nonzero_float() {
    let t = Tensor::from_f32(vec![3], vec![1.0, -2.5, 0.0]).unwrap();
    let i = Tensor::from_i32(vec![1], vec![7]).unwrap();
    let p = perturb_by_roundoff(&[t.clone(), i.clone()], 0.0, 1).unwrap();
    let (a, b) = (t.as_f32().unwrap(), p[0].as_f32().unwrap());
    for k in 0..2 {
        let ulps = (a[k].to_bits() as i64 - b[k].to_bits() as i64).abs();
        // 1 ± ε: one ulp, or two below a power of two (the lower binade's ulps are finer).
        assert!((1..=2).contains(&ulps), "{} -> {}", a[k], b[k]);
    }
    assert_eq!(b[2], 0.0);
    assert!(p[1].bits_eq(&i));
}

#[test]
fn the_roundoff_unit_is_the_least_precise_computed_type() {
    let f32_step = ebb_ir::text::parse(
        "graph @t {\n  %0 = input {index = 0, name = \"x\"} : f32[4]\n  \
         %1 = negate(%0) : f32[4]\n  return %1\n}",
    )
    .unwrap();
    assert_eq!(roundoff_epsilon(&f32_step), Some(f32::EPSILON as f64));
    // f32 parameters, a bf16 forward pass inside a region: bf16's unit.
    let bf16_inside = ebb_ir::text::parse(
        "graph @t {\n  %0 = input {index = 0, name = \"x\"} : f32[4]\n  \
         %1 = fusion(%0) {kind = \"loop\"} : f32[4] {\n    region @f {\n      \
         %0 = input {index = 0, name = \"in0\"} : f32[4]\n      \
         %1 = convert(%0) {dtype = bf16} : bf16[4]\n      \
         %2 = convert(%1) {dtype = f32} : f32[4]\n      return %2\n    }\n  }\n  \
         return %1\n}",
    )
    .unwrap();
    assert_eq!(roundoff_epsilon(&bf16_inside), Some(2f64.powi(-7)));
    let ints = ebb_ir::text::parse(
        "graph @t {\n  %0 = input {index = 0, name = \"x\"} : i32[4]\n  return %0\n}",
    )
    .unwrap();
    assert_eq!(roundoff_epsilon(&ints), None);
    // The floor widens f32 inputs to bf16's unit: about 2^16 f32 ulps.
    let t = Tensor::from_f32(vec![1], vec![1.0]).unwrap();
    let p = perturb_by_roundoff(&[t], 2f64.powi(-7), 1).unwrap();
    assert!((p[0].as_f32().unwrap()[0] - 1.0).abs() == 2f32.powi(-7));
}
