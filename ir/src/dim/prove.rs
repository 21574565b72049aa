//! The prover of [`SymbolScope`]: normalization under facts, sound bounds, comparisons.
//!
//! Every comparison reduces to a *lower bound* of a difference `d = a - b` (after
//! [`SymbolScope::normalize`]): `a > b` iff `lb(d) >= 1` (integers), `a < b` iff
//! `lb(-d) >= 1`. A lower bound is the best of three sound methods:
//! 1. term-wise interval arithmetic over the symbols' ranges (tightened to multiples of their
//!    divisors) and the atoms' intrinsic ranges (`mod(x, k)` in `0..k`, ...);
//! 2. a *shift certificate* (`certificate.rs`): every atom `a` with interval `[l, h]` is
//!    rewritten `a = l + a'` (or `h - a'`; both are tried when both ends are finite) with
//!    `a'` in `[0, h - l]`; after expansion, terms with positive coefficients are `>= 0`, so
//!    the constant plus the negative terms at their extremes is a lower bound. This proves
//!    `B*S >= S` from `B, S >= 1` (it becomes `B'*S' + B' >= 0`) and `4096*B >= B*S` from
//!    `S <= 4096` (it becomes `B*S'' >= 0`);
//! 3. case splits on an atom `A` occurring linearly, `d = r + p*A`: `min`/`max` split into
//!    one case per argument (exact when the sign of `p` is proven); `floordiv(x, k)` uses
//!    `x - k + 1 <= k*A <= x`; `mod(x, k)` is rewritten `x - k*floordiv(x, k)` (exact).
//!
//! Recursion is bounded by a fuel budget per query ([`FUEL`]) and the shift expansion by a
//! term cap, so a query costs at most a few dozen passes over the expression.

use std::collections::BTreeSet;

use super::atoms::{floor_div_with, gcd, min_max_with, rem_with, Facts};
use super::expr::{Atom, DimExpr};
use super::interval::{expr_interval, Ext, Interval};
use super::{DimError, DimOrdering, SymbolScope};

/// Maximum number of recursive lower-bound evaluations per query.
pub(crate) const FUEL: u32 = 48;
/// Fuel for the `min`/`max` pruning done by `normalize`.
const PRUNE_FUEL: u32 = 8;

impl Facts for SymbolScope {
    fn divisor(&self, e: &DimExpr) -> i128 {
        e.terms.iter().fold(0, |g, (m, c)| {
            let mut t = i128::from(*c).abs();
            for (a, n) in &m.0 {
                let d = match a {
                    Atom::Sym(s) => i128::from(self.divisor_of(s)),
                    Atom::Mod(x, k) => gcd(self.divisor(x), i128::from(*k)),
                    Atom::Min(args) | Atom::Max(args) => {
                        args.iter().fold(0, |g, x| gcd(g, self.divisor(x)))
                    }
                    Atom::FloorDiv(..) => 1,
                };
                // Dropping a factor that overflows leaves a (weaker) divisor of the term.
                t = d
                    .checked_pow(*n)
                    .and_then(|p| t.checked_mul(p))
                    .unwrap_or(t);
            }
            gcd(g, t)
        })
    }

    fn interval(&self, e: &DimExpr) -> Interval {
        expr_interval(e, &|s| self.symbol_interval(s))
    }

    fn le(&self, a: &DimExpr, b: &DimExpr) -> bool {
        let Ok(d) = b.checked_sub(a) else {
            return false;
        };
        let mut fuel = PRUNE_FUEL;
        self.lower_bound(&d, &mut fuel, Ext::Fin(0)) >= Ext::Fin(0)
    }

    fn prunes(&self) -> bool {
        true
    }
}

impl SymbolScope {
    /// Interval of a symbol: its range with both ends rounded inwards to multiples of its
    /// divisor; unbounded when undeclared.
    pub(crate) fn symbol_interval(&self, s: &super::Symbol) -> Interval {
        let (lo, hi) = self.range(s);
        let mut iv = Interval::from_opts(lo, hi);
        let m = i128::from(self.divisor_of(s));
        if m > 1 {
            if let Ext::Fin(l) = iv.lo {
                iv.lo = Ext::Fin(l + (m - l.rem_euclid(m)) % m);
            }
            if let Ext::Fin(h) = iv.hi {
                iv.hi = Ext::Fin(h - h.rem_euclid(m));
            }
        }
        iv
    }

