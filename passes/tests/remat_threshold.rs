//! Budget thresholds over one symbol (`ebb_passes::remat::threshold`) against brute force.

use ebb_ir::dim::{Bindings, DimExpr, Symbol};
use ebb_passes::remat::threshold::{threshold, ThresholdError};

fn p(s: &str) -> DimExpr {
    s.parse().unwrap()
}

fn brute(
    terms: &[DimExpr],
    s: &Symbol,
    fixed: &Bindings,
    budget: i64,
    lo: i64,
    hi: i64,
) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for x in lo..=hi {
        let mut b = fixed.clone();
        b.insert(s.clone(), x);
        let over = terms.iter().any(|t| t.eval(&b).unwrap() > budget);
        if over {
            match out.last_mut() {
                Some(last) if last.1 + 1 == x => last.1 = x,
                _ => out.push((x, x)),
            }
        }
    }
    out
}

#[test]
fn linear_threshold_is_a_comparison() {
    let s = Symbol::new("S");
    let fixed = Bindings::from([(Symbol::new("B"), 4)]);
    // 1 KiB per token per batch row plus 1 MiB of weights; budget 7 MiB.
    let t = [p("1024*B*S + 1048576")];
    let r = threshold(&t, &s, &fixed, 7 << 20, 1, 4096).unwrap();
    assert_eq!(r, vec![(1537, 4096)]);
}

#[test]
fn non_monotone_terms_match_brute_force() {
    let s = Symbol::new("S");
    let fixed = Bindings::from([(Symbol::new("B"), 3)]);
    let cases = [
        vec![p("S*S*S - 60*S*S + 900*S")],
        vec![p("-S*S + 40*S"), p("B*S - 100")],
        vec![p("2*S*S*S*S - 90*S*S*S + 1000*S*S"), p("7")],
        vec![p("B*S*S - 7*B*S + 11")],
    ];
    for terms in &cases {
        for budget in [-5, 0, 50, 300, 4000, 100_000] {
            let got = threshold(terms, &s, &fixed, budget, -10, 80).unwrap();
            assert_eq!(
                got,
                brute(terms, &s, &fixed, budget, -10, 80),
                "{terms:?} budget {budget}"
            );
        }
    }
}

#[test]
fn errors_name_the_term() {
    let s = Symbol::new("S");
    let e = threshold(&[p("floordiv(S, 2)")], &s, &Bindings::new(), 0, 1, 8).unwrap_err();
    assert_eq!(
        e.to_string(),
        "peak term `floordiv(S, 2)` is not a polynomial in `S`"
    );
    let e = threshold(&[p("B*S")], &s, &Bindings::new(), 0, 1, 8).unwrap_err();
    assert!(matches!(e, ThresholdError::Dim { .. }), "{e}");
    assert!(matches!(
        threshold(&[], &s, &Bindings::new(), 0, 9, 8),
        Err(ThresholdError::EmptyRange { .. })
    ));
}
