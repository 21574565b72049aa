//! `f32` `log`, `exp` (for `logistic`) and `power` for the GPU, where no libm exists: each is
//! computed in `f64` and rounded once to `f32`, so the result is the correctly rounded one
//! except when the exact value lies within about 2^-50 relative of a rounding boundary.
//!
//! - `log(m·2^e) = e·ln2 + 2·atanh(s)`, `s = (m - 1)/(m + 1)`, `m ∈ [√½, √2)`: the series
//!   `2s(1 + s²/3 + s⁴/5 + …)` to `s²⁴/25` (`|s| ≤ 0.172`, truncation below 2^-60);
//!   `ln2` split in a high part with 32 trailing zero bits (fdlibm's `ln2_hi`/`ln2_lo`), so
//!   `e·ln2_hi` is exact.
//! - `exp(t) = 2^n·e^r`, `n = round(t/ln2)`, `r = t - n·ln2` (`|r| ≤ 0.347`): Taylor series to
//!   degree 13 (truncation below 2^-57), `2^n` as two normal powers of two.
//! - `pow(x, y) = exp(y·log|x|)` with the special cases of C99 Annex F (`powf`).
//!
//! The host reference uses the C library (`logf`, `expf`, `powf`), which agrees with the
//! correctly rounded result on all but rare inputs: the simt tests state the tolerance.

use crate::lower::{Emit, LowerError};
use inkwell::values::{FloatValue, IntValue};
use inkwell::{FloatPredicate, IntPredicate};

const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;

