//! Elementwise kernels: unary and binary arithmetic, `compare`, `select`, `clamp` and
//! `convert` over every element type (StableHLO spec, section "Ops").
//!
//! Floats: `f32` and `f64` natively; `bf16` and `f16` are computed in `f32` and rounded to
//! nearest even after every op, as XLA's CPU backend does. `maximum`/`minimum` propagate NaN.
//! Integers: `add`/`subtract`/`multiply` wrap; `divide` by zero gives -1 (all bits set) and
//! `remainder` by zero the dividend, `INT_MIN / -1` gives `INT_MIN` (XLA semantics); shifts by
//! at least the bit width give 0 (or the sign for arithmetic shifts). Booleans support the
//! logical ops, `maximum` (or) and `minimum` (and).
//!
//! The typed arithmetic lives in `arith.rs`, the vector `exp`/`tanh`/`log1p` in `fastmath.rs`; this
//! file dispatches on element types and reuses the buffer of an operand that dies at the op;
//! `claimed.rs` writes float arithmetic straight into the result's arena range.
//!
//! Invariant: element `i` of the result depends only on element `i` of the operands, so the
//! rayon split of large tensors ([`par::PAR_MIN`]) cannot change any bit of the result.

use super::arith::{
    binary_int, binary_real, binary_real_match, map1, map1_inplace, map2, map2_into_a, map2_into_b,
    unary_int, unary_real, unary_real_match, unsupported_dtype, Real,
};
use super::par;
use super::{arity, Ctx};
use crate::buffer::Buf;
use crate::error::{invalid, OpError};
use crate::tensor::{Data, Elem, Tensor};
use ebb_ir::op::ReducePrecisionSpec;
use ebb_ir::{DType, Op, OpKind, Relation};
use half::{bf16, f16};
use std::cmp::Ordering;

/// Runs an elementwise op.
pub(crate) fn run(ctx: &Ctx, ops: Vec<Tensor>) -> Result<Tensor, OpError> {
    let kind = ctx.node.kind();
    let out = ctx.out0()?;
    let data = match &ctx.node.op {
        Op::Convert(_) => {
            arity(&ops, 1, kind)?;
            convert(ops[0].data(), out.dtype)
        }
        Op::BitcastConvert(to) => {
            arity(&ops, 1, kind)?;
            ops[0].data().bitcast(*to).ok_or_else(|| {
                OpError::Invalid(format!(
                    "bitcast_convert from {} to {to}: element sizes differ",
                    ops[0].dtype()
                ))
            })?
        }
        Op::ReducePrecision(spec) => {
            arity(&ops, 1, kind)?;
            reduce_precision(spec, ops[0].data())?
        }
        Op::Select => {
            arity(&ops, 3, kind)?;
            match select_in_place(ops) {
                Ok(d) => d,
                Err(ops) => select(&ops[0], &ops[1], &ops[2])?,
            }
        }
        Op::Clamp => {
            arity(&ops, 3, kind)?;
            clamp(&ops[0], &ops[1], &ops[2])?
        }
        Op::Compare(spec) => {
            arity(&ops, 2, kind)?;
            same_shape(&ops[0], &ops[1])?;
            compare(
                ops[0].data(),
                ops[1].data(),
                spec.direction,
                spec.total_order(),
            )?
        }
        _ if kind.is_unary_elementwise() => {
            arity(&ops, 1, kind)?;
            if let Some(d) = super::claimed::into_claimed(ctx, kind, &ops) {
                return Ok(Tensor::from_parts(out.shape.as_slice(), d));
            }
            match try_in_place(kind, ops) {
                Ok(d) => d,
                Err(ops) => unary(kind, ops[0].data())?,
            }
        }
        _ if kind.is_binary_elementwise() => {
            arity(&ops, 2, kind)?;
            same_shape(&ops[0], &ops[1])?;
            if let Some(d) = super::claimed::into_claimed(ctx, kind, &ops) {
                return Ok(Tensor::from_parts(out.shape.as_slice(), d));
            }
            match try_in_place(kind, ops) {
                Ok(d) => d,
                Err(ops) => binary(kind, ops[0].data(), ops[1].data())?,
            }
        }
        _ => return Err(OpError::Unsupported(format!("`{kind}` is not elementwise"))),
    };
    Ok(Tensor::from_parts(out.shape.as_slice(), data))
}

