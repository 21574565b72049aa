//! The fuzz targets' smoke run: every target of
//! [`ebb_testkit::fuzz::TARGETS`] on its seed corpus and on seeded mutations of it (bit flips,
//! byte overwrites with boundary values, truncations, duplicated and deleted ranges, splices
//! of two seeds), without coverage instrumentation. The coverage-guided runs are
//! `scripts/fuzz.sh TARGET SECONDS` (libFuzzer); this keeps every CI run exercising the same
//! entry points with inputs near the real ones.

use ebb_testkit::fuzz::{seeds, TARGETS};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

/// Mutations per target: enough to leave the parsers' happy paths, few enough for CI.
const MUTATIONS: usize = 60;

/// One seeded mutation of `seed` (another seed `other` for splices).
fn mutate(rng: &mut Pcg64, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut d = seed.to_vec();
    if d.is_empty() {
        return vec![rng.random_range(0..=255)];
    }
    for _ in 0..rng.random_range(1..4) {
        let n = d.len().max(1);
        let i = rng.random_range(0..n);
        match rng.random_range(0..6) {
            0 => {
                if let Some(x) = d.get_mut(i) {
                    *x ^= 1 << rng.random_range(0..8);
                }
            }
            1 => {
                let v = [0u8, 0xff, 0x7f, 0x80, b'0', b'9', b'-', b'"', b'{', b'%'];
                if let Some(x) = d.get_mut(i) {
                    *x = v[rng.random_range(0..v.len())];
                }
            }
            2 => d.truncate(i),
            3 => {
                let j = (i + rng.random_range(1..64)).min(d.len());
                let copy = d[i..j].to_vec();
                d.splice(i..i, copy);
            }
            4 => {
                let j = (i + rng.random_range(1..64)).min(d.len());
                d.drain(i..j);
            }
            _ => {
                if !other.is_empty() {
                    let k = rng.random_range(0..other.len());
                    d.truncate(i);
                    d.extend_from_slice(&other[k..]);
                }
            }
        }
    }
    d
}

#[test]
fn every_fuzz_target_survives_its_seeds_and_their_mutations() {
    for &(name, target) in TARGETS {
        let corpus = seeds(name);
        assert!(!corpus.is_empty(), "{name}: no seeds");
        for s in &corpus {
            target(s);
        }
        let mut rng = Pcg64::seed_from_u64(0xEBB);
        for _ in 0..MUTATIONS {
            let a = &corpus[rng.random_range(0..corpus.len())];
            let b = &corpus[rng.random_range(0..corpus.len())];
            target(&mutate(&mut rng, a, b));
        }
    }
}
