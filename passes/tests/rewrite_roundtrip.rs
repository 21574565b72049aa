//! Tests of the rewrite pass as a whole: the round trip through the e-graph without rules
//! gives back the same graph, shared subterms stay shared, limits stop the runner with the
//! reported reason, invalid input is refused, and (proptest) on random training-step-like
//! graphs every group keeps the result verified and numerically equal to the input while
//! never materializing more bytes under the cost model.

use crate::rewrite_util;

use ebb_ir::dim::DimExpr;
use ebb_ir::op::{BroadcastSpec, DotDims};
use ebb_ir::shape::infer;
use ebb_ir::text::print;
use ebb_ir::{DType, Graph, Literal, Node, Op, OpKind, TensorType, ValueRef};
use ebb_passes::rewrite::{rewrite, Limits, RewriteError, RuleGroup, StopReason};
use proptest::prelude::*;
use rewrite_util::eval::{assert_close, eval};
use rewrite_util::{graph, run};

/// Regions, opaque ops, a dead op, duplicates, constants and locations.
const MIXED: &str = r#"
  %0 = input {index = 0, name = "x"} : f32[B,S,64]
  %1 = input {index = 1, name = "w"} : f32[64,64]
  %2 = constant {value = dense<0.0> : f32} : f32[]
  %3 = dot_general(%0, %1) {lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [0]} : f32[B,S,64] loc("model.py:3:1")
  %4 = reduce(%3, %2) {dimensions = [2]} : f32[B,S] {
    region @body {
      %0 = input {index = 0, name = ""} : f32[]
      %1 = input {index = 1, name = ""} : f32[]
      %2 = add(%0, %1) : f32[]
      return %2
    }
  } loc("model.py:4:1")
  %5 = broadcast_in_dim(%4) {broadcast_dimensions = [0, 1], shape = dims[B, S, 64]} : f32[B,S,64]
  %6 = broadcast_in_dim(%4) {broadcast_dimensions = [0, 1], shape = dims[B, S, 64]} : f32[B,S,64]
  %7:2 = optimization_barrier(%5, %6) : f32[B,S,64], f32[B,S,64]
  %8 = subtract(%7#0, %7#1) : f32[B,S,64]
  %9 = multiply(%3, %3) : f32[B,S,64]
  %10:0 = custom_call(%9) {call_target_name = "debug_print"} : ()
  %11 = exponential(%4) : f32[B,S]
  return %8 as "y", %7#1 as "z", %0 as "x"
}"#;

#[test]
fn tests_that_no_rules_give_back_the_same_graph() {
    let g = graph(MIXED.trim_end().trim_end_matches('}'));
    let (out, rep) = run(&g, &[]);
    assert_eq!(print(&out), print(&g));
    assert_eq!(
        (rep.ops_before, rep.ops_after, rep.classes_changed),
        (g.op_count(), g.op_count(), 0)
    );
    assert_eq!(rep.stop_reason, StopReason::Saturated);
    let (out, _) = run(&g, &RuleGroup::ALL);
    assert_eq!(
        print(&out),
        print(&g),
        "no rule applies to this graph's shapes"
    );
}

#[test]
fn tests_that_merging_duplicates_shares_identical_ops() {
    let g = graph(MIXED.trim_end().trim_end_matches('}'));
    let limits = Limits {
        merge_duplicates: true,
        ..Limits::default()
    };
    let (out, _) = rewrite(&g, &[], &limits).expect("rewrite");
    assert_eq!(
        out.op_count(),
        g.op_count() - 1,
        "the two identical broadcasts become one"
    );
}

