//! Tests of `units` (`compiler/src/units.rs`).

use ebb_compiler::units::*;

#[test]
fn figures_keep_their_significant_digits() {
    assert_eq!(bytes(64 << 20), "64.0 MiB");
    assert_eq!(bytes(3 << 29), "1.50 GiB");
    assert_eq!(bytes(512), "512 B");
    assert_eq!(bytes(40 << 30), "40.0 GiB");
    assert_eq!(flops(3_200_000), "3.20 MFLOP");
    assert_eq!(flops(81_000_000_000), "81.0 GFLOP");
    assert_eq!(percent(41.0, 1e6), "0.0041%");
    assert_eq!(percent(0.0, 1e6), "0%");
    assert_eq!(percent(1.0, 4.0), "25.0%");
    assert_eq!(percent(3.0, 0.0), "-");
}
