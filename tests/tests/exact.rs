//! Tests of the exact (MILP) mode, `ebb_plan::exact`, on real compiled fixtures and on
//! random graphs: the optimum's decisions pass the independent checker within the budget, its
//! overhead is never above the runtime's greedy finalize at the same budget and plan variant,
//! and infeasible budgets are reported as such. The ignored tests print comparison tables:
//! `exact_vs_greedy_table` (greedy vs exact on the five small fixtures, per profile and
//! budget; minutes) and
//! `candidates_vs_full_checkmate_on_the_mlp` (the candidate space vs the full Checkmate MILP;
//! minutes, CBC time limit 60 s per solve):
//! `cargo test --release -p ebb-tests --all-features --test integration exact:: -- --ignored
//! --nocapture`.

use ebb_ir::graph::Node;
use ebb_ir::op::CustomCallSpec;
use ebb_ir::{Bindings, DType, DimExpr, Graph, NodeId, Op, OpKind, TensorType};
use ebb_passes::memory::{liveness, program_order};
use ebb_passes::plan::{build_plan, check, PlanOptions};
use ebb_passes::remat::CandidateOptions;
use ebb_pipeline::Compiled;
use ebb_plan::device::DeviceProfile;
use ebb_plan::exact::{solve, solve_with_start, ExactOptions, ExactResult, ExactStatus};
use ebb_plan::finalize::{finalize, ConcretePlan, FinalizeError, FinalizeOptions};
use ebb_plan::format::{DecisionKind, Plan};
use ebb_testkit::bind;
use proptest::prelude::*;

const BOTH: [DecisionKind; 2] = [DecisionKind::Recompute, DecisionKind::Swap];

/// `name` compiled unfused, every input kept (`--fusion off --donate keep`): the configuration
/// of the greedy-vs-optimum table these tests and the documentation give.
fn compiled(name: &str) -> Compiled {
    ebb_testkit::compile_fixture(name, &ebb_testkit::unfused_options())
}

fn program_order_peak(g: &Graph, b: &Bindings) -> i64 {
    liveness(g, &program_order(g)).peak(b).unwrap().0
}

fn exact_options(
    budget: i64,
    kinds: &[DecisionKind],
    time_limit_s: f64,
    device: &DeviceProfile,
) -> ExactOptions {
    ExactOptions {
        budget,
        time_limit_s,
        device: device.clone(),
        kinds: kinds.to_vec(),
    }
}

/// Greedy finalize and the exact solve (warm-started from the greedy's decisions) on the same
/// plan variant; the exact result is checked against the independent checker.
fn compare(
    g: &Graph,
    full: &Plan,
    b: &Bindings,
    budget: i64,
    kinds: &[DecisionKind],
    time_limit_s: f64,
    device: &DeviceProfile,
) -> (Result<ConcretePlan, FinalizeError>, ExactResult) {
    let greedy = finalize(
        full,
        b,
        &FinalizeOptions {
            budget: Some(budget),
            kinds: kinds.to_vec(),
            offsets: false,
            device: device.clone(),
        },
    );
    let variant = match &greedy {
        Ok(cp) => cp.variant,
        Err(_) => full.best_variant(b).unwrap().0,
    };
    let plan = full.variant(variant).unwrap();
    let start = greedy
        .as_ref()
        .map(|cp| cp.decisions.clone())
        .unwrap_or_default();
    let r = solve_with_start(
        plan,
        b,
        &exact_options(budget, kinds, time_limit_s, device),
        &start,
    )
    .unwrap();
    if matches!(
        r.status,
        ExactStatus::Optimal | ExactStatus::Feasible { .. }
    ) {
        let report = check(g, plan, &r.decisions, b)
            .unwrap_or_else(|e| panic!("checker rejects the exact decisions: {e}"));
        assert_eq!(report.peak, r.peak_bytes, "exact peak is the checker's");
        assert!(report.peak <= budget, "{} > {budget}", report.peak);
    }
    if let Ok(cp) = &greedy {
        assert!(
            matches!(
                r.status,
                ExactStatus::Optimal | ExactStatus::Feasible { .. }
            ),
            "greedy met the budget, exact says {:?}",
            r.status
        );
        assert!(
            r.overhead_us <= cp.overhead_us + 1e-6 * cp.overhead_us.max(1.0),
            "exact {} µs > greedy {} µs",
            r.overhead_us,
            cp.overhead_us
        );
    }
    (greedy, r)
}

