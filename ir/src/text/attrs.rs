//! Attribute values of the textual IR: the attribute dictionary `{name = value, ...}`, the
//! value syntax of each [`Attr`] kind, and literals (`dense<...> : dtype`), which are converted
//! to little-endian element bytes with range checks. Methods of the parser in `parse.rs`.

use super::lexer::Number;
use super::parse::Parser;
use super::ParseError;
use crate::dtype::DType;
use crate::op::{Attr, Attrs, Literal};

/// A splat element as written, converted once the element type is known.
enum Scalar<'a> {
    Hex(&'a str),
    Num(Number<'a>),
    Nan,
    Inf(bool),
    Bool(bool),
}

impl<'a> Parser<'a> {
    /// `{name = value, ...}`.
    pub(super) fn attr_dict(&mut self) -> Result<Attrs, ParseError> {
        self.c.expect("{", "to open the attributes")?;
        let mut attrs = Attrs::new();
        if self.c.eat("}") {
            return Ok(attrs);
        }
        loop {
            let at = self.c.here();
            let key = if self.c.peek() == Some(b'"') {
                self.c.string()?
            } else {
                self.c
                    .ident()
                    .ok_or_else(|| self.c.error("expected an attribute name"))?
                    .to_string()
            };
            self.c.expect("=", "after the attribute name")?;
            let value = self.attr_value()?;
            if attrs.insert(key.clone(), value).is_some() {
                return Err(self
                    .c
                    .error_at(at, format!("attribute `{key}` is given twice")));
            }
            if !self.c.eat(",") {
                break;
            }
        }
        self.c.expect("}", "to close the attributes")?;
        Ok(attrs)
    }

    pub(super) fn attr_value(&mut self) -> Result<Attr, ParseError> {
        let at = self.c.here();
        match self.c.peek() {
            Some(b'[') => {
                self.c.eat("[");
                let mut v = Vec::new();
                if !self.c.eat("]") {
                    loop {
                        v.push(
                            self.c
                                .int("a list element (use `dims[...]` for symbolic dimensions)")?,
                        );
                        if !self.c.eat(",") {
                            break;
                        }
                    }
                    self.c.expect("]", "to close the list")?;
                }
                return Ok(Attr::Ints(v));
            }
            Some(b'"') => return Ok(Attr::Str(self.c.string()?)),
            _ => {}
        }
        if self.c.eat("-inf") {
            return Ok(Attr::F64(f64::NEG_INFINITY));
        }
        match self.c.number() {
            Some(Number::Int(s)) => {
                return s.parse().map(Attr::I64).map_err(|_| {
                    self.c
                        .error_at(at, format!("integer `{s}` does not fit in 64 bits"))
                })
            }
            Some(Number::Float(s)) => {
                return s
                    .parse()
                    .map(Attr::F64)
                    .map_err(|_| self.c.error_at(at, format!("malformed float `{s}`")))
            }
            None => {}
        }
        let Some(word) = self.c.ident() else {
            return Err(self.c.error("expected an attribute value"));
        };
        Ok(match word {
            "true" => Attr::Bool(true),
            "false" => Attr::Bool(false),
            "nan" => Attr::F64(f64::NAN),
            "inf" => Attr::F64(f64::INFINITY),
            "dims" => Attr::Dims(self.dims_list()?),
            "dense" => Attr::Literal(self.literal()?),
            w => match w.parse::<DType>() {
                Ok(d) => Attr::DType(d),
                Err(_) => {
                    return Err(self
                        .c
                        .error_at(at, format!("unknown attribute value `{w}`")))
                }
            },
        })
    }

    /// After `dense`: `<scalar> : dtype`, `<"0xHEX"> : dtype` or `<splat "0xHEX"> : dtype`.
    fn literal(&mut self) -> Result<Literal, ParseError> {
        self.c.expect("<", "after `dense`")?;
        let at = self.c.here();
        let splat_raw = self.c.eat_keyword("splat");
        let (raw, scalar) = if splat_raw || self.c.peek() == Some(b'"') {
            let s = self.c.string()?;
            (
                Some(hex_bytes(&s).ok_or_else(|| {
                    self.c
                        .error_at(at, "expected `\"0x...\"` with an even number of hex digits")
                })?),
                None,
            )
        } else {
            (None, Some(self.scalar()?))
        };
        self.c.expect(">", "to close `dense<`")?;
        self.c
            .expect(":", "before the element type of the literal")?;
        let dtype = self.dtype()?;
        match (raw, scalar) {
            (Some(data), _) => Ok(Literal {
                dtype,
                splat: splat_raw,
                data,
            }),
            (None, Some(s)) => {
                let data = scalar_bytes(dtype, s).map_err(|m| self.c.error_at(at, m))?;
                Ok(Literal {
                    dtype,
                    splat: true,
                    data,
                })
            }
            (None, None) => Err(self.c.error_at(at, "empty literal")),
        }
    }

    fn scalar(&mut self) -> Result<Scalar<'a>, ParseError> {
        if let Some(h) = self.c.hex() {
            return Ok(Scalar::Hex(h));
        }
        if self.c.eat("-inf") {
            return Ok(Scalar::Inf(true));
        }
        if let Some(n) = self.c.number() {
            return Ok(Scalar::Num(n));
        }
        match self.c.ident() {
            Some("nan") => Ok(Scalar::Nan),
            Some("inf") => Ok(Scalar::Inf(false)),
            Some("true") => Ok(Scalar::Bool(true)),
            Some("false") => Ok(Scalar::Bool(false)),
            _ => Err(self
                .c
                .error("expected a number, `0x` bits, `nan`, `inf`, `true` or `false`")),
        }
    }
}

