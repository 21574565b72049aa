//! The vector `exp` and `tanh` (`ebb_runtime::exec::fastmath`): ulp bounds and special values.

use ebb_runtime::exec::fastmath::{exp, tanh};

fn ulps(a: f32, b: f64) -> f64 {
    let b32 = b as f32;
    if a == b32 {
        return 0.0;
    }
    ((a as f64 - b).abs()) / (b32.abs() as f64 * f32::EPSILON as f64).max(f32::MIN_POSITIVE as f64)
}

#[test]
fn exp_is_within_two_ulps() {
    let xs: Vec<f32> = (-200_000..=200_000).map(|i| i as f32 * 4.4e-4).collect();
    let got = exp(&xs);
    let worst = xs
        .iter()
        .zip(&got)
        .map(|(&x, &y)| ulps(y, (x as f64).exp()))
        .fold(0.0, f64::max);
    assert!(worst <= 2.0, "worst {worst} ulps");
    let special = exp(&[
        f32::NEG_INFINITY,
        -200.0,
        -100.0,
        100.0,
        f32::INFINITY,
        f32::NAN,
        0.0,
    ]);
    assert_eq!(special[..2], [0.0, 0.0]);
    assert_eq!(special[3..5], [f32::INFINITY, f32::INFINITY]);
    // Subnormal results: within one unit of the last place of the correctly rounded one.
    for x in [-100.0f32, -95.0, -90.0, -87.5, -103.9] {
        let got = exp(&[x])[0].to_bits() as i64;
        let want = ((x as f64).exp() as f32).to_bits() as i64;
        assert!((got - want).abs() <= 1, "exp({x}): {got} vs {want}");
    }
    assert_eq!(exp(&[88.8, 88.7])[0], f32::INFINITY);
    assert!(exp(&[88.7])[0].is_finite());
    assert!(special[5].is_nan());
    assert_eq!(special[6], 1.0);
}

#[test]
fn tanh_is_within_three_ulps() {
    let xs: Vec<f32> = (-100_000..=100_000)
        .map(|i| i as f32 * 1.1e-4)
        .chain([1e-30, -1e-8, 0.0, 30.0, -30.0])
        .collect();
    let got = tanh(&xs);
    let worst = xs
        .iter()
        .zip(&got)
        .map(|(&x, &y)| ulps(y, (x as f64).tanh()))
        .fold(0.0, f64::max);
    assert!(worst <= 3.0, "worst {worst} ulps");
    assert!(tanh(&[f32::NAN])[0].is_nan());
    assert_eq!(tanh(&[f32::INFINITY, f32::NEG_INFINITY]), vec![1.0, -1.0]);
}
