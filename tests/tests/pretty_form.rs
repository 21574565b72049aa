//! StableHLO in the pretty form `jax.export(...).mlir_module()` prints imports to the same graph
//! as the generic form of the fixtures: for every JAX fixture, the exporter script
//! (`examples/export/export_all.py --pretty-of`, JAX's own printer: `mlir.module_to_string`, what
//! `mlir_module()` returns — the exporter checks that equality on every export) writes the pretty
//! form, and both forms import to the same textual IR (same ops, same types, same locations),
//! hence the same plan (checked on the small fixtures).

use ebb_pipeline::{compile, CompileOptions};
use ebb_testkit::{jax_fixture, jax_fixture_names, jax_fixtures_dir, scratch, test_python};
use std::process::Command;

#[test]
fn the_pretty_form_of_every_fixture_imports_to_the_same_graph() {
    let names = jax_fixture_names();
    let dir = scratch("pretty");
    let repo = jax_fixtures_dir().join("../../..");
    let out = Command::new(test_python())
        .arg(repo.join("examples/export/export_all.py"))
        .arg("--out")
        .arg(&*dir)
        .arg("--pretty-of")
        .args(names.iter().map(|n| jax_fixture(n)))
        .env("JAX_PLATFORMS", "cpu")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "export_all.py --pretty-of: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in &names {
        let pretty_path = dir.join(format!("{name}.mlir"));
        let text = std::fs::read_to_string(&pretty_path).unwrap();
        assert!(
            ebb_import::stablehlo::pretty::is_pretty(&text),
            "{name}: not in pretty form"
        );
        let (g, stats) = ebb_import::import_file(&jax_fixture(name), None).unwrap();
        let (p, pstats) = ebb_import::import_file(&pretty_path, None)
            .unwrap_or_else(|e| panic!("{name} (pretty form): {e}"));
        assert_eq!(p.op_count(), g.op_count(), "{name}: op count");
        assert_eq!(pstats.unresolved_dims, stats.unresolved_dims, "{name}");
        assert!(
            ebb_ir::text::print(&p) == ebb_ir::text::print(&g),
            "{name}: the pretty form imports to another graph"
        );
        let ops = g.op_count();
        if ops < 5000 {
            let plan = |g| {
                compile(g, &CompileOptions::default())
                    .unwrap()
                    .plan
                    .to_json()
            };
            assert!(plan(p) == plan(g), "{name}: another plan");
        }
        eprintln!("{name}: {ops} ops, same graph from the pretty form");
    }
}
