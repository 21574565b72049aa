//! Tests of the `fold` pass: before/after IR snapshots on small graphs.

use ebb_ir::text::parse;
use ebb_ir::verify::verify;
use ebb_passes::canon::Fold;
use ebb_passes::manager::{Pass, PassContext, PassResult};
use ebb_testkit::before_after;

/// Tests that a `dim_constant` with constant dimensions becomes a `constant` (splat when all
/// equal), and that its users fold in the same sweep: `convert`, integer `multiply`,
/// `broadcast_in_dim` and `reshape` of a splat to a static shape.
#[test]
fn folds_constant_shape_computations_in_one_sweep() {
    let (s, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[8,4]
  %d = dim_constant {values = dims[8, 4]} : i32[2]
  %two = dim_constant {values = dims[2, 2]} : i32[2]
  %m = multiply(%d, %two) : i32[2]
  %n = dim_constant {values = dims[32]} : i32[]
  %f = convert(%n) {dtype = f32} : f32[]
  %b = broadcast_in_dim(%f) {broadcast_dimensions = [], shape = dims[8, 4]} : f32[8,4]
  %r = reshape(%b) {shape = dims[32]} : f32[32]
  %mean = divide(%x, %b) : f32[8,4]
  return %mean, %m, %r
}"#,
        &Fold::default(),
    );
    assert_eq!(r, PassResult::changes(7));
    insta::assert_snapshot!(s);
}

/// Tests that folding does not touch symbolic dimensions: a `dim_constant` over `B` stays,
/// and a splat is not broadcast into a constant of symbolic shape.
#[test]
fn does_not_fold_symbolic_shapes() {
    let (s, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[B,4]
  %d = dim_constant {values = dims[B, 4]} : i32[2]
  %n = dim_constant {values = dims[B*4]} : i32[]
  %f = convert(%n) {dtype = f32} : f32[]
  %b = broadcast_in_dim(%f) {broadcast_dimensions = [], shape = dims[B, 4]} : f32[B,4]
  %one = constant {value = dense<1.0> : f32} : f32[]
  %ones = broadcast_in_dim(%one) {broadcast_dimensions = [], shape = dims[B, 4]} : f32[B,4]
  %y = divide(%x, %b) : f32[B,4]
  %z = add(%y, %ones) : f32[B,4]
  return %z, %d
}"#,
        &Fold::default(),
    );
    assert_eq!(r, PassResult::unchanged());
    insta::assert_snapshot!(s);
}

/// Tests integer arithmetic folding (elementwise over small dense constants, with a splat
/// operand, truncating division) and its negative cases: overflow of the element type,
/// division by zero, float operands.
#[test]
fn folds_small_integer_arithmetic_but_not_overflow_zero_division_or_floats() {
    let (s, r) = before_after(
        r#"graph @main {
  %a = constant {value = dense<"0x07000000f9ffffff"> : i32} : i32[2]
  %b = constant {value = dense<2> : i32} : i32[2]
  %add = add(%a, %b) : i32[2]
  %sub = subtract(%a, %b) : i32[2]
  %div = divide(%a, %b) : i32[2]
  %big = constant {value = dense<2147483647> : i32} : i32[]
  %one = constant {value = dense<1> : i32} : i32[]
  %zero = constant {value = dense<0> : i32} : i32[]
  %overflow = add(%big, %one) : i32[]
  %by_zero = divide(%one, %zero) : i32[]
  %f = constant {value = dense<1.5> : f32} : f32[]
  %fsum = add(%f, %f) : f32[]
  return %add, %sub, %div, %overflow, %by_zero, %fsum
}"#,
        &Fold::default(),
    );
    assert_eq!(r, PassResult::changes(3));
    insta::assert_snapshot!(s);
}

/// Tests `convert` folding: exact conversions fold (integer to float, float to integer
/// truncating toward zero, to `i1`, to bf16), inexact ones do not (2^24 + 1 is not an f32,
/// 0.1 is not a bf16, NaN, 300 is not a ui8).
#[test]
fn folds_exact_converts_only() {
    let (s, r) = before_after(
        r#"graph @main {
  %i = constant {value = dense<3> : i32} : i32[]
  %f = constant {value = dense<-2.75> : f32} : f32[]
  %big = constant {value = dense<16777217> : i32} : i32[]
  %tenth = constant {value = dense<0.1> : f32} : f32[]
  %nan = constant {value = dense<0x7fc00000> : f32} : f32[]
  %three_hundred = constant {value = dense<300> : i32} : i32[]
  %c1 = convert(%i) {dtype = f32} : f32[]
  %c2 = convert(%f) {dtype = i32} : i32[]
  %c3 = convert(%i) {dtype = i1} : i1[]
  %c4 = convert(%i) {dtype = bf16} : bf16[]
  %c5 = convert(%big) {dtype = f32} : f32[]
  %c6 = convert(%tenth) {dtype = bf16} : bf16[]
  %c7 = convert(%nan) {dtype = f64} : f64[]
  %c8 = convert(%three_hundred) {dtype = ui8} : ui8[]
  return %c1, %c2, %c3, %c4, %c5, %c6, %c7, %c8
}"#,
        &Fold::default(),
    );
    assert_eq!(r, PassResult::changes(4));
    insta::assert_snapshot!(s);
}

