//! Tests of `dim::display` (`ir/src/dim/display.rs`).

use ebb_ir::dim::*;

fn show(e: DimExpr) -> String {
    e.to_string()
}

#[test]
fn human_friendly_text() {
    let b = DimExpr::sym("B");
    let s = DimExpr::sym("S");
    assert_eq!(show(&b * &s * 768), "768*B*S");
    assert_eq!(show(&b * 4 + 12), "4*B + 12");
    assert_eq!(show(-&b + 3), "-B + 3");
    assert_eq!(show(&b - 3), "B - 3");
    assert_eq!(show(&b * &b - &b * 2), "B*B - 2*B");
    assert_eq!(show(s.floor_div(2).unwrap()), "floordiv(S, 2)");
    assert_eq!(show(s.rem(8).unwrap()), "mod(S, 8)");
    assert_eq!(show(DimExpr::min(&b, &DimExpr::constant(4))), "min(B, 4)");
    assert_eq!(show(DimExpr::constant(-7)), "-7");
    assert_eq!(show(DimExpr::zero()), "0");
    assert_eq!(
        show(DimExpr::sym("seq len") + DimExpr::sym("a\"b")),
        "\"a\\\"b\" + \"seq len\""
    );
}

#[test]
fn extreme_coefficients_round_trip() {
    let b = DimExpr::sym("B");
    for e in [
        DimExpr::constant(i64::MIN),
        &b * i64::MIN,
        &b + DimExpr::constant(i64::MIN),
        &b * &b + &b * i64::MIN,
        &b * i64::MAX - 5,
    ] {
        let t = e.to_string();
        assert_eq!(t.parse::<DimExpr>().unwrap(), e, "{t}");
    }
}

#[test]
fn serde_as_text() {
    let e: DimExpr = "2*B*S + floordiv(S, 4)".parse().unwrap();
    let j = serde_json::to_string(&e).unwrap();
    assert_eq!(j, "\"2*B*S + floordiv(S, 4)\"");
    assert_eq!(serde_json::from_str::<DimExpr>(&j).unwrap(), e);
    assert!(serde_json::from_str::<DimExpr>("\"B +\"").is_err());
}
