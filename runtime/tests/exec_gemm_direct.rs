//! The `f32` GEMM without packing (`exec/gemm_direct.rs`) gives `matrixmultiply::sgemm`'s bits
//! for every product it takes: shapes covering its 6×16 tiles (8×32 beside the AVX-512
//! kernel) and all of their tails, `A` row-major and transposed, `B` with padded rows or
//! transposed (copied row-major first), and operands whose products underflow to `-0` (which
//! `matrixmultiply`'s AVX2+FMA kernel stores as `+0`, its AVX-512 kernel as `-0`) or are
//! infinite (sums of opposite infinities: NaN). On a machine with AVX-512 the products are
//! compared with `matrixmultiply`'s AVX-512 kernel, elsewhere with its AVX2+FMA kernel.

use ebb_runtime::exec::{direct_add_and_packed, direct_and_packed};
use ebb_testkit::Lcg;

/// `n` values in `[-1, 1)` drawn from `seed`, with every `special`-th one replaced in turn by
/// a value whose products underflow or an infinity (none when `special` is 0).
fn values(n: usize, seed: u64, special: usize) -> Vec<f32> {
    let mut g = Lcg::new(seed.wrapping_add(0x9E37_79B9_7F4A_7C15));
    (0..n)
        .map(
            |i| match i.checked_rem(special).zip(i.checked_div(special)) {
                Some((0, q)) => [-1e-30, 1e-30, f32::INFINITY][q % 3],
                _ => g.symmetric_f32(),
            },
        )
        .collect()
}

/// Compares the two kernels on one product; `false` when the direct kernel declines it.
/// `B` is `k×n` with rows `n + pad` apart, or (`b_transposed`) its transpose stored `n×k`
/// with rows `k + pad` apart.
fn agree(
    (m, k, n): (usize, usize, usize),
    a_transposed: bool,
    b_transposed: bool,
    pad: usize,
    special: usize,
) -> bool {
    let seed = (m * 1_000_003 + k * 1009 + n) as u64;
    let a = values(m * k, seed, special);
    let (b_len, b_strides) = if b_transposed {
        (n * (k + pad), (1, k + pad))
    } else {
        (k * (n + pad), (n + pad, 1))
    };
    let b = values(b_len, seed ^ 0xABCD, special);
    let strides = if a_transposed { (1, m) } else { (k, 1) };
    let Some((direct, packed)) = direct_and_packed((m, k, n), &a, strides, &b, b_strides) else {
        return false;
    };
    for (i, (x, y)) in direct.iter().zip(&packed).enumerate() {
        assert_eq!(
            x.to_bits(),
            y.to_bits(),
            "m={m} k={k} n={n} a transposed={a_transposed} b transposed={b_transposed} \
             pad={pad}: element {i}: {x} vs {y}"
        );
    }
    // Added to an accumulator (the dot-accumulate form): `c + p`, signed zeros included.
    let c: Vec<f32> = values(m * n, seed ^ 0x5EED, 0)
        .into_iter()
        .enumerate()
        .map(|(i, x)| [-0.0, 0.0, x][i % 3])
        .collect();
    let (direct, packed) =
        direct_add_and_packed((m, k, n), &a, strides, &b, b_strides, &c).expect("taken");
    for (i, (x, y)) in direct.iter().zip(&packed).enumerate() {
        assert_eq!(
            x.to_bits(),
            y.to_bits(),
            "added: m={m} k={k} n={n} a transposed={a_transposed} b transposed={b_transposed} \
             pad={pad}: element {i}: {x} vs {y}"
        );
    }
    true
}

#[test]
fn direct_gemm_matches_matrixmultiply_bit_for_bit() {
    let mut taken = 0;
    for &(m, k, n) in &[
        (64, 64, 16),
        (64, 16, 64),
        (13, 256, 40),
        (7, 1, 33),
        (1, 5, 1),
        (32, 100, 200),
        (200, 37, 25),
        (6, 3, 16),
        (12, 64, 8),
        (5, 0, 9),
        // A scan step's products at B = 8 and 16 (`dh·Wᵀ`), and every tile of the AVX-512
        // path (8-, 4- and 1-row tiles; 32- and 16-column strips, 8 and 1 columns left).
        (8, 96, 32),
        (16, 96, 32),
        (29, 40, 57),
    ] {
        for a_transposed in [false, true] {
            for b_transposed in [false, true] {
                for pad in [0, 3] {
                    for special in [0, 7] {
                        if agree((m, k, n), a_transposed, b_transposed, pad, special) {
                            taken += 1;
                        }
                    }
                }
            }
        }
    }
    // Where the machine runs one of matrixmultiply's FMA kernels (AVX2+FMA or AVX-512) every
    // one of these is taken; on other machines none is (and the GEMM goes to matrixmultiply).
    assert!(taken == 0 || taken == 208, "{taken} products taken");
}

#[test]
fn direct_gemm_negative_zero_is_stored_as_matrixmultiply_stores_it() {
    // Every product underflows to -0: the chain ends at -0, which matrixmultiply's AVX2+FMA
    // kernel stores as +0 (β = 0 adds +0) and its AVX-512 kernel as -0 (1·acc); the direct
    // kernel stores what the kernel this machine runs stores, at every tile shape and tail.
    for (m, k, n) in [(8, 4, 16), (7, 3, 25), (1, 1, 1), (13, 2, 9)] {
        let a = vec![-1e-30f32; m * k];
        let b = vec![1e-30f32; k * n];
        if let Some((direct, packed)) = direct_and_packed((m, k, n), &a, (k, 1), &b, (n, 1)) {
            let zero = packed[0].to_bits();
            assert!(zero == 0 || zero == 0x8000_0000, "{}", packed[0]);
            assert!(packed.iter().all(|x| x.to_bits() == zero));
            assert_eq!(
                direct.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                packed.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                "m={m} k={k} n={n}"
            );
        }
        // Added to `-0` accumulators: `-0 + p`, as the dot-accumulate form adds.
        let c = vec![-0.0f32; m * n];
        if let Some((direct, packed)) = direct_add_and_packed((m, k, n), &a, (k, 1), &b, (n, 1), &c)
        {
            assert_eq!(
                direct.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                packed.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                "added: m={m} k={k} n={n}"
            );
        }
    }
}

/// On a machine with AVX2, FMA and AVX-512 (where `matrixmultiply`, built with its `avx512`
/// feature and Rust 1.89 or later, runs its AVX-512 kernel) the direct kernel takes the thin
/// products too, with that kernel's bits (a `-0` chain stored as it stores it).
#[test]
#[cfg(target_arch = "x86_64")]
fn direct_gemm_is_taken_beside_the_avx512_kernel() {
    if !(std::is_x86_feature_detected!("fma")
        && std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("avx512f"))
    {
        return;
    }
    // A scan step's `dh·Wᵀ`: `[8, 96]·[96, 32]`, `W` read transposed; half the chains end at
    // `-0`.
    let a: Vec<f32> = (0..8 * 96)
        .map(|i| {
            if i < 4 * 96 {
                -1e-30
            } else {
                (i % 7) as f32 - 3.0
            }
        })
        .collect();
    let b = vec![1e-30f32; 32 * 96];
    let (direct, packed) = direct_and_packed((8, 96, 32), &a, (96, 1), &b, (1, 96)).expect("taken");
    assert_eq!(
        direct.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        packed.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
}
