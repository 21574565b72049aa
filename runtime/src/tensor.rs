//! Host tensors: a row-major buffer of one element type with a concrete shape.
//!
//! Representation: [`Data`] is an enum of typed `Vec`s, one variant per [`DType`] (`bf16` and
//! `f16` as [`half::bf16`] / [`half::f16`], `i1` as `bool`, one byte per element as in XLA).
//! A [`Tensor`] is a shape (outermost first, up to four dimensions held inline)
//! plus an `Arc<Data>`, so cloning a tensor and reshaping it are O(1), share the buffer and
//! allocate nothing for shapes of rank up to 4; kernels that update in place
//! (`dynamic_update_slice`, `scatter`) call [`Tensor::data_mut`], which copies only when the
//! buffer is shared (copy on write).
//!
//! Invariant: `data.len() == shape.iter().product()` for every tensor (checked by
//! [`Tensor::new`]; the crate's kernels construct results through it or keep it by design).

pub use crate::buffer::Buf;
use ebb_ir::op::{f16_bits_to_f32, Literal};
use ebb_ir::DType;
use half::{bf16, f16};
use std::fmt;
use std::sync::Arc;

/// Typed element storage of a tensor (row-major). See the module docs.
#[derive(Clone, PartialEq, Debug)]
pub enum Data {
    /// `f32`.
    F32(Buf<f32>),
    /// `bf16`.
    BF16(Buf<bf16>),
    /// `f16`.
    F16(Buf<f16>),
    /// `f64`.
    F64(Buf<f64>),
    /// `i1` (boolean), one byte per element.
    I1(Buf<bool>),
    /// `i8`.
    I8(Buf<i8>),
    /// `i16`.
    I16(Buf<i16>),
    /// `i32`.
    I32(Buf<i32>),
    /// `i64`.
    I64(Buf<i64>),
    /// `ui8`.
    U8(Buf<u8>),
    /// `ui32`.
    U32(Buf<u32>),
    /// `ui64`.
    U64(Buf<u64>),
}

/// Evaluates `$e` with `$v` bound to the typed vector of `$d` (any variant); the arms must
/// have one common type.
macro_rules! dispatch {
    ($d:expr, $v:ident => $e:expr) => {
        match $d {
            $crate::tensor::Data::F32($v) => $e,
            $crate::tensor::Data::BF16($v) => $e,
            $crate::tensor::Data::F16($v) => $e,
            $crate::tensor::Data::F64($v) => $e,
            $crate::tensor::Data::I1($v) => $e,
            $crate::tensor::Data::I8($v) => $e,
            $crate::tensor::Data::I16($v) => $e,
            $crate::tensor::Data::I32($v) => $e,
            $crate::tensor::Data::I64($v) => $e,
            $crate::tensor::Data::U8($v) => $e,
            $crate::tensor::Data::U32($v) => $e,
            $crate::tensor::Data::U64($v) => $e,
        }
    };
}

/// Evaluates `$e` (a `Vec` of the same element type) for the variant of `$d` and wraps the
/// result in that variant again: element-type-preserving data movement.
macro_rules! map_same {
    ($d:expr, $v:ident => $e:expr) => {
        match $d {
            $crate::tensor::Data::F32($v) => {
                $crate::tensor::Data::F32($crate::buffer::Buf::from($e))
            }
            $crate::tensor::Data::BF16($v) => {
                $crate::tensor::Data::BF16($crate::buffer::Buf::from($e))
            }
            $crate::tensor::Data::F16($v) => {
                $crate::tensor::Data::F16($crate::buffer::Buf::from($e))
            }
            $crate::tensor::Data::F64($v) => {
                $crate::tensor::Data::F64($crate::buffer::Buf::from($e))
            }
            $crate::tensor::Data::I1($v) => $crate::tensor::Data::I1($crate::buffer::Buf::from($e)),
            $crate::tensor::Data::I8($v) => $crate::tensor::Data::I8($crate::buffer::Buf::from($e)),
            $crate::tensor::Data::I16($v) => {
                $crate::tensor::Data::I16($crate::buffer::Buf::from($e))
            }
            $crate::tensor::Data::I32($v) => {
                $crate::tensor::Data::I32($crate::buffer::Buf::from($e))
            }
            $crate::tensor::Data::I64($v) => {
                $crate::tensor::Data::I64($crate::buffer::Buf::from($e))
            }
            $crate::tensor::Data::U8($v) => $crate::tensor::Data::U8($crate::buffer::Buf::from($e)),
            $crate::tensor::Data::U32($v) => {
                $crate::tensor::Data::U32($crate::buffer::Buf::from($e))
            }
            $crate::tensor::Data::U64($v) => {
                $crate::tensor::Data::U64($crate::buffer::Buf::from($e))
            }
        }
    };
}

/// Like [`map_same!`] for two data of the same variant: `Some(wrapped $e)`, or `None` when the
/// variants differ.
macro_rules! zip_same {
    ($a:expr, $b:expr, $x:ident, $y:ident => $e:expr) => {
        match ($a, $b) {
            ($crate::tensor::Data::F32($x), $crate::tensor::Data::F32($y)) => {
                Some($crate::tensor::Data::F32($crate::buffer::Buf::from($e)))
            }
            ($crate::tensor::Data::BF16($x), $crate::tensor::Data::BF16($y)) => {
                Some($crate::tensor::Data::BF16($crate::buffer::Buf::from($e)))
            }
            ($crate::tensor::Data::F16($x), $crate::tensor::Data::F16($y)) => {
                Some($crate::tensor::Data::F16($crate::buffer::Buf::from($e)))
            }
            ($crate::tensor::Data::F64($x), $crate::tensor::Data::F64($y)) => {
                Some($crate::tensor::Data::F64($crate::buffer::Buf::from($e)))
            }
            ($crate::tensor::Data::I1($x), $crate::tensor::Data::I1($y)) => {
                Some($crate::tensor::Data::I1($crate::buffer::Buf::from($e)))
            }
            ($crate::tensor::Data::I8($x), $crate::tensor::Data::I8($y)) => {
                Some($crate::tensor::Data::I8($crate::buffer::Buf::from($e)))
            }
            ($crate::tensor::Data::I16($x), $crate::tensor::Data::I16($y)) => {
                Some($crate::tensor::Data::I16($crate::buffer::Buf::from($e)))
            }
            ($crate::tensor::Data::I32($x), $crate::tensor::Data::I32($y)) => {
                Some($crate::tensor::Data::I32($crate::buffer::Buf::from($e)))
            }
            ($crate::tensor::Data::I64($x), $crate::tensor::Data::I64($y)) => {
                Some($crate::tensor::Data::I64($crate::buffer::Buf::from($e)))
            }
            ($crate::tensor::Data::U8($x), $crate::tensor::Data::U8($y)) => {
                Some($crate::tensor::Data::U8($crate::buffer::Buf::from($e)))
            }
            ($crate::tensor::Data::U32($x), $crate::tensor::Data::U32($y)) => {
                Some($crate::tensor::Data::U32($crate::buffer::Buf::from($e)))
            }
            ($crate::tensor::Data::U64($x), $crate::tensor::Data::U64($y)) => {
                Some($crate::tensor::Data::U64($crate::buffer::Buf::from($e)))
            }
            _ => None,
        }
    };
}