    /// `e` rewritten with the facts: solved equalities substituted, then atoms simplified
    /// bottom-up by the rules of `atoms.rs` with ranges and divisibility (`floordiv(2*S, 2)`
    /// is `S` anyway; with `S % 8 == 0`, `mod(S, 4)` is `0` and `2*floordiv(S, 2)` is `S`;
    /// `min(B, B + 1)` is `B`; with `B <= 4`, `min(B, 4)` is `B`). The result equals `e` at
    /// every binding that satisfies the facts. Returns `e` unchanged if a rewrite overflows.
    pub fn normalize(&self, e: &DimExpr) -> DimExpr {
        self.normalize_owned(e.clone())
    }

    fn normalize_owned(&self, e: DimExpr) -> DimExpr {
        let needs_subst =
            !self.solved.is_empty() && e.symbols().iter().any(|s| self.solved.contains_key(s));
        if !needs_subst && e.is_polynomial() {
            return e;
        }
        let r = if needs_subst {
            e.try_substitute(&self.solved)
        } else {
            Ok(e.clone())
        };
        r.and_then(|x| self.simplify(&x)).unwrap_or(e)
    }

    fn simplify(&self, e: &DimExpr) -> Result<DimExpr, DimError> {
        if e.is_polynomial() {
            return Ok(e.clone());
        }
        let mut acc = DimExpr::zero();
        for (m, c) in &e.terms {
            let mut t = DimExpr::constant(*c);
            for (a, n) in &m.0 {
                t = t.checked_mul(&self.simplify_atom(a)?.checked_pow(*n)?)?;
            }
            acc = acc.checked_add(&t)?;
        }
        self.absorb(acc)
    }

    fn simplify_atom(&self, a: &Atom) -> Result<DimExpr, DimError> {
        match a {
            Atom::Sym(_) => Ok(DimExpr::from_atom(a.clone())),
            Atom::FloorDiv(x, k) => floor_div_with(&self.simplify(x)?, *k, self),
            Atom::Mod(x, k) => rem_with(&self.simplify(x)?, *k, self),
            Atom::Min(args) | Atom::Max(args) => {
                let args = args
                    .iter()
                    .map(|x| self.simplify(x))
                    .collect::<Result<Vec<_>, _>>()?;
                min_max_with(args, matches!(a, Atom::Max(_)), self)
            }
        }
    }

    /// Rewrites `c*floordiv(x, k)*rest` to `(c/k)*x*rest` when `k | c` and `k | x`.
    fn absorb(&self, mut e: DimExpr) -> Result<DimExpr, DimError> {
        for _ in 0..8 {
            let found = e.terms.iter().find_map(|(m, c)| {
                m.0.iter().find_map(|(a, n)| match a {
                    Atom::FloorDiv(x, k)
                        if *n == 1 && c % k == 0 && self.divisor(x) % i128::from(*k) == 0 =>
                    {
                        Some((m.clone(), *c, a.clone(), x.clone(), c / k))
                    }
                    _ => None,
                })
            });
            let Some((m, c, a, x, ck)) = found else {
                return Ok(e);
            };
            let rest = DimExpr {
                terms: vec![(m.without(&a), 1)].into(),
            };
            let old = DimExpr {
                terms: vec![(m, c)].into(),
            };
            e = e
                .checked_sub(&old)?
                .checked_add(&x.checked_mul(&rest)?.checked_scale(ck)?)?;
        }
        Ok(e)
    }

    /// Sound bounds `(lo, hi)` of `e` under the facts (`None` = not bounded, or not within
    /// `i64`): every valid binding gives `lo <= e <= hi`. See the module docs for the method.
    pub fn bounds(&self, e: &DimExpr) -> (Option<i64>, Option<i64>) {
        let e = self.normalize(e);
        let mut fuel = FUEL;
        let lo = self.lower_bound(&e, &mut fuel, Ext::PosInf).to_i64();
        let mut fuel = FUEL;
        let hi = self.upper_bound(&e, &mut fuel, Ext::NegInf).to_i64();
        (lo, hi)
    }