/// `add(a, b)` of two tensors of one shape and type, as the `add` op computes it (into the
/// buffer of an operand held nowhere else, when there is one): the second step of a
/// dot-accumulate whose product the kernel cannot add into the accumulator directly.
pub(crate) fn add(a: Tensor, b: Tensor) -> Result<Data, OpError> {
    same_shape(&a, &b)?;
    match try_in_place(OpKind::Add, vec![a, b]) {
        Ok(d) => Ok(d),
        Err(ops) => binary(OpKind::Add, ops[0].data(), ops[1].data()),
    }
}

fn same_shape(a: &Tensor, b: &Tensor) -> Result<(), OpError> {
    if !super::same_dims(a.shape(), b.shape()) {
        return invalid(format!(
            "operand shapes differ: {:?} vs {:?}",
            a.shape(),
            b.shape()
        ));
    }
    Ok(())
}

/// Float ops on `f32`/`f64` operands whose buffer is not shared (this op is their last use):
/// the result is written into that buffer instead of a new one. Gives the operands back when
/// the op does not qualify.
fn try_in_place(k: OpKind, ops: Vec<Tensor>) -> Result<Data, Vec<Tensor>> {
    fn un<T: Real>(k: OpKind, mut v: Buf<T>) -> Result<Buf<T>, Buf<T>> {
        match unary_real_match!(k, T, map1_inplace, &mut v) {
            Some(()) => Ok(v),
            None => Err(v),
        }
    }
    fn bin<T: Real>(k: OpKind, a: &mut [T], b: &[T], into_a: bool) -> bool {
        if into_a {
            binary_real_match!(k, T, map2_into_a, a, b).is_some()
        } else {
            binary_real_match!(k, T, map2_into_b, b, a).is_some()
        }
    }
    let is_real = |d: DType| matches!(d, DType::F32 | DType::F64);
    if super::fastmath::has_kernel(k) && ops.len() == 1 && ops[0].dtype() == DType::F32 {
        let mut it = ops.into_iter();
        let Some(mut t) = it.next() else {
            return Err(Vec::new());
        };
        if let Some(Data::F32(v)) = t.unique_data_mut() {
            super::fastmath::apply_in_place(k, v);
            return t.try_into_data().map_err(|t| vec![t]);
        }
        return Err(vec![t]);
    }
    match ops.len() {
        1 if k.is_unary_elementwise()
            && k != OpKind::IsFinite
            && k != OpKind::Convert
            && is_real(ops[0].dtype()) =>
        {
            let mut it = ops.into_iter();
            let Some(t) = it.next() else {
                return Err(Vec::new());
            };
            let shape = t.shape().to_vec();
            match t.try_into_data() {
                Ok(Data::F32(v)) => un(k, v)
                    .map(Data::F32)
                    .map_err(|v| vec![Tensor::from_parts(shape, Data::F32(v))]),
                Ok(Data::F64(v)) => un(k, v)
                    .map(Data::F64)
                    .map_err(|v| vec![Tensor::from_parts(shape, Data::F64(v))]),
                Ok(d) => Err(vec![Tensor::from_parts(shape, d)]),
                Err(t) => Err(vec![t]),
            }
        }
        2 if k.is_binary_elementwise()
            && k != OpKind::Compare
            && is_real(ops[0].dtype())
            && ops[0].dtype() == ops[1].dtype()
            && ops[0].shape() == ops[1].shape() =>
        {
            let mut it = ops.into_iter();
            let (Some(mut a), Some(mut b)) = (it.next(), it.next()) else {
                return Err(Vec::new());
            };
            let into_a = a.unique_data_mut().is_some();
            if !into_a && b.unique_data_mut().is_none() {
                return Err(vec![a, b]);
            }
            let (dst, src) = if into_a { (&mut a, &b) } else { (&mut b, &a) };
            let src = src.data();
            let ok = match (dst.unique_data_mut(), src) {
                (Some(Data::F32(d)), Data::F32(s)) => bin(k, d, s, into_a),
                (Some(Data::F64(d)), Data::F64(s)) => bin(k, d, s, into_a),
                _ => false,
            };
            if !ok {
                return Err(vec![a, b]);
            }
            let out = if into_a { a } else { b };
            out.try_into_data().map_err(|t| vec![t])
        }
        _ => Err(ops),
    }
}

