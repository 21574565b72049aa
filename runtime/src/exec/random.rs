//! `rng_bit_generator`: random bits as a pure function of a `ui64[2]` state `[key, counter]`
//! (StableHLO spec, `rng_bit_generator`: the bits are implementation-defined).
//!
//! Every algorithm generates with threefry2x32-20 (Salmon et al., "Parallel Random Numbers:
//! As Easy as 1, 2, 3", SC 2011; the block function JAX's default PRNG uses): the key is the
//! state's first word split into two 32-bit halves, block `j` encrypts the 64-bit counter
//! `counter + j`. A `ui32` result takes two words per block, a `ui64` result one block per
//! element. The next state is `[key, counter + blocks]`, so consecutive calls threaded through
//! the state never reuse a block.
//!
//! Invariant: the bits depend on the state and the element index only, so a recomputed or
//! re-executed op reproduces them exactly (rematerialization of a dropout mask is exact).

use super::Ctx;
use crate::error::OpError;
use crate::tensor::{Data, Tensor};
use ebb_ir::op::RngSpec;
use ebb_ir::DType;

/// Threefry2x32 with 20 rounds (Random123's `threefry2x32_20`).
pub fn threefry2x32(key: [u32; 2], ctr: [u32; 2]) -> [u32; 2] {
    const ROT: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];
    let ks = [key[0], key[1], key[0] ^ key[1] ^ 0x1BD1_1BDA];
    let mut x = [ctr[0].wrapping_add(ks[0]), ctr[1].wrapping_add(ks[1])];
    for i in 0..5 {
        for &r in &ROT[i % 2] {
            x[0] = x[0].wrapping_add(x[1]);
            x[1] = x[1].rotate_left(r) ^ x[0];
        }
        x[0] = x[0].wrapping_add(ks[(i + 1) % 3]);
        x[1] = x[1]
            .wrapping_add(ks[(i + 2) % 3])
            .wrapping_add(i as u32 + 1);
    }
    x
}

fn split(v: u64) -> [u32; 2] {
    [v as u32, (v >> 32) as u32]
}

/// Runs `rng_bit_generator` (see the module docs).
pub(crate) fn rng_bit_generator(
    ctx: &Ctx,
    spec: &RngSpec,
    ops: Vec<Tensor>,
) -> Result<Vec<Tensor>, OpError> {
    let state = match ops.first().map(|t| t.data()) {
        Some(Data::U64(v)) if v.len() == 2 => [v[0], v[1]],
        _ => return Err(OpError::Invalid("the state must be ui64[2]".into())),
    };
    let shape = ctx
        .out
        .get(1)
        .ok_or_else(|| OpError::Invalid("rng_bit_generator has two results".into()))?
        .shape
        .clone();
    let n: usize = shape.iter().product();
    let key = split(state[0]);
    let block = |j: u64| threefry2x32(key, split(state[1].wrapping_add(j)));
    let (data, blocks) = match spec.dtype {
        DType::U32 => {
            let blocks = n.div_ceil(2);
            let mut v = Vec::with_capacity(2 * blocks);
            for j in 0..blocks as u64 {
                v.extend_from_slice(&block(j));
            }
            v.truncate(n);
            (Data::U32(v.into()), blocks)
        }
        DType::U64 => {
            let v: Vec<u64> = (0..n as u64)
                .map(|j| {
                    let [a, b] = block(j);
                    u64::from(a) | (u64::from(b) << 32)
                })
                .collect();
            (Data::U64(v.into()), n)
        }
        d => return Err(OpError::Invalid(format!("bits of type {d}"))),
    };
    let next = [state[0], state[1].wrapping_add(blocks as u64)];
    Ok(vec![
        Tensor::from_parts(vec![2], Data::U64(next.to_vec().into())),
        Tensor::from_parts(shape, data),
    ])
}
