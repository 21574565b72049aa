//! The reduce kernel: one thread per result element of a `reduce` with a monoid body, folding
//! its inputs in exactly the reference executor's order (`ebb_runtime` `exec/reduce.rs`).
//!
//! The caller merges adjacent dimensions of the same kind and drops unit ones (the
//! reference's `merge`), giving kept dimensions, reduced dimensions and whether the innermost
//! merged dimension is reduced. Result element `o` (row-major over the kept dimensions)
//! starts from the init value, lifted; the reduced coordinates are walked in row-major order,
//! and each contributes either its element (innermost dimension kept) or the fold of the
//! contiguous row of `row_len` elements there (innermost reduced), combined into the
//! accumulator. A row is folded as the reference's `fold_row`: in order when shorter than 16,
//! otherwise in eight interleaved lanes, the lanes pairwise, then the tail in order. `f32`
//! and `bf16` sums and products accumulate in `f64` and round once (`bf16` through
//! `half`'s `from_f64`); `maximum`/`minimum` propagate NaN; integers wrap; booleans reduce by
//! `and`/`or`.
//!
//! Buffers: input, init value (one element), result. Params: `n` (result elements),
//! `(ext, stride)` per kept dimension, `(ext, stride)` per reduced outer dimension (strides in
//! input elements), `row_len`.

#[cfg(feature = "llvm")]
use crate::lower::{Emit, LowerError};
use ebb_ir::DType;
#[cfg(feature = "llvm")]
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue, PointerValue};
#[cfg(feature = "llvm")]
use inkwell::{FloatPredicate, IntPredicate};

/// The combiner of a reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// `add`.
    Add,
    /// `multiply`.
    Mul,
    /// `maximum`.
    Max,
    /// `minimum`.
    Min,
    /// `and`.
    And,
    /// `or`.
    Or,
}

/// A reduce kernel's structure (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReduceKernel {
    /// Element type of input, init and result.
    pub dtype: DType,
    /// The combiner.
    pub op: ReduceOp,
    /// Merged kept dimensions.
    pub kept: u8,
    /// Merged reduced dimensions other than a reduced innermost one.
    pub reduced: u8,
    /// Whether the innermost merged dimension is reduced (folded as rows).
    pub inner: bool,
}

/// Element types the reduce kernel implements.
pub fn reduce_supported(d: DType, op: ReduceOp) -> bool {
    match d {
        DType::F32 | DType::BF16 => !matches!(op, ReduceOp::And | ReduceOp::Or),
        DType::I1
        | DType::I8
        | DType::I16
        | DType::I32
        | DType::I64
        | DType::U8
        | DType::U32
        | DType::U64 => true,
        _ => false,
    }
}

impl ReduceKernel {
    /// Number of `i64` parameters.
    pub fn params(&self) -> usize {
        2 + 2 * (self.kept as usize + self.reduced as usize)
    }
}

#[cfg(feature = "llvm")]
impl ReduceKernel {
    fn float(&self) -> bool {
        matches!(self.dtype, DType::F32 | DType::BF16)
    }

    fn wide(&self) -> bool {
        self.float() && matches!(self.op, ReduceOp::Add | ReduceOp::Mul)
    }

    /// Element `i` of the input at `x[off]`, lifted to the accumulator type.
    fn lift<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        x: PointerValue<'ctx>,
        off: IntValue<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, LowerError> {
        let v = e.load(self.dtype, x, off)?;
        Ok(if self.wide() {
            e.b.build_float_ext(v.into_float_value(), e.ctx.f64_type(), "")?
                .into()
        } else {
            v
        })
    }

