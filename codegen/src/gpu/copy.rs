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

use crate::lower::{Emit, LowerError};
use ebb_ir::DType;
use inkwell::values::{FunctionValue, IntValue, PointerValue};
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
