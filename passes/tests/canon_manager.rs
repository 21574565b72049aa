//! Tests of the pass manager (fixed point, `stop_after`, verification naming the pass that
//! broke the graph, pass lookup, the report) and a property test of the canonicalization
//! pipeline on random graphs (verifies, idempotent, computes the same values).

use ebb_ir::op::BroadcastSpec;
use ebb_ir::text::{parse, print};
use ebb_ir::{DType, Graph, Literal, Node, Op, TensorType, ValueRef};
use ebb_passes::canon::{self, Cse, Dce, Fold};
use ebb_passes::manager::{Pass, PassContext, PassError, PassManager, PassResult, StopReason};
use proptest::prelude::*;

/// A graph with work for every pass: constant shape math to fold, duplicates to merge, dead
/// ops to remove.
const MESSY: &str = r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[8,4]
  %n1 = dim_constant {values = dims[32]} : i32[]
  %n2 = dim_constant {values = dims[32]} : i32[]
  %f1 = convert(%n1) {dtype = f32} : f32[]
  %f2 = convert(%n2) {dtype = f32} : f32[]
  %b1 = broadcast_in_dim(%f1) {broadcast_dimensions = [], shape = dims[8, 4]} : f32[8,4]
  %b2 = broadcast_in_dim(%f2) {broadcast_dimensions = [], shape = dims[8, 4]} : f32[8,4]
  %e1 = exponential(%x) : f32[8,4]
  %e2 = exponential(%x) : f32[8,4]
  %d1 = divide(%e1, %b1) : f32[8,4]
  %d2 = divide(%e2, %b2) : f32[8,4]
  %dead = negate(%d2) : f32[8,4]
  %s = add(%d1, %d2) : f32[8,4]
  return %s
}"#;

/// (iteration, pass, changes) of every run, for snapshots without timings.
fn runs(report: &ebb_passes::manager::PassReport) -> String {
    let mut s = String::new();
    for r in &report.runs {
        s += &format!(
            "iteration {} run {} {}: {} change(s), ops {} -> {}\n",
            r.iteration, r.run, r.pass, r.result.changes, r.ops_before, r.ops_after
        );
    }
    s + &format!(
        "stop: {:?} after {} iteration(s)\n",
        report.stop_reason, report.iterations
    )
}

/// Tests that the canonicalization pipeline reaches a fixed point (the last sweep changes
/// nothing) within the iteration limit, and what it leaves.
#[test]
fn fixed_point_terminates() {
    let mut g = parse(MESSY).unwrap();
    let report = canon::pipeline(10).run(&mut g).unwrap();
    assert_eq!(report.stop_reason, StopReason::FixedPoint);
    assert!(report.iterations < 10);
    let last = report.iterations;
    assert!(report
        .runs
        .iter()
        .filter(|r| r.iteration == last)
        .all(|r| !r.result.changed));
    assert_eq!(report.ops_before, 12);
    assert_eq!(report.ops_after, report.runs.last().unwrap().ops_after);
    insta::assert_snapshot!(format!("{}\n{}", runs(&report), print(&g)));
}

/// A pass that always claims to have changed the graph (a bug the iteration limit catches).
struct Liar;
impl Pass for Liar {
    fn name(&self) -> &'static str {
        "liar"
    }
    fn run(&self, _g: &mut Graph, _cx: &mut PassContext) -> Result<PassResult, PassError> {
        Ok(PassResult::changes(1))
    }
}

/// Tests that a pass that never converges stops at the iteration limit, without an error.
#[test]
fn iteration_limit_stops_a_non_converging_pipeline() {
    let mut g = parse(MESSY).unwrap();
    let report = PassManager::new()
        .add_pass(Dce)
        .add_pass(Liar)
        .fixed_point(4)
        .run(&mut g)
        .unwrap();
    assert_eq!(report.stop_reason, StopReason::IterationLimit);
    assert_eq!(report.iterations, 4);
    assert_eq!(report.runs.len(), 8);
}

