//! `f32` `exponential`, `tanh`, `log_plus_one` and `reduce_precision` emitted inline as LLVM
//! IR. The first three follow, operation for operation, the reference executor's vector
//! kernels (`ebb_runtime`'s `exec/fastmath.rs`: Cephes `expf` with a two-factor `2^n` scale,
//! Cephes `tanhf`, FreeBSD/musl `log1pf` with its branches as selects), and
//! `reduce_precision` the bit manipulation of `ReducePrecisionSpec::apply_bits`, so that a
//! generated kernel vectorizes them and agrees with the reference bit for bit. Every constant and every operation order below must
//! match that file; its tests and `runtime/tests/exec_jit.rs` check the agreement.
//!
//! Invariant: only IEEE operations LLVM does not reassociate or contract (no fast-math flags),
//! and the intrinsics Rust's `f32` methods lower to (`llvm.fabs`,
//! `llvm.minnum`, `llvm.copysign`; `exp`'s in-range `fptosi`, Rust's `to_int_unchecked`).

use crate::lower::{Emit, LowerError};
use ebb_ir::op::ReducePrecisionSpec;
use inkwell::values::FloatValue;
use inkwell::{FloatPredicate, IntPredicate};

/// Inputs are clamped to `[EXP_LO, EXP_HI]` (below, `e^x` rounds to 0; above, to infinity).
pub const EXP_LO: f32 = -104.0;
/// See [`EXP_LO`].
pub const EXP_HI: f32 = 88.75;
/// 1.5·2^23 (see `exp_f32`).
const ROUND_MAGIC: f32 = 12_582_912.0;

