//! Helpers shared by the memory and schedule tests (a module of the `integration` test crate): a small graph
//! builder with symbolic shapes, binding shorthands and a random DAG strategy for proptests.
//! Compiled on its own as well, as a test target without tests.
#![allow(dead_code)]

use ebb_ir::op::CustomCallSpec;
use ebb_ir::{Bindings, DType, Graph, Node, NodeId, Op, OpKind, TensorType, ValueRef};
pub use ebb_testkit::bs as bind;
use proptest::prelude::*;

pub use ebb_testkit::ty;

/// `f32[dims]`.
pub fn f32t(dims: &[&str]) -> TensorType {
    ty(DType::F32, dims)
}

/// Builds graphs op by op; `B` and `S` are declared with range `[1, 4096]`.
pub struct Builder {
    pub g: Graph,
}

impl Builder {
    pub fn new(name: &str) -> Self {
        let mut g = Graph::new(name);
        for s in ["B", "S"] {
            let sym = g.scope.declare(s);
            g.scope.set_range(&sym, Some(1), Some(4096));
        }
        Builder { g }
    }

    pub fn input(&mut self, name: &str, t: TensorType) -> ValueRef {
        self.g.add_input(name, t)
    }

    /// An op of the payload-free kind `kind` (`add`, `tanh`, ...) whose result type shape
    /// inference would give (`t`).
    pub fn op(&mut self, kind: OpKind, operands: &[ValueRef], t: TensorType) -> ValueRef {
        let op = Op::simple(kind).expect("a payload-free op kind");
        ValueRef::new(self.g.add_node(Node::new(op, vec![t]), operands), 0)
    }

    /// A `custom_call @target` with the given result types (any shapes).
    pub fn call(&mut self, target: &str, operands: &[ValueRef], types: Vec<TensorType>) -> NodeId {
        let op = Op::CustomCall(CustomCallSpec::new(target));
        self.g.add_node(Node::new(op, types), operands)
    }

    /// A single-result `custom_call @target`.
    pub fn call1(&mut self, target: &str, operands: &[ValueRef], t: TensorType) -> ValueRef {
        ValueRef::new(self.call(target, operands, vec![t]), 0)
    }

    pub fn outputs(&mut self, outs: &[ValueRef]) {
        let names = (0..outs.len()).map(|i| format!("out{i}")).collect();
        self.g.set_outputs(outs.to_vec(), names);
    }

    pub fn finish(self) -> Graph {
        if let Err(e) = ebb_ir::verify::verify(&self.g) {
            panic!(
                "test graph does not verify: {e}\n{}",
                ebb_ir::text::print(&self.g)
            );
        }
        self.g
    }
}

/// Shapes a random op result may have.
const SHAPES: &[&[&str]] = &[
    &["B"],
    &["B", "S"],
    &["64"],
    &["B", "S", "4"],
    &["S", "S"],
    &["256"],
    &[],
];

/// A random DAG of `custom_call`s: each op reads 1..=3 earlier values (inputs or results),
/// has 1 or 2 results of random symbolic shapes; some results (and maybe an input) are
/// outputs.
pub fn random_dag() -> impl Strategy<Value = Graph> {
    let op = (
        prop::collection::vec(any::<prop::sample::Index>(), 1..=3),
        prop::collection::vec(0..SHAPES.len(), 1..=2),
    );
    (
        1usize..=3,
        prop::collection::vec(op, 1..40),
        prop::collection::vec(any::<prop::sample::Index>(), 1..4),
    )
        .prop_map(|(n_inputs, ops, outs)| {
            let mut b = Builder::new("random");
            let mut vals: Vec<ValueRef> = (0..n_inputs)
                .map(|i| b.input(&format!("x{i}"), f32t(SHAPES[i % 3])))
                .collect();
            for (k, (reads, shapes)) in ops.iter().enumerate() {
                let mut operands: Vec<ValueRef> =
                    reads.iter().map(|ix| vals[ix.index(vals.len())]).collect();
                operands.dedup();
                let types = shapes.iter().map(|&s| f32t(SHAPES[s])).collect();
                let id = b.call(&format!("f{k}"), &operands, types);
                for r in 0..shapes.len() {
                    vals.push(ValueRef::new(id, r as u32));
                }
            }
            let mut out: Vec<ValueRef> = outs.iter().map(|ix| vals[ix.index(vals.len())]).collect();
            out.dedup();
            b.outputs(&out);
            b.finish()
        })
}

/// Random bindings with `B, S` in `1..=64`.
pub fn random_bindings() -> impl Strategy<Value = Bindings> {
    (1i64..=64, 1i64..=64).prop_map(|(b, s)| bind(b, s))
}

/// A forward/backward-shaped chain: `%3 = tanh(x @ w)` is read right away by the next layer
/// and again by the "backward" op at the end, eleven points later, saved across ten negations
/// (value 3 in the plan's table; points: `%2` is point 0, the final multiply point 13). Used by
/// the plan checker and remat candidate tests.
pub const FWD_BWD: &str = r#"graph @main {
  symbols B in [1, inf), S in [1, inf)
  %x = input {index = 0, name = "x"} : f32[B,S,64]
  %w = input {index = 1, name = "w"} : f32[64,64]
  %h1 = dot_general(%x, %w) {lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [0]} : f32[B,S,64]
  %h2 = tanh(%h1) : f32[B,S,64]
  %h3 = dot_general(%h2, %w) {lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [0]} : f32[B,S,64]
  %n1 = negate(%h3) : f32[B,S,64]
  %n2 = negate(%n1) : f32[B,S,64]
  %n3 = negate(%n2) : f32[B,S,64]
  %n4 = negate(%n3) : f32[B,S,64]
  %n5 = negate(%n4) : f32[B,S,64]
  %n6 = negate(%n5) : f32[B,S,64]
  %n7 = negate(%n6) : f32[B,S,64]
  %n8 = negate(%n7) : f32[B,S,64]
  %n9 = negate(%n8) : f32[B,S,64]
  %n10 = negate(%n9) : f32[B,S,64]
  %g = multiply(%n10, %h2) : f32[B,S,64]
  return %g as "grad"
}"#;