fn via_f32<T: Copy + Sync + Send>(v: &[T], to: fn(T) -> f32) -> Vec<f32> {
    map1(v, to)
}

/// A unary op on `f32` values (a `bf16`/`f16` operand's, rounded by the caller):
/// `exponential`, `tanh` and `log_plus_one` with the vector kernels of `fastmath.rs` (the generated kernels
/// emit the same operations), the other ops with the scalar functions.
fn unary_via_f32(k: OpKind, mut v: Vec<f32>) -> Result<Vec<f32>, OpError> {
    if super::fastmath::apply_in_place(k, &mut v) {
        Ok(v)
    } else {
        unary_real(k, &v)
    }
}

/// A unary op on any element type.
pub(crate) fn unary(k: OpKind, d: &Data) -> Result<Data, OpError> {
    if k == OpKind::IsFinite {
        return Ok(Data::I1(match d {
            Data::F32(v) => Buf::from(map1(v, |x| x.is_finite())),
            Data::F64(v) => Buf::from(map1(v, |x| x.is_finite())),
            Data::BF16(v) => Buf::from(map1(v, |x| x.is_finite())),
            Data::F16(v) => Buf::from(map1(v, |x| x.is_finite())),
            other => Buf::from(vec![true; other.len()]),
        }));
    }
    Ok(match d {
        Data::F32(v) if super::fastmath::has_kernel(k) => {
            Data::F32(Buf::from(unary_via_f32(k, v.to_vec())?))
        }
        Data::F32(v) => Data::F32(Buf::from(unary_real(k, v)?)),
        Data::F64(v) => Data::F64(Buf::from(unary_real(k, v)?)),
        Data::BF16(v) => Data::BF16(Buf::from(map1(
            &unary_via_f32(k, via_f32(v, bf16::to_f32))?,
            bf16::from_f32,
        ))),
        Data::F16(v) => Data::F16(Buf::from(map1(
            &unary_via_f32(k, via_f32(v, f16::to_f32))?,
            f16::from_f32,
        ))),
        Data::I8(v) => Data::I8(Buf::from(unary_int(k, v)?)),
        Data::I16(v) => Data::I16(Buf::from(unary_int(k, v)?)),
        Data::I32(v) => Data::I32(Buf::from(unary_int(k, v)?)),
        Data::I64(v) => Data::I64(Buf::from(unary_int(k, v)?)),
        Data::U8(v) => Data::U8(Buf::from(unary_int(k, v)?)),
        Data::U32(v) => Data::U32(Buf::from(unary_int(k, v)?)),
        Data::U64(v) => Data::U64(Buf::from(unary_int(k, v)?)),
        Data::I1(v) => match k {
            OpKind::Not => Data::I1(Buf::from(map1(v, |x| !x))),
            _ => return Err(unsupported_dtype(DType::I1, k)),
        },
    })
}