#[test]
fn tests_that_shared_subterms_stay_shared() {
    // One expensive value used by many ops, one of which is rewritten.
    let g = graph(
        r#"
  %0 = input {index = 0, name = "x"} : f32[B,S,64]
  %1 = input {index = 1, name = "w"} : f32[64,64]
  %2 = input {index = 2, name = "v"} : f32[64]
  %3 = dot_general(%0, %1) {lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [0]} : f32[B,S,64]
  %4 = broadcast_in_dim(%2) {broadcast_dimensions = [2], shape = dims[B, S, 64]} : f32[B,S,64]
  %5 = negate(%4) : f32[B,S,64]
  %6 = add(%3, %5) : f32[B,S,64]
  %7 = multiply(%3, %6) : f32[B,S,64]
  %8 = subtract(%7, %3) : f32[B,S,64]
  return %8"#,
    );
    let (out, _) = run(&g, &RuleGroup::ALL);
    let count = |k: OpKind| {
        out.order()
            .iter()
            .filter(|id| out.node(**id).kind() == k)
            .count()
    };
    assert_eq!(
        count(OpKind::DotGeneral),
        1,
        "the shared dot_general is not duplicated"
    );
    assert_eq!(
        count(OpKind::Negate),
        0,
        "add(a, negate(b)) became subtract(a, b)"
    );
    assert_eq!(out.op_count(), g.op_count() - 1);
    let b = ebb_testkit::bs(2, 3);
    assert_close(&eval(&g, &b), &eval(&out, &b));
    insta::assert_snapshot!(rewrite_util::before_after(&g, &RuleGroup::ALL));
}

/// A chain `negate(exponential(...(broadcast(x))))` that needs one iteration per op.
fn unary_chain(n: usize) -> Graph {
    let mut body = String::from(
        "  %0 = input {index = 0, name = \"x\"} : f32[64]\n  %1 = broadcast_in_dim(%0) {broadcast_dimensions = [2], shape = dims[B, S, 64]} : f32[B,S,64]\n",
    );
    for i in 0..n {
        let op = if i % 2 == 0 { "negate" } else { "abs" };
        body.push_str(&format!("  %{} = {op}(%{}) : f32[B,S,64]\n", i + 2, i + 1));
    }
    body.push_str(&format!("  return %{}", n + 1));
    graph(&body)
}

#[test]
fn tests_that_limits_stop_the_runner_and_the_result_still_verifies() {
    let g = unary_chain(6);
    let limits = Limits {
        iterations: 2,
        ..Limits::default()
    };
    let (out, rep) = rewrite(&g, &[RuleGroup::SinkBroadcast], &limits).expect("rewrite");
    assert_eq!(rep.stop_reason, StopReason::IterationLimit(2));
    assert!(rep.applied["sink-broadcast/negate"] + rep.applied["sink-broadcast/abs"] <= 2);
    ebb_ir::verify::verify(&out).expect("verifies");
    let limits = Limits {
        nodes: 1,
        ..Limits::default()
    };
    let (_, rep) = rewrite(&g, &[RuleGroup::SinkBroadcast], &limits).expect("rewrite");
    assert!(
        matches!(rep.stop_reason, StopReason::NodeLimit(n) if n > 1),
        "{:?}",
        rep.stop_reason
    );
    let (out, rep) = run(&g, &[RuleGroup::SinkBroadcast]);
    assert_eq!(rep.stop_reason, StopReason::Saturated);
    assert_eq!(
        out.order().last().map(|id| out.node(*id).kind()),
        Some(OpKind::BroadcastInDim)
    );
}

#[test]
fn tests_that_an_invalid_graph_is_refused() {
    let mut g = Graph::new("main");
    let x = g.add_input("x", TensorType::fixed(DType::F32, &[4]));
    let bad = g.add_node(
        Node::new(Op::Negate, vec![TensorType::fixed(DType::F32, &[5])]),
        &[x],
    );
    g.set_outputs(vec![ValueRef::new(bad, 0)], vec![String::new()]);
    let err = rewrite(&g, &RuleGroup::ALL, &Limits::default()).expect_err("refused");
    assert!(matches!(err, RewriteError::InvalidInput(_)), "{err}");
}

#[test]
fn tests_that_the_report_serializes() {
    let (_, mut rep) = run(&unary_chain(2), &RuleGroup::ALL);
    (rep.encode_ms, rep.saturate_ms, rep.extract_ms, rep.total_ms) = (1.5, 2.5, 3.5, 7.5);
    let json = serde_json::to_string(&rep).expect("serialize");
    let back: ebb_passes::rewrite::RewriteReport =
        serde_json::from_str(&json).expect("deserialize");
    assert_eq!(back, rep);
    assert!(json.contains("\"stop_reason\":\"saturated\""), "{json}");
}

