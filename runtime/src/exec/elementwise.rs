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
//! Invariant: element `i` of the result depends only on element `i` of the operands, so the
//! rayon split of large tensors ([`PAR_MIN`]) cannot change any bit of the result.

use super::layout::PAR_MIN;
use super::{arity, Ctx};
use crate::error::{invalid, OpError};
use crate::tensor::{Data, Elem, Tensor};
use ebb_ir::{AttrsExt, DType, OpKind};
use half::{bf16, f16};
use rayon::prelude::*;
use std::cmp::Ordering;

/// Runs an elementwise op.
pub(crate) fn run(ctx: &Ctx, ops: Vec<Tensor>) -> Result<Tensor, OpError> {
    use OpKind::*;
    let kind = ctx.node.kind;
    let out = ctx.out0()?;
    let data = match kind {
        Convert => {
            arity(&ops, 1, kind)?;
            convert(ops[0].data(), out.dtype)
        }
        Select => {
            arity(&ops, 3, kind)?;
            match select_in_place(ops) {
                Ok(d) => d,
                Err(ops) => select(&ops[0], &ops[1], &ops[2])?,
            }
        }
        Clamp => {
            arity(&ops, 3, kind)?;
            clamp(&ops[0], &ops[1], &ops[2])?
        }
        Compare => {
            arity(&ops, 2, kind)?;
            same_shape(&ops[0], &ops[1])?;
            let dir = ctx.node.attrs.str(kind, "comparison_direction")?;
            let total = matches!(ctx.node.attrs.get("compare_type"), Some(ebb_ir::Attr::Str(s)) if s == "TOTALORDER");
            compare(ops[0].data(), ops[1].data(), dir, total)?
        }
        k if k.is_unary_elementwise() => {
            arity(&ops, 1, kind)?;
            match try_in_place(k, ops) {
                Ok(d) => d,
                Err(ops) => unary(k, ops[0].data())?,
            }
        }
        k if k.is_binary_elementwise() => {
            arity(&ops, 2, kind)?;
            same_shape(&ops[0], &ops[1])?;
            match try_in_place(k, ops) {
                Ok(d) => d,
                Err(ops) => binary(k, ops[0].data(), ops[1].data())?,
            }
        }
        _ => return Err(OpError::Unsupported(format!("`{kind}` is not elementwise"))),
    };
    Ok(Tensor::from_parts(out.shape.clone(), data))
}

fn same_shape(a: &Tensor, b: &Tensor) -> Result<(), OpError> {
    if a.shape() != b.shape() {
        return invalid(format!(
            "operand shapes differ: {:?} vs {:?}",
            a.shape(),
            b.shape()
        ));
    }
    Ok(())
}

fn unsupported_dtype(dtype: DType, kind: OpKind) -> OpError {
    OpError::DType {
        dtype,
        what: format!(" by `{kind}`"),
    }
}

/// `f(x)` for every element, in parallel for large inputs.
pub(crate) fn map1<T: Copy + Sync, U: Send>(v: &[T], f: impl Fn(T) -> U + Sync + Send) -> Vec<U> {
    if v.len() >= PAR_MIN {
        v.par_iter().map(|&x| f(x)).collect()
    } else {
        v.iter().map(|&x| f(x)).collect()
    }
}

/// `f(a, b)` for every pair of elements, in parallel for large inputs.
pub(crate) fn map2<T: Copy + Sync, S: Copy + Sync, U: Send>(
    a: &[T],
    b: &[S],
    f: impl Fn(T, S) -> U + Sync + Send,
) -> Vec<U> {
    if a.len() >= PAR_MIN {
        a.par_iter()
            .zip(b.par_iter())
            .map(|(&x, &y)| f(x, y))
            .collect()
    } else {
        a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
    }
}

