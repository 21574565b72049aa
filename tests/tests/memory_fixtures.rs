//! The memory model on the real JAX fixtures: the symbolic peak evaluates to the concrete
//! peak at representative and typical shapes, the lower bound is below it, and the `while`
//! loop of the scan fixture is charged its body's transient memory.
//!
//! Run with `cargo test --release -p ebb-tests --test integration memory_fixtures --
//! --nocapture` to see the numbers.

use ebb_ir::{Bindings, Graph, Symbol};
use ebb_passes::memory::{liveness, lower_bound, program_order};
use ebb_testkit::import_fixture as import;
use std::time::Instant;

const FIXTURES: &[&str] = &[
    "mlp_sgd",
    "mlp_bf16",
    "cnn_sgd",
    "gpt2_tiny_adamw",
    "gpt2_tiny_remat",
    "gpt2_tiny_scan",
    "gpt2_small",
];

/// Typical shapes: B = 8 and, where the graph has it, S = 128.
fn typical(g: &Graph) -> Bindings {
    g.scope
        .symbols()
        .into_iter()
        .map(|s| (s.clone(), if s == Symbol::new("S") { 128 } else { 8 }))
        .collect()
}

#[test]
fn symbolic_peak_matches_the_peak_and_the_lower_bound_is_below_it() {
    for name in FIXTURES {
        let g = import(name);
        let t = Instant::now();
        let live = liveness(&g, &program_order(&g));
        let sym = live.symbolic_peak(&g.scope);
        let took = t.elapsed();
        let mut bindings = g.scope.representative_bindings(6);
        bindings.push(typical(&g));
        for b in &bindings {
            let Ok((peak, _)) = live.peak(b) else {
                continue;
            };
            assert_eq!(sym.eval(b), Ok(peak), "{name} at {b:?}");
            let lb = lower_bound(&g, b).unwrap();
            assert!(
                lb <= peak,
                "{name} at {b:?}: lower bound {lb} > peak {peak}"
            );
        }
        let b = typical(&g);
        println!(
            "{name}: {} ops, liveness + symbolic peak {took:?}, {} terms; at {b:?}: peak {} bytes, lower bound {} bytes",
            g.op_count(),
            sym.terms.len(),
            live.peak(&b).unwrap().0,
            lower_bound(&g, &b).unwrap()
        );
    }
}

#[test]
fn scan_loop_is_charged_its_body_transient_memory() {
    let g = import("gpt2_tiny_scan");
    let live = liveness(&g, &program_order(&g));
    // The loops' transients (the others are in-place writes, negative).
    let loops: Vec<_> = live
        .transients
        .iter()
        .filter(|t| g.node(t.node).kind() == ebb_ir::OpKind::While)
        .collect();
    assert!(
        !loops.is_empty(),
        "the scan fixture has a while loop over the layers"
    );
    let b = ebb_testkit::bs(8, 128);
    let writes = ebb_ir::op::in_place_writes(&g);
    for t in &loops {
        let bytes = t.bytes.eval(&b).unwrap();
        // A loop result its body returns unchanged takes its operand's buffer: its bytes are
        // subtracted from the loop's charge (the body's own peak).
        let shared = writes.get(&t.node).map_or(0, |w| {
            ebb_ir::op::in_place_bytes(&g, t.node, w)
                .unwrap()
                .eval(&b)
                .unwrap()
        });
        assert!(bytes + shared > 0, "a layer body allocates activations");
        println!(
            "while at point {}: transient {} = {bytes} bytes at B=8, S=128",
            t.point, t.bytes
        );
    }
    let resident = live.resident_bytes(&b).unwrap();
    let t = loops[0];
    let without: i64 = live
        .live_at(t.point)
        .iter()
        .map(|&i| live.ranges[i].bytes.eval(&b).unwrap())
        .sum();
    assert_eq!(
        resident[t.point.index()],
        without + t.bytes.eval(&b).unwrap()
    );
}