/// Bytes of `"0xHEX"` (even number of digits).
fn hex_bytes(s: &str) -> Option<Vec<u8>> {
    let h = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))?
        .as_bytes();
    if h.len() % 2 != 0 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    h.chunks_exact(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// Little-endian bytes of one splat element of type `dtype`.
fn scalar_bytes(dtype: DType, s: Scalar<'_>) -> Result<Vec<u8>, String> {
    let size = dtype.size_bytes() as usize;
    let float = |v: f64| -> Vec<u8> { Literal::splat_f64(dtype, v).data };
    match s {
        Scalar::Hex(h) => {
            let h = h.trim_start_matches('0');
            let v = if h.is_empty() {
                Ok(0)
            } else {
                u64::from_str_radix(h, 16)
            };
            match v {
                Ok(v) if size >= 8 || v >> (8 * size) == 0 => Ok(v.to_le_bytes()[..size].to_vec()),
                _ => Err(format!("`0x` bits do not fit in one {dtype} element")),
            }
        }
        Scalar::Nan | Scalar::Inf(_) if !dtype.is_float() => {
            Err(format!("`nan`/`inf` is not a {dtype} value"))
        }
        Scalar::Nan => Ok(float(f64::NAN)),
        Scalar::Inf(neg) => Ok(float(if neg {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        })),
        Scalar::Bool(b) if dtype == DType::I1 => Ok(vec![u8::from(b)]),
        Scalar::Bool(_) => Err(format!("`true`/`false` is not a {dtype} value")),
        Scalar::Num(Number::Float(t) | Number::Int(t)) if dtype == DType::F32 => t
            .parse::<f32>()
            .map(|v| v.to_le_bytes().to_vec())
            .map_err(|_| format!("malformed float `{t}`")),
        Scalar::Num(Number::Float(t) | Number::Int(t)) if dtype.is_float() => t
            .parse::<f64>()
            .map(float)
            .map_err(|_| format!("malformed float `{t}`")),
        Scalar::Num(Number::Float(t)) => Err(format!("float `{t}` is not a {dtype} value")),
        Scalar::Num(Number::Int(t)) => {
            let (lo, hi) = match dtype {
                DType::I1 | DType::U8 => (0, u8::MAX as i128),
                DType::I8 => (i8::MIN as i128, i8::MAX as i128),
                DType::I16 => (i16::MIN as i128, i16::MAX as i128),
                DType::I32 => (i32::MIN as i128, i32::MAX as i128),
                DType::U32 => (0, u32::MAX as i128),
                DType::U64 => (0, u64::MAX as i128),
                _ => (i64::MIN as i128, i64::MAX as i128),
            };
            match t.parse::<i128>() {
                Ok(v) if (lo..=hi).contains(&v) => Ok((v as i64).to_le_bytes()[..size].to_vec()),
                _ => Err(format!("integer `{t}` is out of range for {dtype}")),
            }
        }
    }
}
