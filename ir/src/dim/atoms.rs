//! Construction of the non-polynomial atoms: `floordiv`, `mod`, `min`, `max`.
//!
//! Rules (each an identity over the integers, `k > 0`):
//! * `floordiv(k*Q + R, k) = Q + floordiv(R, k)` where every coefficient of `R` lies in
//!   `0..k` (`c = k*c.div_euclid(k) + c.rem_euclid(k)`); likewise `mod(k*Q + R, k) = mod(R, k)`.
//!   So `floordiv(4*B + 2, 2) = 2*B + 1` and `mod(4*B, 2) = 0`.
//! * `floordiv(g*R, g*k) = floordiv(R, k)`, `mod(g*R, g*k) = g*mod(R, k)` for `g` the gcd of
//!   `k` and the coefficients of `R`.
//! * `floordiv(floordiv(x, a), b) = floordiv(x, a*b)`; `mod(mod(x, a), b) = mod(x, b)` when
//!   `b | a`.
//! * with facts (see [`Facts`]): `floordiv(R, k) = j` and `mod(R, k) = R - j*k` when `R` stays in
//!   `[j*k, j*k + k)`; `mod(R, k) = 0` when `k | R`; `floordiv(R, k) = sum floordiv(t, k)` over
//!   the terms `t` of `R` when `k` divides every term.
//! * `min`/`max`: nested ones are flattened (`max(x, p + max(a, b)) = max(x, p + a, p + b)`),
//!   the part common to all arguments is pulled out
//!   (`min(B + 1, S + 1) = min(B, S) + 1`, the constant shifted so the smallest argument
//!   constant is 0), arguments that differ by a constant keep only the dominant one
//!   (`min(B, B + 1) = B`), duplicates are removed, and with facts arguments proven
//!   dominated are dropped.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::expr::{Atom, DimExpr, Monomial};
use super::interval::{expr_interval, Interval};
use super::DimError;

/// What the atom constructors may assume. [`NoFacts`] gives the context-free canonical form;
/// the symbol scope gives the normal form under its facts.
pub(crate) trait Facts {
    /// A positive `g` with `g | e` at every valid binding, or 0 when `e` is identically 0.
    fn divisor(&self, e: &DimExpr) -> i128;
    /// A sound interval of `e`.
    fn interval(&self, e: &DimExpr) -> Interval;
    /// Proven `a <= b`; only consulted when [`Facts::prunes`] is true.
    fn le(&self, a: &DimExpr, b: &DimExpr) -> bool;
    /// Whether `min`/`max` arguments should be pruned with [`Facts::le`].
    fn prunes(&self) -> bool;
}

/// No facts: symbols are unbounded integers.
pub(crate) struct NoFacts;

impl Facts for NoFacts {
    fn divisor(&self, e: &DimExpr) -> i128 {
        e.terms.iter().fold(0, |g, (_, c)| gcd(g, i128::from(*c)))
    }
    fn interval(&self, e: &DimExpr) -> Interval {
        expr_interval(e, &|_| Interval::FULL)
    }
    fn le(&self, _: &DimExpr, _: &DimExpr) -> bool {
        false
    }
    fn prunes(&self) -> bool {
        false
    }
}

/// Greatest common divisor of `|a|` and `|b|` (`gcd(0, 0) = 0`).
pub(crate) fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    i128::try_from(a).unwrap_or(i128::MAX)
}

/// Splits `x = k*q + r` with every coefficient of `r` in `0..k`.
fn split_multiple(x: &DimExpr, k: i64) -> (DimExpr, DimExpr) {
    let mut q = Vec::new();
    let mut r = Vec::new();
    for (m, c) in &x.terms {
        let (cq, cr) = (c.div_euclid(k), c.rem_euclid(k));
        if cq != 0 {
            q.push((m.clone(), cq));
        }
        if cr != 0 {
            r.push((m.clone(), cr));
        }
    }
    (DimExpr { terms: q.into() }, DimExpr { terms: r.into() })
}

/// Divides every coefficient by `g` (which divides them all).
fn divide_coeffs(x: &DimExpr, g: i64) -> DimExpr {
    DimExpr {
        terms: x
            .terms
            .iter()
            .map(|(m, c)| (m.clone(), c / g))
            .collect::<Vec<_>>()
            .into(),
    }
}

fn coeff_gcd(x: &DimExpr, k: i64) -> i64 {
    let g = x
        .terms
        .iter()
        .fold(i128::from(k), |g, (_, c)| gcd(g, i128::from(*c)));
    i64::try_from(g).unwrap_or(1)
}

/// `j` when `r` provably lies in `[j*k, j*k + k)`.
fn single_period(r: &DimExpr, k: i64, facts: &dyn Facts) -> Option<i128> {
    let (lo, hi) = facts.interval(r).finite()?;
    let k = i128::from(k);
    let j = lo.div_euclid(k);
    (j == hi.div_euclid(k)).then_some(j)
}

