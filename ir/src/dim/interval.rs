//! Sound integer interval arithmetic over `i128` with infinities.
//!
//! An [`Interval`] `[lo, hi]` claims `lo <= v <= hi` for every value `v` an expression takes.
//! Every operation rounds outwards: when an endpoint leaves `i128` it becomes `-inf` (for a
//! lower end) or `+inf` (for an upper end), which only weakens the claim. Multiplication uses
//! the endpoint products with `0 * inf = 0`, which is exact for closed integer intervals.
//! Empty intervals (`lo > hi`, from contradictory facts) never panic; results on them are
//! meaningless but vacuously sound.

use super::expr::{Atom, DimExpr};
use super::Symbol;

/// An integer or an infinity. Ordered `NegInf < Fin(_) < PosInf`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Ext {
    NegInf,
    Fin(i128),
    PosInf,
}

/// Which way to round an endpoint that does not fit.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Down,
    Up,
}

impl Ext {
    fn overflow(dir: Dir) -> Ext {
        match dir {
            Dir::Down => Ext::NegInf,
            Dir::Up => Ext::PosInf,
        }
    }

    fn sign(self) -> i32 {
        match self {
            Ext::NegInf => -1,
            Ext::PosInf => 1,
            Ext::Fin(v) => v.signum() as i32,
        }
    }

    fn add(self, o: Ext, dir: Dir) -> Ext {
        let (first, second) = match dir {
            Dir::Down => (Ext::NegInf, Ext::PosInf),
            Dir::Up => (Ext::PosInf, Ext::NegInf),
        };
        if self == first || o == first {
            return first;
        }
        if self == second || o == second {
            return second;
        }
        match (self, o) {
            (Ext::Fin(a), Ext::Fin(b)) => a.checked_add(b).map_or(Ext::overflow(dir), Ext::Fin),
            _ => Ext::overflow(dir),
        }
    }

    fn mul(self, o: Ext, dir: Dir) -> Ext {
        if self == Ext::Fin(0) || o == Ext::Fin(0) {
            return Ext::Fin(0);
        }
        if let (Ext::Fin(a), Ext::Fin(b)) = (self, o) {
            return a.checked_mul(b).map_or(Ext::overflow(dir), Ext::Fin);
        }
        if self.sign() * o.sign() > 0 {
            Ext::PosInf
        } else {
            Ext::NegInf
        }
    }

    pub(crate) fn neg(self) -> Ext {
        match self {
            Ext::NegInf => Ext::PosInf,
            Ext::PosInf => Ext::NegInf,
            // -i128::MIN does not fit; it only arises from overflowed bounds, widen it.
            Ext::Fin(v) => v.checked_neg().map_or(Ext::PosInf, Ext::Fin),
        }
    }

    fn pow(self, n: u32, dir: Dir) -> Ext {
        match self {
            Ext::Fin(v) => v.checked_pow(n).map_or(Ext::overflow(dir), Ext::Fin),
            Ext::PosInf => Ext::PosInf,
            Ext::NegInf if n.is_multiple_of(2) => Ext::PosInf,
            Ext::NegInf => Ext::NegInf,
        }
    }

    fn floor_div(self, k: i128) -> Ext {
        match self {
            Ext::Fin(v) => Ext::Fin(v.div_euclid(k)),
            e => e,
        }
    }

    /// The value when finite and within `i64`.
    pub(crate) fn to_i64(self) -> Option<i64> {
        match self {
            Ext::Fin(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }
}

/// A closed interval `[lo, hi]` of integers, possibly unbounded.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Interval {
    pub lo: Ext,
    pub hi: Ext,
}

impl Interval {
    /// All integers.
    pub(crate) const FULL: Interval = Interval {
        lo: Ext::NegInf,
        hi: Ext::PosInf,
    };

    pub(crate) fn point(v: i128) -> Interval {
        Interval {
            lo: Ext::Fin(v),
            hi: Ext::Fin(v),
        }
    }

    /// From optional `i64` bounds (`None` = unbounded on that side).
    pub(crate) fn from_opts(lo: Option<i64>, hi: Option<i64>) -> Interval {
        Interval {
            lo: lo.map_or(Ext::NegInf, |v| Ext::Fin(i128::from(v))),
            hi: hi.map_or(Ext::PosInf, |v| Ext::Fin(i128::from(v))),
        }
    }

    /// Both endpoints when finite.
    pub(crate) fn finite(self) -> Option<(i128, i128)> {
        match (self.lo, self.hi) {
            (Ext::Fin(a), Ext::Fin(b)) => Some((a, b)),
            _ => None,
        }
    }

