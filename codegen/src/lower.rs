//! Lowers a fusion region ([`KernelLayout`]) to one LLVM function with the kernel ABI
//! ([`crate::KernelFn`]):
//!
//! ```text
//! void kernel(u8 **buffers, const i64 *params, i64 begin, i64 end)
//! ```
//!
//! `buffers` holds the region inputs' data pointers, then one pointer per store (ignored for a
//! store written in place, which goes through its input's pointer). `params` is laid out as
//! [`KernelLayout::param_count`] says: `params[0]` the row length `L`, `params[1]` the store
//! base of an input fusion (a store of flat index `i` goes to scratch element `i - base`; a
//! loop fusion stores at `i`), then per index-mapped member
//! its inner stride (or, for [`StrideClass::Table`], the index in `params` of its table of
//! in-row offsets), the number `nb` of blocks in use and up to `rank` `(divisor, extent,
//! stride)` blocks (only those with a nonzero stride matter), then the outer dimensions
//! ([`KernelLayout::outer_param`]): their number `K`, their extents `E_0 … E_{K−1}` (innermost
//! first) and per map the carry delta of each. The kernel evaluates the flat indices
//! `[begin, end)` row by row: rows are the multiples of `L`, and within a row the offset of
//! index-mapped member `m` is `off_m + j * s_m` (or `off_m + table_m[j]`) with
//! `off_m = Σ_{d < nb} ((i / div_d) mod ext_d) · stride_d` at the row's start `i`. The caller
//! picks `L` so that no index map carries inside a row (`L` divides each map's innermost
//! merged extent), or so that every map's blocks either end inside the row or carry only at
//! its multiples (the maps whose blocks end inside it then read a table). On the host `off_m` is computed so (by division) for the launch's first row
//! only when `K > 0`: the rows above it are the outer dimensions (the common refinement of the
//! maps' blocks, one counter each), and at each row's end the first counter that does not
//! wrap steps, the inner ones reset, and every `off_m` moves by that dimension's carry delta
//! `S_{m,d} − Σ_{e < d} (E_e − 1) · S_{m,e}` (`S_{m,d}` the offset step of dimension `d`).
//! With `K = 0` (the blocks do not nest, or one row) and on the GPU every row divides. The
//! inner stride is specialized per [`StrideClass`] (0, 1, a runtime value or a table) so the
//! inner loop vectorizes.
//!
//! The exported function loads the pointers and calls an inner `alwaysinline` function whose
//! buffer parameters are `noalias` (a store written in place shares its input's parameter), so
//! after inlining LLVM knows the buffers do not overlap.
//!
//! Per-element semantics are the reference executor's (`ebb_runtime` `exec/elementwise.rs`,
//! `arith.rs`, `tensor.rs` `convert`): wrapping integer arithmetic, NaN-propagating
//! `maximum`/`minimum`, saturating float-to-integer conversion, libm for the transcendental
//! functions other than `exponential` and `tanh` (inline, [`crate::math`]); booleans are
//! bytes in memory. `bf16` and `f16` values live in `f32` registers and are rounded after each
//! op (`half`'s `from_f32`; `from_f64` for `convert`) unless its result is one of theirs
//! already ([`Rounding`]); `exponential`, `tanh` and `log_plus_one` are [`crate::math`]'s, the
//! other transcendental functions libm's, as the reference's are.

use crate::layout::{InputRead, Mode};
use crate::spec::{KernelSpec, StrideClass};
use ebb_ir::{DType, NodeId, Op, OpKind, Relation, ValueRef};
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::builder::{Builder, BuilderError};
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::{Linkage, Module};
use inkwell::types::{BasicMetadataTypeEnum, BasicTypeEnum, IntType};
use inkwell::values::{BasicValueEnum, FloatValue, FunctionValue, IntValue, PointerValue};
use inkwell::{AddressSpace, FloatPredicate, IntPredicate};
use std::collections::HashMap;

/// Failure to build the IR (an LLVM builder error or a missing intrinsic).
#[derive(Debug, thiserror::Error)]
pub enum LowerError {
    /// The builder refused an instruction.
    #[error("LLVM builder: {0}")]
    Builder(#[from] BuilderError),
    /// Anything else that should not happen for a layout-checked region.
    #[error("{0}")]
    Other(String),
}

fn other<T>(msg: impl Into<String>) -> Result<T, LowerError> {
    Err(LowerError::Other(msg.into()))
}

/// State while emitting one kernel body.
pub(crate) struct Emit<'a, 'ctx> {
    pub(crate) ctx: &'ctx Context,
    pub(crate) b: &'a Builder<'ctx>,
    pub(crate) module: &'a Module<'ctx>,
    /// Which machine the code is for: on [`crate::Target::Gpu`] no libm exists, so the
    /// transcendental functions are emitted inline ([`crate::math`]).
    pub(crate) target: crate::Target,
}

fn is_signed(d: DType) -> bool {
    !matches!(d, DType::U8 | DType::U32 | DType::U64 | DType::I1)
}

impl<'a, 'ctx> Emit<'a, 'ctx> {
    /// A code emitter for `target` positioned by `b`.
    pub(crate) fn new(
        ctx: &'ctx Context,
        b: &'a Builder<'ctx>,
        module: &'a Module<'ctx>,
        target: crate::Target,
    ) -> Self {
        Emit {
            ctx,
            b,
            module,
            target,
        }
    }

    /// True when emitting for the GPU.
    pub(crate) fn gpu(&self) -> bool {
        self.target == crate::Target::Gpu
    }

    /// A function making `f32` constants.
    pub(crate) fn f32c(&self) -> impl Fn(f32) -> FloatValue<'ctx> + 'ctx {
        let t = self.ctx.f32_type();
        move |v| t.const_float(f64::from(v))
    }

    /// Integer type of an integer element type (booleans as bytes, their memory type).
    pub(crate) fn int_ty(&self, d: DType) -> IntType<'ctx> {
        match d {
            DType::I1 | DType::I8 | DType::U8 => self.ctx.i8_type(),
            DType::I16 | DType::BF16 | DType::F16 => self.ctx.i16_type(),
            DType::I32 | DType::U32 => self.ctx.i32_type(),
            _ => self.ctx.i64_type(),
        }
    }

