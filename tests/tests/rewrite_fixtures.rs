//! The e-graph rewrite groups (`ebb_passes::rewrite`) on the real JAX fixtures: each group
//! runs on the imported training step, the result verifies and keeps the interface, never
//! materializes more bytes than the input under the cost model, and the change in peak
//! memory (simple liveness over the program order) is reported at B=8,S=256 and
//! B=4,S=1024.
//!
//! Run with `cargo test --release -p ebb-tests --test rewrite_fixtures -- --nocapture` to
//! see the figures (one line per fixture and group).

use ebb_compiler::stablehlo::import_file;
use ebb_ir::{Bindings, Graph, OpKind, Symbol};
use ebb_passes::rewrite::{rewrite, Limits, RewriteReport, RuleGroup, StopReason};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

fn fixture(name: &str) -> Graph {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/jax").join(format!("{name}.mlir"));
    import_file(&p).unwrap_or_else(|e| panic!("importing {name}: {e}")).0
}

fn bind(b: i64, s: i64) -> Bindings {
    [(Symbol::new("B"), b), (Symbol::new("S"), s)].into_iter().collect()
}

/// Peak bytes of `g` in program order: inputs resident for the whole step, every other value
/// live from its op to its last use (outputs to the end).
fn peak(g: &Graph, b: &Bindings) -> i64 {
    let order = g.order();
    let pos: HashMap<_, _> = order.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let n = order.len();
    let mut last = vec![0usize; n];
    for (i, &id) in order.iter().enumerate() {
        last[i] = i;
        for v in g.operands(id) {
            let p = pos[&v.node];
            last[p] = last[p].max(i);
        }
    }
    for v in g.outputs() {
        last[pos[&v.node]] = n;
    }
    let mut delta = vec![0i64; n + 2];
    let mut resident = 0i64;
    for (i, &id) in order.iter().enumerate() {
        let node = g.node(id);
        let bytes: i64 = node.outputs.iter().map(|t| t.size_bytes().eval(b).expect("size evaluates")).sum();
        if node.kind == OpKind::Input {
            resident += bytes;
        } else {
            delta[i] += bytes;
            delta[last[i] + 1] -= bytes;
        }
    }
    let (mut cur, mut best) = (0i64, 0i64);
    for d in delta.iter().take(n + 1) {
        cur += d;
        best = best.max(cur);
    }
    resident + best
}

fn mib(x: i64) -> f64 {
    x as f64 / (1 << 20) as f64
}

/// Runs every group alone and all together on fixture `name`; checks the invariants and
/// prints the figures.
fn run_fixture(name: &str) -> Vec<(String, RewriteReport, [i64; 4])> {
    let g = fixture(name);
    let shapes = [bind(8, 256), bind(4, 1024)];
    let base = [peak(&g, &shapes[0]), peak(&g, &shapes[1])];
    let mut out = Vec::new();
    let mut runs: Vec<(String, Vec<RuleGroup>)> = RuleGroup::ALL.iter().map(|g| (g.name().to_string(), vec![*g])).collect();
    runs.push(("all".into(), RuleGroup::ALL.to_vec()));
    for (label, groups) in runs {
        let t = Instant::now();
        let (r, rep) = rewrite(&g, &groups, &Limits::default()).unwrap_or_else(|e| panic!("{name} {label}: {e}"));
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(r.inputs().len(), g.inputs().len());
        assert_eq!(r.outputs().len(), g.outputs().len());
        assert_eq!(r.output_names, g.output_names);
        assert_eq!(r.assertions, g.assertions);
        for (a, b) in r.outputs().iter().zip(g.outputs()) {
            assert_eq!(r.value_type(*a), g.value_type(*b), "{name} {label}: output type changed");
        }
        for (after, before) in rep.bytes_after.iter().zip(&rep.bytes_before) {
            assert!(after <= before, "{name} {label}: extraction materializes more bytes ({after} > {before})");
        }
        assert!(!matches!(rep.stop_reason, StopReason::Other(_)), "{name} {label}: {:?}", rep.stop_reason);
        let p = [peak(&r, &shapes[0]), peak(&r, &shapes[1])];
        let applied: usize = rep.applied.values().sum();
        println!(
            "{name:16} {label:18} {secs:6.2}s stop={:?} iters={} enodes={} applied={applied} changed={} ops {}->{} \
             peak@B8S256 {:.2}->{:.2} MiB ({:+.2}%) peak@B4S1024 {:.2}->{:.2} MiB ({:+.2}%)",
            rep.stop_reason,
            rep.iterations,
            rep.egraph_nodes,
            rep.classes_changed,
            rep.ops_before,
            rep.ops_after,
            mib(base[0]),
            mib(p[0]),
            100.0 * (p[0] - base[0]) as f64 / base[0] as f64,
            mib(base[1]),
            mib(p[1]),
            100.0 * (p[1] - base[1]) as f64 / base[1] as f64,
        );
        println!("    times: encode {:.0} ms, saturate {:.0} ms, extract+emit {:.0} ms, total {:.0} ms", rep.encode_ms, rep.saturate_ms, rep.extract_ms, rep.total_ms);
        for (rule, n) in rep.applied.iter().filter(|(_, n)| **n > 0) {
            println!("    {rule}: {n}");
        }
        out.push((label, rep, [base[0], p[0], base[1], p[1]]));
    }
    out
}

#[test]
fn tests_that_every_group_rewrites_gpt2_tiny_adamw() {
    let runs = run_fixture("gpt2_tiny_adamw");
    let fold = &runs.iter().find(|(l, ..)| l == "fold_transpose_dot").expect("run").1;
    assert!(fold.applied.values().sum::<usize>() > 0, "JAX's backward matmuls take transposed operands");
}

#[test]
fn tests_that_every_group_rewrites_gpt2_small() {
    let runs = run_fixture("gpt2_small");
    for (label, rep, _) in &runs {
        assert!(rep.total_ms < 10_000.0, "{label}: {} ms", rep.total_ms);
    }
}

#[test]
#[ignore = "22k ops; run with --ignored --release for the timing figure"]
fn tests_that_every_group_rewrites_gpt2_24l() {
    run_fixture("gpt2_24l");
}