#[test]
fn exact_beats_or_ties_greedy_on_the_gpt_fixtures() {
    for name in ["gpt2_tiny_adamw", "gpt_block_sgd"] {
        let c = compiled(name);
        let b = bind(&[("B", 8), ("S", 256)]);
        let po = program_order_peak(&c.graph, &b);
        for frac in [0.5, 0.6] {
            let budget = (po as f64 * frac) as i64;
            let (greedy, r) = compare(
                &c.graph,
                &c.plan,
                &b,
                budget,
                &BOTH,
                60.0,
                &DeviceProfile::default(),
            );
            // The 2-layer GPT meets both budgets greedily (tests/tests/finalize.rs); where the
            // greedy cannot, `compare` still proves whatever the exact mode returns.
            if name == "gpt2_tiny_adamw" {
                assert!(greedy.is_ok(), "{name} at {frac}: greedy fails: {greedy:?}");
            }
            if greedy.is_ok() || r.status == ExactStatus::Optimal {
                assert!(!r.decisions.is_empty(), "{name} at {frac}: {:?}", r.status);
            }
        }
    }
}

#[test]
fn exact_on_the_mlp_with_each_kind() {
    let c = compiled("mlp_sgd");
    let b = bind(&[("B", 512)]);
    let po = program_order_peak(&c.graph, &b);
    for kinds in [
        vec![DecisionKind::Recompute],
        vec![DecisionKind::Swap],
        BOTH.to_vec(),
    ] {
        for frac in [0.5, 0.6, 0.8] {
            let budget = (po as f64 * frac) as i64;
            let (greedy, r) = compare(
                &c.graph,
                &c.plan,
                &b,
                budget,
                &kinds,
                60.0,
                &DeviceProfile::default(),
            );
            // Where the greedy cannot meet the budget the exact mode may still.
            if greedy.is_err() {
                assert!(
                    matches!(
                        r.status,
                        ExactStatus::Infeasible
                            | ExactStatus::Optimal
                            | ExactStatus::Feasible { .. }
                    ),
                    "{:?}",
                    r.status
                );
            }
        }
    }
}

#[test]
fn infeasible_budgets_are_reported() {
    let c = compiled("mlp_sgd");
    let b = bind(&[("B", 8)]);
    let r = solve(
        &c.plan,
        &b,
        &exact_options(1000, &BOTH, 10.0, &DeviceProfile::default()),
    )
    .unwrap();
    assert_eq!(r.status, ExactStatus::Infeasible);
    assert!(r.decisions.is_empty());
    // Below the greedy's smallest feasible budget the exact mode is infeasible too, or meets
    // a budget the greedy cannot (it never does worse).
    let smallest = match finalize(
        &c.plan,
        &b,
        &FinalizeOptions {
            budget: Some(1000),
            ..Default::default()
        },
    ) {
        Err(FinalizeError::Infeasible { smallest, .. }) => smallest,
        other => panic!("{other:?}"),
    };
    let r = solve(
        &c.plan,
        &b,
        &exact_options(smallest, &BOTH, 10.0, &DeviceProfile::default()),
    )
    .unwrap();
    assert_eq!(r.status, ExactStatus::Optimal);
    assert!(r.peak_bytes <= smallest);
}

