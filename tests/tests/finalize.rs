//! Tests of the runtime's finalize on real compiled plans: budgets met and proven by the
//! independent checker, infeasible budgets and violated shape assertions reported as errors,
//! plan-cache hits, arena layouts without overlap.

use ebb_import::stablehlo::import_file;
use ebb_passes::donate::DonatePolicy;
use ebb_passes::plan::check::check;
use ebb_pipeline::{compile, CompileOptions, Compiled};
use ebb_plan::arena::{assign_offsets, assign_offsets_within, check_layout};
use ebb_plan::cache::PlanCache;
use ebb_plan::finalize::{finalize, FinalizeError, FinalizeOptions, Finalizer};
use ebb_plan::format::DecisionKind;
use ebb_testkit::{bind, jax_fixture, unfused_options};
use std::sync::Arc;

/// `name` compiled unfused, every input kept (`--fusion off --donate keep`): the configuration
/// these tests' figures were measured in.
fn compiled(name: &str) -> Compiled {
    ebb_testkit::compile_fixture(name, &unfused_options())
}

#[test]
fn half_of_program_order_peak_is_met_and_the_checker_proves_it() {
    let c = compiled("gpt2_tiny_adamw");
    let b = bind(&[("B", 8), ("S", 256)]);
    let po = ebb_passes::memory::liveness(&c.graph, &ebb_passes::memory::program_order(&c.graph))
        .peak(&b)
        .unwrap()
        .0;
    for kinds in [
        vec![DecisionKind::Recompute],
        vec![DecisionKind::Swap],
        vec![DecisionKind::Recompute, DecisionKind::Swap],
    ] {
        let opts = FinalizeOptions {
            budget: Some(po / 2),
            kinds: kinds.clone(),
            ..Default::default()
        };
        let cp = match finalize(&c.plan, &b, &opts) {
            Ok(cp) => cp,
            Err(FinalizeError::Infeasible { smallest, .. })
                if kinds == vec![DecisionKind::Recompute] =>
            {
                // Recompute alone may not reach 50%; the error must say what is reachable.
                assert!(smallest > po / 2);
                continue;
            }
            Err(e) => panic!("{kinds:?}: {e}"),
        };
        assert!(
            cp.peak_bytes_planned <= po / 2,
            "{kinds:?}: {} > {}",
            cp.peak_bytes_planned,
            po / 2
        );
        assert!(!cp.decisions.is_empty());
        let report = check(
            &c.graph,
            c.plan.variant(cp.variant).unwrap(),
            &cp.decisions,
            &b,
        )
        .unwrap_or_else(|e| panic!("{kinds:?}: checker: {e}"));
        // finalize's accounting is the checker's, exactly.
        assert_eq!(report.peak, cp.peak_bytes_planned, "{kinds:?}: peak");
        assert_eq!(
            report.resident, cp.resident,
            "{kinds:?}: resident per point"
        );
        assert_eq!(
            report.regen_peak, cp.regen_peak,
            "{kinds:?}: regeneration peaks"
        );
        check_layout(&cp.arena).unwrap();
        assert!(cp.arena.arena_bytes >= cp.peak_bytes_planned);
    }
}

#[test]
fn without_decisions_finalize_matches_the_checker_exactly() {
    let c = compiled("gpt2_tiny_adamw");
    let b = bind(&[("B", 3), ("S", 7)]);
    let cp = finalize(&c.plan, &b, &FinalizeOptions::default()).unwrap();
    let report = check(&c.graph, c.plan.variant(cp.variant).unwrap(), &[], &b).unwrap();
    assert_eq!(report.resident, cp.resident);
    assert_eq!(report.peak, cp.peak_bytes_planned);
    check_layout(&cp.arena).unwrap();
}

#[test]
fn infeasible_budget_states_the_smallest_feasible_one() {
    let c = compiled("mlp_sgd");
    let b = bind(&[("B", 8)]);
    let err = finalize(
        &c.plan,
        &b,
        &FinalizeOptions {
            budget: Some(1000),
            ..Default::default()
        },
    )
    .unwrap_err();
    match &err {
        FinalizeError::Infeasible {
            budget, smallest, ..
        } => {
            assert_eq!(*budget, 1000);
            // The smallest feasible budget is itself feasible.
            let ok = finalize(
                &c.plan,
                &b,
                &FinalizeOptions {
                    budget: Some(*smallest),
                    ..Default::default()
                },
            );
            assert!(ok.is_ok(), "{:?}", ok.err());
        }
        other => panic!("{other}"),
    }
    assert!(
        err.to_string().contains("smallest feasible budget"),
        "{err}"
    );
}

