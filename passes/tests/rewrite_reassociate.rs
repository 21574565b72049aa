//! Tests of the `reassociate` rule group: proofs on small graphs (`rule_test!`), and
//! before/after IR snapshots, negative cases included.

use crate::rewrite_util;

use ebb_passes::rewrite::RuleGroup;
use rewrite_util::{before_after, graph, run};

const G: [RuleGroup; 1] = [RuleGroup::Reassociate];

/// A reduction of `%{x}` over `{dims}` with a body `{body}` (e.g. `add`, `maximum`) into
/// type `{ty}`, initialized with `%{init}`.
fn reduce(id: usize, x: usize, init: usize, dims: &str, body: &str, ty: &str) -> String {
    format!(
        r#"  %{id} = reduce(%{x}, %{init}) {{dimensions = [{dims}]}} : {ty} {{
    region @body {{
      %0 = input {{index = 0, name = ""}} : f32[]
      %1 = input {{index = 1, name = ""}} : f32[]
      %2 = {body}(%0, %1) : f32[]
      return %2
    }}
  }}"#
    )
}

/// Bias gradient of a layer used twice: `sum(dx1) + sum(dx2)` while `dx1 + dx2` is also
/// computed (the gradient flowing on). `init` is the reduction's init constant.
fn bias_gradient(body: &str, dims2: &str, with_sum: bool, init: &str) -> String {
    let sum = if with_sum {
        "  %3 = add(%0, %1) : f32[B,S,64]\n"
    } else {
        "  %3 = multiply(%0, %1) : f32[B,S,64]\n"
    };
    format!(
        r#"  %0 = input {{index = 0, name = "dx1"}} : f32[B,S,64]
  %1 = input {{index = 1, name = "dx2"}} : f32[B,S,64]
  %2 = constant {{value = dense<{init}> : f32}} : f32[]
{sum}{}
{}
  %6 = add(%4, %5) : f32[64]
  return %6, %3"#,
        reduce(4, 0, 2, "0, 1", body, "f32[64]"),
        reduce(5, 1, 2, dims2, body, "f32[64]"),
    )
}

rule_test!(
    /// Tests that two sum-reductions of a computed sum's terms become one reduction.
    merges_sum_reductions_of_an_existing_sum, G, &bias_gradient("add", "0, 1", true, "0.0")
    => "(reduce ?k (add input:0 input:1) ?z)"
);

rule_test!(
    /// Tests that the rules do not merge reductions when `dx1 + dx2` is not already computed
    /// (that would materialize a new full-size tensor).
    does_not_merge_reductions_when_the_sum_is_not_computed, G, &bias_gradient("add", "0, 1", false, "0.0")
    =>; not "(reduce ?k (add input:0 input:1) ?z)"
);

rule_test!(
    /// Tests that the rules do not merge max-reductions.
    does_not_merge_max_reductions, G, &bias_gradient("maximum", "0, 1", true, "0.0")
    =>; not "(reduce ?k (add input:0 input:1) ?z)"
);

rule_test!(
    /// Tests that the rules do not merge reductions with a non-zero init value (it would
    /// be added once instead of twice).
    does_not_merge_reductions_with_a_nonzero_init, G, &bias_gradient("add", "0, 1", true, "1.0")
    =>; not "(reduce ?k (add input:0 input:1) ?z)"
);

rule_test!(
    /// Tests the LayerNorm-backward chain of JAX: `reshape(sum(-a)) + reshape(sum(-b))`
    /// with `a + b` computed becomes `reshape(-(sum(a + b)))`.
    merges_a_negated_reshaped_gradient_accumulation_chain, G, r#"
  %0 = input {index = 0, name = "a"} : f32[B,S,64]
  %1 = input {index = 1, name = "b"} : f32[B,S,64]
  %2 = constant {value = dense<0.0> : f32} : f32[]
  %3 = add(%0, %1) : f32[B,S,64]
  %4 = negate(%0) : f32[B,S,64]
  %5 = negate(%1) : f32[B,S,64]
  %6 = reduce(%4, %2) {dimensions = [2]} : f32[B,S] {
    region @body {
      %0 = input {index = 0, name = ""} : f32[]
      %1 = input {index = 1, name = ""} : f32[]
      %2 = add(%0, %1) : f32[]
      return %2
    }
  }
  %7 = reshape(%6) {shape = dims[B, S, 1]} : f32[B,S,1]
  %8 = reduce(%5, %2) {dimensions = [2]} : f32[B,S] {
    region @body {
      %0 = input {index = 0, name = ""} : f32[]
      %1 = input {index = 1, name = ""} : f32[]
      %2 = add(%0, %1) : f32[]
      return %2
    }
  }
  %9 = reshape(%8) {shape = dims[B, S, 1]} : f32[B,S,1]
  %10 = add(%7, %9) : f32[B,S,1]
  return %10, %3"#
    => "(reshape ?s (negate (reduce ?k (add input:0 input:1) ?z)))"
);

rule_test!(
    /// Tests that `x + (-y)` becomes `x - y`.
    turns_an_added_negation_into_a_subtraction, G, r#"
  %0 = input {index = 0, name = "x"} : f32[B,S]
  %1 = input {index = 1, name = "y"} : f32[B,S]
  %2 = negate(%1) : f32[B,S]
  %3 = add(%2, %0) : f32[B,S]
  return %3"#
    => "(subtract input:0 input:1)"
);

#[test]
fn tests_that_the_bias_gradient_reduces_the_computed_sum() {
    let g = graph(&bias_gradient("add", "0, 1", true, "0.0"));
    let (out, _) = run(&g, &G);
    let reduces = out
        .order()
        .iter()
        .filter(|id| out.node(**id).kind() == ebb_ir::OpKind::Reduce)
        .count();
    assert_eq!(reduces, 1);
    insta::assert_snapshot!(before_after(&g, &G));
}

#[test]
fn tests_that_max_reductions_are_left_alone() {
    insta::assert_snapshot!(before_after(
        &graph(&bias_gradient("maximum", "0, 1", true, "0.0")),
        &G
    ));
}

#[test]
fn tests_that_reductions_over_different_dimensions_are_left_alone() {
    let g = graph(&bias_gradient("add", "1, 0", true, "0.0"));
    let (out, rep) = run(&g, &G);
    assert_eq!(
        rep.classes_changed, 0,
        "dimensions [0, 1] and [1, 0] are different attributes"
    );
    assert_eq!(ebb_ir::text::print(&out), ebb_ir::text::print(&g));
}