    /// Memory type of an element type.
    pub(crate) fn mem_ty(&self, d: DType) -> BasicTypeEnum<'ctx> {
        match d {
            DType::F32 => self.ctx.f32_type().into(),
            _ => self.int_ty(d).into(),
        }
    }

    pub(crate) fn intrinsic(
        &self,
        name: &str,
        types: &[BasicTypeEnum<'ctx>],
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>, LowerError> {
        let f = Intrinsic::find(name)
            .and_then(|i| i.get_declaration(self.module, types))
            .ok_or_else(|| LowerError::Other(format!("no intrinsic {name}")))?;
        let args: Vec<_> = args.iter().map(|&a| a.into()).collect();
        self.b
            .build_call(f, &args, "")?
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| LowerError::Other(format!("{name} returns nothing")))
    }

    /// An `f32` intrinsic overloaded on `f32` (`llvm.fabs`, `llvm.round`, ...).
    pub(crate) fn float_intrinsic(
        &self,
        name: &str,
        args: &[FloatValue<'ctx>],
    ) -> Result<FloatValue<'ctx>, LowerError> {
        let args: Vec<BasicValueEnum> = args.iter().map(|&a| a.into()).collect();
        Ok(self
            .intrinsic(name, &[self.ctx.f32_type().into()], &args)?
            .into_float_value())
    }

    /// A call of a libm function `name(f32...) -> f32` (resolved in the process by the JIT).
    fn libm(&self, name: &str, args: &[FloatValue<'ctx>]) -> Result<FloatValue<'ctx>, LowerError> {
        let f32t = self.ctx.f32_type();
        let f = self.module.get_function(name).unwrap_or_else(|| {
            let params: Vec<BasicMetadataTypeEnum> = args.iter().map(|_| f32t.into()).collect();
            self.module
                .add_function(name, f32t.fn_type(&params, false), Some(Linkage::External))
        });
        let args: Vec<_> = args.iter().map(|&a| a.into()).collect();
        self.b
            .build_call(f, &args, "")?
            .try_as_basic_value()
            .basic()
            .map(|v| v.into_float_value())
            .ok_or_else(|| LowerError::Other(format!("{name} returns nothing")))
    }

    /// Loads element `idx` of `ptr` as element type `d` (booleans: byte != 0).
    pub(crate) fn load(
        &self,
        d: DType,
        ptr: PointerValue<'ctx>,
        idx: IntValue<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, LowerError> {
        let t = self.mem_ty(d);
        // SAFETY: the caller passes buffers of the region's types at the bindings; `idx`
        // stays inside them (the executor checks the sizes before calling).
        let p = unsafe { self.b.build_in_bounds_gep(t, ptr, &[idx], "")? };
        let v = self.b.build_load(t, p, "")?;
        if d == DType::BF16 {
            // `bf16::to_f32`: the bits shifted up, a NaN's quiet bit set.
            let i32t = self.ctx.i32_type();
            let w = self.b.build_int_z_extend(v.into_int_value(), i32t, "")?;
            let mag = self.b.build_and(w, i32t.const_int(0x7fff, false), "")?;
            let nan = self.b.build_int_compare(
                IntPredicate::UGT,
                mag,
                i32t.const_int(0x7f80, false),
                "",
            )?;
            let quiet = self.b.build_or(w, i32t.const_int(0x40, false), "")?;
            let w = self.b.build_select(nan, quiet, w, "")?.into_int_value();
            let w = self.b.build_left_shift(w, i32t.const_int(16, false), "")?;
            return Ok(self.b.build_bit_cast(w, self.ctx.f32_type(), "")?);
        }
        if d == DType::F16 {
            // `f16::to_f32`: exact, a NaN's quiet bit set (F16C's `vcvtph2ps` and `half`'s
            // software path). The bit is set here: LLVM may fold a widening that feeds a
            // narrowing (`sign` of a NaN returns it), leaving a signaling NaN signaling.
            let i16t = self.ctx.i16_type();
            let w = v.into_int_value();
            let mag = self.b.build_and(w, i16t.const_int(0x7fff, false), "")?;
            let nan = self.b.build_int_compare(
                IntPredicate::UGT,
                mag,
                i16t.const_int(0x7c00, false),
                "",
            )?;
            let quiet = self.b.build_or(w, i16t.const_int(0x200, false), "")?;
            let w = self.b.build_select(nan, quiet, w, "")?;
            let h = self.b.build_bit_cast(w, self.ctx.f16_type(), "")?;
            return Ok(self
                .b
                .build_float_ext(h.into_float_value(), self.ctx.f32_type(), "")?
                .into());
        }
        if d == DType::I1 {
            let z = self.ctx.i8_type().const_zero();
            return Ok(self
                .b
                .build_int_compare(IntPredicate::NE, v.into_int_value(), z, "")?
                .into());
        }
        Ok(v)
    }

    /// Stores `v` (of element type `d`) at element `idx` of `ptr`.
    pub(crate) fn store(
        &self,
        d: DType,
        ptr: PointerValue<'ctx>,
        idx: IntValue<'ctx>,
        v: BasicValueEnum<'ctx>,
    ) -> Result<(), LowerError> {
        let t = self.mem_ty(d);
        // SAFETY: as in `load`.
        let p = unsafe { self.b.build_in_bounds_gep(t, ptr, &[idx], "")? };
        let v = if d == DType::I1 {
            self.b
                .build_int_z_extend(v.into_int_value(), self.ctx.i8_type(), "")?
                .into()
        } else if d == DType::BF16 {
            // The value is a `bf16` already (rounded where computed): its top 16 bits.
            let i32t = self.ctx.i32_type();
            let w = self.b.build_bit_cast(v, i32t, "")?.into_int_value();
            let w = self
                .b
                .build_right_shift(w, i32t.const_int(16, false), false, "")?;
            self.b
                .build_int_truncate(w, self.ctx.i16_type(), "")?
                .into()
        } else if d == DType::F16 {
            // The value is an `f16` already (rounded where computed): exact.
            let h = self
                .b
                .build_float_trunc(v.into_float_value(), self.ctx.f16_type(), "")?;
            self.b.build_bit_cast(h, self.ctx.i16_type(), "")?
        } else {
            v
        };
        self.b.build_store(p, v)?;
        Ok(())
    }

    /// A splat literal's element as a register value of `d`.
    pub(crate) fn constant(
        &self,
        d: DType,
        bytes: &[u8],
    ) -> Result<BasicValueEnum<'ctx>, LowerError> {
        let mut raw = [0u8; 8];
        let n = (d.size_bytes() as usize).min(8);
        if bytes.len() < n {
            return other("a literal shorter than its element type");
        }
        raw[..n].copy_from_slice(&bytes[..n]);
        let v = u64::from_le_bytes(raw);
        Ok(match d {
            DType::F32 => {
                let bits = self.ctx.i32_type().const_int(v, false);
                self.b.build_bit_cast(bits, self.ctx.f32_type(), "")?
            }
            DType::BF16 => {
                let bits = self.ctx.i32_type().const_int(v << 16, false);
                self.b.build_bit_cast(bits, self.ctx.f32_type(), "")?
            }
            DType::F16 => {
                // `f16::to_f32` on the host, as the loads do; built from the bits, so a NaN
                // keeps its payload.
                let x = half::f16::from_bits(v as u16).to_f32().to_bits();
                let bits = self.ctx.i32_type().const_int(u64::from(x), false);
                self.b.build_bit_cast(bits, self.ctx.f32_type(), "")?
            }
            DType::I1 => self
                .ctx
                .bool_type()
                .const_int(u64::from(v != 0), false)
                .into(),
            _ => self.int_ty(d).const_int(v, false).into(),
        })
    }

    /// Converts `x` of element type `from` to `to` as `tensor.rs`'s `Data::convert`.
    pub(crate) fn convert(
        &self,
        x: BasicValueEnum<'ctx>,
        from: DType,
        to: DType,
    ) -> Result<BasicValueEnum<'ctx>, LowerError> {
        let b = self.b;
        if from == to {
            return Ok(x);
        }
        let float_from = matches!(from, DType::F32 | DType::BF16 | DType::F16);
        if to == DType::F16 {
            // `tensor.rs` converts through `f16::from_f64`: the `f64` value rounded to `f32`,
            // then to `f16` (F16C's conversion of `x as f32`; `half`'s own without F16C).
            let x = if float_from {
                x.into_float_value()
            } else {
                let f64t = self.ctx.f64_type();
                let d = if is_signed(from) {
                    b.build_signed_int_to_float(x.into_int_value(), f64t, "")?
                } else {
                    b.build_unsigned_int_to_float(x.into_int_value(), f64t, "")?
                };
                b.build_float_trunc(d, self.ctx.f32_type(), "")?
            };
            return Ok(self.round_f16(x)?.into());
        }
        if to == DType::BF16 {
            // `tensor.rs` converts through `bf16::from_f64` of the `f64` value (exact, but
            // for a 64-bit integer, rounded once).
            if float_from {
                // `bf16`/`f16` values are `f32`s exactly.
                return Ok(self.f32_to_bf16_via_f64(x.into_float_value())?.into());
            }
            let f64t = self.ctx.f64_type();
            let d = match from {
                _ if is_signed(from) => {
                    b.build_signed_int_to_float(x.into_int_value(), f64t, "")?
                }
                _ => b.build_unsigned_int_to_float(x.into_int_value(), f64t, "")?,
            };
            return Ok(self.f64_to_bf16(d)?.into());
        }
        let from = if float_from { DType::F32 } else { from };
        if from == to {
            return Ok(x);
        }
        Ok(match (from, to) {
            (DType::F32, DType::I1) => b
                .build_float_compare(
                    FloatPredicate::UNE,
                    x.into_float_value(),
                    self.ctx.f32_type().const_zero(),
                    "",
                )?
                .into(),
            (DType::F32, _) => {
                let name = if is_signed(to) {
                    "llvm.fptosi.sat"
                } else {
                    "llvm.fptoui.sat"
                };
                let t = self.int_ty(to);
                self.intrinsic(name, &[t.into(), self.ctx.f32_type().into()], &[x])?
            }
            (_, DType::F32) if is_signed(from) => b
                .build_signed_int_to_float(x.into_int_value(), self.ctx.f32_type(), "")?
                .into(),
            (_, DType::F32) => b
                .build_unsigned_int_to_float(x.into_int_value(), self.ctx.f32_type(), "")?
                .into(),
            (_, DType::I1) => {
                let x = x.into_int_value();
                b.build_int_compare(IntPredicate::NE, x, x.get_type().const_zero(), "")?
                    .into()
            }
            _ => b
                .build_int_cast_sign_flag(x.into_int_value(), self.int_ty(to), is_signed(from), "")?
                .into(),
        })
    }

    /// `half::f16::from_f32` of `x`, as an `f32` holding the `f16`'s value: round to nearest
    /// even (LLVM's `fptrunc` to `half`, F16C's `vcvtps2ph` where the CPU has it; a NaN keeps
    /// its top payload bits with the quiet bit set, as `half`'s), widened back exactly.
    pub(crate) fn round_f16(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, LowerError> {
        let h = self.b.build_float_trunc(x, self.ctx.f16_type(), "")?;
        Ok(self.b.build_float_ext(h, self.ctx.f32_type(), "")?)
    }

    /// `half::bf16::from_f32` of `x`, as an `f32` holding the `bf16`'s value: round to
    /// nearest even on the bits, `(bits + 0x7fff + lsb) & 0xffff_0000` with `lsb` the bit
    /// that becomes the `bf16`'s last (a carry out of the mantissa steps the exponent, up to
    /// infinity, as `half`'s `+ 1` on the top half does); a NaN keeps its top bits with the
    /// quiet bit set. Nine vector operations, no branch.
    pub(crate) fn round_bf16(&self, x: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, LowerError> {
        let bits = self
            .b
            .build_bit_cast(x, self.ctx.i32_type(), "")?
            .into_int_value();
        self.round_bf16_bits(bits, true)
    }

    /// [`Self::round_bf16`] of the result `x` of an IEEE operation (`+ - * /`, `sqrt`, and
    /// the inline `exp`/`tanh`, which return an operand's NaN or the canonical one) on
    /// `bf16` values: on the host CPU such a NaN is quiet with its low 16 bits zero (the
    /// operands' NaNs are, being `bf16`s widened with the quiet bit set on load, and the
    /// x86 default NaN is), and the rounding add leaves it as it is, so the NaN select of
    /// [`Self::round_bf16`] is left out (five operations). On the GPU (whose default NaN has
    /// a full payload) it is [`Self::round_bf16`].
    pub(crate) fn round_bf16_clean(
        &self,
        x: FloatValue<'ctx>,
    ) -> Result<FloatValue<'ctx>, LowerError> {
        let bits = self
            .b
            .build_bit_cast(x, self.ctx.i32_type(), "")?
            .into_int_value();
        self.round_bf16_bits(bits, self.gpu())
    }

    /// The rounding of [`Self::round_bf16`] on the bits of an `f32`; `nan`: with the NaN
    /// select.
    fn round_bf16_bits(
        &self,
        bits: IntValue<'ctx>,
        nan: bool,
    ) -> Result<FloatValue<'ctx>, LowerError> {
        let b = self.b;
        let i32t = self.ctx.i32_type();
        let c = |v: u64| i32t.const_int(v, false);
        let lsb = b.build_and(b.build_right_shift(bits, c(16), false, "")?, c(1), "")?;
        let r = b.build_int_add(b.build_int_add(bits, c(0x7fff), "")?, lsb, "")?;
        let r = if nan {
            let mag = b.build_and(bits, c(0x7fff_ffff), "")?;
            let is_nan = b.build_int_compare(IntPredicate::UGT, mag, c(0x7f80_0000), "")?;
            let quiet = b.build_or(bits, c(0x0040_0000), "")?;
            b.build_select(is_nan, quiet, r, "")?.into_int_value()
        } else {
            r
        };
        let r = b.build_and(r, c(0xffff_0000), "")?;
        Ok(b.build_bit_cast(r, self.ctx.f32_type(), "")?
            .into_float_value())
    }

    /// `half::bf16::from_f64(x as f64)` of an `f32` `x`, as [`Self::f64_to_bf16`] gives it but
    /// on the `f32`'s bits: `from_f64` rounds on the top 32 bits of the `f64`, which hold the
    /// 21 significant bits from the leading one down (the implicit bit and 20 stored), so
    /// the `f32`'s bits below those count for nothing: its lowest 3 for a normal number, 2 or
    /// 1 for a subnormal whose leading one is bit 22 or 21 (its exponent, `-22` or `-23`
    /// after normalizing, is a subnormal `bf16`'s, whose rounding then takes the same bits as
    /// `from_f32`'s); the rest is [`Self::round_bf16`] of the bits with those cleared (a
    /// NaN's own bits decide it is one, and it keeps its top bits quieted as with `from_f64`).
    pub(crate) fn f32_to_bf16_via_f64(
        &self,
        x: FloatValue<'ctx>,
    ) -> Result<FloatValue<'ctx>, LowerError> {
        let b = self.b;
        let i32t = self.ctx.i32_type();
        let c = |v: u64| i32t.const_int(v, false);
        let bits = b.build_bit_cast(x, i32t, "")?.into_int_value();
        let mag = b.build_and(bits, c(0x7fff_ffff), "")?;
        // t = the magnitude's bits 21 and up: 0..3 for a subnormal (leading one below bit
        // 21, at 21, at 22), 4 and more for a normal number, an infinity or a NaN.
        let t = b.build_right_shift(mag, c(21), false, "")?;
        let normal = b.build_int_compare(IntPredicate::UGE, t, c(4), "")?;
        let sub_drop = b.build_or(t, b.build_right_shift(t, c(1), false, "")?, "")?;
        let drop = b.build_select(normal, c(7), sub_drop, "")?.into_int_value();
        let kept = b.build_and(bits, b.build_not(drop, "")?, "")?;
        let lsb = b.build_and(b.build_right_shift(bits, c(16), false, "")?, c(1), "")?;
        let r = b.build_int_add(b.build_int_add(kept, c(0x7fff), "")?, lsb, "")?;
        let is_nan = b.build_int_compare(IntPredicate::UGT, mag, c(0x7f80_0000), "")?;
        let quiet = b.build_or(bits, c(0x0040_0000), "")?;
        let r = b.build_select(is_nan, quiet, r, "")?.into_int_value();
        let r = b.build_and(r, c(0xffff_0000), "")?;
        Ok(b.build_bit_cast(r, self.ctx.f32_type(), "")?
            .into_float_value())
    }

    /// `half::bf16::from_f64` of `d` (as an `f32` holding the `bf16`'s value), operation for
    /// operation: it rounds on the top 32 bits of the `f64` only (the low 32 mantissa bits
    /// count only for telling a NaN from an infinity), so it is not always the nearest.
    pub(crate) fn f64_to_bf16(&self, d: FloatValue<'ctx>) -> Result<FloatValue<'ctx>, LowerError> {
        let b = self.b;
        let (i32t, i64t) = (self.ctx.i32_type(), self.ctx.i64_type());
        let c = |v: u64| i32t.const_int(v, false);
        let val = b.build_bit_cast(d, i64t, "")?.into_int_value();
        let x = b.build_int_truncate(
            b.build_right_shift(val, i64t.const_int(32, false), false, "")?,
            i32t,
            "",
        )?;
        let lo = b.build_int_truncate(val, i32t, "")?;
        let sign = b.build_and(x, c(0x8000_0000), "")?;
        let exp = b.build_and(x, c(0x7ff0_0000), "")?;
        let man = b.build_and(x, c(0x000f_ffff), "")?;
        let hsign = b.build_right_shift(sign, c(16), false, "")?;
        let sel =
            |cond, t: IntValue<'ctx>, f: IntValue<'ctx>| -> Result<IntValue<'ctx>, LowerError> {
                Ok(b.build_select(cond, t, f, "")?.into_int_value())
            };
        let eq =
            |u: IntValue<'ctx>, v: IntValue<'ctx>| b.build_int_compare(IntPredicate::EQ, u, v, "");
        // Infinity or NaN.
        let zero_man = b.build_and(eq(man, c(0))?, eq(lo, c(0))?, "")?;
        let nan_bit = sel(zero_man, c(0), c(0x40))?;
        let special = b.build_or(
            b.build_or(hsign, c(0x7f80), "")?,
            b.build_or(nan_bit, b.build_right_shift(man, c(13), false, "")?, "")?,
            "",
        )?;
        // half_exp = exp - 1023 + 127, signed.
        let e = b.build_int_sub(
            b.build_right_shift(exp, c(20), false, "")?,
            c(1023 - 127),
            "",
        )?;
        let overflow = b.build_int_compare(IntPredicate::SGE, e, c(0xff), "")?;
        let inf = b.build_or(hsign, c(0x7f80), "")?;
        // Subnormal (e <= 0): zero when 7 - e > 21, else shifted with the hidden bit.
        let sub = b.build_int_compare(IntPredicate::SLE, e, c(0), "")?;
        let flush = b.build_int_compare(
            IntPredicate::SLT,
            e,
            i32t.const_int((-14i64) as u64, true),
            "",
        )?;
        // `e` in [-14, 0] where the shifts below are used; 0 elsewhere (keeps them in range).
        let es = sel(sub, sel(flush, c(0), e)?, c(0))?;
        let mh = b.build_or(man, c(0x0010_0000), "")?;
        let sh = b.build_int_sub(c(14), es, "")?;
        let half_man = b.build_right_shift(mh, sh, false, "")?;
        let rb = b.build_left_shift(c(1), b.build_int_sub(c(13), es, "")?, "")?;
        let three = b.build_int_sub(b.build_int_mul(rb, c(3), "")?, c(1), "")?;
        let up = b.build_and(
            b.build_int_compare(IntPredicate::NE, b.build_and(mh, rb, "")?, c(0), "")?,
            b.build_int_compare(IntPredicate::NE, b.build_and(mh, three, "")?, c(0), "")?,
            "",
        )?;
        let subr = b.build_or(
            hsign,
            sel(up, b.build_int_add(half_man, c(1), "")?, half_man)?,
            "",
        )?;
        let subr = sel(flush, hsign, subr)?;
        // Normal.
        let norm = b.build_or(
            b.build_or(hsign, b.build_left_shift(sel(sub, c(0), e)?, c(7), "")?, "")?,
            b.build_right_shift(man, c(13), false, "")?,
            "",
        )?;
        let up = b.build_and(
            b.build_int_compare(IntPredicate::NE, b.build_and(man, c(0x1000), "")?, c(0), "")?,
            b.build_int_compare(IntPredicate::NE, b.build_and(man, c(0x2fff), "")?, c(0), "")?,
            "",
        )?;
        let norm = sel(up, b.build_int_add(norm, c(1), "")?, norm)?;
        let r = sel(sub, subr, norm)?;
        let r = sel(overflow, inf, r)?;
        let r = sel(eq(exp, c(0x7ff0_0000))?, special, r)?;
        let r = b.build_left_shift(b.build_and(r, c(0xffff), "")?, c(16), "")?;
        Ok(b.build_bit_cast(r, self.ctx.f32_type(), "")?
            .into_float_value())
    }

    /// NaN-propagating `maximum`/`minimum` of `tensor.rs` (`max_e`/`min_e`).
    fn float_max_min(
        &self,
        x: FloatValue<'ctx>,
        y: FloatValue<'ctx>,
        max: bool,
    ) -> Result<FloatValue<'ctx>, LowerError> {
        let b = self.b;
        let pred = if max {
            FloatPredicate::OGT
        } else {
            FloatPredicate::OLT
        };
        let take_y = b.build_float_compare(pred, y, x, "")?;
        let r = b.build_select(take_y, y, x, "")?.into_float_value();
        let nan = b.build_float_compare(FloatPredicate::UNO, x, y, "")?;
        Ok(b.build_select(nan, self.f32c()(f32::NAN), r, "")?
            .into_float_value())
    }

    /// A unary `f32` op.
    pub(crate) fn float_unary(
        &self,
        k: OpKind,
        x: FloatValue<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, LowerError> {
        let b = self.b;
        let f = self.f32c();
        let one = f(1.0);
        Ok(match k {
            OpKind::Negate => b.build_float_neg(x, "")?.into(),
            OpKind::Abs => self.float_intrinsic("llvm.fabs", &[x])?.into(),
            OpKind::Exponential => self.exp_f32(x)?.into(),
            OpKind::Tanh => self.tanh_f32(x)?.into(),
            OpKind::ExponentialMinusOne => self.libm("expm1f", &[x])?.into(),
            OpKind::Log if self.gpu() => self.log_f32_gpu(x)?.into(),
            OpKind::Log => self.float_intrinsic("llvm.log", &[x])?.into(),
            OpKind::LogPlusOne => self.log1p_f32(x)?.into(),
            OpKind::Logistic => {
                let nx = b.build_float_neg(x, "")?;
                let e = if self.gpu() {
                    self.expf_gpu(nx)?
                } else {
                    self.float_intrinsic("llvm.exp", &[nx])?
                };
                b.build_float_div(one, b.build_float_add(one, e, "")?, "")?
                    .into()
            }
            OpKind::Sqrt => self.float_intrinsic("llvm.sqrt", &[x])?.into(),
            OpKind::Rsqrt => {
                let s = self.float_intrinsic("llvm.sqrt", &[x])?;
                b.build_float_div(one, s, "")?.into()
            }
            OpKind::Cbrt => self.libm("cbrtf", &[x])?.into(),
            OpKind::Sine => self.float_intrinsic("llvm.sin", &[x])?.into(),
            OpKind::Cosine => self.float_intrinsic("llvm.cos", &[x])?.into(),
            OpKind::Floor => self.float_intrinsic("llvm.floor", &[x])?.into(),
            OpKind::Ceil => self.float_intrinsic("llvm.ceil", &[x])?.into(),
            OpKind::RoundNearestEven => self.float_intrinsic("llvm.roundeven", &[x])?.into(),
            OpKind::RoundNearestAfz => self.float_intrinsic("llvm.round", &[x])?.into(),
            OpKind::Sign => {
                // NaN or ±0: itself; > 0: 1; else -1
                let keep = b.build_float_compare(FloatPredicate::UEQ, x, f(0.0), "")?;
                let pos = b.build_float_compare(FloatPredicate::OGT, x, f(0.0), "")?;
                let s = b.build_select(pos, one, f(-1.0), "")?;
                b.build_select(keep, x.into(), s, "")?
            }
            OpKind::IsFinite => {
                let a = self.float_intrinsic("llvm.fabs", &[x])?;
                b.build_float_compare(FloatPredicate::OLT, a, f(f32::INFINITY), "")?
                    .into()
            }
            _ => return other(format!("no f32 lowering of `{}`", k.name())),
        })
    }

    /// A binary `f32` op (compare excluded).
    pub(crate) fn float_binary(
        &self,
        k: OpKind,
        x: FloatValue<'ctx>,
        y: FloatValue<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, LowerError> {
        let b = self.b;
        Ok(match k {
            OpKind::Add => b.build_float_add(x, y, "")?.into(),
            OpKind::Subtract => b.build_float_sub(x, y, "")?.into(),
            OpKind::Multiply => b.build_float_mul(x, y, "")?.into(),
            OpKind::Divide => b.build_float_div(x, y, "")?.into(),
            OpKind::Remainder => b.build_float_rem(x, y, "")?.into(),
            OpKind::Maximum => self.float_max_min(x, y, true)?.into(),
            OpKind::Minimum => self.float_max_min(x, y, false)?.into(),
            OpKind::Power if self.gpu() => self.pow_f32_gpu(x, y)?.into(),
            OpKind::Power => self.float_intrinsic("llvm.pow", &[x, y])?.into(),
            OpKind::Atan2 => self.libm("atan2f", &[x, y])?.into(),
            _ => return other(format!("no f32 lowering of `{}`", k.name())),
        })
    }

    /// An integer or boolean op (`tensor.rs`/`arith.rs` semantics: wrapping arithmetic;
    /// booleans: `add`/`maximum` are `or`, `multiply`/`minimum` are `and`, `subtract` is `xor`).
    pub(crate) fn int_op(
        &self,
        k: OpKind,
        d: DType,
        xs: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>, LowerError> {
        let b = self.b;
        let bool_ = d == DType::I1;
        let signed = is_signed(d);
        let (x, y) = (xs[0], xs.get(1).copied());
        let y = || y.ok_or_else(|| LowerError::Other("missing operand".into()));
        Ok(match k {
            OpKind::Not => b.build_not(x, "")?.into(),
            OpKind::And => b.build_and(x, y()?, "")?.into(),
            OpKind::Or => b.build_or(x, y()?, "")?.into(),
            OpKind::Xor => b.build_xor(x, y()?, "")?.into(),
            OpKind::Add | OpKind::Maximum if bool_ => b.build_or(x, y()?, "")?.into(),
            OpKind::Multiply | OpKind::Minimum if bool_ => b.build_and(x, y()?, "")?.into(),
            OpKind::Subtract if bool_ => b.build_xor(x, y()?, "")?.into(),
            _ if bool_ => return other(format!("no boolean lowering of `{}`", k.name())),
            OpKind::Add => b.build_int_add(x, y()?, "")?.into(),
            OpKind::Subtract => b.build_int_sub(x, y()?, "")?.into(),
            OpKind::Multiply => b.build_int_mul(x, y()?, "")?.into(),
            OpKind::ShiftLeft | OpKind::ShiftRightLogical | OpKind::ShiftRightArithmetic => {
                // `arith.rs`: the amount as unsigned; at least the width: 0 (logical) or the
                // sign (arithmetic, which shifts by width - 1).
                let y = y()?;
                let t = x.get_type();
                let bits = t.const_int(u64::from(t.get_bit_width()), false);
                let big = b.build_int_compare(IntPredicate::UGE, y, bits, "")?;
                if k == OpKind::ShiftRightArithmetic {
                    let last = t.const_int(u64::from(t.get_bit_width() - 1), false);
                    let n = b.build_select(big, last, y, "")?.into_int_value();
                    b.build_right_shift(x, n, true, "")?.into()
                } else {
                    let safe = b.build_select(big, t.const_zero(), y, "")?.into_int_value();
                    let r = if k == OpKind::ShiftLeft {
                        b.build_left_shift(x, safe, "")?
                    } else {
                        b.build_right_shift(x, safe, false, "")?
                    };
                    b.build_select(big, t.const_zero(), r, "")?
                }
            }
            OpKind::Divide | OpKind::Remainder => {
                // `arith.rs` `xdiv`/`xrem`: by zero all ones / the dividend; wrapping
                // `MIN / -1` (MIN, remainder 0). The divisor is made safe first (LLVM's
                // division by zero or overflow is undefined).
                let y = y()?;
                let t = x.get_type();
                let zero = b.build_int_compare(IntPredicate::EQ, y, t.const_zero(), "")?;
                let ones = t.const_all_ones();
                let over = if signed {
                    let min = t.const_int(1u64 << (t.get_bit_width() - 1), false);
                    b.build_and(
                        b.build_int_compare(IntPredicate::EQ, x, min, "")?,
                        b.build_int_compare(IntPredicate::EQ, y, ones, "")?,
                        "",
                    )?
                } else {
                    e_false(self)
                };
                let bad = b.build_or(zero, over, "")?;
                let safe = b
                    .build_select(bad, t.const_int(1, false), y, "")?
                    .into_int_value();
                let div = k == OpKind::Divide;
                let r = match (div, signed) {
                    (true, true) => b.build_int_signed_div(x, safe, "")?,
                    (true, false) => b.build_int_unsigned_div(x, safe, "")?,
                    (false, true) => b.build_int_signed_rem(x, safe, "")?,
                    (false, false) => b.build_int_unsigned_rem(x, safe, "")?,
                };
                // x / 1 = x = MIN for the overflow; MIN % -1 = 0.
                let r = if div {
                    r
                } else {
                    b.build_select(over, t.const_zero(), r, "")?
                        .into_int_value()
                };
                let by_zero = if div { ones } else { x };
                b.build_select(zero, by_zero, r, "")?
            }
            OpKind::Negate => b.build_int_neg(x, "")?.into(),
            OpKind::Abs if signed => {
                let neg =
                    b.build_int_compare(IntPredicate::SLT, x, x.get_type().const_zero(), "")?;
                let nx = b.build_int_neg(x, "")?;
                b.build_select(neg, nx, x, "")?
            }
            OpKind::Maximum | OpKind::Minimum => {
                let pred = match (k == OpKind::Maximum, signed) {
                    (true, true) => IntPredicate::SGT,
                    (true, false) => IntPredicate::UGT,
                    (false, true) => IntPredicate::SLT,
                    (false, false) => IntPredicate::ULT,
                };
                let y = y()?;
                let c = b.build_int_compare(pred, x, y, "")?;
                b.build_select(c, x, y, "")?
            }
            OpKind::Clamp => {
                // Operands `(lo, x, hi)`: `min(max(x, lo), hi)`, as `exec/elementwise.rs`.
                let (Some(&v), Some(&hi)) = (xs.get(1), xs.get(2)) else {
                    return other("`clamp` without three operands");
                };
                let m = self.int_op(OpKind::Maximum, d, &[v, x])?.into_int_value();
                self.int_op(OpKind::Minimum, d, &[m, hi])?
            }
            _ => return other(format!("no {d} lowering of `{}`", k.name())),
        })
    }

    /// `compare` (partial order for floats: unordered compares false except `NE`).
    pub(crate) fn compare(
        &self,
        dir: Relation,
        d: DType,
        x: BasicValueEnum<'ctx>,
        y: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>, LowerError> {
        let b = self.b;
        if matches!(d, DType::F32 | DType::BF16 | DType::F16) {
            let p = match dir {
                Relation::Eq => FloatPredicate::OEQ,
                Relation::Ne => FloatPredicate::UNE,
                Relation::Lt => FloatPredicate::OLT,
                Relation::Le => FloatPredicate::OLE,
                Relation::Gt => FloatPredicate::OGT,
                Relation::Ge => FloatPredicate::OGE,
            };
            return Ok(b
                .build_float_compare(p, x.into_float_value(), y.into_float_value(), "")?
                .into());
        }
        let s = is_signed(d);
        let p = match dir {
            Relation::Eq => IntPredicate::EQ,
            Relation::Ne => IntPredicate::NE,
            Relation::Lt if s => IntPredicate::SLT,
            Relation::Le if s => IntPredicate::SLE,
            Relation::Gt if s => IntPredicate::SGT,
            Relation::Ge if s => IntPredicate::SGE,
            Relation::Lt => IntPredicate::ULT,
            Relation::Le => IntPredicate::ULE,
            Relation::Gt => IntPredicate::UGT,
            Relation::Ge => IntPredicate::UGE,
        };
        Ok(
            b.build_int_compare(p, x.into_int_value(), y.into_int_value(), "")?
                .into(),
        )
    }
}

/// The `i1` constant false.
fn e_false<'ctx>(e: &Emit<'_, 'ctx>) -> IntValue<'ctx> {
    e.ctx.bool_type().const_zero()
}

/// An index map's runtime inner stride (for [`StrideClass::Any`]) and, unless it is
/// [`StrideClass::Uniform`], its block count and the index of its first block parameter.
type MapParams<'ctx> = (Option<IntValue<'ctx>>, Option<(IntValue<'ctx>, usize)>);

/// How the `f32` result of an op on `bf16`/`f16` values is rounded to the narrow type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Rounding {
    /// Not at all: the result is one of the operands, an operand with its sign changed, the
    /// canonical NaN, `±1`, or an integer no larger in magnitude than an operand or the next
    /// power of two above it (`floor`, `ceil`, the roundings), so it is a value of the narrow
    /// type already (exactly what rounding it would give, NaNs included).
    Exact,
    /// An IEEE operation on the widened values, whose NaN is quiet with the low half zero
    /// ([`Emit::round_bf16_clean`]).
    Clean,
    /// Fully, NaN payloads included (the C library's functions, `remainder`, `logistic`).
    Full,
}

/// The [`Rounding`] of op `k`'s result.
fn rounding(k: OpKind) -> Rounding {
    use OpKind::*;
    match k {
        Negate | Abs | Maximum | Minimum | Floor | Ceil | RoundNearestEven | RoundNearestAfz
        | Sign => Rounding::Exact,
        Add | Subtract | Multiply | Divide | Sqrt | Rsqrt | Exponential | Tanh => Rounding::Clean,
        _ => Rounding::Full,
    }
}

/// Per-row state of the loop nest: the buffers, the flat index and each map's offset and
/// inner stride.
struct Row<'ctx> {
    bufs: Vec<PointerValue<'ctx>>,
    idx: IntValue<'ctx>,
    j: IntValue<'ctx>,
    map_off: Vec<IntValue<'ctx>>,
    map_stride: Vec<Option<IntValue<'ctx>>>,
    params: PointerValue<'ctx>,
}

/// Emits the member computations and stores of one element (the inner loop body).
fn element<'ctx>(
    e: &Emit<'_, 'ctx>,
    spec: &KernelSpec,
    row: &Row<'ctx>,
    store_buf: &[usize],
    base: IntValue<'ctx>,
) -> Result<(), LowerError> {
    let g = spec.region;
    let b = e.b;
    let input_pos: HashMap<NodeId, usize> = g
        .inputs()
        .iter()
        .enumerate()
        .map(|(k, &id)| (id, k))
        .collect();
    let map_pos: HashMap<NodeId, usize> = spec
        .layout
        .maps
        .iter()
        .enumerate()
        .map(|(k, m)| (m.id, k))
        .collect();
    let i64t = e.ctx.i64_type();
    let mut vals: HashMap<ValueRef, BasicValueEnum<'ctx>> = HashMap::new();
    // Region inputs read at the flat index or at element 0.
    let get = |vals: &mut HashMap<ValueRef, BasicValueEnum<'ctx>>,
               v: ValueRef|
     -> Result<BasicValueEnum<'ctx>, LowerError> {
        if let Some(x) = vals.get(&v) {
            return Ok(*x);
        }
        let Some(&p) = input_pos.get(&v.node) else {
            return other("a member read before it is computed");
        };
        let at = match spec.layout.inputs[p] {
            InputRead::Aligned => row.idx,
            InputRead::Whole => i64t.const_zero(),
        };
        let x = e.load(g.value_type(v).dtype, row.bufs[p], at)?;
        vals.insert(v, x);
        Ok(x)
    };
    // The offset of map `m` at this element.
    let map_offset = |m: usize| -> Result<IntValue<'ctx>, LowerError> {
        Ok(match (spec.classes[m], row.map_stride[m]) {
            (StrideClass::Uniform, _) => i64t.const_zero(),
            (StrideClass::Zero, _) => row.map_off[m],
            (StrideClass::One, _) => b.build_int_add(row.map_off[m], row.j, "")?,
            (StrideClass::Any, Some(s)) => {
                b.build_int_add(row.map_off[m], b.build_int_mul(row.j, s, "")?, "")?
            }
            (StrideClass::Table, Some(t)) => {
                let at = b.build_int_add(t, row.j, "")?;
                // SAFETY: the table of `L` offsets lies inside `params` and `j < L`.
                let p = unsafe { b.build_in_bounds_gep(i64t, row.params, &[at], "")? };
                let d = b.build_load(i64t, p, "")?.into_int_value();
                b.build_int_add(row.map_off[m], d, "")?
            }
            (StrideClass::Any | StrideClass::Table, None) => {
                return other("a runtime stride or table without its parameter")
            }
        })
    };
    for &id in &spec.layout.members {
        let node = g.node(id);
        let out = &node.outputs[0];
        let ins = g.operands(id);
        let v = match &node.op {
            Op::Constant(l) => e.constant(out.dtype, &l.data)?,
            Op::Iota(_) => {
                let m = map_pos[&id];
                e.convert(map_offset(m)?.into(), DType::I64, out.dtype)?
            }
            Op::BroadcastInDim(_) if map_pos.contains_key(&id) => {
                let src = ins[0];
                match input_pos.get(&src.node) {
                    Some(&p) => e.load(out.dtype, row.bufs[p], map_offset(map_pos[&id])?)?,
                    None => get(&mut vals, src)?,
                }
            }
            Op::Reshape(_) | Op::BroadcastInDim(_) => get(&mut vals, ins[0])?,
            Op::Convert(to) => {
                let from = g.value_type(ins[0]).dtype;
                e.convert(get(&mut vals, ins[0])?, from, *to)?
            }
            Op::ReducePrecision(r) => e
                .reduce_precision_f32(get(&mut vals, ins[0])?.into_float_value(), r)?
                .into(),
            Op::BitcastConvert(to) => {
                b.build_bit_cast(get(&mut vals, ins[0])?, e.mem_ty(*to), "")?
            }
            Op::Select => {
                let p = get(&mut vals, ins[0])?.into_int_value();
                let (x, y) = (get(&mut vals, ins[1])?, get(&mut vals, ins[2])?);
                b.build_select(p, x, y, "")?
            }
            Op::Compare(spec_) => {
                let d = g.value_type(ins[0]).dtype;
                let (x, y) = (get(&mut vals, ins[0])?, get(&mut vals, ins[1])?);
                e.compare(spec_.direction, d, x, y)?
            }
            _ => {
                let d = g.value_type(ins[0]).dtype;
                // `bf16`/`f16` are computed in `f32` and rounded (`exec/elementwise.rs`).
                let low = matches!(d, DType::BF16 | DType::F16);
                let d = if low { DType::F32 } else { d };
                let xs = ins
                    .iter()
                    .map(|v| get(&mut vals, *v))
                    .collect::<Result<Vec<_>, _>>()?;
                let k = node.kind();
                let v = match (d, xs.as_slice()) {
                    (DType::F32, [x]) => e.float_unary(k, x.into_float_value())?,
                    (DType::F32, [x, y]) => {
                        e.float_binary(k, x.into_float_value(), y.into_float_value())?
                    }
                    (_, _) if d != DType::F32 => {
                        let xs: Vec<IntValue> = xs.iter().map(|x| x.into_int_value()).collect();
                        e.int_op(k, d, &xs)?
                    }
                    _ => return other(format!("`{}` with {} operands", k.name(), xs.len())),
                };
                match (out.dtype, rounding(k)) {
                    (_, Rounding::Exact) if low => v,
                    (DType::BF16, Rounding::Clean) if low => {
                        e.round_bf16_clean(v.into_float_value())?.into()
                    }
                    (DType::BF16, _) if low => e.round_bf16(v.into_float_value())?.into(),
                    (DType::F16, _) if low => e.round_f16(v.into_float_value())?.into(),
                    _ => v,
                }
            }
        };
        vals.insert(ValueRef::new(id, 0), v);
    }
    // A loop fusion's stores go to the flat index itself (the base is 0): an in-place store
    // then has the very address of its load, which LLVM's runtime alias check needs to see
    // to keep the vector loop (a distance it cannot prove nonzero sends it to the scalar one).
    // An input fusion's scratch rows are `f32` (a `bf16` value is stored exactly).
    let (at, scratch) = match spec.layout.mode {
        Mode::Loop => (row.idx, false),
        Mode::Input { .. } | Mode::Columns { .. } => (b.build_int_sub(row.idx, base, "")?, true),
    };
    for (k, v) in spec.layout.stores.iter().enumerate() {
        let x = get(&mut vals, *v)?;
        let d = match g.value_type(*v).dtype {
            DType::BF16 | DType::F16 if scratch => DType::F32,
            d => d,
        };
        e.store(d, row.bufs[store_buf[k]], at, x)?;
    }
    Ok(())
}

