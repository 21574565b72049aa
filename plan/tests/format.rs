//! The plan format (`ebb_plan::format`): JSON round trips, version and index checks, helpers.

use ebb_ir::dim::{Bindings, DimExpr, Symbol, SymbolScope};
use ebb_ir::graph::{Relation, ShapeAssertion};
use ebb_plan::format::*;

fn sample() -> Plan {
    let mut symbols = SymbolScope::new();
    let s = symbols.declare("S");
    symbols.set_range(&s, None, Some(512));
    symbols.declare("B");
    let bytes: DimExpr = "256*B*S".parse().unwrap();
    Plan {
        version: PLAN_VERSION,
        graph_name: "main".into(),
        symbols,
        assertions: vec![ShapeAssertion {
            lhs: DimExpr::sym("B"),
            rel: Relation::Ge,
            rhs: DimExpr::constant(1),
            message: "B >= 1".into(),
        }],
        ops: 3,
        point_flops: None,
        point_bytes: None,
        point_kinds: None,
        device: None,
        graph_ir: None,
        graph_digest: None,
        alternatives: Vec::new(),
        kernels: Vec::new(),
        forced_swaps: Vec::new(),
        host_placed: Vec::new(),
        schedule: vec![OpPos::new(1), OpPos::new(2)],
        values: vec![
            PlanValue {
                node: OpPos::new(0),
                output: 0,
                bytes: bytes.clone(),
                def: Point::new(0),
                last_use: Point::new(1),
                class: ValueClass::Input,
            },
            PlanValue {
                node: OpPos::new(1),
                output: 0,
                bytes: bytes.clone(),
                def: Point::new(0),
                last_use: Point::new(1),
                class: ValueClass::Intermediate,
            },
            PlanValue {
                node: OpPos::new(2),
                output: 0,
                bytes: bytes.clone(),
                def: Point::new(1),
                last_use: Point::new(1),
                class: ValueClass::Output,
            },
        ],
        in_place_writes: Vec::new(),
        region_transients: vec![PointBytes {
            point: Point::new(1),
            bytes: "4*B".parse().unwrap(),
        }],
        candidates: vec![Candidate {
            value: ValueId::new(1),
            evict_after: Point::new(0),
            regenerate_before: Point::new(1),
            prefetch_at: Point::new(1),
            recompute: vec![OpPos::new(1)],
            recompute_reads: vec![ValueId::new(0)],
            bytes_saved: bytes.clone(),
            recompute_flops: "64*B*S".parse().unwrap(),
            transient_bytes: DimExpr::zero(),
            swap_bytes: bytes.clone(),
            regen_peak_bytes: Some(bytes.clone()),
            kinds: vec![DecisionKind::Recompute, DecisionKind::Swap],
        }],
        bound: Some(Bindings::from([
            (Symbol::new("B"), 4),
            (Symbol::new("S"), 512),
        ])),
        peak_terms: vec!["512*B*S".parse().unwrap()],
        thresholds: vec![Threshold {
            symbol: Symbol::new("S"),
            fixed: Bindings::from([(Symbol::new("B"), 4)]),
            budget: 1 << 20,
            over: vec![(257, 512)],
        }],
    }
}

#[test]
fn json_round_trips() {
    let p = sample();
    let j = p.to_json();
    assert!(j.contains("\"bytes_saved\": \"256*B*S\""), "{j}");
    assert!(
        j.contains("\"recompute\"") && j.contains("\"class\": \"intermediate\""),
        "{j}"
    );
    let back = Plan::from_json(&j).unwrap();
    assert_eq!(back, p);
    assert_eq!(back.to_json(), j);
}

#[test]
fn rejects_other_versions_and_bad_indices() {
    let mut p = sample();
    p.version = 1;
    assert!(matches!(
        Plan::from_json(&p.to_json()),
        Err(PlanError::Version { found: 1 })
    ));
    let mut p = sample();
    p.candidates[0].recompute_reads = vec![ValueId::new(7)];
    let e = Plan::from_json(&p.to_json()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "plan field `candidates.recompute_reads`[0] = 7 is out of range (< 3 expected)"
    );
    assert!(matches!(
        Plan::from_json("{\"version\": 3}"),
        Err(PlanError::Json { .. })
    ));
    // serde's names of the types it expected are not in the message.
    for text in [
        "[1, 2]",
        "{\"version\": \"x\"}",
        "{\"version\": 3, \"values\": 5}",
    ] {
        let e = Plan::from_json(text).unwrap_err().to_string();
        assert!(!e.contains("VersionOnly") && !e.contains("struct"), "{e}");
        assert!(e.starts_with("invalid plan JSON at line 1, column"), "{e}");
    }
}

#[test]
fn peak_and_threshold_helpers() {
    let p = sample();
    let b = p.bound.clone().unwrap();
    assert_eq!(p.peak_at(&b), Ok(512 * 4 * 512));
    let t = Threshold {
        over: vec![(100, 200), (300, 400)],
        ..p.thresholds[0].clone()
    };
    assert_eq!(t.first_over(), Some(100));
    assert!(t.exceeds(150) && !t.exceeds(250) && t.exceeds(400));
    assert!(p.candidates[0].allows(DecisionKind::Swap));
}

#[test]
fn typed_indices_serialize_as_bare_numbers() {
    let p = sample();
    let v = serde_json::to_string(&p.values[2]).unwrap();
    assert_eq!(
        v,
        r#"{"node":2,"output":0,"bytes":"256*B*S","def":1,"last_use":1,"class":"output"}"#
    );
    let c = &p.candidates[0];
    let j = serde_json::to_string(c).unwrap();
    assert!(
        j.starts_with(
            r#"{"value":1,"evict_after":0,"regenerate_before":1,"prefetch_at":1,"recompute":[1],"recompute_reads":[0],"#
        ),
        "{j}"
    );
    assert_eq!(&serde_json::from_str::<Candidate>(&j).unwrap(), c);
    let d = Decision {
        candidate: CandidateId::new(3),
        kind: DecisionKind::Swap,
    };
    assert_eq!(
        serde_json::to_string(&d).unwrap(),
        r#"{"candidate":3,"kind":"swap"}"#
    );
    let t = serde_json::to_string(&p.region_transients[0]).unwrap();
    assert_eq!(t, r#"{"point":1,"bytes":"4*B"}"#);
    assert!(p.to_json().contains("\"schedule\": [\n    1,\n    2\n  ]"));
    assert!(c.evict_point() < c.prefetch_point());
    assert_eq!(c.back_point(DecisionKind::Recompute), c.regenerate_point());
    assert_eq!(c.regenerate_point(), ProgPoint::before(Point::new(1)));
    assert_eq!(
        p.decisions_of_kind(DecisionKind::Swap)[0].candidate,
        CandidateId::new(0)
    );
}