/// Like [`dispatch!`] for two data of the same variant: `Some($e)` (not re-wrapped), or `None`
/// when the variants differ.
macro_rules! zip_with {
    ($a:expr, $b:expr, $x:ident, $y:ident => $e:expr) => {
        match ($a, $b) {
            ($crate::tensor::Data::F32($x), $crate::tensor::Data::F32($y)) => Some($e),
            ($crate::tensor::Data::BF16($x), $crate::tensor::Data::BF16($y)) => Some($e),
            ($crate::tensor::Data::F16($x), $crate::tensor::Data::F16($y)) => Some($e),
            ($crate::tensor::Data::F64($x), $crate::tensor::Data::F64($y)) => Some($e),
            ($crate::tensor::Data::I1($x), $crate::tensor::Data::I1($y)) => Some($e),
            ($crate::tensor::Data::I8($x), $crate::tensor::Data::I8($y)) => Some($e),
            ($crate::tensor::Data::I16($x), $crate::tensor::Data::I16($y)) => Some($e),
            ($crate::tensor::Data::I32($x), $crate::tensor::Data::I32($y)) => Some($e),
            ($crate::tensor::Data::I64($x), $crate::tensor::Data::I64($y)) => Some($e),
            ($crate::tensor::Data::U8($x), $crate::tensor::Data::U8($y)) => Some($e),
            ($crate::tensor::Data::U32($x), $crate::tensor::Data::U32($y)) => Some($e),
            ($crate::tensor::Data::U64($x), $crate::tensor::Data::U64($y)) => Some($e),
            _ => None,
        }
    };
}

pub(crate) use {dispatch, map_same, zip_same, zip_with};

/// An element type the kernels are generic over, with lossless-where-possible conversions
/// through `f64` (floats) and `i64` (integers, booleans).
pub trait Elem:
    Copy + Send + Sync + Default + PartialEq + PartialOrd + fmt::Debug + 'static
{
    /// The IR element type.
    const DTYPE: DType;
    /// The value as `f64` (`true` = 1).
    fn to_f64(self) -> f64;
    /// The value as `i64` (floats truncate toward zero and saturate; NaN gives 0).
    fn to_i64(self) -> i64;
    /// Converts from `f64` (round to nearest even for floats; truncate and saturate for
    /// integers; `x != 0` for booleans).
    fn from_f64(v: f64) -> Self;
    /// Converts from `i64` (wraps for narrower integers; `x != 0` for booleans).
    fn from_i64(v: i64) -> Self;
    /// Wraps a buffer into its [`Data`] variant.
    fn wrap(v: Buf<Self>) -> Data;
    /// The typed slice of `d`, if `d` holds this element type.
    fn slice(d: &Data) -> Option<&[Self]>;
    /// The typed mutable slice of `d`, if `d` holds this element type.
    fn slice_mut(d: &mut Data) -> Option<&mut [Self]>;
    /// The typed buffer of `d`, if `d` holds this element type.
    fn unwrap(d: Data) -> Option<Buf<Self>>;
    /// Maximum as in StableHLO `maximum` (NaN propagates; `or` for booleans).
    fn max_e(self, o: Self) -> Self;
    /// Minimum as in StableHLO `minimum` (NaN propagates; `and` for booleans).
    fn min_e(self, o: Self) -> Self;
}

