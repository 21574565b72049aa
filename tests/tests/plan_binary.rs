//! Binary plan files (`ebb_plan::binary`, `ebb_pipeline::plan_file`): a stamped file loads
//! without re-deriving the plan and reports exactly what the fully verified JSON plan
//! reports; a file changed after it was stamped is verified in full (and refused when the
//! change breaks the plan); malformed and truncated files are typed errors.

use ebb_pipeline::api::Compiler;
use ebb_pipeline::plan_file::{
    plan_file_bytes, read_plan_file, read_plan_file_for_report, PlanFormat,
};
use ebb_pipeline::{parse_bindings, parse_budget, plan_report_proven_on, Pricing};
use ebb_plan::binary::{self, DecodeOptions, Stamp};
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
    report_on(read_plan_file(path, false).unwrap())
}

/// [`report`] on a loaded plan and graph.
fn report_on((plan, g): (Plan, ebb_ir::Graph)) -> (serde_json::Value, serde_json::Value) {
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

const ELIDE: DecodeOptions = DecodeOptions {
    elide_fusion_bodies: true,
};

#[test]
fn a_report_on_a_stamped_binary_plan_reads_no_fusion_region_and_reports_the_same() {
    let (plan, bytes) = compiled();
    let dir = scratch("plan-binary-report");
    let json = dir.join("p.json");
    let bin = dir.join("p.bin");
    std::fs::write(&json, plan.to_json()).unwrap();
    std::fs::write(&bin, &bytes).unwrap();

    let full = binary::decode(&bytes).unwrap();
    let lean = binary::decode_with(&bytes, ELIDE).unwrap();
    assert!(!full.elided && lean.elided);
    assert_eq!(full.plan, lean.plan);
    let (f, l) = (&full.graph, &lean.graph);
    assert_eq!(f.order(), l.order(), "the same node ids");
    // Every fusion region is empty; its tile bytes and the in-place writes are those derived
    // from the full graph.
    let mut fusions = 0;
    for &id in f.order() {
        let (a, b) = (f.node(id), l.node(id));
        assert_eq!(a.op, b.op);
        assert_eq!(a.outputs, b.outputs);
        if a.kind() == ebb_ir::OpKind::Fusion {
            fusions += 1;
            assert!(b.regions[0].order().is_empty());
            assert_eq!(
                ebb_ir::op::fusion_tile_bytes(&a.regions[0]),
                ebb_ir::op::fusion_tile_bytes(&b.regions[0])
            );
        } else {
            assert_eq!(a.regions.len(), b.regions.len());
            for (x, y) in a.regions.iter().zip(&b.regions) {
                assert_eq!(ebb_ir::text::print(x), ebb_ir::text::print(y));
            }
        }
    }
    assert!(fusions > 0);
    assert_eq!(
        ebb_ir::op::in_place_writes(f),
        ebb_ir::op::in_place_writes(l)
    );

    // The report through the loader: the same as the verified JSON plan's.
    let (p, g) = read_plan_file_for_report(&bin).unwrap();
    assert!(g
        .order()
        .iter()
        .filter(|&&id| g.node(id).kind() == ebb_ir::OpKind::Fusion)
        .all(|&id| g.node(id).regions[0].order().is_empty()));
    assert_eq!(report_on((p, g)), report(&json));
    // A JSON plan, and a binary plan without its stamp, load in full.
    let (_, g) = read_plan_file_for_report(&json).unwrap();
    assert_eq!(ebb_ir::text::print(&g), ebb_ir::text::print(f));
    let mut unstamped = bytes.clone();
    unstamped[20..52].copy_from_slice(&[0; 32]);
    assert!(!binary::decode_with(&unstamped, ELIDE).unwrap().elided);
    std::fs::write(&bin, &unstamped).unwrap();
    let (_, g) = read_plan_file_for_report(&bin).unwrap();
    assert_eq!(ebb_ir::text::print(&g), ebb_ir::text::print(f));
}

#[test]
fn corrupted_binary_plans_stamped_anew_are_typed_errors_in_a_report() {
    // A corruption that is stamped again (the stamp is no security measure) reaches the
    // report's decoding: the stored analyses and the elided regions' extents are checked
    // against the graph, and the loader and report give an error or a report, never a panic.
    let (_, bytes) = compiled();
    let dir = scratch("plan-binary-restamped");
    let path = dir.join("p.bin");
    let n = bytes.len();
    let mut decoded = 0;
    for k in 0..300 {
        let mut b = bytes.clone();
        let at = 52 + k * (n - 52) / 300;
        b[at] ^= if k % 2 == 0 { 0x01 } else { 0x80 };
        binary::stamp(&mut b).unwrap();
        match binary::decode_with(&b, ELIDE) {
            Ok(d) => {
                assert!(d.elided);
                decoded += 1;
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
        std::fs::write(&path, &b).unwrap();
        if let Ok(loaded) = read_plan_file_for_report(&path) {
            let (plan, g) = loaded;
            let b = parse_bindings(&bindings(&plan));
            if let Ok(b) = b {
                let _ = plan_report_proven_on(
                    &plan,
                    &g,
                    &b,
                    Some(parse_budget("95%").unwrap()),
                    &Pricing::for_plan(&plan),
                );
            }
        }
    }
    assert!(decoded > 0, "some flips leave a decodable file");
    // Truncated, then stamped anew.
    for cut in (1..40).map(|k| 52 + k * (n - 52) / 40) {
        let mut b = bytes[..cut].to_vec();
        binary::stamp(&mut b).unwrap();
        assert!(binary::decode_with(&b, ELIDE).is_err());
    }
}
