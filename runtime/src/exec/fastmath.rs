//! Vectorizable `f32` `exp`, `tanh` and `log1p` for the elementwise kernels (the softmax,
//! GELU and softplus hot spots), with the accuracy of the scalar library functions (a couple
//! of ulps).
//!
//! Algorithms: Cephes `expf` (S. L. Moshier, Cephes Math Library, `expf.c`): `x = n ln2 + r`
//! with `n = round(x log2 e)` and a two-constant Cody–Waite reduction, a degree-5 polynomial
//! for `(e^r - 1 - r) / r^2`, and the scale `2^n` built in the exponent bits. Cephes `tanhf`
//! (`tanhf.c`): an odd degree-11 polynomial for `|x| < 0.625`, `1 - 2 / (e^{2|x|} + 1)` above.
//! FreeBSD/musl `log1pf` (`s_log1pf.c`, after Sun's fdlibm `s_log1p.c`): `1 + x = 2^k m` with
//! `m` in `[√2/2, √2)`, the rounding error of `1 + x` carried as a correction `c / (1 + x)`,
//! and `log(m)` from `s = f / (2 + f)` (`f = m - 1`) by a degree-4 polynomial in `s²`; its
//! branches become selects. The loops are branch-free so the compiler vectorizes them; inputs
//! outside the reduced range (overflow, underflow, NaN) are fixed up by selects or by a
//! scalar pass afterwards.
//!
//! Invariant: every element depends only on its own input (deterministic under any split).

/// Inputs are clamped to `[EXP_LO, EXP_HI]`: below, `e^x` rounds to 0 in `f32`; above, to
/// infinity.
const EXP_LO: f32 = -104.0;
const EXP_HI: f32 = 88.75;
/// 1.5·2^23: adding it to an `f32` of magnitude below 2^22 rounds it to an integer.
const ROUND_MAGIC: f32 = 12_582_912.0;

/// `e^x` over the whole `f32` range, branch-free: the polynomial of the module docs, and
/// `2^n` (`n` in `[-150, 128]`) applied as the product of two normal powers of two, `2^h`
/// and `2^(n-h)` with `h = n >> 1`, so that subnormal results are rounded once and overflow
/// gives infinity. NaN stays NaN. The generated kernels (`ebb_codegen::math`) emit exactly
/// these operations.
#[inline(always)]
#[allow(clippy::excessive_precision)] // Cephes coefficients as published
fn exp_core(x: f32) -> f32 {
    // Below EXP_LO the result is 0: the last scale is then 1 and the result selected, so
    // that no arithmetic underflows (an underflowing vector multiply costs a microcode
    // assist on x86: masked attention scores are all down here).
    let zero = x < EXP_LO;
    let x = x.clamp(EXP_LO, EXP_HI);
    // Round to nearest (even) by adding and subtracting 1.5·2^23: two additions that
    // vectorize everywhere (`f32::round` has no x86 vector instruction and becomes a libm
    // call per element).
    let n = (x * std::f32::consts::LOG2_E + ROUND_MAGIC) - ROUND_MAGIC;
    let r = x - n * 0.693_359_4 - n * (-2.121_944_4e-4);
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let y = p * r * r + r + 1.0;
    // `n as i32` (NaN -> 0), without the saturation that keeps a conversion from
    // vectorizing: `x` was clamped, so a non-NaN `n` lies in [-150, 128].
    let n = if n.is_nan() { 0.0 } else { n };
    // SAFETY: `n` is finite and within i32 (see above).
    let ni: i32 = unsafe { n.to_int_unchecked() };
    let h = ni >> 1;
    let pow2 = |e: i32| f32::from_bits(((e + 127) as u32) << 23);
    let s2 = if zero { 1.0 } else { pow2(ni - h) };
    let r = y * pow2(h) * s2;
    if zero {
        0.0
    } else {
        r
    }
}

/// `e^x` for every element of `v`, in place.
pub fn exp_in_place(v: &mut [f32]) {
    for x in v.iter_mut() {
        *x = exp_core(*x);
    }
}

/// `e^x` for every element of `src`.
#[doc(hidden)]
pub fn exp(src: &[f32]) -> Vec<f32> {
    let mut v = src.to_vec();
    exp_in_place(&mut v);
    v
}

/// Whether [`apply_in_place`] has a vector kernel for op `k` (`exponential`, `tanh`,
/// `log_plus_one`): the reference executor computes those `f32` ops (and the `bf16`/`f16`
/// ones, through `f32`) with this module's functions, never the C library's.
pub(crate) fn has_kernel(k: ebb_ir::OpKind) -> bool {
    matches!(
        k,
        ebb_ir::OpKind::Exponential | ebb_ir::OpKind::Tanh | ebb_ir::OpKind::LogPlusOne
    )
}

/// Applies `exponential`, `tanh` or `log_plus_one` in place with the vector kernels, split over threads for
/// large inputs; false for other ops.
pub(crate) fn apply_in_place(k: ebb_ir::OpKind, v: &mut [f32]) -> bool {
    let f: fn(&mut [f32]) = match k {
        ebb_ir::OpKind::Exponential => exp_in_place,
        ebb_ir::OpKind::Tanh => tanh_in_place,
        ebb_ir::OpKind::LogPlusOne => log1p_in_place,
        _ => return false,
    };
    // Chunks of 8192 elements: the vector kernels' results do not depend on the split.
    let chunk = if v.len() >= super::par::PAR_MIN {
        8192
    } else {
        0
    };
    super::par::chunks_mut(v, chunk, &|_, c| f(c));
    true
}