/// Tests that folding does not materialize a large non-splat constant: a `convert` of a
/// 128-element dense constant, a `broadcast_in_dim` of it, and integer arithmetic on it stay;
/// with a small enough tensor the same `convert` folds.
#[test]
fn does_not_fold_a_non_splat_large_constant() {
    let hex: String = (0..128u32)
        .map(|i| format!("{:08x}", i.swap_bytes()))
        .collect();
    let text = format!(
        r#"graph @main {{
  %c = constant {{value = dense<"0x{hex}"> : i32}} : i32[128]
  %f = convert(%c) {{dtype = f32}} : f32[128]
  %b = broadcast_in_dim(%c) {{broadcast_dimensions = [1], shape = dims[2, 128]}} : i32[2,128]
  %s = add(%c, %c) : i32[128]
  return %f, %b, %s
}}"#
    );
    let (s, r) = before_after(&text, &Fold::default());
    assert_eq!(r, PassResult::unchanged());
    insta::assert_snapshot!(s);

    let mut g = parse(&text).unwrap();
    let r = Fold { max_elements: 128 }
        .run(&mut g, &mut PassContext::new())
        .unwrap();
    assert_eq!(
        r,
        PassResult::changes(2),
        "convert and add fold when 128 elements count as small"
    );
    verify(&g).unwrap();
}

/// Tests that identity ops are bypassed, with symbolic shapes too: `reshape` to the same
/// shape, identity `transpose`, `convert` to the same type, identity `broadcast_in_dim`.
#[test]
fn removes_identity_ops() {
    let (s, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[B,S]
  %r = reshape(%x) {shape = dims[B, S]} : f32[B,S]
  %t = transpose(%r) {permutation = [0, 1]} : f32[B,S]
  %c = convert(%t) {dtype = f32} : f32[B,S]
  %b = broadcast_in_dim(%c) {broadcast_dimensions = [0, 1], shape = dims[B, S]} : f32[B,S]
  %e = exponential(%b) : f32[B,S]
  return %e, %t as "t"
}"#,
        &Fold::default(),
    );
    assert_eq!(r, PassResult::changes(4));
    insta::assert_snapshot!(s);
}

/// Tests that ops that only look like identities are kept: a transpose of a square matrix,
/// a `broadcast_in_dim` that permutes, a `reshape` that changes the shape.
#[test]
fn does_not_remove_permuting_ops_with_equal_types() {
    let (s, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[4,4]
  %t = transpose(%x) {permutation = [1, 0]} : f32[4,4]
  %b = broadcast_in_dim(%x) {broadcast_dimensions = [1, 0], shape = dims[4, 4]} : f32[4,4]
  %r = reshape(%x) {shape = dims[2, 8]} : f32[2,8]
  return %t, %b, %r
}"#,
        &Fold::default(),
    );
    assert_eq!(r, PassResult::unchanged());
    insta::assert_snapshot!(s);
}

/// Tests that a dense constant whose elements are all equal becomes a splat, while one with
/// different elements stays dense.
#[test]
fn canonicalizes_uniform_dense_literals_to_splats() {
    let (s, r) = before_after(
        r#"graph @main {
  %u = constant {value = dense<"0x0100000001000000"> : i32} : i32[2]
  %s = constant {value = dense<"0x00000000"> : i32} : i32[]
  %d = constant {value = dense<"0x0100000002000000"> : i32} : i32[2]
  return %u, %s, %d
}"#,
        &Fold::default(),
    );
    assert_eq!(r, PassResult::changes(2));
    insta::assert_snapshot!(s);
}

/// Tests that folding applies inside regions.
#[test]
fn folds_inside_regions() {
    let (s, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[B,4]
  %zero = constant {value = dense<0.0> : f32} : f32[]
  %sum = reduce(%x, %zero) {dimensions = [1]} : f32[B] {
    region @body {
      %a = input {index = 0, name = ""} : f32[]
      %b = input {index = 1, name = ""} : f32[]
      %c = convert(%b) {dtype = f32} : f32[]
      %s = add(%a, %c) : f32[]
      return %s
    }
  }
  return %sum
}"#,
        &Fold::default(),
    );
    assert_eq!(r, PassResult::changes(1));
    insta::assert_snapshot!(s);
}

