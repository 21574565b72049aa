//! Operator impls for [`DimExpr`]: `+`, `-`, `*` (owned and borrowed, with `i64` on the
//! right), unary `-`, the `*Assign` forms, `From<i64>`, `From<Symbol>`, `Sum`, `Product`.
//!
//! The operators panic when a coefficient leaves `i64` (e.g. `i64::MAX * B * 2`), like `i64`
//! arithmetic does in debug builds; use the `checked_*` methods on untrusted input.

use std::iter::{Product, Sum};
use std::ops::{Add, AddAssign, Mul, MulAssign, Neg, Sub, SubAssign};

use super::{DimError, DimExpr, Symbol};

/// Unwraps an arithmetic result, panicking on coefficient overflow (documented on every
/// operator that uses it).
pub(crate) fn or_panic(r: Result<DimExpr, DimError>) -> DimExpr {
    match r {
        Ok(e) => e,
        Err(e) => panic!("DimExpr arithmetic: {e} (use the checked_* methods on untrusted input)"),
    }
}

macro_rules! binop {
    ($tr:ident, $method:ident, $checked:ident) => {
        impl $tr<&DimExpr> for &DimExpr {
            type Output = DimExpr;
            fn $method(self, o: &DimExpr) -> DimExpr {
                or_panic(self.$checked(o))
            }
        }
        impl $tr<DimExpr> for DimExpr {
            type Output = DimExpr;
            fn $method(self, o: DimExpr) -> DimExpr {
                or_panic(self.$checked(&o))
            }
        }
        impl $tr<&DimExpr> for DimExpr {
            type Output = DimExpr;
            fn $method(self, o: &DimExpr) -> DimExpr {
                or_panic(self.$checked(o))
            }
        }
        impl $tr<DimExpr> for &DimExpr {
            type Output = DimExpr;
            fn $method(self, o: DimExpr) -> DimExpr {
                or_panic(self.$checked(&o))
            }
        }
        impl $tr<i64> for DimExpr {
            type Output = DimExpr;
            fn $method(self, o: i64) -> DimExpr {
                or_panic(self.$checked(&DimExpr::constant(o)))
            }
        }
        impl $tr<i64> for &DimExpr {
            type Output = DimExpr;
            fn $method(self, o: i64) -> DimExpr {
                or_panic(self.$checked(&DimExpr::constant(o)))
            }
        }
    };
}

binop!(Add, add, checked_add);
binop!(Sub, sub, checked_sub);
binop!(Mul, mul, checked_mul);

macro_rules! assignop {
    ($tr:ident, $method:ident, $checked:ident) => {
        impl $tr<DimExpr> for DimExpr {
            fn $method(&mut self, o: DimExpr) {
                *self = or_panic(self.$checked(&o));
            }
        }
        impl $tr<&DimExpr> for DimExpr {
            fn $method(&mut self, o: &DimExpr) {
                *self = or_panic(self.$checked(o));
            }
        }
        impl $tr<i64> for DimExpr {
            fn $method(&mut self, o: i64) {
                *self = or_panic(self.$checked(&DimExpr::constant(o)));
            }
        }
    };
}

assignop!(AddAssign, add_assign, checked_add);
assignop!(SubAssign, sub_assign, checked_sub);
assignop!(MulAssign, mul_assign, checked_mul);

impl Neg for DimExpr {
    type Output = DimExpr;
    fn neg(self) -> DimExpr {
        or_panic(self.checked_neg())
    }
}

impl Neg for &DimExpr {
    type Output = DimExpr;
    fn neg(self) -> DimExpr {
        or_panic(self.checked_neg())
    }
}

impl From<i64> for DimExpr {
    fn from(v: i64) -> DimExpr {
        DimExpr::constant(v)
    }
}

impl From<Symbol> for DimExpr {
    fn from(s: Symbol) -> DimExpr {
        DimExpr::symbol(&s)
    }
}

impl From<&Symbol> for DimExpr {
    fn from(s: &Symbol) -> DimExpr {
        DimExpr::symbol(s)
    }
}

impl Sum for DimExpr {
    fn sum<I: Iterator<Item = DimExpr>>(it: I) -> DimExpr {
        it.fold(DimExpr::zero(), |a, b| a + b)
    }
}

impl<'a> Sum<&'a DimExpr> for DimExpr {
    fn sum<I: Iterator<Item = &'a DimExpr>>(it: I) -> DimExpr {
        it.fold(DimExpr::zero(), |a, b| a + b)
    }
}

impl Product for DimExpr {
    fn product<I: Iterator<Item = DimExpr>>(it: I) -> DimExpr {
        it.fold(DimExpr::constant(1), |a, b| a * b)
    }
}

impl<'a> Product<&'a DimExpr> for DimExpr {
    fn product<I: Iterator<Item = &'a DimExpr>>(it: I) -> DimExpr {
        it.fold(DimExpr::constant(1), |a, b| a * b)
    }
}