#[inline(always)]
#[allow(clippy::excessive_precision)] // Cephes coefficients as published
fn tanh_core(x: f32) -> f32 {
    let a = x.abs();
    // small: odd polynomial
    let z = x * x;
    let small =
        ((((-5.704_988_7e-3 * z + 2.063_908_9e-2) * z - 5.373_971_6e-2) * z + 1.333_144_2e-1) * z
            - 3.333_328_2e-1)
            * z
            * x
            + x;
    // large: 1 - 2 / (e^{2|x|} + 1); above 9.1, tanh rounds to 1 in f32
    let e = exp_core((2.0 * a).min(20.0));
    let big = if a > 9.1 { 1.0 } else { 1.0 - 2.0 / (e + 1.0) };
    if a < 0.625 {
        small
    } else {
        big.copysign(x)
    }
}

/// `tanh(x)` for every element of `v`, in place (NaN stays NaN).
pub fn tanh_in_place(v: &mut [f32]) {
    let nans: Vec<usize> = v
        .iter()
        .enumerate()
        .filter(|(_, x)| x.is_nan())
        .map(|(i, _)| i)
        .collect();
    for x in v.iter_mut() {
        *x = tanh_core(*x);
    }
    for i in nans {
        v[i] = f32::NAN;
    }
}

/// `tanh(x)` for every element of `src`.
#[doc(hidden)]
pub fn tanh(src: &[f32]) -> Vec<f32> {
    let mut v = src.to_vec();
    tanh_in_place(&mut v);
    v
}

/// `ln 2` split in two: `LN2_HI` has its low 12 bits zero, so `k · LN2_HI` is exact for the
/// `k` of [`log1p_core`] (`|k| <= 128`).
const LN2_HI: f32 = f32::from_bits(0x3f31_7180);
/// `ln 2 - LN2_HI`.
const LN2_LO: f32 = f32::from_bits(0x3717_f7d1);
/// `√2/2 - 1` and `√2 - 1` (rounded as `log1pf` takes them): `1 + x` in `[√2/2, √2)`
/// between them.
const NEAR_LO: f32 = f32::from_bits(0xbe95_f619);
/// See [`NEAR_LO`].
const NEAR_HI: f32 = f32::from_bits(0x3ed4_13d0);
/// 2^-24: below it in magnitude, `ln(1 + x)` rounds to `x`.
const TINY: f32 = f32::from_bits(0x3380_0000);
/// `log1pf`'s polynomial: `|(log(1+s) - log(1-s))/s - Lg(s)| < 2^-34.24` on its range.
const LG: [f32; 4] = [
    f32::from_bits(0x3f2a_aaaa),
    f32::from_bits(0x3ecc_ce13),
    f32::from_bits(0x3e91_e9ee),
    f32::from_bits(0x3e78_9e26),
];

/// `ln(1 + x)` over the whole `f32` range, branch-free (the algorithm of the module docs):
/// within about 1 ulp of the exact value (`runtime/tests/exec_fastmath.rs` measures it);
/// `-1` gives `-inf`, below `-1` and NaN give the canonical NaN, `+inf` stays, `|x| < 2^-24`
/// gives `x`. The generated kernels (`ebb_codegen::math`) emit exactly these operations.
#[inline(always)]
pub(crate) fn log1p_core(x: f32) -> f32 {
    let u = 1.0 + x;
    // `1 + x = 2^k m`, `m` in [√2/2, √2): the exponent of `u` scaled by 1/√2.
    let iu = u.to_bits().wrapping_add(0x3f80_0000 - 0x3f35_04f3);
    let k = (iu >> 23) as i32 - 0x7f;
    // The rounding error of `1 + x`, relative to it (0 where it is below `u`'s precision).
    let c = if k >= 2 { 1.0 - (u - x) } else { x - (u - 1.0) };
    let c = if k < 25 { c / u } else { 0.0 };
    let f = f32::from_bits((iu & 0x007f_ffff) + 0x3f35_04f3) - 1.0;
    // √2/2 - 1 <= x < √2 - 1: `1 + x` needs no reduction and `f = x` exactly.
    let near = (NEAR_LO..NEAR_HI).contains(&x);
    let (k, c, f) = if near { (0, 0.0, x) } else { (k, c, f) };
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (LG[1] + w * LG[3]);
    let t2 = z * (LG[0] + w * LG[2]);
    let r = t2 + t1;
    let hfsq = 0.5 * f * f;
    let dk = k as f32;
    let y = s * (hfsq + r) + (dk * LN2_LO + c) - hfsq + f + dk * LN2_HI;
    // |x| < 2^-24: x itself (also ±0 and subnormals); +inf stays +inf; -1 gives -inf, below
    // it NaN. (Compares of `x` as a float, not of its bits: a kernel holding `x` widened from
    // a 16-bit type then keeps it a float.)
    let y = if x.abs() < TINY { x } else { y };
    let y = if x == f32::INFINITY { x } else { y };
    let below = if x == -1.0 {
        f32::NEG_INFINITY
    } else {
        f32::NAN
    };
    let y = if x <= -1.0 { below } else { y };
    if x.is_nan() {
        f32::NAN
    } else {
        y
    }
}

/// `ln(1 + x)` for every element of `v`, in place ([`log1p_core`]).
pub fn log1p_in_place(v: &mut [f32]) {
    for x in v.iter_mut() {
        *x = log1p_core(*x);
    }
}

/// `ln(1 + x)` for every element of `src`.
#[doc(hidden)]
pub fn log1p(src: &[f32]) -> Vec<f32> {
    let mut v = src.to_vec();
    log1p_in_place(&mut v);
    v
}