impl<'ctx> Emit<'_, 'ctx> {
    fn f64c(&self, v: f64) -> FloatValue<'ctx> {
        self.ctx.f64_type().const_float(v)
    }

    fn f64_intrinsic(
        &self,
        name: &str,
        args: &[FloatValue<'ctx>],
    ) -> Result<FloatValue<'ctx>, LowerError> {
        let args: Vec<_> = args.iter().map(|&a| a.into()).collect();
        Ok(self
            .intrinsic(name, &[self.ctx.f64_type().into()], &args)?
            .into_float_value())
    }

    /// `ln d` for a positive, finite, normal `f64` `d` (see the module docs).
    fn log_f64(&self, d: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, LowerError> {
        let b = self.b;
        let i64t = self.ctx.i64_type();
        let f64t = self.ctx.f64_type();
        let c = |v: u64| i64t.const_int(v, false);
        let bits = b.build_bit_cast(d, i64t, "")?.into_int_value();
        let e = b.build_int_sub(b.build_right_shift(bits, c(52), false, "")?, c(1023), "")?;
        let mbits = b.build_or(
            b.build_and(bits, c(0x000f_ffff_ffff_ffff), "")?,
            c(0x3ff0_0000_0000_0000),
            "",
        )?;
        let m = b.build_bit_cast(mbits, f64t, "")?.into_float_value();
        let big = b.build_float_compare(
            FloatPredicate::OGT,
            m,
            self.f64c(std::f64::consts::SQRT_2),
            "",
        )?;
        let m = b
            .build_select(big, b.build_float_mul(m, self.f64c(0.5), "")?, m, "")?
            .into_float_value();
        let e = b
            .build_select(big, b.build_int_add(e, c(1), "")?, e, "")?
            .into_int_value();
        let s = b.build_float_div(
            b.build_float_sub(m, self.f64c(1.0), "")?,
            b.build_float_add(m, self.f64c(1.0), "")?,
            "",
        )?;
        let z = b.build_float_mul(s, s, "")?;
        let mut p = self.f64c(1.0 / 25.0);
        for k in (0..12).rev() {
            p = b.build_float_add(
                b.build_float_mul(p, z, "")?,
                self.f64c(1.0 / f64::from(2 * k + 1)),
                "",
            )?;
        }
        let logm = b.build_float_mul(b.build_float_mul(self.f64c(2.0), s, "")?, p, "")?;
        let ef = b.build_signed_int_to_float(e, f64t, "")?;
        let lo = b.build_float_add(b.build_float_mul(ef, self.f64c(LN2_LO), "")?, logm, "")?;
        Ok(b.build_float_add(b.build_float_mul(ef, self.f64c(LN2_HI), "")?, lo, "")?)
    }

    /// `e^t` for an `f64` `t` in `[-800, 800]` (overflows to infinity, underflows to 0).
    fn exp_f64(&self, t: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, LowerError> {
        let b = self.b;
        let i64t = self.ctx.i64_type();
        let f64t = self.ctx.f64_type();
        let n = self.f64_intrinsic(
            "llvm.roundeven",
            &[b.build_float_mul(t, self.f64c(std::f64::consts::LOG2_E), "")?],
        )?;
        let r = b.build_float_sub(t, b.build_float_mul(n, self.f64c(LN2_HI), "")?, "")?;
        let r = b.build_float_sub(r, b.build_float_mul(n, self.f64c(LN2_LO), "")?, "")?;
        let mut fact = [1.0f64; 14];
        for k in 1..14 {
            fact[k] = fact[k - 1] * k as f64;
        }
        let mut p = self.f64c(1.0 / fact[13]);
        for k in (0..13).rev() {
            p = b.build_float_add(b.build_float_mul(p, r, "")?, self.f64c(1.0 / fact[k]), "")?;
        }
        let ni = b.build_float_to_signed_int(n, i64t, "")?;
        let h = b.build_right_shift(ni, i64t.const_int(1, false), true, "")?;
        let pow2 = |e: IntValue<'ctx>| -> Result<FloatValue<'ctx>, LowerError> {
            let bits = b.build_left_shift(
                b.build_int_add(e, i64t.const_int(1023, false), "")?,
                i64t.const_int(52, false),
                "",
            )?;
            Ok(b.build_bit_cast(bits, f64t, "")?.into_float_value())
        };
        let p = b.build_float_mul(p, pow2(h)?, "")?;
        Ok(b.build_float_mul(p, pow2(b.build_int_sub(ni, h, "")?)?, "")?)
    }

    fn clamp_f64(
        &self,
        t: FloatValue<'ctx>,
        lo: f64,
        hi: f64,
    ) -> Result<FloatValue<'ctx>, LowerError> {
        let t = self.f64_intrinsic("llvm.maxnum", &[t, self.f64c(lo)])?;
        self.f64_intrinsic("llvm.minnum", &[t, self.f64c(hi)])
    }

    /// `ln x` of an `f32` (NaN and negative: NaN; ±0: -∞; +∞: +∞).
    pub(crate) fn log_f32_gpu(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, LowerError> {
        let b = self.b;
        let f = self.f32c();
        let d = b.build_float_ext(x, self.ctx.f64_type(), "")?;
        // A stand-in for the special inputs keeps the core on positive finite values.
        let normal = b.build_float_compare(FloatPredicate::OGT, x, f(0.0), "")?;
        let finite = b.build_float_compare(FloatPredicate::OLT, x, f(f32::INFINITY), "")?;
        let ok = b.build_and(normal, finite, "")?;
        let d = b
            .build_select(ok, d, self.f64c(1.0), "")?
            .into_float_value();
        let r = b.build_float_trunc(self.log_f64(d)?, self.ctx.f32_type(), "")?;
        let inf = b.build_float_compare(FloatPredicate::OEQ, x, f(f32::INFINITY), "")?;
        let r = b
            .build_select(inf, f(f32::INFINITY), r, "")?
            .into_float_value();
        let zero = b.build_float_compare(FloatPredicate::OEQ, x, f(0.0), "")?;
        let r = b
            .build_select(zero, f(f32::NEG_INFINITY), r, "")?
            .into_float_value();
        let nan = b.build_float_compare(FloatPredicate::ULT, x, f(0.0), "")?;
        Ok(b.build_select(nan, f(f32::NAN), r, "")?.into_float_value())
    }

    /// `e^x` of an `f32`, correctly rounded but for rare inputs (NaN stays NaN).
    pub(crate) fn expf_gpu(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, LowerError> {
        let b = self.b;
        let d = b.build_float_ext(x, self.ctx.f64_type(), "")?;
        let t = self.clamp_f64(d, -800.0, 800.0)?;
        let r = b.build_float_trunc(self.exp_f64(t)?, self.ctx.f32_type(), "")?;
        let nan = b.build_float_compare(FloatPredicate::UNO, x, x, "")?;
        Ok(b.build_select(nan, x, r, "")?.into_float_value())
    }

    /// `x^y` of `f32`s with C99's special cases (see the module docs).
    pub(crate) fn pow_f32_gpu(
        &self,
        x: FloatValue<'ctx>,
        y: FloatValue<'ctx>,
    ) -> Result<FloatValue<'ctx>, LowerError> {
        let b = self.b;
        let f = self.f32c();
        let f64t = self.ctx.f64_type();
        let i32t = self.ctx.i32_type();
        let cmp = |p, u, v| b.build_float_compare(p, u, v, "");
        let sel =
            |c, u: FloatValue<'ctx>, v: FloatValue<'ctx>| -> Result<FloatValue<'ctx>, LowerError> {
                Ok(b.build_select(c, u, v, "")?.into_float_value())
            };
        let ax = self.float_intrinsic("llvm.fabs", &[x])?;
        let ay = self.float_intrinsic("llvm.fabs", &[y])?;
        // y an integer, and an odd one (every float of magnitude >= 2^24 is even).
        let y_int = cmp(
            FloatPredicate::OEQ,
            self.float_intrinsic("llvm.floor", &[y])?,
            y,
        )?;
        let small = cmp(FloatPredicate::OLT, ay, f(16_777_216.0))?;
        let ys = sel(small, y, f(0.0))?;
        let yi = b.build_float_to_signed_int(ys, i32t, "")?;
        let odd_bit = b.build_and(yi, i32t.const_int(1, false), "")?;
        let odd = b.build_int_compare(IntPredicate::NE, odd_bit, i32t.const_zero(), "")?;
        let odd = b.build_and(b.build_and(odd, small, "")?, y_int, "")?;
        // |x|^y for a positive finite |x|.
        let finite = cmp(FloatPredicate::OLT, ax, f(f32::INFINITY))?;
        let pos = cmp(FloatPredicate::OGT, ax, f(0.0))?;
        let core_ok = b.build_and(finite, pos, "")?;
        let d = b.build_float_ext(ax, f64t, "")?;
        let d = sel(core_ok, d, self.f64c(1.0))?;
        let t = b.build_float_mul(b.build_float_ext(y, f64t, "")?, self.log_f64(d)?, "")?;
        let t = self.clamp_f64(t, -800.0, 800.0)?;
        let mag = b.build_float_trunc(self.exp_f64(t)?, self.ctx.f32_type(), "")?;
        // |x| = ∞ or 0: ∞ or 0 by the sign of y.
        let ypos = cmp(FloatPredicate::OGT, y, f(0.0))?;
        let big = sel(ypos, f(f32::INFINITY), f(0.0))?;
        let tiny = sel(ypos, f(0.0), f(f32::INFINITY))?;
        let mag = sel(finite, mag, big)?;
        let zero = cmp(FloatPredicate::OEQ, ax, f(0.0))?;
        let mag = sel(zero, tiny, mag)?;
        // |x| = 1 and y = ±∞: 1.
        let one = cmp(FloatPredicate::OEQ, ax, f(1.0))?;
        let yinf = cmp(FloatPredicate::OEQ, ay, f(f32::INFINITY))?;
        let mag = sel(b.build_and(one, yinf, "")?, f(1.0), mag)?;
        // The sign of x for an odd integer y; NaN for a finite negative x and a non-integer y.
        let i32x = b.build_bit_cast(x, i32t, "")?.into_int_value();
        let neg = b.build_int_compare(IntPredicate::SLT, i32x, i32t.const_zero(), "")?;
        let flip = b.build_and(neg, odd, "")?;
        let r = sel(flip, b.build_float_neg(mag, "")?, mag)?;
        let xneg = cmp(FloatPredicate::OLT, x, f(0.0))?;
        let bad = b.build_and(b.build_and(xneg, finite, "")?, b.build_not(y_int, "")?, "")?;
        let r = sel(bad, f(f32::NAN), r)?;
        let nan = b.build_or(
            cmp(FloatPredicate::UNO, x, x)?,
            cmp(FloatPredicate::UNO, y, y)?,
            "",
        )?;
        let r = sel(nan, f(f32::NAN), r)?;
        let unit = b.build_or(
            cmp(FloatPredicate::OEQ, y, f(0.0))?,
            cmp(FloatPredicate::OEQ, x, f(1.0))?,
            "",
        )?;
        sel(unit, f(1.0), r)
    }
}
