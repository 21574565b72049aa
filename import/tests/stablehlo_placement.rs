//! Tests of `stablehlo::ops::placement` (`import/src/stablehlo/ops/placement.rs`).

use ebb_import::stablehlo::internals::dict_string;

#[test]
fn reads_the_placement_from_the_frontend_attributes() {
    let d = r#"{_xla_buffer_placement = "pinned_host"}"#;
    assert_eq!(
        dict_string(d, "_xla_buffer_placement").as_deref(),
        Some("pinned_host")
    );
    let d = r#"{a = "b", _xla_buffer_placement = "device"}"#;
    assert_eq!(
        dict_string(d, "_xla_buffer_placement").as_deref(),
        Some("device")
    );
    assert_eq!(dict_string("{a = 1 : i32}", "_xla_buffer_placement"), None);
    assert_eq!(
        dict_string(r#"{_xla_buffer_placement = 3}"#, "_xla_buffer_placement"),
        None
    );
}
