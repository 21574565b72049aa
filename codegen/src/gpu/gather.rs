//! The gather and scatter kernels (StableHLO `gather`/`scatter`), with the full dimension
//! numbers folded by the caller into per-dimension strides, so one kernel per rank serves
//! every `GatherDims`/`ScatterDims` (the reference: `ebb_runtime` `exec/gather_scatter.rs`).
//!
//! **Gather**: one thread per result element `o`; its coordinates `c` (row-major over the
//! result's extents) give the index tensor's offset `Σ c_d·istride_d` (batch dimensions) and a
//! part of the operand's `Σ c_d·xstride_d` (window dimensions, operand batching dimensions); the
//! start index vector's components, read at `ioff + j·vec_stride` and clamped to
//! `[0, limit_j]` (the slice fits), add `start_j·xs_j`. Buffers: operand, indices, result.
//! Params: `n`, `(ext, istride, xstride)` per result dimension, `vec_stride`,
//! `(limit, xs)` per index component.
//!
//! **Scatter**: one thread per update-window element `w`, looping over the scatter index
//! space in row-major order, so each result element receives its updates in update order
//! (the reference's order): the caller uses it only where no two window elements of
//! different scatters can meet (every indexed operand dimension has window extent 1), so the
//! threads write disjoint elements. Per scatter index: the operand coordinates (window part,
//! operand batching part, start index components, not clamped), an update out of bounds is
//! skipped (spec), else `x[xo] = x[xo] ⊕ u[uo]` (or `= u[uo]`). Buffers: result (already
//! holding the input), indices, updates. Params: `n` (window elements), `ns` (scatter
//! indices), `(dim, stride)` per operand dimension, `(ext, xdim, ustride)` per window
//! dimension, `(ext, ustride, istride, xdim or -1)` per scatter dimension, `vec_stride`, `xdim`
//! per index component.

use super::reduce::ReduceOp;
#[cfg(feature = "llvm")]
use super::{entry_alloca, for_range};
#[cfg(feature = "llvm")]
use crate::lower::{Emit, LowerError};
use ebb_ir::DType;
#[cfg(feature = "llvm")]
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue, PointerValue};
#[cfg(feature = "llvm")]
use inkwell::{FloatPredicate, IntPredicate};

/// A gather kernel's structure (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GatherKernel {
    /// Bytes per element.
    pub elem_bytes: u8,
    /// Element type of the indices.
    pub index: DType,
    /// Rank of the result.
    pub rank: u8,
    /// Components of a start index vector.
    pub nvec: u8,
}

/// A scatter kernel's structure (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScatterKernel {
    /// Element type of operand and updates.
    pub dtype: DType,
    /// The combiner (`None`: the update replaces the element).
    pub op: Option<ReduceOp>,
    /// Element type of the indices.
    pub index: DType,
    /// Rank of the operand.
    pub rank: u8,
    /// Window dimensions.
    pub window: u8,
    /// Scatter (update, non-window) dimensions.
    pub scatter: u8,
    /// Components of a start index vector.
    pub nvec: u8,
}

/// Element types the scatter kernel combines.
pub fn scatter_supported(d: DType, op: Option<ReduceOp>) -> bool {
    match op {
        None => crate::layout::supported_dtype(d),
        Some(op) => super::reduce::reduce_supported(d, op),
    }
}

#[cfg(feature = "llvm")]
/// Loads one index (as `i64`) of element type `d` at `ptr[at]`.
fn load_index<'ctx>(
    e: &Emit<'_, 'ctx>,
    d: DType,
    ptr: PointerValue<'ctx>,
    at: IntValue<'ctx>,
) -> Result<IntValue<'ctx>, LowerError> {
    let i64t = e.ctx.i64_type();
    let v = e.load(d, ptr, at)?.into_int_value();
    Ok(if d == DType::I1 {
        e.b.build_int_z_extend(v, i64t, "")?
    } else {
        let signed = !matches!(d, DType::U8 | DType::U32 | DType::U64);
        e.b.build_int_cast_sign_flag(v, i64t, signed, "")?
    })
}

#[cfg(feature = "llvm")]
fn int_of<'ctx>(
    e: &Emit<'_, 'ctx>,
    bytes: u8,
) -> Result<inkwell::types::IntType<'ctx>, LowerError> {
    Ok(match bytes {
        1 => e.ctx.i8_type(),
        2 => e.ctx.i16_type(),
        4 => e.ctx.i32_type(),
        8 => e.ctx.i64_type(),
        n => return Err(LowerError::Other(format!("{n}-byte elements"))),
    })
}

impl GatherKernel {
    /// Number of `i64` parameters.
    pub fn params(&self) -> usize {
        2 + 3 * self.rank as usize + 2 * self.nvec as usize
    }
}

