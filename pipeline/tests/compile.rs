//! Tests of `compile` (`pipeline/src/compile.rs`).

use ebb_passes::PassId;
use ebb_pipeline::compile::*;

/// The pipeline runs every pass of the one table once, and `--stop-after` names them all.
#[test]
fn the_pipeline_names_every_pass_once() {
    for id in PassId::ALL {
        assert_eq!(
            PIPELINE_PASSES.iter().filter(|&&p| p == id).count(),
            1,
            "{id}"
        );
        assert!(STOP_POINTS.contains(&id.name()), "{id}");
    }
}
