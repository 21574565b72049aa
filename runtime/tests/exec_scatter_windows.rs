//! Tests that `scatter` with a recognized body (`add`, overwrite), whose windows are applied as
//! strided blocks, is bit-identical to the same scatter through the general per-element path
//! (a body that computes the same value but is not recognized: `(a ⊕ b) + (-0.0)`, exact for
//! every float), on overlapping windows (order matters for float sums), windows sticking out
//! of the input on either side, a strided innermost window dimension and windows whose
//! dimensions merge into one contiguous run.

use crate::common;
use common::*;

/// A one-scatter graph: input `x` of `xt`, indices `i32[idx]`, updates `ut`, attributes
/// `attrs`; the body returns `ret` after `ops` (`%0` = current, `%1` = update).
fn graph_of(xt: &str, idx: &str, ut: &str, attrs: &str, ops: &str, ret: &str) -> String {
    format!(
        "graph @t {{
  %0 = input {{index = 0, name = \"x\"}} : f32{xt}
  %1 = input {{index = 1, name = \"i\"}} : i32{idx}
  %2 = input {{index = 2, name = \"u\"}} : f32{ut}
  %3 = scatter(%0, %1, %2) {{{attrs}, indices_are_sorted = false, unique_indices = false}} : f32{xt} {{
    region @body {{
      %0 = input {{index = 0, name = \"\"}} : f32[]
      %1 = input {{index = 1, name = \"\"}} : f32[]
      {ops}
      return {ret}
    }}
  }}
  return %3
}}"
    )
}

/// Runs the scatter with the recognized `add` and overwrite bodies and with their general
/// equivalents (`%9` = -0.0 added last: the body has more than one op, so it is not
/// recognized); asserts each pair bit-identical.
fn check(xs: &[usize], xt: &str, is: &[usize], idx: &[i32], us: &[usize], attrs: &str) {
    let (xn, un) = (xs.iter().product(), us.iter().product());
    let (ist, ust) = (format!("[{}]", dims(is)), format!("[{}]", dims(us)));
    let inputs = || {
        vec![
            f32t(xs, &values(xn, 3)),
            i32t(is, idx),
            f32t(us, &values(un, 7)),
        ]
    };
    let cases = [
        (
            "add",
            "%2 = add(%0, %1) : f32[]",
            "%2",
            "%3 = add(%2, %9) : f32[]",
        ),
        ("overwrite", "", "%1", "%3 = add(%1, %9) : f32[]"),
    ];
    for (name, fast_ops, fast_ret, general_extra) in cases {
        let fast = graph_of(xt, &ist, &ust, attrs, fast_ops, fast_ret);
        let general = graph_of(
            xt,
            &ist,
            &ust,
            attrs,
            &format!(
                "%9 = constant {{value = dense<-0.0> : f32}} : f32[]\n      {fast_ops}\n      {general_extra}"
            ),
            "%3",
        );
        let want = run(&general, &[], inputs()).unwrap_or_else(|e| panic!("{e}"));
        let got = run(&fast, &[], inputs()).unwrap_or_else(|e| panic!("{e}"));
        assert_bits(&got, &want, &format!("{name} on {xt}"));
    }
}

/// Tests 2-D windows of `[5, 3]` into `f32[5, 7]` at columns 1, 6 (sticks out), 1 again
/// (overlaps the first) and -1 (sticks out before the start): contiguous inner rows.
#[test]
fn scatter_windows_overlapping_and_partial() {
    check(
        &[5, 7],
        "[5,7]",
        &[4, 1],
        &[1, 6, 1, -1],
        &[4, 5, 3],
        "index_vector_dim = 1, scatter_dims_to_operand_dims = [1], update_window_dims = [1, 2]",
    );
}

/// Tests windows along the strided first dimension of `f32[6, 3]` (the last dimension
/// inserted): columns 2, 0 and 2 again.
#[test]
fn scatter_windows_with_a_strided_inner_dimension() {
    check(
        &[6, 3],
        "[6,3]",
        &[3, 1],
        &[2, 0, 2],
        &[3, 6],
        "index_vector_dim = 1, inserted_window_dims = [1], scatter_dims_to_operand_dims = [1], update_window_dims = [1]",
    );
}

/// Tests whole `[4, 5]` planes of `f32[3, 4, 5]` (merged into one run of 20) at planes 2, 2
/// and 0, and a JAX-style column block `[2, 2]` of `f32[2, 6]` at a scalar index.
#[test]
fn scatter_windows_merged_and_single() {
    check(
        &[3, 4, 5],
        "[3,4,5]",
        &[3, 1],
        &[2, 2, 0],
        &[3, 4, 5],
        "index_vector_dim = 1, inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], update_window_dims = [1, 2]",
    );
    check(
        &[2, 6],
        "[2,6]",
        &[1],
        &[3],
        &[2, 2],
        "index_vector_dim = 0, scatter_dims_to_operand_dims = [1], update_window_dims = [0, 1]",
    );
}