/// The block the builder is positioned in.
fn current_block<'ctx>(
    b: &Builder<'ctx>,
) -> Result<inkwell::basic_block::BasicBlock<'ctx>, LowerError> {
    b.get_insert_block()
        .ok_or_else(|| LowerError::Other("no insert block".into()))
}

/// Emits the function `name` for `spec` into `module` (see the module docs); `cpu` and
/// `features` become its `target-cpu`/`target-features` attributes.
pub fn emit<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    spec: &KernelSpec,
    name: &str,
    cpu: &str,
    features: &str,
) -> Result<FunctionValue<'ctx>, LowerError> {
    let attrs = [("target-cpu", cpu), ("target-features", features)];
    let (inner, outer_src) = emit_body(ctx, module, spec, name, &attrs, crate::Target::Host)?;
    let ptr = ctx.ptr_type(AddressSpace::default());
    let i64t = ctx.i64_type();
    let void = ctx.void_type();
    let outer = module.add_function(
        name,
        void.fn_type(&[ptr.into(), ptr.into(), i64t.into(), i64t.into()], false),
        None,
    );
    for (k, v) in attrs {
        outer.add_attribute(AttributeLoc::Function, ctx.create_string_attribute(k, v));
    }
    let b = ctx.create_builder();
    // Outer: load the pointers, call the body.
    let entry = ctx.append_basic_block(outer, "entry");
    b.position_at_end(entry);
    let arr = outer
        .get_nth_param(0)
        .ok_or_else(|| LowerError::Other("missing parameter".into()))?
        .into_pointer_value();
    let mut args = Vec::new();
    for &k in &outer_src {
        // SAFETY: the caller passes one pointer per input and store.
        let p = unsafe { b.build_in_bounds_gep(ptr, arr, &[i64t.const_int(k as u64, false)], "")? };
        args.push(b.build_load(ptr, p, "")?.into());
    }
    for k in 1..4 {
        args.push(
            outer
                .get_nth_param(k)
                .ok_or_else(|| LowerError::Other("missing parameter".into()))?
                .into(),
        );
    }
    b.build_call(inner, &args, "")?;
    b.build_return(None)?;
    Ok(outer)
}

