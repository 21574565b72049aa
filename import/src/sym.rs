//! Symbolic integer values seen during import.
//!
//! JAX computes every dynamic shape at run time with small integer tensors:
//! `get_dimension_size` → `reshape` → `concatenate` → `dynamic_broadcast_in_dim`, with scalar
//! arithmetic in between. The importer follows these computations *symbolically*: an integer
//! tensor with a static shape whose elements are known [`DimExpr`]s is a [`SymVal`], and a
//! comparison of such values is a [`Pred`]. Ops that consume shape operands then get symbolic
//! result shapes, so no `?` survives import.

use ebb_ir::{DType, DimExpr, Relation, SymbolScope};

/// A predicate over symbolic dimensions (result of `compare` on [`SymVal`]s).
#[derive(Clone, Debug, PartialEq)]
pub enum Pred {
    /// Known truth value.
    Const(bool),
    /// `lhs REL rhs`, not decided at import time.
    Cmp(DimExpr, Relation, DimExpr),
}

impl Pred {
    /// `a AND b` where a truth value decides it (`false` and anything is `false`; `true` and
    /// `q` is `q`); `None` when neither side is decided (a conjunction of two open comparisons
    /// has no `Pred` form).
    pub fn and(a: &Pred, b: &Pred, scope: &SymbolScope) -> Option<Pred> {
        match (a.decide(scope), b.decide(scope)) {
            (Some(false), _) | (_, Some(false)) => Some(Pred::Const(false)),
            (Some(true), _) => Some(b.clone()),
            (_, Some(true)) => Some(a.clone()),
            (None, None) => None,
        }
    }

    /// `a OR b` = `NOT (NOT a AND NOT b)` (see [`Pred::and`]).
    pub fn or(a: &Pred, b: &Pred, scope: &SymbolScope) -> Option<Pred> {
        Pred::and(&a.not(), &b.not(), scope).map(|p| p.not())
    }

    /// `NOT p`: the complementary comparison.
    pub fn not(&self) -> Pred {
        match self {
            Pred::Const(b) => Pred::Const(!b),
            Pred::Cmp(a, rel, b) => {
                let r = match rel {
                    Relation::Eq => Relation::Ne,
                    Relation::Ne => Relation::Eq,
                    Relation::Lt => Relation::Ge,
                    Relation::Ge => Relation::Lt,
                    Relation::Le => Relation::Gt,
                    Relation::Gt => Relation::Le,
                };
                Pred::Cmp(a.clone(), r, b.clone())
            }
        }
    }

    /// Decides the predicate under the scope's facts if it can be proven either way.
    pub fn decide(&self, scope: &SymbolScope) -> Option<bool> {
        match self {
            Pred::Const(b) => Some(*b),
            Pred::Cmp(a, rel, b) => {
                use ebb_ir::DimOrdering::*;
                let o = scope.compare(a, b);
                match (rel, o) {
                    (_, Unknown) => None,
                    (Relation::Eq, Equal) | (Relation::Ne, Less | Greater) => Some(true),
                    (Relation::Eq, Less | Greater) | (Relation::Ne, Equal) => Some(false),
                    (Relation::Ge, Greater | GreaterEq | Equal) | (Relation::Gt, Greater) => {
                        Some(true)
                    }
                    (Relation::Ge, Less) | (Relation::Gt, Less | LessEq | Equal) => Some(false),
                    (Relation::Le, Less | LessEq | Equal) | (Relation::Lt, Less) => Some(true),
                    (Relation::Le, Greater) | (Relation::Lt, Greater | GreaterEq | Equal) => {
                        Some(false)
                    }
                    _ => None,
                }
            }
        }
    }
}

impl std::fmt::Display for Pred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pred::Const(b) => write!(f, "{b}"),
            Pred::Cmp(a, rel, b) => write!(f, "{a} {} {b}", rel.name()),
        }
    }
}

/// The sign of `x` (−1, 0 or 1) when the scope's facts decide it.
pub fn sign(x: &DimExpr, scope: &SymbolScope) -> Option<i64> {
    use ebb_ir::DimOrdering::*;
    match scope.compare(x, &DimExpr::constant(0)) {
        Greater => Some(1),
        Less => Some(-1),
        Equal => Some(0),
        _ => None,
    }
}

/// Known element values of a small integer or boolean tensor with a static shape.
#[derive(Clone, Debug, PartialEq)]
pub enum Elems {
    /// Integer elements.
    Int(Vec<DimExpr>),
    /// Boolean elements.
    Bool(Vec<Pred>),
}

/// A small tensor with a static shape whose elements are known symbolically.
#[derive(Clone, Debug, PartialEq)]
pub struct SymVal {
    /// Element type (an integer type or `i1`).
    pub dtype: DType,
    /// Static shape (rank 0 or 1 in practice).
    pub shape: Vec<i64>,
    /// The elements, row-major.
    pub elems: Elems,
}

impl SymVal {
    /// A scalar integer.
    pub fn scalar(dtype: DType, e: DimExpr) -> SymVal {
        SymVal {
            dtype,
            shape: vec![],
            elems: Elems::Int(vec![e]),
        }
    }

    /// The integer elements, if this is an integer value.
    pub fn ints(&self) -> Option<&[DimExpr]> {
        match &self.elems {
            Elems::Int(v) => Some(v),
            Elems::Bool(_) => None,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.elems {
            Elems::Int(v) => v.len(),
            Elems::Bool(v) => v.len(),
        }
    }

    /// True if it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Largest integer tensor (in elements) tracked symbolically; larger ones are data.
pub const MAX_SYM_ELEMS: i64 = 64;

/// Applies a StableHLO binary integer op elementwise to symbolic values. Returns `None` when the
/// result is not expressible (division by a non-constant or by a possibly-negative dividend, a
/// coefficient that overflows `i64`).
pub fn binary(op: &str, a: &[DimExpr], b: &[DimExpr], scope: &SymbolScope) -> Option<Vec<DimExpr>> {
    if a.len() != b.len() {
        return None;
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            Some(match op {
                // An overflow leaves the value to be computed as data (as the program would).
                "add" => x.checked_add(y).ok()?,
                "subtract" => x.checked_sub(y).ok()?,
                "multiply" => x.checked_mul(y).ok()?,
                "maximum" => x.checked_max(y).ok()?,
                "minimum" => x.checked_min(y).ok()?,
                "divide" | "remainder" => {
                    let k = y.as_const()?;
                    if k <= 0 {
                        return None;
                    }
                    // StableHLO integer division truncates toward zero; it equals floor
                    // division only for non-negative dividends.
                    if scope.bounds(x).0.is_none_or(|lo| lo < 0) {
                        return None;
                    }
                    if op == "divide" {
                        x.floor_div(k).ok()?
                    } else {
                        x.rem(k).ok()?
                    }
                }
                _ => return None,
            })
        })
        .collect()
}