    fn comb<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        a: BasicValueEnum<'ctx>,
        v: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, LowerError> {
        let b = e.b;
        if self.float() {
            let (x, y) = (a.into_float_value(), v.into_float_value());
            return Ok(match self.op {
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
                    let q = x.get_type().const_float(f64::NAN);
                    b.build_select(nan, q, r, "")?
                }
                ReduceOp::And | ReduceOp::Or => {
                    return Err(LowerError::Other("a logical reduction of f32".into()))
                }
            });
        }
        let (x, y) = (a.into_int_value(), v.into_int_value());
        let boolean = self.dtype == DType::I1;
        let signed = !matches!(self.dtype, DType::U8 | DType::U32 | DType::U64 | DType::I1);
        Ok(match self.op {
            ReduceOp::And => b.build_and(x, y, "")?.into(),
            ReduceOp::Or => b.build_or(x, y, "")?.into(),
            ReduceOp::Add | ReduceOp::Max if boolean => b.build_or(x, y, "")?.into(),
            ReduceOp::Mul | ReduceOp::Min if boolean => b.build_and(x, y, "")?.into(),
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

    /// Emits the fold of the row of `len` elements at `x[off]` into the accumulator `acc`.
    fn fold_row<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        f: FunctionValue<'ctx>,
        x: PointerValue<'ctx>,
        off: IntValue<'ctx>,
        len: IntValue<'ctx>,
        acc: PointerValue<'ctx>,
        acc_ty: inkwell::types::BasicTypeEnum<'ctx>,
    ) -> Result<(), LowerError> {
        let b = e.b;
        let i64t = e.ctx.i64_type();
        let c = |v: u64| i64t.const_int(v, false);
        let at = |j: IntValue<'ctx>| b.build_int_add(off, j, "");
        let row = super::entry_alloca(e, f, acc_ty)?;
        let short = b.build_int_compare(IntPredicate::SLT, len, c(16), "")?;
        let (s_bb, l_bb, done) = (
            e.ctx.append_basic_block(f, "row.short"),
            e.ctx.append_basic_block(f, "row.lanes"),
            e.ctx.append_basic_block(f, "row.done"),
        );
        b.build_conditional_branch(short, s_bb, l_bb)?;
        // In order.
        b.position_at_end(s_bb);
        b.build_store(row, self.lift(e, x, off)?)?;
        super::for_range(e, f, c(1), len, |j| {
            let a = b.build_load(acc_ty, row, "")?;
            b.build_store(row, self.comb(e, a, self.lift(e, x, at(j)?)?)?)?;
            Ok(())
        })?;
        b.build_unconditional_branch(done)?;
        // Eight lanes.
        b.position_at_end(l_bb);
        let lanes: Vec<PointerValue> = (0..8)
            .map(|_| super::entry_alloca(e, f, acc_ty))
            .collect::<Result<_, _>>()?;
        for (j, lane) in lanes.iter().enumerate() {
            b.build_store(*lane, self.lift(e, x, at(c(j as u64))?)?)?;
        }
        let full = b.build_int_unsigned_div(b.build_int_sub(len, c(8), "")?, c(8), "")?;
        super::for_range(e, f, c(0), full, |k| {
            let base = b.build_int_add(c(8), b.build_int_mul(k, c(8), "")?, "")?;
            for (j, lane) in lanes.iter().enumerate() {
                let a = b.build_load(acc_ty, *lane, "")?;
                let v = self.lift(e, x, at(b.build_int_add(base, c(j as u64), "")?)?)?;
                b.build_store(*lane, self.comb(e, a, v)?)?;
            }
            Ok(())
        })?;
        let l: Vec<BasicValueEnum> = lanes
            .iter()
            .map(|p| b.build_load(acc_ty, *p, ""))
            .collect::<Result<_, _>>()?;
        let q0 = self.comb(e, l[0], l[1])?;
        let q1 = self.comb(e, l[2], l[3])?;
        let q2 = self.comb(e, l[4], l[5])?;
        let q3 = self.comb(e, l[6], l[7])?;
        let r = self.comb(e, self.comb(e, q0, q1)?, self.comb(e, q2, q3)?)?;
        b.build_store(row, r)?;
        let tail = b.build_int_add(c(8), b.build_int_mul(full, c(8), "")?, "")?;
        super::for_range(e, f, tail, len, |j| {
            let a = b.build_load(acc_ty, row, "")?;
            b.build_store(row, self.comb(e, a, self.lift(e, x, at(j)?)?)?)?;
            Ok(())
        })?;
        b.build_unconditional_branch(done)?;
        b.position_at_end(done);
        let a = b.build_load(acc_ty, acc, "")?;
        let r = b.build_load(acc_ty, row, "")?;
        b.build_store(acc, self.comb(e, a, r)?)?;
        Ok(())
    }

    /// Emits result element `o`.
    pub(crate) fn element<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        f: FunctionValue<'ctx>,
        bufs: &[PointerValue<'ctx>],
        params: &[IntValue<'ctx>],
        o: IntValue<'ctx>,
    ) -> Result<(), LowerError> {
        let b = e.b;
        let i64t = e.ctx.i64_type();
        let (x, init, out) = (bufs[0], bufs[1], bufs[2]);
        let acc_ty = if self.wide() {
            e.ctx.f64_type().into()
        } else {
            self.lift(e, init, i64t.const_zero())?.get_type()
        };
        let acc = super::entry_alloca(e, f, acc_ty)?;
        b.build_store(acc, self.lift(e, init, i64t.const_zero())?)?;
        // The input offset of `o`'s kept coordinates.
        let kept = self.kept as usize;
        let mut rem = o;
        let mut off = i64t.const_zero();
        for k in (0..kept).rev() {
            let (ext, st) = (params[1 + 2 * k], params[2 + 2 * k]);
            let c = b.build_int_unsigned_rem(rem, ext, "")?;
            rem = b.build_int_unsigned_div(rem, ext, "")?;
            off = b.build_int_add(off, b.build_int_mul(c, st, "")?, "")?;
        }
        let red: Vec<(IntValue, IntValue)> = (0..self.reduced as usize)
            .map(|j| (params[1 + 2 * (kept + j)], params[2 + 2 * (kept + j)]))
            .collect();
        let row_len = params[1 + 2 * (kept + self.reduced as usize)];
        self.walk(e, f, x, off, &red, row_len, acc, acc_ty)?;
        let a = b.build_load(acc_ty, acc, "")?;
        // `T::from_f64` of the `f64` accumulator (`bf16`: `half`'s conversion).
        let r: BasicValueEnum = match (self.wide(), self.dtype) {
            (true, DType::BF16) => e.f64_to_bf16(a.into_float_value())?.into(),
            (true, _) => b
                .build_float_trunc(a.into_float_value(), e.ctx.f32_type(), "")?
                .into(),
            _ => a,
        };
        e.store(self.dtype, out, o, r)
    }

    /// The row-major walk over the reduced dimensions `red` from offset `off`.
    #[allow(clippy::too_many_arguments)]
    fn walk<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        f: FunctionValue<'ctx>,
        x: PointerValue<'ctx>,
        off: IntValue<'ctx>,
        red: &[(IntValue<'ctx>, IntValue<'ctx>)],
        row_len: IntValue<'ctx>,
        acc: PointerValue<'ctx>,
        acc_ty: inkwell::types::BasicTypeEnum<'ctx>,
    ) -> Result<(), LowerError> {
        let b = e.b;
        match red.split_first() {
            Some((&(ext, st), rest)) => {
                let zero = e.ctx.i64_type().const_zero();
                super::for_range(e, f, zero, ext, |r| {
                    let o2 = b.build_int_add(off, b.build_int_mul(r, st, "")?, "")?;
                    self.walk(e, f, x, o2, rest, row_len, acc, acc_ty)
                })
            }
            None if self.inner => self.fold_row(e, f, x, off, row_len, acc, acc_ty),
            None => {
                let a = b.build_load(acc_ty, acc, "")?;
                b.build_store(acc, self.comb(e, a, self.lift(e, x, off)?)?)?;
                Ok(())
            }
        }
    }
}
