//! Fuzz tests of the independent plan checker (`ebb_passes::plan::check`) against the
//! candidate generator and the memory module: random DAGs, random topological schedules,
//! random subsets of candidates taken as random allowed kinds, and deliberately corrupted plans.

use ebb_ir::graph::Node;
use ebb_ir::op::CustomCallSpec;
use ebb_ir::{DType, Graph, NodeId, Op, OpKind, ValueRef};
use ebb_passes::memory::{liveness, Schedule};
use ebb_passes::plan::{build_plan, check, resident_bytes, CheckError, PlanOptions};
use ebb_passes::remat::CandidateOptions;
use ebb_plan::format::{CandidateId, Decision, DecisionKind, Plan, Point, ValueId};
use ebb_testkit::{bs, ty};
use proptest::prelude::*;

/// One random op: a kind selector and operand selectors (indices modulo the values so far).
type OpSpec = (u8, usize, usize);

/// A random DAG over `f32[B,S]` / `bf16[B,S]` values: unary and binary elementwise ops,
/// conversions, and opaque `custom_call`s (never recomputable).
fn build(inputs: usize, ops: &[OpSpec], outputs: &[usize]) -> Graph {
    let mut g = Graph::new("fuzz");
    g.scope.declare("B");
    g.scope.declare("S");
    let mut vals: Vec<(ValueRef, DType)> = Vec::new();
    for i in 0..inputs {
        vals.push((
            g.add_input(&format!("in{i}"), ty(DType::F32, &["B", "S"])),
            DType::F32,
        ));
    }
    for &(k, a, b) in ops {
        let (x, dt) = vals[a % vals.len()];
        let same: Vec<ValueRef> = vals
            .iter()
            .filter(|(_, d)| *d == dt)
            .map(|(v, _)| *v)
            .collect();
        let y = same[b % same.len()];
        let (op, operands, out) = match k % 6 {
            0 => (Op::Negate, vec![x], dt),
            1 => (Op::Tanh, vec![x], dt),
            2 => (Op::Add, vec![x, y], dt),
            3 => (Op::Multiply, vec![x, y], dt),
            4 => {
                let to = if dt == DType::F32 {
                    DType::BF16
                } else {
                    DType::F32
                };
                (Op::Convert(to), vec![x], to)
            }
            _ => {
                let call = CustomCallSpec::new("opaque");
                (Op::CustomCall(call), vec![x], dt)
            }
        };
        let id = g.add_node(Node::new(op, vec![ty(out, &["B", "S"])]), &operands);
        vals.push((ValueRef::new(id, 0), out));
    }
    let n = vals.len();
    let mut outs = vec![vals[n - 1].0];
    for &o in outputs {
        let v = vals[inputs + o % (n - inputs)].0;
        if !outs.contains(&v) {
            outs.push(v);
        }
    }
    let names = outs.iter().map(|_| String::new()).collect();
    g.set_outputs(outs, names);
    g
}

/// A random topological order of the non-input ops: Kahn's algorithm taking the ready op with
/// the smallest key.
fn schedule(g: &Graph, keys: &[u32]) -> Schedule {
    let ops: Vec<NodeId> = g
        .order()
        .iter()
        .copied()
        .filter(|&id| g.node(id).kind() != OpKind::Input)
        .collect();
    let mut done: Vec<NodeId> = g.inputs().to_vec();
    let mut out = Vec::new();
    while out.len() < ops.len() {
        let ready = ops
            .iter()
            .enumerate()
            .filter(|(_, id)| {
                !done.contains(id) && g.operands(**id).iter().all(|v| done.contains(&v.node))
            })
            .min_by_key(|(i, _)| (keys[*i % keys.len()], *i))
            .map(|(_, id)| *id)
            .expect("a DAG always has a ready op");
        done.push(ready);
        out.push(ready);
    }
    out
}

/// Graph, schedule, plan and bindings from the random parts.
fn setup(
    inputs: usize,
    ops: &[OpSpec],
    outputs: &[usize],
    keys: &[u32],
    (min_gap, max_ops, prefetch): (usize, usize, usize),
    donate: bool,
) -> (Graph, Schedule, Plan) {
    let mut g = build(inputs, ops, outputs);
    if donate {
        // Inputs with an output of their type are donated: they die at their last read.
        ebb_passes::donate::apply(&mut g, &ebb_passes::donate::DonatePolicy::Auto)
            .expect("auto donation never fails");
        ebb_ir::verify::verify(&g).expect("a donated graph verifies");
    }
    let s = schedule(&g, keys);
    let candidates = CandidateOptions {
        min_gap,
        max_recompute_ops: max_ops,
        prefetch_distance: prefetch,
        min_bytes: 0,
        ..CandidateOptions::default()
    };
    let plan = build_plan(
        &g,
        &s,
        &PlanOptions {
            candidates,
            ..Default::default()
        },
    )
    .expect("plan builds");
    (g, s, plan)
}

/// True when the op at point `p` reads value `v` of the plan.
fn reads(g: &Graph, plan: &Plan, p: Point, v: ValueId) -> bool {
    let id = g.order()[plan.schedule[p.index()].index()];
    let pv = plan.value(v);
    g.operands(id)
        .iter()
        .any(|w| *w == ValueRef::new(g.order()[pv.node.index()], pv.output))
}

/// Inputs, ops, outputs, schedule keys and (min_gap, max_recompute_ops, prefetch_distance).
type Parts = (
    usize,
    Vec<OpSpec>,
    Vec<usize>,
    Vec<u32>,
    (usize, usize, usize),
);