/// The buffer parameter of each store (its input's when it is written in place, else a
/// buffer of its own after the inputs'), and per buffer parameter its slot in the host ABI's
/// buffer array (inputs, then the stores not written in place).
fn buffer_slots(spec: &KernelSpec) -> (Vec<usize>, Vec<usize>) {
    let n_in = spec.layout.inputs.len();
    let mut store_buf = Vec::new();
    let mut outer_src = (0..n_in).collect::<Vec<_>>();
    for k in 0..spec.layout.stores.len() {
        match spec.in_place.iter().find(|(s, _)| *s == k) {
            Some(&(_, i)) if i < n_in => store_buf.push(i),
            _ => {
                store_buf.push(outer_src.len());
                outer_src.push(n_in + k);
            }
        }
    }
    (store_buf, outer_src)
}

/// Declares `{name}.body(bufs.. (n_bufs pointers), params, begin, end)`: internal,
/// `alwaysinline`, with the function attributes `attrs`; on the host its buffer parameters
/// are `noalias` (on the GPU a store written in place is passed its input's pointer).
fn declare_body<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    name: &str,
    n_bufs: usize,
    attrs: &[(&str, &str)],
    target: crate::Target,
) -> FunctionValue<'ctx> {
    let ptr = ctx.ptr_type(AddressSpace::default());
    let i64t = ctx.i64_type();
    let mut params: Vec<BasicMetadataTypeEnum> = vec![ptr.into(); n_bufs];
    params.extend::<[BasicMetadataTypeEnum; 3]>([ptr.into(), i64t.into(), i64t.into()]);
    let inner = module.add_function(
        &format!("{name}.body"),
        ctx.void_type().fn_type(&params, false),
        Some(Linkage::Internal),
    );
    if target == crate::Target::Host {
        let noalias = ctx.create_enum_attribute(Attribute::get_named_enum_kind_id("noalias"), 0);
        for k in 0..n_bufs {
            inner.add_attribute(AttributeLoc::Param(k as u32), noalias);
        }
    }
    inner.add_attribute(
        AttributeLoc::Function,
        ctx.create_enum_attribute(Attribute::get_named_enum_kind_id("alwaysinline"), 0),
    );
    for (k, v) in attrs {
        inner.add_attribute(AttributeLoc::Function, ctx.create_string_attribute(k, v));
    }
    inner
}

