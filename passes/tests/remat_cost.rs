//! The recompute cost model (`ebb_passes::remat::cost::flops`): FLOPs of dot and convolution.

use ebb_ir::graph::Graph;
use ebb_ir::graph::Node;
use ebb_ir::op::Op;
use ebb_ir::op::{ConvDimensionNumbers, ConvSpec, DotDims};
use ebb_ir::DType;
use ebb_ir::{DimExpr, TensorType};
use ebb_passes::remat::cost::flops;

fn sym(s: &str) -> DimExpr {
    s.parse().unwrap()
}

#[test]
fn dot_general_is_two_mnk() {
    let mut g = Graph::new("t");
    let a = g.add_input(
        "a",
        TensorType::new(DType::F32, vec![sym("B"), sym("S"), DimExpr::constant(64)]),
    );
    let w = g.add_input("w", TensorType::fixed(DType::F32, &[64, 256]));
    let dims = DotDims::contracting(&[2], &[0]);
    let out = TensorType::new(DType::F32, vec![sym("B"), sym("S"), DimExpr::constant(256)]);
    let d = g.add_node(Node::new(Op::DotGeneral(dims), vec![out.clone()]), &[a, w]);
    assert_eq!(flops(&g, d), sym("32768*B*S"));
    let e = g.add_node(
        Node::new(Op::Tanh, vec![out.clone()]),
        &[ebb_ir::ValueRef::new(d, 0)],
    );
    assert_eq!(flops(&g, e), sym("256*B*S"));
    let r = g.add_node(
        Node::new(Op::Reshape(out.shape.clone()), vec![out]),
        &[ebb_ir::ValueRef::new(e, 0)],
    );
    assert_eq!(flops(&g, r), DimExpr::zero());
}

#[test]
fn convolution_kernel_layout() {
    let mut g = Graph::new("t");
    let x = g.add_input(
        "x",
        TensorType::new(
            DType::F32,
            vec![
                sym("B"),
                DimExpr::constant(8),
                DimExpr::constant(8),
                DimExpr::constant(3),
            ],
        ),
    );
    let k = g.add_input("k", TensorType::fixed(DType::F32, &[3, 3, 3, 16]));
    // The output-feature dimension `o` is last in this kernel layout.
    let dims = ConvDimensionNumbers::parse("[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]").unwrap();
    assert_eq!(dims.kernel_output_feature, 3);
    let spec = ConvSpec {
        window_strides: vec![1, 1],
        padding: vec![(1, 1), (1, 1)],
        lhs_dilation: vec![1, 1],
        rhs_dilation: vec![1, 1],
        dims,
        feature_group_count: 1,
        batch_group_count: 1,
        result_dtype: None,
    };
    let out = TensorType::new(
        DType::F32,
        vec![
            sym("B"),
            DimExpr::constant(8),
            DimExpr::constant(8),
            DimExpr::constant(16),
        ],
    );
    let c = g.add_node(Node::new(Op::Convolution(spec), vec![out]), &[x, k]);
    // 2 * (B*8*8*16 outputs) * (3*3*3 taps).
    assert_eq!(flops(&g, c), sym("55296*B"));
}