fn parts() -> impl Strategy<Value = Parts> {
    (
        1usize..4,
        prop::collection::vec((any::<u8>(), any::<usize>(), any::<usize>()), 4..40),
        prop::collection::vec(any::<usize>(), 0..3),
        prop::collection::vec(any::<u32>(), 1..40),
        (1usize..5, 1usize..8, 0usize..4),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, max_global_rejects: 20_000, ..ProptestConfig::default() })]

    /// Tests that the checker accepts every plan the generator produces, with and without
    /// donated inputs, with no decision
    /// (where its resident bytes equal the memory module's) and with any subset of candidates
    /// taken as any allowed kind; and that a decision never raises the resident bytes outside
    /// its own regeneration.
    #[test]
    fn checker_accepts_generated_plans(
        (inputs, ops, outputs, keys, knobs) in parts(),
        choice in prop::collection::vec(0u8..3, 0..64),
        (b, s) in (1i64..5, 1i64..7),
        donate in any::<bool>(),
    ) {
        let (g, sched, plan) = setup(inputs, &ops, &outputs, &keys, knobs, donate);
        let bind = bs(b, s);
        let base = check(&g, &plan, &[], &bind).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&base.resident, &liveness(&g, &sched).resident_bytes(&bind).unwrap());
        prop_assert_eq!(resident_bytes(&g, &plan, &bind).unwrap(), base.resident.clone());
        let mut decisions = Vec::new();
        for (i, c) in CandidateId::all(plan.candidates.len()).zip(&plan.candidates) {
            let kind = match choice.get(i.index()).copied().unwrap_or(0) {
                1 if c.allows(DecisionKind::Recompute) => DecisionKind::Recompute,
                1 | 2 => DecisionKind::Swap,
                _ => continue,
            };
            decisions.push(Decision { candidate: i, kind });
        }
        let r = check(&g, &plan, &decisions, &bind).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (p, (&after, &before)) in r.resident.iter().zip(&base.resident).enumerate() {
            prop_assert!(after <= before, "point {}: {} > {}", p, after, before);
        }
    }

    /// Tests that the checker rejects corrupted plans: a regeneration moved past the use it
    /// serves, an eviction moved before a use, a recompute missing its first op or a listed
    /// read, a wrong live range, a disallowed kind, and a candidate taken twice.
    #[test]
    fn checker_rejects_corrupted_plans(
        (inputs, ops, outputs, keys, knobs) in parts(),
        pick in any::<usize>(),
        corruption in 0u8..7,
        (b, s) in (1i64..5, 1i64..7),
    ) {
        let (g, _, mut plan) = setup(inputs, &ops, &outputs, &keys, knobs, pick % 2 == 0);
        let bind = bs(b, s);
        prop_assume!(!plan.candidates.is_empty());
        let ci = pick % plan.candidates.len();
        let c = plan.candidates[ci].clone();
        let v = c.value;
        let kind = if c.allows(DecisionKind::Recompute) { DecisionKind::Recompute } else { DecisionKind::Swap };
        let mut decisions = vec![Decision { candidate: CandidateId::new(ci), kind }];
        let last_use = plan.value(v).last_use;
        match corruption {
            0 => {
                // Drop the regeneration before the use at `regenerate_before`.
                prop_assume!(reads(&g, &plan, c.regenerate_before, v) && c.regenerate_before < last_use);
                plan.candidates[ci].regenerate_before = last_use;
                plan.candidates[ci].prefetch_at = last_use;
                let e = check(&g, &plan, &decisions, &bind).unwrap_err();
                prop_assert!(
                    matches!(e, CheckError::UseNotResident { point, value, .. } if point == c.regenerate_before && value == v),
                    "{}", e
                );
            }
            1 => {
                // Evict one point before the use at `evict_after`.
                prop_assume!(reads(&g, &plan, c.evict_after, v) && c.evict_after > plan.value(v).def);
                plan.candidates[ci].evict_after = c.evict_after.prev().unwrap();
                let e = check(&g, &plan, &decisions, &bind).unwrap_err();
                prop_assert!(
                    matches!(e, CheckError::UseNotResident { point, value, .. } if point == c.evict_after && value == v),
                    "{}", e
                );
            }
            2 => {
                prop_assume!(kind == DecisionKind::Recompute && c.recompute.len() >= 2);
                plan.candidates[ci].recompute.remove(0);
                let e = check(&g, &plan, &decisions, &bind).unwrap_err();
                prop_assert!(matches!(e, CheckError::RegenRead { .. }), "{}", e);
            }
            3 => {
                prop_assume!(kind == DecisionKind::Recompute && !c.recompute_reads.is_empty());
                plan.candidates[ci].recompute_reads.remove(0);
                let e = check(&g, &plan, &decisions, &bind).unwrap_err();
                prop_assert!(matches!(e, CheckError::RegenRead { .. }), "{}", e);
            }
            4 => {
                prop_assume!(last_use > plan.value(v).def);
                plan.values[v.index()].last_use = last_use.prev().unwrap();
                let e = check(&g, &plan, &[], &bind).unwrap_err();
                prop_assert!(matches!(e, CheckError::LiveRange { value, .. } if value == v), "{}", e);
            }
            5 => {
                prop_assume!(!c.allows(DecisionKind::Recompute));
                decisions[0].kind = DecisionKind::Recompute;
                let e = check(&g, &plan, &decisions, &bind).unwrap_err();
                prop_assert!(matches!(e, CheckError::Decision { .. }), "{}", e);
            }
            _ => {
                decisions.push(decisions[0]);
                let e = check(&g, &plan, &decisions, &bind).unwrap_err();
                prop_assert!(matches!(e, CheckError::EvictNotResident { .. }), "{}", e);
            }
        }
    }
}