#[cfg(feature = "llvm")]
impl GatherKernel {
    pub(crate) fn element<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        bufs: &[PointerValue<'ctx>],
        params: &[IntValue<'ctx>],
        o: IntValue<'ctx>,
    ) -> Result<(), LowerError> {
        let b = e.b;
        let i64t = e.ctx.i64_type();
        let (mut rem, mut ioff, mut xoff) = (o, i64t.const_zero(), i64t.const_zero());
        for d in (0..self.rank as usize).rev() {
            let (ext, is, xs) = (params[1 + 3 * d], params[2 + 3 * d], params[3 + 3 * d]);
            let c = b.build_int_unsigned_rem(rem, ext, "")?;
            rem = b.build_int_unsigned_div(rem, ext, "")?;
            ioff = b.build_int_add(ioff, b.build_int_mul(c, is, "")?, "")?;
            xoff = b.build_int_add(xoff, b.build_int_mul(c, xs, "")?, "")?;
        }
        let first = 1 + 3 * self.rank as usize;
        let vec_stride = params[first];
        for j in 0..self.nvec as usize {
            let (limit, xs) = (params[first + 1 + 2 * j], params[first + 2 + 2 * j]);
            let at = b.build_int_add(
                ioff,
                b.build_int_mul(i64t.const_int(j as u64, false), vec_stride, "")?,
                "",
            )?;
            let v = load_index(e, self.index, bufs[1], at)?;
            let neg = b.build_int_compare(IntPredicate::SLT, v, i64t.const_zero(), "")?;
            let v = b
                .build_select(neg, i64t.const_zero(), v, "")?
                .into_int_value();
            let over = b.build_int_compare(IntPredicate::SGT, v, limit, "")?;
            let v = b.build_select(over, limit, v, "")?.into_int_value();
            xoff = b.build_int_add(xoff, b.build_int_mul(v, xs, "")?, "")?;
        }
        let t = int_of(e, self.elem_bytes)?;
        // SAFETY: the clamped offsets stay inside the operand; `o` inside the result.
        let (ps, pd) = unsafe {
            (
                b.build_gep(t, bufs[0], &[xoff], "")?,
                b.build_gep(t, bufs[2], &[o], "")?,
            )
        };
        b.build_store(pd, b.build_load(t, ps, "")?)?;
        Ok(())
    }
}

impl ScatterKernel {
    /// Number of `i64` parameters.
    pub fn params(&self) -> usize {
        2 + 2 * self.rank as usize
            + 3 * self.window as usize
            + 4 * self.scatter as usize
            + 1
            + self.nvec as usize
    }
}

#[cfg(feature = "llvm")]
impl ScatterKernel {
    fn comb<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        a: BasicValueEnum<'ctx>,
        v: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, LowerError> {
        let b = e.b;
        let Some(op) = self.op else {
            return Ok(v);
        };
        if self.dtype == DType::F32 {
            let (x, y) = (a.into_float_value(), v.into_float_value());
            return Ok(match op {
                ReduceOp::Add => b.build_float_add(x, y, "")?.into(),
                ReduceOp::Mul => b.build_float_mul(x, y, "")?.into(),
                ReduceOp::Max | ReduceOp::Min => {
                    let pred = if op == ReduceOp::Max {
                        FloatPredicate::OGT
                    } else {
                        FloatPredicate::OLT
                    };
                    let take = b.build_float_compare(pred, y, x, "")?;
                    let r = b.build_select(take, y, x, "")?.into_float_value();
                    let nan = b.build_float_compare(FloatPredicate::UNO, x, y, "")?;
                    b.build_select(nan, x.get_type().const_float(f64::NAN), r, "")?
                }
                _ => return Err(LowerError::Other("a logical scatter of f32".into())),
            });
        }
        let (x, y) = (a.into_int_value(), v.into_int_value());
        let boolean = self.dtype == DType::I1;
        let signed = !matches!(self.dtype, DType::U8 | DType::U32 | DType::U64 | DType::I1);
        Ok(match op {
            ReduceOp::And => b.build_and(x, y, "")?.into(),
            ReduceOp::Or => b.build_or(x, y, "")?.into(),
            ReduceOp::Add | ReduceOp::Max if boolean => b.build_or(x, y, "")?.into(),
            ReduceOp::Mul | ReduceOp::Min if boolean => b.build_and(x, y, "")?.into(),
            ReduceOp::Add => b.build_int_add(x, y, "")?.into(),
            ReduceOp::Mul => b.build_int_mul(x, y, "")?.into(),
            ReduceOp::Max | ReduceOp::Min => {
                let pred = match (op == ReduceOp::Max, signed) {
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

    pub(crate) fn element<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        f: FunctionValue<'ctx>,
        bufs: &[PointerValue<'ctx>],
        params: &[IntValue<'ctx>],
        w: IntValue<'ctx>,
    ) -> Result<(), LowerError> {
        let b = e.b;
        let i64t = e.ctx.i64_type();
        let c0 = i64t.const_zero();
        let (xr, nw, ns) = (
            self.rank as usize,
            self.window as usize,
            self.scatter as usize,
        );
        let ns_total = params[1];
        let dim = |d: usize| params[2 + 2 * d];
        let xst = |d: usize| params[3 + 2 * d];
        let wp = 2 + 2 * xr;
        let sp = wp + 3 * nw;
        let vp = sp + 4 * ns;
        // The window element's operand coordinates and update offset.
        let coords_ty = i64t.array_type(xr.max(1) as u32);
        let base = entry_alloca(e, f, coords_ty.into())?;
        let coords = entry_alloca(e, f, coords_ty.into())?;
        let slot = |arr: PointerValue<'ctx>, d: IntValue<'ctx>| {
            // SAFETY: `d` is an operand dimension (< xr) by the caller's parameters.
            unsafe { b.build_in_bounds_gep(coords_ty, arr, &[c0, d], "") }
        };
        for d in 0..xr {
            b.build_store(slot(base, i64t.const_int(d as u64, false))?, c0)?;
        }
        let (mut rem, mut uw) = (w, c0);
        for k in (0..nw).rev() {
            let (ext, xd, us) = (
                params[wp + 3 * k],
                params[wp + 1 + 3 * k],
                params[wp + 2 + 3 * k],
            );
            let c = b.build_int_unsigned_rem(rem, ext, "")?;
            rem = b.build_int_unsigned_div(rem, ext, "")?;
            let p = slot(base, xd)?;
            let old = b.build_load(i64t, p, "")?.into_int_value();
            b.build_store(p, b.build_int_add(old, c, "")?)?;
            uw = b.build_int_add(uw, b.build_int_mul(c, us, "")?, "")?;
        }
        let ety = e.mem_ty(self.dtype);
        for_range(e, f, c0, ns_total, |s| {
            for d in 0..xr {
                let at = i64t.const_int(d as u64, false);
                let v = b.build_load(i64t, slot(base, at)?, "")?;
                b.build_store(slot(coords, at)?, v)?;
            }
            let (mut rem, mut ubase, mut ioff) = (s, uw, c0);
            for k in (0..ns).rev() {
                let (ext, us, is, xd) = (
                    params[sp + 4 * k],
                    params[sp + 1 + 4 * k],
                    params[sp + 2 + 4 * k],
                    params[sp + 3 + 4 * k],
                );
                let c = b.build_int_unsigned_rem(rem, ext, "")?;
                rem = b.build_int_unsigned_div(rem, ext, "")?;
                ubase = b.build_int_add(ubase, b.build_int_mul(c, us, "")?, "")?;
                ioff = b.build_int_add(ioff, b.build_int_mul(c, is, "")?, "")?;
                // An operand batching dimension takes the scatter coordinate (xdim >= 0).
                let batching = b.build_int_compare(IntPredicate::SGE, xd, c0, "")?;
                let xd_safe = b.build_select(batching, xd, c0, "")?.into_int_value();
                let add = b.build_select(batching, c, c0, "")?.into_int_value();
                let p = slot(coords, xd_safe)?;
                let old = b.build_load(i64t, p, "")?.into_int_value();
                b.build_store(p, b.build_int_add(old, add, "")?)?;
            }
            let vec_stride = params[vp];
            for j in 0..self.nvec as usize {
                let at = b.build_int_add(
                    ioff,
                    b.build_int_mul(i64t.const_int(j as u64, false), vec_stride, "")?,
                    "",
                )?;
                let v = load_index(e, self.index, bufs[1], at)?;
                let p = slot(coords, params[vp + 1 + j])?;
                let old = b.build_load(i64t, p, "")?.into_int_value();
                b.build_store(p, b.build_int_add(old, v, "")?)?;
            }
            // In bounds (unsigned compare: negative coordinates are huge) and the offset.
            let mut inside = e.ctx.bool_type().const_int(1, false);
            let mut xo = c0;
            for d in 0..xr {
                let cd = b
                    .build_load(i64t, slot(coords, i64t.const_int(d as u64, false))?, "")?
                    .into_int_value();
                let ok = b.build_int_compare(IntPredicate::ULT, cd, dim(d), "")?;
                inside = b.build_and(inside, ok, "")?;
                xo = b.build_int_add(xo, b.build_int_mul(cd, xst(d), "")?, "")?;
            }
            let then = e.ctx.append_basic_block(f, "scatter.in");
            let done = e.ctx.append_basic_block(f, "scatter.done");
            b.build_conditional_branch(inside, then, done)?;
            b.position_at_end(then);
            let a = e.load(self.dtype, bufs[0], xo)?;
            let u = e.load(self.dtype, bufs[2], ubase)?;
            let r = self.comb(e, a, u)?;
            let _ = ety;
            e.store(self.dtype, bufs[0], xo, r)?;
            b.build_unconditional_branch(done)?;
            b.position_at_end(done);
            Ok(())
        })
    }
}