/// Float math used by the kernels (`f32` and `f64`).
pub(crate) trait Real: Elem {
    fn abs_(self) -> Self;
    fn neg_(self) -> Self;
    fn exp_(self) -> Self;
    fn exp_m1_(self) -> Self;
    fn ln_(self) -> Self;
    fn ln_1p_(self) -> Self;
    fn logistic_(self) -> Self;
    fn sqrt_(self) -> Self;
    fn rsqrt_(self) -> Self;
    fn cbrt_(self) -> Self;
    fn tanh_(self) -> Self;
    fn sin_(self) -> Self;
    fn cos_(self) -> Self;
    fn floor_(self) -> Self;
    fn ceil_(self) -> Self;
    fn sign_(self) -> Self;
    fn round_even_(self) -> Self;
    fn round_afz_(self) -> Self;
    fn add_(self, o: Self) -> Self;
    fn sub_(self, o: Self) -> Self;
    fn mul_(self, o: Self) -> Self;
    fn div_(self, o: Self) -> Self;
    fn rem_(self, o: Self) -> Self;
    fn pow_(self, o: Self) -> Self;
    fn atan2_(self, o: Self) -> Self;
}

macro_rules! impl_real {
    ($t:ty) => {
        impl Real for $t {
            fn abs_(self) -> Self {
                self.abs()
            }
            fn neg_(self) -> Self {
                -self
            }
            fn exp_(self) -> Self {
                self.exp()
            }
            fn exp_m1_(self) -> Self {
                self.exp_m1()
            }
            fn ln_(self) -> Self {
                self.ln()
            }
            fn ln_1p_(self) -> Self {
                self.ln_1p()
            }
            fn logistic_(self) -> Self {
                1.0 / (1.0 + (-self).exp())
            }
            fn sqrt_(self) -> Self {
                self.sqrt()
            }
            fn rsqrt_(self) -> Self {
                1.0 / self.sqrt()
            }
            fn cbrt_(self) -> Self {
                self.cbrt()
            }
            fn tanh_(self) -> Self {
                self.tanh()
            }
            fn sin_(self) -> Self {
                self.sin()
            }
            fn cos_(self) -> Self {
                self.cos()
            }
            fn floor_(self) -> Self {
                self.floor()
            }
            fn ceil_(self) -> Self {
                self.ceil()
            }
            fn sign_(self) -> Self {
                if self.is_nan() || self == 0.0 {
                    self
                } else if self > 0.0 {
                    1.0
                } else {
                    -1.0
                }
            }
            fn round_even_(self) -> Self {
                self.round_ties_even()
            }
            fn round_afz_(self) -> Self {
                self.round()
            }
            fn add_(self, o: Self) -> Self {
                self + o
            }
            fn sub_(self, o: Self) -> Self {
                self - o
            }
            fn mul_(self, o: Self) -> Self {
                self * o
            }
            fn div_(self, o: Self) -> Self {
                self / o
            }
            fn rem_(self, o: Self) -> Self {
                self % o
            }
            fn pow_(self, o: Self) -> Self {
                self.powf(o)
            }
            fn atan2_(self, o: Self) -> Self {
                self.atan2(o)
            }
        }
    };
}
impl_real!(f32);
impl_real!(f64);

/// Expands to `Some($apply($args.., f))` with `f` the `Real` method of unary op `$k`, or
/// `None` for ops without a float kernel (one generic instantiation per op: inlined loops).
macro_rules! unary_real_match {
    ($k:expr, $T:ty, $apply:ident, $($arg:expr),*) => {{
        use OpKind::*;
        match $k {
            Abs => Some($apply($($arg,)* <$T as Real>::abs_)),
            Negate => Some($apply($($arg,)* <$T as Real>::neg_)),
            Exponential => Some($apply($($arg,)* <$T as Real>::exp_)),
            ExponentialMinusOne => Some($apply($($arg,)* <$T as Real>::exp_m1_)),
            Log => Some($apply($($arg,)* <$T as Real>::ln_)),
            LogPlusOne => Some($apply($($arg,)* <$T as Real>::ln_1p_)),
            Logistic => Some($apply($($arg,)* <$T as Real>::logistic_)),
            Sqrt => Some($apply($($arg,)* <$T as Real>::sqrt_)),
            Rsqrt => Some($apply($($arg,)* <$T as Real>::rsqrt_)),
            Cbrt => Some($apply($($arg,)* <$T as Real>::cbrt_)),
            Tanh => Some($apply($($arg,)* <$T as Real>::tanh_)),
            Sine => Some($apply($($arg,)* <$T as Real>::sin_)),
            Cosine => Some($apply($($arg,)* <$T as Real>::cos_)),
            Floor => Some($apply($($arg,)* <$T as Real>::floor_)),
            Ceil => Some($apply($($arg,)* <$T as Real>::ceil_)),
            Sign => Some($apply($($arg,)* <$T as Real>::sign_)),
            RoundNearestEven => Some($apply($($arg,)* <$T as Real>::round_even_)),
            RoundNearestAfz => Some($apply($($arg,)* <$T as Real>::round_afz_)),
            _ => None,
        }
    }};
}

