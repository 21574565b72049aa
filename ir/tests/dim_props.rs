//! Property tests of the symbolic-dimension algebra `ebb_ir::dim`.
//!
//! Random expression trees over the symbols `A`, `B`, `C`, `D` are built twice: as a raw tree
//! evaluated naively with checked `i64` arithmetic, and as a canonical [`DimExpr`] through the
//! operators. Properties: canonicalization keeps values; proven comparisons, bounds and
//! normalization hold at random bindings inside the scope; text and serde round-trip;
//! substitution commutes with evaluation; `poly_coeffs_in` reconstructs the expression.

use std::collections::BTreeMap;

use ebb_ir::dim::{Bindings, DimError, DimExpr, DimOrdering, Symbol, SymbolScope};
use proptest::prelude::*;

const NAMES: [&str; 4] = ["A", "B", "C", "D"];

#[derive(Clone, Debug)]
enum Raw {
    C(i64),
    S(usize),
    Add(Box<Raw>, Box<Raw>),
    Sub(Box<Raw>, Box<Raw>),
    Mul(Box<Raw>, Box<Raw>),
    Neg(Box<Raw>),
    Div(Box<Raw>, i64),
    Mod(Box<Raw>, i64),
    Min(Box<Raw>, Box<Raw>),
    Max(Box<Raw>, Box<Raw>),
}

/// Trees over the first `nsym` symbols.
fn raw(nsym: usize) -> impl Strategy<Value = Raw> {
    let leaf = prop_oneof![(-6i64..=6).prop_map(Raw::C), (0..nsym).prop_map(Raw::S)];
    leaf.prop_recursive(4, 24, 2, |t| {
        let b = |a: Raw| Box::new(a);
        prop_oneof![
            3 => (t.clone(), t.clone()).prop_map(move |(x, y)| Raw::Add(b(x), b(y))),
            2 => (t.clone(), t.clone()).prop_map(move |(x, y)| Raw::Sub(b(x), b(y))),
            3 => (t.clone(), t.clone()).prop_map(move |(x, y)| Raw::Mul(b(x), b(y))),
            1 => t.clone().prop_map(move |x| Raw::Neg(b(x))),
            2 => (t.clone(), 1i64..=6).prop_map(move |(x, k)| Raw::Div(b(x), k)),
            2 => (t.clone(), 1i64..=6).prop_map(move |(x, k)| Raw::Mod(b(x), k)),
            1 => (t.clone(), t.clone()).prop_map(move |(x, y)| Raw::Min(b(x), b(y))),
            1 => (t.clone(), t.clone()).prop_map(move |(x, y)| Raw::Max(b(x), b(y))),
        ]
    })
}

fn naive(r: &Raw, v: &[i64; 4]) -> Option<i64> {
    Some(match r {
        Raw::C(c) => *c,
        Raw::S(i) => v[*i],
        Raw::Add(a, b) => naive(a, v)?.checked_add(naive(b, v)?)?,
        Raw::Sub(a, b) => naive(a, v)?.checked_sub(naive(b, v)?)?,
        Raw::Mul(a, b) => naive(a, v)?.checked_mul(naive(b, v)?)?,
        Raw::Neg(a) => naive(a, v)?.checked_neg()?,
        Raw::Div(a, k) => naive(a, v)?.div_euclid(*k),
        Raw::Mod(a, k) => naive(a, v)?.rem_euclid(*k),
        Raw::Min(a, b) => naive(a, v)?.min(naive(b, v)?),
        Raw::Max(a, b) => naive(a, v)?.max(naive(b, v)?),
    })
}

fn build(r: &Raw) -> DimExpr {
    match r {
        Raw::C(c) => DimExpr::constant(*c),
        Raw::S(i) => DimExpr::sym(NAMES[*i]),
        Raw::Add(a, b) => build(a) + build(b),
        Raw::Sub(a, b) => build(a) - build(b),
        Raw::Mul(a, b) => build(a) * build(b),
        Raw::Neg(a) => -build(a),
        Raw::Div(a, k) => build(a).floor_div(*k).unwrap(),
        Raw::Mod(a, k) => build(a).rem(*k).unwrap(),
        Raw::Min(a, b) => DimExpr::min(&build(a), &build(b)),
        Raw::Max(a, b) => DimExpr::max(&build(a), &build(b)),
    }
}

