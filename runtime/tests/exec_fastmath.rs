//! The vector `exp`, `tanh` and `log1p` (`ebb_runtime::exec::fastmath`): ulp bounds and
//! special values.

use ebb_runtime::exec::fastmath::{exp, log1p, tanh};

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

/// `log1p` against `f64::ln_1p` on a sweep over (-1, 4], on every power of two from 2^-30 to
/// 2^127 with its neighbours (and their negations above -1), and on the special values.
#[test]
fn log1p_is_within_one_ulp() {
    let mut xs: Vec<f32> = (-99_999..=400_000).map(|i| i as f32 * 1e-5).collect();
    for e in -30..=127 {
        let p = 2f32.powi(e);
        for x in [
            p,
            f32::from_bits(p.to_bits() + 1),
            f32::from_bits(p.to_bits() - 1),
        ] {
            xs.push(x);
            if x < 1.0 {
                xs.push(-x);
            }
        }
    }
    xs.extend([
        f32::MAX,
        -0.999_999_94,
        0.414_213_5,
        -0.292_893_2,
        1e-8,
        -1e-8,
    ]);
    let got = log1p(&xs);
    let worst = xs
        .iter()
        .zip(&got)
        .map(|(&x, &y)| ulps(y, (x as f64).ln_1p()))
        .fold(0.0, f64::max);
    assert!(worst <= 1.0, "worst {worst} ulps");
    let special = log1p(&[
        -1.0,
        -1.5,
        f32::NEG_INFINITY,
        f32::INFINITY,
        f32::NAN,
        0.0,
        -0.0,
        1e-40,
    ]);
    assert_eq!(special[0], f32::NEG_INFINITY);
    assert!(special[1].is_nan() && special[2].is_nan() && special[4].is_nan());
    assert_eq!(special[3], f32::INFINITY);
    assert_eq!(special[5].to_bits(), 0f32.to_bits());
    assert_eq!(special[6].to_bits(), (-0f32).to_bits());
    assert_eq!(special[7], 1e-40);
}