/// Tests that `stop_after(n)` runs exactly `n` passes, leaves the graph as those passes left
/// it, and says so in the report; `stop_after(0)` runs nothing.
#[test]
fn stop_after_limits_pass_runs() {
    let mut full = parse(MESSY).unwrap();
    let full_report = canon::pipeline(10).run(&mut full).unwrap();
    assert!(full_report.runs.len() > 4);

    let mut g = parse(MESSY).unwrap();
    let r = canon::pipeline(10).stop_after(Some(0)).run(&mut g).unwrap();
    assert!(r.runs.is_empty());
    assert_eq!(r.stop_reason, StopReason::StopAfter);
    assert_eq!(print(&g), print(&parse(MESSY).unwrap()));

    let mut g = parse(MESSY).unwrap();
    // Run 1 is `unroll` (nothing to do here), run 2 `fold`.
    let r = canon::pipeline(10).stop_after(Some(2)).run(&mut g).unwrap();
    assert_eq!(
        (r.runs.len(), r.runs[1].pass, r.stop_reason),
        (2, "fold", StopReason::StopAfter)
    );
    let mut only_fold = parse(MESSY).unwrap();
    Fold::default()
        .run(&mut only_fold, &mut PassContext::new())
        .unwrap();
    assert_eq!(print(&g), print(&only_fold));

    let mut g = parse(MESSY).unwrap();
    let r = canon::pipeline(10).stop_after(Some(6)).run(&mut g).unwrap();
    assert_eq!(
        r.runs
            .iter()
            .map(|r| (r.iteration, r.pass))
            .collect::<Vec<_>>(),
        vec![
            (1, "unroll"),
            (1, "fold"),
            (1, "forward_slices"),
            (1, "cse"),
            (1, "dce"),
            (2, "unroll")
        ]
    );

    let mut g = parse(MESSY).unwrap();
    let r = canon::pipeline(10)
        .stop_after(Some(1000))
        .run(&mut g)
        .unwrap();
    assert_eq!(
        r.stop_reason,
        StopReason::FixedPoint,
        "a limit that is not reached changes nothing"
    );
    assert_eq!(print(&g), print(&full));
}

/// A deliberately broken pass: makes the last op's result type wrong.
struct Breaker;
impl Pass for Breaker {
    fn name(&self) -> &'static str {
        "breaker"
    }
    fn run(&self, g: &mut Graph, _cx: &mut PassContext) -> Result<PassResult, PassError> {
        let last = *g.order().last().unwrap();
        g.node_mut(last).outputs[0] = TensorType::fixed(DType::F32, &[3]);
        Ok(PassResult::changes(1))
    }
}