#[test]
fn assertion_violation_reports_jax_message() {
    let c = compiled("gpt2_tiny_adamw");
    // S <= 512 is a range fact and an assertion of the export.
    let err = finalize(
        &c.plan,
        &bind(&[("B", 2), ("S", 600)]),
        &FinalizeOptions::default(),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("S") && (msg.contains("512") || msg.contains("600")),
        "{msg}"
    );
    let err = finalize(
        &c.plan,
        &bind(&[("B", 0), ("S", 16)]),
        &FinalizeOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            FinalizeError::Fact(_) | FinalizeError::Assertion { .. }
        ),
        "{err}"
    );
}

#[test]
fn plan_cache_hits_on_a_shape_seen_before() {
    let c = compiled("mlp_sgd");
    let mut cache = PlanCache::new(Arc::new(c.plan), 4);
    let opts = FinalizeOptions::default();
    let a = cache.get(&bind(&[("B", 8)]), &opts).unwrap();
    let _ = cache.get(&bind(&[("B", 16)]), &opts).unwrap();
    let again = cache.get(&bind(&[("B", 8)]), &opts).unwrap();
    assert!(Arc::ptr_eq(&a, &again));
    assert_eq!((cache.hits, cache.misses), (1, 2));
    for k in 0..10 {
        cache.get(&bind(&[("B", 100 + k)]), &opts).unwrap();
    }
    assert_eq!(cache.len(), 4, "bounded");
}

#[test]
fn symbolic_plan_matches_precise_plan_within_one_percent() {
    // GPT-2 small at B=4, S in {128, 512, 1024}.
    let (g, _) = import_file(&jax_fixture("gpt2_small")).unwrap();
    let sym = compile(g.clone(), &CompileOptions::default()).unwrap();
    for (bb, s) in [(4, 128), (4, 512), (4, 1024)] {
        let b = bind(&[("B", bb), ("S", s)]);
        let precise = compile(
            g.clone(),
            &CompileOptions {
                bind: Some(b.clone()),
                ..Default::default()
            },
        )
        .unwrap();
        let ps = finalize(&sym.plan, &b, &FinalizeOptions::default())
            .unwrap()
            .peak_bytes_scheduled;
        let pp = finalize(&precise.plan, &b, &FinalizeOptions::default())
            .unwrap()
            .peak_bytes_scheduled;
        let ratio = ps as f64 / pp as f64;
        let po = ebb_passes::memory::liveness(
            &sym.graph,
            &ebb_passes::memory::program_order(&sym.graph),
        )
        .peak(&b)
        .unwrap()
        .0;
        assert!(ps <= po, "scheduled {ps} > program order {po}");
        assert!(
            ratio <= 1.01,
            "B={bb} S={s}: symbolic {ps} vs precise {pp} (ratio {ratio:.4})"
        );
    }
}

/// GPT-2 small at B=8 on `h100-sxm-pcie5` under half its scheduled peak, with arena offsets:
/// the arena fits the budget and the decisions add at most 10% of the modelled step at
/// S = 250, 379 and 1024 (the ILP optimum under the budget less 2% is 11.1%, 5.2% and 7.8%;
/// the decisions for the budget less `UPWARD_SLACK`, 0.5%, are laid out first). A greedy that scores
/// options by bytes times window length saturates the link here (17.6%, 20.7% and 26.9%).
#[test]
fn gpt2_small_under_half_its_scheduled_peak_adds_at_most_ten_percent() {
    let sym = compiled("gpt2_small");
    let device = ebb_plan::device::DeviceProfile::h100_sxm_pcie5();
    for s in [250, 379, 1024] {
        let b = bind(&[("B", 8), ("S", s)]);
        let sched = finalize(&sym.plan, &b, &FinalizeOptions::default())
            .unwrap()
            .peak_bytes_scheduled;
        let budget = sched / 2;
        let cp = finalize(
            &sym.plan,
            &b,
            &FinalizeOptions {
                budget: Some(budget),
                device: device.clone(),
                ..Default::default()
            },
        )
        .unwrap();
        let added = cp.overhead_us / cp.step_us;
        assert!(
            cp.arena.arena_bytes <= budget,
            "S={s}: arena {} > budget {budget}",
            cp.arena.arena_bytes
        );
        assert!(
            added <= 0.10,
            "S={s}: decisions add {:.1}% of the step",
            100.0 * added
        );
    }
}

