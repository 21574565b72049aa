use std::collections::BTreeMap;
use std::path::Path;

#[test]
fn scratch_histogram() {
    for name in ["mlp_sgd", "gpt2_tiny_adamw", "gpt2_tiny_scan", "cnn_sgd"] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/jax/{name}.mlir"));
        match ebb_compiler::stablehlo::import_file(&p) {
            Ok((g, _)) => {
                let mut h: BTreeMap<&str, usize> = BTreeMap::new();
                for &id in g.order() { *h.entry(g.node(id).kind.name()).or_default() += 1; }
                println!("{name}: {} ops {:?}", g.op_count(), h);
                if name == "mlp_sgd" { std::fs::write("/tmp/h5/mlp_sgd.txt", ebb_ir::text::print(&g)).unwrap(); }
                if name == "gpt2_tiny_scan" { std::fs::write("/tmp/h5/scan.txt", ebb_ir::text::print(&g)).unwrap(); }
            }
            Err(e) => println!("{name}: ERROR {e}"),
        }
    }
}
