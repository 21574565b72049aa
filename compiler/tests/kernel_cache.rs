//! Kernels are compiled once per machine (`ebb_codegen::disk_cache`): a second process running
//! the same plan compiles no kernel — it links the object code the first one cached — and
//! computes the same bits; processes started together on an empty cache all succeed and leave
//! only whole files; the cache stays within its bound.

use ebb_testkit::jax_fixture;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// `ebb run` of the MLP step (20 kernels, about 95 KB of object code) with
/// `EBB_CACHE_DIR=cache`, saving its outputs to `save`.
fn spawn(cache: &Path, save: &Path, max_bytes: Option<u64>) -> Child {
    let step = jax_fixture("mlp_sgd");
    let mut c = Command::new(env!("CARGO_BIN_EXE_ebb"));
    c.args(["run", step.to_str().unwrap(), "--bind", "B=2", "--json"])
        .arg("--save-outputs")
        .arg(save)
        .env("EBB_CACHE_DIR", cache)
        .env_remove("EBB_KERNEL_CACHE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(m) = max_bytes {
        c.env("EBB_KERNEL_CACHE_MAX_BYTES", m.to_string());
    }
    c.spawn().unwrap()
}

/// The run's report, after checking it succeeded.
fn report(child: Child) -> serde_json::Value {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn count(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in the report"))
}

fn files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_second_process_compiles_no_kernel() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let (a, b) = (tmp.path().join("a.npz"), tmp.path().join("b.npz"));
    let first = report(spawn(&cache, &a, None));
    let compiled = count(&first, "kernels_compiled");
    assert!(compiled > 0, "the first process compiles the kernels");
    assert_eq!(count(&first, "kernels_loaded"), 0);
    let kernels = files(&cache.join("kernels"));
    assert_eq!(kernels.len() as u64, compiled, "{kernels:?}");
    assert!(kernels.iter().all(|f| f.ends_with(".ebbk")), "{kernels:?}");

    let second = report(spawn(&cache, &b, None));
    assert_eq!(count(&second, "kernels_compiled"), 0, "{second}");
    assert_eq!(count(&second, "kernels_loaded"), compiled);
    assert!(second["jit_compile_ms"].as_f64().unwrap() == 0.0);
    assert_eq!(
        std::fs::read(&a).unwrap(),
        std::fs::read(&b).unwrap(),
        "outputs of cached kernels differ"
    );
}

#[test]
fn processes_sharing_an_empty_cache_all_succeed_and_leave_whole_files() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let saves: Vec<_> = (0..3)
        .map(|k| tmp.path().join(format!("out{k}.npz")))
        .collect();
    let children: Vec<Child> = saves.iter().map(|s| spawn(&cache, s, None)).collect();
    for c in children {
        let r = report(c);
        assert!(count(&r, "kernels_compiled") + count(&r, "kernels_loaded") > 0);
    }
    let first = std::fs::read(&saves[0]).unwrap();
    for s in &saves[1..] {
        assert_eq!(std::fs::read(s).unwrap(), first);
    }
    let kernels = files(&cache.join("kernels"));
    assert!(
        !kernels.is_empty() && kernels.iter().all(|f| f.ends_with(".ebbk")),
        "{kernels:?}"
    );
    // Whatever the interleaving, a later process finds every kernel.
    let r = report(spawn(&cache, &tmp.path().join("later.npz"), None));
    assert_eq!(count(&r, "kernels_compiled"), 0, "{r}");
}

#[test]
fn the_cache_stays_within_its_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let bound = 40_000;
    let r = report(spawn(&cache, &tmp.path().join("o.npz"), Some(bound)));
    let dir = cache.join("kernels");
    let size: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(size > 0 && size <= bound, "{size} bytes in the cache");
    // The bound evicted: fewer files than kernels compiled.
    assert!(
        (files(&dir).len() as u64) < count(&r, "kernels_compiled"),
        "{r}"
    );
}