/// The symbolic plan's variants (scheduled for points spread over the
/// symbol space, picked at run time by the evaluated peak) are within 1 % of a plan compiled
/// for the exact shape, on the small JAX fixtures at short and long sequences, with and
/// without fusion.
#[test]
fn symbolic_plan_matches_precise_plan_within_one_percent_on_small_fixtures() {
    let seq: &[(i64, i64)] = &[
        (1, 16),
        (2, 16),
        (8, 16),
        (8, 37),
        (8, 85),
        (4, 128),
        (8, 256),
    ];
    let batch: &[(i64, i64)] = &[(1, 0), (3, 0), (8, 0), (64, 0)];
    // The dropout step (threefry unrolled, 2.8k ops): fewer shapes, for the test's time.
    let dropout: &[(i64, i64)] = &[(1, 16), (8, 85), (8, 256)];
    for (name, shapes, fusions) in [
        ("gpt2_tiny_dropout", dropout, &[false, true][..]),
        ("gpt2_tiny_adamw", seq, &[false, true][..]),
        ("gpt2_tiny_scan", seq, &[false, true][..]),
        ("gpt_block_sgd", seq, &[false, true][..]),
        ("shifted_lm_take", seq, &[false][..]),
        ("mlp_sgd", batch, &[false, true][..]),
        ("cnn_sgd", batch, &[false][..]),
    ] {
        let (g, _) = import_file(&jax_fixture(name)).unwrap();
        for &fusion in fusions {
            let opts = CompileOptions::builder()
                .fusion(fusion)
                .donate(DonatePolicy::Keep)
                .rewrite(Vec::new())
                .build();
            let sym = compile(g.clone(), &opts).unwrap();
            for &(bb, s) in shapes {
                let b = if s == 0 {
                    bind(&[("B", bb)])
                } else {
                    bind(&[("B", bb), ("S", s)])
                };
                let precise = compile(
                    g.clone(),
                    &CompileOptions {
                        bind: Some(b.clone()),
                        ..opts.clone()
                    },
                )
                .unwrap();
                let peak = |p| {
                    finalize(p, &b, &FinalizeOptions::default())
                        .unwrap()
                        .peak_bytes_scheduled
                };
                let (ps, pp) = (peak(&sym.plan), peak(&precise.plan));
                let ratio = ps as f64 / pp as f64;
                assert!(
                    ratio <= 1.01,
                    "{name} fusion={fusion} B={bb} S={s}: symbolic {ps} vs precise {pp} \
                     (ratio {ratio:.4})"
                );
            }
        }
    }
}

