//! [`DimExpr`]: the canonical representation and its polynomial arithmetic.
//!
//! Invariants of a `DimExpr` (kept by every constructor in this module and in `atoms.rs`):
//! * `terms` is sorted strictly by monomial (no monomial twice) and no coefficient is zero;
//!   the zero expression has no terms, a constant `c != 0` is the single term `(1, c)`.
//! * a [`Monomial`] is a product of atoms sorted strictly by atom, every exponent `>= 1`;
//!   the empty product is the monomial `1`.
//! * atom arguments are canonical and already simplified by the rules of `atoms.rs`.
//!
//! Under these invariants two expressions without non-symbol atoms are equal as integer
//! functions iff they are structurally equal (a polynomial identity over the integers has
//! unique coefficients).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{DimError, Symbol};

/// Largest number of term pairs [`DimExpr::checked_mul`] multiplies out (the product of the
/// factors' term counts); beyond it the product is [`DimError::TooLarge`]. Real shapes are
/// sums of a few monomials; this only stops adversarial text such as a `dim_param` of many
/// nested sums from expanding without bound.
pub const MAX_PRODUCT_TERMS: usize = 1 << 12;

/// An indivisible factor of a monomial.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub(crate) enum Atom {
    /// A symbol.
    Sym(Symbol),
    /// `floordiv(e, k)`, `k >= 2`: the largest integer `q` with `q*k <= e`.
    FloorDiv(Arc<DimExpr>, i64),
    /// `mod(e, k)`, `k >= 2`: `e - k*floordiv(e, k)`, in `0..k`.
    Mod(Arc<DimExpr>, i64),
    /// `min` of at least two distinct arguments, sorted.
    Min(Arc<[DimExpr]>),
    /// `max` of at least two distinct arguments, sorted.
    Max(Arc<[DimExpr]>),
}

/// A product of atoms with positive exponents, sorted by atom.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub(crate) struct Monomial(pub(crate) Vec<(Atom, u32)>);

impl Monomial {
    /// The monomial of a single atom.
    pub(crate) fn of_atom(a: Atom) -> Monomial {
        Monomial(vec![(a, 1)])
    }

    /// True for the empty product `1`.
    pub(crate) fn is_one(&self) -> bool {
        self.0.is_empty()
    }

    /// Total degree (sum of exponents).
    pub(crate) fn degree(&self) -> u64 {
        self.0.iter().map(|(_, e)| u64::from(*e)).sum()
    }

    /// Product of two monomials (merge of the sorted factor lists).
    pub(crate) fn mul(&self, o: &Monomial) -> Result<Monomial, DimError> {
        if self.is_one() {
            return Ok(o.clone());
        }
        if o.is_one() {
            return Ok(self.clone());
        }
        let (a, b) = (&self.0, &o.0);
        let mut out = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            match a[i].0.cmp(&b[j].0) {
                std::cmp::Ordering::Less => {
                    out.push(a[i].clone());
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    out.push(b[j].clone());
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    let e = a[i].1.checked_add(b[j].1).ok_or(DimError::Overflow)?;
                    out.push((a[i].0.clone(), e));
                    i += 1;
                    j += 1;
                }
            }
        }
        out.extend_from_slice(&a[i..]);
        out.extend_from_slice(&b[j..]);
        Ok(Monomial(out))
    }

    /// The exponent of `atom` in this monomial (0 when absent).
    pub(crate) fn exponent_of(&self, atom: &Atom) -> u32 {
        match self.0.binary_search_by(|(a, _)| a.cmp(atom)) {
            Ok(i) => self.0[i].1,
            Err(_) => 0,
        }
    }

    /// This monomial without `atom` (whatever its exponent).
    pub(crate) fn without(&self, atom: &Atom) -> Monomial {
        Monomial(self.0.iter().filter(|(a, _)| a != atom).cloned().collect())
    }
}

/// A canonical integer expression over [`Symbol`]s: `+`, `-`, `*`, floor division and floor
/// modulo by positive constants, `min`, `max`.
///
/// The canonical form is a sum of monomials with non-zero `i64` coefficients over atoms
/// (symbols, `floordiv(e, k)`, `mod(e, k)`, `min(..)`, `max(..)`), so structural equality is
/// semantic equality for polynomials: `B*S - S*B` is `0`, `(B+1)*(B-1)` is `B*B - 1`.
/// Build expressions with [`DimExpr::constant`], [`DimExpr::sym`], the operators and
/// [`DimExpr::floor_div`] / [`DimExpr::rem`] / [`DimExpr::min`] / [`DimExpr::max`], or parse
/// them from text (`"4*B*S + floordiv(S, 2)"`). The default value is `0`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct DimExpr {
    pub(crate) terms: Terms,
}

