//! Tests of the executor itself: schedule validation, input checks, typed errors (never
//! panics), freeing after the last use and the resident-bytes accounting; and the `.npz`
//! reader on the JAX reference files.

use crate::common;
use common::*;
use ebb_ir::NodeId;
use ebb_runtime::npz::{load_npz, Npz};
use ebb_runtime::{execute, program_schedule, ExecError, NpzError};
use std::path::PathBuf;

const CHAIN: &str = "graph @t {
  symbols B in [1, inf)
  %0 = input {index = 0, name = \"x\"} : f32[B,4]
  %1 = exponential(%0) : f32[B,4]
  %2 = negate(%0) : f32[B,4]
  %3 = add(%1, %2) : f32[B,4]
  %4 = sqrt(%0) : f32[B,4]
  %5 = constant {value = dense<1.0> : f32} : f32[B,2]
  return %3, %0, %3
}";

/// Tests the resident bytes at every point: the input stays resident, `%1` and `%2` are freed
/// after `%3`, the unused `%4` lives at its own point only, the output `%3` stays to the end,
/// an output listed twice or an input listed as an output is not double counted.
#[test]
fn resident_bytes_follow_the_memory_model() {
    let x = 4 * 2 * 4; // f32[2,4]
    let (out, stats) = run_with_stats(CHAIN, &[("B", 2)], vec![arange(&[2, 4])]).unwrap();
    assert_eq!(out.len(), 3);
    assert!(out[0].bits_eq(&out[2]));
    assert_eq!(stats.input_bytes, x);
    assert_eq!(
        stats.resident_bytes,
        vec![2 * x, 3 * x, 4 * x, 3 * x, 2 * x + 16]
    );
    assert_eq!(
        (stats.peak_bytes, stats.peak_point),
        (4 * x, ebb_ir::Point::new(2))
    );
}

/// Tests that any topological order runs and gives the same outputs, and that orders that are
/// not topological, repeat or miss an op, or contain an input are rejected with a typed error.
#[test]
fn schedules_are_validated() {
    let g = graph(CHAIN);
    let b = bind(&[("B", 2)]);
    let s = program_schedule(&g);
    let reordered: Vec<NodeId> = vec![s[4], s[3], s[1], s[0], s[2]];
    let (a, _) = execute(&g, &s, &b, vec![arange(&[2, 4])]).unwrap();
    let (c, _) = execute(&g, &reordered, &b, vec![arange(&[2, 4])]).unwrap();
    assert!(a[0].bits_eq(&c[0]));
    let bad: [(Vec<NodeId>, &str); 4] = [
        (vec![s[2], s[0], s[1], s[3], s[4]], "before it is computed"),
        (vec![s[0], s[0], s[1], s[2], s[3]], "scheduled twice"),
        (s[..4].to_vec(), "non-input ops"),
        (vec![g.inputs()[0], s[0], s[1], s[2], s[3]], "is an input"),
    ];
    for (order, msg) in bad {
        let e = execute(&g, &order, &b, vec![arange(&[2, 4])]).unwrap_err();
        assert!(
            matches!(e, ExecError::Schedule { .. }) && e.to_string().contains(msg),
            "{e}"
        );
    }
}

/// Tests the input checks: count, shape at the bindings, element type; and an unbound symbol.
#[test]
fn inputs_and_bindings_are_checked() {
    let g = graph(CHAIN);
    let s = program_schedule(&g);
    let e = execute(&g, &s, &bind(&[("B", 2)]), vec![]).unwrap_err();
    assert!(
        matches!(
            e,
            ExecError::InputCount {
                expected: 1,
                got: 0,
                ..
            }
        ),
        "{e}"
    );
    let e = execute(&g, &s, &bind(&[("B", 3)]), vec![arange(&[2, 4])]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "input 0 (`x`) of graph `t`: expected f32[3,4] at the bindings, got f32[2,4]"
    );
    let e = execute(&g, &s, &bind(&[("B", 2)]), vec![i32t(&[2, 4], &[0; 8])]).unwrap_err();
    assert!(e.to_string().contains("got i32[2,4]"), "{e}");
    let e = execute(&g, &s, &bind(&[]), vec![arange(&[2, 4])]).unwrap_err();
    assert!(
        matches!(e, ExecError::Shape { .. }) && e.to_string().contains("`B` is not bound"),
        "{e}"
    );
}

/// Tests that a custom_call is reported as unsupported with its target and location, and
/// that a kernel error names the op and its location instead of panicking.
#[test]
fn unsupported_ops_and_kernel_errors_are_typed() {
    let src = "graph @t {
  %0 = input {index = 0, name = \"x\"} : f32[2]
  %1 = custom_call(%0) {call_target_name = \"Sharding\"} : f32[2] loc(\"model.py:3:4\")
  return %1
}";
    let e = run(src, &[], vec![arange(&[2])]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "unsupported op `custom_call` (target \"Sharding\") at model.py:3:4"
    );
    // a dynamic_slice whose start index operand is not a scalar
    let src = "graph @t {
  %0 = input {index = 0, name = \"x\"} : f32[4]
  %1 = input {index = 1, name = \"i\"} : i32[2]
  %2 = slice(%1) {limit_indices = dims[1], start_indices = dims[0], strides = dims[1]} : i32[1]
  %3 = dynamic_slice(%0, %2) {slice_sizes = dims[2]} : f32[2] loc(\"f.py:1:1\")
  return %3
}";
    let e = run(src, &[], vec![arange(&[4]), i32t(&[2], &[1, 2])]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "op `dynamic_slice` at f.py:1:1: start indices must be scalars"
    );
}

/// File `name` of the JAX fixtures directory.
fn fixture(name: &str) -> PathBuf {
    ebb_testkit::jax_fixtures_dir().join(name)
}

/// Tests reading a JAX reference archive: names, element types and shapes.
#[test]
fn npz_reads_the_jax_references() {
    let all = load_npz(&fixture("mlp_sgd.ref1.npz")).unwrap();
    assert_eq!(all.len(), 8 + 7);
    assert_eq!(all["in_6"].shape(), &[3, 64]);
    assert_eq!(all["in_7"].dtype(), ebb_ir::DType::I32);
    assert_eq!(all["out_0"].shape(), &[] as &[usize]);
    let mut z = Npz::open(&fixture("mlp_sgd.ref1.npz")).unwrap();
    assert!(matches!(z.get("nope"), Err(NpzError::Missing { .. })));
    assert!(matches!(
        Npz::open(&fixture("mlp_sgd.json")),
        Err(NpzError::Zip { .. })
    ));
    assert!(matches!(
        Npz::open(&fixture("missing.npz")),
        Err(NpzError::Io { .. })
    ));
}