    /// What is proven about `a` versus `b` under the facts; [`DimOrdering::Unknown`] when
    /// nothing is. Sound: a proven ordering holds at every binding that satisfies the facts.
    pub fn compare(&self, a: &DimExpr, b: &DimExpr) -> DimOrdering {
        let Ok(d) = a.checked_sub(b) else {
            return DimOrdering::Unknown;
        };
        let d = self.normalize_owned(d);
        if let Some(c) = d.as_const() {
            return match c.cmp(&0) {
                std::cmp::Ordering::Less => DimOrdering::Less,
                std::cmp::Ordering::Equal => DimOrdering::Equal,
                std::cmp::Ordering::Greater => DimOrdering::Greater,
            };
        }
        // One interval evaluation decides most queries of a scheduler.
        let iv = self.interval(&d);
        if iv.lo >= Ext::Fin(1) {
            return DimOrdering::Greater;
        }
        if iv.hi <= Ext::Fin(-1) {
            return DimOrdering::Less;
        }
        let mut fuel = FUEL;
        let lo = self.lower_bound(&d, &mut fuel, Ext::Fin(1));
        if lo >= Ext::Fin(1) {
            return DimOrdering::Greater;
        }
        let mut fuel = FUEL;
        let hi = self.upper_bound(&d, &mut fuel, Ext::Fin(-1));
        match (lo >= Ext::Fin(0), hi <= Ext::Fin(0)) {
            _ if hi <= Ext::Fin(-1) => DimOrdering::Less,
            (true, true) => DimOrdering::Equal,
            (true, false) => DimOrdering::GreaterEq,
            (false, true) => DimOrdering::LessEq,
            (false, false) => DimOrdering::Unknown,
        }
    }

    /// Proven `a == b`.
    pub fn prove_eq(&self, a: &DimExpr, b: &DimExpr) -> bool {
        self.compare(a, b) == DimOrdering::Equal
    }

    /// Proven `a <= b`.
    pub fn prove_le(&self, a: &DimExpr, b: &DimExpr) -> bool {
        self.proven_lower(b, a, Ext::Fin(0)) >= Ext::Fin(0)
    }

    /// Proven `a < b`.
    pub fn prove_lt(&self, a: &DimExpr, b: &DimExpr) -> bool {
        self.proven_lower(b, a, Ext::Fin(1)) >= Ext::Fin(1)
    }

    /// A proven lower bound of `x - y` (aiming for `enough`, see `lower_bound`).
    fn proven_lower(&self, x: &DimExpr, y: &DimExpr, enough: Ext) -> Ext {
        let Ok(d) = x.checked_sub(y) else {
            return Ext::NegInf;
        };
        let d = self.normalize_owned(d);
        let mut fuel = FUEL;
        self.lower_bound(&d, &mut fuel, enough)
    }

    /// A proven upper bound of `d`; stops early once it is `<= enough`.
    fn upper_bound(&self, d: &DimExpr, fuel: &mut u32, enough: Ext) -> Ext {
        match d.checked_neg() {
            Ok(n) => self.lower_bound(&n, fuel, enough.neg()).neg(),
            Err(_) => Ext::PosInf,
        }
    }

    /// A proven lower bound of `d`: the best of the three methods of the module docs, except
    /// that it stops as soon as a bound `>= enough` is found (pass `Ext::PosInf` for the best
    /// bound within the fuel).
    pub(crate) fn lower_bound(&self, d: &DimExpr, fuel: &mut u32, enough: Ext) -> Ext {
        if let Some(c) = d.as_const() {
            return Ext::Fin(i128::from(c));
        }
        let mut best = self.interval(d).lo;
        if best >= enough {
            return best;
        }
        let (lower_shift, two_sided) = self.shifted_lower(d, false);
        best = best.max(lower_shift);
        if two_sided && best < enough {
            best = best.max(self.shifted_lower(d, true).0);
        }
        if *fuel == 0 || best >= enough {
            return best;
        }
        *fuel -= 1;
        best.max(self.split_lower(d, fuel, enough))
    }

