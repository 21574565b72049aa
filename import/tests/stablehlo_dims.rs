//! Tests of `stablehlo::dims` (`import/src/stablehlo/dims.rs`).

use ebb_import::stablehlo::internals::solve;
use ebb_ir::{DimExpr, Symbol};

fn u(n: &str) -> DimExpr {
    DimExpr::symbol(&Symbol::new(&format!("\0{n}")))
}

/// `x: (4*m, 8)` and `y: (4*m,)`: `m` is `divmod(x0, 4)`'s quotient, whose remainder is
/// asserted 0, and `y0` is asserted equal to `4*q`.
#[test]
fn quotient_remainder_and_assertion() {
    let (x0, y0, q, r) = (u("d1_0"), u("d2_0"), u("q0"), u("r0"));
    let m = DimExpr::sym("m");
    let eqs = vec![
        x0.checked_sub(&q.checked_scale(4).unwrap())
            .unwrap()
            .checked_sub(&r)
            .unwrap(),
        r.clone(),
        y0.checked_sub(&q.checked_scale(4).unwrap()).unwrap(),
        m.checked_sub(&q).unwrap(),
    ];
    let s = solve(&eqs);
    let four_m = m.checked_scale(4).unwrap();
    assert_eq!(s[&Symbol::new("\0d1_0")], four_m);
    assert_eq!(s[&Symbol::new("\0d2_0")], four_m);
    assert_eq!(s[&Symbol::new("\0r0")], DimExpr::zero());
}

/// `tokens: (B, S+1)`: `S = d1 - 1`, so `d1 = S + 1`; `labels: (B*S,)` from
/// `EQ(l0, d1' * d0)`. Two unknowns in one equation wait for one of them; a coefficient
/// other than ±1 is not solved.
#[test]
fn linear_and_product() {
    let (d0, d1, l0, z) = (u("d0_0"), u("d0_1"), u("d1_0"), u("d2_0"));
    let (b, s) = (DimExpr::sym("B"), DimExpr::sym("S"));
    let one = DimExpr::constant(1);
    let s_of = d1.checked_sub(&one).unwrap();
    let eqs = vec![
        l0.checked_sub(&s_of.checked_mul(&d0).unwrap()).unwrap(),
        b.checked_sub(&d0).unwrap(),
        s.checked_sub(&s_of).unwrap(),
        z.checked_scale(2).unwrap().checked_sub(&b).unwrap(),
    ];
    let sol = solve(&eqs);
    assert_eq!(sol[&Symbol::new("\0d0_0")], b);
    assert_eq!(sol[&Symbol::new("\0d0_1")], s.checked_add(&one).unwrap());
    assert_eq!(sol[&Symbol::new("\0d1_0")], s.checked_mul(&b).unwrap());
    assert!(!sol.contains_key(&Symbol::new("\0d2_0")));
}
