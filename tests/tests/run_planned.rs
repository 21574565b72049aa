//! Executing finalized plans: under a budget the executor performs the evictions, recomputes
//! and swaps; its measured peak equals the plan's and the outputs are bit-identical to the
//! run without decisions (on the 2-layer GPT at B=8, S=256 among others).
//! Budgeted runs are arena-backed (every result at its planned offset) and compared with a run
//! on heap buffers.

use ebb_ir::{Bindings, OpKind};
use ebb_pipeline::{self as pipeline, CompileOptions};
use ebb_plan::finalize::{FinalizeError, FinalizeOptions};
use ebb_plan::format::{DecisionKind, Plan};
use ebb_runtime::inputs::random_inputs;
use ebb_runtime::{Runtime, RuntimeError, Tensor};
use ebb_testkit::unfused_options;

/// Compiles a JAX fixture by name, or an ONNX fixture given as `onnx/NAME`, unfused with every
/// input kept (`--fusion off --donate keep`: the configuration these tests' budgets were set
/// in; `donation_fixtures` runs the default, fused and donated, plans).
fn compile(name: &str) -> Plan {
    compile_with(name, &unfused_options())
}

fn compile_with(name: &str, opts: &CompileOptions) -> Plan {
    ebb_testkit::compile_fixture(name, opts).plan
}

fn program_order_peak(plan: &Plan, b: &Bindings) -> i64 {
    pipeline::plan_report(plan, b, None)
        .unwrap()
        .peak_bytes_program_order
}

fn runtime(plan: &Plan, budget: Option<i64>, kinds: &[DecisionKind]) -> Runtime {
    let opts = FinalizeOptions {
        budget,
        kinds: kinds.to_vec(),
        ..Default::default()
    };
    Runtime::with_options(plan.clone(), opts, 8).unwrap()
}

fn assert_bit_identical(a: &[Tensor], b: &[Tensor]) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(x.bits_eq(y), "output {i} differs");
    }
}

/// Runs `name` at `bind` without a budget and under `fraction` of the program-order peak (or
/// the smallest feasible budget when that is infeasible) for each decision-kind set; returns
/// (budget, recompute FLOPs / step FLOPs) of the run with both kinds.
fn run_fixture(name: &str, bind: &str, fraction: f64) -> (i64, f64) {
    run_plan(name, compile(name), bind, fraction)
}

fn run_plan(name: &str, plan: Plan, bind: &str, fraction: f64) -> (i64, f64) {
    let b = pipeline::parse_bindings(bind).unwrap();
    let inputs = random_inputs(
        &Runtime::new(plan.clone(), None).unwrap().graph().clone(),
        &b,
        7,
    )
    .unwrap();
    // The reference: no decisions, results on the heap.
    let mut heap = runtime(&plan, None, &[]);
    heap.set_arena_backed(false);
    let free = heap.step(&b, inputs.clone()).unwrap();
    assert!(!free.report.arena_backed);
    assert_eq!(
        free.report.measured_peak_bytes as i64,
        free.report.peak_bytes_scheduled
    );
    let po = program_order_peak(&plan, &b);
    let mut result = (0, 0.0);
    for kinds in [
        vec![DecisionKind::Recompute, DecisionKind::Swap],
        vec![DecisionKind::Recompute],
        vec![DecisionKind::Swap],
    ] {
        let mut budget = (po as f64 * fraction) as i64;
        let mut rt = runtime(&plan, Some(budget), &kinds);
        let out = match rt.step(&b, inputs.clone()) {
            Err(RuntimeError::Finalize(FinalizeError::Infeasible { smallest, .. })) => {
                budget = smallest;
                rt.set_budget(Some(budget));
                rt.step(&b, inputs.clone()).unwrap()
            }
            r => r.unwrap(),
        };
        let r = &out.report;
        assert!(
            r.peak_bytes_planned <= budget,
            "{name} {kinds:?}: planned {} > budget {budget}",
            r.peak_bytes_planned
        );
        assert_eq!(r.measured_peak_bytes as i64, r.peak_bytes_planned);
        // Arena-backed: every result at its planned offset, no claim refused, the measured
        // high-water mark within the layout's size.
        assert!(r.arena_backed);
        assert_eq!(r.arena_unplaced_bytes, 0, "{name} {kinds:?}");
        assert_eq!(r.arena_usage.refused, 0, "{name} {kinds:?}");
        assert!(r.arena_usage.high_water_bytes as i64 <= r.arena_bytes);
        assert!(r.arena_direct_bytes + r.arena_copied_bytes > 0);
        if budget < free.report.peak_bytes_scheduled {
            assert!(r.recompute_decisions + r.swap_decisions > 0);
        }
        assert_bit_identical(&free.outputs, &out.outputs);
        // The same shape again comes from the cache and gives the same bits (in a second
        // arena: the first holds `out`'s outputs).
        let again = rt.step(&b, inputs.clone()).unwrap();
        assert!(again.report.cache_hit);
        assert_bit_identical(&free.outputs, &again.outputs);
        let overhead = r.recompute_flops as f64 / r.step_flops.max(1) as f64;
        eprintln!(
            "{name} {bind} {kinds:?}: program order {po}, scheduled {}, budget {budget}, planned {} = measured {}, {} recompute + {} swap, recompute {:.2}% of step FLOPs, host peak {}",
            r.peak_bytes_scheduled,
            r.peak_bytes_planned,
            r.measured_peak_bytes,
            r.recompute_decisions,
            r.swap_decisions,
            100.0 * overhead,
            r.host_peak_bytes
        );
        if kinds.len() == 2 {
            result = (budget, overhead);
        }
    }
    result
}