/// A fused plan writes loop fusions' results in place: the layout gives each such pair one
/// offset (checked valid), and the arena stays within 5 % of the planned peak, without a
/// budget and under half of the scheduled peak.
#[test]
fn fused_layouts_share_in_place_buffers_and_stay_within_five_percent() {
    let (g, _) = import_file(&jax_fixture("gpt2_tiny_adamw")).unwrap();
    let c = compile(
        g,
        &CompileOptions {
            fusion: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(!c.plan.in_place_writes.is_empty());
    let b = bind(&[("B", 8), ("S", 256)]);
    let free = finalize(&c.plan, &b, &FinalizeOptions::default()).unwrap();
    for budget in [None, Some(free.peak_bytes_scheduled / 2)] {
        let cp = finalize(
            &c.plan,
            &b,
            &FinalizeOptions {
                budget,
                ..Default::default()
            },
        )
        .unwrap();
        check_layout(&cp.arena).unwrap();
        assert!(!cp.arena.shared.is_empty(), "{budget:?}");
        for (o, r) in &cp.arena.shared {
            let at = |v| {
                cp.arena
                    .allocations
                    .iter()
                    .find(|a| a.value == v)
                    .map(|a| a.offset)
            };
            assert!(at(*o).is_some() && at(*r).is_some());
        }
        let ratio = cp.arena.arena_bytes as f64 / cp.peak_bytes_planned as f64;
        assert!(ratio <= 1.05, "{budget:?}: arena / peak {ratio:.3}");
    }
}

/// Under a budget a plan with several schedule variants returns what its rule says, whatever
/// the order in which the variants' decisions end (the first to end lays out its arena ahead,
/// and is cancelled when it does not come first): each variant finalized alone, the result is
/// the lowest-peak variant's where its decisions do not bind, else the first feasible one by
/// its decisions' (added time, planned peak, lowest-peak variant first, index) whose arena
/// fits the budget (a layout that misses it decides again), those whose arenas surely miss
/// the budget ahead of the first that may fit taken last (`Finalizer::surely_misses_at`), else
/// the smallest arena.
#[test]
fn the_variant_comparison_follows_its_rule() {
    let c = compiled("gpt2_tiny_adamw");
    assert!(
        !c.plan.alternatives.is_empty(),
        "the fixture keeps several variants"
    );
    let alone: Vec<_> = (0..=c.plan.alternatives.len())
        .map(|i| {
            let mut v = c.plan.variant(i).unwrap().clone();
            v.alternatives.clear();
            v
        })
        .collect();
    let fin = Finalizer::new(&c.plan);
    for (bsz, s) in [(8, 256), (4, 100), (2, 512), (8, 64)] {
        let b = bind(&[("B", bsz), ("S", s)]);
        let free = fin.finalize(&b, &FinalizeOptions::default()).unwrap();
        let first = free.variant;
        for frac in [0.9, 0.6, 0.5, 0.45] {
            let opts = FinalizeOptions {
                budget: Some((free.peak_bytes_scheduled as f64 * frac) as i64),
                ..Default::default()
            };
            // Each variant alone: its decisions (ordered before any layout; without offsets,
            // under the target a finalize with offsets decides under) and its arena (a layout
            // that misses the budget decides again).
            let bare = FinalizeOptions {
                budget: opts.decisions_target(),
                offsets: false,
                ..Default::default()
            };
            let decided: Vec<_> = alone.iter().map(|v| finalize(v, &b, &bare)).collect();
            let laid: Vec<_> = alone.iter().map(|v| finalize(v, &b, &opts)).collect();
            let want = match &decided[first] {
                Ok(f) if f.decisions.is_empty() => laid[first]
                    .as_ref()
                    .ok()
                    .map(|l| (first, l.arena.arena_bytes)),
                _ => {
                    let rank = |i: usize| match i {
                        i if i == first => 0,
                        0 => first,
                        i => i,
                    };
                    let mut ok: Vec<(usize, f64, i64)> = decided
                        .iter()
                        .enumerate()
                        .filter_map(|(i, r)| {
                            r.as_ref()
                                .ok()
                                .map(|f| (i, f.overhead_us, f.peak_bytes_planned))
                        })
                        .collect();
                    ok.sort_by(|x, y| {
                        x.1.total_cmp(&y.1)
                            .then(x.2.cmp(&y.2))
                            .then(rank(x.0).cmp(&rank(y.0)))
                    });
                    // Those whose arenas surely miss the budget ahead of the first that may
                    // fit go last.
                    let misses = |i: usize| {
                        let d = decided[i].as_ref().unwrap();
                        Finalizer::new(&alone[i])
                            .surely_misses_at(d, &b, &opts)
                            .unwrap()
                    };
                    if let Some(k) = ok.iter().position(|x| !misses(x.0)) {
                        ok.rotate_left(k);
                    }
                    let arena =
                        |i: usize| laid[i].as_ref().map_or(i64::MAX, |l| l.arena.arena_bytes);
                    let added = |i: usize| laid[i].as_ref().map_or(f64::MAX, |l| l.overhead_us);
                    let budget = opts.budget.unwrap();
                    ok.iter()
                        .map(|x| x.0)
                        .find(|&i| arena(i) <= budget)
                        .or_else(|| {
                            ok.iter().map(|x| x.0).min_by(|&x, &y| {
                                arena(x).cmp(&arena(y)).then(added(x).total_cmp(&added(y)))
                            })
                        })
                        .map(|i| (i, arena(i)))
                }
            };
            for _ in 0..3 {
                let got = fin
                    .finalize(&b, &opts)
                    .ok()
                    .map(|f| (f.variant, f.arena.arena_bytes));
                assert_eq!(got, want, "B={bsz} S={s} {frac}");
            }
        }
    }
}

/// A [`Finalizer`] (variants prepared once, expressions interned) finalizes exactly as the
/// one-off [`finalize`] at every shape and budget: same variant, decisions, peaks and offsets.
#[test]
fn a_prepared_finalizer_agrees_with_one_off_finalize() {
    let c = compiled("gpt2_tiny_adamw");
    let fin = Finalizer::new(&c.plan);
    for (bsz, s) in [(1, 16), (8, 256), (4, 100), (2, 512)] {
        let b = bind(&[("B", bsz), ("S", s)]);
        let free = finalize(&c.plan, &b, &FinalizeOptions::default()).unwrap();
        for frac in [1.0, 0.6, 0.45] {
            let opts = FinalizeOptions {
                budget: Some((free.peak_bytes_scheduled as f64 * frac) as i64),
                ..Default::default()
            };
            let (one, held) = (finalize(&c.plan, &b, &opts), fin.finalize(&b, &opts));
            match (one, held) {
                (Ok(one), Ok(held)) => {
                    assert_eq!(one.variant, held.variant);
                    assert_eq!(one.decisions, held.decisions);
                    assert_eq!(one.resident, held.resident);
                    assert_eq!(one.arena.allocations, held.arena.allocations);
                    check_layout(&held.arena).unwrap();
                }
                (Err(a), Err(b)) => assert_eq!(a, b),
                (a, b) => panic!("B={bsz} S={s} {frac}: {:?} vs {:?}", a.is_ok(), b.is_ok()),
            }
        }
    }
}

/// The fragmentation target on every training-step fixture small enough for a debug test
/// (JAX and ONNX; GPT-2 small and medium are measured by the commands in docs/results/): the arena
/// layout is valid and at most 5 % above the planned peak (or within the decisions' target),
/// unfused and fused, without a budget and under half of the program-order peak (`ebb plan
/// --budget 50%`; where that is below the lower bound, the smallest feasible budget), whose
/// arena then fits it, with the decisions priced for an A100 and an H100 (the measured `cpu`
/// profile would make the test depend on the machine).
#[test]
fn every_fixture_layout_stays_within_five_percent_of_the_planned_peak() {
    let jax = |n: &str| ebb_testkit::jax_fixture(n);
    let onnx = |n: &str| ebb_testkit::onnx_fixture(n);
    let cases = [
        (jax("cnn_poly_sgd"), bind(&[("B", 16), ("h", 4), ("w", 4)])),
        (jax("cnn_sgd"), bind(&[("B", 32)])),
        (jax("gpt2_tiny_adamw"), bind(&[("B", 8), ("S", 256)])),
        (jax("gpt2_tiny_dropout"), bind(&[("B", 8), ("S", 128)])),
        (jax("gpt2_tiny_remat"), bind(&[("B", 8), ("S", 128)])),
        (jax("gpt2_tiny_scan"), bind(&[("B", 8), ("S", 128)])),
        (jax("gpt_block_sgd"), bind(&[("B", 8), ("S", 128)])),
        (jax("mlp_bf16"), bind(&[("B", 64)])),
        (jax("mlp_sgd"), bind(&[("B", 64)])),
        (jax("resnet_bn"), bind(&[("B", 16)])),
        (jax("unet_gn"), bind(&[("B", 16)])),
        (jax("vae_convt"), bind(&[("B", 16)])),
        (onnx("ort_cnn_bn_training"), bind(&[("batch", 16)])),
        (onnx("ort_cnn_training"), bind(&[("batch", 16)])),
        (
            onnx("ort_gpt2_tiny_dropout_training"),
            bind(&[("batch", 8), ("seq", 128)]),
        ),
        (
            onnx("ort_gpt2_tiny_training"),
            bind(&[("batch", 8), ("seq", 128)]),
        ),
        (onnx("ort_mlp_tanh_training"), bind(&[("batch", 64)])),
        (onnx("ort_mlp_training"), bind(&[("batch", 64)])),
        (
            onnx("torch_gpt2_tiny_adam"),
            bind(&[("batch", 8), ("seq", 128)]),
        ),
        (
            onnx("torch_gpt2_tiny_ce_adam"),
            bind(&[("batch", 8), ("seq", 128)]),
        ),
        (
            onnx("torch_gpt2_tiny_sgd"),
            bind(&[("batch", 8), ("seq", 128)]),
        ),
        (onnx("torch_mlp_adam"), bind(&[("batch", 64)])),
        (onnx("torch_mlp_sgd"), bind(&[("batch", 64)])),
    ];
    let mut worst = (0.0f64, String::new());
    for (path, b) in &cases {
        let (g, _) = ebb_import::import_file(path, None).unwrap();
        for fusion in [false, true] {
            let c = compile(
                g.clone(),
                &CompileOptions {
                    fusion,
                    ..Default::default()
                },
            )
            .unwrap();
            let po = ebb_passes::memory::liveness(
                &c.graph,
                &ebb_passes::memory::program_order(&c.graph),
            )
            .peak(b)
            .unwrap()
            .0;
            for (budget, device) in [None, Some(po / 2)]
                .into_iter()
                .flat_map(|b| ["a100-40g-pcie4", "h100-sxm-pcie5"].map(|d| (b, d)))
            {
                let device = ebb_plan::device::DeviceProfile::named(device).unwrap();
                let at = |budget| {
                    finalize(
                        &c.plan,
                        b,
                        &FinalizeOptions {
                            budget,
                            device: device.clone(),
                            ..Default::default()
                        },
                    )
                };
                // At the smallest feasible budget the planned peak is the budget, and the
                // arena's alignment and fragmentation may not fit it.
                let mut at_edge = false;
                let cp = match at(budget) {
                    Err(FinalizeError::Infeasible { smallest, .. }) => {
                        at_edge = true;
                        at(Some(smallest))
                    }
                    other => other,
                }
                .unwrap();
                check_layout(&cp.arena).unwrap();
                let ratio = cp.arena.arena_bytes as f64 / cp.peak_bytes_planned as f64;
                let what = format!(
                    "{} fusion={fusion} budget={budget:?} device={}",
                    path.display(),
                    device.name
                );
                // Under a budget the arena fits it (the decisions leave the layout
                // `ARENA_ALLOWANCE`, and decide again where it fragments more); a layout
                // within the decisions' target need not be tighter (decisions that overshoot
                // the target leave it slack).
                let target = FinalizeOptions {
                    budget: cp.budget,
                    ..Default::default()
                }
                .decisions_target();
                if let Some(budget) = cp.budget.filter(|_| !at_edge) {
                    assert!(cp.arena.arena_bytes <= budget, "{what}: arena over budget: arena {} planned {} budget {budget} decisions {}", cp.arena.arena_bytes, cp.peak_bytes_planned, cp.decisions.len());
                }
                assert!(
                    ratio <= 1.05 || Some(cp.arena.arena_bytes) <= target,
                    "{what}: arena / planned peak {ratio:.4}"
                );
                if ratio > worst.0 {
                    worst = (ratio, what);
                }
            }
        }
    }
    eprintln!("largest arena / planned peak: {:.4} ({})", worst.0, worst.1);
}

/// The 2-layer GPT whose blocks run under `lax.scan` (two `while` loops,
/// stacked residuals) is unrolled at compile time, so its scheduled peak without a budget is
/// within 5% of the unrolled export's (`gpt2_tiny_adamw`, the same model) at small and large
/// shapes; with `--unroll off` the loops are planned whole (each body's peak charged at its
/// loop's point) and the peak is within 10% of it at S ≥ 256 (1.06–1.07×): the loops' carries
/// share their operands' buffers (the stacked parameters a body returns unchanged, the
/// residuals it stacks into a zero stack of its own).
#[test]
fn scan_fixture_schedules_within_five_percent_of_the_unrolled_export() {
    let scan = compiled("gpt2_tiny_scan");
    let unrolled = compiled("gpt2_tiny_adamw");
    let (g, _) = import_file(&jax_fixture("gpt2_tiny_scan")).unwrap();
    let kept = compile(
        g,
        &CompileOptions {
            keep_loops: true,
            ..unfused_options()
        },
    )
    .unwrap();
    let peak = |c: &Compiled, b: &ebb_ir::Bindings| {
        ebb_pipeline::plan_report(&c.plan, b, None)
            .unwrap()
            .peak_bytes_scheduled
    };
    for (bb, s) in [(1, 16), (2, 64), (8, 256), (16, 512)] {
        let b = bind(&[("B", bb), ("S", s)]);
        let (p, u, k) = (peak(&scan, &b), peak(&unrolled, &b), peak(&kept, &b));
        eprintln!("B={bb} S={s}: scan {p}, unrolled export {u}, loops kept {k}");
        assert!(p as f64 <= 1.05 * u as f64, "B={bb} S={s}: {p} vs {u}");
        if s >= 256 {
            assert!(
                k as f64 <= 1.1 * u as f64,
                "B={bb} S={s}: loops kept {k} vs {u}"
            );
        }
    }
}

/// Tests that the one pricing implementation gives finalize and a one-off [`StepCosts`] (what
/// the exact ILP prices with) the same figures: the step time bit for bit, and the recompute
/// time of the decisions finalize took, on the 2-layer GPT under half its scheduled peak.
#[test]
fn step_costs_price_as_finalize_does() {
    use ebb_ir::dim::DimExpr;
    use ebb_plan::cost::StepCosts;
    use ebb_plan::device::DeviceProfile;
    let c = compiled("gpt2_tiny_adamw");
    let device = DeviceProfile::named("h100-sxm-pcie5").unwrap();
    for s in [64, 200, 512] {
        let b = bind(&[("B", 8), ("S", s)]);
        let opts = FinalizeOptions {
            device: device.clone(),
            ..Default::default()
        };
        let peak = finalize(&c.plan, &b, &opts).unwrap().peak_bytes_scheduled;
        let cp = finalize(
            &c.plan,
            &b,
            &FinalizeOptions {
                budget: Some(peak / 2),
                ..opts
            },
        )
        .unwrap();
        assert!(cp
            .decisions
            .iter()
            .any(|d| d.kind == DecisionKind::Recompute));
        let plan = c.plan.variant(cp.variant).unwrap();
        let costs =
            StepCosts::new(plan, &device, |e: &DimExpr| e.eval(&b)).expect("costs evaluate");
        assert_eq!(costs.step_us().to_bits(), cp.step_us.to_bits(), "S={s}");
        let recompute: f64 = cp
            .decisions
            .iter()
            .filter(|d| d.kind == DecisionKind::Recompute)
            .map(|d| {
                let cand = &plan.candidates[d.candidate.index()];
                costs.recompute_us(d.candidate, cand.recompute_flops.eval(&b).unwrap())
            })
            .sum();
        assert!(
            (recompute - cp.recompute_us).abs() <= 1e-9 * cp.recompute_us.max(1.0),
            "S={s}: {recompute} vs {}",
            cp.recompute_us
        );
    }
}

/// The layout's repair ([`assign_offsets_within`]): told a bound on the arena, the layout is
/// valid and never larger than without it (it keeps the scan's offsets unless an anchored
/// order does better); and finalize's arena fits each budget. On the 24-layer GPT (a plan of
/// more than `GREEDY_UP_TO` intervals, the ones repaired) at B=8, S=115 and 256 under 75% and
/// 50% of the scheduled peak on `h100-sxm-pcie5`, bound by the planned peak (so that the repair runs
/// wherever the scan leaves any fragmentation).
#[test]
fn a_layout_told_a_bound_is_valid_and_never_larger() {
    let sym = compiled("gpt2_24l");
    let fin = Finalizer::new(&sym.plan);
    let device = ebb_plan::device::DeviceProfile::h100_sxm_pcie5();
    for s in [115, 256] {
        let b = bind(&[("B", 8), ("S", s)]);
        let sched = fin
            .finalize(&b, &FinalizeOptions::default())
            .unwrap()
            .peak_bytes_scheduled;
        for frac in [0.75, 0.5] {
            let budget = (sched as f64 * frac) as i64;
            let opts = FinalizeOptions {
                budget: Some(budget),
                device: device.clone(),
                ..Default::default()
            };
            let cp = match fin.finalize(&b, &opts) {
                Ok(cp) => cp,
                Err(FinalizeError::Infeasible { .. }) => continue,
                Err(e) => panic!("S={s} {frac}: {e}"),
            };
            if cp.peak_bytes_planned < budget {
                assert!(
                    cp.arena.arena_bytes <= budget,
                    "S={s} {frac}: arena {} over the budget {budget}",
                    cp.arena.arena_bytes
                );
            }
            let plan = sym.plan.variant(cp.variant).unwrap_or(&sym.plan);
            let (bytes, decisions) = (&cp.value_bytes, &cp.decisions);
            let plain = assign_offsets(plan, bytes, decisions, cp.peak_bytes_planned);
            let bound = cp.peak_bytes_planned;
            let told = assign_offsets_within(plan, bytes, decisions, bound, bound);
            check_layout(&told).unwrap_or_else(|e| panic!("S={s} {frac}: {e}"));
            assert!(
                told.arena_bytes <= plain.arena_bytes,
                "S={s} {frac}: {} > {}",
                told.arena_bytes,
                plain.arena_bytes
            );
        }
    }
}