/// `floordiv(x, k)` simplified by the rules in the module docs.
pub(crate) fn floor_div_with(x: &DimExpr, k: i64, facts: &dyn Facts) -> Result<DimExpr, DimError> {
    if k <= 0 {
        return Err(DimError::NonPositiveDivisor(k));
    }
    if k == 1 {
        return Ok(x.clone());
    }
    let (q, r) = split_multiple(x, k);
    if r.is_zero() {
        return Ok(q);
    }
    let g = coeff_gcd(&r, k);
    let (r, k) = (divide_coeffs(&r, g), k / g);
    if k == 1 {
        return q.checked_add(&r);
    }
    if let Some(j) = single_period(&r, k, facts) {
        let j = i64::try_from(j).map_err(|_| DimError::Overflow)?;
        return q.checked_add(&DimExpr::constant(j));
    }
    let d = facts.divisor(&r);
    if r.terms.len() > 1 && d != 0 && d % i128::from(k) == 0 {
        let mut acc = q;
        for t in &r.terms {
            let t = DimExpr {
                terms: vec![t.clone()].into(),
            };
            acc = acc.checked_add(&floor_div_with(&t, k, facts)?)?;
        }
        return Ok(acc);
    }
    if let Some(Atom::FloorDiv(inner, a)) = r.as_atom() {
        if let Some(ak) = a.checked_mul(k) {
            return q.checked_add(&floor_div_with(inner, ak, facts)?);
        }
    }
    q.checked_add(&DimExpr::from_atom(Atom::FloorDiv(Arc::new(r), k)))
}

/// `mod(x, k)` (floor modulo, in `0..k`) simplified by the rules in the module docs.
pub(crate) fn rem_with(x: &DimExpr, k: i64, facts: &dyn Facts) -> Result<DimExpr, DimError> {
    if k <= 0 {
        return Err(DimError::NonPositiveDivisor(k));
    }
    if k == 1 {
        return Ok(DimExpr::zero());
    }
    let (_, r) = split_multiple(x, k);
    if r.is_zero() || r.as_const().is_some() {
        return Ok(r);
    }
    let g = coeff_gcd(&r, k);
    if g > 1 {
        return rem_with(&divide_coeffs(&r, g), k / g, facts)?.checked_scale(g);
    }
    let d = facts.divisor(&r);
    if d != 0 && d % i128::from(k) == 0 {
        return Ok(DimExpr::zero());
    }
    if let Some(j) = single_period(&r, k, facts) {
        let jk = i64::try_from(j * i128::from(k)).map_err(|_| DimError::Overflow)?;
        return r.checked_sub(&DimExpr::constant(jk));
    }
    if let Some(Atom::Mod(inner, a)) = r.as_atom() {
        if a % k == 0 {
            return rem_with(inner, k, facts);
        }
    }
    Ok(DimExpr::from_atom(Atom::Mod(Arc::new(r), k)))
}

/// Flattening stops growing the argument list beyond this.
const MAX_FLAT_ARGS: usize = 64;

/// `min(args)` (or `max(args)` when `is_max`) simplified by the rules in the module docs.
/// An empty argument list gives 0 (callers never pass one).
pub(crate) fn min_max_with(
    args: Vec<DimExpr>,
    is_max: bool,
    facts: &dyn Facts,
) -> Result<DimExpr, DimError> {
    // Flatten nested atoms of the same kind, distributing what is added to them:
    // `max(x, p + max(a, b)) = max(x, p + a, p + b)`.
    let mut work = args;
    let mut flat = Vec::with_capacity(work.len());
    while let Some(a) = work.pop() {
        let nested = a.terms.iter().position(|(m, c)| match m.0.as_slice() {
            [(Atom::Max(_), 1)] => *c == 1 && is_max,
            [(Atom::Min(_), 1)] => *c == 1 && !is_max,
            _ => false,
        });
        match nested {
            Some(i) if flat.len() + work.len() < MAX_FLAT_ARGS => {
                let mut terms = a.terms.to_vec();
                let (m, _) = terms.remove(i);
                let rest = DimExpr {
                    terms: terms.into(),
                };
                if let Some((Atom::Min(inner) | Atom::Max(inner), _)) = m.0.first() {
                    for x in inner.iter() {
                        work.push(rest.checked_add(x)?);
                    }
                }
            }
            _ => flat.push(a),
        }
    }
    // Keep, per non-constant part, only the dominant constant (`max(B, B + 1) = B + 1`).
    let mut best: BTreeMap<&[(Monomial, i64)], i64> = BTreeMap::new();
    for a in &flat {
        let c = a.constant_term();
        let slot = best.entry(a.non_constant_terms()).or_insert(c);
        *slot = if is_max {
            (*slot).max(c)
        } else {
            (*slot).min(c)
        };
    }
    let args: Vec<DimExpr> = best
        .into_iter()
        .map(|(nc, c)| DimExpr { terms: nc.into() }.checked_add(&DimExpr::constant(c)))
        .collect::<Result<_, _>>()?;
    let Some(first) = args.first() else {
        return Ok(DimExpr::zero());
    };
    // The common part: identical non-constant terms, plus the smallest constant term.
    let mut common: Vec<(Monomial, i64)> = first
        .non_constant_terms()
        .iter()
        .filter(|t| args[1..].iter().all(|a| a.terms.binary_search(t).is_ok()))
        .cloned()
        .collect();
    let c0 = args.iter().map(DimExpr::constant_term).min().unwrap_or(0);
    if c0 != 0 {
        common.insert(0, (Monomial::default(), c0));
    }
    let common = DimExpr {
        terms: common.into(),
    };
    let mut rest: Vec<DimExpr> = args
        .iter()
        .map(|a| a.checked_sub(&common))
        .collect::<Result<_, _>>()?;
    let before = rest.len();
    if facts.prunes() && rest.len() > 1 {
        let mut i = 0;
        while i < rest.len() {
            let dominated = (0..rest.len()).any(|j| {
                j != i
                    && if is_max {
                        facts.le(&rest[i], &rest[j])
                    } else {
                        facts.le(&rest[j], &rest[i])
                    }
            });
            if dominated {
                rest.remove(i);
            } else {
                i += 1;
            }
        }
    }
    if rest.len() < before && rest.len() > 1 {
        // Pruning may expose a new common part.
        return common.checked_add(&min_max_with(rest, is_max, facts)?);
    }
    rest.sort();
    let inner = match rest.len() {
        0 => DimExpr::zero(),
        1 => rest.pop().unwrap_or_default(),
        _ if is_max => DimExpr::from_atom(Atom::Max(rest.into())),
        _ => DimExpr::from_atom(Atom::Min(rest.into())),
    };
    common.checked_add(&inner)
}