#[test]
fn gpt2_tiny_at_half_of_program_order_peak_runs_bit_identical() {
    let plan = compile("gpt2_tiny_adamw");
    let b = pipeline::parse_bindings("B=8,S=256").unwrap();
    let po = program_order_peak(&plan, &b);
    let (budget, overhead) = run_fixture("gpt2_tiny_adamw", "B=8,S=256", 0.5);
    assert_eq!(budget, po / 2, "50% of program order must be feasible");
    assert!(overhead <= 0.15, "recompute overhead {overhead:.3} > 15%");
}

#[test]
fn onnx_gpt_steps_at_half_of_program_order_peak_run_bit_identical() {
    for name in [
        "onnx/torch_gpt2_tiny_sgd",
        "onnx/torch_gpt2_tiny_adam",
        "onnx/torch_gpt2_tiny_ce_adam",
        "onnx/ort_gpt2_tiny_training",
    ] {
        let plan = compile(name);
        let b = pipeline::parse_bindings("batch=8,seq=128").unwrap();
        let po = program_order_peak(&plan, &b);
        let (budget, _) = run_fixture(name, "batch=8,seq=128", 0.5);
        assert_eq!(
            budget,
            po / 2,
            "{name}: 50% of program order must be feasible"
        );
    }
}

/// On the MLPs, parameters and optimizer state dominate: half the program-order peak is below
/// the lower bound (inputs + the largest op), so no plan can meet it; they run at the smallest
/// feasible budget instead.
#[test]
fn onnx_mlp_steps_run_bit_identical_at_their_smallest_feasible_budget() {
    for name in [
        "onnx/torch_mlp_sgd",
        "onnx/torch_mlp_adam",
        "onnx/ort_mlp_training",
    ] {
        let plan = compile(name);
        let b = pipeline::parse_bindings("batch=512").unwrap();
        let r = pipeline::plan_report(&plan, &b, None).unwrap();
        assert!(
            r.lower_bound_bytes > r.peak_bytes_program_order / 2,
            "{name}"
        );
        run_fixture(name, "batch=512", 0.5);
    }
}

/// The ORT CNN (`Conv`/`ConvGrad`, `MaxPool`/`MaxPoolGrad` as `select_and_scatter`): the
/// pooling gradient's operands and result put the lower bound above half the program-order
/// peak, so it runs at its smallest feasible budget.
#[test]
fn ort_cnn_runs_bit_identical_at_its_smallest_feasible_budget() {
    let name = "onnx/ort_cnn_training";
    let plan = compile(name);
    let b = pipeline::parse_bindings("batch=64").unwrap();
    let r = pipeline::plan_report(&plan, &b, None).unwrap();
    assert!(r.lower_bound_bytes > r.peak_bytes_program_order / 2);
    let (budget, _) = run_fixture(name, "batch=64", 0.5);
    assert!(
        budget < r.peak_bytes_scheduled,
        "decisions must lower the peak"
    );
}