/// The terms of a [`DimExpr`], shared: an expression is built once and never changed, so a
/// clone (a tensor type's shape, a plan value's size, each use of an interned expression)
/// shares them instead of copying every monomial. Compares, orders, hashes and prints as the
/// slice of its terms.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub(crate) struct Terms(Arc<[(Monomial, i64)]>);

impl Terms {
    /// The terms as a slice.
    pub(crate) fn as_slice(&self) -> &[(Monomial, i64)] {
        &self.0
    }
}

impl std::ops::Deref for Terms {
    type Target = [(Monomial, i64)];
    fn deref(&self) -> &[(Monomial, i64)] {
        &self.0
    }
}

impl<'a> IntoIterator for &'a Terms {
    type Item = &'a (Monomial, i64);
    type IntoIter = std::slice::Iter<'a, (Monomial, i64)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl From<Vec<(Monomial, i64)>> for Terms {
    fn from(v: Vec<(Monomial, i64)>) -> Terms {
        Terms(v.into())
    }
}

impl From<&[(Monomial, i64)]> for Terms {
    fn from(v: &[(Monomial, i64)]) -> Terms {
        Terms(v.into())
    }
}

impl std::fmt::Debug for Terms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Largest size (terms and factors, nested `floordiv`/`mod`/`min`/`max` arguments counted
/// each time they appear) of an expression parsed from text: beyond it the text is refused.
/// The plans' peak terms stay far below it; a `dim_param` of many nested floor divisions of
/// products, whose interval reasoning grows faster than its text, does not.
pub const MAX_PARSED_SIZE: usize = 1 << 15;

impl DimExpr {
    /// True when the size of `self` (terms, factors, and recursively the arguments of its
    /// atoms) exceeds `limit`; stops counting as soon as it does.
    pub fn size_exceeds(&self, limit: usize) -> bool {
        fn walk(e: &DimExpr, left: &mut usize) -> bool {
            for (m, _) in &e.terms {
                let n = 1 + m.0.len();
                if *left < n {
                    return true;
                }
                *left -= n;
                for (a, _) in &m.0 {
                    let over = match a {
                        Atom::Sym(_) => false,
                        Atom::FloorDiv(x, _) | Atom::Mod(x, _) => walk(x, left),
                        Atom::Min(xs) | Atom::Max(xs) => xs.iter().any(|x| walk(x, left)),
                    };
                    if over {
                        return true;
                    }
                }
            }
            false
        }
        let mut left = limit;
        walk(self, &mut left)
    }

    /// The constant `v`.
    pub fn constant(v: i64) -> DimExpr {
        if v == 0 {
            DimExpr::default()
        } else {
            DimExpr {
                terms: vec![(Monomial::default(), v)].into(),
            }
        }
    }

    /// The address of this expression's terms, which its clones share: two expressions with
    /// the same address are equal (equal expressions built apart have different addresses).
    /// For a cache keyed by identity, such as an interner of expressions it borrows: the
    /// address stays this expression's while it, or a clone, lives.
    pub fn terms_addr(&self) -> usize {
        self.terms.0.as_ptr() as usize
    }

    /// The constant `0`.
    pub fn zero() -> DimExpr {
        DimExpr::default()
    }

    /// The expression consisting of the symbol `s`.
    pub fn symbol(s: &Symbol) -> DimExpr {
        DimExpr::from_atom(Atom::Sym(s.clone()))
    }

    /// The expression consisting of the symbol named `name` (shorthand for
    /// `DimExpr::symbol(&Symbol::new(name))`).
    pub fn sym(name: &str) -> DimExpr {
        DimExpr::symbol(&Symbol::new(name))
    }

    /// `1 * atom`.
    pub(crate) fn from_atom(a: Atom) -> DimExpr {
        DimExpr {
            terms: vec![(Monomial::of_atom(a), 1)].into(),
        }
    }

    /// Builds an expression from accumulated `i128` coefficients, dropping zeros.
    pub(crate) fn from_map(map: BTreeMap<Monomial, i128>) -> Result<DimExpr, DimError> {
        let mut terms = Vec::with_capacity(map.len());
        for (m, c) in map {
            if c != 0 {
                terms.push((m, i64::try_from(c).map_err(|_| DimError::Overflow)?));
            }
        }
        Ok(DimExpr {
            terms: terms.into(),
        })
    }

    /// The value if this is a constant.
    pub fn as_const(&self) -> Option<i64> {
        match self.terms.as_slice() {
            [] => Some(0),
            [(m, c)] if m.is_one() => Some(*c),
            _ => None,
        }
    }

    /// The symbol if this expression is exactly one symbol (coefficient 1, exponent 1).
    pub fn as_symbol(&self) -> Option<&Symbol> {
        match self.terms.as_slice() {
            [(m, 1)] => match m.0.as_slice() {
                [(Atom::Sym(s), 1)] => Some(s),
                _ => None,
            },
            _ => None,
        }
    }

    /// The atom if this expression is exactly `1 * atom`.
    pub(crate) fn as_atom(&self) -> Option<&Atom> {
        match self.terms.as_slice() {
            [(m, 1)] => match m.0.as_slice() {
                [(a, 1)] => Some(a),
                _ => None,
            },
            _ => None,
        }
    }

    /// True for the constant `0`.
    pub fn is_zero(&self) -> bool {
        self.terms.is_empty()
    }

    /// True when every atom is a symbol (no `floordiv`, `mod`, `min`, `max`).
    pub fn is_polynomial(&self) -> bool {
        self.terms
            .iter()
            .all(|(m, _)| m.0.iter().all(|(a, _)| matches!(a, Atom::Sym(_))))
    }

    /// The constant term (0 when absent).
    pub(crate) fn constant_term(&self) -> i64 {
        match self.terms.first() {
            Some((m, c)) if m.is_one() => *c,
            _ => 0,
        }
    }

    /// The terms without the constant term.
    pub(crate) fn non_constant_terms(&self) -> &[(Monomial, i64)] {
        match self.terms.first() {
            Some((m, _)) if m.is_one() => &self.terms[1..],
            _ => &self.terms,
        }
    }

    /// `self + o`, or [`DimError::Overflow`] when a coefficient leaves `i64`.
    pub fn checked_add(&self, o: &DimExpr) -> Result<DimExpr, DimError> {
        if o.is_zero() {
            return Ok(self.clone());
        }
        if self.is_zero() {
            return Ok(o.clone());
        }
        let (a, b) = (&self.terms, &o.terms);
        let mut out = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            match a[i].0.cmp(&b[j].0) {
                std::cmp::Ordering::Less => {
                    out.push(a[i].clone());
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    out.push(b[j].clone());
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    let c = a[i].1.checked_add(b[j].1).ok_or(DimError::Overflow)?;
                    if c != 0 {
                        out.push((a[i].0.clone(), c));
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        out.extend_from_slice(&a[i..]);
        out.extend_from_slice(&b[j..]);
        Ok(DimExpr { terms: out.into() })
    }

    /// `-self`, or [`DimError::Overflow`] for a coefficient `i64::MIN`.
    pub fn checked_neg(&self) -> Result<DimExpr, DimError> {
        self.checked_scale(-1)
    }

    /// `self - o`, or [`DimError::Overflow`] when a coefficient leaves `i64`.
    pub fn checked_sub(&self, o: &DimExpr) -> Result<DimExpr, DimError> {
        if o.is_zero() {
            return Ok(self.clone());
        }
        let mut map: BTreeMap<Monomial, i128> = BTreeMap::new();
        for (m, c) in &self.terms {
            map.insert(m.clone(), i128::from(*c));
        }
        for (m, c) in &o.terms {
            *map.entry(m.clone()).or_insert(0) -= i128::from(*c);
        }
        DimExpr::from_map(map)
    }

    /// `c * self`, or [`DimError::Overflow`].
    pub fn checked_scale(&self, c: i64) -> Result<DimExpr, DimError> {
        if c == 0 {
            return Ok(DimExpr::zero());
        }
        let mut terms = Vec::with_capacity(self.terms.len());
        for (m, k) in &self.terms {
            terms.push((m.clone(), k.checked_mul(c).ok_or(DimError::Overflow)?));
        }
        Ok(DimExpr {
            terms: terms.into(),
        })
    }

    /// `self * o` (polynomial product), or [`DimError::Overflow`].
    pub fn checked_mul(&self, o: &DimExpr) -> Result<DimExpr, DimError> {
        if let Some(c) = o.as_const() {
            return self.checked_scale(c);
        }
        if let Some(c) = self.as_const() {
            return o.checked_scale(c);
        }
        if self.terms.len().saturating_mul(o.terms.len()) > MAX_PRODUCT_TERMS {
            return Err(DimError::TooLarge {
                lhs: self.terms.len(),
                rhs: o.terms.len(),
            });
        }
        let mut map: BTreeMap<Monomial, i128> = BTreeMap::new();
        for (ma, ca) in &self.terms {
            for (mb, cb) in &o.terms {
                let m = ma.mul(mb)?;
                let p = i128::from(*ca) * i128::from(*cb);
                let slot = map.entry(m).or_insert(0);
                *slot = slot.checked_add(p).ok_or(DimError::Overflow)?;
            }
        }
        DimExpr::from_map(map)
    }

    /// `self^n` by repeated squaring, or [`DimError::Overflow`].
    pub fn checked_pow(&self, mut n: u32) -> Result<DimExpr, DimError> {
        let mut base = self.clone();
        let mut acc = DimExpr::constant(1);
        while n > 0 {
            if n & 1 == 1 {
                acc = acc.checked_mul(&base)?;
            }
            n >>= 1;
            if n > 0 {
                base = base.checked_mul(&base)?;
            }
        }
        Ok(acc)
    }
}