// ---- random graphs -------------------------------------------------------------------

/// Value categories of the random graphs.
const FULL: usize = 0; // f32[B,S,64]
const ROW: usize = 1; // f32[B,S]
const VEC: usize = 2; // f32[64]
const SCALAR: usize = 3; // f32[]
const MAT: usize = 4; // f32[64,64]
const FULL_T: usize = 5; // f32[S,B,64]
const HALF: usize = 6; // bf16[B,S,64]
const ROW1: usize = 7; // f32[B,S,1]
const HALF_T: usize = 8; // bf16[S,B,64]

struct Builder {
    g: Graph,
    pools: Vec<Vec<ValueRef>>,
    zero: ValueRef,
    last: Vec<ValueRef>,
}

fn d(name: &str) -> DimExpr {
    DimExpr::sym(name)
}

fn sum_body() -> Graph {
    let mut r = Graph::new("body");
    let s = TensorType::scalar(DType::F32);
    let a = r.add_input("", s.clone());
    let b = r.add_input("", s.clone());
    let add = r.add_node(Node::new(Op::Add, vec![s]), &[a, b]);
    r.set_outputs(vec![ValueRef::new(add, 0)], vec![String::new()]);
    r
}

impl Builder {
    fn new() -> Builder {
        let mut g = Graph::new("main");
        g.scope.declare_range("B", Some(1), Some(64));
        g.scope.declare_range("S", Some(1), Some(4096));
        let f32t = |s: Vec<DimExpr>| TensorType::new(DType::F32, s);
        let c = |v: i64| DimExpr::constant(v);
        let mut pools = vec![Vec::new(); 9];
        pools[FULL].push(g.add_input("x", f32t(vec![d("B"), d("S"), c(64)])));
        pools[FULL].push(g.add_input("y", f32t(vec![d("B"), d("S"), c(64)])));
        pools[ROW].push(g.add_input("r", f32t(vec![d("B"), d("S")])));
        pools[VEC].push(g.add_input("v", f32t(vec![c(64)])));
        pools[VEC].push(g.add_input("u", f32t(vec![c(64)])));
        pools[SCALAR].push(g.add_input("n", f32t(vec![])));
        pools[MAT].push(g.add_input("w", f32t(vec![c(64), c(64)])));
        pools[FULL_T].push(g.add_input("t", f32t(vec![d("S"), d("B"), c(64)])));
        let z = g.add_node(
            Node::new(
                Op::Constant(Literal::splat_f64(DType::F32, 0.0)),
                vec![TensorType::scalar(DType::F32)],
            ),
            &[],
        );
        Builder {
            g,
            pools,
            zero: ValueRef::new(z, 0),
            last: Vec::new(),
        }
    }

    fn pick(&self, cat: usize, sel: u8) -> Option<ValueRef> {
        let p = &self.pools[cat];
        (!p.is_empty()).then(|| p[sel as usize % p.len()])
    }

    fn add(&mut self, op: Op, regions: Vec<Graph>, operands: &[ValueRef], cat: usize) {
        let types: Vec<&TensorType> = operands.iter().map(|v| self.g.value_type(*v)).collect();
        let out = infer(&op, &types, &regions)
            .expect("well-typed")
            .expect("inferred");
        let mut node = Node::new(op, out);
        node.regions = regions;
        let id = self.g.add_node(node, operands);
        let v = ValueRef::new(id, 0);
        self.pools[cat].push(v);
        self.last.push(v);
    }

    fn bcast(&mut self, x: ValueRef, dims: Vec<i64>, shape: Vec<DimExpr>, cat: usize) {
        let op = Op::BroadcastInDim(BroadcastSpec { dims, shape });
        self.add(op, vec![], &[x], cat);
    }

