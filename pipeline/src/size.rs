//! Byte sizes and memory budgets as the CLI reads them: `40000` (bytes), `512MiB`, `2GiB`,
//! `1.5GB`, and for budgets also `50%` (of the program-order peak at the shape) and
//! `50%scheduled` (of the plan's scheduled peak at the shape, without decisions).

/// The formats [`parse_bytes`] and [`parse_budget`] accept, for error messages.
pub const SIZE_FORMATS: &str =
    "bytes (40000) or a number with a unit (512MiB, 2GiB, 1.5GB; units B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)";

/// A memory budget: bytes, or a fraction of a peak at the shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    /// Bytes.
    Bytes(i64),
    /// Fraction of `peak_bytes_program_order` (0.5 = half).
    Fraction(f64),
    /// Fraction of `peak_bytes_scheduled`, the plan's peak without decisions.
    FractionOfScheduled(f64),
}

impl Budget {
    /// Bytes at a shape whose program-order and scheduled peaks are given.
    pub fn resolve(self, program_order: i64, scheduled: i64) -> i64 {
        match self {
            Budget::Bytes(v) => v,
            Budget::Fraction(f) => (program_order as f64 * f) as i64,
            Budget::FractionOfScheduled(f) => (scheduled as f64 * f) as i64,
        }
    }
}

/// A size or budget text that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SizeError {
    /// Not a number with an optional unit (or a percentage, for budgets).
    #[error("`{text}` is not a {what}: use {formats}")]
    Syntax {
        /// The text given.
        text: String,
        /// `size` or `budget`.
        what: &'static str,
        /// The accepted formats.
        formats: String,
    },
    /// A unit that is not one of the accepted ones.
    #[error("unknown size unit `{unit}` in `{text}`: use {SIZE_FORMATS}")]
    Unit {
        /// The text given.
        text: String,
        /// The unit found.
        unit: String,
    },
    /// Zero, negative, or not finite.
    #[error("{what} `{text}` must be positive")]
    NotPositive {
        /// The text given.
        text: String,
        /// `size` or `budget`.
        what: &'static str,
    },
    /// More bytes than a signed 64-bit integer holds.
    #[error(
        "{what} `{text}` is too large: sizes are at most {} bytes (2^63 - 1)",
        i64::MAX
    )]
    TooLarge {
        /// The text given.
        text: String,
        /// `size` or `budget`.
        what: &'static str,
    },
}

/// Splits `s` into its number and unit and returns the number of bytes it names (which may
/// be zero or negative; the callers decide).
fn bytes_of(s: &str, what: &'static str, formats: &str) -> Result<f64, SizeError> {
    let t = s.trim();
    // The unit starts at the first letter that is not a float exponent (`1e3`, `2.5E-1`).
    let b = t.as_bytes();
    let split = (0..b.len())
        .find(|&i| {
            b[i].is_ascii_alphabetic()
                && !((b[i] == b'e' || b[i] == b'E')
                    && i > 0
                    && b[i - 1].is_ascii_digit()
                    && b.get(i + 1)
                        .is_some_and(|c| c.is_ascii_digit() || *c == b'+' || *c == b'-'))
        })
        .unwrap_or(b.len());
    let (num, unit) = t.split_at(split);
    let syntax = || SizeError::Syntax {
        text: s.to_string(),
        what,
        formats: formats.to_string(),
    };
    let num = num.trim();
    if num.is_empty() || !num.starts_with(|c: char| c.is_ascii_digit() || "+-.".contains(c)) {
        return Err(syntax());
    }
    let v: f64 = num.parse().map_err(|_| syntax())?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kib" => 1024.0,
        "mib" => 1048576.0,
        "gib" => 1073741824.0,
        "tib" => 1099511627776.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        u => {
            return Err(SizeError::Unit {
                text: s.to_string(),
                unit: u.to_string(),
            })
        }
    };
    Ok(v * mult)
}

/// Rounds a positive byte count to `i64`; a whole number of bytes (`40000`, `40000B`) is
/// read exactly, so every size up to `i64::MAX` is accepted as written.
fn to_bytes(v: f64, s: &str, what: &'static str) -> Result<i64, SizeError> {
    let t = s.trim();
    let digits = t.strip_suffix(['B', 'b']).unwrap_or(t).trim();
    if let Ok(n) = digits.parse::<i128>() {
        return match i64::try_from(n) {
            Ok(n) if n >= 1 => Ok(n),
            Ok(_) => Err(SizeError::NotPositive {
                text: s.to_string(),
                what,
            }),
            Err(_) if n < 0 => Err(SizeError::NotPositive {
                text: s.to_string(),
                what,
            }),
            Err(_) => Err(SizeError::TooLarge {
                text: s.to_string(),
                what,
            }),
        };
    }
    // `1e400` parses as infinity: too large, not "not positive".
    if v == f64::INFINITY {
        return Err(SizeError::TooLarge {
            text: s.to_string(),
            what,
        });
    }
    if !(v.is_finite() && v.round() >= 1.0) {
        return Err(SizeError::NotPositive {
            text: s.to_string(),
            what,
        });
    }
    // `i64::MAX as f64` rounds up to 2^63, which does not fit.
    if v.round() >= i64::MAX as f64 {
        return Err(SizeError::TooLarge {
            text: s.to_string(),
            what,
        });
    }
    Ok(v.round() as i64)
}

/// Parses a positive byte size: `2GiB`, `512MiB`, `1.5GB`, `40000` (bytes).
///
/// # Errors
/// [`SizeError`]: not a size (the message lists the accepted formats), an unknown unit, a
/// size that is not positive or does not fit in `i64`.
pub fn parse_bytes(s: &str) -> Result<i64, SizeError> {
    to_bytes(bytes_of(s, "size", SIZE_FORMATS)?, s, "size")
}

/// Parses a budget: a size as [`parse_bytes`] reads it, `50%` of the program-order peak, or
/// `50%scheduled` of the scheduled peak.
///
/// # Errors
/// [`SizeError`]: not a size or percentage (the message lists the accepted formats), an
/// unknown unit, a budget that is not positive (`-5`, `-50%`, `0`) or too large.
pub fn parse_budget(s: &str) -> Result<Budget, SizeError> {
    let formats = format!(
        "{SIZE_FORMATS}, or a percentage of the program-order peak (50%) or of the scheduled \
         peak (50%scheduled)"
    );
    let (text, scheduled) = match s.trim().strip_suffix("%scheduled") {
        Some(t) => (format!("{t}%"), true),
        None => (s.trim().to_string(), false),
    };
    match text.strip_suffix('%') {
        Some(p) => {
            let p = p.trim();
            let syntax = || SizeError::Syntax {
                text: s.to_string(),
                what: "budget",
                formats: formats.clone(),
            };
            if !p.starts_with(|c: char| c.is_ascii_digit() || "+-.".contains(c)) {
                return Err(syntax());
            }
            let f: f64 = p.parse().map_err(|_| syntax())?;
            if !(f.is_finite() && f > 0.0) {
                return Err(SizeError::NotPositive {
                    text: s.to_string(),
                    what: "budget",
                });
            }
            Ok(if scheduled {
                Budget::FractionOfScheduled(f / 100.0)
            } else {
                Budget::Fraction(f / 100.0)
            })
        }
        None => Ok(Budget::Bytes(to_bytes(
            bytes_of(s, "budget", &formats)?,
            s,
            "budget",
        )?)),
    }
}
