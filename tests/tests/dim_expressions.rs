//! Input dimensions that are expressions of the symbols, on the `shifted_lm_take` fixture: its
//! `tokens` are `i32[B, S+1]` (JAX computes `S` as `tokens.shape[1] - 1`) and its `weights`
//! `f32[B*S]` (only a shape assertion ties that dimension to `B*S`). Both must import as
//! expressions over `B` and `S` (no placeholder), and the step must plan and run checked under
//! a budget, plain and with fusion and donation (its `jnp.take` embedding, `mode="fill"`, once
//! made the fusion pass panic), matching JAX's outputs.

use ebb_ir::DimExpr;
use ebb_passes::donate::DonatePolicy;
use ebb_pipeline::run::InputSource::Npz;
use ebb_pipeline::{self as pipeline, CompileOptions};
use ebb_plan::format::Plan;
use ebb_testkit::{fixture_refs, jax_fixture, jax_fixtures_dir, jax_metadata};

const NAME: &str = "shifted_lm_take";

#[test]
fn shifted_tokens_and_flattened_weights_are_expressions_of_b_and_s() {
    let (g, stats) = ebb_import::stablehlo::import_file(&jax_fixture(NAME)).unwrap();
    assert_eq!(stats.unresolved_dims, 0);
    let symbols: Vec<String> = g
        .scope
        .symbols()
        .iter()
        .map(|s| s.name().to_string())
        .collect();
    assert_eq!(symbols, ["B", "S"]);
    let (b, s) = (DimExpr::sym("B"), DimExpr::sym("S"));
    let shape_of = |name: &str| {
        let id = g
            .inputs()
            .iter()
            .copied()
            .find(|&id| g.input_name(id) == name)
            .unwrap_or_else(|| panic!("no input {name}"));
        g.node(id).outputs[0].shape.clone()
    };
    let s_plus_1 = s.checked_add(&DimExpr::constant(1)).unwrap();
    assert_eq!(shape_of("tokens"), [b.clone(), s_plus_1]);
    assert_eq!(shape_of("weights"), [b.checked_mul(&s).unwrap()]);
    // JAX's checks (`weights.shape[0] == B*S`, `S >= 1`) hold by construction now: those the
    // import could not decide hold at any binding.
    let bind = pipeline::parse_bindings("B=3,S=7").unwrap();
    for a in &g.assertions {
        let (l, r) = (a.lhs.eval(&bind).unwrap(), a.rhs.eval(&bind).unwrap());
        assert!(a.rel.holds(l, r), "fails at B=3, S=7: {a:?}");
    }
}

/// The plan plain, or with fusion on and donation `auto`.
fn compile(fused: bool) -> Plan {
    let opts = if fused {
        CompileOptions::builder()
            .fusion(true)
            .donate(DonatePolicy::Auto)
            .build()
    } else {
        ebb_testkit::unfused_options()
    };
    ebb_testkit::compile_fixture(NAME, &opts).plan
}

/// Under 50% of the program-order peak, or the smallest feasible budget where that is below
/// the lower bound: measured peak == planned == checker's, outputs bit-identical to the run
/// without decisions and within float rounding of JAX's; the fused run gives the plain run's
/// bits.
#[test]
fn runs_checked_under_a_budget_with_and_without_fusion() {
    let refs = fixture_refs(&jax_metadata(NAME), &jax_fixtures_dir());
    assert_eq!(refs.len(), 2);
    let (plain, fused) = (compile(false), compile(true));
    for (npz, b) in &refs {
        let mut outputs = Vec::new();
        for (tag, plan) in [("plain", &plain), ("fused", &fused)] {
            let r =
                crate::donation_fixtures::run_checked_under_half(tag, plan, b, Npz(npz.clone()));
            let rep = &r.report;
            let planned = rep.plan.peak_bytes_planned.unwrap();
            assert!(planned <= rep.plan.budget_bytes.unwrap(), "{tag} {b:?}");
            assert_eq!(rep.measured_peak_bytes as i64, planned, "{tag} {b:?}");
            assert_eq!(rep.checker_peak_bytes, Some(planned), "{tag} {b:?}");
            assert_eq!(rep.outputs_match_reference, Some(true), "{tag} {b:?}");
            let rel = rep.npz_max_rel_err.unwrap();
            assert!(rel < 1e-5, "{tag} {b:?}: rel err {rel} vs JAX");
            eprintln!(
                "{NAME} {b:?} {tag}: budget {:?}, planned = measured = checker {planned}, rel err vs JAX {rel:.3e}",
                rep.plan.budget_bytes
            );
            outputs.push(r.step.outputs);
        }
        for (i, (x, y)) in outputs[0].iter().zip(&outputs[1]).enumerate() {
            assert!(x.bits_eq(y), "{b:?}: output {i} differs fused");
        }
    }
}
