//! Tests of `size` (`pipeline/src/size.rs`).

use ebb_pipeline::size::*;

#[test]
fn sizes_and_budgets_parse() {
    assert_eq!(parse_bytes("40000"), Ok(40000));
    assert_eq!(parse_bytes("2GiB"), Ok(2 << 30));
    assert_eq!(parse_bytes(" 1.5 GB "), Ok(1_500_000_000));
    assert_eq!(parse_budget("512MiB"), Ok(Budget::Bytes(512 << 20)));
    assert_eq!(parse_budget("50%"), Ok(Budget::Fraction(0.5)));
    assert_eq!(
        parse_budget("40%scheduled"),
        Ok(Budget::FractionOfScheduled(0.4))
    );
    assert_eq!(Budget::FractionOfScheduled(0.5).resolve(300, 200), 100);
    assert!(parse_budget("-5%scheduled").is_err());
    assert_eq!(parse_bytes("1e3"), Ok(1000));
    assert_eq!(parse_bytes("2.5e1KB"), Ok(25000));
}

#[test]
fn bad_sizes_say_what_is_accepted() {
    for bad in ["abc", "", "%", "GiB", "nan", "inf%", "x%"] {
        let e = parse_budget(bad).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("512MiB") || m.contains("must be positive"),
            "{bad}: {m}"
        );
        assert!(!m.contains("float"), "{bad}: {m}");
    }
    assert!(matches!(
        parse_budget("3 parsecs"),
        Err(SizeError::Unit { .. })
    ));
}

#[test]
fn negative_and_zero_budgets_are_not_positive() {
    for bad in ["-5", "-50%", "0", "0%", "-1GiB", "0.1"] {
        assert!(
            matches!(parse_budget(bad), Err(SizeError::NotPositive { .. })),
            "{bad}: {:?}",
            parse_budget(bad)
        );
    }
    assert!(matches!(
        parse_bytes("99999999999GiB"),
        Err(SizeError::TooLarge { .. })
    ));
}
