//! Tests of `curve` (`pipeline/src/curve.rs`).

use ebb_pipeline::curve::grid;

#[test]
fn the_grid_holds_both_ends_and_the_extras_once() {
    assert_eq!(grid(10, 20, 3, &[20, 25]), vec![10, 15, 20, 25]);
    assert_eq!(grid(10, 10, 16, &[]), vec![10]);
    assert_eq!(grid(0, 100, 5, &[7]), vec![0, 7, 25, 50, 75, 100]);
}
