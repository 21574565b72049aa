//! Tests of `dim::interval` (`ir/src/dim/interval.rs`).

use ebb_ir::dim::interval::{Ext, Interval};

fn iv(lo: i128, hi: i128) -> Interval {
    Interval {
        lo: Ext::Fin(lo),
        hi: Ext::Fin(hi),
    }
}

#[test]
fn products_and_powers() {
    assert_eq!(iv(-2, 3).mul(iv(4, 5)), iv(-10, 15));
    assert_eq!(iv(-3, 2).pow(2), iv(0, 9));
    assert_eq!(iv(-3, -2).pow(2), iv(4, 9));
    assert_eq!(iv(-3, 2).pow(3), iv(-27, 8));
    let pos = Interval {
        lo: Ext::Fin(1),
        hi: Ext::PosInf,
    };
    assert_eq!(pos.mul(iv(0, 0)), iv(0, 0));
    assert_eq!(
        pos.mul(iv(-1, 0)),
        Interval {
            lo: Ext::NegInf,
            hi: Ext::Fin(0)
        }
    );
}

#[test]
fn overflow_widens() {
    let big = iv(i128::MAX / 2 + 1, i128::MAX);
    let s = big.add(big);
    assert_eq!(s.lo, Ext::NegInf);
    assert_eq!(iv(i128::MIN, 0).pow(3).lo, Ext::NegInf);
    assert_eq!(s.hi, Ext::PosInf);
    assert_eq!(big.mul(big).hi, Ext::PosInf);
}

#[test]
fn div_and_mod() {
    assert_eq!(iv(-3, 7).floor_div(2), iv(-2, 3));
    assert_eq!(iv(9, 10).floor_mod(8), iv(1, 2));
    assert_eq!(iv(7, 9).floor_mod(8), iv(0, 7));
    assert_eq!(iv(1, 5).min(iv(3, 4)), iv(1, 4));
}
