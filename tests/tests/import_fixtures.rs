//! Tests that every committed JAX fixture imports into a verified graph whose every dimension is
//! an expression over the named symbols, that the imported IR round-trips through the textual
//! IR, and that the import agrees with the export's metadata.

use ebb_import::stablehlo::import_file;
use ebb_ir::text;
use ebb_testkit::{jax_fixture, jax_fixture_names, jax_metadata};

#[test]
fn every_fixture_imports_with_no_unresolved_dims() {
    let names = jax_fixture_names();
    assert!(
        names.len() >= 8,
        "expected the committed fixtures, found {names:?}"
    );
    for name in names {
        let (g, stats) = import_file(&jax_fixture(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(stats.unresolved_dims, 0, "{name}");
        let meta = jax_metadata(&name);
        let symbols: Vec<String> = g
            .scope
            .symbols()
            .iter()
            .map(|s| s.name().to_string())
            .collect();
        let expected: Vec<String> = meta["symbols"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect();
        assert_eq!(symbols, expected, "{name}: symbols");
        assert_eq!(
            g.inputs().len(),
            meta["inputs"].as_array().unwrap().len(),
            "{name}: inputs"
        );
        assert_eq!(
            g.outputs().len(),
            meta["outputs"].as_array().unwrap().len(),
            "{name}: outputs"
        );
        // Input names come from the export's pytree paths, in @main's argument order.
        for (i, &id) in g.inputs().iter().enumerate() {
            let want = meta["inputs"][i]["path"].as_str().unwrap_or("");
            assert_eq!(g.input_name(id), want, "{name}: input {i} name");
        }
    }
}

#[test]
fn gpt2_small_summary_has_symbols_b_s() {
    let (g, stats) = import_file(&jax_fixture("gpt2_small")).unwrap();
    let s = ebb_compiler::report::import_summary(&g, &stats, std::time::Duration::ZERO);
    assert_eq!(s.symbols, vec!["B", "S"]);
    assert_eq!(s.unresolved_dims, 0);
    assert!(s.ops > 7000, "{} ops", s.ops);
    // 124M parameters + AdamW mu/nu in f32, and the step counter.
    let params: i64 = s.parameter_bytes.parse().unwrap();
    assert!(
        params > 3 * 124_000_000 * 4 && params < 3 * 126_000_000 * 4,
        "{params}"
    );
    // `S <= 1024` from jax's constraint became a range fact.
    let s_sym = g
        .scope
        .symbols()
        .into_iter()
        .find(|s| s.name() == "S")
        .unwrap();
    assert_eq!(g.scope.range(&s_sym).1, Some(1024));
}

#[test]
fn imported_ir_round_trips_through_text() {
    for name in jax_fixture_names().into_iter().filter(|n| n != "gpt2_24l") {
        let (g, _) = import_file(&jax_fixture(&name)).unwrap();
        let printed = text::print(&g);
        let back = text::parse(&printed).unwrap_or_else(|e| panic!("{name}: {e}"));
        ebb_ir::verify::verify(&back).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            text::print(&back),
            printed,
            "{name}: round trip changed the IR"
        );
        assert_eq!(back.op_count(), g.op_count());
    }
}

#[test]
fn imported_mlp_ir_snapshot() {
    let (g, _) = import_file(&jax_fixture("mlp_sgd")).unwrap();
    insta::assert_snapshot!("mlp_sgd_imported", text::print(&g));
}

#[test]
fn imported_gpt_block_ir_snapshot() {
    let (g, _) = import_file(&jax_fixture("gpt_block_sgd")).unwrap();
    insta::assert_snapshot!("gpt_block_sgd_imported", text::print(&g));
}