/// A random DAG over `f32[k·B, S]` values (k in 1..=3): elementwise ops over earlier values
/// of the same size; one op in seven is an opaque `custom_call` (never recomputable).
fn random_graph(ops: &[(u8, usize, usize)]) -> Graph {
    let mut g = Graph::new("random");
    g.scope.declare("B");
    g.scope.declare("S");
    let ty = |k: i64| {
        TensorType::new(
            DType::F32,
            vec![
                DimExpr::sym("B").checked_scale(k).unwrap(),
                DimExpr::sym("S"),
            ],
        )
    };
    let mut vals: Vec<(ebb_ir::ValueRef, i64)> = (1..=3)
        .map(|k| (g.add_input(&format!("in{k}"), ty(k)), k))
        .collect();
    for &(k, a, b) in ops {
        let (x, scale) = vals[a % vals.len()];
        let same: Vec<_> = vals.iter().filter(|v| v.1 == scale).map(|v| v.0).collect();
        let y = same[b % same.len()];
        let (op, operands) = match k % 7 {
            0 => (Op::Tanh, vec![x]),
            1 => (Op::Exponential, vec![x]),
            2 => (Op::Add, vec![x, y]),
            3 => (Op::Multiply, vec![x, y]),
            4 => (Op::Subtract, vec![y, x]),
            5 => (Op::Maximum, vec![x, y]),
            _ => (Op::CustomCall(CustomCallSpec::new("opaque")), vec![x]),
        };
        let id = g.add_node(Node::new(op, vec![ty(scale)]), &operands);
        vals.push((ebb_ir::ValueRef::new(id, 0), scale));
    }
    let last = vals[vals.len() - 1].0;
    g.set_outputs(vec![last], vec![String::new()]);
    g
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Tests that on random graphs the exact optimum is never worse than the greedy finalize
    /// and its decisions always pass the checker within the budget.
    #[test]
    fn exact_never_worse_than_greedy(
        ops in prop::collection::vec((any::<u8>(), any::<usize>(), any::<usize>()), 6..40),
        (bv, sv) in (1i64..5, 1i64..9),
        frac in 0.3f64..1.0,
        kinds in 0usize..3,
        link in prop::sample::select(vec![25e3, 1e2, 1.0]),
    ) {
        // 1 FLOP/µs, memory traffic free: costs are FLOPs; the link in bytes/µs.
        let device = DeviceProfile {
            name: "unit".into(),
            matrix_flops: 1e6,
            matrix_half_flops: 1e6,
            vector_flops: 1e6,
            memory_bandwidth: 1e300,
            link_bandwidth: link * 1e6,
            memory_bytes: 0,
            source: "tests".into(),
        };
        let g = random_graph(&ops);
        let sched: Vec<NodeId> = g
            .order()
            .iter()
            .copied()
            .filter(|&id| g.node(id).kind() != OpKind::Input)
            .collect();
        let candidates = CandidateOptions { min_gap: 1, min_bytes: 0, ..Default::default() };
        let plan = build_plan(&g, &sched, &PlanOptions { candidates, ..Default::default() })
            .unwrap();
        let b = bind(&[("B", bv), ("S", sv)]);
        let peak = check(&g, &plan, &[], &b).unwrap().peak;
        let kinds = match kinds {
            0 => vec![DecisionKind::Recompute],
            1 => vec![DecisionKind::Swap],
            _ => BOTH.to_vec(),
        };
        // `compare` asserts checker validity and exact <= greedy.
        let _ = compare(&g, &plan, &b, (peak as f64 * frac) as i64, &kinds, 30.0, &device);
    }
}

/// The small fixtures of the near-optimality target, each at one shape.
const SMALL: [(&str, &[(&str, i64)]); 5] = [
    ("mlp_sgd", &[("B", 4096)]),
    ("mlp_bf16", &[("B", 8192)]),
    ("cnn_sgd", &[("B", 256)]),
    ("gpt_block_sgd", &[("B", 16), ("S", 512)]),
    ("gpt2_tiny_adamw", &[("B", 8), ("S", 256)]),
];

/// The profiles of the near-optimality target: the measured `cpu` and two accelerators.
fn target_profiles() -> Vec<DeviceProfile> {
    vec![
        ebb_runtime::device::cpu(),
        DeviceProfile::a100_40g_pcie4(),
        DeviceProfile::h100_sxm_pcie5(),
    ]
}

/// Greedy against the optimum at one (fixture, shape, profile, budget).
struct GapRow {
    fixture: &'static str,
    shape: String,
    device: String,
    /// How the budget was chosen: `40%` of the scheduled peak, or `lb+50%` (the lower bound
    /// plus half the distance to the scheduled peak).
    label: String,
    budget: i64,
    step_us: f64,
    greedy_us: Option<f64>,
    exact_us: Option<f64>,
    status: ExactStatus,
    solve_ms: f64,
}

impl GapRow {
    /// (greedy − optimum) / (step + optimum): the greedy's step-time loss; infinite when only
    /// the exact mode meets the budget, 0 when neither does.
    fn gap(&self) -> f64 {
        match (self.greedy_us, self.exact_us) {
            (Some(g), Some(o)) => (g - o) / (self.step_us + o).max(f64::MIN_POSITIVE),
            (None, Some(_)) => f64::INFINITY,
            _ => 0.0,
        }
    }
}

