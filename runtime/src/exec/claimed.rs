//! Unfused elementwise float ops written straight into their result's claimed arena range.
//!
//! In an arena-backed run ([`super::placement`]) a result computed into a buffer of its own,
//! or into the buffer of a dying operand (which lies at the operand's offset, not at the
//! result's), is copied into the result's range after the kernel: a second pass over the
//! result and, for a buffer of its own, an allocation the allocator zeroes first. The `f32`
//! and `f64` unary and binary arithmetic ops write their result into the claimed range
//! instead ([`super::Ctx::claimed`]): one pass, no allocation, no copy. A result the plan
//! writes in place into an operand ([`ebb_ir::op::in_place_writes`]) has no range of its own
//! ([`super::placement::Placement::slots`]) and takes the kernel's in-place path as before, and
//! so does every op of a run without an arena.
//!
//! Invariant: element `i` of the result is computed by the very function the other paths
//! apply to element `i` of the operands (the same `Real` method, the same vector kernel for
//! an `f32` `exponential`, `tanh` or `log_plus_one`), so the bits do not depend on the path.
//! Tested through the executor (`tests/tests/claimed_ranges.rs`).

use super::arith::{binary_real_match, map1_to, map2_to, unary_real_match, Real};
use super::Ctx;
use crate::tensor::{Data, Elem, Tensor};
use ebb_ir::{DType, OpKind};

/// The result of the elementwise op `k` on `ops` computed into its claimed range, or `None`
/// (nothing claimed, nothing computed) when the op is not `f32`/`f64` arithmetic on operands
/// of the result's type and shape, or the run has no range for the result.
pub(super) fn into_claimed(ctx: &Ctx, k: OpKind, ops: &[Tensor]) -> Option<Data> {
    let out = ctx.out0().ok()?;
    let dtype = out.dtype;
    if !matches!(dtype, DType::F32 | DType::F64)
        || ops
            .iter()
            .any(|t| t.dtype() != dtype || !super::same_dims(t.shape(), &out.shape))
    {
        return None;
    }
    let arithmetic = match ops.len() {
        1 => k.is_unary_elementwise() && unary_real_match!(k, f32, kind_only,).is_some(),
        2 => k.is_binary_elementwise() && binary_real_match!(k, f32, kind_only,).is_some(),
        _ => false,
    };
    if !arithmetic {
        return None;
    }
    let mut d = ctx.claimed(0, dtype, out.shape.iter().product())?;
    let done = match &mut d {
        // The other paths' `f32` vector kernels: a copy of the operand, then the kernel in place.
        Data::F32(o) if ops.len() == 1 && super::fastmath::has_kernel(k) => {
            match f32::slice(ops[0].data()) {
                Some(v) if v.len() == o.len() => {
                    super::par::copy(o, v);
                    super::fastmath::apply_in_place(k, o)
                }
                _ => false,
            }
        }
        Data::F32(o) => compute::<f32>(k, ops, o),
        Data::F64(o) => compute::<f64>(k, ops, o),
        _ => false,
    };
    // `done` holds for every op admitted above; the range is released otherwise.
    done.then_some(d)
}

/// Stands for a kernel in the `*_real_match!` macros: whether they name `k` at all.
fn kind_only<F>(_: F) {}

/// `k` of `ops` into `out` (as long as every operand); false when `k` is not unary or binary
/// arithmetic.
fn compute<T: Real>(k: OpKind, ops: &[Tensor], out: &mut [T]) -> bool {
    match ops {
        [a] => match T::slice(a.data()) {
            Some(v) if v.len() == out.len() => {
                unary_real_match!(k, T, map1_to, v, &mut *out).is_some()
            }
            _ => false,
        },
        [a, b] => match (T::slice(a.data()), T::slice(b.data())) {
            (Some(x), Some(y)) if x.len() == out.len() && y.len() == out.len() => {
                binary_real_match!(k, T, map2_to, x, y, &mut *out).is_some()
            }
            _ => false,
        },
        _ => false,
    }
}