/// A binary op on two data of the same element type (compare excluded).
pub fn binary(k: OpKind, a: &Data, b: &Data) -> Result<Data, OpError> {
    use OpKind::*;
    Ok(match (a, b) {
        (Data::F32(x), Data::F32(y)) => Data::F32(Buf::from(binary_real(k, x, y)?)),
        (Data::F64(x), Data::F64(y)) => Data::F64(Buf::from(binary_real(k, x, y)?)),
        (Data::BF16(x), Data::BF16(y)) => {
            let r = binary_real(k, &via_f32(x, bf16::to_f32), &via_f32(y, bf16::to_f32))?;
            Data::BF16(Buf::from(map1(&r, bf16::from_f32)))
        }
        (Data::F16(x), Data::F16(y)) => {
            let r = binary_real(k, &via_f32(x, f16::to_f32), &via_f32(y, f16::to_f32))?;
            Data::F16(Buf::from(map1(&r, f16::from_f32)))
        }
        (Data::I8(x), Data::I8(y)) => Data::I8(Buf::from(binary_int(k, x, y)?)),
        (Data::I16(x), Data::I16(y)) => Data::I16(Buf::from(binary_int(k, x, y)?)),
        (Data::I32(x), Data::I32(y)) => Data::I32(Buf::from(binary_int(k, x, y)?)),
        (Data::I64(x), Data::I64(y)) => Data::I64(Buf::from(binary_int(k, x, y)?)),
        (Data::U8(x), Data::U8(y)) => Data::U8(Buf::from(binary_int(k, x, y)?)),
        (Data::U32(x), Data::U32(y)) => Data::U32(Buf::from(binary_int(k, x, y)?)),
        (Data::U64(x), Data::U64(y)) => Data::U64(Buf::from(binary_int(k, x, y)?)),
        (Data::I1(x), Data::I1(y)) => Data::I1(match k {
            And | Minimum | Multiply => Buf::from(map2(x, y, |p, q| p & q)),
            Or | Maximum | Add => Buf::from(map2(x, y, |p, q| p | q)),
            Xor | Subtract => Buf::from(map2(x, y, |p, q| p ^ q)),
            _ => return Err(unsupported_dtype(DType::I1, k)),
        }),
        _ => {
            return invalid(format!(
                "operand element types differ: {} vs {}",
                a.dtype(),
                b.dtype()
            ))
        }
    })
}

/// The test of `compare` in direction `dir` on a partial ordering.
pub(crate) fn cmp_fn(dir: Relation) -> fn(Option<Ordering>) -> bool {
    match dir {
        Relation::Eq => |o| o == Some(Ordering::Equal),
        Relation::Ne => |o| o != Some(Ordering::Equal),
        Relation::Lt => |o| o == Some(Ordering::Less),
        Relation::Le => |o| matches!(o, Some(Ordering::Less | Ordering::Equal)),
        Relation::Gt => |o| o == Some(Ordering::Greater),
        Relation::Ge => |o| matches!(o, Some(Ordering::Greater | Ordering::Equal)),
    }
}

/// `compare` of two elements by test `f` ([`cmp_fn`]): in the IEEE total order of their `f64`
/// values for `total` floats, else by `partial_cmp` (NaN unordered).
#[inline]
pub(crate) fn cmp_elem<T: Elem>(x: T, y: T, f: fn(Option<Ordering>) -> bool, total: bool) -> bool {
    if total && T::DTYPE.is_float() {
        f(Some(x.to_f64().total_cmp(&y.to_f64())))
    } else {
        f(x.partial_cmp(&y))
    }
}

fn cmp_slices<T: Elem>(
    a: &[T],
    b: &[T],
    f: fn(Option<Ordering>) -> bool,
    total: bool,
) -> Vec<bool> {
    map2(a, b, |x, y| cmp_elem(x, y, f, total))
}

/// `compare` in direction `dir` (`EQ`, `NE`, `LT`, `LE`, `GT`, `GE`); `total` selects the IEEE
/// total order for floats (`compare_type = TOTALORDER`), otherwise NaN compares unordered.
pub fn compare(a: &Data, b: &Data, dir: Relation, total: bool) -> Result<Data, OpError> {
    let f = cmp_fn(dir);
    crate::tensor::zip_with!(a, b, x, y => Data::I1(Buf::from(cmp_slices(x, y, f, total))))
        .ok_or_else(|| {
            OpError::Invalid(format!(
                "operand element types differ: {} vs {}",
                a.dtype(),
                b.dtype()
            ))
        })
}

/// `reduce_precision` on a float tensor (each element through
/// [`ReducePrecisionSpec::apply_bits`] on its own bits, so `bf16`/`f16` are reduced in their
/// own format, as XLA does).
fn reduce_precision(spec: &ReducePrecisionSpec, d: &Data) -> Result<Data, OpError> {
    Ok(match d {
        Data::F32(v) => Data::F32(Buf::from(map1(v, |x| spec.apply_f32(x)))),
        Data::F64(v) => Data::F64(Buf::from(map1(v, |x| spec.apply_f64(x)))),
        Data::BF16(v) => Data::BF16(Buf::from(map1(v, |x| {
            bf16::from_bits(spec.apply_bits(x.to_bits().into(), 16, 7) as u16)
        }))),
        Data::F16(v) => Data::F16(Buf::from(map1(v, |x| {
            f16::from_bits(spec.apply_bits(x.to_bits().into(), 16, 10) as u16)
        }))),
        other => {
            return Err(OpError::Unsupported(format!(
                "reduce_precision on {} (not a float)",
                other.dtype()
            )))
        }
    })
}