macro_rules! impl_elem_int {
    ($t:ty, $dt:ident) => {
        impl Elem for $t {
            const DTYPE: DType = DType::$dt;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn to_i64(self) -> i64 {
                self as i64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            fn wrap(v: Buf<Self>) -> Data {
                Data::$dt(Buf::from(v))
            }
            fn slice(d: &Data) -> Option<&[Self]> {
                match d {
                    Data::$dt(v) => Some(v),
                    _ => None,
                }
            }
            fn slice_mut(d: &mut Data) -> Option<&mut [Self]> {
                match d {
                    Data::$dt(v) => Some(v),
                    _ => None,
                }
            }
            fn unwrap(d: Data) -> Option<Buf<Self>> {
                match d {
                    Data::$dt(v) => Some(v),
                    _ => None,
                }
            }
            fn max_e(self, o: Self) -> Self {
                Ord::max(self, o)
            }
            fn min_e(self, o: Self) -> Self {
                Ord::min(self, o)
            }
        }
    };
}

impl_elem_int!(i8, I8);
impl_elem_int!(i16, I16);
impl_elem_int!(i32, I32);
impl_elem_int!(i64, I64);
impl_elem_int!(u8, U8);
impl_elem_int!(u32, U32);
impl_elem_int!(u64, U64);

impl Elem for bool {
    const DTYPE: DType = DType::I1;
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    fn wrap(v: Buf<Self>) -> Data {
        Data::I1(v)
    }
    fn slice(d: &Data) -> Option<&[Self]> {
        match d {
            Data::I1(v) => Some(v),
            _ => None,
        }
    }
    fn slice_mut(d: &mut Data) -> Option<&mut [Self]> {
        match d {
            Data::I1(v) => Some(v),
            _ => None,
        }
    }
    fn unwrap(d: Data) -> Option<Buf<Self>> {
        match d {
            Data::I1(v) => Some(v),
            _ => None,
        }
    }
    fn max_e(self, o: Self) -> Self {
        self | o
    }
    fn min_e(self, o: Self) -> Self {
        self & o
    }
}

macro_rules! impl_elem_float {
    ($t:ty, $dt:ident, $to:expr, $from:expr) => {
        impl Elem for $t {
            const DTYPE: DType = DType::$dt;
            fn to_f64(self) -> f64 {
                let f: fn($t) -> f64 = $to;
                f(self)
            }
            fn to_i64(self) -> i64 {
                self.to_f64() as i64
            }
            fn from_f64(v: f64) -> Self {
                let f: fn(f64) -> $t = $from;
                f(v)
            }
            fn from_i64(v: i64) -> Self {
                Self::from_f64(v as f64)
            }
            fn wrap(v: Buf<Self>) -> Data {
                Data::$dt(Buf::from(v))
            }
            fn slice(d: &Data) -> Option<&[Self]> {
                match d {
                    Data::$dt(v) => Some(v),
                    _ => None,
                }
            }
            fn slice_mut(d: &mut Data) -> Option<&mut [Self]> {
                match d {
                    Data::$dt(v) => Some(v),
                    _ => None,
                }
            }
            fn unwrap(d: Data) -> Option<Buf<Self>> {
                match d {
                    Data::$dt(v) => Some(v),
                    _ => None,
                }
            }
            fn max_e(self, o: Self) -> Self {
                if self != self || o != o {
                    Self::from_f64(f64::NAN)
                } else if o > self {
                    o
                } else {
                    self
                }
            }
            fn min_e(self, o: Self) -> Self {
                if self != self || o != o {
                    Self::from_f64(f64::NAN)
                } else if o < self {
                    o
                } else {
                    self
                }
            }
        }
    };
}

impl_elem_float!(f32, F32, |x| x as f64, |v| v as f32);
impl_elem_float!(f64, F64, |x| x, |v| v);
// To `f64` through `f32`: the same value and NaN payload as `half`'s `to_f64` (which
// takes branches per field), in a form that vectorizes.
impl_elem_float!(bf16, BF16, |x| f64::from(x.to_f32()), bf16::from_f64);
// `f16` from `f64` through `f32`: what `f16::from_f64` does on x86 CPUs with F16C (the
// hardware conversion of `x as f32`), made the rule on every CPU (`half`'s software path
// rounds on the top 32 bits of the `f64` instead); the generated kernels do the same. To
// `f64` through `f32` with `f16_conv`'s branch-free widening (`half`'s bits, no call per
// element), so that loops over it vectorize.
impl_elem_float!(
    f16,
    F16,
    |x| f64::from(crate::f16_conv::f16_to_f32(x)),
    |v| f16::from_f32(v as f32)
);

/// One element of any type (for region bodies evaluated element by element).
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Scalar {
    /// `f32`.
    F32(f32),
    /// `bf16`.
    BF16(bf16),
    /// `f16`.
    F16(f16),
    /// `f64`.
    F64(f64),
    /// `i1`.
    I1(bool),
    /// `i8`.
    I8(i8),
    /// `i16`.
    I16(i16),
    /// `i32`.
    I32(i32),
    /// `i64`.
    I64(i64),
    /// `ui8`.
    U8(u8),
    /// `ui32`.
    U32(u32),
    /// `ui64`.
    U64(u64),
}

impl Data {
    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            Data::F32(_) => DType::F32,
            Data::BF16(_) => DType::BF16,
            Data::F16(_) => DType::F16,
            Data::F64(_) => DType::F64,
            Data::I1(_) => DType::I1,
            Data::I8(_) => DType::I8,
            Data::I16(_) => DType::I16,
            Data::I32(_) => DType::I32,
            Data::I64(_) => DType::I64,
            Data::U8(_) => DType::U8,
            Data::U32(_) => DType::U32,
            Data::U64(_) => DType::U64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        dispatch!(self, v => v.len())
    }

    /// Address of element 0 (for generated kernels, which index it by element type).
    #[allow(clippy::unnecessary_cast)] // a no-op for the `u8` variant only
    pub(crate) fn as_ptr(&self) -> *const u8 {
        dispatch!(self, v => v.as_ptr() as *const u8)
    }

    /// Mutable address of element 0 (for generated kernels).
    #[allow(clippy::unnecessary_cast)] // a no-op for the `u8` variant only
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        dispatch!(self, v => v.as_mut_ptr() as *mut u8)
    }

    /// True when the elements are on the heap (not in an arena).
    pub fn is_heap(&self) -> bool {
        dispatch!(self, v => v.is_heap())
    }

    /// True when the elements are a range of another tensor's buffer ([`Buf::View`]).
    pub fn is_view(&self) -> bool {
        dispatch!(self, v => v.is_view())
    }

    /// The arena and byte offset the elements are at, if they are in an arena.
    pub fn arena_offset(&self) -> Option<(&Arc<crate::buffer::ArenaMemory>, usize)> {
        dispatch!(self, v => v.arena_offset())
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `n` copies of the default (zero / false) element of `dtype`.
    pub fn zeros(dtype: DType, n: usize) -> Data {
        match dtype {
            DType::F32 => Data::F32(Buf::from(vec![0.0; n])),
            DType::BF16 => Data::BF16(Buf::from(vec![bf16::ZERO; n])),
            DType::F16 => Data::F16(Buf::from(vec![f16::ZERO; n])),
            DType::F64 => Data::F64(Buf::from(vec![0.0; n])),
            DType::I1 => Data::I1(Buf::from(vec![false; n])),
            DType::I8 => Data::I8(Buf::from(vec![0; n])),
            DType::I16 => Data::I16(Buf::from(vec![0; n])),
            DType::I32 => Data::I32(Buf::from(vec![0; n])),
            DType::I64 => Data::I64(Buf::from(vec![0; n])),
            DType::U8 => Data::U8(Buf::from(vec![0; n])),
            DType::U32 => Data::U32(Buf::from(vec![0; n])),
            DType::U64 => Data::U64(Buf::from(vec![0; n])),
        }
    }

    /// `n` copies of `s`.
    pub fn splat(s: Scalar, n: usize) -> Data {
        match s {
            Scalar::F32(x) => Data::F32(Buf::from(vec![x; n])),
            Scalar::BF16(x) => Data::BF16(Buf::from(vec![x; n])),
            Scalar::F16(x) => Data::F16(Buf::from(vec![x; n])),
            Scalar::F64(x) => Data::F64(Buf::from(vec![x; n])),
            Scalar::I1(x) => Data::I1(Buf::from(vec![x; n])),
            Scalar::I8(x) => Data::I8(Buf::from(vec![x; n])),
            Scalar::I16(x) => Data::I16(Buf::from(vec![x; n])),
            Scalar::I32(x) => Data::I32(Buf::from(vec![x; n])),
            Scalar::I64(x) => Data::I64(Buf::from(vec![x; n])),
            Scalar::U8(x) => Data::U8(Buf::from(vec![x; n])),
            Scalar::U32(x) => Data::U32(Buf::from(vec![x; n])),
            Scalar::U64(x) => Data::U64(Buf::from(vec![x; n])),
        }
    }

    /// Element `i`, or `None` when out of range.
    pub fn get(&self, i: usize) -> Option<Scalar> {
        Some(match self {
            Data::F32(v) => Scalar::F32(*v.get(i)?),
            Data::BF16(v) => Scalar::BF16(*v.get(i)?),
            Data::F16(v) => Scalar::F16(*v.get(i)?),
            Data::F64(v) => Scalar::F64(*v.get(i)?),
            Data::I1(v) => Scalar::I1(*v.get(i)?),
            Data::I8(v) => Scalar::I8(*v.get(i)?),
            Data::I16(v) => Scalar::I16(*v.get(i)?),
            Data::I32(v) => Scalar::I32(*v.get(i)?),
            Data::I64(v) => Scalar::I64(*v.get(i)?),
            Data::U8(v) => Scalar::U8(*v.get(i)?),
            Data::U32(v) => Scalar::U32(*v.get(i)?),
            Data::U64(v) => Scalar::U64(*v.get(i)?),
        })
    }

    /// Sets element `i` to `s`; false when out of range or of another element type.
    pub fn set(&mut self, i: usize, s: Scalar) -> bool {
        fn put<T>(v: &mut [T], i: usize, x: T) -> bool {
            match v.get_mut(i) {
                Some(slot) => {
                    *slot = x;
                    true
                }
                None => false,
            }
        }
        match (self, s) {
            (Data::F32(v), Scalar::F32(x)) => put(v, i, x),
            (Data::BF16(v), Scalar::BF16(x)) => put(v, i, x),
            (Data::F16(v), Scalar::F16(x)) => put(v, i, x),
            (Data::F64(v), Scalar::F64(x)) => put(v, i, x),
            (Data::I1(v), Scalar::I1(x)) => put(v, i, x),
            (Data::I8(v), Scalar::I8(x)) => put(v, i, x),
            (Data::I16(v), Scalar::I16(x)) => put(v, i, x),
            (Data::I32(v), Scalar::I32(x)) => put(v, i, x),
            (Data::I64(v), Scalar::I64(x)) => put(v, i, x),
            (Data::U8(v), Scalar::U8(x)) => put(v, i, x),
            (Data::U32(v), Scalar::U32(x)) => put(v, i, x),
            (Data::U64(v), Scalar::U64(x)) => put(v, i, x),
            _ => false,
        }
    }

    /// All elements as `f64` (booleans as 0/1), for comparisons and reports.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        dispatch!(self, v => v.iter().map(|x| x.to_f64()).collect())
    }

    /// All elements as `i64` (floats truncated), for index operands.
    pub fn to_i64_vec(&self) -> Vec<i64> {
        dispatch!(self, v => v.iter().map(|x| x.to_i64()).collect())
    }

    /// [`Data::convert`] by value: the buffer itself (no copy) when it already has `dtype`.
    pub fn into_dtype(self, dtype: DType) -> Data {
        if self.dtype() == dtype {
            self
        } else {
            self.convert(dtype)
        }
    }

    /// Reinterprets every element's bits as `dtype` (StableHLO `bitcast_convert` between types
    /// of equal size: `ui32` bits to `f32` and back, ...). `None` when the sizes differ.
    pub fn bitcast(&self, dtype: DType) -> Option<Data> {
        if self.dtype().size_bytes() != dtype.size_bytes() {
            return None;
        }
        if self.dtype() == dtype {
            return Some(self.clone());
        }
        let words: Option<Vec<u32>> = match self {
            Data::F32(v) => Some(v.iter().map(|x| x.to_bits()).collect()),
            Data::I32(v) => Some(v.iter().map(|&x| x as u32).collect()),
            Data::U32(v) => Some(v.to_vec()),
            _ => None,
        };
        if let Some(w) = words {
            return Some(match dtype {
                DType::F32 => Data::F32(w.into_iter().map(f32::from_bits).collect()),
                DType::I32 => Data::I32(w.into_iter().map(|x| x as i32).collect()),
                _ => Data::U32(Buf::from(w)),
            });
        }
        // Other widths (rare in training steps): through the little-endian bytes.
        let n = self.len();
        let bytes = Tensor::from_parts(vec![n], self.clone()).to_le_bytes();
        let lit = Literal {
            dtype,
            splat: false,
            data: bytes,
        };
        Tensor::from_literal(&lit, vec![n])
            .ok()
            .map(|t| t.data().clone())
    }

    /// Converts every element to `dtype` with StableHLO `convert` semantics: float to float
    /// rounds to nearest even; float to integer truncates toward zero and saturates (NaN
    /// gives 0); integer to integer wraps; anything to `i1` is `x != 0`.
    pub fn convert(&self, dtype: DType) -> Data {
        if self.dtype() == dtype {
            return self.clone();
        }
        if let (DType::BF16, Data::F32(v)) = (dtype, self) {
            return Data::BF16(Buf::from(f32_to_bf16(v)));
        }
        if let (DType::F16, Data::F32(v)) = (dtype, self) {
            let mut out = vec![f16::ZERO; v.len()];
            f32_to_f16_into(v, &mut out);
            return Data::F16(Buf::from(out));
        }
        let float_src = self.dtype().is_float();
        fn go<S: Elem, T: Elem>(v: &[S], float_src: bool) -> Vec<T> {
            if float_src || T::DTYPE.is_float() {
                if T::DTYPE == DType::I1 {
                    v.iter().map(|x| T::from_f64(x.to_f64())).collect()
                } else if float_src && !T::DTYPE.is_float() {
                    // float -> integer: saturate through f64 (`as` saturates, NaN -> 0)
                    v.iter().map(|x| T::from_f64(x.to_f64().trunc())).collect()
                } else {
                    v.iter().map(|x| T::from_f64(x.to_f64())).collect()
                }
            } else {
                v.iter().map(|x| T::from_i64(x.to_i64())).collect()
            }
        }
        fn to<T: Elem>(d: &Data, float_src: bool) -> Vec<T> {
            dispatch!(d, v => go::<_, T>(v, float_src))
        }
        match dtype {
            DType::F32 => Data::F32(Buf::from(convert_to_f32(self))),
            DType::BF16 => Data::BF16(Buf::from(to(self, float_src))),
            DType::F16 => Data::F16(Buf::from(to(self, float_src))),
            DType::F64 => Data::F64(Buf::from(to(self, float_src))),
            DType::I1 => Data::I1(Buf::from(to(self, float_src))),
            DType::I8 => Data::I8(Buf::from(to(self, float_src))),
            DType::I16 => Data::I16(Buf::from(to(self, float_src))),
            DType::I32 => Data::I32(Buf::from(to(self, float_src))),
            DType::I64 => Data::I64(Buf::from(to(self, float_src))),
            DType::U8 => Data::U8(Buf::from(to(self, float_src))),
            DType::U32 => Data::U32(Buf::from(to(self, float_src))),
            DType::U64 => Data::U64(Buf::from(to(self, float_src))),
        }
    }
}