    /// Sign of `p` when proven: `Some(1)` for `p >= 0`, `Some(-1)` for `p <= 0`.
    fn sign_of(&self, p: &DimExpr, fuel: &mut u32) -> Option<i128> {
        if let Some(c) = p.as_const() {
            return Some(i128::from(c.signum()));
        }
        if self.lower_bound(p, fuel, Ext::Fin(0)) >= Ext::Fin(0) {
            return Some(1);
        }
        (self.upper_bound(p, fuel, Ext::Fin(0)) <= Ext::Fin(0)).then_some(-1)
    }

    /// Method 3 of the module docs; `NegInf` when no atom qualifies or a step overflows.
    fn split_lower(&self, d: &DimExpr, fuel: &mut u32, enough: Ext) -> Ext {
        let Some(atom) = pick_split_atom(d) else {
            return Ext::NegInf;
        };
        let (mut p, mut r) = (Vec::new(), Vec::new());
        for (m, c) in &d.terms {
            if m.exponent_of(atom) == 1 {
                p.push((m.without(atom), *c));
            } else {
                r.push((m.clone(), *c));
            }
        }
        p.sort();
        let (p, r) = (DimExpr { terms: p.into() }, DimExpr { terms: r.into() });
        let lb = |e: Result<DimExpr, DimError>, fuel: &mut u32, enough: Ext| match e {
            Ok(e) => self.lower_bound(&e, fuel, enough),
            Err(_) => Ext::NegInf,
        };
        match atom {
            Atom::Mod(x, k) => {
                let e = floor_div_with(x, *k, self).and_then(|fd| {
                    r.checked_add(&p.checked_mul(x)?)?
                        .checked_sub(&p.checked_mul(&fd)?.checked_scale(*k)?)
                });
                lb(e, fuel, enough)
            }
            Atom::Min(args) | Atom::Max(args) => {
                let Some(sign) = self.sign_of(&p, fuel) else {
                    return Ext::NegInf;
                };
                // d is the min (or max) over the arguments x of r + p*x.
                let take_min = matches!(atom, Atom::Min(_)) == (sign > 0);
                let mut acc = if take_min { Ext::PosInf } else { Ext::NegInf };
                for x in args.iter() {
                    let v = lb(
                        p.checked_mul(x).and_then(|px| r.checked_add(&px)),
                        fuel,
                        enough,
                    );
                    acc = if take_min { acc.min(v) } else { acc.max(v) };
                    // Any one case bounds a max, so a max at `enough` is done; a min needs
                    // every case to be sound.
                    if !take_min && acc >= enough {
                        break;
                    }
                }
                acc
            }
            Atom::FloorDiv(x, k) => {
                let Some(sign) = self.sign_of(&p, fuel) else {
                    return Ext::NegInf;
                };
                let x = if sign > 0 {
                    x.checked_sub(&DimExpr::constant(k - 1))
                } else {
                    Ok((**x).clone())
                };
                let e = x.and_then(|x| r.checked_scale(*k)?.checked_add(&p.checked_mul(&x)?));
                // lb(d) >= ceil(lb(e) / k): e must reach k*enough - (k - 1).
                let k = i128::from(*k);
                let need = match enough {
                    Ext::Fin(t) => t
                        .checked_mul(k)
                        .and_then(|t| t.checked_sub(k - 1))
                        .map_or(Ext::PosInf, Ext::Fin),
                    other => other,
                };
                match lb(e, fuel, need) {
                    Ext::Fin(v) => Ext::Fin(-((-v).div_euclid(k))),
                    other => other,
                }
            }
            Atom::Sym(_) => Ext::NegInf,
        }
    }
}

/// The atom to split on: a non-symbol atom that occurs only with exponent 1; `mod` atoms
/// first (their rewrite is exact), then `min`/`max` (exact case splits), then `floordiv`.
fn pick_split_atom(d: &DimExpr) -> Option<&Atom> {
    let mut bad = BTreeSet::new();
    let mut ok = BTreeSet::new();
    for (m, _) in &d.terms {
        for (a, n) in &m.0 {
            if matches!(a, Atom::Sym(_)) {
                continue;
            }
            if *n == 1 {
                ok.insert(a);
            } else {
                bad.insert(a);
            }
        }
    }
    let rank = |a: &Atom| match a {
        Atom::Mod(..) => 0,
        Atom::Min(_) | Atom::Max(_) => 1,
        _ => 2,
    };
    ok.into_iter()
        .filter(|a| !bad.contains(a))
        .min_by_key(|a| rank(a))
}
