//! Tests of `disk_cache` (`codegen/src/disk_cache.rs`).

use ebb_codegen::disk_cache::*;
use std::path::PathBuf;
use std::time::SystemTime;

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ebb-kcache-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn stores_and_loads_by_the_whole_key() {
    let d = scratch("roundtrip");
    assert_eq!(load(&d, "k1"), None);
    store(&d, "k1", b"object one", 1 << 20).unwrap();
    assert_eq!(load(&d, "k1").as_deref(), Some(&b"object one"[..]));
    assert_eq!(load(&d, "k2"), None);
    // A file whose key differs (a collision, another build) is a miss.
    let (p1, p2) = (file_of(&d, "k1"), file_of(&d, "k2"));
    std::fs::copy(&p1, &p2).unwrap();
    assert_eq!(load(&d, "k2"), None);
    // A truncated file is a miss.
    let bytes = std::fs::read(&p1).unwrap();
    std::fs::write(&p1, &bytes[..bytes.len() - 3]).unwrap();
    assert_eq!(load(&d, "k1"), None);
    // No temporary file is left.
    let names: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| n.ends_with(".ebbk")), "{names:?}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_least_recently_used_files_go_past_the_bound() {
    let d = scratch("prune");
    let obj = vec![7u8; 1000];
    for k in 0..10 {
        store(&d, &format!("k{k}"), &obj, u64::MAX).unwrap();
        // Distinct modification times, k0 the oldest.
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000 + k);
        let f = std::fs::File::options()
            .append(true)
            .open(file_of(&d, &format!("k{k}")))
            .unwrap();
        f.set_modified(t).unwrap();
    }
    let one = std::fs::metadata(file_of(&d, "k0")).unwrap().len();
    prune(&d, 6 * one);
    assert!(size(&d) <= 6 * one / 4 * 3 + one);
    assert_eq!(load(&d, "k0"), None, "the oldest went first");
    assert!(load(&d, "k9").is_some(), "the newest stays");
    let _ = std::fs::remove_dir_all(&d);
}