/// `plan` finalized at `b` on `device` without a budget or offsets: the scheduled peak and the
/// modelled step.
fn unbudgeted(plan: &Plan, b: &Bindings, device: &DeviceProfile) -> ConcretePlan {
    finalize(
        plan,
        b,
        &FinalizeOptions {
            offsets: false,
            device: device.clone(),
            ..Default::default()
        },
    )
    .unwrap()
}

/// The greedy and the ILP on every small fixture × profile × budget, both kinds allowed.
/// Budgets: `fracs` of the scheduled peak, and the lower bound plus `above_lb` of the way to
/// the scheduled peak (on the MLPs and the CNN one op's operands and results alone exceed 60%
/// of the scheduled peak, so only these budgets leave the decisions something to do).
fn gap_matrix(fracs: &[f64], above_lb: &[f64], time_limit_s: f64) -> Vec<GapRow> {
    let mut rows = Vec::new();
    let profiles = target_profiles();
    for (fixture, shape) in SMALL {
        let c = compiled(fixture);
        let b = bind(shape);
        let show: Vec<String> = shape.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let lower = ebb_passes::memory::lower_bound(&c.graph, &b).unwrap();
        for device in &profiles {
            let unbudgeted = unbudgeted(&c.plan, &b, device);
            let sched = unbudgeted.peak_bytes_scheduled;
            let budgets = fracs
                .iter()
                .map(|f| (format!("{:.0}%", 100.0 * f), (sched as f64 * f) as i64))
                .chain(above_lb.iter().map(|f| {
                    let x = lower as f64 + f * (sched - lower) as f64;
                    (format!("lb+{:.0}%", 100.0 * f), x as i64)
                }));
            for (label, budget) in budgets {
                let (greedy, r) =
                    compare(&c.graph, &c.plan, &b, budget, &BOTH, time_limit_s, device);
                let solved = matches!(
                    r.status,
                    ExactStatus::Optimal | ExactStatus::Feasible { .. }
                );
                rows.push(GapRow {
                    fixture,
                    shape: show.join(","),
                    device: device.name.to_string(),
                    label,
                    budget,
                    step_us: unbudgeted.step_us,
                    greedy_us: greedy.as_ref().ok().map(|g| g.overhead_us),
                    exact_us: solved.then_some(r.overhead_us),
                    status: r.status,
                    solve_ms: r.solve_ms,
                });
            }
        }
    }
    rows
}

/// The near-optimality target: on every small fixture, at 40%, 50% and 60% of the scheduled
/// peak (and at two budgets between the lower bound and the scheduled peak), on the `cpu`,
/// `a100-40g-pcie4` and `h100-sxm-pcie5` profiles, the greedy's added step time is within 5%
/// of the ILP optimum's, and it meets every budget the optimum meets.
#[test]
fn greedy_is_within_five_percent_of_the_optimum() {
    let rows = gap_matrix(&[0.4, 0.5, 0.6], &[0.2, 0.5], 10.0);
    let bad: Vec<String> = rows
        .iter()
        .filter(|r| r.gap() > 0.05)
        .map(|r| {
            format!(
                "{} {} on {} at {}: greedy {:?} µs, optimum {:?} µs, step {:.1} µs",
                r.fixture, r.shape, r.device, r.label, r.greedy_us, r.exact_us, r.step_us
            )
        })
        .collect();
    assert!(bad.is_empty(), "greedy gap > 5%:\n{}", bad.join("\n"));
}

/// Prints the greedy against the optimum on the small fixtures, per profile and budget.
#[test]
#[ignore = "prints a table (slow); run with --ignored --nocapture"]
fn exact_vs_greedy_table() {
    println!("| fixture | shape | device | budget | step µs | greedy µs | optimum µs | gap % | status | solve ms |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in gap_matrix(&[0.4, 0.5, 0.6], &[0.2, 0.5], 60.0) {
        let us = |x: Option<f64>| x.map_or("infeasible".to_string(), |x| format!("{x:.2}"));
        println!(
            "| {} | {} | {} | {} = {:.2} MiB | {:.1} | {} | {} | {:.2} | {:?} | {:.0} |",
            r.fixture,
            r.shape,
            r.device,
            r.label,
            r.budget as f64 / 1048576.0,
            r.step_us,
            us(r.greedy_us),
            us(r.exact_us),
            100.0 * r.gap(),
            r.status,
            r.solve_ms
        );
    }
}

