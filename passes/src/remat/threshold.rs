//! Symbolic peak terms and budget thresholds: decide "does the peak exceed the budget?" at run
//! time by comparing one symbol with precomputed bounds (`S >= 1537`) instead of evaluating the
//! peak (BladeDISC++, arXiv 2412.16985, §3.2 defers the final decision to run time; this turns
//! the common one-symbol case into a comparison).
//!
//! The peak without decisions is the maximum of symbolic *peak terms* (the resident bytes of
//! the points that can be the peak, `crate::memory::Liveness::symbolic_peak`). For terms that
//! are polynomials in one symbol `s` once the other symbols are fixed, [`threshold`] gives the
//! exact set of integer values of `s` in a range at which `max(terms) > budget`, as sorted
//! disjoint inclusive ranges; [`threshold_in_scope`] takes the range from the symbol scope.
//!
//! Method of [`threshold`]: for each term `f(s) - budget`, the integer line is cut into pieces
//! on which `f` is monotone by the sign of the forward difference `Δf(s) = f(s+1) - f(s)`,
//! itself found by the same method (recursion on the degree); on a monotone piece the sign
//! change of `f - budget` is found by binary search. The result is exact for integer
//! polynomials; evaluation uses saturating `i128` arithmetic, which only matters far outside
//! `i64` where the leading term decides the sign anyway.

use ebb_ir::dim::{DimError, SymbolScope};
use ebb_ir::{Bindings, DimExpr, Symbol};
use ebb_plan::format::Threshold;

/// Upper end of the search range for a symbol without an upper bound.
pub const THRESHOLD_CAP: i64 = 1 << 31;

/// Errors of threshold computation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ThresholdError {
    /// A term is not a polynomial in the symbol (it occurs inside `floordiv`, `mod`, `min`,
    /// `max`).
    #[error("peak term `{term}` is not a polynomial in `{symbol}`")]
    NotPolynomial {
        /// The term.
        term: String,
        /// The symbol.
        symbol: String,
    },
    /// A coefficient does not evaluate with the fixed bindings.
    #[error("peak term `{term}`: {source}")]
    Dim {
        /// The term.
        term: String,
        /// Why it does not evaluate.
        source: DimError,
    },
    /// The search range is empty.
    #[error("empty range [{lo}, {hi}] for `{symbol}`")]
    EmptyRange {
        /// The symbol.
        symbol: String,
        /// Lower end.
        lo: i64,
        /// Upper end.
        hi: i64,
    },
}