/// A transformer with training-mode dropout (ORT's `Dropout`/`DropoutGrad`; the masks are
/// `rng_bit_generator` bits from the `ebb.rng_seed` input): half the program-order peak is
/// feasible, and recomputed masks equal the originals (bit-identical outputs).
#[test]
fn ort_dropout_transformer_runs_bit_identical_under_half_its_program_order_peak() {
    let name = "onnx/ort_gpt2_tiny_dropout_training";
    let plan = compile(name);
    let po = program_order_peak(&plan, &pipeline::parse_bindings("batch=4,seq=64").unwrap());
    let (budget, _) = run_fixture(name, "batch=4,seq=64", 0.5);
    assert_eq!(budget, po / 2, "50% of program order must be feasible");
}

/// Images of any size that is a multiple of 8 (`(B, 8*h, 8*w, 3)`): the symbols are `B, h,
/// w` and the input is `8*h` by `8*w`. Half the program-order peak is below the lower bound
/// (the largest convolution's operands and result), so the run is at the smallest feasible
/// budget, within 0.1% of the lower bound.
#[test]
fn polymorphic_image_cnn_imports_named_and_runs_at_its_lower_bound() {
    let (g, stats) =
        ebb_import::stablehlo::import_file(&ebb_testkit::jax_fixture("cnn_poly_sgd")).unwrap();
    assert_eq!(stats.unresolved_dims, 0);
    let syms: Vec<String> = g.scope.symbols().iter().map(|s| s.to_string()).collect();
    assert_eq!(syms, ["B", "h", "w"]);
    let x = g.value_type(ebb_ir::ValueRef::new(g.inputs()[6], 0));
    assert_eq!(x.to_string(), "f32[B,8*h,8*w,3]");
    let plan = compile("cnn_poly_sgd");
    let b = pipeline::parse_bindings("B=64,h=4,w=4").unwrap();
    let r = pipeline::plan_report(&plan, &b, None).unwrap();
    assert!(r.lower_bound_bytes > r.peak_bytes_program_order / 2);
    let (budget, _) = run_fixture("cnn_poly_sgd", "B=64,h=4,w=4", 0.5);
    let lb = r.lower_bound_bytes;
    assert!(
        budget >= lb && budget as f64 <= lb as f64 * 1.001,
        "smallest feasible {budget} vs lower bound {lb}"
    );
}

#[test]
fn mlp_runs_bit_identical_under_a_budget() {
    run_fixture("mlp_sgd", "B=64", 0.6);
}

/// The scan over layers kept as `while` loops (`--unroll off`): the loops are planned whole.
#[test]
fn while_loop_fixture_runs_bit_identical_under_a_budget() {
    let opts = CompileOptions {
        keep_loops: true,
        ..unfused_options()
    };
    let plan = compile_with("gpt2_tiny_scan", &opts);
    let g = pipeline::plan_graph(&plan).unwrap();
    assert!(g
        .order()
        .iter()
        .any(|&id| g.node(id).kind() == OpKind::While));
    run_plan("gpt2_tiny_scan", plan, "B=4,S=64", 0.6);
}

/// The scan over layers unrolled (the default): half the program-order peak is feasible at
/// B=8, S=256, the runs are bit-identical, and the plan holds no loop.
#[test]
fn unrolled_scan_fixture_runs_bit_identical_under_half_its_program_order_peak() {
    let plan = compile("gpt2_tiny_scan");
    let g = pipeline::plan_graph(&plan).unwrap();
    assert!(g
        .order()
        .iter()
        .all(|&id| g.node(id).kind() != OpKind::While));
    let (budget, _) = run_plan("gpt2_tiny_scan", plan.clone(), "B=8,S=256", 0.5);
    let b = pipeline::parse_bindings("B=8,S=256").unwrap();
    assert!(budget as f64 <= 0.5 * program_order_peak(&plan, &b) as f64);
}

/// A scan over a symbolic length (the Mamba-style S6 recurrence, `while` loops with trip count
/// `S`, forward and backward): the loops' inputs, returned unchanged by their bodies, share
/// their operands' buffers, so half the program-order peak is feasible at B=8, S=64 and the
/// runs are bit-identical.
#[test]
fn symbolic_scan_fixture_runs_bit_identical_under_half_its_program_order_peak() {
    let plan = compile("mamba_ssm");
    let g = pipeline::plan_graph(&plan).unwrap();
    assert!(g
        .order()
        .iter()
        .any(|&id| g.node(id).kind() == OpKind::While));
    let (budget, _) = run_plan("mamba_ssm", plan.clone(), "B=8,S=64", 0.5);
    let b = pipeline::parse_bindings("B=8,S=64").unwrap();
    assert!(budget as f64 <= 0.5 * program_order_peak(&plan, &b) as f64);
}

