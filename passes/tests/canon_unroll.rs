//! Tests of the `unroll` and `forward_slices` passes: before/after IR snapshots of a small
//! scan (a loop that stacks one row per iteration and a loop that reads them back in reverse,
//! as `lax.scan` and its transpose do), the loops left alone, and the whole canonicalization
//! pipeline turning the scan into straight-line code without the stacked buffer.

use ebb_ir::text::{parse, print};
use ebb_ir::verify::verify;
use ebb_passes::canon::unroll::{unroll_loops, KeepReason};
use ebb_passes::canon::{self, ForwardSlices, Unroll};
use ebb_passes::manager::PassResult;
use ebb_testkit::before_after;

/// A scan over 3 "layers": `h <- h * w[i]`, stacking each `h` into row `i` of `res`, then a
/// reverse scan reading row `2 - i` (through JAX's clamp/concatenate index arithmetic) and
/// summing the rows into `acc`.
const SCAN: &str = r#"graph @main {
  symbols B in [1, inf)
  %h0 = input {index = 0, name = "h"} : f32[B,4]
  %w = input {index = 1, name = "w"} : f32[3,4]
  %zero = constant {value = dense<0> : i32} : i32[]
  %z = constant {value = dense<0.0> : f32} : f32[]
  %res0 = broadcast_in_dim(%z) {broadcast_dimensions = [], shape = dims[3, B, 4]} : f32[3,B,4]
  %f:4 = while(%zero, %h0, %w, %res0) : i32[], f32[B,4], f32[3,4], f32[3,B,4] {
    region @cond {
      %i = input {index = 0, name = ""} : i32[]
      %h = input {index = 1, name = ""} : f32[B,4]
      %ww = input {index = 2, name = ""} : f32[3,4]
      %r = input {index = 3, name = ""} : f32[3,B,4]
      %n = constant {value = dense<3> : i32} : i32[]
      %p = compare(%i, %n) {comparison_direction = "LT"} : i1[]
      return %p
    }
    region @body {
      %i = input {index = 0, name = ""} : i32[]
      %h = input {index = 1, name = ""} : f32[B,4]
      %ww = input {index = 2, name = ""} : f32[3,4]
      %r = input {index = 3, name = ""} : f32[3,B,4]
      %c0 = constant {value = dense<0> : i32} : i32[]
      %wi = dynamic_slice(%ww, %i, %c0) {slice_sizes = dims[1, 4]} : f32[1,4]
      %wv = reshape(%wi) {shape = dims[4]} : f32[4]
      %wb = broadcast_in_dim(%wv) {broadcast_dimensions = [1], shape = dims[B, 4]} : f32[B,4]
      %h2 = multiply(%h, %wb) : f32[B,4]
      %row = reshape(%h2) {shape = dims[1, B, 4]} : f32[1,B,4]
      %r2 = dynamic_update_slice(%r, %row, %i, %c0, %c0) : f32[3,B,4]
      %one = constant {value = dense<1> : i32} : i32[]
      %i2 = add(%i, %one) : i32[]
      return %i2, %h2, %ww, %r2
    }
  }
  %acc0 = broadcast_in_dim(%z) {broadcast_dimensions = [], shape = dims[B, 4]} : f32[B,4]
  %b:3 = while(%zero, %acc0, %f#3) : i32[], f32[B,4], f32[3,B,4] {
    region @cond {
      %i = input {index = 0, name = ""} : i32[]
      %a = input {index = 1, name = ""} : f32[B,4]
      %r = input {index = 2, name = ""} : f32[3,B,4]
      %n = constant {value = dense<3> : i32} : i32[]
      %p = compare(%n, %i) {comparison_direction = "GT"} : i1[]
      return %p
    }
    region @body {
      %i = input {index = 0, name = ""} : i32[]
      %a = input {index = 1, name = ""} : f32[B,4]
      %r = input {index = 2, name = ""} : f32[3,B,4]
      %two = constant {value = dense<2> : i32} : i32[]
      %k = subtract(%two, %i) : i32[]
      %k1 = reshape(%k) {shape = dims[1]} : i32[1]
      %zz = constant {value = dense<0> : i32} : i32[2]
      %ks = concatenate(%k1, %zz) {dimension = 0} : i32[3]
      %lo = constant {value = dense<0> : i32} : i32[3]
      %hi = constant {value = dense<"0x020000000000000000000000"> : i32} : i32[3]
      %kc = clamp(%lo, %ks, %hi) : i32[3]
      %s0 = slice(%kc) {limit_indices = dims[1], start_indices = dims[0], strides = dims[1]} : i32[1]
      %k0 = reshape(%s0) {shape = dims[]} : i32[]
      %c0 = constant {value = dense<0> : i32} : i32[]
      %row = dynamic_slice(%r, %k0, %c0, %c0) {slice_sizes = dims[1, B, 4]} : f32[1,B,4]
      %v = reshape(%row) {shape = dims[B, 4]} : f32[B,4]
      %a2 = add(%a, %v) : f32[B,4]
      %one = constant {value = dense<1> : i32} : i32[]
      %i2 = add(%i, %one) : i32[]
      return %i2, %a2, %r
    }
  }
  return %f#1, %b#1
}"#;