    fn step(&mut self, op: u8, s1: u8, s2: u8) {
        let c = DimExpr::constant;
        let full = || vec![d("B"), d("S"), c(64)];
        let bins = [Op::Add, Op::Subtract, Op::Multiply, Op::Maximum];
        let bin = bins[s2 as usize % bins.len()].clone();
        match op % 22 {
            0 => self
                .pick(VEC, s1)
                .into_iter()
                .for_each(|x| self.bcast(x, vec![2], full(), FULL)),
            1 => self
                .pick(ROW, s1)
                .into_iter()
                .for_each(|x| self.bcast(x, vec![0, 1], full(), FULL)),
            2 => self
                .pick(SCALAR, s1)
                .into_iter()
                .for_each(|x| self.bcast(x, vec![], full(), FULL)),
            3 => self
                .pick(SCALAR, s1)
                .into_iter()
                .for_each(|x| self.bcast(x, vec![], vec![d("B"), d("S")], ROW)),
            4 => self
                .pick(VEC, s1)
                .into_iter()
                .for_each(|x| self.bcast(x, vec![0], vec![c(64), c(64)], MAT)),
            5..=7 => {
                let cat = [FULL, ROW, VEC][(op % 22 - 5) as usize];
                if let (Some(a), Some(b)) = (self.pick(cat, s1), self.pick(cat, s2 / 2)) {
                    self.add(bin, vec![], &[a, b], cat);
                }
            }
            8 => {
                let cat = [FULL, ROW, ROW1][s2 as usize % 3];
                let k = if s2 & 1 == 0 { Op::Negate } else { Op::Tanh };
                self.pick(cat, s1)
                    .into_iter()
                    .for_each(|x| self.add(k.clone(), vec![], &[x], cat));
            }
            9 | 10 => {
                let (dims, cat) = if op % 22 == 9 {
                    (vec![2], ROW)
                } else {
                    (vec![0, 1], VEC)
                };
                if let Some(x) = self.pick(FULL, s1) {
                    let z = self.zero;
                    self.add(Op::Reduce(dims), vec![], &[x, z], cat);
                    let id = self.last.last().expect("added").node;
                    self.g.node_mut(id).regions = vec![sum_body()];
                }
            }
            11 | 12 => {
                if let (Some(x), Some(w)) = (self.pick(FULL, s1), self.pick(MAT, s2)) {
                    let dims = DotDims {
                        lhs_contract: vec![2],
                        rhs_contract: vec![(op % 22 - 11) as i64],
                        ..DotDims::default()
                    };
                    self.add(Op::DotGeneral(dims), vec![], &[x, w], FULL);
                }
            }
            13 => self
                .pick(MAT, s1)
                .into_iter()
                .for_each(|x| self.add(Op::Transpose(vec![1, 0]), vec![], &[x], MAT)),
            14 => self
                .pick(FULL, s1)
                .into_iter()
                .for_each(|x| self.add(Op::Transpose(vec![1, 0, 2]), vec![], &[x], FULL_T)),
            15 => self
                .pick(FULL_T, s1)
                .into_iter()
                .for_each(|x| self.add(Op::Transpose(vec![1, 0, 2]), vec![], &[x], FULL)),
            16 => self
                .pick(FULL, s1)
                .into_iter()
                .for_each(|x| self.add(Op::Convert(DType::BF16), vec![], &[x], HALF)),
            17 => self
                .pick(HALF, s1)
                .into_iter()
                .for_each(|x| self.add(Op::Convert(DType::F32), vec![], &[x], FULL)),
            18 if s2 & 1 == 0 => self
                .pick(HALF, s1)
                .into_iter()
                .for_each(|x| self.add(Op::Transpose(vec![1, 0, 2]), vec![], &[x], HALF_T)),
            18 => self.pick(HALF, s1).into_iter().for_each(|x| {
                // Widen, then move the wide copy (mixed precision): `sink_convert`'s case.
                self.add(Op::Convert(DType::F32), vec![], &[x], FULL);
                let w = *self.last.last().expect("added");
                self.add(Op::Transpose(vec![1, 0, 2]), vec![], &[w], FULL_T);
            }),
            19 if s2 & 1 == 0 => self
                .pick(HALF_T, s1)
                .into_iter()
                .for_each(|x| self.add(Op::Convert(DType::F32), vec![], &[x], FULL_T)),
            20 => {
                // Gradient accumulation: dx1 + dx2 flows on, and sum(dx1) + sum(dx2).
                if let (Some(a), Some(b)) = (self.pick(FULL, s1), self.pick(FULL, s2)) {
                    let z = self.zero;
                    self.add(Op::Add, vec![], &[a, b], FULL);
                    let mut sums = Vec::new();
                    for x in [a, b] {
                        self.add(Op::Reduce(vec![2]), vec![], &[x, z], ROW);
                        let r = *self.last.last().expect("added");
                        self.g.node_mut(r.node).regions = vec![sum_body()];
                        sums.push(r);
                    }
                    self.add(Op::Add, vec![], &sums, ROW);
                }
            }
            21 => {
                if let (Some(a), Some(b)) = (self.pick(FULL, s1), self.pick(FULL, s2)) {
                    self.add(Op::Negate, vec![], &[b], FULL);
                    let n = *self.last.last().expect("added");
                    self.add(Op::Add, vec![], &[a, n], FULL);
                }
            }
            _ => self.pick(ROW, s1).into_iter().for_each(|x| {
                self.add(Op::Reshape(vec![d("B"), d("S"), c(1)]), vec![], &[x], ROW1)
            }),
        }
    }