/// `bf16::from_f64(x as f64)` of every element, the rounding of every float-to-`bf16`
/// [`Data::convert`] (which the generated kernels replicate), on the `f32` bits and in
/// parallel: `half`'s `f64` conversion rounds the top 32 bits of the `f64`, where a normal
/// `f32`'s three lowest mantissa bits do not lie, so for a normal, zero or infinite `f32` it is
/// round to nearest even of the top 16 bits with those three bits ignored (the branch-free
/// loop, which vectorizes). Subnormals and NaNs are then redone through the `f64` path itself.
fn f32_to_bf16(v: &[f32]) -> Vec<bf16> {
    let mut out = vec![bf16::ZERO; v.len()];
    f32_to_bf16_into(v, &mut out);
    out
}

/// [`f32_to_bf16`] written into `out` (of `v`'s length).
pub(crate) fn f32_to_bf16_into(v: &[f32], out: &mut [bf16]) {
    crate::exec::par::elements(out, &|s, o| f32_to_bf16_serial(&v[s..s + o.len()], o));
}

/// [`f32_to_bf16_into`] on the calling thread (`src` and `out` of one length).
#[inline(always)]
pub(crate) fn f32_to_bf16_serial(src: &[f32], out: &mut [bf16]) {
    let special = |b: u32| {
        let exp = b & 0x7F80_0000;
        b & 0x007F_FFFF != 0 && (exp == 0 || exp == 0x7F80_0000)
    };
    let mut any = false;
    for (d, &x) in out.iter_mut().zip(src) {
        let b = x.to_bits() & !7;
        // Round up when the round bit is set and the rest or the kept lsb is not zero.
        let up = (b >> 15) & 1 & u32::from(b & 0x1_7FFF != 0);
        *d = bf16::from_bits(((b >> 16) + up) as u16);
        any |= special(x.to_bits());
    }
    if any {
        for (d, &x) in out.iter_mut().zip(src) {
            if special(x.to_bits()) {
                *d = bf16::from_f64(f64::from(x));
            }
        }
    }
}