/// Tests that both loops unroll (3 trips each, the second with the counter on the right of
/// a `GT`), each copy reading the previous copy's carried values, in the loop's place.
#[test]
fn unrolls_constant_trip_count_loops_in_place() {
    let (s, r) = before_after(SCAN, &Unroll::default());
    assert_eq!(r, PassResult::changes(2));
    insta::assert_snapshot!(s);
}

/// Tests the limits: a trip count above `max_trip_count`, `max_trip_count = 0` (`--unroll
/// off`), a body-op budget too small, and a symbolic trip count (the bound an input) all
/// leave the loops alone.
#[test]
fn leaves_loops_over_the_limits_or_with_symbolic_trip_counts() {
    for limits in [
        Unroll {
            max_trip_count: 2,
            ..Unroll::default()
        },
        Unroll {
            max_trip_count: 0,
            ..Unroll::default()
        },
        Unroll {
            max_ops: 10,
            ..Unroll::default()
        },
    ] {
        let (_, r) = before_after(SCAN, &limits);
        assert_eq!(r, PassResult::unchanged(), "{limits:?}");
    }
    // The report says why each loop was kept.
    let reasons = |limits: Unroll| {
        let mut g = parse(SCAN).unwrap();
        let report = unroll_loops(&mut g, &limits);
        assert!(report.unrolled.is_empty());
        report.kept.iter().map(|k| k.reason).collect::<Vec<_>>()
    };
    let l = |max_trip_count, max_ops| Unroll {
        max_trip_count,
        max_ops,
    };
    assert_eq!(
        reasons(l(2, 1000)),
        [
            KeepReason::TooManyIterations(2),
            KeepReason::TooManyIterations(2)
        ]
    );
    assert_eq!(
        reasons(l(0, 1000)),
        [KeepReason::Disabled, KeepReason::Disabled]
    );
    // Body ops × 3 trips: 9 × 3 and 16 × 3.
    assert_eq!(
        reasons(l(64, 10)),
        [KeepReason::TooManyOps(27), KeepReason::TooManyOps(48)]
    );
    let symbolic = r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[4]
  %n = input {index = 1, name = "n"} : i32[]
  %zero = constant {value = dense<0> : i32} : i32[]
  %w:3 = while(%zero, %x, %n) : i32[], f32[4], i32[] {
    region @cond {
      %i = input {index = 0, name = ""} : i32[]
      %a = input {index = 1, name = ""} : f32[4]
      %m = input {index = 2, name = ""} : i32[]
      %p = compare(%i, %m) {comparison_direction = "LT"} : i1[]
      return %p
    }
    region @body {
      %i = input {index = 0, name = ""} : i32[]
      %a = input {index = 1, name = ""} : f32[4]
      %m = input {index = 2, name = ""} : i32[]
      %one = constant {value = dense<1> : i32} : i32[]
      %i2 = add(%i, %one) : i32[]
      %a2 = multiply(%a, %a) : f32[4]
      return %i2, %a2, %m
    }
  }
  return %w#1
}"#;
    let (_, r) = before_after(symbolic, &Unroll::default());
    assert_eq!(r, PassResult::unchanged());
    let report = unroll_loops(&mut parse(symbolic).unwrap(), &Unroll::default());
    assert_eq!(report.kept[0].reason, KeepReason::NotConstant);
    assert_eq!(
        report.kept[0].reason.to_string(),
        "its trip count is not a compile-time constant"
    );
}

