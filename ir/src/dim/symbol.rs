//! [`Symbol`]: a named dimension variable.
//!
//! Symbols compare, hash and order by name; two `Symbol::new("B")` are the same symbol.
//! A symbol is an `Arc<str>`, so cloning one (as every expression does) is a reference-count
//! increment. Names are free-form; names that are not identifiers (`[A-Za-z_][A-Za-z0-9_]*`)
//! are written quoted (`"seq len"`) inside [`DimExpr`](super::DimExpr) text so that the text
//! still parses back.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A named dimension variable, e.g. the batch size `B`.
///
/// Serialized as its name (a string).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Symbol(Arc<str>);

impl Symbol {
    /// The symbol called `name`. Any string is accepted; prefer identifiers
    /// (`[A-Za-z_][A-Za-z0-9_]*`), which print without quotes.
    pub fn new(name: &str) -> Symbol {
        Symbol(Arc::from(name))
    }

    /// The symbol's name.
    pub fn name(&self) -> &str {
        &self.0
    }

    /// True when the name is an identifier and so prints without quotes in expressions.
    pub fn is_identifier(&self) -> bool {
        is_identifier(&self.0)
    }
}

/// True for `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Writes the symbol as it appears inside an expression: bare when an identifier, otherwise
/// in double quotes with `"` and `\` escaped by a backslash.
pub(crate) fn write_in_expr(s: &Symbol, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    if s.is_identifier() {
        return f.write_str(s.name());
    }
    f.write_str("\"")?;
    for c in s.name().chars() {
        if c == '"' || c == '\\' {
            f.write_str("\\")?;
        }
        write!(f, "{c}")?;
    }
    f.write_str("\"")
}

impl fmt::Display for Symbol {
    /// The bare name (unquoted, even when it is not an identifier).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Symbol {
    fn from(name: &str) -> Symbol {
        Symbol::new(name)
    }
}

impl Serialize for Symbol {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Symbol {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Symbol, D::Error> {
        let name = String::deserialize(d)?;
        Ok(Symbol::new(&name))
    }
}
