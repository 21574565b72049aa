//! Writes each fuzz target's seed corpus (`ebb_testkit::fuzz::seeds`, built from the
//! repository's fixtures) into `DIR/<target>/seed-<k>`: `seeds DIR`.

// Built with the targets' instrumentation flags, so it links libFuzzer's coverage callbacks
// like they do (its `main` stays this one).
extern crate libfuzzer_sys;

fn main() -> std::io::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "fuzz/seeds".into());
    for &(name, _) in ebb_testkit::fuzz::TARGETS {
        let d = std::path::Path::new(&dir).join(name);
        std::fs::create_dir_all(&d)?;
        for (k, s) in ebb_testkit::fuzz::seeds(name).iter().enumerate() {
            std::fs::write(d.join(format!("seed-{k}")), s)?;
        }
    }
    Ok(())
}