/// Tests that the verifier catches a pass that breaks the graph and that the error names it,
/// with its run number; `stop_after(run - 1)` then gives the last valid graph.
#[test]
fn verifier_names_the_pass_that_broke_the_graph() {
    let mut g = parse(MESSY).unwrap();
    let err = PassManager::new()
        .add_pass(Fold::default())
        .add_pass(Cse)
        .add_pass(Breaker)
        .add_pass(Dce)
        .run(&mut g)
        .unwrap_err();
    match &err {
        PassError::Verify {
            pass,
            run,
            iteration,
            ..
        } => assert_eq!((*pass, *run, *iteration), ("breaker", 3, 1)),
        e => panic!("expected a verify error, got {e}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("pass `breaker` broke the graph (pass run 3"),
        "{msg}"
    );
    assert!(msg.contains("differ from inferred"), "{msg}");

    let mut g = parse(MESSY).unwrap();
    let ok = PassManager::new()
        .add_pass(Fold::default())
        .add_pass(Cse)
        .add_pass(Breaker)
        .stop_after(Some(2))
        .run(&mut g);
    assert!(ok.is_ok());
}

/// Tests that an input graph that does not verify is reported before any pass runs.
#[test]
fn rejects_an_invalid_input_graph() {
    let mut g = parse(MESSY).unwrap();
    Breaker.run(&mut g, &mut PassContext::new()).unwrap();
    let err = canon::pipeline(4).run(&mut g).unwrap_err();
    assert!(matches!(err, PassError::InvalidInput { .. }), "{err}");
}

/// Tests pass lookup by name (the CLI's `--passes`), unknown names included.
#[test]
fn passes_are_found_by_name() {
    let m = PassManager::from_names(&["unroll", "fold", "forward_slices", "cse", "dce"]).unwrap();
    assert_eq!(
        m.pass_names(),
        vec!["unroll", "fold", "forward_slices", "cse", "dce"]
    );
    let err = PassManager::from_names(&["dce", "hoist"]).err().unwrap();
    assert_eq!(
        err.to_string(),
        "unknown pass `hoist` (known passes: unroll, dce, cse, fold, forward_slices, donate, rewrite, \
         licm, dot_accumulate, fuse, schedule, plan)"
    );
}

/// Tests that the report serializes with per-run timing and change counts, and totals.
#[test]
fn report_serializes_with_timings_and_totals() {
    let mut g = parse(MESSY).unwrap();
    let report = canon::pipeline(10).run(&mut g).unwrap();
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["stop_reason"], "fixed_point");
    let run0 = &json["runs"][0];
    for key in [
        "run",
        "iteration",
        "pass",
        "result",
        "ops_before",
        "ops_after",
        "time_us",
        "verify_us",
    ] {
        assert!(run0.get(key).is_some(), "missing {key} in {run0}");
    }
    assert_eq!(run0["result"]["changes"], report.runs[0].result.changes);
    let totals = report.totals();
    assert_eq!(
        totals.iter().map(|t| t.pass).collect::<Vec<_>>(),
        vec!["unroll", "fold", "forward_slices", "cse", "dce"]
    );
    let changes: usize = totals.iter().map(|t| t.changes).sum();
    assert_eq!(
        changes,
        report.runs.iter().map(|r| r.result.changes).sum::<usize>()
    );
}

// ---- property test: random elementwise graphs -------------------------------------------

/// One random op over `f32[4]` values (operands index earlier values, modulo their count).
#[derive(Clone, Debug)]
enum RandOp {
    Const(u8),
    ScalarBroadcast(u8),
    Exp(usize),
    Neg(usize),
    Add(usize, usize),
    Mul(usize, usize),
    SameConvert(usize),
    SameReshape(usize),
    IdentityTranspose(usize),
}

fn rand_op() -> impl Strategy<Value = RandOp> {
    prop_oneof![
        (0u8..3).prop_map(RandOp::Const),
        (0u8..3).prop_map(RandOp::ScalarBroadcast),
        any::<usize>().prop_map(RandOp::Exp),
        any::<usize>().prop_map(RandOp::Neg),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| RandOp::Add(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| RandOp::Mul(a, b)),
        any::<usize>().prop_map(RandOp::SameConvert),
        any::<usize>().prop_map(RandOp::SameReshape),
        any::<usize>().prop_map(RandOp::IdentityTranspose),
    ]
}

fn node(op: Op, ty: TensorType) -> Node {
    Node::new(op, vec![ty])
}

/// Builds the graph: inputs `x`, `y`, then the ops; outputs are the values picked by `outs`.
fn build(ops: &[RandOp], outs: &[usize]) -> Graph {
    let v4 = TensorType::fixed(DType::F32, &[4]);
    let mut g = Graph::new("random");
    let mut vals = vec![g.add_input("x", v4.clone()), g.add_input("y", v4.clone())];
    let dims4 = vec![ebb_ir::DimExpr::constant(4)];
    for op in ops {
        let pick = |i: usize| vals[i % vals.len()];
        let (n, operands) = match *op {
            RandOp::Const(c) => (
                node(
                    Op::Constant(Literal::splat_f64(DType::F32, c as f64)),
                    v4.clone(),
                ),
                vec![],
            ),
            RandOp::ScalarBroadcast(c) => {
                let s = g.add_node(
                    node(
                        Op::Constant(Literal::splat_f64(DType::F32, c as f64)),
                        TensorType::scalar(DType::F32),
                    ),
                    &[],
                );
                (
                    node(
                        Op::BroadcastInDim(BroadcastSpec {
                            dims: vec![],
                            shape: dims4.clone(),
                        }),
                        v4.clone(),
                    ),
                    vec![ValueRef::new(s, 0)],
                )
            }
            RandOp::Exp(a) => (node(Op::Exponential, v4.clone()), vec![pick(a)]),
            RandOp::Neg(a) => (node(Op::Negate, v4.clone()), vec![pick(a)]),
            RandOp::Add(a, b) => (node(Op::Add, v4.clone()), vec![pick(a), pick(b)]),
            RandOp::Mul(a, b) => (node(Op::Multiply, v4.clone()), vec![pick(a), pick(b)]),
            RandOp::SameConvert(a) => (node(Op::Convert(DType::F32), v4.clone()), vec![pick(a)]),
            RandOp::SameReshape(a) => (node(Op::Reshape(dims4.clone()), v4.clone()), vec![pick(a)]),
            RandOp::IdentityTranspose(a) => {
                (node(Op::Transpose(vec![0]), v4.clone()), vec![pick(a)])
            }
        };
        let id = g.add_node(n, &operands);
        vals.push(ValueRef::new(id, 0));
    }
    let outputs: Vec<ValueRef> = outs.iter().map(|&i| vals[i % vals.len()]).collect();
    let names = vec![String::new(); outputs.len()];
    g.set_outputs(outputs, names);
    g
}

/// Reference interpreter for the ops of [`build`]: the outputs' values (bit patterns).
fn eval(g: &Graph, x: [f32; 4], y: [f32; 4]) -> Vec<[u32; 4]> {
    let mut env: std::collections::HashMap<ebb_ir::NodeId, [f32; 4]> = Default::default();
    for &id in g.order() {
        let n = g.node(id);
        let ops: Vec<[f32; 4]> = g.operands(id).iter().map(|v| env[&v.node]).collect();
        let map = |f: &dyn Fn(usize) -> f32| -> [f32; 4] { std::array::from_fn(f) };
        let v = match &n.op {
            Op::Input(_) => {
                if g.input_name(id) == "x" {
                    x
                } else {
                    y
                }
            }
            Op::Constant(l) => [l.get_f64(0).unwrap() as f32; 4],
            Op::BroadcastInDim(_) | Op::Convert(_) | Op::Reshape(_) | Op::Transpose(_) => {
                // A broadcast here only ever reads a scalar splat constant.
                if ops.is_empty() {
                    unreachable!()
                } else {
                    ops[0]
                }
            }
            Op::Exponential => map(&|i| ops[0][i].exp()),
            Op::Negate => map(&|i| -ops[0][i]),
            Op::Add => map(&|i| ops[0][i] + ops[1][i]),
            Op::Multiply => map(&|i| ops[0][i] * ops[1][i]),
            op => panic!("unexpected op {}", op.kind()),
        };
        env.insert(id, v);
    }
    g.outputs()
        .iter()
        .map(|v| env[&v.node].map(f32::to_bits))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Tests that on random graphs the pipeline keeps the graph valid, reaches a fixed point,
    /// is idempotent, keeps the output types and computes bit-identical outputs.
    #[test]
    fn pipeline_preserves_semantics_on_random_graphs(
        ops in prop::collection::vec(rand_op(), 1..40),
        outs in prop::collection::vec(any::<usize>(), 1..4),
    ) {
        let mut g = build(&ops, &outs);
        ebb_ir::verify::verify(&g).unwrap();
        let (x, y) = ([0.5, -1.0, 2.0, 0.0], [1.5, 3.0, -0.25, 7.0]);
        let expected = eval(&g, x, y);
        let types: Vec<TensorType> = g.outputs().iter().map(|v| g.value_type(*v).clone()).collect();
        let report = canon::pipeline(16).run(&mut g).unwrap();
        prop_assert_eq!(report.stop_reason, StopReason::FixedPoint);
        prop_assert!(report.ops_after <= report.ops_before);
        let once = print(&g);
        let again = canon::pipeline(16).run(&mut g).unwrap();
        prop_assert!(!again.changed(), "second run changed the graph: {:?}", again.runs);
        prop_assert_eq!(print(&g), once);
        let after_types: Vec<TensorType> = g.outputs().iter().map(|v| g.value_type(*v).clone()).collect();
        prop_assert_eq!(after_types, types);
        prop_assert_eq!(eval(&g, x, y), expected);
    }
}

/// Tests groups: each group runs to its own fixed point in order, run numbers continue across
/// groups, and the report lists every group with its iterations.
#[test]
fn groups_run_in_order_each_to_its_fixed_point() {
    let mut g = parse(MESSY).unwrap();
    let r = PassManager::new()
        .group("canonicalize")
        .add_pass(Fold::default())
        .add_pass(Cse)
        .add_pass(Dce)
        .fixed_point(10)
        .group("cleanup")
        .add_pass(Dce)
        .run(&mut g)
        .unwrap();
    let groups: Vec<_> = r.groups.iter().map(|g| (g.group, g.stop_reason)).collect();
    assert_eq!(
        groups,
        [
            ("canonicalize", StopReason::FixedPoint),
            ("cleanup", StopReason::Completed)
        ]
    );
    let last = r.runs.last().unwrap();
    assert_eq!(
        (last.group, last.pass, last.run),
        ("cleanup", "dce", r.runs.len())
    );
    assert_eq!(r.iterations, r.groups[0].iterations + 1);
    assert_eq!(r.stop_reason, StopReason::Completed);
}

/// Tests `StopAfter::Pass`: a pass name stops after its first run, a group name after the
/// group ends; later groups do not run.
#[test]
fn stop_after_a_pass_or_group_name() {
    use ebb_passes::manager::StopAfter;
    let two_groups = |stop: &str| {
        PassManager::new()
            .group("canonicalize")
            .add_pass(Fold::default())
            .add_pass(Cse)
            .add_pass(Dce)
            .fixed_point(10)
            .group("cleanup")
            .add_pass(Dce)
            .stop_at(Some(stop.parse::<StopAfter>().unwrap()))
    };
    let mut g = parse(MESSY).unwrap();
    let r = two_groups("cse").run(&mut g).unwrap();
    let passes: Vec<_> = r.runs.iter().map(|r| r.pass).collect();
    assert_eq!(passes, ["fold", "cse"]);
    assert_eq!(r.stop_reason, StopReason::StopAfter);

    let mut g = parse(MESSY).unwrap();
    let r = two_groups("canonicalize").run(&mut g).unwrap();
    assert!(r.runs.iter().all(|r| r.group == "canonicalize"));
    assert_eq!(r.groups.len(), 1);
    assert_eq!(r.groups[0].stop_reason, StopReason::FixedPoint);
    assert_eq!(r.stop_reason, StopReason::StopAfter);

    assert_eq!("3".parse::<StopAfter>().unwrap(), StopAfter::Runs(3));
}

/// Tests that analysis passes hand results through the context: `plan` without a `schedule`
/// before it is a clear error; with it, the plan is in the context and the graph unchanged.
#[test]
fn analysis_passes_share_results_through_the_context() {
    use ebb_passes::manager::PassContext;
    let mut g = parse(MESSY).unwrap();
    let err = PassManager::from_names(&["plan"])
        .unwrap()
        .run(&mut g)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "pass `plan` needs the schedule (run `schedule` before it)"
    );
    let before = print(&g);
    let mut cx = PassContext::new();
    let r = PassManager::from_names(&["schedule", "plan"])
        .unwrap()
        .run_in(&mut g, &mut cx)
        .unwrap();
    assert_eq!(print(&g), before, "analysis passes leave the graph alone");
    let plan = cx
        .get::<ebb_plan::format::Plan>()
        .expect("the plan pass left a plan");
    assert_eq!(r.runs[1].result.changes, plan.candidates.len());
    assert!(plan.graph_ir.is_some());
    assert!(cx.contains::<ebb_passes::schedule::Scheduled>());
}
