//! `f16` ↔ `f32` conversions for the executor's loops, bit for bit those of `half` (its F16C
//! path and its software path agree: exact widening with a NaN quieted, narrowing rounded to
//! nearest even), in forms that inline.
//!
//! `half`'s own conversions check for F16C on every call and reach its instructions through a
//! call that does not inline (a `#[target_feature]` function): one call per element for
//! `f16::to_f32`, one per 8 elements for the slice conversions. Here the scalar widening is
//! plain integer arithmetic (branch-free, so loops over it vectorize), and the slice
//! conversions check for F16C once per slice and run one loop of `vcvtph2ps`/`vcvtps2ph`
//! (Intel's F16C instructions, as `half` uses them).

use half::f16;
use half::slice::HalfFloatSliceExt;

/// `f16::to_f32` of `x`: exact; a NaN keeps its payload with the quiet bit set (F16C's
/// `vcvtph2ps`, `half`'s software path). Branch-free (three candidates and two selects):
/// normals rebias the exponent (+112), subnormals are `mantissa × 2⁻²⁴` (exact in `f32`),
/// infinities and NaNs take the all-ones exponent.
#[inline(always)]
pub fn f16_to_f32(x: f16) -> f32 {
    let h = u32::from(x.to_bits());
    let sign = (h & 0x8000) << 16;
    let em = h & 0x7fff;
    let normal = (em << 13) + (112 << 23);
    let quiet = if em > 0x7c00 { 0x0040_0000 } else { 0 };
    let special = (em << 13) | 0x7f80_0000 | quiet;
    // `em` < 2¹⁰ here: `em as f32` is exact and so is the power-of-two scaling.
    let sub = (em as f32 * f32::from_bits(0x3380_0000)).to_bits();
    let bits = if em < 0x400 {
        sub
    } else if em >= 0x7c00 {
        special
    } else {
        normal
    };
    f32::from_bits(sign | bits)
}

/// `f16::to_f32` of every element of `src` into `dst` (of the same length).
///
/// # Panics
/// When the lengths differ.
pub fn f16_to_f32_slice(src: &[f16], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "f16_to_f32_slice: lengths differ");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("f16c") && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has F16C and AVX (checked above); the lengths are equal.
        unsafe { x86::widen(src, dst) };
        return;
    }
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = f16_to_f32(s);
    }
}

/// `f16::from_f32` of every element of `src` into `dst` (of the same length): round to
/// nearest even, a NaN keeping its top payload bits with the quiet bit set.
///
/// # Panics
/// When the lengths differ.
pub fn f32_to_f16_slice(src: &[f32], dst: &mut [f16]) {
    assert_eq!(src.len(), dst.len(), "f32_to_f16_slice: lengths differ");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("f16c") && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has F16C and AVX (checked above); the lengths are equal.
        unsafe { x86::narrow(src, dst) };
        return;
    }
    dst.convert_from_f32_slice(src);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use half::f16;
    use std::arch::x86_64::{
        __m128i, _mm256_cvtph_ps, _mm256_cvtps_ph, _mm256_loadu_ps, _mm256_storeu_ps,
        _mm_loadu_si128, _mm_storeu_si128, _MM_FROUND_TO_NEAREST_INT,
    };

    /// Eight lanes at a time with `vcvtph2ps`, the tail through a zero-padded lane block.
    ///
    /// # Safety
    /// The CPU has F16C and AVX; `src` and `dst` have one length.
    #[target_feature(enable = "avx,f16c")]
    pub(super) unsafe fn widen(src: &[f16], dst: &mut [f32]) {
        let n = src.len() / 8 * 8;
        for i in (0..n).step_by(8) {
            // SAFETY: `i + 8 <= n <= len` for both slices.
            unsafe {
                let h = _mm_loadu_si128(src.as_ptr().add(i).cast::<__m128i>());
                _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
            }
        }
        if n < src.len() {
            let mut h = [f16::ZERO; 8];
            let mut f = [0f32; 8];
            let r = src.len() - n;
            h[..r].copy_from_slice(&src[n..]);
            // SAFETY: both buffers hold 8 lanes.
            unsafe {
                let v = _mm_loadu_si128(h.as_ptr().cast::<__m128i>());
                _mm256_storeu_ps(f.as_mut_ptr(), _mm256_cvtph_ps(v));
            }
            dst[n..].copy_from_slice(&f[..r]);
        }
    }

    /// Eight lanes at a time with `vcvtps2ph` (round to nearest even), the tail through a
    /// zero-padded lane block.
    ///
    /// # Safety
    /// The CPU has F16C and AVX; `src` and `dst` have one length.
    #[target_feature(enable = "avx,f16c")]
    pub(super) unsafe fn narrow(src: &[f32], dst: &mut [f16]) {
        let n = src.len() / 8 * 8;
        for i in (0..n).step_by(8) {
            // SAFETY: `i + 8 <= n <= len` for both slices.
            unsafe {
                let f = _mm256_loadu_ps(src.as_ptr().add(i));
                let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f);
                _mm_storeu_si128(dst.as_mut_ptr().add(i).cast::<__m128i>(), h);
            }
        }
        if n < src.len() {
            let mut f = [0f32; 8];
            let mut h = [f16::ZERO; 8];
            let r = src.len() - n;
            f[..r].copy_from_slice(&src[n..]);
            // SAFETY: both buffers hold 8 lanes.
            unsafe {
                let v = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(f.as_ptr()));
                _mm_storeu_si128(h.as_mut_ptr().cast::<__m128i>(), v);
            }
            dst[n..].copy_from_slice(&h[..r]);
        }
    }
}
