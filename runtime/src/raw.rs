//! Tensors crossing a language boundary as raw bytes, as the Python extension passes them
//! (numpy's `tobytes()`, its dtype name, its shape): the bytes are little-endian and in C
//! order, and the dtype is named exactly as numpy names it (`float32`, `int64`, `bool`,
//! `bfloat16` from ml_dtypes). A caller with other byte orders converts before (the Python
//! layer converts `>f4` arrays value by value).

use crate::buffer::{Buf, ForeignSlice};
use crate::tensor::{Data, Tensor};
use ebb_ir::{DType, Literal};
use std::sync::Arc;

/// The numpy name of an element type (`bfloat16` is ml_dtypes').
pub fn numpy_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float32",
        DType::BF16 => "bfloat16",
        DType::F16 => "float16",
        DType::F64 => "float64",
        DType::I1 => "bool",
        DType::I8 => "int8",
        DType::I16 => "int16",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::U8 => "uint8",
        DType::U32 => "uint32",
        DType::U64 => "uint64",
    }
}

/// The tensor of `shape` held by `data` (little-endian, C order) with numpy dtype `dtype`.
///
/// # Errors
/// A dtype Ebb has no counterpart for (the message lists the accepted names), or a byte count
/// that is not the shape's element count times the element size.
pub fn from_raw(data: Vec<u8>, dtype: &str, shape: Vec<usize>) -> Result<Tensor, String> {
    let d = DType::ALL
        .into_iter()
        .find(|d| numpy_name(*d) == dtype)
        .ok_or_else(|| {
            let names: Vec<&str> = DType::ALL.into_iter().map(numpy_name).collect();
            format!(
                "dtype `{dtype}` is not supported (Ebb takes {})",
                names.join(", ")
            )
        })?;
    let lit = Literal {
        dtype: d,
        splat: false,
        data,
    };
    Tensor::from_literal(&lit, shape).map_err(|e| e.to_string())
}

/// The tensor of `shape` and element type `dtype` whose elements are `bytes` in the machine's
/// byte order, C order (one copy; what a DLPack producer's memory holds).
///
/// # Errors
/// A byte count that is not the shape's element count times the element size, or a `bool`
/// byte other than 0 and 1.
pub fn from_native_bytes(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Result<Tensor, String> {
    let n: usize = shape.iter().product();
    let len = n as u64 * dtype.size_bytes();
    if bytes.len() as u64 != len {
        return Err(format!(
            "{} bytes for {n} elements of {dtype} (want {len})",
            bytes.len()
        ));
    }
    if dtype == DType::I1 && bytes.iter().any(|&b| b > 1) {
        return Err("a bool element is neither 0 nor 1".into());
    }
    let mut d = Data::zeros(dtype, n);
    if len > 0 {
        // SAFETY: `d` holds `n` elements of `len` bytes; every bit pattern is an element of
        // `dtype` (booleans checked above).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), d.as_mut_ptr(), bytes.len()) };
    }
    Tensor::new(shape, d).map_err(|e| e.to_string())
}

/// The tensor of `shape` and element type `dtype` whose elements are read in place at `ptr`
/// (machine byte order, C order), kept alive by `owner`: no copy, unless a kernel writes the
/// elements (they are then copied first; the memory at `ptr` is never written). `None` when
/// `ptr` is not aligned for `dtype`, or a `bool` byte is neither 0 nor 1: copy instead
/// ([`from_native_bytes`]).
///
/// # Safety
/// `ptr` points at `shape`'s element count of `dtype` elements, valid and unchanged while
/// `owner` lives.
pub unsafe fn from_foreign(
    dtype: DType,
    shape: Vec<usize>,
    ptr: *const u8,
    owner: Arc<dyn Send + Sync>,
) -> Option<Tensor> {
    let n: usize = shape.iter().product();
    if n == 0 {
        return Tensor::new(shape, Data::zeros(dtype, 0)).ok();
    }
    macro_rules! foreign {
        ($v:ident, $t:ty) => {
            Data::$v(Buf::Foreign(ForeignSlice::new(ptr as *const $t, n, owner)?))
        };
    }
    let data = match dtype {
        DType::F32 => foreign!(F32, f32),
        DType::BF16 => foreign!(BF16, half::bf16),
        DType::F16 => foreign!(F16, half::f16),
        DType::F64 => foreign!(F64, f64),
        DType::I1 => {
            if std::slice::from_raw_parts(ptr, n).iter().any(|&b| b > 1) {
                return None;
            }
            foreign!(I1, bool)
        }
        DType::I8 => foreign!(I8, i8),
        DType::I16 => foreign!(I16, i16),
        DType::I32 => foreign!(I32, i32),
        DType::I64 => foreign!(I64, i64),
        DType::U8 => foreign!(U8, u8),
        DType::U32 => foreign!(U32, u32),
        DType::U64 => foreign!(U64, u64),
    };
    Tensor::new(shape, data).ok()
}
