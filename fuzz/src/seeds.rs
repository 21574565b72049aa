//! Writes each fuzz target's seed corpus (`ebb_testkit::fuzz::seeds`, built from the
//! repository's fixtures) into `DIR/<target>/seed-<k>`: `seeds DIR`.

// Built with the targets' instrumentation flags, so it links libFuzzer's coverage callbacks
// like they do (its `main` stays this one).
extern crate libfuzzer_sys;

fn main() -> std::io::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "fuzz/seeds".into());
    let mut all: Vec<(&str, Vec<Vec<u8>>)> = ebb_testkit::fuzz::TARGETS
        .iter()
        .map(|&(name, _)| (name, ebb_testkit::fuzz::seeds(name)))
        .collect();
    all.push(("capi", ebb_fuzz::capi_seeds()));
    for (name, seeds) in all {
        let d = std::path::Path::new(&dir).join(name);
        std::fs::create_dir_all(&d)?;
        for (k, s) in seeds.iter().enumerate() {
            std::fs::write(d.join(format!("seed-{k}")), s)?;
        }
    }
    Ok(())
}
