//! Readers for the textual forms of MLIR types and attributes as melior prints them:
//! `tensor<?x16xf32>`, `array<i64: 1, 0>`, `0 : i64`, `dense<...> : tensor<...>`,
//! `#stablehlo<comparison_direction GE>`, `#stablehlo.dot<lhs_contracting_dimensions = [1], ...>`.
//!
//! StableHLO attributes reach us as opaque attributes of an unregistered dialect, so their
//! text is the only interface; these readers are strict and return `None` on anything they do
//! not understand, which the importer turns into an error naming the op.

use ebb_ir::op::{f32_to_f16_bits, Literal};
use ebb_ir::DType;

/// A ranked tensor type: element type and dimensions (`None` for `?`).
#[derive(Clone, Debug, PartialEq)]
pub struct MlirTensorType {
    /// Element type.
    pub dtype: DType,
    /// Dimensions; `None` is a dynamic dimension.
    pub dims: Vec<Option<i64>>,
}

/// Parses `tensor<?x16xf32>` / `tensor<f32>`. Returns `Err(text)` for other types.
pub fn parse_tensor_type(t: &str) -> Result<MlirTensorType, String> {
    let inner = t
        .strip_prefix("tensor<")
        .and_then(|s| s.strip_suffix('>'))
        .ok_or_else(|| format!("expected a ranked tensor type, got `{t}`"))?;
    // Drop an encoding (`, #...`) if present.
    let inner = inner.split(',').next().unwrap_or(inner).trim();
    let parts: Vec<&str> = inner.split('x').collect();
    let (elem, dims) = parts
        .split_last()
        .ok_or_else(|| format!("empty tensor type `{t}`"))?;
    let dtype = elem.parse::<DType>().map_err(|e| e.to_string())?;
    let dims = dims
        .iter()
        .map(|d| {
            if *d == "?" {
                Ok(None)
            } else {
                d.parse::<i64>()
                    .map(Some)
                    .map_err(|_| format!("bad dimension `{d}` in `{t}`"))
            }
        })
        .collect::<Result<Vec<Option<i64>>, _>>()?;
    // The static part of the size must fit in 64 bits (a huge static dimension is an error
    // here, not an overflow in the size arithmetic later).
    let bytes = dims
        .iter()
        .flatten()
        .try_fold(dtype.size_bytes() as i64, |acc, &d| {
            if d < 0 {
                None
            } else {
                acc.checked_mul(d)
            }
        });
    if bytes.is_none() {
        return Err(format!(
            "tensor type `{t}`: a dimension is negative or its size in bytes overflows 64-bit integers"
        ));
    }
    Ok(MlirTensorType { dtype, dims })
}

/// Parses an integer attribute `5 : i64` (or a bare `5`).
pub fn parse_int(a: &str) -> Option<i64> {
    a.split(':').next()?.trim().parse().ok()
}