/// The raw tree as infix text, using every syntax the parser accepts.
fn text(r: &Raw) -> String {
    match r {
        Raw::C(c) if *c < 0 => format!("({c})"),
        Raw::C(c) => c.to_string(),
        Raw::S(i) => NAMES[*i].to_string(),
        Raw::Add(a, b) => format!("({} + {})", text(a), text(b)),
        Raw::Sub(a, b) => format!("({} - {})", text(a), text(b)),
        Raw::Mul(a, b) => format!("{} * {}", text(a), text(b)),
        Raw::Neg(a) => format!("-{}", text(a)),
        Raw::Div(a, k) if k % 2 == 0 => format!("floordiv({}, {k})", text(a)),
        Raw::Div(a, k) => format!("({} // {k})", text(a)),
        Raw::Mod(a, k) if k % 2 == 0 => format!("mod({}, {k})", text(a)),
        Raw::Mod(a, k) => format!("({} % {k})", text(a)),
        Raw::Min(a, b) => format!("min({}, {})", text(a), text(b)),
        Raw::Max(a, b) => format!("max({},{})", text(a), text(b)),
    }
}

fn bindings(v: &[i64; 4]) -> Bindings {
    NAMES
        .iter()
        .zip(v)
        .map(|(n, x)| (Symbol::new(n), *x))
        .collect()
}

/// `A` in 1..=12, `B` in -5..=7, `C` in 4..=64 and divisible by 4, `D == 2*A + C`.
fn scope() -> SymbolScope {
    let mut sc = SymbolScope::new();
    let a = sc.declare("A");
    sc.set_range(&a, None, Some(12));
    sc.declare_range("B", Some(-5), Some(7));
    let c = sc.declare("C");
    sc.set_range(&c, None, Some(64));
    sc.add_divisible(&c, 4);
    let d = sc.declare("D");
    sc.add_equality(&d, "2*A + C".parse().unwrap());
    sc
}

/// Bindings that satisfy the facts of [`scope`].
fn valid_point() -> impl Strategy<Value = [i64; 4]> {
    (1i64..=12, -5i64..=7, 1i64..=16).prop_map(|(a, b, c)| [a, b, 4 * c, 2 * a + 4 * c])
}

fn holds(o: DimOrdering, x: i64, y: i64) -> bool {
    match o {
        DimOrdering::Less => x < y,
        DimOrdering::LessEq => x <= y,
        DimOrdering::Equal => x == y,
        DimOrdering::GreaterEq => x >= y,
        DimOrdering::Greater => x > y,
        DimOrdering::Unknown => true,
    }
}

