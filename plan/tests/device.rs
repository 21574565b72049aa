//! Device profiles (`ebb_plan::device`): named and custom profiles, their ids, the roofline.

use ebb_plan::device::*;

#[test]
fn named_profiles_are_valid_and_round_trip() {
    for (n, id) in DeviceProfile::NAMED.iter().zip(DeviceId::BUILT_IN) {
        let p = DeviceProfile::named(n).unwrap();
        assert_eq!((p.name.to_string().as_str(), &p.name), (*n, &id));
        assert_eq!(serde_json::to_string(&p.name).unwrap(), format!("\"{n}\""));
        assert!(p.is_valid());
        let back: DeviceProfile =
            serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }
    assert!(matches!(
        DeviceProfile::named("tpu"),
        Err(DeviceError::Unknown(_))
    ));
}

#[test]
fn ids_spell_their_names() {
    for name in ["cpu", "custom:flops=1T,hbm=1T,link=1G", "my-gpu"] {
        let id = DeviceId::from(name);
        assert_eq!(id.to_string(), name);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(serde_json::from_str::<DeviceId>(&json).unwrap(), id);
    }
    assert_eq!(DeviceId::from("cpu"), DeviceId::Cpu);
    assert_eq!(DeviceId::from("my-gpu"), DeviceId::Other("my-gpu".into()));
    let p = DeviceProfile::named("custom:flops=100T,hbm=2T,link=25G").unwrap();
    assert_eq!(p.name.to_string(), "custom:flops=100T,hbm=2T,link=25G");
}

#[test]
fn custom_profiles_parse_with_suffixes() {
    let p = DeviceProfile::named("custom:flops=100T,hbm=2T,link=25G,mem=16G").unwrap();
    assert_eq!(p.matrix_flops, 100e12);
    assert_eq!(p.matrix_half_flops, 100e12);
    assert_eq!(p.memory_bandwidth, 2e12);
    assert_eq!(p.link_bandwidth, 25e9);
    assert_eq!(p.memory_bytes, 16_000_000_000);
    assert_eq!(
        DeviceProfile::named("custom:flops=1e12,hbm=1e11,link=1e10")
            .unwrap()
            .vector_flops,
        1e12
    );
    for bad in [
        "custom:flops=1T,hbm=1T",
        "custom:flops=-1,hbm=1T,link=1G",
        "custom:flops=1X,hbm=1T,link=1G",
        "custom:flops=1T,hbm=1T,link=1G,speed=3",
        "custom:flops",
    ] {
        assert!(
            matches!(DeviceProfile::named(bad), Err(DeviceError::Custom { .. })),
            "{bad}"
        );
    }
}

#[test]
fn roofline_takes_the_slower_bound() {
    let p = DeviceProfile::h100_sxm_pcie5();
    // A GEMM of 2·4096³ FLOPs is compute-bound; a 1 GiB copy is memory-bound.
    let gemm = p.op_us(
        2.0 * 4096f64.powi(3),
        3.0 * 4.0 * 4096.0 * 4096.0,
        ComputeKind::Matrix,
    );
    assert!((gemm - 2.0 * 4096f64.powi(3) / 494.5e12 * 1e6).abs() < 1e-9);
    let copy = p.op_us(0.0, 2.0 * 1073741824.0, ComputeKind::Vector);
    assert!((copy - 2.0 * 1073741824.0 / 3.35e12 * 1e6).abs() < 1e-9);
    assert!((p.transfer_us(64e9) - 1e6).abs() < 1e-6);
}