/// As [`unary_real_match!`] for binary float ops.
macro_rules! binary_real_match {
    ($k:expr, $T:ty, $apply:ident, $($arg:expr),*) => {{
        use OpKind::*;
        match $k {
            Add => Some($apply($($arg,)* <$T as Real>::add_)),
            Subtract => Some($apply($($arg,)* <$T as Real>::sub_)),
            Multiply => Some($apply($($arg,)* <$T as Real>::mul_)),
            Divide => Some($apply($($arg,)* <$T as Real>::div_)),
            Remainder => Some($apply($($arg,)* <$T as Real>::rem_)),
            Maximum => Some($apply($($arg,)* <$T as Elem>::max_e)),
            Minimum => Some($apply($($arg,)* <$T as Elem>::min_e)),
            Power => Some($apply($($arg,)* <$T as Real>::pow_)),
            Atan2 => Some($apply($($arg,)* <$T as Real>::atan2_)),
            _ => None,
        }
    }};
}

fn unary_real<T: Real>(k: OpKind, v: &[T]) -> Result<Vec<T>, OpError> {
    unary_real_match!(k, T, map1, v).ok_or_else(|| unsupported_dtype(T::DTYPE, k))
}

fn binary_real<T: Real>(k: OpKind, a: &[T], b: &[T]) -> Result<Vec<T>, OpError> {
    binary_real_match!(k, T, map2, a, b).ok_or_else(|| unsupported_dtype(T::DTYPE, k))
}

/// `v[i] = f(v[i])`, in parallel for large inputs.
fn map1_inplace<T: Copy + Send + Sync>(v: &mut [T], f: impl Fn(T) -> T + Sync + Send) {
    if v.len() >= PAR_MIN {
        v.par_iter_mut().for_each(|x| *x = f(*x));
    } else {
        v.iter_mut().for_each(|x| *x = f(*x));
    }
}

/// `a[i] = f(a[i], b[i])`.
fn map2_into_a<T: Copy + Send + Sync>(a: &mut [T], b: &[T], f: impl Fn(T, T) -> T + Sync + Send) {
    if a.len() >= PAR_MIN {
        a.par_iter_mut()
            .zip(b.par_iter())
            .for_each(|(x, &y)| *x = f(*x, y));
    } else {
        a.iter_mut().zip(b).for_each(|(x, &y)| *x = f(*x, y));
    }
}

/// `b[i] = f(a[i], b[i])`.
fn map2_into_b<T: Copy + Send + Sync>(a: &[T], b: &mut [T], f: impl Fn(T, T) -> T + Sync + Send) {
    if a.len() >= PAR_MIN {
        b.par_iter_mut()
            .zip(a.par_iter())
            .for_each(|(y, &x)| *y = f(x, *y));
    } else {
        b.iter_mut().zip(a).for_each(|(y, &x)| *y = f(x, *y));
    }
}