/// Tests a trip count carried through the loop (as ONNX `Loop`/`Scan` import): the bound is a
/// carried value the body returns unchanged, so a constant start makes the trip count known
/// (2 trips, the copies in the loop's place), while a bound the body changes does not.
#[test]
fn unrolls_a_loop_whose_bound_is_a_carried_constant() {
    let src = |bound_out: &str| {
        format!(
            r#"graph @main {{
  %x = input {{index = 0, name = "x"}} : f32[4]
  %zero = constant {{value = dense<0> : i64}} : i64[]
  %two = constant {{value = dense<2> : i64}} : i64[]
  %w:3 = while(%zero, %two, %x) : i64[], i64[], f32[4] {{
    region @cond {{
      %i = input {{index = 0, name = ""}} : i64[]
      %t = input {{index = 1, name = ""}} : i64[]
      %a = input {{index = 2, name = ""}} : f32[4]
      %p = compare(%i, %t) {{comparison_direction = "LT"}} : i1[]
      return %p
    }}
    region @body {{
      %i = input {{index = 0, name = ""}} : i64[]
      %t = input {{index = 1, name = ""}} : i64[]
      %a = input {{index = 2, name = ""}} : f32[4]
      %one = constant {{value = dense<1> : i64}} : i64[]
      %i2 = add(%i, %one) : i64[]
      %t2 = add(%t, %one) : i64[]
      %a2 = multiply(%a, %a) : f32[4]
      return %i2, {bound_out}, %a2
    }}
  }}
  return %w#2
}}"#
        )
    };
    let (s, r) = before_after(&src("%t"), &Unroll::default());
    assert_eq!(r, PassResult::changes(1));
    assert_eq!(s.matches("multiply").count(), 1 + 2, "{s}");
    let (_, r) = before_after(&src("%t2"), &Unroll::default());
    assert_eq!(r, PassResult::unchanged());
}

/// Tests slice forwarding on constant indices: a read of the row just written takes the
/// update; a read of another row looks through the write to the earlier one; a read that
/// overlaps a write partially stays on it; constant-start reads become `slice`s and one with
/// a non-constant start is left alone.
#[test]
fn forwards_slices_through_updates_of_constant_windows() {
    let (s, r) = before_after(
        r#"graph @main {
  symbols B in [1, inf)
  %buf = input {index = 0, name = "buf"} : f32[4,B,2]
  %x = input {index = 1, name = "x"} : f32[1,B,2]
  %y = input {index = 2, name = "y"} : f32[2,B,2]
  %j = input {index = 3, name = "j"} : i32[]
  %c0 = constant {value = dense<0> : i32} : i32[]
  %c1 = constant {value = dense<1> : i32} : i32[]
  %c2 = constant {value = dense<2> : i32} : i32[]
  %c9 = constant {value = dense<9> : i32} : i32[]
  %u1 = dynamic_update_slice(%buf, %x, %c1, %c0, %c0) : f32[4,B,2]
  %u2 = dynamic_update_slice(%u1, %y, %c9, %c0, %c0) : f32[4,B,2]
  %same = dynamic_slice(%u2, %c1, %c0, %c0) {slice_sizes = dims[1, B, 2]} : f32[1,B,2]
  %clamped = dynamic_slice(%u2, %c2, %c0, %c0) {slice_sizes = dims[2, B, 2]} : f32[2,B,2]
  %other = dynamic_slice(%u2, %c0, %c0, %c0) {slice_sizes = dims[1, B, 2]} : f32[1,B,2]
  %partial = dynamic_slice(%u2, %c1, %c0, %c0) {slice_sizes = dims[2, B, 2]} : f32[2,B,2]
  %dynamic = dynamic_slice(%u2, %j, %c0, %c0) {slice_sizes = dims[1, B, 2]} : f32[1,B,2]
  return %same, %clamped, %other, %partial, %dynamic
}"#,
        &ForwardSlices,
    );
    // `same` and `clamped` (start 9 clamps to 2) forward; `other` rewires to %buf and becomes
    // a `slice`, as does `partial` (left reading %u2).
    assert_eq!(r, PassResult::changes(5));
    insta::assert_snapshot!(s);
}

/// Tests the canonicalization pipeline on the scan: the loops are gone, the reverse scan reads
/// each forward iteration's value directly, and the stacked buffer is dead and removed.
#[test]
fn pipeline_turns_a_scan_into_straight_line_code_without_the_stacked_buffer() {
    let mut g = parse(SCAN).unwrap();
    canon::pipeline(8).run(&mut g).unwrap();
    verify(&g).unwrap();
    let text = print(&g);
    for gone in [
        "while",
        "dynamic_update_slice",
        "dynamic_slice",
        "f32[3,B,4]",
    ] {
        assert!(!text.contains(gone), "`{gone}` left:\n{text}");
    }
    insta::assert_snapshot!(text);
}
