//! Symbolic dimensions: the integer expressions that tensor shapes, sizes and costs are made of,
//! and the scope of facts under which they are compared.
//!
//! * [`Symbol`] — a named dimension variable (`B`, `S`), cheap to clone (an `Arc<str>`).
//! * [`DimExpr`] — an integer expression over symbols with `+`, `-`, `*`, floor division and
//!   floor modulo by positive constants, `min` and `max`. It is kept in a *canonical form*: a
//!   sum of monomials with non-zero `i64` coefficients, each monomial a sorted product of
//!   *atoms* (symbols, `floordiv(e, k)`, `mod(e, k)`, `min(..)`, `max(..)`) whose arguments are
//!   canonical too. Two polynomials are equal as functions iff they are structurally equal, so
//!   `B*S - S*B` *is* `0`. Atoms are simplified by local rules only (see `atoms.rs`).
//! * [`SymbolScope`] — facts about symbols (ranges, divisibility, equalities) and the prover:
//!   [`SymbolScope::normalize`], [`SymbolScope::bounds`], [`SymbolScope::compare`]. Every
//!   proven answer is *sound*: it holds at every binding that satisfies the facts.
//!
//! The design follows tract's `TDim` (`data/src/dim/tree.rs`, `sym.rs`, `assertion.rs`):
//! a small canonical tree, division only by constants, comparisons proven from the difference
//! of the two sides. Unlike tract, the polynomial part is kept as a sorted sum of monomials,
//! and lower bounds are proven by interval arithmetic, a shift of every atom to its lower
//! bound (a positivity certificate on the shifted orthant) and case splits on `min`/`max`
//! atoms (see `prove.rs`).
//!
//! Arithmetic with the operators (`+`, `-`, `*`) panics when a *coefficient* leaves `i64`
//! (like `i64` arithmetic in debug builds); the `checked_*` methods return
//! [`DimError::Overflow`] instead and are what parsers and importers of untrusted input use.
//! Evaluation ([`DimExpr::eval`]) never panics.

mod atoms;
mod bindings;
mod certificate;
mod display;
mod eval;
pub(crate) mod expr;
mod grid;
// For the tests (`tests/dim_interval.rs`): the prover's interval arithmetic.
#[doc(hidden)]
pub mod interval;
mod ops;
mod parse;
mod prove;
mod scope;
mod symbol;

pub use bindings::{BindingsError, BindingsExt};
pub use expr::{DimExpr, MAX_PRODUCT_TERMS};
pub use grid::ValueGrid;
pub use scope::{SymbolScope, SAMPLE_CAP};
pub use symbol::Symbol;

/// Values of symbols, e.g. `{B: 8, S: 1024}`; used by [`DimExpr::eval`] and
/// [`SymbolScope::check`].
pub type Bindings = std::collections::BTreeMap<Symbol, i64>;

/// Result of [`SymbolScope::compare`]: what is *proven* about `a` versus `b` under the scope's
/// facts. `Unknown` means "not provable", not "incomparable".
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DimOrdering {
    /// `a < b` at every valid binding.
    Less,
    /// `a <= b` at every valid binding.
    LessEq,
    /// `a == b` at every valid binding.
    Equal,
    /// `a >= b` at every valid binding.
    GreaterEq,
    /// `a > b` at every valid binding.
    Greater,
    /// Nothing proven.
    Unknown,
}

impl DimOrdering {
    /// The ordering of `b` versus `a` (`Less` becomes `Greater`, ...).
    pub fn reverse(self) -> DimOrdering {
        match self {
            DimOrdering::Less => DimOrdering::Greater,
            DimOrdering::LessEq => DimOrdering::GreaterEq,
            DimOrdering::GreaterEq => DimOrdering::LessEq,
            DimOrdering::Greater => DimOrdering::Less,
            o => o,
        }
    }

    /// True when this proves `a <= b` (`Less`, `LessEq` or `Equal`).
    pub fn is_le(self) -> bool {
        matches!(
            self,
            DimOrdering::Less | DimOrdering::LessEq | DimOrdering::Equal
        )
    }

    /// True when this proves `a >= b` (`Greater`, `GreaterEq` or `Equal`).
    pub fn is_ge(self) -> bool {
        matches!(
            self,
            DimOrdering::Greater | DimOrdering::GreaterEq | DimOrdering::Equal
        )
    }
}

/// Errors of the symbolic-dimension algebra.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum DimError {
    /// A symbol has no value in the bindings given to [`DimExpr::eval`].
    #[error("symbol `{0}` is not bound")]
    Unbound(String),
    /// An intermediate or final value (or a coefficient) does not fit in `i64`.
    #[error("integer overflow in dimension arithmetic")]
    Overflow,
    /// `floordiv`/`mod` by a divisor that is zero or negative.
    #[error("divisor must be positive, got {0}")]
    NonPositiveDivisor(i64),
    /// Text that is not a dimension expression; `pos` is a byte offset into `input`.
    #[error("cannot parse dimension expression `{input}` at byte {pos}: {msg}")]
    Parse {
        /// The whole text given to the parser.
        input: String,
        /// Byte offset of the error.
        pos: usize,
        /// What was expected.
        msg: String,
    },
    /// A product of two expressions whose term counts multiply past
    /// [`MAX_PRODUCT_TERMS`]: no shape needs such a polynomial, and expanding it would
    /// take time and memory without bound (`(a+b+c)*(d+e+f)*...`).
    #[error(
        "dimension expression too large: a product of {lhs} by {rhs} terms (at most {} term pairs)",
        expr::MAX_PRODUCT_TERMS
    )]
    TooLarge {
        /// Terms of the left factor.
        lhs: usize,
        /// Terms of the right factor.
        rhs: usize,
    },
    /// A binding breaks a fact of the scope, e.g. `S = 7` against `S % 8 == 0`.
    #[error("symbol `{symbol}` = {value} violates the fact `{fact}`")]
    FactViolated {
        /// The symbol whose value breaks the fact.
        symbol: String,
        /// The fact, as text (`S >= 1`, `S <= 4096`, `S % 8 == 0`, `S == 2*T`).
        fact: String,
        /// The value of `symbol` in the bindings.
        value: i64,
    },
}
