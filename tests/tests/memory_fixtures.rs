use std::path::Path;

#[test]
fn probe_import() {
    for name in ["gpt2_tiny_adamw", "gpt2_small", "gpt2_24l", "gpt2_tiny_scan"] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/jax/{name}.mlir"));
        let t = std::time::Instant::now();
        match ebb_compiler::stablehlo::import_file(&p) {
            Ok((g, _)) => {
                println!("{name}: {} ops in {:?}; scope {:?}", g.op_count(), t.elapsed(), g.scope);
                if name == "gpt2_tiny_adamw" { std::fs::write("/tmp/h4_tiny.txt", ebb_ir::text::print(&g)).unwrap(); }
            }
            Err(e) => println!("{name}: ERROR {e}"),
        }
    }
}
