//! Constructors of [`Bindings`]: from `(name, value)` pairs and from the `B=8,S=512` text that
//! the CLI's `--bind` and the tests use.

use super::{Bindings, Symbol};

/// A binding text that is not `NAME=INT(,NAME=INT)*`, or bindings that name a symbol the
/// scope does not declare ([`super::SymbolScope::check_known`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindingsError {
    /// A part without `=`.
    #[error("binding `{0}` is not NAME=VALUE")]
    NotAssignment(String),
    /// A value that is not a 64-bit integer.
    #[error("binding `{part}`: `{value}` is not an integer")]
    NotInteger {
        /// The whole part, `S=abc`.
        part: String,
        /// The value text.
        value: String,
    },
    /// A name given twice.
    #[error("symbol `{0}` is bound twice")]
    Repeated(String),
    /// An empty name.
    #[error("binding `{0}` has an empty name")]
    EmptyName(String),
    /// A symbol the scope does not declare (a typo, or a plan for another model).
    #[error("unknown symbol `{name}` (the symbols are: {known})")]
    UnknownSymbol {
        /// The unknown name.
        name: String,
        /// The declared symbols, comma-separated (`none` when there are none).
        known: String,
    },
}

/// `Bindings::from_pairs(&[("B", 8)])` and `Bindings::parse("B=8,S=512")` (bring the trait
/// into scope).
pub trait BindingsExt: Sized {
    /// Bindings of the given pairs (a later pair of the same name wins).
    fn from_pairs(pairs: &[(&str, i64)]) -> Self;
    /// Parses `NAME=INT` parts separated by commas (spaces allowed, empty parts skipped).
    /// Errors: [`BindingsError`] naming the bad part.
    fn parse(text: &str) -> Result<Self, BindingsError>;
    /// The text form [`BindingsExt::parse`] reads: `B=8,S=512`, in symbol order.
    fn to_text(&self) -> String;
}

impl BindingsExt for Bindings {
    fn from_pairs(pairs: &[(&str, i64)]) -> Self {
        pairs.iter().map(|(k, v)| (Symbol::new(k), *v)).collect()
    }

    fn to_text(&self) -> String {
        self.iter()
            .map(|(s, v)| format!("{}={v}", s.name()))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn parse(text: &str) -> Result<Self, BindingsError> {
        let mut b = Bindings::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| BindingsError::NotAssignment(part.into()))?;
            let (k, v) = (k.trim(), v.trim());
            if k.is_empty() {
                return Err(BindingsError::EmptyName(part.into()));
            }
            let value: i64 = v.parse().map_err(|_| BindingsError::NotInteger {
                part: part.into(),
                value: v.into(),
            })?;
            if b.insert(Symbol::new(k), value).is_some() {
                return Err(BindingsError::Repeated(k.into()));
            }
        }
        Ok(b)
    }
}