impl DimExpr {
    /// `floordiv(self, k)`: the largest integer `q` with `q*k <= self` (rounds towards minus
    /// infinity, like Python's `//`). Simplified by the rules of this module, e.g.
    /// `floordiv(4*B + 2, 2) = 2*B + 1`.
    ///
    /// # Errors
    /// [`DimError::NonPositiveDivisor`] when `k <= 0`; [`DimError::Overflow`] when a
    /// coefficient leaves `i64`.
    pub fn floor_div(&self, k: i64) -> Result<DimExpr, DimError> {
        floor_div_with(self, k, &NoFacts)
    }

    /// `mod(self, k)`: the floor modulo `self - k*floordiv(self, k)`, always in `0..k`.
    ///
    /// # Errors
    /// [`DimError::NonPositiveDivisor`] when `k <= 0`; [`DimError::Overflow`].
    pub fn rem(&self, k: i64) -> Result<DimExpr, DimError> {
        rem_with(self, k, &NoFacts)
    }

    /// `min(self, o)`, e.g. `min(B, B + 1) = B`.
    ///
    /// Because `DimExpr` also implements [`Ord`] (a structural order, for maps and sorting),
    /// an *owned* receiver resolves `a.min(b)` to `Ord::min`; call this as
    /// `DimExpr::min(&a, &b)` or on a reference, `(&a).min(&b)`.
    ///
    /// # Panics
    /// When pulling out the common part overflows a coefficient (see [`DimExpr::checked_min`]).
    pub fn min(&self, o: &DimExpr) -> DimExpr {
        super::ops::or_panic(self.checked_min(o))
    }

    /// `max(self, o)`, e.g. `max(B, B + 1) = B + 1`. Call as `DimExpr::max(&a, &b)` (see
    /// [`DimExpr::min`] about `Ord::max`).
    ///
    /// # Panics
    /// When pulling out the common part overflows a coefficient (see [`DimExpr::checked_max`]).
    pub fn max(&self, o: &DimExpr) -> DimExpr {
        super::ops::or_panic(self.checked_max(o))
    }

    /// `min(self, o)`, or [`DimError::Overflow`].
    pub fn checked_min(&self, o: &DimExpr) -> Result<DimExpr, DimError> {
        min_max_with(vec![self.clone(), o.clone()], false, &NoFacts)
    }

    /// `max(self, o)`, or [`DimError::Overflow`].
    pub fn checked_max(&self, o: &DimExpr) -> Result<DimExpr, DimError> {
        min_max_with(vec![self.clone(), o.clone()], true, &NoFacts)
    }

    /// `min` of several expressions; `None` for an empty list.
    pub fn min_of(args: &[DimExpr]) -> Option<Result<DimExpr, DimError>> {
        (!args.is_empty()).then(|| min_max_with(args.to_vec(), false, &NoFacts))
    }

    /// `max` of several expressions; `None` for an empty list.
    pub fn max_of(args: &[DimExpr]) -> Option<Result<DimExpr, DimError>> {
        (!args.is_empty()).then(|| min_max_with(args.to_vec(), true, &NoFacts))
    }
}