/// Prints the candidate-restricted optimum (recompute only) against the full Checkmate MILP
/// (every op recomputable, same schedule) on the MLP fixture.
#[test]
#[ignore = "prints a table (slow); run with --ignored --nocapture"]
fn candidates_vs_full_checkmate_on_the_mlp() {
    use ebb_passes::exact::checkmate::{solve_checkmate, CheckmateOptions};
    let c = compiled("mlp_sgd");
    println!("| shape | budget | candidates µs | status | full Checkmate µs | status | gap % | vars | rows | solve ms |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for shape in [&[("B", 8)][..], &[("B", 512)][..]] {
        let b = bind(shape);
        let plan = &c.plan;
        let sched: Vec<NodeId> = plan
            .schedule
            .iter()
            .map(|&pos| c.graph.order()[pos.index()])
            .collect();
        let peak = check(&c.graph, plan, &[], &b).unwrap().peak;
        for frac in [0.95, 0.9, 0.8, 0.7] {
            let budget = (peak as f64 * frac) as i64;
            // 1 TFLOP/s on every unit and free memory traffic: the full Checkmate MILP prices
            // a recompute by FLOPs alone, so the candidate space is priced the same way.
            let device = DeviceProfile {
                name: "flops-only".into(),
                matrix_flops: 1e12,
                matrix_half_flops: 1e12,
                vector_flops: 1e12,
                memory_bandwidth: 1e300,
                ..DeviceProfile::default()
            };
            let ours = solve(plan, &b, &exact_options(budget, &BOTH[..1], 60.0, &device)).unwrap();
            let full = solve_checkmate(
                &c.graph,
                &sched,
                &b,
                &CheckmateOptions {
                    budget,
                    time_limit_s: 60.0,
                    flops_per_us: device.matrix_flops / 1e6,
                },
            )
            .unwrap();
            let st = |s: ExactStatus| match s {
                ExactStatus::Optimal => ("optimal".to_string(), 0.0),
                ExactStatus::Feasible { gap } => ("feasible".to_string(), gap),
                ExactStatus::Infeasible => ("infeasible".to_string(), 0.0),
                ExactStatus::TimedOut => ("timed out".to_string(), 0.0),
            };
            let shape: Vec<String> = shape.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!(
                "| {} | {:.0}% of scheduled = {:.2} MiB | {:.3} | {} | {:.3} | {} | {:.2} | {} | {} | {:.0} |",
                shape.join(","),
                frac * 100.0,
                budget as f64 / 1048576.0,
                ours.overhead_us,
                st(ours.status).0,
                full.overhead_us,
                st(full.status).0,
                st(full.status).1 * 100.0,
                full.variables,
                full.constraints,
                full.solve_ms
            );
        }
    }
}

/// Where swaps saturate the link (an H100's compute behind a link 16× slower than PCIe 5,
/// `custom:flops=495T,hbm=3.35T,link=4G`: exposed transfers are most of the added time), the
/// greedy stays within 5% of the step of the optimum on the 2-layer GPT at 40–60% of the
/// scheduled peak (measured: 0.0–1.3%).
#[test]
fn greedy_stays_near_the_optimum_on_a_saturated_link() {
    let c = compiled("gpt2_tiny_adamw");
    let b = bind(&[("B", 8), ("S", 256)]);
    let device = DeviceProfile::named("custom:flops=495T,hbm=3.35T,link=4G").unwrap();
    let sched = unbudgeted(&c.plan, &b, &device);
    let mut rows = Vec::new();
    for frac in [0.4, 0.5, 0.6] {
        let budget = (sched.peak_bytes_scheduled as f64 * frac) as i64;
        let (greedy, r) = compare(&c.graph, &c.plan, &b, budget, &BOTH, 20.0, &device);
        let greedy = greedy.unwrap();
        assert!(matches!(
            r.status,
            ExactStatus::Optimal | ExactStatus::Feasible { .. }
        ));
        let gap = (greedy.overhead_us - r.overhead_us) / sched.step_us;
        println!(
            "{frac}: greedy {:.1} µs (exposed {:.1}), optimum {:.1} µs, step {:.1} µs, gap {:.2}%",
            greedy.overhead_us,
            greedy.exposed_transfer_us,
            r.overhead_us,
            sched.step_us,
            100.0 * gap
        );
        rows.push((frac, gap));
    }
    for (frac, gap) in rows {
        assert!(
            gap <= 0.05,
            "{frac}: greedy {:.1}% of the step above the optimum",
            100.0 * gap
        );
    }
}
