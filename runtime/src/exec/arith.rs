//! Typed arithmetic for the elementwise kernels: the float (`Real`) and integer (`IntOps`)
//! operations with StableHLO/XLA semantics, the per-op dispatch macros that give every op its
//! own inlined loop, and the parallel map helpers.
//!
//! Invariant: the helpers split large inputs over threads by element ranges only, so element
//! `i` of a result depends only on element `i` of the operands.

use super::par;
use crate::error::OpError;
use crate::tensor::Elem;
use ebb_ir::{DType, OpKind};

pub(crate) fn unsupported_dtype(dtype: DType, kind: OpKind) -> OpError {
    OpError::DType {
        dtype,
        what: format!(" by `{kind}`"),
    }
}

/// `f(x)` for every element, in parallel for large inputs.
pub(crate) fn map1<T: Copy + Sync, U: Copy + Default + Send>(
    v: &[T],
    f: impl Fn(T) -> U + Sync + Send,
) -> Vec<U> {
    let mut out = vec![U::default(); v.len()];
    par::elements(&mut out, &|s, o| {
        for (d, &x) in o.iter_mut().zip(&v[s..]) {
            *d = f(x);
        }
    });
    out
}

/// `f(a, b)` for every pair of elements, in parallel for large inputs.
pub(crate) fn map2<T: Copy + Sync, S: Copy + Sync, U: Copy + Default + Send>(
    a: &[T],
    b: &[S],
    f: impl Fn(T, S) -> U + Sync + Send,
) -> Vec<U> {
    let mut out = vec![U::default(); a.len().min(b.len())];
    map2_to(a, b, &mut out, f);
    out
}

/// `out[i] = f(a[i], b[i])` for every element of `out` (at most as long as `a` and `b`), in
/// parallel for large outputs: [`map2`] into a buffer the caller has (stale contents are
/// overwritten).
pub(crate) fn map2_to<T: Copy + Sync, S: Copy + Sync, U: Copy + Send>(
    a: &[T],
    b: &[S],
    out: &mut [U],
    f: impl Fn(T, S) -> U + Sync + Send,
) {
    par::elements(out, &|s, o| {
        for ((d, &x), &y) in o.iter_mut().zip(&a[s..]).zip(&b[s..]) {
            *d = f(x, y);
        }
    });
}

/// `out[i] = f(v[i])` for every element of `out` (at most as long as `v`), in parallel for
/// large outputs: [`map1`] into a buffer the caller has (stale contents are overwritten).
pub(crate) fn map1_to<T: Copy + Sync, U: Copy + Send>(
    v: &[T],
    out: &mut [U],
    f: impl Fn(T) -> U + Sync + Send,
) {
    par::elements(out, &|s, o| {
        for (d, &x) in o.iter_mut().zip(&v[s..]) {
            *d = f(x);
        }
    });
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
    fn tan_(self) -> Self;
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
            fn tan_(self) -> Self {
                self.tan()
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
            Tan => Some($apply($($arg,)* <$T as Real>::tan_)),
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

pub(crate) fn unary_real<T: Real>(k: OpKind, v: &[T]) -> Result<Vec<T>, OpError> {
    unary_real_match!(k, T, map1, v).ok_or_else(|| unsupported_dtype(T::DTYPE, k))
}

pub(crate) fn binary_real<T: Real>(k: OpKind, a: &[T], b: &[T]) -> Result<Vec<T>, OpError> {
    binary_real_match!(k, T, map2, a, b).ok_or_else(|| unsupported_dtype(T::DTYPE, k))
}

/// `v[i] = f(v[i])`, in parallel for large inputs.
pub(crate) fn map1_inplace<T: Copy + Send + Sync>(v: &mut [T], f: impl Fn(T) -> T + Sync + Send) {
    par::elements(v, &|_, c| c.iter_mut().for_each(|x| *x = f(*x)));
}

/// `a[i] = f(a[i], b[i])`.
pub(crate) fn map2_into_a<T: Copy + Send + Sync>(
    a: &mut [T],
    b: &[T],
    f: impl Fn(T, T) -> T + Sync + Send,
) {
    par::elements(a, &|s, c| {
        c.iter_mut().zip(&b[s..]).for_each(|(x, &y)| *x = f(*x, y))
    });
}

/// `b[i] = f(a[i], b[i])`.
pub(crate) fn map2_into_b<T: Copy + Send + Sync>(
    a: &[T],
    b: &mut [T],
    f: impl Fn(T, T) -> T + Sync + Send,
) {
    par::elements(b, &|s, c| {
        c.iter_mut().zip(&a[s..]).for_each(|(y, &x)| *y = f(x, *y))
    });
}

/// Integer arithmetic with XLA's wrapping and division-by-zero semantics.
pub trait IntOps: Elem + Ord {
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
impl_int!(u64, i64, u64, false);

pub(crate) fn unary_int<T: IntOps>(k: OpKind, v: &[T]) -> Result<Vec<T>, OpError> {
    use OpKind::*;
    Ok(match k {
        Abs => map1(v, T::wabs),
        Negate => map1(v, T::wneg),
        Sign => map1(v, T::sgn),
        Not => map1(v, T::bnot),
        _ => return Err(unsupported_dtype(T::DTYPE, k)),
    })
}

pub(crate) fn binary_int<T: IntOps>(k: OpKind, a: &[T], b: &[T]) -> Result<Vec<T>, OpError> {
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

pub(crate) use {binary_real_match, unary_real_match};
