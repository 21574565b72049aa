//! Tests of the chunked `fusion` executor on hand-written fused IR: an input fusion (a
//! `reduce` root that keeps a trailing dimension too) against the same ops unfused, bit for bit,
//! with rows shorter and longer than a chunk and with empty rows (the init value); and a loop
//! fusion that writes its result into its dying operand, with the measured peak counting that
//! buffer once.

use crate::common;
use common::*;

const BODY: &str = "region @body {
        %0 = input {index = 0, name = \"\"} : f32[]
        %1 = input {index = 1, name = \"\"} : f32[]
        %2 = add(%0, %1) : f32[]
        return %2
      }";

fn unfused() -> String {
    format!(
        "graph @t {{
  %0 = input {{index = 0, name = \"x\"}} : f32[B,S,3]
  %1 = constant {{value = dense<0.0> : f32}} : f32[]
  %2 = exponential(%0) : f32[B,S,3]
  %3 = reduce(%2, %1) {{dimensions = [1]}} : f32[B,3] {{
      {BODY}
  }}
  return %3
}}"
    )
}

fn fused() -> String {
    format!(
        "graph @t {{
  %0 = input {{index = 0, name = \"x\"}} : f32[B,S,3]
  %1 = constant {{value = dense<0.0> : f32}} : f32[]
  %2 = fusion(%0, %1) {{kind = \"input\"}} : f32[B,3] {{
    region @fusion0 {{
      %0 = input {{index = 0, name = \"in0\"}} : f32[B,S,3]
      %1 = exponential(%0) : f32[B,S,3]
      %2 = input {{index = 1, name = \"in1\"}} : f32[]
      %3 = reduce(%1, %2) {{dimensions = [1]}} : f32[B,3] {{
      {BODY}
      }}
      return %3
    }}
  }}
  return %2
}}"
    )
}

/// Tests the input fusion against the unfused ops at rows of 15 elements (many per chunk),
/// 3000 elements (one per chunk, longer than a chunk) and 0 elements (the init value).
#[test]
fn input_fusion_equals_the_unfused_reduce() {
    for (b, s) in [(4usize, 5usize), (2, 1000), (3, 0)] {
        let n = b * s * 3;
        let x: Vec<f32> = (0..n)
            .map(|i| ((i * 37 % 101) as f32) / 50.0 - 1.0)
            .collect();
        let bind = [("B", b as i64), ("S", s as i64)];
        let want = run1(&unfused(), &bind, vec![f32t(&[b, s, 3], &x)]);
        let got = run1(&fused(), &bind, vec![f32t(&[b, s, 3], &x)]);
        assert!(got.bits_eq(&want), "B={b} S={s}: {got:?} vs {want:?}");
        assert_eq!(got.shape(), [b, 3]);
    }
}

/// Tests a loop fusion whose operand (a `dot_general` result read by nothing else) dies at
/// it: the measured peak counts the operand and the result once, so it is below operand +
/// result, and the outputs are those of the same ops unfused.
#[test]
fn loop_fusion_writes_into_its_dying_operand() {
    let src = |body: &str| {
        format!(
            "graph @t {{
  %0 = input {{index = 0, name = \"x\"}} : f32[4096,16]
  %1 = input {{index = 1, name = \"w\"}} : f32[16,16]
  %2 = dot_general(%0, %1) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : f32[4096,16]
{body}}}"
        )
    };
    let unfused = src(
        "  %3 = exponential(%2) : f32[4096,16]\n  %4 = negate(%3) : f32[4096,16]\n  return %4\n",
    );
    let fused = src("  %3 = fusion(%2) {kind = \"loop\"} : f32[4096,16] {
    region @fusion0 {
      %0 = input {index = 0, name = \"in0\"} : f32[4096,16]
      %1 = exponential(%0) : f32[4096,16]
      %2 = negate(%1) : f32[4096,16]
      return %2
    }
  }
  return %3
");
    let x: Vec<f32> = (0..4096 * 16).map(|i| (i % 7) as f32 / 7.0).collect();
    let w: Vec<f32> = (0..256).map(|i| (i % 5) as f32 / 10.0).collect();
    let ins = || vec![f32t(&[4096, 16], &x), f32t(&[16, 16], &w)];
    let (a, _) = run_with_stats(&unfused, &[], ins()).unwrap();
    let (f, stats) = run_with_stats(&fused, &[], ins()).unwrap();
    assert!(a[0].bits_eq(&f[0]));
    let (inputs, d) = ((4096 * 16 + 256) * 4, 4096 * 16 * 4);
    // inputs + the dot's result + one chunk's tiles (2048 elements of two f32 tiles at most:
    // the input's copy and `exp`'s, then `exp`'s and `negate`'s), not + the fusion's result.
    assert_eq!(stats.peak_bytes, inputs + d + 2048 * 2 * 4);
}
