//! The values a symbol may take by its range and divisibility facts, as a grid: the multiples
//! of its proven divisor in its range (a dimension is at least 1). Used to round concrete
//! shapes onto valid bindings (`ebb bench`'s sampled shapes, `ebb pack`'s padded batches).

use super::{Symbol, SymbolScope};

/// Multiples of `div` in `[lo, hi]` (`lo`, `hi` themselves multiples of `div`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueGrid {
    /// Smallest valid value.
    pub lo: i64,
    /// Largest valid value.
    pub hi: i64,
    /// Step (the symbol's proven divisor, at least 1).
    pub div: i64,
}

impl ValueGrid {
    /// The grid of multiples of `div` (at least 1) in `[lo, hi]`; `None` when it is empty.
    pub fn new(lo: i64, hi: i64, div: i64) -> Option<ValueGrid> {
        let div = div.max(1);
        let lo = ceil_to(lo, div)?;
        let hi = hi.div_euclid(div) * div;
        (lo <= hi).then_some(ValueGrid { lo, hi, div })
    }

    /// The smallest valid value `>= x`, if any.
    pub fn up(&self, x: i64) -> Option<i64> {
        ceil_to(x.max(self.lo), self.div).filter(|&v| v <= self.hi)
    }

    /// The largest valid value `<= x`, if any.
    pub fn down(&self, x: i64) -> Option<i64> {
        Some(x.min(self.hi).div_euclid(self.div) * self.div).filter(|&v| v >= self.lo)
    }

    /// The grid's values in `[want_lo, want_hi]`; `None` when there are none.
    pub fn clip(&self, want_lo: i64, want_hi: i64) -> Option<ValueGrid> {
        ValueGrid::new(self.lo.max(want_lo), self.hi.min(want_hi), self.div)
    }
}

/// `x` rounded up to a multiple of `d` (`d >= 1`); `None` on overflow.
fn ceil_to(x: i64, d: i64) -> Option<i64> {
    let r = x.rem_euclid(d);
    if r == 0 {
        Some(x)
    } else {
        x.checked_add(d - r)
    }
}

impl SymbolScope {
    /// The values `s` may take by its range (at least 1) and divisibility facts; `None` when
    /// none does.
    pub fn grid(&self, s: &Symbol) -> Option<ValueGrid> {
        let (lo, hi) = self.range(s);
        ValueGrid::new(
            lo.unwrap_or(1).max(1),
            hi.unwrap_or(i64::MAX),
            self.divisor_of(s),
        )
    }
}
