//! The scheduler's size keys (`ebb_passes::schedule::context::Ctx`) against proven orderings.

use ebb_ir::graph::Graph;
use ebb_ir::op::CustomCallSpec;
use ebb_ir::{DType, DimExpr, Node, Op, TensorType};
use ebb_passes::schedule::context::Ctx;

/// Tests that size keys agree with every ordering the prover establishes.
#[test]
fn keys_agree_with_proven_orderings() {
    let mut g = Graph::new("keys");
    let b = g.scope.declare("B");
    let s = g.scope.declare("S");
    g.scope.set_range(&s, None, Some(1024));
    let shapes = [
        "B",
        "S",
        "B*S",
        "64",
        "4096",
        "B*S*S",
        "2*B + 3",
        "S*S",
        "floordiv(S, 2)",
        "min(B, 8)",
    ];
    let x = g.add_input("x", TensorType::scalar(DType::F32));
    let call = Op::CustomCall(CustomCallSpec::new("f"));
    let types: Vec<TensorType> = shapes
        .iter()
        .map(|d| TensorType::new(DType::F32, vec![d.parse::<DimExpr>().unwrap()]))
        .collect();
    g.add_node(Node::new(call, types.clone()), &[x]);
    let ctx = Ctx::new(&g, 8, &[]);
    assert!(ctx.samples.len() >= 4);
    let key = |i: usize| ctx.value_key[i + 1];
    let mut proven = 0;
    for i in 0..types.len() {
        for j in 0..types.len() {
            let o = g
                .scope
                .compare(&types[i].size_bytes(), &types[j].size_bytes());
            if o.is_le() {
                proven += 1;
                assert!(
                    key(i) <= key(j),
                    "{} <= {} proven but keys {} > {}",
                    shapes[i],
                    shapes[j],
                    key(i),
                    key(j)
                );
            }
        }
    }
    assert!(
        proven > types.len(),
        "some non-trivial orderings are proven"
    );
    let _ = b;
}