/// `f16::from_f32` of every element (round to nearest even: exactly the `f64` path's rounding
/// of an `f32`), written into `out` (of `v`'s length) in parallel with
/// [`crate::f16_conv::f32_to_f16_slice`] (F16C's vector instructions where the CPU has them).
pub(crate) fn f32_to_f16_into(v: &[f32], out: &mut [f16]) {
    crate::exec::par::elements(out, &|s, o| {
        crate::f16_conv::f32_to_f16_slice(&v[s..s + o.len()], o);
    });
}

/// `bf16::to_f32` of every element of `src` into `dst` (of the same length), on the calling
/// thread: exact, a NaN quieted as `half` does it, and written so that it vectorizes.
#[inline(always)]
pub(crate) fn bf16_to_f32_serial(src: &[bf16], dst: &mut [f32]) {
    for (d, &x) in dst.iter_mut().zip(src) {
        let b = u32::from(x.to_bits());
        let q = if b & 0x7FFF > 0x7F80 { b | 0x0040 } else { b };
        *d = f32::from_bits(q << 16);
    }
}

/// `f32` conversion with direct paths for the common float sources (no double rounding).
fn convert_to_f32(d: &Data) -> Vec<f32> {
    match d {
        Data::F32(v) => v.to_vec(),
        Data::BF16(v) => {
            let mut out = vec![0f32; v.len()];
            crate::exec::par::elements(&mut out, &|s, o| {
                bf16_to_f32_serial(&v[s..s + o.len()], o);
            });
            out
        }
        Data::F16(v) => {
            let mut out = vec![0f32; v.len()];
            crate::exec::par::elements(&mut out, &|s, o| {
                crate::f16_conv::f16_to_f32_slice(&v[s..s + o.len()], o);
            });
            out
        }
        Data::F64(v) => v.iter().map(|&x| x as f32).collect(),
        Data::I1(v) => v.iter().map(|&x| x as u8 as f32).collect(),
        Data::I8(v) => v.iter().map(|&x| x as f32).collect(),
        Data::I16(v) => v.iter().map(|&x| x as f32).collect(),
        Data::I32(v) => v.iter().map(|&x| x as f32).collect(),
        Data::I64(v) => v.iter().map(|&x| x as f32).collect(),
        Data::U8(v) => v.iter().map(|&x| x as f32).collect(),
        Data::U32(v) => v.iter().map(|&x| x as f32).collect(),
        Data::U64(v) => v.iter().map(|&x| x as f32).collect(),
    }
}