    fn finish(mut self, outputs: usize) -> Graph {
        let mut outs: Vec<ValueRef> = self.last.iter().rev().take(outputs).copied().collect();
        if outs.is_empty() {
            outs.push(self.pools[FULL][0]);
        }
        let names = (0..outs.len()).map(|i| format!("out{i}")).collect();
        self.g.set_outputs(outs, names);
        self.g
    }
}

fn random_graph() -> impl Strategy<Value = Graph> {
    (
        prop::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 1..40),
        1usize..4,
    )
        .prop_map(|(ops, n)| {
            let mut b = Builder::new();
            for (op, s1, s2) in ops {
                b.step(op, s1, s2);
            }
            b.finish(n)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Without rules the graph comes back unchanged.
    #[test]
    fn round_trip_without_rules_is_the_identity(g in random_graph()) {
        let (out, _) = rewrite(&g, &[], &Limits::default()).expect("rewrite");
        prop_assert_eq!(print(&out), print(&g));
    }

    /// Every group alone and all together: the result verifies (inside `rewrite`), keeps
    /// the interface, computes the same values at B=2,S=3, and costs no more bytes.
    #[test]
    fn rewriting_keeps_values_and_never_adds_bytes(g in random_graph()) {
        let b = ebb_testkit::bs(2, 3);
        let reference = eval(&g, &b);
        let mut runs: Vec<Vec<RuleGroup>> = RuleGroup::ALL.iter().map(|g| vec![*g]).collect();
        runs.push(RuleGroup::ALL.to_vec());
        for groups in runs {
            let (out, rep) = rewrite(&g, &groups, &Limits::default()).unwrap_or_else(|e| panic!("{e}\n{}", print(&g)));
            prop_assert_eq!(&out.output_names, &g.output_names);
            prop_assert_eq!(out.inputs().len(), g.inputs().len());
            assert_close(&reference, &eval(&out, &b));
            let weighted: f64 = rep.bytes_after.iter().zip(&rep.bytes_before).map(|(a, b)| *a as f64 / (*b).max(1) as f64).sum();
            prop_assert!(weighted <= rep.bytes_before.len() as f64 + 1e-9, "{:?} -> {:?}", rep.bytes_before, rep.bytes_after);
        }
    }
}

#[test]
fn tests_that_the_random_graphs_exercise_every_group() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut changed = [0usize; 4];
    for _ in 0..100 {
        let g = random_graph()
            .new_tree(&mut runner)
            .expect("tree")
            .current();
        for (k, group) in RuleGroup::ALL.iter().enumerate() {
            let (_, rep) = rewrite(&g, &[*group], &Limits::default()).expect("rewrite");
            changed[k] += (rep.classes_changed > 0) as usize;
        }
    }
    assert!(
        changed.iter().all(|c| *c > 0),
        "graphs changed per group: {changed:?}"
    );
}
