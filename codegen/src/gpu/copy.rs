//! The copy kernel: `dst[d(i)] = src[s(i)]` over an iteration space of rank `r`, where for
//! the coordinates `c` of the flat index `i` (row-major over the extents `ext`)
//!
//! ```text
//! s(i) = src_base + Σ_k c_k·src_stride_k + Σ_j clamp(src_index_j, 0, limit_j)·stride_j
//! d(i) = dst_base + Σ_k c_k·dst_stride_k + Σ_j clamp(dst_index_j, 0, limit_j)·stride_j
//! ```
//!
//! (strides signed, in elements; the dynamic indices are one-element buffers read on the
//! device, clamped as StableHLO's `dynamic_slice`/`dynamic_update_slice` clamp their start
//! indices). One kernel per element size moves any element type bit for bit: transposes,
//! slices, reversals, broadcasts, each operand of a concatenation, a pad's fill (source
//! strides 0 over its padding value) and its operand, dynamic slices and updates.
//!
//! Buffers: `src`, `dst`, the source's index buffers, the destination's. Params: `n`,
//! `src_base`, `dst_base`, `(ext, src_stride, dst_stride)` per dimension, `(limit, stride)`
//! per dynamic index (source's first).

#[cfg(feature = "llvm")]
use crate::lower::{Emit, LowerError};
use ebb_ir::DType;
#[cfg(feature = "llvm")]
use inkwell::values::{FunctionValue, IntValue, PointerValue};
#[cfg(feature = "llvm")]
use inkwell::IntPredicate;

/// A copy kernel's structure (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CopyKernel {
    /// Bytes per element (1, 2, 4 or 8).
    pub elem_bytes: u8,
    /// Rank of the iteration space.
    pub rank: u8,
    /// Element types of the source's dynamic indices.
    pub dyn_src: Vec<DType>,
    /// Element types of the destination's dynamic indices.
    pub dyn_dst: Vec<DType>,
}

impl CopyKernel {
    /// Number of buffers.
    pub fn buffers(&self) -> usize {
        2 + self.dyn_src.len() + self.dyn_dst.len()
    }

    /// Number of `i64` parameters.
    pub fn params(&self) -> usize {
        3 + 3 * self.rank as usize + 2 * (self.dyn_src.len() + self.dyn_dst.len())
    }
}

#[cfg(feature = "llvm")]
impl CopyKernel {
    /// Emits the copy of element `i`.
    pub(crate) fn element<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        _core: FunctionValue<'ctx>,
        bufs: &[PointerValue<'ctx>],
        params: &[IntValue<'ctx>],
        i: IntValue<'ctx>,
    ) -> Result<(), LowerError> {
        let b = e.b;
        let i64t = e.ctx.i64_type();
        let mut src = params[1];
        let mut dst = params[2];
        let mut rem = i;
        for k in (0..self.rank as usize).rev() {
            let (ext, ss, ds) = (params[3 + 3 * k], params[4 + 3 * k], params[5 + 3 * k]);
            let c = b.build_int_unsigned_rem(rem, ext, "")?;
            rem = b.build_int_unsigned_div(rem, ext, "")?;
            src = b.build_int_add(src, b.build_int_mul(c, ss, "")?, "")?;
            dst = b.build_int_add(dst, b.build_int_mul(c, ds, "")?, "")?;
        }
        let first = 3 + 3 * self.rank as usize;
        let dyns = self
            .dyn_src
            .iter()
            .map(|d| (true, d))
            .chain(self.dyn_dst.iter().map(|d| (false, d)));
        for (j, (is_src, &dt)) in dyns.enumerate() {
            let (limit, stride) = (params[first + 2 * j], params[first + 2 * j + 1]);
            let v = e.load(dt, bufs[2 + j], i64t.const_zero())?.into_int_value();
            let v = if dt == DType::I1 {
                b.build_int_z_extend(v, i64t, "")?
            } else {
                let signed = !matches!(dt, DType::U8 | DType::U32 | DType::U64);
                b.build_int_cast_sign_flag(v, i64t, signed, "")?
            };
            let neg = b.build_int_compare(IntPredicate::SLT, v, i64t.const_zero(), "")?;
            let v = b
                .build_select(neg, i64t.const_zero(), v, "")?
                .into_int_value();
            let over = b.build_int_compare(IntPredicate::SGT, v, limit, "")?;
            let v = b.build_select(over, limit, v, "")?.into_int_value();
            let add = b.build_int_mul(v, stride, "")?;
            if is_src {
                src = b.build_int_add(src, add, "")?;
            } else {
                dst = b.build_int_add(dst, add, "")?;
            }
        }
        let t = match self.elem_bytes {
            1 => e.ctx.i8_type(),
            2 => e.ctx.i16_type(),
            4 => e.ctx.i32_type(),
            8 => e.ctx.i64_type(),
            n => return Err(LowerError::Other(format!("a copy of {n}-byte elements"))),
        };
        // SAFETY: the launcher's parameters keep both offsets inside their buffers.
        let (ps, pd) = unsafe {
            (
                b.build_gep(t, bufs[0], &[src], "")?,
                b.build_gep(t, bufs[1], &[dst], "")?,
            )
        };
        let v = b.build_load(t, ps, "")?;
        b.build_store(pd, v)?;
        Ok(())
    }
}

/// The im2col kernel of a convolution (the reference: `ebb_runtime` `exec/dot.rs`,
/// `conv_typed`): for a canonical `f32` input `[N, C, S...]` and one feature group, element
/// `((nn·ci + c)·ks + kidx)·os + qidx` of the column stack is the input at batch
/// `n0 + nn`, feature `c0 + c` and, per spatial dimension `d`, position
/// `p_d = q_d·stride_d + k_d·rdil_d - pad_d` when `p_d ≥ 0`, `ldil_d` divides it and
/// `p_d / ldil_d < S_d`, else 0 (`q`, `k`: the row-major coordinates of `qidx` over the output
/// spatial sizes and of `kidx` over the kernel's).
///
/// Buffers: input, columns. Params: `n`, `ci`, `ks`, `os`, `n0·nstride + c0·cstride`,
/// `nstride`, `cstride`, then per spatial dimension `(K, Q, S, stride, rdil, ldil, pad, xstride)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Im2colKernel {
    /// Spatial dimensions.
    pub spatial: u8,
}

