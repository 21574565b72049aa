//! The shift certificate (method 2 of `prove.rs`): a lower bound of a polynomial in atoms
//! from a change of variables to non-negative ones.
//!
//! Every atom `a` with interval `[l, h]` is written `a = l + a'` (or `h - a'`), `a'` in
//! `[0, h - l]`; the expansion of the expression in the `a'` is bounded term by term, where a
//! monomial of non-negative variables is non-negative. Atoms with no finite end keep their own
//! interval. The expansion is capped at [`SHIFT_TERM_CAP`] terms and exponents at 16.

use std::collections::BTreeMap;

use super::expr::{Atom, DimExpr};
use super::interval::{atom_interval, Ext, Interval};
use super::SymbolScope;

/// Maximum number of terms in a shift-certificate expansion.
const SHIFT_TERM_CAP: usize = 512;

impl SymbolScope {
    /// Method 2 of `prove.rs`; `NegInf` when not applicable. Atoms bounded on both sides
    /// are shifted to their upper end when `upper` (else to their lower end); the flag
    /// returned says whether there was such an atom (so that the other choice differs).
    pub(crate) fn shifted_lower(&self, d: &DimExpr, upper: bool) -> (Ext, bool) {
        let mut two_sided = false;
        let lb = self.shifted_lower_inner(d, upper, &mut two_sided);
        (lb, two_sided)
    }

    fn shifted_lower_inner(&self, d: &DimExpr, upper: bool, two_sided: &mut bool) -> Ext {
        // Per atom: (base, sign, range of a') with atom = base + sign*a'.
        let mut shift: BTreeMap<&Atom, (i128, i128, Interval)> = BTreeMap::new();
        let mut trivial = true;
        for (m, _) in &d.terms {
            for (a, n) in &m.0 {
                if shift.contains_key(a) {
                    continue;
                }
                if *n > 16 {
                    return Ext::NegInf;
                }
                let iv = atom_interval(a, &|s| self.symbol_interval(s));
                let zero = Ext::Fin(0);
                let (base, sign, width) = match (iv.lo, iv.hi) {
                    (Ext::Fin(l), Ext::Fin(h)) => {
                        *two_sided = true;
                        let width = Interval {
                            lo: zero,
                            hi: h.checked_sub(l).map_or(Ext::PosInf, Ext::Fin),
                        };
                        if upper {
                            (h, -1, width)
                        } else {
                            (l, 1, width)
                        }
                    }
                    (Ext::Fin(l), _) => (
                        l,
                        1,
                        Interval {
                            lo: zero,
                            hi: Ext::PosInf,
                        },
                    ),
                    (_, Ext::Fin(h)) => (
                        h,
                        -1,
                        Interval {
                            lo: zero,
                            hi: Ext::PosInf,
                        },
                    ),
                    // Not shiftable: a' = a over its own interval.
                    _ => (0, 1, iv),
                };
                trivial &= base == 0 && sign == 1;
                shift.insert(a, (base, sign, width));
            }
        }
        if trivial {
            return Ext::NegInf; // same as the plain interval
        }
        let mut acc: BTreeMap<Vec<(&Atom, u32)>, i128> = BTreeMap::new();
        for (m, c) in &d.terms {
            let mut partial: Vec<(Vec<(&Atom, u32)>, i128)> = vec![(Vec::new(), i128::from(*c))];
            for (a, n) in &m.0 {
                let (base, sign, _) = shift[a];
                let mut next = Vec::with_capacity(partial.len() * (*n as usize + 1));
                for (mono, coef) in &partial {
                    let mut binom: i128 = 1;
                    for j in 0..=*n {
                        let k = base
                            .checked_pow(*n - j)
                            .and_then(|b| b.checked_mul(binom))
                            .and_then(|b| b.checked_mul(if j % 2 == 1 { sign } else { 1 }))
                            .and_then(|b| b.checked_mul(*coef));
                        let Some(k) = k else { return Ext::NegInf };
                        if k != 0 {
                            let mut mono = mono.clone();
                            if j > 0 {
                                mono.push((a, j));
                            }
                            next.push((mono, k));
                        }
                        binom = binom * i128::from(*n - j) / i128::from(j + 1);
                    }
                }
                if next.len() > SHIFT_TERM_CAP {
                    return Ext::NegInf;
                }
                partial = next;
            }
            for (mono, k) in partial {
                let slot = acc.entry(mono).or_insert(0);
                let Some(v) = slot.checked_add(k) else {
                    return Ext::NegInf;
                };
                *slot = v;
            }
            if acc.len() > SHIFT_TERM_CAP {
                return Ext::NegInf;
            }
        }
        let mut total = Interval::point(0);
        for (mono, k) in acc {
            let mut iv = Interval::point(k);
            for (a, j) in mono {
                iv = iv.mul(shift[a].2.pow(j));
            }
            total = total.add(iv);
        }
        total.lo
    }
}
