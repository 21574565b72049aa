//! Text form of [`DimExpr`] (`Display`) and its serde representation (that text).
//!
//! The text is deterministic and parses back to the same expression (see `parse.rs`):
//! terms by decreasing degree, the constant last (`4*B + 12`, `-B + 3`, `768*B*S`); a
//! coefficient is written first (`2*B`, `-B`); powers as repeated factors (`B*B`); atoms as
//! calls: `floordiv(S, 2)`, `mod(S, 8)`, `min(B, 4)`, `max(B, S)`, with constant arguments of
//! `min`/`max` last. Symbols whose names are not identifiers are quoted (`"seq len"`).

use std::cmp::Reverse;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::expr::{Atom, Monomial};
use super::symbol::write_in_expr;
use super::DimExpr;

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Atom::Sym(s) => write_in_expr(s, f),
            Atom::FloorDiv(x, k) => write!(f, "floordiv({x}, {k})"),
            Atom::Mod(x, k) => write!(f, "mod({x}, {k})"),
            Atom::Min(args) | Atom::Max(args) => {
                f.write_str(if matches!(self, Atom::Min(_)) {
                    "min("
                } else {
                    "max("
                })?;
                let non_const = args.iter().filter(|a| a.as_const().is_none());
                let consts = args.iter().filter(|a| a.as_const().is_some());
                for (i, a) in non_const.chain(consts).enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// Writes `|c| * m` (the absolute value of the coefficient and the monomial).
fn write_body(f: &mut fmt::Formatter<'_>, m: &Monomial, abs: u64) -> fmt::Result {
    if m.is_one() {
        return write!(f, "{abs}");
    }
    let mut first = true;
    if abs != 1 {
        write!(f, "{abs}")?;
        first = false;
    }
    for (a, n) in &m.0 {
        for _ in 0..*n {
            if !first {
                f.write_str("*")?;
            }
            write!(f, "{a}")?;
            first = false;
        }
    }
    Ok(())
}

impl fmt::Display for DimExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return f.write_str("0");
        }
        let mut order: Vec<&(Monomial, i64)> = self.terms.iter().collect();
        order.sort_by_key(|(m, _)| (Reverse(m.degree()), m));
        for (i, (m, c)) in order.into_iter().enumerate() {
            let abs = c.unsigned_abs();
            match (i, *c < 0) {
                (0, false) => {}
                (0, true) => f.write_str("-")?,
                // `- 9223372036854775808` would not parse as a literal: keep the sign on it.
                (_, true) if *c == i64::MIN => f.write_str(" + -")?,
                (_, true) => f.write_str(" - ")?,
                (_, false) => f.write_str(" + ")?,
            }
            write_body(f, m, abs)?;
        }
        Ok(())
    }
}

impl Serialize for DimExpr {
    /// Serialized as its text form.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DimExpr {
    /// Deserialized from its text form; a parse error becomes the deserializer's error.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<DimExpr, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