/// Dropout (threefry `while` loops, `ui64`, `bitcast_convert`) and a `lax.cond` gradient
/// clip (`case`): half the program-order peak is feasible and the runs are bit-identical.
#[test]
fn dropout_and_cond_fixture_runs_bit_identical_under_half_its_program_order_peak() {
    let name = "gpt2_tiny_dropout";
    let plan = compile(name);
    let po = program_order_peak(&plan, &pipeline::parse_bindings("B=4,S=128").unwrap());
    let (budget, _) = run_fixture(name, "B=4,S=128", 0.5);
    assert_eq!(budget, po / 2, "50% of program order must be feasible");
}

/// Batch norm in training mode: half the program-order peak is feasible at B=32.
#[test]
fn batch_norm_resnet_runs_bit_identical_under_half_its_program_order_peak() {
    let plan = compile("resnet_bn");
    let po = program_order_peak(&plan, &pipeline::parse_bindings("B=32").unwrap());
    let (budget, _) = run_fixture("resnet_bn", "B=32", 0.5);
    assert_eq!(budget, po / 2, "50% of program order must be feasible");
}

#[test]
fn wrong_inputs_are_an_error_not_a_panic() {
    let plan = compile("mlp_sgd");
    let b = pipeline::parse_bindings("B=16").unwrap();
    let mut rt = Runtime::new(plan, None).unwrap();
    let bad = random_inputs(rt.graph(), &pipeline::parse_bindings("B=8").unwrap(), 1).unwrap();
    let e = rt.step(&b, bad).err().expect("mismatched inputs must fail");
    assert!(e.to_string().contains("expected"), "{e}");
}

/// A runtime keeps what a step prepared at a shape (the program, its events and arena
/// offsets) for the next steps at that shape: steps at shapes A, A, B, A under a budget give
/// the bits, the decisions and the measured peak of a fresh runtime's first step at each.
#[test]
fn steps_at_a_repeated_shape_give_the_bits_and_peak_of_a_fresh_step() {
    let plan = compile("gpt2_tiny_adamw");
    let kinds = [DecisionKind::Recompute, DecisionKind::Swap];
    let a = pipeline::parse_bindings("B=8,S=64").unwrap();
    let other = pipeline::parse_bindings("B=2,S=16").unwrap();
    let graph = Runtime::new(plan.clone(), None).unwrap().graph().clone();
    let (in_a, in_other) = (
        random_inputs(&graph, &a, 3).unwrap(),
        random_inputs(&graph, &other, 4).unwrap(),
    );
    // 60% of A's program-order peak, or the smallest budget feasible at both shapes.
    let mut budget = program_order_peak(&plan, &a) * 6 / 10;
    for (b, inputs) in [(&a, &in_a), (&other, &in_other)] {
        let step = runtime(&plan, Some(budget), &kinds).step(b, inputs.clone());
        if let Err(RuntimeError::Finalize(FinalizeError::Infeasible { smallest, .. })) = step {
            budget = smallest;
        }
    }
    let fresh = |b: &Bindings, inputs: &[Tensor]| {
        let mut rt = runtime(&plan, Some(budget), &kinds);
        rt.step(b, inputs.to_vec()).unwrap()
    };
    let (first_a, first_other) = (fresh(&a, &in_a), fresh(&other, &in_other));
    assert!(first_a.report.recompute_decisions + first_a.report.swap_decisions > 0);
    let mut rt = runtime(&plan, Some(budget), &kinds);
    for (i, (b, inputs, first)) in [
        (&a, &in_a, &first_a),
        (&a, &in_a, &first_a),
        (&other, &in_other, &first_other),
        (&a, &in_a, &first_a),
    ]
    .into_iter()
    .enumerate()
    {
        let out = rt.step(b, inputs.clone()).unwrap();
        let (r, f) = (&out.report, &first.report);
        assert_bit_identical(&first.outputs, &out.outputs);
        assert_eq!(r.measured_peak_bytes, f.measured_peak_bytes, "step {i}");
        assert_eq!(
            r.measured_peak_bytes as i64, r.peak_bytes_planned,
            "step {i}"
        );
        assert_eq!(
            (r.recompute_decisions, r.swap_decisions),
            (f.recompute_decisions, f.swap_decisions),
            "step {i}"
        );
        assert_eq!(r.arena_unplaced_bytes, 0, "step {i}");
        assert_eq!(
            r.arena_direct_bytes + r.arena_copied_bytes,
            f.arena_direct_bytes + f.arena_copied_bytes,
            "step {i}"
        );
        assert_eq!(r.cache_hit, i == 1 || i == 3, "step {i}");
    }
}