impl<'ctx> Emit<'_, 'ctx> {
    /// `exp_core(x)` of `fastmath.rs`: `x = n ln2 + r` (`n` rounded by adding and subtracting
    /// 1.5·2^23), degree-5 polynomial, `2^n` as the
    /// product of two normal powers of two (subnormal results and overflow come out right).
    pub(crate) fn exp_f32(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, LowerError> {
        let b = self.b;
        let f = self.f32c();
        let lo = f(EXP_LO);
        let hi = f(EXP_HI);
        // Below EXP_LO the result is 0, selected after a last scale of 1 (no underflow).
        let zero = b.build_float_compare(FloatPredicate::OLT, x, lo, "")?;
        // Rust's f32::clamp: `if x < lo { lo }`, then `if x > hi { hi }` (NaN stays NaN).
        let c = b.build_float_compare(FloatPredicate::OLT, x, lo, "")?;
        let x = b.build_select(c, lo, x, "")?.into_float_value();
        let c = b.build_float_compare(FloatPredicate::OGT, x, hi, "")?;
        let x = b.build_select(c, hi, x, "")?.into_float_value();
        // n = (x log2 e + 1.5·2^23) - 1.5·2^23: round to nearest even, vectorizable.
        let n = b.build_float_mul(x, f(std::f32::consts::LOG2_E), "")?;
        let n = b.build_float_add(n, f(ROUND_MAGIC), "")?;
        let n = b.build_float_sub(n, f(ROUND_MAGIC), "")?;
        let r = b.build_float_sub(x, b.build_float_mul(n, f(0.693_359_4), "")?, "")?;
        let r = b.build_float_sub(r, b.build_float_mul(n, f(-2.121_944_4e-4), "")?, "")?;
        #[allow(clippy::excessive_precision)] // Cephes coefficients as published
        let coeffs = [
            1.987_569_1e-4_f32,
            1.398_199_9e-3,
            8.333_452e-3,
            4.166_579_6e-2,
            1.666_666_5e-1,
            0.5,
        ];
        let mut p = f(coeffs[0]);
        for &c in &coeffs[1..] {
            p = b.build_float_add(b.build_float_mul(p, r, "")?, f(c), "")?;
        }
        // y = p * r * r + r + 1
        let y = b.build_float_mul(b.build_float_mul(p, r, "")?, r, "")?;
        let y = b.build_float_add(b.build_float_add(y, r, "")?, f(1.0), "")?;
        // n as i32 (NaN -> 0; otherwise n lies in [-150, 128] after the clamp, so a plain
        // conversion, which vectorizes, equals the saturating one); h = n >> 1; scale
        // 2^h * 2^(n - h)
        let i32t = self.ctx.i32_type();
        let nan = b.build_float_compare(FloatPredicate::UNO, n, n, "")?;
        let n = b.build_select(nan, f(0.0), n, "")?.into_float_value();
        let ni = b.build_float_to_signed_int(n, i32t, "")?;
        let h = b.build_right_shift(ni, i32t.const_int(1, false), true, "")?;
        let nh = b.build_int_sub(ni, h, "")?;
        let pow2 = |e| -> Result<FloatValue<'ctx>, LowerError> {
            let bits = b.build_left_shift(
                b.build_int_add(e, i32t.const_int(127, false), "")?,
                i32t.const_int(23, false),
                "",
            )?;
            Ok(b.build_bit_cast(bits, self.ctx.f32_type(), "")?
                .into_float_value())
        };
        let s2 = b
            .build_select(zero, f(1.0), pow2(nh)?, "")?
            .into_float_value();
        let y = b.build_float_mul(y, pow2(h)?, "")?;
        let r = b.build_float_mul(y, s2, "")?;
        Ok(b.build_select(zero, f(0.0), r, "")?.into_float_value())
    }

    /// `tanh` of `fastmath.rs`: odd polynomial below 0.625, `1 - 2 / (e^{2|x|} + 1)` above
    /// (1 above 9.1), sign copied; NaN in gives the canonical NaN.
    pub(crate) fn tanh_f32(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, LowerError> {
        let b = self.b;
        let f = self.f32c();
        let a = self.float_intrinsic("llvm.fabs", &[x])?;
        let z = b.build_float_mul(x, x, "")?;
        #[allow(clippy::excessive_precision)] // Cephes coefficients as published
        let mut p = f(-5.704_988_7e-3);
        #[allow(clippy::excessive_precision)]
        for (c, add) in [
            (2.063_908_9e-2_f32, true),
            (5.373_971_6e-2, false),
            (1.333_144_2e-1, true),
            (3.333_328_2e-1, false),
        ] {
            let pz = b.build_float_mul(p, z, "")?;
            p = if add {
                b.build_float_add(pz, f(c), "")?
            } else {
                b.build_float_sub(pz, f(c), "")?
            };
        }
        let small = b.build_float_mul(b.build_float_mul(p, z, "")?, x, "")?;
        let small = b.build_float_add(small, x, "")?;
        let two_a = b.build_float_mul(f(2.0), a, "")?;
        let e = self.exp_f32(self.float_intrinsic("llvm.minnum", &[two_a, f(20.0)])?)?;
        let q = b.build_float_div(f(2.0), b.build_float_add(e, f(1.0), "")?, "")?;
        let big = b.build_float_sub(f(1.0), q, "")?;
        let c = b.build_float_compare(FloatPredicate::OGT, a, f(9.1), "")?;
        let big = b.build_select(c, f(1.0), big, "")?.into_float_value();
        let big = self.float_intrinsic("llvm.copysign", &[big, x])?;
        let c = b.build_float_compare(FloatPredicate::OLT, a, f(0.625), "")?;
        let r = b.build_select(c, small, big, "")?.into_float_value();
        let nan = b.build_float_compare(FloatPredicate::UNO, x, x, "")?;
        Ok(b.build_select(nan, f(f32::NAN), r, "")?.into_float_value())
    }

    /// `log1p_core` of `fastmath.rs` (FreeBSD/musl `log1pf`): `1 + x = 2^k m` with `m` in
    /// `[√2/2, √2)`, the correction `c / (1 + x)` for the rounding of `1 + x`, `log(m)` by a
    /// polynomial in `s = f / (2 + f)`; special values by selects (NaN in: the canonical NaN).
    pub(crate) fn log1p_f32(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, LowerError> {
        let b = self.b;
        let f = self.f32c();
        let i32t = self.ctx.i32_type();
        let f32t = self.ctx.f32_type();
        let c = |v: u32| i32t.const_int(u64::from(v), false);
        let bits = |v: FloatValue<'ctx>| -> Result<_, LowerError> {
            Ok(b.build_bit_cast(v, i32t, "")?.into_int_value())
        };
        let float = |v| -> Result<FloatValue<'ctx>, LowerError> {
            Ok(b.build_bit_cast(v, f32t, "")?.into_float_value())
        };
        let fsel = |cond, t: FloatValue<'ctx>, e: FloatValue<'ctx>| -> Result<_, LowerError> {
            Ok(b.build_select(cond, t, e, "")?.into_float_value())
        };
        let u = b.build_float_add(f(1.0), x, "")?;
        let iu = b.build_int_add(bits(u)?, c(0x3f80_0000 - 0x3f35_04f3), "")?;
        let k = b.build_int_sub(b.build_right_shift(iu, c(23), false, "")?, c(0x7f), "")?;
        let big = b.build_float_sub(f(1.0), b.build_float_sub(u, x, "")?, "")?;
        let small = b.build_float_sub(x, b.build_float_sub(u, f(1.0), "")?, "")?;
        let k_ge2 = b.build_int_compare(IntPredicate::SGE, k, c(2), "")?;
        let cr = fsel(k_ge2, big, small)?;
        let k_lt25 = b.build_int_compare(IntPredicate::SLT, k, c(25), "")?;
        let cr = fsel(k_lt25, b.build_float_div(cr, u, "")?, f(0.0))?;
        let m =
            float(b.build_int_add(b.build_and(iu, c(0x007f_ffff), "")?, c(0x3f35_04f3), "")?)?;
        let fr = b.build_float_sub(m, f(1.0), "")?;
        // √2/2 - 1 <= x < √2 - 1: no reduction, f = x.
        let ge =
            b.build_float_compare(FloatPredicate::OGE, x, f(f32::from_bits(0xbe95_f619)), "")?;
        let lt =
            b.build_float_compare(FloatPredicate::OLT, x, f(f32::from_bits(0x3ed4_13d0)), "")?;
        let near = b.build_and(ge, lt, "")?;
        let k = b.build_select(near, c(0), k, "")?.into_int_value();
        let cr = fsel(near, f(0.0), cr)?;
        let fr = fsel(near, x, fr)?;
        let s = b.build_float_div(fr, b.build_float_add(f(2.0), fr, "")?, "")?;
        let z = b.build_float_mul(s, s, "")?;
        let w = b.build_float_mul(z, z, "")?;
        let lg = |v: u32| f(f32::from_bits(v));
        let (lg1, lg2, lg3, lg4) = (
            lg(0x3f2a_aaaa),
            lg(0x3ecc_ce13),
            lg(0x3e91_e9ee),
            lg(0x3e78_9e26),
        );
        let t1 = b.build_float_mul(
            w,
            b.build_float_add(lg2, b.build_float_mul(w, lg4, "")?, "")?,
            "",
        )?;
        let t2 = b.build_float_mul(
            z,
            b.build_float_add(lg1, b.build_float_mul(w, lg3, "")?, "")?,
            "",
        )?;
        let r = b.build_float_add(t2, t1, "")?;
        let hfsq = b.build_float_mul(b.build_float_mul(f(0.5), fr, "")?, fr, "")?;
        let dk = b.build_signed_int_to_float(k, f32t, "")?;
        let (ln2_hi, ln2_lo) = (
            f(f32::from_bits(0x3f31_7180)),
            f(f32::from_bits(0x3717_f7d1)),
        );
        let y = b.build_float_mul(s, b.build_float_add(hfsq, r, "")?, "")?;
        let y = b.build_float_add(
            y,
            b.build_float_add(b.build_float_mul(dk, ln2_lo, "")?, cr, "")?,
            "",
        )?;
        let y = b.build_float_sub(y, hfsq, "")?;
        let y = b.build_float_add(y, fr, "")?;
        let y = b.build_float_add(y, b.build_float_mul(dk, ln2_hi, "")?, "")?;
        // |x| < 2^-24: x; +inf: +inf; x <= -1: -inf at -1, NaN below; NaN: NaN.
        let a = self.float_intrinsic("llvm.fabs", &[x])?;
        let tiny =
            b.build_float_compare(FloatPredicate::OLT, a, f(f32::from_bits(0x3380_0000)), "")?;
        let y = fsel(tiny, x, y)?;
        let inf = b.build_float_compare(FloatPredicate::OEQ, x, f(f32::INFINITY), "")?;
        let y = fsel(inf, x, y)?;
        let minus_one = b.build_float_compare(FloatPredicate::OEQ, x, f(-1.0), "")?;
        let below = fsel(minus_one, f(f32::NEG_INFINITY), f(f32::NAN))?;
        let le = b.build_float_compare(FloatPredicate::OLE, x, f(-1.0), "")?;
        let y = fsel(le, below, y)?;
        let nan = b.build_float_compare(FloatPredicate::UNO, x, x, "")?;
        fsel(nan, f(f32::NAN), y)
    }

    /// `reduce_precision` of an `f32` to `spec`'s exponent and mantissa bits, on the bits as
    /// [`ReducePrecisionSpec::apply_bits`] does it (XLA's algorithm: round the mantissa to
    /// nearest even, then saturate an exponent above the target range to infinity and flush
    /// one below it to zero, keeping the sign; a NaN passes unchanged). `u32` wrapping
    /// arithmetic, so the vectorizer keeps it.
    pub(crate) fn reduce_precision_f32(
        &self,
        x: FloatValue<'ctx>,
        spec: &ReducePrecisionSpec,
    ) -> Result<FloatValue<'ctx>, LowerError> {
        let b = self.b;
        let i32t = self.ctx.i32_type();
        let c = |v: u32| i32t.const_int(u64::from(v), false);
        const SIGN: u32 = 1 << 31;
        const EXP_MASK: u32 = 0xff << 23;
        let bits = b.build_bit_cast(x, i32t, "")?.into_int_value();
        let magnitude = b.build_and(bits, c(!SIGN), "")?;
        let is_nan = b.build_int_compare(IntPredicate::UGT, magnitude, c(EXP_MASK), "")?;
        let mut v = bits;
        let (e_bits, m_bits) = (spec.exponent_bits, spec.mantissa_bits);
        if m_bits < 23 {
            let shift = 23 - m_bits;
            let last = 1u32 << shift;
            let base_bias = (last >> 1).wrapping_sub(1);
            let lsb = b.build_right_shift(b.build_and(v, c(last), "")?, c(shift), false, "")?;
            let bias = b.build_int_add(lsb, c(base_bias), "")?;
            v = b.build_and(b.build_int_add(v, bias, "")?, c(!(last - 1)), "")?;
        }
        if e_bits < 8 {
            let bias = 127u32;
            let reduced_bias = (1u32 << (e_bits - 1)) - 1;
            let max_exp = (bias + reduced_bias) << 23;
            let min_exp = (bias - reduced_bias) << 23;
            let e = b.build_and(v, c(EXP_MASK), "")?;
            let zero = b.build_and(v, c(SIGN), "")?;
            let inf = b.build_or(zero, c(EXP_MASK), "")?;
            let over = b.build_int_compare(IntPredicate::UGT, e, c(max_exp), "")?;
            v = b.build_select(over, inf, v, "")?.into_int_value();
            let under = b.build_int_compare(IntPredicate::ULE, e, c(min_exp), "")?;
            v = b.build_select(under, zero, v, "")?.into_int_value();
        }
        let v = b.build_select(is_nan, bits, v, "")?.into_int_value();
        Ok(b.build_bit_cast(v, self.ctx.f32_type(), "")?
            .into_float_value())
    }
}