fn convert(d: &Data, to: DType) -> Data {
    d.convert(to)
}

/// `select` on `f32` with a full predicate, writing into `on_true` or `on_false` when this
/// op is its last use; gives the operands back otherwise.
fn select_in_place(ops: Vec<Tensor>) -> Result<Data, Vec<Tensor>> {
    let ok = ops.len() == 3
        && ops[0].dtype() == DType::I1
        && ops[0].shape() == ops[1].shape()
        && ops[1].shape() == ops[2].shape()
        && ops[1].dtype() == DType::F32
        && ops[2].dtype() == DType::F32;
    if !ok {
        return Err(ops);
    }
    let mut it = ops.into_iter();
    let (Some(p), Some(mut t), Some(mut f)) = (it.next(), it.next(), it.next()) else {
        return Err(Vec::new());
    };
    let into_t = t.unique_data_mut().is_some();
    if !into_t && f.unique_data_mut().is_none() {
        return Err(vec![p, t, f]);
    }
    let Data::I1(pv) = p.data() else {
        return Err(vec![p, t, f]);
    };
    let (dst, src) = if into_t { (&mut t, &f) } else { (&mut f, &t) };
    let (Some(Data::F32(d)), Data::F32(s)) = (dst.unique_data_mut(), src.data()) else {
        return Err(vec![p, t, f]);
    };
    // keep dst where the predicate selects it, take src elsewhere
    let keep_when = into_t;
    let go = |(x, (&c, &y)): (&mut f32, (&bool, &f32))| {
        if c != keep_when {
            *x = y;
        }
    };
    par::elements(d, &|at, c| {
        c.iter_mut().zip(pv[at..].iter().zip(&s[at..])).for_each(go)
    });
    let out = if into_t { t } else { f };
    out.try_into_data().map_err(|t| vec![t])
}

fn select(p: &Tensor, t: &Tensor, f: &Tensor) -> Result<Data, OpError> {
    same_shape(t, f)?;
    let Data::I1(pv) = p.data() else {
        return invalid("predicate must be i1");
    };
    if p.len() == 1 {
        return Ok(if pv[0] {
            t.data().clone()
        } else {
            f.data().clone()
        });
    }
    if p.shape() != t.shape() {
        return invalid("predicate shape differs from the operands");
    }
    crate::tensor::zip_same!(t.data(), f.data(), x, y => {
        let mut out = y.to_vec();
        par::elements(&mut out, &|s, c| {
            for ((d, &p), &a) in c.iter_mut().zip(&pv[s..]).zip(&x[s..]) {
                if p {
                    *d = a;
                }
            }
        });
        out
    })
    .ok_or_else(|| OpError::Invalid("on_true and on_false element types differ".into()))
}

fn clamp(lo: &Tensor, x: &Tensor, hi: &Tensor) -> Result<Data, OpError> {
    for b in [lo, hi] {
        if b.len() != 1 && b.shape() != x.shape() {
            return invalid("clamp bounds must be scalars or have the operand's shape");
        }
    }
    fn go<T: Elem>(lo: &[T], x: &[T], hi: &[T]) -> Vec<T> {
        let (sl, sh) = (lo.len() == 1, hi.len() == 1);
        let at = |i: usize| {
            let l = if sl { lo[0] } else { lo[i] };
            let h = if sh { hi[0] } else { hi[i] };
            x[i].max_e(l).min_e(h)
        };
        (0..x.len()).map(at).collect()
    }
    macro_rules! arms {
        ($($v:ident),*) => {
            match (lo.data(), x.data(), hi.data()) {
                $((Data::$v(l), Data::$v(v), Data::$v(h)) => Ok(Data::$v(Buf::from(go(l, v, h)))),)*
                _ => invalid("clamp operands differ in element type"),
            }
        };
    }
    arms!(F32, BF16, F16, F64, I1, I8, I16, I32, I64, U8, U32)
}