/// Emits, at the builder's position in `f`, the offset of flat index `i` under an index map
/// of `nb` blocks whose `(divisor, extent, stride)` triples start at `params[first]`:
/// `Σ_{d < nb} ((i / div_d) mod ext_d) · stride_d`, as a loop over the blocks. The builder
/// is left after the loop.
fn map_offset<'ctx>(
    ctx: &'ctx Context,
    b: &Builder<'ctx>,
    f: FunctionValue<'ctx>,
    params: PointerValue<'ctx>,
    i: IntValue<'ctx>,
    nb: IntValue<'ctx>,
    first: usize,
) -> Result<IntValue<'ctx>, LowerError> {
    let i64t = ctx.i64_type();
    let pre = current_block(b)?;
    let head = ctx.append_basic_block(f, "map");
    let body = ctx.append_basic_block(f, "map.body");
    let done = ctx.append_basic_block(f, "map.done");
    b.build_unconditional_branch(head)?;
    b.position_at_end(head);
    let d_phi = b.build_phi(i64t, "d")?;
    let off_phi = b.build_phi(i64t, "off")?;
    let d = d_phi.as_basic_value().into_int_value();
    let off = off_phi.as_basic_value().into_int_value();
    let more = b.build_int_compare(IntPredicate::SLT, d, nb, "")?;
    b.build_conditional_branch(more, body, done)?;
    b.position_at_end(body);
    let three = b.build_int_mul(d, i64t.const_int(3, false), "")?;
    let q = b.build_int_add(three, i64t.const_int(first as u64, false), "")?;
    let get = |k: u64| -> Result<IntValue, LowerError> {
        let at = b.build_int_add(q, i64t.const_int(k, false), "")?;
        // SAFETY: `d < nb <= rank`, so the triple lies inside `params`.
        let p = unsafe { b.build_in_bounds_gep(i64t, params, &[at], "")? };
        Ok(b.build_load(i64t, p, "")?.into_int_value())
    };
    let (div, ext, stride) = (get(0)?, get(1)?, get(2)?);
    let k = b.build_int_unsigned_rem(b.build_int_unsigned_div(i, div, "")?, ext, "")?;
    let off_next = b.build_int_add(off, b.build_int_mul(k, stride, "")?, "")?;
    let d_next = b.build_int_add(d, i64t.const_int(1, false), "")?;
    b.build_unconditional_branch(head)?;
    d_phi.add_incoming(&[(&i64t.const_zero(), pre), (&d_next, body)]);
    off_phi.add_incoming(&[(&i64t.const_zero(), pre), (&off_next, body)]);
    b.position_at_end(done);
    Ok(off)
}

