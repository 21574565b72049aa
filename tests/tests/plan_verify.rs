//! Plans read from files are verified against their embedded graph
//! (`ebb_passes::plan::verify`): the plans the compiler writes verify, and every tampering —
//! a list of hand-picked edits, then seeded random edits of the value table, the schedule, the
//! costs, the peak terms and the candidates — is refused.

use ebb_passes::plan::verify_plan;
use ebb_pipeline::api::Compiler;
use ebb_plan::format::Plan;
use ebb_testkit::{jax_fixture, unfused_options};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use serde_json::{json, Value};

/// The compiled plan of `name` as JSON (with its schedule variants), unfused with every input
/// kept (`--fusion off --donate keep`: the tamperings below name that plan's fields).
fn plan_json(name: &str) -> Value {
    let plan = Compiler::new(unfused_options())
        .compile_file(&jax_fixture(name))
        .unwrap();
    serde_json::from_str(&plan.to_json()).unwrap()
}

/// Reads `v` as a plan file is read, then verifies it; the error in words.
fn load(v: &Value) -> Result<Plan, String> {
    let plan = Plan::from_json(&v.to_string()).map_err(|e| e.to_string())?;
    verify_plan(&plan).map_err(|e| e.to_string())?;
    Ok(plan)
}

fn refused(v: &Value, what: &str) -> String {
    match load(v) {
        Ok(_) => panic!("{what}: the tampered plan verifies"),
        Err(e) => e,
    }
}

/// A string expression edited into another one (an extra term).
fn bump(e: &Value) -> Value {
    json!(format!("{} + 4", e.as_str().unwrap()))
}

#[test]
fn compiled_plans_verify_and_named_tamperings_are_refused() {
    let base = plan_json("gpt2_tiny_adamw");
    assert!(
        !base["alternatives"].as_array().unwrap().is_empty(),
        "the fixture should have schedule variants"
    );
    load(&base).unwrap();
    type Edit = fn(&mut Value);
    let edits: Vec<(&str, &str, Edit)> = vec![
        ("edited value size", "values[300]", |p| {
            p["values"][300]["bytes"] = json!("4*B*S")
        }),
        ("a variant's value size", "plan variant 2", |p| {
            p["alternatives"][1]["values"][300]["bytes"] = json!("4*B*S")
        }),
        ("last use before definition", "live range", |p| {
            let v = p["values"]
                .as_array_mut()
                .unwrap()
                .iter_mut()
                .find(|v| v["def"].as_u64().unwrap() > 5)
                .unwrap();
            v["last_use"] = json!(v["def"].as_u64().unwrap() - 2);
        }),
        ("duplicated schedule entry", "scheduled twice", |p| {
            p["schedule"][10] = p["schedule"][11].clone()
        }),
        ("a variant with an impossible peak", "plan variant 1", |p| {
            p["alternatives"][0]["peak_terms"] = json!(["1"])
        }),
        ("negative FLOPs", "point_flops[5]", |p| {
            p["point_flops"][5] = json!("-100")
        }),
        ("symbol range", "symbols", |p| {
            p["symbols"]["symbols"][0]["hi"] = json!(8)
        }),
        ("edited embedded graph", "digest", |p| {
            let g = p["graph_ir"]
                .as_str()
                .unwrap()
                .replacen(" = add(", " = subtract(", 1);
            p["graph_ir"] = json!(g);
        }),
        ("no digest", "does not embed", |p| {
            p.as_object_mut().unwrap().remove("graph_digest");
        }),
        ("candidate bytes", "candidates[3]", |p| {
            p["candidates"][3]["bytes_saved"] = json!("1")
        }),
        ("candidate window", "window", |p| {
            let c = &mut p["candidates"][3];
            c["regenerate_before"] = c["evict_after"].clone();
        }),
        ("region transient", "region transient", |p| {
            p["region_transients"] = json!([{"point": 3, "bytes": "1000000"}])
        }),
        ("peak terms dropped", "peak_terms", |p| {
            let t = p["peak_terms"][0].clone();
            p["peak_terms"] = json!([bump(&t)]);
        }),
        ("value class", "values[0]", |p| {
            p["values"][0]["class"] = json!("intermediate")
        }),
        ("a variant's schedule out of range", "out of range", |p| {
            // Found by the `plan_load` fuzz target: alternatives' indices were not checked.
            p["alternatives"][0]["schedule"][0] = json!(100000)
        }),
        (
            "threshold",
            "thresholds[0]",
            |p| {
                p["thresholds"] = json!([{"symbol": "B", "fixed": {"S": 64}, "budget": 1000000, "over": [[1, 2]]}])
            },
        ),
    ];
    for (what, says, edit) in edits {
        let mut p = base.clone();
        edit(&mut p);
        let e = refused(&p, what);
        assert!(
            e.contains(says),
            "{what}: the error `{e}` should say `{says}`"
        );
    }
}

