//! Tests of `op_table` (`import/src/op_table.rs`).

use ebb_import::op_table::*;

/// The README's op table is what the importers dispatch on (regenerate it with
/// `ebb ops --markdown` when an op is added).
#[cfg(feature = "stablehlo")]
#[test]
fn readme_op_table_matches_the_registries() {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"),
    )
    .unwrap();
    let (Some(b), Some(e)) = (readme.find(BEGIN), readme.find(END)) else {
        panic!("README.md has no generated op table ({BEGIN} ... {END})");
    };
    let have = &readme[b..e + END.len() + 1];
    let want = markdown(&op_lists());
    assert_eq!(
        have, want,
        "README.md's op table is stale: replace it with `ebb ops --markdown`"
    );
}

#[test]
fn lists_hold_the_new_lowerings() {
    let lists = op_lists();
    let ms = lists
        .iter()
        .find(|l| l.front_end == "onnx:com.microsoft")
        .unwrap();
    assert!(ms.ops.iter().any(|o| o == "ConvGrad"));
    let ai = lists
        .iter()
        .find(|l| l.front_end == "onnx:ai.onnx")
        .unwrap();
    assert!(ai.ops.iter().any(|o| o == "MaxPoolGrad"));
    #[cfg(feature = "stablehlo")]
    {
        let s = &lists[0];
        for op in [
            "stablehlo.case",
            "stablehlo.composite",
            "stablehlo.add",
            "func.call",
        ] {
            assert!(s.ops.iter().any(|o| o == op), "{op}");
        }
        assert!(!s
            .ops
            .iter()
            .any(|o| o == "stablehlo.return" || o == "stablehlo.input"));
    }
}
