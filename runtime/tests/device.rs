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

#[test]
fn the_cpu_profile_is_cached_per_build_and_thread_count() {
    let dir = std::env::temp_dir().join(format!("ebb-cpu-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let first = cpu_cached_in(Some(&dir));
    let build = if cfg!(debug_assertions) {
        "dev"
    } else {
        "release"
    };
    let threads = rayon::current_num_threads();
    let file = dir.join(format!("cpu-profile-{build}-{threads}t.json"));
    assert!(file.is_file(), "{}", file.display());
    // A second call reads the file: the same figures (to JSON's float round trip), not a new
    // measurement, which differs in far more than the last bits.
    let again = cpu_cached_in(Some(&dir));
    let same = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs();
    assert!(
        same(first.matrix_flops, again.matrix_flops),
        "{first:?} {again:?}"
    );
    assert!(
        same(first.vector_flops, again.vector_flops),
        "{first:?} {again:?}"
    );
    assert!(
        same(first.link_bandwidth, again.link_bandwidth),
        "{first:?} {again:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
