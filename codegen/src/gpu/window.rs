//! The window kernels: `reduce_window` and `select_and_scatter` with a monoid body (the
//! reference: `ebb_runtime` `exec/reduce.rs`, `Windows`).
//!
//! Window geometry per dimension `d`: output position `o`, window position `w` reach the
//! (base-dilated, padded) input position `p = o·stride + w·wdil - pad`, an input element when
//! `p ≥ 0`, `bdil` divides `p` and `p / bdil < in`, padding otherwise.
//!
//! **reduce_window**: one thread per result element; the accumulator starts at the init value
//! and combines the window's elements in row-major window order, padding contributing the
//! init value (`combine` of `exec/reduce.rs`: floats through `f64`, integers wrapping).
//!
//! **select_and_scatter** (`compare` select body, monoid scatter body): one thread per
//! operand element `c`, starting at the init value; it visits the source windows containing
//! `c` in increasing source order (window positions in reverse row-major order), selects each
//! window's element as the reference does (the first valid position, kept while
//! `compare(current, candidate)` holds), and where that is `c` combines the source element in.
//! Each operand element thus receives its source elements in the reference's order.
//!
//! Params (both): `n`, `nwin` (window elements), then per dimension `(out, in, win, stride,
//! wdil, bdil, pad, istride)`. Buffers: reduce_window: input, init, result; select_and_scatter:
//! operand, source, init, result.

use super::reduce::ReduceOp;
#[cfg(feature = "llvm")]
use super::{entry_alloca, for_range};
#[cfg(feature = "llvm")]
use crate::lower::{Emit, LowerError};
use ebb_ir::{DType, Relation};
#[cfg(feature = "llvm")]
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue, PointerValue};
#[cfg(feature = "llvm")]
use inkwell::{FloatPredicate, IntPredicate};

/// A window kernel's structure (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WindowKernel {
    /// Element type.
    pub dtype: DType,
    /// Rank.
    pub rank: u8,
    /// The combiner (of the reduction, or of the scatter).
    pub op: ReduceOp,
    /// `select_and_scatter`'s select: `compare(current, candidate)` in this direction (partial
    /// order); `None` for `reduce_window`.
    pub select: Option<Relation>,
}

/// Element types the window kernels implement.
pub fn window_supported(d: DType, op: ReduceOp) -> bool {
    match d {
        DType::F32 => !matches!(op, ReduceOp::And | ReduceOp::Or),
        DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::U32 | DType::U64 => {
            true
        }
        _ => false,
    }
}

impl WindowKernel {
    /// Number of buffers.
    pub fn buffers(&self) -> usize {
        if self.select.is_some() {
            4
        } else {
            3
        }
    }

    /// Number of `i64` parameters.
    pub fn params(&self) -> usize {
        2 + 8 * self.rank as usize
    }
}

#[cfg(feature = "llvm")]
impl WindowKernel {
    /// `combine(op, a, v)` of `exec/reduce.rs`.
    fn comb<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        a: BasicValueEnum<'ctx>,
        v: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, LowerError> {
        let b = e.b;
        if self.dtype == DType::F32 {
            let (x, y) = (a.into_float_value(), v.into_float_value());
            return Ok(match self.op {
                // Through f64 and back: the correctly rounded f32 result.
                ReduceOp::Add => b.build_float_add(x, y, "")?.into(),
                ReduceOp::Mul => b.build_float_mul(x, y, "")?.into(),
                ReduceOp::Max | ReduceOp::Min => {
                    let pred = if self.op == ReduceOp::Max {
                        FloatPredicate::OGT
                    } else {
                        FloatPredicate::OLT
                    };
                    let take = b.build_float_compare(pred, y, x, "")?;
                    let r = b.build_select(take, y, x, "")?.into_float_value();
                    let nan = b.build_float_compare(FloatPredicate::UNO, x, y, "")?;
                    b.build_select(nan, x.get_type().const_float(f64::NAN), r, "")?
                }
                _ => return Err(LowerError::Other("a logical reduction of f32".into())),
            });
        }
        let (x, y) = (a.into_int_value(), v.into_int_value());
        let signed = !matches!(self.dtype, DType::U8 | DType::U32 | DType::U64);
        Ok(match self.op {
            ReduceOp::And => b.build_and(x, y, "")?.into(),
            ReduceOp::Or => b.build_or(x, y, "")?.into(),
            ReduceOp::Add => b.build_int_add(x, y, "")?.into(),
            ReduceOp::Mul => b.build_int_mul(x, y, "")?.into(),
            ReduceOp::Max | ReduceOp::Min => {
                let pred = match (self.op == ReduceOp::Max, signed) {
                    (true, true) => IntPredicate::SGT,
                    (true, false) => IntPredicate::UGT,
                    (false, true) => IntPredicate::SLT,
                    (false, false) => IntPredicate::ULT,
                };
                let c = b.build_int_compare(pred, x, y, "")?;
                b.build_select(c, x, y, "")?
            }
        })
    }

