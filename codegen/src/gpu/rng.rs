//! The `rng_bit_generator` kernel: threefry2x32-20 blocks of a `ui64[2]` state
//! `[key, counter]`, exactly as `ebb_runtime` `exec/random.rs` (Salmon et al., SC 2011,
//! Random123's `threefry2x32_20`): one thread per block `j`, which encrypts the counter
//! `counter + j` under the key's two 32-bit halves; a `ui32` result takes both words of a
//! block (the last block's second word dropped for an odd length), a `ui64` result one block
//! per element (low word first). Thread 0 also writes the next state `[key, counter + blocks]`.
//!
//! Buffers: state, next state, bits. Params: `n` (blocks), elements, blocks.

#[cfg(feature = "llvm")]
use crate::lower::{Emit, LowerError};
#[cfg(feature = "llvm")]
use inkwell::values::{IntValue, PointerValue};
#[cfg(feature = "llvm")]
use inkwell::IntPredicate;

/// An `rng_bit_generator` kernel's structure.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RngKernel {
    /// `ui64` bits (else `ui32`).
    pub wide: bool,
}

impl RngKernel {
    /// Number of `i64` parameters.
    pub fn params(&self) -> usize {
        3
    }
}

#[cfg(feature = "llvm")]
impl RngKernel {
    pub(crate) fn element<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        f: inkwell::values::FunctionValue<'ctx>,
        bufs: &[PointerValue<'ctx>],
        params: &[IntValue<'ctx>],
        j: IntValue<'ctx>,
    ) -> Result<(), LowerError> {
        let b = e.b;
        let (i32t, i64t) = (e.ctx.i32_type(), e.ctx.i64_type());
        let c32 = |v: u64| i32t.const_int(v, false);
        let c64 = |v: u64| i64t.const_int(v, false);
        let load64 = |k: u64| -> Result<IntValue<'ctx>, LowerError> {
            // SAFETY: the state holds two words.
            let p = unsafe { b.build_in_bounds_gep(i64t, bufs[0], &[c64(k)], "")? };
            Ok(b.build_load(i64t, p, "")?.into_int_value())
        };
        let (key, ctr) = (load64(0)?, load64(1)?);
        let lo = |v: IntValue<'ctx>| b.build_int_truncate(v, i32t, "");
        let hi = |v: IntValue<'ctx>| -> Result<IntValue<'ctx>, LowerError> {
            Ok(b.build_int_truncate(b.build_right_shift(v, c64(32), false, "")?, i32t, "")?)
        };
        let ks = [lo(key)?, hi(key)?];
        let ks2 = b.build_xor(b.build_xor(ks[0], ks[1], "")?, c32(0x1BD1_1BDA), "")?;
        let ks = [ks[0], ks[1], ks2];
        let counter = b.build_int_add(ctr, j, "")?;
        let mut x = [
            b.build_int_add(lo(counter)?, ks[0], "")?,
            b.build_int_add(hi(counter)?, ks[1], "")?,
        ];
        const ROT: [[u64; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];
        for i in 0..5 {
            for &r in &ROT[i % 2] {
                x[0] = b.build_int_add(x[0], x[1], "")?;
                let rot = b.build_or(
                    b.build_left_shift(x[1], c32(r), "")?,
                    b.build_right_shift(x[1], c32(32 - r), false, "")?,
                    "",
                )?;
                x[1] = b.build_xor(rot, x[0], "")?;
            }
            x[0] = b.build_int_add(x[0], ks[(i + 1) % 3], "")?;
            x[1] = b.build_int_add(
                b.build_int_add(x[1], ks[(i + 2) % 3], "")?,
                c32(i as u64 + 1),
                "",
            )?;
        }
        let n = params[1];
        if self.wide {
            let w = b.build_or(
                b.build_int_z_extend(x[0], i64t, "")?,
                b.build_left_shift(b.build_int_z_extend(x[1], i64t, "")?, c64(32), "")?,
                "",
            )?;
            // SAFETY: `j < n`, the result's length.
            let p = unsafe { b.build_in_bounds_gep(i64t, bufs[2], &[j], "")? };
            b.build_store(p, w)?;
        } else {
            let at = b.build_int_mul(j, c64(2), "")?;
            // SAFETY: `2j < n`; the second word is stored only when `2j + 1 < n`.
            let p = unsafe { b.build_in_bounds_gep(i32t, bufs[2], &[at], "")? };
            b.build_store(p, x[0])?;
            let at1 = b.build_int_add(at, c64(1), "")?;
            let fits = b.build_int_compare(IntPredicate::SLT, at1, n, "")?;
            let then = e.ctx.append_basic_block(f, "rng.second");
            let done = e.ctx.append_basic_block(f, "rng.done");
            b.build_conditional_branch(fits, then, done)?;
            b.position_at_end(then);
            // SAFETY: `2j + 1 < n`.
            let p = unsafe { b.build_in_bounds_gep(i32t, bufs[2], &[at1], "")? };
            b.build_store(p, x[1])?;
            b.build_unconditional_branch(done)?;
            b.position_at_end(done);
        }
        // The next state, once.
        let first = b.build_int_compare(IntPredicate::EQ, j, c64(0), "")?;
        let then = e.ctx.append_basic_block(f, "rng.state");
        let done = e.ctx.append_basic_block(f, "rng.state.done");
        b.build_conditional_branch(first, then, done)?;
        b.position_at_end(then);
        // SAFETY: the next state holds two words.
        let (p0, p1) = unsafe {
            (
                b.build_in_bounds_gep(i64t, bufs[1], &[c64(0)], "")?,
                b.build_in_bounds_gep(i64t, bufs[1], &[c64(1)], "")?,
            )
        };
        b.build_store(p0, key)?;
        b.build_store(p1, b.build_int_add(ctr, params[2], "")?)?;
        b.build_unconditional_branch(done)?;
        b.position_at_end(done);
        Ok(())
    }
}