impl Im2colKernel {
    /// Number of `i64` parameters.
    pub fn params(&self) -> usize {
        7 + 8 * self.spatial as usize
    }
}

#[cfg(feature = "llvm")]
impl Im2colKernel {
    pub(crate) fn element<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        bufs: &[PointerValue<'ctx>],
        params: &[IntValue<'ctx>],
        i: IntValue<'ctx>,
    ) -> Result<(), LowerError> {
        let b = e.b;
        let i64t = e.ctx.i64_type();
        let (ci, ks, os) = (params[1], params[2], params[3]);
        let (base, nstride, cstride) = (params[4], params[5], params[6]);
        let qidx = b.build_int_unsigned_rem(i, os, "")?;
        let r = b.build_int_unsigned_div(i, os, "")?;
        let kidx = b.build_int_unsigned_rem(r, ks, "")?;
        let r = b.build_int_unsigned_div(r, ks, "")?;
        let c = b.build_int_unsigned_rem(r, ci, "")?;
        let nn = b.build_int_unsigned_div(r, ci, "")?;
        let mut off = b.build_int_add(
            base,
            b.build_int_add(
                b.build_int_mul(nn, nstride, "")?,
                b.build_int_mul(c, cstride, "")?,
                "",
            )?,
            "",
        )?;
        let mut valid = e.ctx.bool_type().const_int(1, false);
        let (mut qrem, mut krem) = (qidx, kidx);
        let zero = i64t.const_zero();
        for d in (0..self.spatial as usize).rev() {
            let p = |j: usize| params[7 + 8 * d + j];
            let (kd, qd, sd, stride, rdil, ldil, pad, xs) =
                (p(0), p(1), p(2), p(3), p(4), p(5), p(6), p(7));
            let q = b.build_int_unsigned_rem(qrem, qd, "")?;
            qrem = b.build_int_unsigned_div(qrem, qd, "")?;
            let k = b.build_int_unsigned_rem(krem, kd, "")?;
            krem = b.build_int_unsigned_div(krem, kd, "")?;
            let (real, at) = super::window_tap(b, q, stride, k, rdil, pad, ldil, sd)?;
            valid = b.build_and(valid, real, "")?;
            off = b.build_int_add(off, b.build_int_mul(at, xs, "")?, "")?;
        }
        let f32t = e.ctx.f32_type();
        let off = b.build_select(valid, off, zero, "")?.into_int_value();
        // SAFETY: a valid offset lies inside the input (the others read element 0).
        let v = unsafe {
            let p = b.build_gep(f32t, bufs[0], &[off], "")?;
            b.build_load(f32t, p, "")?.into_float_value()
        };
        let v = b.build_select(valid, v, f32t.const_zero(), "")?;
        // SAFETY: `i < n`, the column stack's length.
        let pd = unsafe { b.build_gep(f32t, bufs[1], &[i], "")? };
        b.build_store(pd, v)?;
        Ok(())
    }
}