/// 1000 cases per property (override with `PROPTEST_CASES`), no regression files.
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// (1) Canonicalization never changes the value.
    #[test]
    fn canonical_form_keeps_values(r in raw(4), v in prop::array::uniform4(-9i64..=9)) {
        let e = build(&r);
        if let Some(want) = naive(&r, &v) {
            prop_assert_eq!(e.eval(&bindings(&v)), Ok(want), "{} = {}", text(&r), e);
        }
    }

    /// (2) Proven comparisons, bounds and normalization hold inside the scope.
    #[test]
    fn proofs_are_sound(
        ra in raw(4),
        rb in raw(4),
        pts in prop::collection::vec(valid_point(), 8),
    ) {
        let sc = scope();
        let (a, b) = (build(&ra), build(&rb));
        let pairs = [
            (a.clone(), b.clone()),
            (a.clone(), DimExpr::min(&a, &b)),
            (DimExpr::max(&a, &b), b.clone()),
            (&a * &a, a.clone()),
            (a.clone(), &b + 1),
        ];
        let orders: Vec<DimOrdering> = pairs.iter().map(|(x, y)| sc.compare(x, y)).collect();
        let (na, (lo, hi)) = (sc.normalize(&a), sc.bounds(&a));
        let (le, lt) = (sc.prove_le(&a, &b), sc.prove_lt(&a, &b));
        for v in &pts {
            let bd = bindings(v);
            prop_assert_eq!(sc.check(&bd), Ok(()));
            for ((x, y), o) in pairs.iter().zip(&orders) {
                if let (Ok(xv), Ok(yv)) = (x.eval(&bd), y.eval(&bd)) {
                    prop_assert!(holds(*o, xv, yv), "{:?}: {} vs {} at {:?} = {} vs {}", o, x, y, v, xv, yv);
                }
            }
            if let Ok(av) = a.eval(&bd) {
                prop_assert_eq!(na.eval(&bd), Ok(av), "normalize({}) = {}", a, na);
                prop_assert!(lo.is_none_or(|lo| lo <= av) && hi.is_none_or(|hi| av <= hi),
                    "bounds({}) = {:?}..{:?} but {} at {:?}", a, lo, hi, av, v);
                if let Ok(bv) = b.eval(&bd) {
                    prop_assert!(!le || av <= bv, "prove_le({}, {})", a, b);
                    prop_assert!(!lt || av < bv, "prove_lt({}, {})", a, b);
                }
            }
        }
    }

    /// (3) Display/FromStr and serde round-trip; the parser agrees with the operators.
    #[test]
    fn text_round_trips(r in raw(4)) {
        let e = build(&r);
        let shown = e.to_string();
        prop_assert_eq!(shown.parse::<DimExpr>(), Ok(e.clone()), "{}", shown);
        prop_assert_eq!(text(&r).parse::<DimExpr>(), Ok(e.clone()), "{}", text(&r));
        let json = serde_json::to_string(&e).unwrap();
        prop_assert_eq!(serde_json::from_str::<DimExpr>(&json).unwrap(), e);
    }

    /// (4) Substituting then evaluating equals evaluating with the extended bindings.
    #[test]
    fn substitution_commutes_with_eval(
        r in raw(4),
        ra in raw(3),
        v in prop::array::uniform4(-6i64..=6),
    ) {
        let (e, sub) = (build(&r), build(&ra).substitute(&BTreeMap::from([(Symbol::new("A"), DimExpr::sym("D"))])));
        let map = BTreeMap::from([(Symbol::new("A"), sub.clone())]);
        let substituted = e.substitute(&map);
        prop_assert!(!substituted.mentions(&Symbol::new("A")));
        let bd = bindings(&v);
        if let Ok(av) = sub.eval(&bd) {
            let mut ext = bd.clone();
            ext.insert(Symbol::new("A"), av);
            match (substituted.eval(&bd), e.eval(&ext)) {
                (Ok(x), Ok(y)) => prop_assert_eq!(x, y),
                (Err(DimError::Overflow), _) | (_, Err(DimError::Overflow)) => {}
                (x, y) => prop_assert!(false, "{:?} vs {:?}", x, y),
            }
        }
    }

    /// (5) `poly_coeffs_in` reconstructs the expression with coefficients free of the symbol.
    #[test]
    fn poly_coeffs_reconstruct(r in raw(3)) {
        let e = build(&r);
        let a = Symbol::new("A");
        match e.poly_coeffs_in(&a) {
            Some(cs) => {
                prop_assert_eq!(cs.len() as u32, e.degree_in(&a).unwrap() + 1);
                let mut acc = DimExpr::zero();
                let mut pow = DimExpr::constant(1);
                for c in &cs {
                    prop_assert!(!c.mentions(&a));
                    acc += c * &pow;
                    pow *= DimExpr::symbol(&a);
                }
                prop_assert_eq!(acc, e);
            }
            None => {
                prop_assert!(e.degree_in(&a).is_none());
                prop_assert!(e.mentions(&a));
            }
        }
    }
}

#[test]
fn representative_bindings_satisfy_the_scope() {
    let sc = scope();
    let pts = sc.representative_bindings(16);
    assert!(pts.len() >= 8, "{pts:?}");
    for p in &pts {
        assert_eq!(sc.check(p), Ok(()));
        assert_eq!(p.len(), 4);
    }
}