/// The ranges of `symbol` in `lo..=hi` at which `max(terms) > budget` with the other symbols
/// fixed by `fixed`: sorted, disjoint, non-adjacent inclusive ranges (empty when the peak never
/// exceeds the budget there). See the module docs for the method.
///
/// # Errors
/// [`ThresholdError::NotPolynomial`] when a term is not a polynomial in `symbol`;
/// [`ThresholdError::Dim`] when a coefficient mentions a symbol that `fixed` leaves unbound;
/// [`ThresholdError::EmptyRange`] when `lo > hi`.
pub fn threshold(
    terms: &[DimExpr],
    symbol: &Symbol,
    fixed: &Bindings,
    budget: i64,
    lo: i64,
    hi: i64,
) -> Result<Vec<(i64, i64)>, ThresholdError> {
    if lo > hi {
        return Err(ThresholdError::EmptyRange {
            symbol: symbol.name().into(),
            lo,
            hi,
        });
    }
    let mut over: Vec<(i64, i64)> = Vec::new();
    for t in terms {
        let coeffs = t
            .poly_coeffs_in(symbol)
            .ok_or_else(|| ThresholdError::NotPolynomial {
                term: t.to_string(),
                symbol: symbol.name().into(),
            })?;
        let mut c: Vec<i128> = Vec::with_capacity(coeffs.len());
        for k in &coeffs {
            let v = k.eval(fixed).map_err(|source| ThresholdError::Dim {
                term: t.to_string(),
                source,
            })?;
            c.push(i128::from(v));
        }
        c[0] -= i128::from(budget);
        over.extend(
            runs(&c, lo, hi)
                .into_iter()
                .filter(|r| r.2)
                .map(|r| (r.0, r.1)),
        );
    }
    over.sort_unstable();
    let mut merged: Vec<(i64, i64)> = Vec::with_capacity(over.len());
    for (a, b) in over {
        match merged.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    Ok(merged)
}

/// [`threshold`] over the symbol's declared range in `scope` (lower end 0 when unbounded,
/// upper end [`THRESHOLD_CAP`] when unbounded), packaged as a [`Threshold`].
///
/// # Errors
/// As [`threshold`].
pub fn threshold_in_scope(
    scope: &SymbolScope,
    terms: &[DimExpr],
    symbol: &Symbol,
    fixed: &Bindings,
    budget: i64,
) -> Result<Threshold, ThresholdError> {
    let (lo, hi) = scope.range(symbol);
    let over = threshold(
        terms,
        symbol,
        fixed,
        budget,
        lo.unwrap_or(0),
        hi.unwrap_or(THRESHOLD_CAP),
    )?;
    Ok(Threshold {
        symbol: symbol.clone(),
        fixed: fixed.clone(),
        budget,
        over,
    })
}

/// `c[0] + c[1]*x + ...` with saturating arithmetic.
fn eval(c: &[i128], x: i64) -> i128 {
    let x = i128::from(x);
    c.iter()
        .rev()
        .fold(0i128, |acc, &k| acc.saturating_mul(x).saturating_add(k))
}

/// Coefficients of `p(x+1) - p(x)`.
fn forward_difference(c: &[i128]) -> Vec<i128> {
    let d = c.len().saturating_sub(1);
    let mut out = vec![0i128; d.max(1)];
    for (i, &ci) in c.iter().enumerate().skip(1) {
        // (x+1)^i - x^i = sum_{k<i} C(i,k) x^k
        let mut binom: i128 = 1; // C(i, 0)
        for (k, slot) in out.iter_mut().enumerate().take(i) {
            *slot = slot.saturating_add(ci.saturating_mul(binom));
            binom = binom.saturating_mul((i - k) as i128) / (k as i128 + 1);
        }
    }
    out
}

/// Maximal runs `(a, b, positive)` partitioning `lo..=hi` on which `p(x) > 0` is constant.
fn runs(c: &[i128], lo: i64, hi: i64) -> Vec<(i64, i64, bool)> {
    let deg = c.iter().rposition(|&k| k != 0).unwrap_or(0);
    let c = &c[..=deg];
    if deg == 0 || lo == hi {
        return vec![(lo, hi, eval(c, lo) > 0)];
    }
    // Monotone pieces (a, b, nondecreasing); consecutive pieces share an end point.
    let pieces: Vec<(i64, i64, bool)> = if deg == 1 {
        vec![(lo, hi, c[1] > 0)]
    } else {
        let mut d = forward_difference(c);
        d[0] = d[0].saturating_add(1); // Δp(x) >= 0  <=>  Δp(x) + 1 > 0
        runs(&d, lo, hi - 1)
            .into_iter()
            .map(|(a, b, up)| (a, b + 1, up))
            .collect()
    };
    let mut out: Vec<(i64, i64, bool)> = Vec::new();
    let mut next = lo;
    for (a, b, up) in pieces {
        let a = a.max(next);
        if a > b {
            continue;
        }
        next = b + 1;
        // On [a, b] the predicate p > 0 switches at most once (false→true when up).
        let (first, second) = if up { (false, true) } else { (true, false) };
        let switch = first_where(a, b, |x| (eval(c, x) > 0) == second);
        let mut push = |a: i64, b: i64, v: bool| match out.last_mut() {
            Some(last) if last.2 == v && last.1 + 1 == a => last.1 = b,
            _ => out.push((a, b, v)),
        };
        match switch {
            Some(s) if s > a => {
                push(a, s - 1, first);
                push(s, b, second);
            }
            Some(_) => push(a, b, second),
            None => push(a, b, first),
        }
    }
    out
}

/// The first `x` in `a..=b` with `pred(x)`, for a predicate that is monotone (false then true).
fn first_where(a: i64, b: i64, pred: impl Fn(i64) -> bool) -> Option<i64> {
    if !pred(b) {
        return None;
    }
    let (mut lo, mut hi) = (a, b);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}