    pub fn add(self, o: Interval) -> Interval {
        Interval {
            lo: self.lo.add(o.lo, Dir::Down),
            hi: self.hi.add(o.hi, Dir::Up),
        }
    }

    pub fn mul(self, o: Interval) -> Interval {
        let pairs = [
            (self.lo, o.lo),
            (self.lo, o.hi),
            (self.hi, o.lo),
            (self.hi, o.hi),
        ];
        let lo = pairs
            .iter()
            .map(|&(a, b)| a.mul(b, Dir::Down))
            .min()
            .unwrap_or(Ext::NegInf);
        let hi = pairs
            .iter()
            .map(|&(a, b)| a.mul(b, Dir::Up))
            .max()
            .unwrap_or(Ext::PosInf);
        Interval { lo, hi }
    }

    /// `self^n`, exact on the sign structure (even powers are non-negative).
    pub fn pow(self, n: u32) -> Interval {
        if n == 0 {
            return Interval::point(1);
        }
        if n == 1 {
            return self;
        }
        let even = n.is_multiple_of(2);
        let zero = Ext::Fin(0);
        if self.lo >= zero || !even {
            // Monotone non-decreasing on this interval.
            Interval {
                lo: self.lo.pow(n, Dir::Down),
                hi: self.hi.pow(n, Dir::Up),
            }
        } else if self.hi <= zero {
            Interval {
                lo: self.hi.pow(n, Dir::Down),
                hi: self.lo.pow(n, Dir::Up),
            }
        } else {
            Interval {
                lo: zero,
                hi: self.lo.pow(n, Dir::Up).max(self.hi.pow(n, Dir::Up)),
            }
        }
    }

    /// `floordiv(x, k)` for `k > 0` (monotone).
    pub fn floor_div(self, k: i128) -> Interval {
        Interval {
            lo: self.lo.floor_div(k),
            hi: self.hi.floor_div(k),
        }
    }

    /// `mod(x, k)` for `k > 0`: exact shift when `x` stays within one period, else `[0, k-1]`.
    pub fn floor_mod(self, k: i128) -> Interval {
        if let Some((a, b)) = self.finite() {
            let j = a.div_euclid(k);
            if j == b.div_euclid(k) {
                return Interval::point(a - j * k).add(Interval {
                    lo: Ext::Fin(0),
                    hi: Ext::Fin(b - a),
                });
            }
        }
        Interval {
            lo: Ext::Fin(0),
            hi: Ext::Fin(k - 1),
        }
    }

    /// Interval of `min(x, y)`.
    pub fn min(self, o: Interval) -> Interval {
        Interval {
            lo: self.lo.min(o.lo),
            hi: self.hi.min(o.hi),
        }
    }

    /// Interval of `max(x, y)`.
    pub(crate) fn max(self, o: Interval) -> Interval {
        Interval {
            lo: self.lo.max(o.lo),
            hi: self.hi.max(o.hi),
        }
    }
}

/// Interval of an atom, given intervals for symbols.
pub(crate) fn atom_interval(a: &Atom, sym: &dyn Fn(&Symbol) -> Interval) -> Interval {
    match a {
        Atom::Sym(s) => sym(s),
        Atom::FloorDiv(x, k) => expr_interval(x, sym).floor_div(i128::from(*k)),
        Atom::Mod(x, k) => expr_interval(x, sym).floor_mod(i128::from(*k)),
        Atom::Min(args) => fold(args, sym, Interval::min),
        Atom::Max(args) => fold(args, sym, Interval::max),
    }
}

fn fold(
    args: &[DimExpr],
    sym: &dyn Fn(&Symbol) -> Interval,
    f: fn(Interval, Interval) -> Interval,
) -> Interval {
    let mut it = args.iter().map(|x| expr_interval(x, sym));
    match it.next() {
        Some(first) => it.fold(first, f),
        None => Interval::FULL,
    }
}

/// Sound interval of `e` by term-wise interval arithmetic, given intervals for symbols.
pub(crate) fn expr_interval(e: &DimExpr, sym: &dyn Fn(&Symbol) -> Interval) -> Interval {
    let mut acc = Interval::point(0);
    for (m, c) in &e.terms {
        let mut iv = Interval::point(i128::from(*c));
        for (a, n) in &m.0 {
            iv = iv.mul(atom_interval(a, sym).pow(*n));
        }
        acc = acc.add(iv);
    }
    acc
}
