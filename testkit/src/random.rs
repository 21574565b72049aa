//! [`Lcg`]: the one pseudo-random generator of the tests' random cases, fixed so that a test
//! draws the same cases on every run and machine.

/// A linear congruential generator with Knuth's MMIX constants (multiplier
/// 6364136223846793005, increment 1442695040888963407), modulo 2^64; draws use the high bits.
#[derive(Clone, Debug)]
pub struct Lcg(u64);

impl Lcg {
    /// The generator whose state is `seed`.
    pub fn new(seed: u64) -> Lcg {
        Lcg(seed)
    }

    /// The next state (all 64 bits; the low bits are weak, prefer the draws below).
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0
    }

    /// A number in `0..m` (`m > 0`): bits 33.. of the next state, modulo `m`.
    pub fn below(&mut self, m: u64) -> u64 {
        (self.next_u64() >> 33) % m
    }

    /// A number in `[-1, 1)` (24 random bits).
    pub fn symmetric_f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// Shuffles `v` (Fisher–Yates, last position first).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i as u64 + 1) as usize);
        }
    }
}

/// `next(m)`, a number in `0..m` from an [`Lcg`] seeded with `seed` ([`Lcg::below`]).
pub fn lcg(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut g = Lcg::new(seed);
    move |m| g.below(m)
}
