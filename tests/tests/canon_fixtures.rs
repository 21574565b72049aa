use std::path::Path;
use std::time::Instant;

#[test]
fn scratch_pipeline() {
    for name in ["mlp_sgd", "mlp_bf16", "cnn_sgd", "gpt2_tiny_adamw", "gpt2_tiny_remat", "gpt2_tiny_scan", "gpt2_small", "gpt2_24l"] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/jax/{name}.mlir"));
        let t = Instant::now();
        let (mut g, _) = ebb_compiler::stablehlo::import_file(&p).unwrap();
        let ti = t.elapsed();
        let before = ebb_ir::text::print(&g);
        let t = Instant::now();
        let r = ebb_passes::canon::pipeline(8).run(&mut g);
        let tp = t.elapsed();
        match r {
            Ok(r) => {
                println!("{name}: import {ti:?} canon {tp:?} ops {} -> {} iters {} {:?}", r.ops_before, r.ops_after, r.iterations, r.stop_reason);
                for run in &r.runs { println!("   {} {} {} changes {}us verify {}us", run.iteration, run.pass, run.result.changes, run.time_us, run.verify_us); }
            }
            Err(e) => println!("{name}: ERROR {e}"),
        }
        if name == "mlp_sgd" || name == "gpt2_tiny_scan" {
            std::fs::write(format!("/tmp/h5/{name}.before.txt"), before).unwrap();
            std::fs::write(format!("/tmp/h5/{name}.after.txt"), ebb_ir::text::print(&g)).unwrap();
        }
    }
}
