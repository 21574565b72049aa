//! Binary plan files (`ebb_plan::binary`, `ebb_pipeline::plan_file`): a stamped file loads
//! without re-deriving the plan and reports exactly what the fully verified JSON plan
//! reports; a file changed after it was stamped is verified in full (and refused when the
//! change breaks the plan); malformed and truncated files are typed errors.

use ebb_pipeline::api::Compiler;
use ebb_pipeline::plan_file::{plan_file_bytes, read_plan_file, PlanFormat};
use ebb_pipeline::{parse_bindings, parse_budget, plan_report_proven_on, Pricing};
use ebb_plan::binary::{self, Stamp};
use ebb_plan::format::Plan;
use ebb_testkit::{jax_fixture, scratch};
use std::path::Path;
use std::sync::OnceLock;

/// The compiled plan of a small fixture (fused: its fusion groups' regions, and their reduce
/// bodies, go through the binary graph's flattened bodies) and its binary file, made once.
fn compiled() -> (Plan, Vec<u8>) {
    static COMPILED: OnceLock<(Plan, Vec<u8>)> = OnceLock::new();
    COMPILED
        .get_or_init(|| {
            let plan = Compiler::default()
                .compile_file(&jax_fixture("ckpt_cumsum_key"))
                .unwrap();
            let bytes = plan_file_bytes(&plan, PlanFormat::Binary).unwrap();
            (plan, bytes)
        })
        .clone()
}

/// The report and finalized plan at a binding under 95% of the program-order peak, as JSON
/// without the two timings.
fn report(path: &Path) -> (serde_json::Value, serde_json::Value) {
    let (plan, g) = read_plan_file(path, false).unwrap();
    let b = parse_bindings(&bindings(&plan)).unwrap();
    let budget = parse_budget("95%").unwrap();
    let (r, c) =
        plan_report_proven_on(&plan, &g, &b, Some(budget), &Pricing::for_plan(&plan)).unwrap();
    let mut r = serde_json::to_value(&r).unwrap();
    r["finalize_us"] = 0.into();
    r["prepare_us"] = 0.into();
    (r, serde_json::to_value(&c).unwrap())
}

/// Every symbol at 4 (within its range).
fn bindings(plan: &Plan) -> String {
    plan.symbols
        .symbols()
        .into_iter()
        .map(|s| {
            let (lo, hi) = plan.symbols.range(&s);
            format!(
                "{}={}",
                s.name(),
                4i64.max(lo.unwrap_or(4)).min(hi.unwrap_or(4))
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn stamped_binary_plan_reports_what_the_verified_json_plan_does() {
    let (plan, bytes) = compiled();
    let dir = scratch("plan-binary");
    let json = dir.join("p.json");
    let bin = dir.join("p.bin");
    std::fs::write(&json, plan.to_json()).unwrap();
    std::fs::write(&bin, &bytes).unwrap();
    assert_eq!(binary::decode(&bytes).unwrap().stamp, Stamp::Matches);

    // The stamped file is the same plan and graph as the JSON one.
    let (from_bin, g_bin) = read_plan_file(&bin, true).unwrap();
    let (from_json, g_json) = read_plan_file(&json, true).unwrap();
    assert_eq!(from_bin, from_json);
    assert_eq!(from_bin, plan);
    assert_eq!(ebb_ir::text::print(&g_bin), ebb_ir::text::print(&g_json));
    assert_eq!(g_bin.order(), g_json.order(), "node ids as the parser's");

    // Same decisions, offsets and report.
    assert_eq!(report(&bin), report(&json));
}

#[test]
fn a_binary_plan_changed_after_its_stamp_is_verified_in_full() {
    let (_, bytes) = compiled();
    let dir = scratch("plan-binary-tamper");
    let path = dir.join("p.bin");

    // The plan's first peak term edited, the old stamp kept: verified in full and refused.
    let mut d = binary::decode(&bytes).unwrap();
    let t = d.plan.peak_terms[0].clone();
    d.plan.peak_terms[0] = t.checked_add(&ebb_ir::DimExpr::constant(4)).unwrap();
    let mut tampered = binary::encode(&d.plan, &d.graph).unwrap();
    tampered[20..52].copy_from_slice(&bytes[20..52]);
    assert_eq!(binary::decode(&tampered).unwrap().stamp, Stamp::Differs);
    std::fs::write(&path, &tampered).unwrap();
    let e = format!("{:#}", read_plan_file(&path, false).unwrap_err());
    assert!(
        e.contains("changed after it was stamped") && e.contains("peak"),
        "{e}"
    );

    // A stamp that differs from intact content, or none at all: verified in full, accepted.
    for stamp in [[7u8; 32], [0; 32]] {
        let mut b = bytes.clone();
        b[20..52].copy_from_slice(&stamp);
        std::fs::write(&path, &b).unwrap();
        let (p, _) = read_plan_file(&path, false).unwrap();
        assert!(
            p.graph_ir.is_some(),
            "the full verification parsed its text"
        );
    }
}

#[test]
fn malformed_binary_plans_are_typed_errors() {
    let (_, bytes) = compiled();
    // Every truncation point of the header and a spread of the payload's.
    let n = bytes.len();
    let cuts = (0..60).chain((1..40).map(|k| k * n / 40));
    for cut in cuts {
        let e = binary::decode(&bytes[..cut.min(n - 1)]).unwrap_err();
        assert!(!e.to_string().is_empty());
    }
    // Version, fingerprint, trailing bytes.
    let mut b = bytes.clone();
    b[8] = 9;
    assert!(matches!(
        binary::decode(&b),
        Err(binary::BinaryError::Version { found: 9 })
    ));
    let mut b = bytes.clone();
    b[12] ^= 1;
    assert!(matches!(
        binary::decode(&b),
        Err(binary::BinaryError::Fingerprint { .. })
    ));
    let mut b = bytes.clone();
    b.push(0);
    assert!(matches!(
        binary::decode(&b),
        Err(binary::BinaryError::Payload(_))
    ));
    // Flipped payload bytes: an error or a decoded plan whose stamp no longer matches (which
    // a loader verifies in full), never a panic.
    for k in 1..64 {
        let mut b = bytes.clone();
        let at = 52 + k * (n - 52) / 64;
        b[at] ^= 0x5a;
        if let Ok(d) = binary::decode(&b) {
            assert_eq!(d.stamp, Stamp::Differs);
        }
    }
}
