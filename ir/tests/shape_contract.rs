//! Tests of `shape::contract` (`ir/src/shape/contract.rs`).

use ebb_ir::dim::DimExpr;
use ebb_ir::op::{ConvDimensionNumbers, ConvSpec};
use ebb_ir::types::TensorType;
use ebb_ir::{DType, Op};

/// The weight gradient of a SAME 3x3 convolution over `8*h` by `8*w` images: the kernel is
/// the activation gradient (symbolic size), the result the 3x3 filter (the sizes cancel).
#[test]
fn a_symbolic_kernel_size_cancels_in_the_weight_gradient() {
    let (h, w) = (DimExpr::sym("h"), DimExpr::sym("w"));
    let (hh, ww) = (h.checked_scale(8).unwrap(), w.checked_scale(8).unwrap());
    // x^T: [c=3, 8h, 8w, B]; dy^T: [o=16, 8h, 8w, B] as the kernel [o, 0, 1, i].
    let dn = ConvDimensionNumbers::parse("[f,0,1,b]x[i,0,1,o]->[0,1,b,f]").unwrap();
    let mut c = ConvSpec::new(dn);
    c.padding = vec![(1, 1), (1, 1)];
    let b = DimExpr::sym("B");
    let x = TensorType::new(
        DType::F32,
        vec![b.clone(), hh.clone(), ww.clone(), 3.into()],
    );
    let k = TensorType::new(DType::F32, vec![b.clone(), hh, ww, 16.into()]);
    let out = ebb_ir::shape::infer(&Op::Convolution(c), &[&x, &k], &[])
        .unwrap()
        .unwrap();
    assert_eq!(out[0].to_string(), "f32[3,3,3,16]");
}