/// A donated input updated in place (the AdamW step's parameters and moments) stays in the
/// buffer the caller gave when the caller holds no other reference to it: the step copies
/// exactly those bytes less into its arena than a step on inputs the caller still shares
/// (updated into new buffers, then copied to their planned ranges), with the same bits and
/// the planned peak.
#[test]
fn donated_in_place_updates_stay_in_the_callers_buffers() {
    let plan = ebb_testkit::compiled("gpt2_tiny_adamw").plan;
    let b = pipeline::parse_bindings("B=2,S=16").unwrap();
    let mut rt = Runtime::new(plan, None).unwrap();
    let inputs = random_inputs(&rt.graph().clone(), &b, 3).unwrap();
    let shared = rt.step(&b, inputs.clone()).unwrap();
    let own: Vec<Tensor> = inputs.iter().map(Tensor::deep_copy).collect();
    let addresses: Vec<usize> = own.iter().map(|t| t.as_ptr() as usize).collect();
    let owned = rt.step(&b, own).unwrap();
    assert_bit_identical(&shared.outputs, &owned.outputs);
    let (s, o) = (&shared.report, &owned.report);
    assert_eq!(s.in_place_kept_bytes, 0);
    assert!(o.in_place_kept_bytes > 1 << 10, "{}", o.in_place_kept_bytes);
    assert_eq!(
        o.arena_copied_bytes + o.in_place_kept_bytes,
        s.arena_copied_bytes
    );
    assert_eq!(o.measured_peak_bytes as i64, o.peak_bytes_planned);
    assert_eq!(o.arena_unplaced_bytes, 0);
    // Outputs updated in place are in the buffers of the inputs they update.
    let kept: u64 = owned
        .outputs
        .iter()
        .filter(|t| addresses.contains(&(t.as_ptr() as usize)))
        .map(|t| t.size_bytes())
        .sum();
    assert!(kept > 0 && kept <= o.in_place_kept_bytes, "{kept}");
}

/// A runtime whose finalizer holds a plan atlas (prepared from a grid of sequence lengths
/// under its fixed byte budget) steps shapes it never sampled within the budget: measured
/// peak == planned peak ≤ budget, outputs bit-identical to the run without a budget.
#[test]
fn a_runtime_with_a_plan_atlas_steps_new_shapes_within_its_budget() {
    // (An atlas serves plans of one schedule variant: this one, unfused.)
    let plan = compile("gpt2_tiny_scan");
    let kinds = [DecisionKind::Recompute, DecisionKind::Swap];
    let mid = pipeline::parse_bindings("B=4,S=40").unwrap();
    let budget = program_order_peak(&plan, &mid) * 6 / 10;
    let rt_atlas = runtime(&plan, Some(budget), &kinds);
    let samples: Vec<Bindings> = [16, 32, 48, 64]
        .iter()
        .map(|s| pipeline::parse_bindings(&format!("B=4,S={s}")).unwrap())
        .collect();
    assert!(rt_atlas.prepare_atlas(&samples) > 0, "no atlas entry");
    let mut rt = rt_atlas;
    let graph = rt.graph().clone();
    for (k, s) in [40, 56, 24].into_iter().enumerate() {
        let b = pipeline::parse_bindings(&format!("B=4,S={s}")).unwrap();
        let inputs = random_inputs(&graph, &b, k as u64).unwrap();
        let want = runtime(&plan, None, &kinds)
            .step(&b, inputs.clone())
            .unwrap();
        let out = rt.step(&b, inputs).unwrap();
        let r = &out.report;
        assert_bit_identical(&want.outputs, &out.outputs);
        assert_eq!(r.measured_peak_bytes as i64, r.peak_bytes_planned, "S={s}");
        assert!(r.peak_bytes_planned <= budget, "S={s}: {r:?}");
    }
}
