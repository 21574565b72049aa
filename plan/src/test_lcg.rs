//! A fixed linear congruential generator (Knuth's MMIX constants) for the unit tests' random
//! cases, so that they are the same on every run.

/// `next(m)`: the next number in `0..m`, from the generator seeded with `seed`.
pub(crate) fn lcg(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut x = seed;
    move |m| {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (x >> 33) % m
    }
}