/// Emits the kernel body `{name}.body(bufs.., params, begin, end)` for `spec` (internal,
/// `alwaysinline`; on the host its buffer parameters are `noalias`, see the module docs) with
/// the function attributes `attrs`. Returns it and, per buffer parameter, its slot in the
/// host ABI's buffer array (inputs, then the stores not written in place).
pub(crate) fn emit_body<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    spec: &KernelSpec,
    name: &str,
    attrs: &[(&str, &str)],
    target: crate::Target,
) -> Result<(FunctionValue<'ctx>, Vec<usize>), LowerError> {
    let layout = spec.layout;
    if spec.classes.len() != layout.maps.len() {
        return other("one stride class per index map is needed");
    }
    let i64t = ctx.i64_type();
    let (store_buf, outer_src) = buffer_slots(spec);
    let n_bufs = outer_src.len();
    let inner = declare_body(ctx, module, name, n_bufs, attrs, target);
    let b = ctx.create_builder();
    let e = Emit::new(ctx, &b, module, target);
    // Body.
    let param = |k: u32| {
        inner
            .get_nth_param(k)
            .ok_or_else(|| LowerError::Other("missing parameter".into()))
    };
    let bufs: Vec<PointerValue> = (0..n_bufs as u32)
        .map(|k| param(k).map(|p| p.into_pointer_value()))
        .collect::<Result<_, _>>()?;
    let params = param(n_bufs as u32)?.into_pointer_value();
    let begin = param(n_bufs as u32 + 1)?.into_int_value();
    let end = param(n_bufs as u32 + 2)?.into_int_value();
    let entry = ctx.append_basic_block(inner, "entry");
    b.position_at_end(entry);
    let load_param = |k: usize| -> Result<IntValue, LowerError> {
        // SAFETY: `params` holds `layout.param_count()` values.
        let p =
            unsafe { b.build_in_bounds_gep(i64t, params, &[i64t.const_int(k as u64, false)], "")? };
        Ok(b.build_load(i64t, p, "")?.into_int_value())
    };
    let row_len = load_param(0)?;
    let base = load_param(1)?;
    // Per map: the inner stride (for `Any`) or its table's index (for `Table`), and where its
    // triples start.
    let mut maps: Vec<MapParams> = Vec::new();
    for (m, _) in layout.maps.iter().enumerate() {
        let at = layout.map_param(m);
        let stride = match spec.classes[m] {
            StrideClass::Any | StrideClass::Table => Some(load_param(at)?),
            _ => None,
        };
        let blocks = match spec.classes[m] {
            StrideClass::Uniform => None,
            _ => Some((load_param(at + 1)?, at + 2)),
        };
        maps.push((stride, blocks));
    }
    let io = Io {
        f: inner,
        bufs,
        params,
        begin,
        end,
        row_len,
        base,
        store_buf,
    };
    match target {
        crate::Target::Host => rows_incremental(&e, spec, &io, &maps)?,
        crate::Target::Gpu => rows_by_division(&e, spec, &io, &maps)?,
    }
    Ok((inner, outer_src))
}

