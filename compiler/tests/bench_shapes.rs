//! Tests of `bench::shapes` (`compiler/src/bench/shapes.rs`).

use ebb_compiler::bench::shapes::*;
use ebb_ir::dim::SymbolScope;
use ebb_ir::{Bindings, Symbol};

fn scope(s_hi: Option<i64>, s_div: i64) -> SymbolScope {
    let mut sc = SymbolScope::new();
    sc.declare("B");
    let s = sc.declare_range("S", Some(1), s_hi);
    sc.add_divisible(&s, s_div);
    sc
}

fn lt(seed: u64, samples: usize) -> LongTail {
    LongTail {
        samples,
        seed,
        batch: BatchRule::Fixed(8),
        s_min: 32,
        s_max: 1024,
        seq_symbol: "S".into(),
        batch_symbol: "B".into(),
    }
}

fn seqs(v: &[Bindings]) -> Vec<i64> {
    v.iter().map(|b| b[&Symbol::new("S")]).collect()
}

/// `--shapes ''` is the one shape of a model without symbols; on a model with symbols
/// it is refused by name.
#[test]
fn empty_shape_list_is_the_shape_without_symbols() {
    let list = parse_shape_list("").unwrap();
    assert_eq!(list, vec![Bindings::new()]);
    assert!(parse_shape_list(";").is_err());
    let src = ShapeSource::List {
        shapes: vec![String::new()],
    };
    assert_eq!(resolve(&src, &SymbolScope::new()).unwrap().len(), 1);
    let e = resolve(&src, &scope(None, 1)).unwrap_err().to_string();
    assert!(e.contains("`` (no symbols) leaves symbol B unbound"), "{e}");
}

#[test]
fn same_seed_same_shapes_other_seed_other_shapes() {
    let sc = scope(None, 1);
    let a = sample_longtail(&lt(7, 12), &sc).unwrap();
    let b = sample_longtail(&lt(7, 12), &sc).unwrap();
    let c = sample_longtail(&lt(8, 12), &sc).unwrap();
    assert_eq!(a, b);
    assert_ne!(seqs(&a), seqs(&c));
    // Pinned: the generator's output is portable, so the shapes are too.
    insta::assert_debug_snapshot!(seqs(&a));
}

#[test]
fn within_range_and_divisibility_and_long_tailed() {
    let sc = scope(Some(512), 8);
    let v = sample_longtail(&lt(1, 400), &sc).unwrap();
    let s = seqs(&v);
    assert!(
        s.iter().all(|&x| (32..=512).contains(&x) && x % 8 == 0),
        "{s:?}"
    );
    assert!(v.iter().all(|b| sc.check(b).is_ok()));
    let mut sorted = s.clone();
    sorted.sort_unstable();
    let median = sorted[sorted.len() / 2] as f64;
    let mean = s.iter().sum::<i64>() as f64 / s.len() as f64;
    assert!(median < mean, "median {median} mean {mean}");
    // Mostly short, a few long: most at most 128, some but under a quarter from 256 on.
    let short = s.iter().filter(|&&x| x <= 128).count();
    let long = s.iter().filter(|&&x| x >= 256).count();
    assert!(
        short > s.len() / 2 && long > 0 && long < s.len() / 4,
        "{short} {long}"
    );
}

#[test]
fn token_budget_batching_shrinks_the_batch_for_long_sequences() {
    let sc = scope(None, 1);
    let mut l = lt(3, 50);
    l.batch = BatchRule::Tokens(4096);
    for b in sample_longtail(&l, &sc).unwrap() {
        let (bb, s) = (b[&Symbol::new("B")], b[&Symbol::new("S")]);
        assert_eq!(bb, (4096 / s).max(1));
    }
}

#[test]
fn bad_requests_are_errors() {
    let sc = scope(Some(16), 1);
    let e = sample_longtail(&lt(1, 3), &sc).unwrap_err().to_string();
    assert!(e.contains("no value in [32, 1024]"), "{e}");
    let mut l = lt(1, 3);
    l.seq_symbol = "T".into();
    let e = sample_longtail(&l, &scope(None, 1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no symbol T"), "{e}");
    // A huge --samples is refused up front, never an allocation failure.
    let e = sample_longtail(&lt(1, usize::MAX), &scope(Some(1024), 1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than 100000"), "{e}");
    assert!(parse_shape_list(" ; ").is_err());
    let src = ShapeSource::List {
        shapes: vec!["B=8,S=600".into()],
    };
    let e = resolve(&src, &scope(Some(512), 1)).unwrap_err().to_string();
    assert!(e.contains("S=600"), "{e}");
}