impl Scalar {
    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            Scalar::F32(_) => DType::F32,
            Scalar::BF16(_) => DType::BF16,
            Scalar::F16(_) => DType::F16,
            Scalar::F64(_) => DType::F64,
            Scalar::I1(_) => DType::I1,
            Scalar::I8(_) => DType::I8,
            Scalar::I16(_) => DType::I16,
            Scalar::I32(_) => DType::I32,
            Scalar::I64(_) => DType::I64,
            Scalar::U8(_) => DType::U8,
            Scalar::U32(_) => DType::U32,
            Scalar::U64(_) => DType::U64,
        }
    }
}

/// A tensor whose buffer length does not match its shape, or a literal that does not fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TensorError {
    /// `data.len()` differs from the product of the shape.
    #[error("shape {shape:?} holds {expected} elements but the buffer has {got}")]
    Length {
        /// The shape.
        shape: Vec<usize>,
        /// Product of the shape.
        expected: usize,
        /// Buffer length.
        got: usize,
    },
    /// A literal's bytes do not fill the shape.
    #[error("literal of {stored} {dtype} elements cannot fill shape {shape:?}")]
    Literal {
        /// Literal element type.
        dtype: DType,
        /// Number of stored elements.
        stored: usize,
        /// Requested shape.
        shape: Vec<usize>,
    },
}

/// Dimensions held inline by a [`Shape`].
const INLINE_DIMS: usize = 4;

/// A tensor's dimensions, outermost first: up to four held inline (no allocation when a
/// tensor of such a shape is made or cloned, as a loop body does for every small value at every
/// iteration), more on the heap. Held as five machine words, so that a copy is moved in whole
/// words (no partial-store forwarding stalls when a clone is moved on, as when an operand is
/// cloned at every read of a loop body's value).
pub(crate) struct Shape {
    /// `[len, d0, d1, d2, d3]` for `len <= INLINE_DIMS` dimensions; for more,
    /// `[len, address, 0, 0, 0]` of a `Box<[usize]>` of `len` dimensions this shape owns.
    w: [usize; INLINE_DIMS + 1],
}

impl Shape {
    /// The shape of `dims`.
    #[inline]
    pub(crate) fn from_slice(dims: &[usize]) -> Shape {
        let mut w = [0usize; INLINE_DIMS + 1];
        w[0] = dims.len();
        if dims.len() <= INLINE_DIMS {
            w[1..1 + dims.len()].copy_from_slice(dims);
        } else {
            let b: Box<[usize]> = dims.into();
            w[1] = Box::into_raw(b) as *mut usize as usize;
        }
        Shape { w }
    }

    /// The shape of `dims`.
    #[inline]
    pub(crate) fn from_vec(dims: Vec<usize>) -> Shape {
        Shape::from_slice(&dims)
    }
}

impl Drop for Shape {
    #[inline]
    fn drop(&mut self) {
        let len = self.w[0];
        if len > INLINE_DIMS {
            // SAFETY: `w[1]` is the address of the `Box<[usize]>` of `len` elements made by
            // `from_slice`, owned by this shape alone and freed only here.
            unsafe {
                drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                    self.w[1] as *mut usize,
                    len,
                )));
            }
        }
    }
}

impl Clone for Shape {
    #[inline]
    fn clone(&self) -> Shape {
        if self.w[0] <= INLINE_DIMS {
            Shape { w: self.w }
        } else {
            Shape::from_slice(self)
        }
    }
}

impl std::ops::Deref for Shape {
    type Target = [usize];
    #[inline]
    fn deref(&self) -> &[usize] {
        let len = self.w[0];
        if len <= INLINE_DIMS {
            &self.w[1..1 + len]
        } else {
            // SAFETY: `w[1]` addresses the `len` dimensions this shape owns (see `Drop`).
            unsafe { std::slice::from_raw_parts(self.w[1] as *const usize, len) }
        }
    }
}