    fn dim<'ctx>(params: &[IntValue<'ctx>], d: usize, j: usize) -> IntValue<'ctx> {
        params[2 + 8 * d + j]
    }

    /// The input offset of window position `wi` (row-major over the windows) of output
    /// coordinates `o`, and whether it is an input element.
    fn position<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        params: &[IntValue<'ctx>],
        o: &[IntValue<'ctx>],
        wi: IntValue<'ctx>,
    ) -> Result<(IntValue<'ctx>, IntValue<'ctx>), LowerError> {
        let b = e.b;
        let i64t = e.ctx.i64_type();
        let zero = i64t.const_zero();
        let (mut rem, mut off) = (wi, zero);
        let mut valid = e.ctx.bool_type().const_int(1, false);
        for d in (0..self.rank as usize).rev() {
            let p = |j| Self::dim(params, d, j);
            let (input, win, stride, wdil, bdil, pad, ist) =
                (p(1), p(2), p(3), p(4), p(5), p(6), p(7));
            let w = b.build_int_unsigned_rem(rem, win, "")?;
            rem = b.build_int_unsigned_div(rem, win, "")?;
            let (real, at) = super::window_tap(b, o[d], stride, w, wdil, pad, bdil, input)?;
            valid = b.build_and(valid, real, "")?;
            off = b.build_int_add(off, b.build_int_mul(at, ist, "")?, "")?;
        }
        let off = b.build_select(valid, off, zero, "")?.into_int_value();
        Ok((off, valid))
    }

    pub(crate) fn element<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        f: FunctionValue<'ctx>,
        bufs: &[PointerValue<'ctx>],
        params: &[IntValue<'ctx>],
        i: IntValue<'ctx>,
    ) -> Result<(), LowerError> {
        match self.select {
            None => self.reduce_window(e, f, bufs, params, i),
            Some(dir) => self.select_and_scatter(e, f, bufs, params, i, dir),
        }
    }

    fn reduce_window<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        f: FunctionValue<'ctx>,
        bufs: &[PointerValue<'ctx>],
        params: &[IntValue<'ctx>],
        i: IntValue<'ctx>,
    ) -> Result<(), LowerError> {
        let b = e.b;
        let i64t = e.ctx.i64_type();
        let zero = i64t.const_zero();
        let mut o = vec![zero; self.rank as usize];
        let mut rem = i;
        for d in (0..self.rank as usize).rev() {
            let out = Self::dim(params, d, 0);
            o[d] = b.build_int_unsigned_rem(rem, out, "")?;
            rem = b.build_int_unsigned_div(rem, out, "")?;
        }
        let init = e.load(self.dtype, bufs[1], zero)?;
        let acc = entry_alloca(e, f, init.get_type())?;
        b.build_store(acc, init)?;
        for_range(e, f, zero, params[1], |wi| {
            let (off, valid) = self.position(e, params, &o, wi)?;
            let x = e.load(self.dtype, bufs[0], off)?;
            let v = b.build_select(valid, x, init, "")?;
            let a = b.build_load(init.get_type(), acc, "")?;
            b.build_store(acc, self.comb(e, a, v)?)?;
            Ok(())
        })?;
        let a = b.build_load(init.get_type(), acc, "")?;
        e.store(self.dtype, bufs[2], i, a)
    }

    fn select_and_scatter<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        f: FunctionValue<'ctx>,
        bufs: &[PointerValue<'ctx>],
        params: &[IntValue<'ctx>],
        c: IntValue<'ctx>,
        dir: Relation,
    ) -> Result<(), LowerError> {
        let b = e.b;
        let i64t = e.ctx.i64_type();
        let zero = i64t.const_zero();
        let one = i64t.const_int(1, false);
        let r = self.rank as usize;
        // Operand coordinates of `c` (row-major over the operand's extents).
        let mut x = vec![zero; r];
        let mut rem = c;
        for d in (0..r).rev() {
            let input = Self::dim(params, d, 1);
            x[d] = b.build_int_unsigned_rem(rem, input, "")?;
            rem = b.build_int_unsigned_div(rem, input, "")?;
        }
        let init = e.load(self.dtype, bufs[2], zero)?;
        let ty = init.get_type();
        let acc = entry_alloca(e, f, ty)?;
        b.build_store(acc, init)?;
        let nwin = params[1];
        let o_arr_ty = i64t.array_type(r.max(1) as u32);
        let o_arr = entry_alloca(e, f, o_arr_ty.into())?;
        let chosen = entry_alloca(e, f, i64t.into())?;
        let have = entry_alloca(e, f, i64t.into())?;
        // Windows containing `c`, in increasing source order: window positions backwards.
        for_range(e, f, zero, nwin, |k| {
            let wi = b.build_int_sub(b.build_int_sub(nwin, one, "")?, k, "")?;
            let mut rem = wi;
            let mut ok = e.ctx.bool_type().const_int(1, false);
            let mut o = vec![zero; r];
            let mut src = zero;
            for d in (0..r).rev() {
                let p = |j| Self::dim(params, d, j);
                let (out, win, stride, wdil, bdil, pad) = (p(0), p(2), p(3), p(4), p(5), p(6));
                let w = b.build_int_unsigned_rem(rem, win, "")?;
                rem = b.build_int_unsigned_div(rem, win, "")?;
                // o·stride = x·bdil + pad - w·wdil
                let t = b.build_int_sub(
                    b.build_int_add(b.build_int_mul(x[d], bdil, "")?, pad, "")?,
                    b.build_int_mul(w, wdil, "")?,
                    "",
                )?;
                let (real, od) = super::grid_coordinate(b, t, stride, out)?;
                ok = b.build_and(ok, real, "")?;
                o[d] = od;
            }
            for d in 0..r {
                let out = Self::dim(params, d, 0);
                src = b.build_int_add(b.build_int_mul(src, out, "")?, o[d], "")?;
            }
            let then = e.ctx.append_basic_block(f, "window");
            let done = e.ctx.append_basic_block(f, "window.done");
            b.build_conditional_branch(ok, then, done)?;
            b.position_at_end(then);
            for (d, &od) in o.iter().enumerate() {
                // SAFETY: d < r, the array's length.
                let slot = unsafe {
                    b.build_in_bounds_gep(
                        o_arr_ty,
                        o_arr,
                        &[zero, i64t.const_int(d as u64, false)],
                        "",
                    )?
                };
                b.build_store(slot, od)?;
            }
            // The window's selected position.
            b.build_store(have, zero)?;
            b.build_store(chosen, zero)?;
            let ov: Vec<IntValue> = (0..r)
                .map(|d| {
                    // SAFETY: as above.
                    let slot = unsafe {
                        b.build_in_bounds_gep(
                            o_arr_ty,
                            o_arr,
                            &[zero, i64t.const_int(d as u64, false)],
                            "",
                        )
                    }?;
                    Ok(b.build_load(i64t, slot, "")?.into_int_value())
                })
                .collect::<Result<_, LowerError>>()?;
            for_range(e, f, zero, nwin, |wj| {
                let (off, valid) = self.position(e, params, &ov, wj)?;
                let h = b.build_load(i64t, have, "")?.into_int_value();
                let first = b.build_int_compare(IntPredicate::EQ, h, zero, "")?;
                let cur = b.build_load(i64t, chosen, "")?.into_int_value();
                let a = e.load(self.dtype, bufs[0], cur)?;
                let cand = e.load(self.dtype, bufs[0], off)?;
                let keep = e.compare(dir, self.dtype, a, cand)?.into_int_value();
                // valid: take it when first, else unless `compare(current, candidate)`.
                let take = b.build_or(first, b.build_not(keep, "")?, "")?;
                let take = b.build_and(valid, take, "")?;
                let next = b.build_select(take, off, cur, "")?.into_int_value();
                b.build_store(chosen, next)?;
                let h2 = b.build_select(valid, one, h, "")?.into_int_value();
                b.build_store(have, h2)?;
                Ok(())
            })?;
            let h = b.build_load(i64t, have, "")?.into_int_value();
            let cur = b.build_load(i64t, chosen, "")?.into_int_value();
            let hit = b.build_and(
                b.build_int_compare(IntPredicate::NE, h, zero, "")?,
                b.build_int_compare(IntPredicate::EQ, cur, c, "")?,
                "",
            )?;
            let s = e.load(self.dtype, bufs[1], src)?;
            let a = b.build_load(ty, acc, "")?;
            let n = self.comb(e, a, s)?;
            let v = b.build_select(hit, n, a, "")?;
            b.build_store(acc, v)?;
            b.build_unconditional_branch(done)?;
            b.position_at_end(done);
            Ok(())
        })?;
        let a = b.build_load(ty, acc, "")?;
        e.store(self.dtype, bufs[3], c, a)
    }
}
