//! Tests of `stablehlo` (`import/src/stablehlo/mod.rs`).

use ebb_import::stablehlo::*;

#[test]
fn locations() {
    assert_eq!(line_col("loc(\"-\":3:14)"), (3, 14));
    assert_eq!(
        short_loc("loc(\"jit(step)/dot_general\"(\"/tmp/mlp.py\":7:20 to :41))"),
        "jit(step)/dot_general @ mlp.py:7:20"
    );
    assert_eq!(short_loc("loc(unknown)"), "unknown location");
    assert_eq!(
        short_loc_in("loc(\"-\":5:10)", "/tmp/m.mlir"),
        "m.mlir:5:10"
    );
    assert_eq!(
        short_loc_in("loc(\"add\"(\"-\":5:10))", "/tmp/m.mlir"),
        "add @ m.mlir:5:10"
    );
}
