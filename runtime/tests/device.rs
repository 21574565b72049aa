//! The runtime's device profiles (`ebb_runtime::device`): the calibrated CPU profile, names.

use ebb_plan::device::DeviceId;
use ebb_runtime::device::*;

#[test]
fn calibrated_cpu_profile_is_valid_and_named() {
    let p = calibrate_cpu();
    assert_eq!(p.name, DeviceId::Cpu);
    assert!(p.is_valid(), "{p:?}");
    // Any machine that runs the tests does more than 0.1 GFLOP/s and copies 10 MB/s.
    assert!(p.matrix_flops > 1e8 && p.link_bandwidth > 1e7, "{p:?}");
}

#[test]
fn names_resolve() {
    assert_eq!(
        resolve("h100-sxm-pcie5").unwrap().name,
        DeviceId::H100SxmPcie5
    );
    assert!(resolve("warp-drive").is_err());
}
