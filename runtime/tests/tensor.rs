//! Tensors (`ebb_runtime::tensor`): literals, little-endian bytes, conversions, lengths.

use ebb_ir::op::Literal;
use ebb_ir::DType;
use ebb_runtime::tensor::*;
use half::{bf16, f16};

#[test]
fn literal_splat_and_dense() {
    let lit = Literal::splat_f64(DType::F32, 2.5);
    let t = Tensor::from_literal(&lit, vec![2, 3]).unwrap();
    assert_eq!(t.to_f64_vec(), vec![2.5; 6]);
    let dense = Literal {
        dtype: DType::I32,
        splat: false,
        data: [1i32, -2].iter().flat_map(|x| x.to_le_bytes()).collect(),
    };
    let t = Tensor::from_literal(&dense, vec![2]).unwrap();
    assert_eq!(t.as_i32(), Some(&[1, -2][..]));
    assert!(Tensor::from_literal(&dense, vec![3]).is_err());
}

#[test]
fn le_bytes_round_trip_through_literals() {
    let datas = [
        Data::F32(vec![1.5, -0.0, f32::MAX].into()),
        Data::BF16(vec![bf16::from_f32(3.0), bf16::from_f32(-1e-3)].into()),
        Data::F16(vec![f16::from_f32(0.5), f16::from_f32(-65504.0)].into()),
        Data::F64(vec![1e300, -2.0].into()),
        Data::I1(vec![true, false, true].into()),
        Data::I8(vec![-128, 7].into()),
        Data::I16(vec![-300, 300].into()),
        Data::I32(vec![i32::MIN, 5].into()),
        Data::I64(vec![i64::MAX, -1].into()),
        Data::U8(vec![0, 255].into()),
        Data::U32(vec![u32::MAX, 1].into()),
    ];
    for d in datas {
        let n = d.len();
        let t = Tensor::new(vec![n], d).unwrap();
        let bytes = t.to_le_bytes();
        assert_eq!(bytes.len() as u64, t.size_bytes());
        let lit = Literal {
            dtype: t.dtype(),
            splat: false,
            data: bytes,
        };
        assert_eq!(Tensor::from_literal(&lit, vec![n]).unwrap(), t);
    }
}

#[test]
fn convert_semantics() {
    let d = Data::F32(vec![1.7, -1.7, f32::NAN, 3e10, -0.0].into());
    assert_eq!(
        d.convert(DType::I32),
        Data::I32(vec![1, -1, 0, i32::MAX, 0].into())
    );
    assert_eq!(
        d.convert(DType::I1),
        Data::I1(vec![true, true, true, true, false].into())
    );
    assert_eq!(
        Data::I32(vec![300, -1].into()).convert(DType::U8),
        Data::U8(vec![44, 255].into())
    );
    assert_eq!(
        Data::F32(vec![1.0 + 1.0 / 256.0].into()).convert(DType::BF16),
        Data::BF16(vec![bf16::from_f32(1.0)].into())
    );
}

/// `f32` to `bf16` is `bf16::from_f64` of the value (the rounding the generated kernels
/// replicate), whose `f64` path ignores the `f32`'s three lowest mantissa bits when it breaks
/// a tie: every sign, exponent and top-7-bit mantissa with low halves that probe the round
/// bit, the sticky bits in and out of the ignored three, subnormals and NaN payloads.
#[test]
fn f32_to_bf16_is_the_f64_conversion_bit_for_bit() {
    let lows: [u32; 16] = [
        0, 1, 2, 3, 4, 7, 8, 0x7FFF, 0x8000, 0x8001, 0x8003, 0x8004, 0x8007, 0x8008, 0xC000, 0xFFFF,
    ];
    let v: Vec<f32> = (0..=u16::MAX as u32)
        .flat_map(|hi| lows.iter().map(move |&lo| f32::from_bits(hi << 16 | lo)))
        .collect();
    let Data::BF16(got) = Data::F32(v.clone().into()).convert(DType::BF16) else {
        panic!("not bf16");
    };
    for (x, y) in v.iter().zip(got.iter()) {
        let want = bf16::from_f64(*x as f64);
        assert_eq!(y.to_bits(), want.to_bits(), "{:#010x}", x.to_bits());
    }
}

/// `convert` from `f32` to `f16` (the parallel slice conversion) is `f16::from_f32` of each
/// element, and back to `f32` is `f16::to_f32`: every sign, exponent and top-10-bit mantissa
/// with low bits probing the round bit and the sticky bits, so ties, subnormals, overflow to
/// infinity and NaN payloads; every `f16` pattern back.
#[test]
fn f32_and_f16_convert_as_half_does_bit_for_bit() {
    let lows: [u32; 8] = [0, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x3000, 0x1F_FFFF];
    let v: Vec<f32> = (0..=u16::MAX as u32)
        .flat_map(|hi| lows.iter().map(move |&lo| f32::from_bits(hi << 16 | lo)))
        .collect();
    let Data::F16(got) = Data::F32(v.clone().into()).convert(DType::F16) else {
        panic!("not f16");
    };
    for (x, y) in v.iter().zip(got.iter()) {
        let want = half::f16::from_f32(*x);
        assert_eq!(y.to_bits(), want.to_bits(), "{:#010x}", x.to_bits());
    }
    let all: Vec<half::f16> = (0..=u16::MAX).map(half::f16::from_bits).collect();
    let Data::F32(back) = Data::F16(all.clone().into()).convert(DType::F32) else {
        panic!("not f32");
    };
    for (h, x) in all.iter().zip(back.iter()) {
        assert_eq!(x.to_bits(), h.to_f32().to_bits(), "{:#06x}", h.to_bits());
    }
}

#[test]
fn new_checks_length() {
    assert!(Tensor::from_f32(vec![2, 2], vec![0.0; 3]).is_err());
    let t = Tensor::from_f32(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    assert_eq!(t.reshape(vec![4]).unwrap().shape(), &[4]);
    assert!(t.reshape(vec![3]).is_err());
}

/// Tests shapes of every rank from 0 to 7 (up to four dimensions are held inline, more on the
/// heap): a tensor made, cloned, reshaped to another rank and dropped keeps its dimensions,
/// its elements and its `Debug` form, and clones compare equal.
#[test]
fn shapes_of_every_rank_survive_clones_and_reshapes() {
    for rank in 0..8usize {
        let dims: Vec<usize> = (0..rank).map(|i| 1 + i % 3).collect();
        let n: usize = dims.iter().product();
        let v: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let t = Tensor::from_f32(dims.clone(), v.clone()).unwrap();
        assert_eq!(t.shape(), &dims[..], "rank {rank}");
        let c = t.clone();
        drop(t);
        assert_eq!(c.shape(), &dims[..], "rank {rank}");
        assert_eq!(c.as_f32(), Some(&v[..]), "rank {rank}");
        assert!(
            format!("{c:?}").contains(&format!("{dims:?}")),
            "rank {rank}: {c:?}"
        );
        // Reshaped to one more unit dimension (inline to heap at rank 4 to 5) and back.
        let mut up = dims.clone();
        up.push(1);
        let r = c.reshape(up.clone()).unwrap();
        assert_eq!(r.shape(), &up[..], "rank {rank}");
        let back = r.clone().reshape(dims.clone()).unwrap();
        assert_eq!(back, c, "rank {rank}");
        assert!(back.bits_eq(&c), "rank {rank}");
    }
}
