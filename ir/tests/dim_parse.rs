//! Tests of `dim::parse` (`ir/src/dim/parse.rs`).

use ebb_ir::dim::*;

fn p(s: &str) -> DimExpr {
    s.parse().unwrap()
}

fn err_at(s: &str) -> (usize, String) {
    match s.parse::<DimExpr>() {
        Err(DimError::Parse { pos, msg, input }) => {
            assert_eq!(input, s);
            (pos, msg)
        }
        other => panic!("{s}: expected a parse error, got {other:?}"),
    }
}

#[test]
fn operators_and_precedence() {
    assert_eq!(p("2 + 3*4"), p("14"));
    assert_eq!(p("(B + 1)*(B - 1)"), p("B*B - 1"));
    assert_eq!(p("B*S - S*B"), p("0"));
    assert_eq!(p("-7 // 2"), p("-4"));
    assert_eq!(p("1 - 7 // 2"), p("-2"));
    assert_eq!(p("S // 2"), p("floordiv(S, 2)"));
    assert_eq!(p("S % 8"), p("mod(S, 8)"));
    assert_eq!(p("2*-B"), p("-2*B"));
    assert_eq!(p("- -B"), p("B"));
    assert_eq!(p("min(B, 4, S)"), p("min(S, min(4, B))"));
    assert_eq!(p("max(B)"), p("B"));
    assert_eq!(p("min * 2"), DimExpr::sym("min") * 2);
    assert_eq!(p("\"seq len\" + 1"), DimExpr::sym("seq len") + 1);
    assert_eq!(p("S // (1 + 1)"), p("floordiv(S, 2)"));
}

#[test]
fn round_trips() {
    for t in [
        "768*B*S",
        "4*B + 12",
        "-B + 3",
        "floordiv(S, 2)",
        "mod(S, 8)",
        "min(B, 4)",
        "B*B - 2*B + max(B, S)",
    ] {
        assert_eq!(p(t).to_string(), t);
    }
}

#[test]
fn errors_are_positioned() {
    assert_eq!(err_at("B +").0, 3);
    assert_eq!(err_at("B ) ").0, 2);
    assert_eq!(err_at("S / 2").0, 2);
    assert!(err_at("S // 0").1.contains("positive"));
    assert!(err_at("S // B").1.contains("constant"));
    assert!(err_at("mod(S, -1)").1.contains("positive"));
    assert!(err_at("floordiv(S)").1.contains("2 arguments"));
    assert!(err_at("foo(S)").1.contains("unknown function"));
    assert!(err_at("99999999999999999999").1.contains("out of range"));
    assert!(err_at("9223372036854775807*B*2").1.contains("overflow"));
    assert!(err_at("\"abc").1.contains("unterminated"));
    assert!(err_at("").1.contains("end of input"));
    assert!(err_at("B é").1.contains("after the expression"));
    assert!(err_at(&"(".repeat(10_000)).1.contains("too deeply"));
    assert!(err_at(&"-".repeat(10_000)).1.contains("too deeply"));
}

/// Text that expands without bound is refused, not computed (the `dim_param` fuzz
/// target found a 967-byte expression that took 30 s): a product of five sums of eight
/// distinct symbols (8^5 terms), and floor divisions of products nested 40 deep.
#[test]
fn expressions_that_expand_without_bound_are_refused() {
    let sums: Vec<String> = (0..5)
        .map(|k| {
            let t: Vec<String> = (0..8).map(|i| format!("s{k}_{i}")).collect();
            format!("({})", t.join(" + "))
        })
        .collect();
    let (_, msg) = err_at(&sums.join(" * "));
    assert!(msg.contains("too large"), "{msg}");
    let mut nested = String::from("B*S + A");
    for k in 0..40 {
        nested = format!("(B*S + A*C + {k})*({nested} + S)//3 - ({nested})//5");
        if nested.len() > 100_000 {
            break;
        }
    }
    let (_, msg) = err_at(&nested);
    assert!(msg.contains("too large"), "{msg}");
}

#[test]
fn extreme_literals() {
    assert_eq!(p("-9223372036854775808"), DimExpr::constant(i64::MIN));
    assert!("9223372036854775808".parse::<DimExpr>().is_err());
}