/// The kernel body's arguments and per-launch parameters.
struct Io<'ctx> {
    f: FunctionValue<'ctx>,
    bufs: Vec<PointerValue<'ctx>>,
    params: PointerValue<'ctx>,
    begin: IntValue<'ctx>,
    end: IntValue<'ctx>,
    row_len: IntValue<'ctx>,
    base: IntValue<'ctx>,
    store_buf: Vec<usize>,
}

/// Emits each map's offset at flat index `i` from its triples (divisions), zero for a
/// uniform map.
fn offsets_at<'ctx>(
    e: &Emit<'_, 'ctx>,
    io: &Io<'ctx>,
    maps: &[MapParams<'ctx>],
    i: IntValue<'ctx>,
) -> Result<Vec<IntValue<'ctx>>, LowerError> {
    maps.iter()
        .map(|(_, blocks)| match blocks {
            Some((nb, first)) => map_offset(e.ctx, e.b, io.f, io.params, i, *nb, *first),
            None => Ok(e.ctx.i64_type().const_zero()),
        })
        .collect()
}

/// Emits the element loop of one row: `j` from `j0` to `count`, the flat index `rs + j`, the
/// maps' offsets `off_m + j · s_m`. On the host the row is two loops: its first multiple of
/// [`TAIL`] elements, vectorized as LLVM chooses, then the rest, vectorized with masked
/// iterations ([`crate::loop_hint::fold_tail`]): at `L = 47` with 16 lanes a scalar epilogue
/// took 15 of every 47 elements, and the RoPE trial step's softmax fusions ran 3–4 × as long
/// as at `L = 48`. The builder is left in the block after the loops.
fn element_loop<'ctx>(
    e: &Emit<'_, 'ctx>,
    spec: &KernelSpec,
    io: &Io<'ctx>,
    maps: &[MapParams<'ctx>],
    (rs, j0, count): (IntValue<'ctx>, IntValue<'ctx>, IntValue<'ctx>),
    map_off: &[IntValue<'ctx>],
) -> Result<(), LowerError> {
    if e.gpu() {
        return element_range(e, spec, io, maps, (rs, j0, count), map_off, false);
    }
    let b = e.b;
    let i64t = e.ctx.i64_type();
    // mid = j0 + (max(count − j0, 0) & −TAIL)
    let n = b.build_int_sub(count, j0, "")?;
    let pos = b.build_int_compare(IntPredicate::SGT, n, i64t.const_zero(), "")?;
    let n = b
        .build_select(pos, n, i64t.const_zero(), "")?
        .into_int_value();
    let whole = b.build_and(n, i64t.const_int((-(TAIL as i64)) as u64, true), "")?;
    let mid = b.build_int_add(j0, whole, "")?;
    element_range(e, spec, io, maps, (rs, j0, mid), map_off, false)?;
    // The remainder loop behind its own test, so that rows without a remainder skip its
    // set-up (the masks, the trip count) too.
    let rest = e.ctx.append_basic_block(io.f, "elem.rest");
    let after = e.ctx.append_basic_block(io.f, "elem.after");
    let any = b.build_int_compare(IntPredicate::SLT, mid, count, "")?;
    b.build_conditional_branch(any, rest, after)?;
    b.position_at_end(rest);
    element_range(e, spec, io, maps, (rs, mid, count), map_off, true)?;
    b.build_unconditional_branch(after)?;
    b.position_at_end(after);
    Ok(())
}

/// The rows' element loops are split at a multiple of this many elements (four vectors of 16
/// lanes): below it, the masked remainder loop.
const TAIL: u64 = 64;

/// One loop of [`element_loop`]: `j` from `j0` to `count`; `fold` marks it for a masked tail.
fn element_range<'ctx>(
    e: &Emit<'_, 'ctx>,
    spec: &KernelSpec,
    io: &Io<'ctx>,
    maps: &[MapParams<'ctx>],
    (rs, j0, count): (IntValue<'ctx>, IntValue<'ctx>, IntValue<'ctx>),
    map_off: &[IntValue<'ctx>],
    fold: bool,
) -> Result<(), LowerError> {
    let (ctx, b) = (e.ctx, e.b);
    let i64t = ctx.i64_type();
    let pre = current_block(b)?;
    let head = ctx.append_basic_block(io.f, "elem");
    let body = ctx.append_basic_block(io.f, "elem.body");
    let done = ctx.append_basic_block(io.f, "elem.done");
    b.build_unconditional_branch(head)?;
    b.position_at_end(head);
    let j_phi = b.build_phi(i64t, "j")?;
    let j = j_phi.as_basic_value().into_int_value();
    let more = b.build_int_compare(IntPredicate::SLT, j, count, "")?;
    b.build_conditional_branch(more, body, done)?;
    b.position_at_end(body);
    let row = Row {
        bufs: io.bufs.clone(),
        idx: b.build_int_add(rs, j, "")?,
        j,
        map_off: map_off.to_vec(),
        map_stride: maps.iter().map(|(s, _)| *s).collect(),
        params: io.params,
    };
    element(e, spec, &row, &io.store_buf, io.base)?;
    let j_next = b.build_int_add(j, i64t.const_int(1, false), "")?;
    let body_end = current_block(b)?;
    let latch = b.build_unconditional_branch(head)?;
    if fold {
        crate::loop_hint::fold_tail(ctx, latch);
    }
    j_phi.add_incoming(&[(&j0, pre), (&j_next, body_end)]);
    b.position_at_end(done);
    Ok(())
}

/// The row loop with every row's map offsets computed from the triples (one division and
/// one remainder per block per row): the GPU kernel's (one element per thread).
fn rows_by_division<'ctx>(
    e: &Emit<'_, 'ctx>,
    spec: &KernelSpec,
    io: &Io<'ctx>,
    maps: &[MapParams<'ctx>],
) -> Result<(), LowerError> {
    let (ctx, b) = (e.ctx, e.b);
    let i64t = ctx.i64_type();
    let entry = current_block(b)?;
    let row_head = ctx.append_basic_block(io.f, "row");
    let row_body = ctx.append_basic_block(io.f, "row.body");
    let exit = ctx.append_basic_block(io.f, "exit");
    b.build_unconditional_branch(row_head)?;
    // row loop: i from begin to end, in rows of `row_len`
    b.position_at_end(row_head);
    let i_phi = b.build_phi(i64t, "i")?;
    let i = i_phi.as_basic_value().into_int_value();
    let more = b.build_int_compare(IntPredicate::SLT, i, io.end, "")?;
    b.build_conditional_branch(more, row_body, exit)?;
    b.position_at_end(row_body);
    let q = b.build_int_unsigned_div(i, io.row_len, "")?;
    let next = b.build_int_mul(
        b.build_int_add(q, i64t.const_int(1, false), "")?,
        io.row_len,
        "",
    )?;
    let before_end = b.build_int_compare(IntPredicate::SLT, next, io.end, "")?;
    let row_end = b
        .build_select(before_end, next, io.end, "")?
        .into_int_value();
    let count = b.build_int_sub(row_end, i, "")?;
    let map_off = offsets_at(e, io, maps, i)?;
    element_loop(e, spec, io, maps, (i, i64t.const_zero(), count), &map_off)?;
    let latch = current_block(b)?;
    b.build_unconditional_branch(row_head)?;
    i_phi.add_incoming(&[(&io.begin, entry), (&row_end, latch)]);
    b.position_at_end(exit);
    b.build_return(None)?;
    Ok(())
}

/// The host's row loop: rows are the multiples of `L`; the maps' offsets are computed from
/// the triples at the launch's first row only, then advanced row by row through the outer
/// dimensions (an odometer: the first counter that does not wrap steps, and each map's
/// offset moves by that dimension's carry delta). With `K = 0` every row's offsets are
/// computed from the triples.
fn rows_incremental<'ctx>(
    e: &Emit<'_, 'ctx>,
    spec: &KernelSpec,
    io: &Io<'ctx>,
    maps: &[MapParams<'ctx>],
) -> Result<(), LowerError> {
    let (ctx, b) = (e.ctx, e.b);
    let i64t = ctx.i64_type();
    let (zero, one) = (i64t.const_zero(), i64t.const_int(1, false));
    let layout = spec.layout;
    let cap = layout.outer_capacity();
    let outer = layout.outer_param();
    let c = |v: usize| i64t.const_int(v as u64, false);
    let load_at = |at: IntValue<'ctx>| -> Result<IntValue<'ctx>, LowerError> {
        // SAFETY: every index loaded lies in the outer section of `params`
        // (`layout.param_count()` values).
        let p = unsafe { b.build_in_bounds_gep(i64t, io.params, &[at], "")? };
        Ok(b.build_load(i64t, p, "")?.into_int_value())
    };
    let k = load_at(c(outer))?;
    let cnt = b.build_array_alloca(i64t, c(cap.max(1)), "cnt")?;
    let cnt_at = |d: IntValue<'ctx>| -> Result<PointerValue<'ctx>, LowerError> {
        // SAFETY: `d < K <= cap`.
        Ok(unsafe { b.build_in_bounds_gep(i64t, cnt, &[d], "")? })
    };
    let extent = |d: IntValue<'ctx>| -> Result<IntValue<'ctx>, LowerError> {
        load_at(b.build_int_add(d, c(outer + 1), "")?)
    };
    // Counters of the launch's first row.
    let q0 = b.build_int_unsigned_div(io.begin, io.row_len, "")?;
    let rs0 = b.build_int_mul(q0, io.row_len, "")?;
    let entry = current_block(b)?;
    let init_head = ctx.append_basic_block(io.f, "init");
    let init_body = ctx.append_basic_block(io.f, "init.body");
    let init_done = ctx.append_basic_block(io.f, "init.done");
    b.build_unconditional_branch(init_head)?;
    b.position_at_end(init_head);
    let d_phi = b.build_phi(i64t, "d")?;
    let q_phi = b.build_phi(i64t, "q")?;
    let (d, q) = (
        d_phi.as_basic_value().into_int_value(),
        q_phi.as_basic_value().into_int_value(),
    );
    let more = b.build_int_compare(IntPredicate::SLT, d, k, "")?;
    b.build_conditional_branch(more, init_body, init_done)?;
    b.position_at_end(init_body);
    let ext = extent(d)?;
    b.build_store(cnt_at(d)?, b.build_int_unsigned_rem(q, ext, "")?)?;
    let q_next = b.build_int_unsigned_div(q, ext, "")?;
    let d_next = b.build_int_add(d, one, "")?;
    b.build_unconditional_branch(init_head)?;
    d_phi.add_incoming(&[(&zero, entry), (&d_next, init_body)]);
    q_phi.add_incoming(&[(&q0, entry), (&q_next, init_body)]);
    b.position_at_end(init_done);
    let off0 = offsets_at(e, io, maps, rs0)?;
    let init_end = current_block(b)?;
    // Row loop.
    let row_head = ctx.append_basic_block(io.f, "row");
    let row_body = ctx.append_basic_block(io.f, "row.body");
    let recompute = ctx.append_basic_block(io.f, "row.recompute");
    let ready = ctx.append_basic_block(io.f, "row.ready");
    let exit = ctx.append_basic_block(io.f, "exit");
    b.build_unconditional_branch(row_head)?;
    b.position_at_end(row_head);
    let rs_phi = b.build_phi(i64t, "rs")?;
    let rs = rs_phi.as_basic_value().into_int_value();
    let off_phis = (0..maps.len())
        .map(|_| b.build_phi(i64t, "off"))
        .collect::<Result<Vec<_>, _>>()?;
    let more = b.build_int_compare(IntPredicate::SLT, rs, io.end, "")?;
    b.build_conditional_branch(more, row_body, exit)?;
    b.position_at_end(row_body);
    let after = b.build_int_compare(IntPredicate::SGT, io.begin, rs, "")?;
    let j0 = b
        .build_select(after, b.build_int_sub(io.begin, rs, "")?, zero, "")?
        .into_int_value();
    let left = b.build_int_sub(io.end, rs, "")?;
    let short = b.build_int_compare(IntPredicate::SLT, left, io.row_len, "")?;
    let count = b
        .build_select(short, left, io.row_len, "")?
        .into_int_value();
    let none = b.build_int_compare(IntPredicate::EQ, k, zero, "")?;
    b.build_conditional_branch(none, recompute, ready)?;
    b.position_at_end(recompute);
    let offr = offsets_at(e, io, maps, rs)?;
    let recompute_end = current_block(b)?;
    b.build_unconditional_branch(ready)?;
    b.position_at_end(ready);
    let mut off_row = Vec::with_capacity(maps.len());
    for (m, ph) in off_phis.iter().enumerate() {
        let p = b.build_phi(i64t, "off.row")?;
        p.add_incoming(&[
            (&ph.as_basic_value().into_int_value(), row_body),
            (&offr[m], recompute_end),
        ]);
        off_row.push(p.as_basic_value().into_int_value());
    }
    element_loop(e, spec, io, maps, (rs, j0, count), &off_row)?;
    // Latch: the odometer over the outer dimensions.
    let rs_next = b.build_int_add(rs, io.row_len, "")?;
    let latch = current_block(b)?;
    let carry_head = ctx.append_basic_block(io.f, "carry");
    let carry_body = ctx.append_basic_block(io.f, "carry.body");
    let carry_wrap = ctx.append_basic_block(io.f, "carry.wrap");
    let carry_step = ctx.append_basic_block(io.f, "carry.step");
    let next = ctx.append_basic_block(io.f, "row.next");
    b.build_unconditional_branch(carry_head)?;
    b.position_at_end(carry_head);
    let cd_phi = b.build_phi(i64t, "cd")?;
    let cd = cd_phi.as_basic_value().into_int_value();
    let more = b.build_int_compare(IntPredicate::SLT, cd, k, "")?;
    b.build_conditional_branch(more, carry_body, next)?;
    b.position_at_end(carry_body);
    let stepped = b.build_int_add(
        b.build_load(i64t, cnt_at(cd)?, "")?.into_int_value(),
        one,
        "",
    )?;
    let fits = b.build_int_compare(IntPredicate::SLT, stepped, extent(cd)?, "")?;
    b.build_conditional_branch(fits, carry_step, carry_wrap)?;
    b.position_at_end(carry_wrap);
    b.build_store(cnt_at(cd)?, zero)?;
    let cd_next = b.build_int_add(cd, one, "")?;
    b.build_unconditional_branch(carry_head)?;
    cd_phi.add_incoming(&[(&zero, latch), (&cd_next, carry_wrap)]);
    b.position_at_end(carry_step);
    b.build_store(cnt_at(cd)?, stepped)?;
    let mut off_step = Vec::with_capacity(maps.len());
    for (m, (_, blocks)) in maps.iter().enumerate() {
        off_step.push(match blocks {
            Some(_) => {
                let at = b.build_int_add(cd, c(outer + 1 + cap + m * cap), "")?;
                b.build_int_add(off_row[m], load_at(at)?, "")?
            }
            None => off_row[m],
        });
    }
    b.build_unconditional_branch(next)?;
    b.position_at_end(next);
    for (m, ph) in off_phis.iter().enumerate() {
        let p = b.build_phi(i64t, "off.next")?;
        p.add_incoming(&[(&off_row[m], carry_head), (&off_step[m], carry_step)]);
        ph.add_incoming(&[
            (&off0[m], init_end),
            (&p.as_basic_value().into_int_value(), next),
        ]);
    }
    b.build_unconditional_branch(row_head)?;
    rs_phi.add_incoming(&[(&rs0, init_end), (&rs_next, next)]);
    b.position_at_end(exit);
    b.build_return(None)?;
    Ok(())
}
