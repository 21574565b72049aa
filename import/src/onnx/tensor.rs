//! Decoding `TensorProto`s (initializers and `Constant` values) into Ebb literals.
//!
//! Data comes from `raw_data` (little-endian, fixed width, one byte per bool), from the typed
//! fields (`float_data`, `int32_data` — which also carries int8/int16/uint8/bool/float16/
//! bfloat16 bit patterns —, `int64_data`, `double_data`, `uint64_data`), or from an external
//! file (`data_location = EXTERNAL`, keys `location`, `offset`, `length`) relative to the
//! model's directory (ONNX IR spec, "External Tensor Data").
//!
//! Invariant: a decoded literal holds exactly `product(dims)` elements of its dtype, or one
//! element marked splat (never for initializers; used for constants the importer builds).

use super::proto::{data_type as dt, TensorProto};
use ebb_ir::op::{f32_to_f16_bits, Literal};
use ebb_ir::DType;
use std::path::Path;

/// The Ebb element type of an ONNX `TensorProto.DataType` code, or `None` if unsupported
/// (strings, uint16, uint64, complex, float8 ...).
pub fn dtype_of(code: i32) -> Option<DType> {
    Some(match code {
        dt::FLOAT => DType::F32,
        dt::UINT8 => DType::U8,
        dt::INT8 => DType::I8,
        dt::INT16 => DType::I16,
        dt::INT32 => DType::I32,
        dt::INT64 => DType::I64,
        dt::BOOL => DType::I1,
        dt::FLOAT16 => DType::F16,
        dt::DOUBLE => DType::F64,
        dt::UINT32 => DType::U32,
        dt::UINT64 => DType::U64,
        dt::BFLOAT16 => DType::BF16,
        _ => return None,
    })
}

/// The ONNX name of a `DataType` code, for messages.
pub fn data_type_name(code: i32) -> String {
    match code {
        dt::STRING => "string".into(),
        dt::UINT16 => "uint16".into(),
        dt::UINT64 => "uint64".into(),
        14 | 15 => "complex".into(),
        c => format!("data type {c}"),
    }
}

/// Decodes `t` into `(dtype, dims, literal)`; external data is read relative to `model_dir`.
///
/// Errors: a message naming the problem (unsupported data type, negative dimension, element
/// count that does not match the dims, unreadable external file).
pub fn decode(
    t: &TensorProto,
    model_dir: Option<&Path>,
) -> Result<(DType, Vec<i64>, Literal), String> {
    let code = t.data_type.unwrap_or(0);
    let dtype = dtype_of(code)
        .ok_or_else(|| format!("unsupported tensor element type {}", data_type_name(code)))?;
    if let Some(d) = t.dims.iter().find(|d| **d < 0) {
        return Err(format!("negative dimension {d}"));
    }
    let n: usize = t
        .dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d as usize))
        .ok_or("element count overflows")?;
    let esz = dtype.size_bytes() as usize;
    let data: Vec<u8> = if t.data_location == Some(1) || !t.external_data.is_empty() {
        external(t, model_dir)?
    } else if let Some(raw) = &t.raw_data {
        raw.clone()
    } else {
        typed(t, dtype)?
    };
    let want = n.checked_mul(esz).ok_or("byte count overflows")?;
    if data.len() != want {
        return Err(format!(
            "holds {} bytes, but {:?} elements of {dtype} need {want}",
            data.len(),
            t.dims
        ));
    }
    Ok((
        dtype,
        t.dims.clone(),
        Literal {
            dtype,
            splat: false,
            data,
        },
    ))
}

fn typed(t: &TensorProto, dtype: DType) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    match dtype {
        DType::F32 => t
            .float_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        DType::F64 => t
            .double_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        DType::I64 => t
            .int64_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        DType::U32 => t
            .uint64_data
            .iter()
            .for_each(|v| out.extend_from_slice(&(*v as u32).to_le_bytes())),
        DType::U64 => t
            .uint64_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        DType::I32 => t
            .int32_data
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        DType::I16 | DType::F16 | DType::BF16 => t
            .int32_data
            .iter()
            .for_each(|v| out.extend_from_slice(&(*v as u16).to_le_bytes())),
        DType::I8 | DType::U8 | DType::I1 => t.int32_data.iter().for_each(|v| out.push(*v as u8)),
    }
    Ok(out)
}

fn external(t: &TensorProto, model_dir: Option<&Path>) -> Result<Vec<u8>, String> {
    let get = |k: &str| {
        t.external_data
            .iter()
            .find(|e| e.key.as_deref() == Some(k))
            .and_then(|e| e.value.clone())
    };
    let loc = get("location").ok_or("external data without a `location`")?;
    let rel = Path::new(&loc);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| c == std::path::Component::ParentDir)
    {
        return Err(format!(
            "external data location `{loc}` must be a relative path inside the model directory"
        ));
    }
    let dir = model_dir.ok_or("external data, but the model was not read from a file")?;
    let path = dir.join(rel);
    // Symbolic links are followed, and where they lead must still be inside the model's
    // directory (a link is no way around the relative-path rule above).
    let canon = |p: &Path| {
        std::fs::canonicalize(p).map_err(|e| format!("cannot read {}: {e}", p.display()))
    };
    let (real_dir, real) = (
        canon(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        })?,
        canon(&path)?,
    );
    if !real.starts_with(&real_dir) {
        return Err(format!(
            "external data location `{loc}` resolves to {}, outside the model directory {} \
             (symbolic links must stay inside it)",
            real.display(),
            real_dir.display()
        ));
    }
    let mut f = ebb_ir::fsio::open_regular(&real)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let size = f
        .metadata()
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .len();
    let num = |k: &str| -> Result<Option<u64>, String> {
        get(k)
            .map(|s| {
                s.parse::<u64>().map_err(|_| {
                    format!(
                        "external data `{k}` is `{s}`, not a byte count (a non-negative integer)"
                    )
                })
            })
            .transpose()
    };
    let off = num("offset")?.unwrap_or(0);
    let len = num("length")?.unwrap_or(size.saturating_sub(off));
    let end = off.checked_add(len).filter(|&e| e <= size).ok_or_else(|| {
        format!(
            "external data {off}..{} is past the end of {} ({size} bytes)",
            off as u128 + len as u128,
            path.display()
        )
    })?;
    // Only the range named is read, never the whole file.
    use std::io::{Read, Seek, SeekFrom};
    let mut bytes = vec![0u8; (end - off) as usize];
    f.seek(SeekFrom::Start(off))
        .and_then(|_| f.read_exact(&mut bytes))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(bytes)
}

/// A one-element literal holding `v` in `dtype` (booleans: `v != 0`).
pub fn scalar_literal(dtype: DType, v: f64) -> Literal {
    if dtype == DType::I1 {
        return Literal {
            dtype,
            splat: true,
            data: vec![(v != 0.0) as u8],
        };
    }
    if dtype == DType::F16 {
        return Literal {
            dtype,
            splat: true,
            data: f32_to_f16_bits(v as f32).to_le_bytes().to_vec(),
        };
    }
    Literal::splat_f64(dtype, v)
}