/// Parses a boolean attribute `true` / `false`.
pub fn parse_bool(a: &str) -> Option<bool> {
    match a.trim() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// Parses a string attribute `"..."` (with MLIR escapes `\"`, `\\`, `\n`, `\XX` hex).
pub fn parse_string(a: &str) -> Option<String> {
    let s = a.trim().strip_prefix('"')?.strip_suffix('"')?;
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            match b[i + 1] {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'"' => out.push(b'"'),
                b'\\' => out.push(b'\\'),
                _ if i + 2 < b.len() => {
                    let h = std::str::from_utf8(&b[i + 1..i + 3]).ok()?;
                    out.push(u8::from_str_radix(h, 16).ok()?);
                    i += 3;
                    continue;
                }
                _ => return None,
            }
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Parses `array<i64: 1, 0>` or `array<i64>` into integers.
pub fn parse_dense_array(a: &str) -> Option<Vec<i64>> {
    let inner = a.trim().strip_prefix("array<")?.strip_suffix('>')?;
    match inner.split_once(':') {
        None => Some(Vec::new()),
        Some((_, rest)) => parse_int_list(rest),
    }
}

/// Parses a comma-separated list of integers (brackets ignored): `1, 0`, `[1, 0]`, `[[0, 0], [1, 1]]`.
pub fn parse_int_list(s: &str) -> Option<Vec<i64>> {
    s.split([',', '[', ']'])
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| match x {
            "true" => Some(1),
            "false" => Some(0),
            _ => x.parse().ok(),
        })
        .collect()
}

/// Parses `#stablehlo<comparison_direction GE>` into `GE`; works for any `#dialect<kind VALUE>`.
pub fn parse_enum(a: &str) -> Option<String> {
    let inner = a.trim().strip_prefix("#stablehlo<")?.strip_suffix('>')?;
    Some(inner.split_whitespace().last()?.to_string())
}

/// Parses a struct-like opaque attribute `#stablehlo.NAME<k1 = [1, 2], k2 = 3>` into
/// (key, integers) pairs. Returns the body for non key-value forms (e.g. convolution
/// dimension numbers) as a single pair with key `""`.
pub fn parse_struct(a: &str, name: &str) -> Option<Vec<(String, Vec<i64>)>> {
    let prefix = format!("#stablehlo.{name}<");
    let inner = a.trim().strip_prefix(prefix.as_str())?.strip_suffix('>')?;
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    let bytes = inner.as_bytes();
    let mut fields = Vec::new();
    for (i, &c) in bytes.iter().enumerate() {
        match c {
            b'[' | b'<' => depth += 1,
            b']' | b'>' => depth -= 1,
            b',' if depth == 0 => {
                fields.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    fields.push(&inner[start..]);
    for f in fields {
        let f = f.trim();
        if f.is_empty() {
            continue;
        }
        let (k, v) = f.split_once('=')?;
        out.push((k.trim().to_string(), parse_int_list(v)?));
    }
    Some(out)
}

/// Body of `#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>`.
pub fn parse_conv_dimension_numbers(a: &str) -> Option<String> {
    let inner = a
        .trim()
        .strip_prefix("#stablehlo.conv<")?
        .strip_suffix('>')?;
    // `raw` form has `->`; keep the text, normalised without spaces.
    Some(inner.chars().filter(|c| !c.is_whitespace()).collect())
}

/// Parses a dense elements attribute `dense<...> : tensor<...>` into a literal and its type.
/// Supports splats (`dense<1.0>`, `dense<0xFF800000>`, `dense<true>`), nested lists and the hex
/// blob form `dense<"0x...">`.
pub fn parse_dense(a: &str) -> Option<(Literal, MlirTensorType)> {
    let a = a.trim();
    let body_end = a.rfind("> :")?;
    let body = a
        .strip_prefix("dense<")?
        .get(..body_end - "dense<".len())?
        .trim();
    let ty = parse_tensor_type(a[body_end + 3..].trim()).ok()?;
    let n: i64 = ty.dims.iter().map(|d| d.unwrap_or(0)).product();
    let dtype = ty.dtype;
    let esz = dtype.size_bytes() as usize;
    if let Some(hex) = body.strip_prefix("\"0x").and_then(|s| s.strip_suffix('"')) {
        let data: Option<Vec<u8>> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
            .collect();
        let data = data?;
        let splat = data.len() == esz && n != 1;
        return Some((Literal { dtype, splat, data }, ty));
    }
    let items: Vec<&str> = body
        .split([',', '[', ']', '(', ')'])
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .collect();
    let mut data = Vec::with_capacity(items.len() * esz);
    for it in &items {
        data.extend(encode_element(dtype, it)?);
    }
    let splat = items.len() == 1 && !body.starts_with('[');
    if !splat && items.len() as i64 != n {
        return None;
    }
    Some((Literal { dtype, splat, data }, ty))
}

fn encode_element(dtype: DType, s: &str) -> Option<Vec<u8>> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        let bits = u64::from_str_radix(h, 16).ok()?;
        return Some(bits.to_le_bytes()[..dtype.size_bytes() as usize].to_vec());
    }
    let v: f64 = match s {
        "true" => 1.0,
        "false" => 0.0,
        _ => s.parse().ok()?,
    };
    Some(match dtype {
        DType::F32 => (v as f32).to_le_bytes().to_vec(),
        DType::F64 => v.to_le_bytes().to_vec(),
        DType::BF16 => {
            let b = (v as f32).to_bits();
            let r = ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16;
            r.to_le_bytes().to_vec()
        }
        DType::F16 => f32_to_f16_bits(v as f32).to_le_bytes().to_vec(),
        _ => {
            let i: i64 = s.parse().ok().or(if s == "true" {
                Some(1)
            } else if s == "false" {
                Some(0)
            } else {
                None
            })?;
            i.to_le_bytes()[..dtype.size_bytes() as usize].to_vec()
        }
    })
}