impl PartialEq for Shape {
    fn eq(&self, o: &Shape) -> bool {
        **self == **o
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// What [`Tensor::from_parts`] takes as a shape: a `Vec` (moved inline when it has at most
/// four dimensions), a slice (copied), or a [`Shape`].
pub(crate) trait IntoShape {
    /// The dimensions as a [`Shape`].
    fn into_shape(self) -> Shape;
}

impl IntoShape for Vec<usize> {
    #[inline]
    fn into_shape(self) -> Shape {
        Shape::from_vec(self)
    }
}

impl IntoShape for &[usize] {
    #[inline]
    fn into_shape(self) -> Shape {
        Shape::from_slice(self)
    }
}

impl IntoShape for Shape {
    #[inline]
    fn into_shape(self) -> Shape {
        self
    }
}

/// A host tensor: shape plus shared typed buffer. See the module docs.
#[derive(Clone, PartialEq)]
pub struct Tensor {
    shape: Shape,
    data: Arc<Data>,
}

impl Drop for Tensor {
    /// While a program runs, a large buffer no other tensor shares goes back to the
    /// program's buffer pool instead of the allocator ([`crate::exec::pool`]).
    fn drop(&mut self) {
        crate::exec::pool::recycle(&mut self.data);
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor<{}{:?}>", self.dtype(), self.shape)?;
        if self.len() <= 16 {
            write!(f, " {:?}", self.data.to_f64_vec())?;
        }
        Ok(())
    }
}

impl Tensor {
    /// A tensor of `shape` holding `data` (row-major).
    ///
    /// # Errors
    /// [`TensorError::Length`] when the buffer length is not the product of the shape.
    pub fn new(shape: Vec<usize>, data: Data) -> Result<Tensor, TensorError> {
        let expected = shape.iter().product::<usize>();
        if data.len() != expected {
            return Err(TensorError::Length {
                shape,
                expected,
                got: data.len(),
            });
        }
        Ok(Tensor {
            shape: Shape::from_vec(shape),
            data: Arc::new(data),
        })
    }

    /// Crate-internal constructor for kernels that keep the length invariant by construction
    /// (checked in debug builds). `shape`: a `Vec` (moved inline when it has at most four
    /// dimensions) or a slice (copied, without allocating for such shapes).
    pub(crate) fn from_parts(shape: impl IntoShape, data: Data) -> Tensor {
        let shape = shape.into_shape();
        debug_assert_eq!(
            data.len(),
            shape.iter().product::<usize>(),
            "shape {shape:?}"
        );
        Tensor {
            shape,
            data: Arc::new(data),
        }
    }

    /// A rank-0 tensor holding `s`.
    pub fn scalar(s: Scalar) -> Tensor {
        Tensor::from_parts(Shape::from_slice(&[]), Data::splat(s, 1))
    }

    /// A tensor of `shape` filled with zeros (false for `i1`).
    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Tensor {
        let n = shape.iter().product();
        Tensor::from_parts(shape, Data::zeros(dtype, n))
    }

    /// An `f32` tensor.
    ///
    /// # Errors
    /// As [`Tensor::new`].
    pub fn from_f32(shape: Vec<usize>, v: Vec<f32>) -> Result<Tensor, TensorError> {
        Tensor::new(shape, Data::F32(Buf::from(v)))
    }

    /// An `i32` tensor.
    ///
    /// # Errors
    /// As [`Tensor::new`].
    pub fn from_i32(shape: Vec<usize>, v: Vec<i32>) -> Result<Tensor, TensorError> {
        Tensor::new(shape, Data::I32(Buf::from(v)))
    }

    /// The tensor of `shape` a [`Literal`] denotes (a splat literal fills the shape).
    ///
    /// # Errors
    /// [`TensorError::Literal`] when the literal holds neither one (splat) nor
    /// `product(shape)` elements.
    pub fn from_literal(lit: &Literal, shape: Vec<usize>) -> Result<Tensor, TensorError> {
        // A shape from outside (the Python and C boundaries) may name more elements than
        // `usize` counts: that is a mismatch, not an overflow.
        let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let esz = lit.dtype.size_bytes() as usize;
        let stored = lit.data.len() / esz;
        let bad = || TensorError::Literal {
            dtype: lit.dtype,
            stored,
            shape: shape.clone(),
        };
        if !lit.data.len().is_multiple_of(esz)
            || (lit.splat && (stored != 1 || n.is_none()))
            || (!lit.splat && Some(stored) != n)
        {
            return Err(bad());
        }
        let chunks = lit.data.chunks_exact(esz);
        let data = match lit.dtype {
            DType::F32 => Data::F32(
                chunks
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            ),
            DType::F64 => Data::F64(
                chunks
                    .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
                    .collect(),
            ),
            DType::BF16 => Data::BF16(
                chunks
                    .map(|b| bf16::from_bits(u16::from_le_bytes([b[0], b[1]])))
                    .collect(),
            ),
            DType::F16 => Data::F16(
                chunks
                    .map(|b| f16::from_f32(f16_bits_to_f32(u16::from_le_bytes([b[0], b[1]]))))
                    .collect(),
            ),
            DType::I1 => Data::I1(chunks.map(|b| b[0] != 0).collect()),
            DType::I8 => Data::I8(chunks.map(|b| b[0] as i8).collect()),
            DType::U8 => Data::U8(chunks.map(|b| b[0]).collect()),
            DType::I16 => Data::I16(chunks.map(|b| i16::from_le_bytes([b[0], b[1]])).collect()),
            DType::I32 => Data::I32(
                chunks
                    .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            ),
            DType::U32 => Data::U32(
                chunks
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            ),
            DType::I64 => Data::I64(
                chunks
                    .map(|b| i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
                    .collect(),
            ),
            DType::U64 => Data::U64(
                chunks
                    .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
                    .collect(),
            ),
        };
        if lit.splat {
            let s = data.get(0).ok_or_else(bad)?;
            let n = n.ok_or_else(bad)?;
            return Ok(Tensor::from_parts(shape, Data::splat(s, n)));
        }
        Ok(Tensor::from_parts(shape, data))
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// Shape, outermost dimension first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True for a tensor without elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Storage size in bytes (`len * dtype.size_bytes()`, `i1` one byte), the same measure as
    /// `TensorType::size_bytes`.
    pub fn size_bytes(&self) -> u64 {
        self.len() as u64 * self.dtype().size_bytes()
    }

    /// The elements as raw little-endian bytes, row-major (`i1` one byte per element, `bf16`
    /// and `f16` their bit patterns): the inverse of [`Tensor::from_literal`] with a literal
    /// that is not a splat. `size_bytes()` long.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
            v.iter().flat_map(|&x| f(x)).collect()
        }
        match &*self.data {
            Data::F32(v) => le(v, f32::to_le_bytes),
            Data::BF16(v) => le(v, |x: bf16| x.to_bits().to_le_bytes()),
            Data::F16(v) => le(v, |x: f16| x.to_bits().to_le_bytes()),
            Data::F64(v) => le(v, f64::to_le_bytes),
            Data::I1(v) => le(v, |x: bool| [u8::from(x)]),
            Data::I8(v) => le(v, i8::to_le_bytes),
            Data::I16(v) => le(v, i16::to_le_bytes),
            Data::I32(v) => le(v, i32::to_le_bytes),
            Data::I64(v) => le(v, i64::to_le_bytes),
            Data::U8(v) => le(v, u8::to_le_bytes),
            Data::U32(v) => le(v, u32::to_le_bytes),
            Data::U64(v) => le(v, u64::to_le_bytes),
        }
    }

    /// Address of element 0: `size_bytes()` bytes, row-major, in the machine's byte order
    /// (`i1` one byte per element), valid while this tensor or a clone of it lives and unchanged
    /// while it is shared (for zero-copy export, e.g. DLPack).
    pub fn as_ptr(&self) -> *const u8 {
        self.data.as_ptr()
    }

    /// The typed buffer.
    pub fn data(&self) -> &Data {
        &self.data
    }

    /// Relative error against a reference: `max |a − b| / max |b|` over the finite elements
    /// (the metric of the numeric checks against framework outputs). Positions where both are
    /// NaN, or both the same infinity, agree; a NaN or an infinity on one side only (or
    /// infinities of opposite signs), or a shape mismatch, gives infinity. The result is never
    /// NaN, so a `max` over outputs cannot drop it.
    pub fn rel_err(&self, want: &Tensor) -> f64 {
        if self.shape() != want.shape() {
            return f64::INFINITY;
        }
        let (a, b) = (self.to_f64_vec(), want.to_f64_vec());
        // The scale of the finite reference values: an infinite one would make every error 0.
        let scale = b
            .iter()
            .filter(|x| x.is_finite())
            .fold(0f64, |m, x| m.max(x.abs()))
            .max(1e-30);
        let mut diff = 0f64;
        for (x, y) in a.iter().zip(&b) {
            if x.is_finite() && y.is_finite() {
                diff = diff.max((x - y).abs());
            } else if !(x.is_nan() && y.is_nan() || x == y) {
                return f64::INFINITY;
            }
        }
        let e = diff / scale;
        if e.is_nan() {
            f64::INFINITY
        } else {
            e
        }
    }

    /// A copy with its own buffer (what a device↔host transfer produces).
    pub fn deep_copy(&self) -> Tensor {
        Tensor {
            shape: self.shape.clone(),
            data: Arc::new((*self.data).clone()),
        }
    }

    /// The typed buffer, for in-place updates; copies it first when it is shared.
    pub fn data_mut(&mut self) -> &mut Data {
        Arc::make_mut(&mut self.data)
    }

    /// The buffer, if no other tensor shares it (for kernels that reuse their operand's
    /// buffer as the result); `None` for a view ([`Buf::View`]), whose memory is another
    /// tensor's: a kernel writes its result into a buffer of its own rather than copying the
    /// view first.
    pub(crate) fn unique_data_mut(&mut self) -> Option<&mut Data> {
        if self.data.is_view() {
            return None;
        }
        Arc::get_mut(&mut self.data)
    }

    /// The `shape.iter().product()` elements from element `start` of this tensor's buffer as
    /// a tensor of `shape` that shares the buffer instead of copying it ([`Buf::View`]: it
    /// keeps this tensor's buffer alive, and a write to either copies first). `None` for an
    /// empty or out-of-bounds range.
    pub(crate) fn contiguous_view(&self, start: usize, shape: &[usize]) -> Option<Tensor> {
        let n: usize = shape.iter().product();
        if n == 0 || start.checked_add(n)? > self.len() {
            return None;
        }
        let owner: Arc<dyn Send + Sync> = self.data.clone();
        macro_rules! view {
            ($($v:ident),*) => {
                match &*self.data {
                    $(Data::$v(b) => {
                        // SAFETY: `start + n <= len`, so the `n` elements lie inside the
                        // buffer, which `owner` keeps alive; while `owner` shares it, no
                        // tensor writes it (`Tensor::data_mut` and `unique_data_mut` see it
                        // shared: a write copies first).
                        let s = unsafe {
                            crate::buffer::ForeignSlice::new(b.as_ptr().add(start), n, owner)
                        }?;
                        Data::$v(Buf::View(s))
                    })*
                }
            };
        }
        let data = view!(F32, BF16, F16, F64, I1, I8, I16, I32, I64, U8, U32, U64);
        Some(Tensor::from_parts(shape, data))
    }

    /// The buffer moved out, or the tensor back when the buffer is shared or a view (as
    /// [`Tensor::unique_data_mut`]).
    pub(crate) fn try_into_data(mut self) -> Result<Data, Tensor> {
        if self.data.is_view() {
            return Err(self);
        }
        match Arc::get_mut(&mut self.data) {
            // The emptied tensor is then dropped with nothing to recycle.
            Some(d) => Ok(std::mem::replace(d, Data::F32(Buf::from(Vec::new())))),
            None => Err(self),
        }
    }

    /// The same buffer under another shape with as many elements (O(1)).
    ///
    /// # Errors
    /// [`TensorError::Length`] when the element counts differ.
    pub fn reshape(&self, shape: Vec<usize>) -> Result<Tensor, TensorError> {
        let expected = shape.iter().product::<usize>();
        if expected != self.len() {
            return Err(TensorError::Length {
                shape,
                expected,
                got: self.len(),
            });
        }
        Ok(Tensor {
            shape: Shape::from_vec(shape),
            data: self.data.clone(),
        })
    }

    /// [`Tensor::reshape`] to the dimensions `shape` (copied, without allocating for at most
    /// four dimensions).
    ///
    /// # Errors
    /// As [`Tensor::reshape`].
    pub(crate) fn reshaped(&self, shape: &[usize]) -> Result<Tensor, TensorError> {
        let expected = shape.iter().product::<usize>();
        if expected != self.len() {
            return Err(TensorError::Length {
                shape: shape.to_vec(),
                expected,
                got: self.len(),
            });
        }
        Ok(Tensor {
            shape: Shape::from_slice(shape),
            data: self.data.clone(),
        })
    }

    /// The `f32` elements, if this is an `f32` tensor.
    pub fn as_f32(&self) -> Option<&[f32]> {
        f32::slice(&self.data)
    }

    /// The `i32` elements, if this is an `i32` tensor.
    pub fn as_i32(&self) -> Option<&[i32]> {
        i32::slice(&self.data)
    }

    /// All elements as `f64` (booleans 0/1).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        self.data.to_f64_vec()
    }

    /// The single element of a one-element tensor.
    pub fn scalar_value(&self) -> Option<Scalar> {
        if self.len() == 1 {
            self.data.get(0)
        } else {
            None
        }
    }

    /// True when both tensors have the same element type, shape and bit patterns (NaNs with
    /// equal payloads compare equal, `0.0` and `-0.0` differ): the test for determinism.
    pub fn bits_eq(&self, o: &Tensor) -> bool {
        if self.shape != o.shape || self.dtype() != o.dtype() {
            return false;
        }
        match (&*self.data, &*o.data) {
            (Data::F32(a), Data::F32(b)) => {
                a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (Data::F64(a), Data::F64(b)) => {
                a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (Data::BF16(a), Data::BF16(b)) => {
                a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (Data::F16(a), Data::F16(b)) => {
                a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (a, b) => a == b,
        }
    }
}