/// Float ops on `f32`/`f64` operands whose buffer is not shared (this op is their last use):
/// the result is written into that buffer instead of a new one. Gives the operands back when
/// the op does not qualify.
fn try_in_place(k: OpKind, ops: Vec<Tensor>) -> Result<Data, Vec<Tensor>> {
    fn un<T: Real>(k: OpKind, mut v: Vec<T>) -> Result<Vec<T>, Vec<T>> {
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
    if matches!(k, OpKind::Exponential | OpKind::Tanh)
        && ops.len() == 1
        && ops[0].dtype() == DType::F32
    {
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

/// Integer arithmetic with XLA's wrapping and division-by-zero semantics.
pub(crate) trait IntOps: Elem + Ord {
    fn wadd(self, o: Self) -> Self;
    fn wsub(self, o: Self) -> Self;
    fn wmul(self, o: Self) -> Self;
    fn xdiv(self, o: Self) -> Self;
    fn xrem(self, o: Self) -> Self;
    fn shl(self, o: Self) -> Self;
    fn shr_l(self, o: Self) -> Self;
    fn shr_a(self, o: Self) -> Self;
    fn ipow(self, o: Self) -> Self;
    fn wabs(self) -> Self;
    fn wneg(self) -> Self;
    fn sgn(self) -> Self;
    fn bnot(self) -> Self;
    fn band(self, o: Self) -> Self;
    fn bor(self, o: Self) -> Self;
    fn bxor(self, o: Self) -> Self;
}

macro_rules! impl_int {
    ($t:ty, $s:ty, $u:ty, $signed:expr) => {
        impl IntOps for $t {
            fn wadd(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn wsub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            fn wmul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn xdiv(self, o: Self) -> Self {
                if o == 0 {
                    !0
                } else {
                    self.wrapping_div(o)
                }
            }
            fn xrem(self, o: Self) -> Self {
                if o == 0 {
                    self
                } else {
                    self.wrapping_rem(o)
                }
            }
            fn shl(self, o: Self) -> Self {
                let n = o as u64;
                if n >= <$t>::BITS as u64 {
                    0
                } else {
                    ((self as $u) << n) as $t
                }
            }
            fn shr_l(self, o: Self) -> Self {
                let n = o as u64;
                if n >= <$t>::BITS as u64 {
                    0
                } else {
                    ((self as $u) >> n) as $t
                }
            }
            fn shr_a(self, o: Self) -> Self {
                let n = (o as u64).min(<$t>::BITS as u64 - 1);
                ((self as $s) >> n) as $t
            }
            fn ipow(self, o: Self) -> Self {
                #[allow(unused_comparisons)]
                let neg = $signed && o < 0;
                if neg {
                    return match self as i64 {
                        1 => 1 as $t,
                        -1 => {
                            if (o as i64) % 2 == 0 {
                                1 as $t
                            } else {
                                self
                            }
                        }
                        _ => 0,
                    };
                }
                let (mut base, mut e, mut acc) = (self, o as u64, 1 as $t);
                while e > 0 {
                    if e & 1 == 1 {
                        acc = acc.wrapping_mul(base);
                    }
                    base = base.wrapping_mul(base);
                    e >>= 1;
                }
                acc
            }
            fn wabs(self) -> Self {
                if $signed {
                    (self as $s).wrapping_abs() as $t
                } else {
                    self
                }
            }
            fn wneg(self) -> Self {
                self.wrapping_neg()
            }
            fn sgn(self) -> Self {
                if $signed {
                    (self as $s).signum() as $t
                } else {
                    (self != 0) as $t
                }
            }
            fn bnot(self) -> Self {
                !self
            }
            fn band(self, o: Self) -> Self {
                self & o
            }
            fn bor(self, o: Self) -> Self {
                self | o
            }
            fn bxor(self, o: Self) -> Self {
                self ^ o
            }
        }
    };
}
impl_int!(i8, i8, u8, true);
impl_int!(i16, i16, u16, true);
impl_int!(i32, i32, u32, true);
impl_int!(i64, i64, u64, true);
impl_int!(u8, i8, u8, false);
impl_int!(u32, i32, u32, false);

fn unary_int<T: IntOps>(k: OpKind, v: &[T]) -> Result<Vec<T>, OpError> {
    use OpKind::*;
    Ok(match k {
        Abs => map1(v, T::wabs),
        Negate => map1(v, T::wneg),
        Sign => map1(v, T::sgn),
        Not => map1(v, T::bnot),
        _ => return Err(unsupported_dtype(T::DTYPE, k)),
    })
}

fn binary_int<T: IntOps>(k: OpKind, a: &[T], b: &[T]) -> Result<Vec<T>, OpError> {
    use OpKind::*;
    Ok(match k {
        Add => map2(a, b, T::wadd),
        Subtract => map2(a, b, T::wsub),
        Multiply => map2(a, b, T::wmul),
        Divide => map2(a, b, T::xdiv),
        Remainder => map2(a, b, T::xrem),
        Maximum => map2(a, b, Ord::max),
        Minimum => map2(a, b, Ord::min),
        Power => map2(a, b, T::ipow),
        And => map2(a, b, T::band),
        Or => map2(a, b, T::bor),
        Xor => map2(a, b, T::bxor),
        ShiftLeft => map2(a, b, T::shl),
        ShiftRightLogical => map2(a, b, T::shr_l),
        ShiftRightArithmetic => map2(a, b, T::shr_a),
        _ => return Err(unsupported_dtype(T::DTYPE, k)),
    })
}

fn via_f32<T: Copy + Sync + Send>(v: &[T], to: fn(T) -> f32) -> Vec<f32> {
    map1(v, to)
}

/// A unary op on any element type.
pub(crate) fn unary(k: OpKind, d: &Data) -> Result<Data, OpError> {
    if k == OpKind::IsFinite {
        return Ok(Data::I1(match d {
            Data::F32(v) => map1(v, |x| x.is_finite()),
            Data::F64(v) => map1(v, |x| x.is_finite()),
            Data::BF16(v) => map1(v, |x| x.is_finite()),
            Data::F16(v) => map1(v, |x| x.is_finite()),
            other => vec![true; other.len()],
        }));
    }
    Ok(match d {
        Data::F32(v) if matches!(k, OpKind::Exponential | OpKind::Tanh) => {
            let mut out = v.clone();
            super::fastmath::apply_in_place(k, &mut out);
            Data::F32(out)
        }
        Data::F32(v) => Data::F32(unary_real(k, v)?),
        Data::F64(v) => Data::F64(unary_real(k, v)?),
        Data::BF16(v) => Data::BF16(map1(
            &unary_real(k, &via_f32(v, bf16::to_f32))?,
            bf16::from_f32,
        )),
        Data::F16(v) => Data::F16(map1(
            &unary_real(k, &via_f32(v, f16::to_f32))?,
            f16::from_f32,
        )),
        Data::I8(v) => Data::I8(unary_int(k, v)?),
        Data::I16(v) => Data::I16(unary_int(k, v)?),
        Data::I32(v) => Data::I32(unary_int(k, v)?),
        Data::I64(v) => Data::I64(unary_int(k, v)?),
        Data::U8(v) => Data::U8(unary_int(k, v)?),
        Data::U32(v) => Data::U32(unary_int(k, v)?),
        Data::I1(v) => match k {
            OpKind::Not => Data::I1(map1(v, |x| !x)),
            _ => return Err(unsupported_dtype(DType::I1, k)),
        },
    })
}

/// A binary op on two data of the same element type (compare excluded).
pub(crate) fn binary(k: OpKind, a: &Data, b: &Data) -> Result<Data, OpError> {
    use OpKind::*;
    Ok(match (a, b) {
        (Data::F32(x), Data::F32(y)) => Data::F32(binary_real(k, x, y)?),
        (Data::F64(x), Data::F64(y)) => Data::F64(binary_real(k, x, y)?),
        (Data::BF16(x), Data::BF16(y)) => {
            let r = binary_real(k, &via_f32(x, bf16::to_f32), &via_f32(y, bf16::to_f32))?;
            Data::BF16(map1(&r, bf16::from_f32))
        }
        (Data::F16(x), Data::F16(y)) => {
            let r = binary_real(k, &via_f32(x, f16::to_f32), &via_f32(y, f16::to_f32))?;
            Data::F16(map1(&r, f16::from_f32))
        }
        (Data::I8(x), Data::I8(y)) => Data::I8(binary_int(k, x, y)?),
        (Data::I16(x), Data::I16(y)) => Data::I16(binary_int(k, x, y)?),
        (Data::I32(x), Data::I32(y)) => Data::I32(binary_int(k, x, y)?),
        (Data::I64(x), Data::I64(y)) => Data::I64(binary_int(k, x, y)?),
        (Data::U8(x), Data::U8(y)) => Data::U8(binary_int(k, x, y)?),
        (Data::U32(x), Data::U32(y)) => Data::U32(binary_int(k, x, y)?),
        (Data::I1(x), Data::I1(y)) => Data::I1(match k {
            And | Minimum | Multiply => map2(x, y, |p, q| p & q),
            Or | Maximum | Add => map2(x, y, |p, q| p | q),
            Xor | Subtract => map2(x, y, |p, q| p ^ q),
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

fn cmp_fn(dir: &str) -> Result<fn(Option<Ordering>) -> bool, OpError> {
    Ok(match dir {
        "EQ" => |o| o == Some(Ordering::Equal),
        "NE" => |o| o != Some(Ordering::Equal),
        "LT" => |o| o == Some(Ordering::Less),
        "LE" => |o| matches!(o, Some(Ordering::Less | Ordering::Equal)),
        "GT" => |o| o == Some(Ordering::Greater),
        "GE" => |o| matches!(o, Some(Ordering::Greater | Ordering::Equal)),
        _ => return invalid(format!("unknown comparison_direction `{dir}`")),
    })
}

fn cmp_slices<T: Elem>(
    a: &[T],
    b: &[T],
    f: fn(Option<Ordering>) -> bool,
    total: bool,
) -> Vec<bool> {
    if total && T::DTYPE.is_float() {
        map2(a, b, |x, y| f(Some(x.to_f64().total_cmp(&y.to_f64()))))
    } else {
        map2(a, b, |x, y| f(x.partial_cmp(&y)))
    }
}

/// `compare` with direction `EQ`, `NE`, `LT`, `LE`, `GT`, `GE`; `total` selects the IEEE
/// total order for floats (`compare_type = TOTALORDER`), otherwise NaN compares unordered.
pub(crate) fn compare(a: &Data, b: &Data, dir: &str, total: bool) -> Result<Data, OpError> {
    let f = cmp_fn(dir)?;
    crate::tensor::zip_with!(a, b, x, y => Data::I1(cmp_slices(x, y, f, total))).ok_or_else(|| {
        OpError::Invalid(format!(
            "operand element types differ: {} vs {}",
            a.dtype(),
            b.dtype()
        ))
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
    if d.len() >= PAR_MIN {
        d.par_iter_mut()
            .zip(pv.par_iter().zip(s.par_iter()))
            .for_each(go);
    } else {
        d.iter_mut().zip(pv.iter().zip(s.iter())).for_each(go);
    }
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
        if x.len() >= PAR_MIN {
            pv.par_iter().zip(x.par_iter()).zip(y.par_iter()).map(|((&p, &a), &b)| if p { a } else { b }).collect()
        } else {
            pv.iter().zip(x).zip(y).map(|((&p, &a), &b)| if p { a } else { b }).collect()
        }
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
                $((Data::$v(l), Data::$v(v), Data::$v(h)) => Ok(Data::$v(go(l, v, h))),)*
                _ => invalid("clamp operands differ in element type"),
            }
        };
    }
    arms!(F32, BF16, F16, F64, I1, I8, I16, I32, I64, U8, U32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_semantics_follow_xla() {
        assert_eq!(7i32.xdiv(0), -1);
        assert_eq!(i32::MIN.xdiv(-1), i32::MIN);
        assert_eq!(7i32.xrem(0), 7);
        assert_eq!(1i32.shl(40), 0);
        assert_eq!((-8i32).shr_a(40), -1);
        assert_eq!((-8i32).shr_l(1), ((-8i32 as u32) >> 1) as i32);
        assert_eq!(3i32.ipow(4), 81);
        assert_eq!(2i32.ipow(-1), 0);
        assert_eq!(7u32.xdiv(0), u32::MAX);
    }

    #[test]
    fn max_min_propagate_nan() {
        let r = binary(
            OpKind::Maximum,
            &Data::F32(vec![f32::NAN, 1.0]),
            &Data::F32(vec![0.0, 2.0]),
        )
        .unwrap();
        let Data::F32(v) = r else { panic!() };
        assert!(v[0].is_nan());
        assert_eq!(v[1], 2.0);
    }

    #[test]
    fn compare_float_and_total_order() {
        let a = Data::F32(vec![f32::NAN, 1.0, -0.0]);
        let b = Data::F32(vec![f32::NAN, 2.0, 0.0]);
        assert_eq!(
            compare(&a, &b, "EQ", false).unwrap(),
            Data::I1(vec![false, false, true])
        );
        assert_eq!(
            compare(&a, &b, "NE", false).unwrap(),
            Data::I1(vec![true, true, false])
        );
        assert_eq!(
            compare(&a, &b, "LT", true).unwrap(),
            Data::I1(vec![false, true, true])
        );
    }

    #[test]
    fn bf16_rounds_after_each_op() {
        let a = Data::BF16(vec![bf16::from_f32(1.0)]);
        let b = Data::BF16(vec![bf16::from_f32(1.0 / 512.0)]);
        assert_eq!(
            binary(OpKind::Add, &a, &b).unwrap(),
            Data::BF16(vec![bf16::from_f32(1.0)])
        );
    }
}