/// Tests that `reduce_precision` to a format holding every value of the operand's type
/// (`f32` to 8/23 bits, as `jax.checkpoint` policies emit it) is bypassed, and that one that
/// really rounds (`f32` to bfloat16's 8/7 bits, `bf16` to 5/10) is kept.
#[test]
fn removes_identity_reduce_precision_only() {
    let (s, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[B,8]
  %h = input {index = 1, name = "h"} : bf16[4]
  %id = reduce_precision(%x) {exponent_bits = 8, mantissa_bits = 23} : f32[B,8]
  %wide = reduce_precision(%id) {exponent_bits = 11, mantissa_bits = 52} : f32[B,8]
  %bf = reduce_precision(%wide) {exponent_bits = 8, mantissa_bits = 7} : f32[B,8]
  %hh = reduce_precision(%h) {exponent_bits = 5, mantissa_bits = 10} : bf16[4]
  return %bf, %hh
}"#,
        &Fold::default(),
    );
    assert_eq!(r, PassResult::changes(2));
    let after = s.split("// after").nth(1).unwrap();
    assert_eq!(after.matches("reduce_precision").count(), 2, "{after}");
    assert!(
        after.contains("reduce_precision(%0) {exponent_bits = 8, mantissa_bits = 7}"),
        "{after}"
    );
}

/// Tests rule 7, index arithmetic on small integer constants: `compare`, `select`, `maximum`,
/// `minimum`, `clamp` with scalar bounds, `concatenate`, `slice` and a dense `reshape` fold
/// (JAX's wrap-around of a negative scan index: `select(i < 0, i + n, i)`), while the same
/// ops on floats or on a non-constant operand are left alone.
#[test]
fn folds_index_arithmetic_on_small_integer_constants() {
    let (s, r) = before_after(
        r#"graph @main {
  %j = input {index = 0, name = "j"} : i32[]
  %i = constant {value = dense<-1> : i32} : i32[]
  %n = constant {value = dense<3> : i32} : i32[]
  %z = constant {value = dense<0> : i32} : i32[]
  %neg = compare(%i, %z) {comparison_direction = "LT"} : i1[]
  %wrap = add(%i, %n) : i32[]
  %k = select(%neg, %wrap, %i) : i32[]
  %hi = maximum(%k, %n) : i32[]
  %lo = minimum(%k, %z) : i32[]
  %k1 = reshape(%k) {shape = dims[1]} : i32[1]
  %n1 = reshape(%n) {shape = dims[1]} : i32[1]
  %v = concatenate(%k1, %n1) {dimension = 0} : i32[2]
  %c = clamp(%z, %v, %k) : i32[2]
  %s = slice(%c) {limit_indices = dims[2], start_indices = dims[1], strides = dims[1]} : i32[1]
  %m = reshape(%v) {shape = dims[2, 1]} : i32[2,1]
  %f = constant {value = dense<1.5> : f32} : f32[]
  %g = constant {value = dense<2.5> : f32} : f32[]
  %fm = maximum(%f, %g) : f32[]
  %dyn = maximum(%j, %n) : i32[]
  return %k, %hi, %lo, %s, %m, %fm, %dyn
}"#,
        &Fold::default(),
    );
    // neg, wrap, k, hi, lo, k1, n1, v, c, s, m.
    assert_eq!(r, PassResult::changes(11));
    insta::assert_snapshot!(s);
}

/// Tests rule 8: a broadcast of a `[1,1]` splat to a symbolic shape becomes a broadcast of a
/// scalar constant (so that CSE can merge it with the broadcast of the scalar zero), while a
/// broadcast of a scalar splat, or of a dense constant, stays as it is.
#[test]
fn broadcasts_of_splats_to_symbolic_shapes_read_a_scalar_constant() {
    let (s, r) = before_after(
        r#"graph @main {
  %x = input {index = 0, name = "x"} : f32[B,4]
  %z = constant {value = dense<0.0> : f32} : f32[]
  %z11 = constant {value = dense<0.0> : f32} : f32[1,1]
  %d = constant {value = dense<"0x0000000000000000000080400000803f"> : f32} : f32[1,4]
  %a = broadcast_in_dim(%z) {broadcast_dimensions = [], shape = dims[B, 4]} : f32[B,4]
  %b = broadcast_in_dim(%z11) {broadcast_dimensions = [0, 1], shape = dims[B, 4]} : f32[B,4]
  %c = broadcast_in_dim(%d) {broadcast_dimensions = [0, 1], shape = dims[B, 4]} : f32[B,4]
  %s = add(%a, %b) : f32[B,4]
  %t = add(%s, %c) : f32[B,4]
  %u = add(%t, %x) : f32[B,4]
  return %u
}"#,
        &Fold::default(),
    );
    assert_eq!(r, PassResult::changes(1), "%b");
    insta::assert_snapshot!(s);
}
