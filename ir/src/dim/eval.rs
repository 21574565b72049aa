//! Evaluation, substitution and polynomial structure of [`DimExpr`].
//!
//! Evaluation is exact: intermediate values are computed in `i128` with checked arithmetic and
//! only the final value has to fit in `i64`, so `2*B*B - B*B` evaluates wherever `B*B` does.

use std::collections::{BTreeMap, BTreeSet};

use super::atoms::{floor_div_with, min_max_with, rem_with, NoFacts};
use super::expr::{Atom, Monomial};
use super::{Bindings, DimError, DimExpr, Symbol};

impl Atom {
    fn eval(&self, b: &Bindings) -> Result<i128, DimError> {
        Ok(match self {
            Atom::Sym(s) => i128::from(
                *b.get(s)
                    .ok_or_else(|| DimError::Unbound(s.name().to_string()))?,
            ),
            Atom::FloorDiv(x, k) => x.eval_i128(b)?.div_euclid(i128::from(*k)),
            Atom::Mod(x, k) => x.eval_i128(b)?.rem_euclid(i128::from(*k)),
            Atom::Min(args) | Atom::Max(args) => {
                let mut best: Option<i128> = None;
                for a in args.iter() {
                    let v = a.eval_i128(b)?;
                    best = Some(match (best, self) {
                        (None, _) => v,
                        (Some(x), Atom::Min(_)) => x.min(v),
                        (Some(x), _) => x.max(v),
                    });
                }
                best.unwrap_or(0)
            }
        })
    }

    fn collect_symbols(&self, out: &mut BTreeSet<Symbol>) {
        match self {
            Atom::Sym(s) => {
                out.insert(s.clone());
            }
            Atom::FloorDiv(x, _) | Atom::Mod(x, _) => x.collect_symbols(out),
            Atom::Min(args) | Atom::Max(args) => args.iter().for_each(|a| a.collect_symbols(out)),
        }
    }

    pub(crate) fn mentions(&self, s: &Symbol) -> bool {
        match self {
            Atom::Sym(x) => x == s,
            Atom::FloorDiv(x, _) | Atom::Mod(x, _) => x.mentions(s),
            Atom::Min(args) | Atom::Max(args) => args.iter().any(|a| a.mentions(s)),
        }
    }

    fn substitute(&self, map: &BTreeMap<Symbol, DimExpr>) -> Result<DimExpr, DimError> {
        match self {
            Atom::Sym(s) => Ok(map.get(s).cloned().unwrap_or_else(|| DimExpr::symbol(s))),
            Atom::FloorDiv(x, k) => floor_div_with(&x.try_substitute(map)?, *k, &NoFacts),
            Atom::Mod(x, k) => rem_with(&x.try_substitute(map)?, *k, &NoFacts),
            Atom::Min(args) | Atom::Max(args) => {
                let args = args
                    .iter()
                    .map(|a| a.try_substitute(map))
                    .collect::<Result<Vec<_>, _>>()?;
                min_max_with(args, matches!(self, Atom::Max(_)), &NoFacts)
            }
        }
    }
}

impl DimExpr {
    /// Exact value in `i128` (see the module docs).
    pub(crate) fn eval_i128(&self, b: &Bindings) -> Result<i128, DimError> {
        let mut acc: i128 = 0;
        for (m, c) in &self.terms {
            let mut v = i128::from(*c);
            for (a, n) in &m.0 {
                let p = a.eval(b)?.checked_pow(*n).ok_or(DimError::Overflow)?;
                v = v.checked_mul(p).ok_or(DimError::Overflow)?;
            }
            acc = acc.checked_add(v).ok_or(DimError::Overflow)?;
        }
        Ok(acc)
    }

    /// The value of the expression with the symbols bound by `b`.
    ///
    /// # Errors
    /// [`DimError::Unbound`] with the symbol's name when a symbol has no value;
    /// [`DimError::Overflow`] when the value (or an intermediate beyond `i128`) does not fit.
    pub fn eval(&self, b: &Bindings) -> Result<i64, DimError> {
        i64::try_from(self.eval_i128(b)?).map_err(|_| DimError::Overflow)
    }

    fn collect_symbols(&self, out: &mut BTreeSet<Symbol>) {
        for (m, _) in &self.terms {
            for (a, _) in &m.0 {
                a.collect_symbols(out);
            }
        }
    }

    /// The symbols that occur anywhere in the expression (also inside atoms).
    pub fn symbols(&self) -> BTreeSet<Symbol> {
        let mut out = BTreeSet::new();
        self.collect_symbols(&mut out);
        out
    }

    /// True when `s` occurs anywhere in the expression.
    pub fn mentions(&self, s: &Symbol) -> bool {
        self.terms
            .iter()
            .any(|(m, _)| m.0.iter().any(|(a, _)| a.mentions(s)))
    }

    /// Replaces every symbol that is a key of `map` by its expression (simultaneously, not
    /// repeatedly) and re-canonicalizes.
    ///
    /// # Panics
    /// When a coefficient of the result leaves `i64`; see [`DimExpr::try_substitute`].
    pub fn substitute(&self, map: &BTreeMap<Symbol, DimExpr>) -> DimExpr {
        super::ops::or_panic(self.try_substitute(map))
    }

    /// [`DimExpr::substitute`], or [`DimError::Overflow`] when a coefficient leaves `i64`.
    pub fn try_substitute(&self, map: &BTreeMap<Symbol, DimExpr>) -> Result<DimExpr, DimError> {
        if map.is_empty() {
            return Ok(self.clone());
        }
        let mut acc = DimExpr::zero();
        for (m, c) in &self.terms {
            let mut t = DimExpr::constant(*c);
            for (a, n) in &m.0 {
                t = t.checked_mul(&a.substitute(map)?.checked_pow(*n)?)?;
            }
            acc = acc.checked_add(&t)?;
        }
        Ok(acc)
    }

    /// `Some(d)` when the expression is a polynomial of degree `d` in `s` (0 when `s` does
    /// not occur), `None` when `s` occurs inside a `floordiv`, `mod`, `min` or `max`.
    pub fn degree_in(&self, s: &Symbol) -> Option<u32> {
        let mut deg = 0;
        for (m, _) in &self.terms {
            for (a, n) in &m.0 {
                match a {
                    Atom::Sym(x) if x == s => deg = deg.max(*n),
                    Atom::Sym(_) => {}
                    other if other.mentions(s) => return None,
                    _ => {}
                }
            }
        }
        Some(deg)
    }

    /// The coefficients `c0..=cd` with `self == c0 + c1*s + ... + cd*s^d`, each free of `s`
    /// (`d` = [`DimExpr::degree_in`]); `None` when `s` occurs inside a non-polynomial atom.
    pub fn poly_coeffs_in(&self, s: &Symbol) -> Option<Vec<DimExpr>> {
        let d = self.degree_in(s)?;
        let atom = Atom::Sym(s.clone());
        let mut parts: Vec<Vec<(Monomial, i64)>> = vec![Vec::new(); d as usize + 1];
        for (m, c) in &self.terms {
            let e = m.exponent_of(&atom) as usize;
            let rest = if e == 0 { m.clone() } else { m.without(&atom) };
            parts[e].push((rest, *c));
        }
        Some(
            parts
                .into_iter()
                .map(|mut terms| {
                    terms.sort();
                    DimExpr {
                        terms: terms.into(),
                    }
                })
                .collect(),
        )
    }
}