#[test]
fn seeded_random_tamperings_are_refused() {
    let base = plan_json("mlp_sgd");
    load(&base).unwrap();
    let n_values = base["values"].as_array().unwrap().len();
    let n_points = base["schedule"].as_array().unwrap().len();
    let n_cands = base["candidates"].as_array().unwrap().len();
    assert!(n_cands > 0);
    let mut rng = Pcg64::seed_from_u64(15);
    for round in 0..200 {
        let mut p = base.clone();
        let what = match rng.random_range(0..7) {
            0 => {
                let v = rng.random_range(0..n_values);
                p["values"][v]["bytes"] = bump(&p["values"][v]["bytes"]);
                format!("values[{v}].bytes")
            }
            1 => {
                let v = rng.random_range(0..n_values);
                let old = p["values"][v]["last_use"].as_u64().unwrap() as usize;
                let new = (old + rng.random_range(1..n_points)) % n_points;
                p["values"][v]["last_use"] = json!(new);
                format!("values[{v}].last_use {old} -> {new}")
            }
            2 => {
                let (a, b) = (rng.random_range(0..n_points), rng.random_range(0..n_points));
                if a == b {
                    continue;
                }
                let s = p["schedule"].as_array_mut().unwrap();
                s.swap(a, b);
                format!("schedule {a} <-> {b}")
            }
            3 => {
                let k = rng.random_range(0..n_points);
                p["point_flops"][k] = bump(&p["point_flops"][k]);
                format!("point_flops[{k}]")
            }
            4 => {
                let k = rng.random_range(0..n_points);
                p["point_bytes"][k] = bump(&p["point_bytes"][k]);
                format!("point_bytes[{k}]")
            }
            5 => {
                let k = rng.random_range(0..p["peak_terms"].as_array().unwrap().len());
                let t = p["peak_terms"][k].clone();
                // A larger term: the peak the plan claims grows past the simulated one.
                p["peak_terms"][k] = json!(format!("{} + 65536", t.as_str().unwrap()));
                format!("peak_terms[{k}]")
            }
            _ => {
                // A window that leaves the value's live range or closes on itself.
                let c = rng.random_range(0..n_cands);
                let cand = &p["candidates"][c];
                let v = cand["value"].as_u64().unwrap() as usize;
                let at = |x: &Value| x.as_u64().unwrap() as usize;
                let (def, last) = (at(&p["values"][v]["def"]), at(&p["values"][v]["last_use"]));
                let (evict, regen) = (at(&cand["evict_after"]), at(&cand["regenerate_before"]));
                let (field, new) = if rng.random_range(0..2) == 0 {
                    let bad: Vec<usize> = (0..def).chain(regen..n_points).collect();
                    ("evict_after", bad[rng.random_range(0..bad.len())])
                } else {
                    let bad: Vec<usize> = (0..=evict).chain(last + 1..n_points).collect();
                    ("regenerate_before", bad[rng.random_range(0..bad.len())])
                };
                p["candidates"][c][field] = json!(new);
                format!("candidates[{c}].{field} -> {new}")
            }
        };
        if p == base {
            continue;
        }
        refused(&p, &format!("round {round}: {what}"));
    }
}

/// Budget thresholds (computed through the API, not the CLI) verify when they are what the
/// peak terms give, and are refused once edited.
#[test]
fn budget_thresholds_verify_when_recomputed_and_not_when_edited() {
    let mut plan = Compiler::new(unfused_options())
        .compile_file(&jax_fixture("mlp_sgd"))
        .unwrap();
    let g = verify_plan(&plan).unwrap();
    let b = g.scope.symbols()[0].clone();
    let peak = plan.peak_at(&ebb_testkit::bind(&[("B", 64)])).unwrap();
    let t = ebb_passes::remat::threshold::threshold_in_scope(
        &g.scope,
        &plan.peak_terms,
        &b,
        &Default::default(),
        peak,
    )
    .unwrap();
    assert!(t.first_over().is_some());
    plan.thresholds.push(t);
    verify_plan(&plan).unwrap();
    plan.thresholds[0].over[0].0 += 1;
    let e = verify_plan(&plan).unwrap_err().to_string();
    assert!(e.contains("thresholds[0]"), "{e}");
}
