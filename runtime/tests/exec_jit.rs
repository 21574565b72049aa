//! The JIT executor's fusion kernels (`ebb_codegen`) against the reference executor (the
//! chunked interpreter), bit for bit, per kernel family and over random shapes — including
//! sizes that are not multiples of the vector width, empty tensors and unit dimensions (which
//! change the index maps' stride classes):
//! - elementwise chains with `exponential`, `tanh`, `log`, `rsqrt`, `maximum`, `compare`,
//!   `select`, `convert` and splat constants;
//! - index maps: bias (`[B]` along the inner dimension), row (`[A]` along the outer one),
//!   scalar and transposing broadcasts, `iota`;
//! - group normalization's broadcasts (short rows, offsets advanced through outer dimensions);
//! - row reductions (input fusion: a softmax's max and sum of `exp`);
//! - a second binding reuses the kernels (no compile).

use crate::common;
use common::*;
use ebb_runtime::{program_schedule, Executor, Program, Tensor};
use proptest::prelude::*;

/// A loop fusion over `f32[A,B]` reading every index-map kind.
const LOOP: &str = r#"graph @t {
  %0 = input {index = 0, name = "x"} : f32[A,B]
  %1 = input {index = 1, name = "bias"} : f32[B]
  %2 = input {index = 2, name = "row"} : f32[A]
  %3 = input {index = 3, name = "s"} : f32[]
  %4 = input {index = 4, name = "col"} : f32[B]
  %5:2 = fusion(%0, %1, %2, %3, %4) {kind = "loop"} : f32[A,B], i1[A,B] {
    region @fusion0 {
      %0 = input {index = 0, name = "in0"} : f32[A,B]
      %1 = input {index = 1, name = "in1"} : f32[B]
      %2 = input {index = 2, name = "in2"} : f32[A]
      %3 = input {index = 3, name = "in3"} : f32[]
      %4 = input {index = 4, name = "in4"} : f32[B]
      %5 = broadcast_in_dim(%1) {broadcast_dimensions = [1], shape = dims[A, B]} : f32[A,B]
      %6 = broadcast_in_dim(%2) {broadcast_dimensions = [0], shape = dims[A, B]} : f32[A,B]
      %7 = broadcast_in_dim(%3) {broadcast_dimensions = [], shape = dims[A, B]} : f32[A,B]
      %8 = multiply(%0, %7) : f32[A,B]
      %9 = subtract(%8, %6) : f32[A,B]
      %10 = exponential(%9) : f32[A,B]
      %11 = add(%10, %5) : f32[A,B]
      %12 = tanh(%11) : f32[A,B]
      %13 = iota {dtype = i32, iota_dimension = 1, shape = dims[A, B]} : i32[A,B]
      %14 = convert(%13) {dtype = f32} : f32[A,B]
      %15 = compare(%0, %14) {compare_type = "FLOAT", comparison_direction = "LT"} : i1[A,B]
      %16 = constant {value = dense<0.5> : f32} : f32[]
      %17 = broadcast_in_dim(%16) {broadcast_dimensions = [], shape = dims[A, B]} : f32[A,B]
      %18 = abs(%0) : f32[A,B]
      %19 = add(%18, %17) : f32[A,B]
      %20 = log(%19) : f32[A,B]
      %21 = rsqrt(%19) : f32[A,B]
      %22 = maximum(%20, %21) : f32[A,B]
      %23 = select(%15, %12, %22) : f32[A,B]
      %24 = reshape(%23) {shape = dims[A, B]} : f32[A,B]
      return %24, %15
    }
  }
  return %5#0, %5#1
}"#;

/// GELU-tanh's backward as the 2-layer GPT's export fuses it (`models.py:227`), on
/// `f32[A,B]`: scalar and bias broadcasts, `tanh`, a chain of products.
const GELU_BWD: &str = r#"graph @t {
  %0 = input {index = 0, name = "c0"} : f32[]
  %1 = input {index = 1, name = "c1"} : f32[]
  %2 = input {index = 2, name = "c2"} : f32[]
  %3 = input {index = 3, name = "c3"} : f32[]
  %4 = input {index = 4, name = "c4"} : f32[]
  %5 = input {index = 5, name = "bias"} : f32[1,B]
  %6 = input {index = 6, name = "x"} : f32[A,B]
  %7 = input {index = 7, name = "dy"} : f32[A,B]
  %8 = fusion(%0, %1, %2, %3, %4, %5, %6, %7) {kind = "loop"} : f32[A,B] {
    region @fusion0 {
      %0 = input {index = 0, name = "in0"} : f32[]
      %1 = broadcast_in_dim(%0) {broadcast_dimensions = [], shape = dims[A, B]} : f32[A,B]
      %2 = input {index = 1, name = "in1"} : f32[]
      %3 = broadcast_in_dim(%2) {broadcast_dimensions = [], shape = dims[A, B]} : f32[A,B]
      %4 = input {index = 2, name = "in2"} : f32[]
      %5 = broadcast_in_dim(%4) {broadcast_dimensions = [], shape = dims[A, B]} : f32[A,B]
      %6 = input {index = 3, name = "in3"} : f32[]
      %7 = broadcast_in_dim(%6) {broadcast_dimensions = [], shape = dims[A, B]} : f32[A,B]
      %8 = input {index = 4, name = "in4"} : f32[]
      %9 = broadcast_in_dim(%8) {broadcast_dimensions = [], shape = dims[A, B]} : f32[A,B]
      %10 = input {index = 5, name = "in5"} : f32[1,B]
      %11 = broadcast_in_dim(%10) {broadcast_dimensions = [0, 1], shape = dims[A, B]} : f32[A,B]
      %12 = input {index = 6, name = "in6"} : f32[A,B]
      %13 = add(%12, %11) : f32[A,B]
      %14 = multiply(%13, %13) : f32[A,B]
      %15 = multiply(%14, %13) : f32[A,B]
      %16 = multiply(%1, %14) : f32[A,B]
      %17 = multiply(%3, %15) : f32[A,B]
      %18 = add(%13, %17) : f32[A,B]
      %19 = multiply(%5, %18) : f32[A,B]
      %20 = tanh(%19) : f32[A,B]
      %21 = subtract(%7, %20) : f32[A,B]
      %22 = add(%7, %20) : f32[A,B]
      %23 = multiply(%9, %22) : f32[A,B]
      %24 = input {index = 7, name = "in7"} : f32[A,B]
      %25 = multiply(%13, %24) : f32[A,B]
      %26 = multiply(%24, %23) : f32[A,B]
      %27 = multiply(%9, %25) : f32[A,B]
      %28 = multiply(%27, %21) : f32[A,B]
      %29 = multiply(%28, %20) : f32[A,B]
      %30 = add(%28, %29) : f32[A,B]
      %31 = multiply(%5, %30) : f32[A,B]
      %32 = add(%26, %31) : f32[A,B]
      %33 = multiply(%3, %31) : f32[A,B]
      %34 = multiply(%33, %16) : f32[A,B]
      %35 = add(%32, %34) : f32[A,B]
      return %35
    }
  }
  return %8
}"#;

/// Group normalization + SiLU backward as the UNet export fuses it (`models.py:302–306`,
/// 4 groups of 4 channels): per-(batch, group) broadcasts over rows of 4 elements, per-channel
/// broadcasts over 16, `exponential` and `divide`.
const GN_SILU_BWD: &str = r#"graph @t {
  %0 = input {index = 0, name = "one"} : f32[]
  %1 = input {index = 1, name = "x"} : f32[B,32,32,16]
  %2 = input {index = 2, name = "mean"} : f32[B,1,1,4,1]
  %3 = input {index = 3, name = "rstd"} : f32[B,1,1,4,1]
  %4 = input {index = 4, name = "gamma"} : f32[1,1,1,16]
  %5 = input {index = 5, name = "beta"} : f32[1,1,1,16]
  %6 = input {index = 6, name = "dy"} : f32[B,32,32,16]
  %7 = fusion(%0, %1, %2, %3, %4, %5, %6) {kind = "loop"} : f32[B,32,32,16] {
    region @fusion0 {
      symbols B in [1, inf)
      %0 = input {index = 0, name = "in0"} : f32[]
      %1 = broadcast_in_dim(%0) {broadcast_dimensions = [], shape = dims[B, 32, 32, 16]} : f32[B,32,32,16] loc("add")
      %2 = input {index = 1, name = "in1"} : f32[B,32,32,16]
      %3 = reshape(%2) {shape = dims[B, 32, 32, 4, 4]} : f32[B,32,32,4,4] loc("jit(unet_gn_step)/jvp()/reshape @ models.py:302:8")
      %4 = input {index = 2, name = "in2"} : f32[B,1,1,4,1]
      %5 = broadcast_in_dim(%4) {broadcast_dimensions = [0, 1, 2, 3, 4], shape = dims[B, 32, 32, 4, 4]} : f32[B,32,32,4,4] loc("jit(unet_gn_step)/jvp()/sub @ models.py:304:21")
      %6 = subtract(%3, %5) : f32[B,32,32,4,4] loc("jit(unet_gn_step)/jvp()/sub @ models.py:304:21")
      %7 = input {index = 3, name = "in3"} : f32[B,1,1,4,1]
      %8 = broadcast_in_dim(%7) {broadcast_dimensions = [0, 1, 2, 3, 4], shape = dims[B, 32, 32, 4, 4]} : f32[B,32,32,4,4] loc("jit(unet_gn_step)/jvp()/mul @ models.py:305:8")
      %9 = multiply(%6, %8) : f32[B,32,32,4,4] loc("jit(unet_gn_step)/jvp()/mul @ models.py:305:8")
      %10 = reshape(%9) {shape = dims[B, 32, 32, 16]} : f32[B,32,32,16] loc("jit(unet_gn_step)/jvp()/reshape @ models.py:306:11")
      %11 = input {index = 4, name = "in4"} : f32[1,1,1,16]
      %12 = broadcast_in_dim(%11) {broadcast_dimensions = [0, 1, 2, 3], shape = dims[B, 32, 32, 16]} : f32[B,32,32,16] loc("jit(unet_gn_step)/jvp()/mul @ models.py:306:11")
      %13 = multiply(%10, %12) : f32[B,32,32,16] loc("jit(unet_gn_step)/jvp()/mul @ models.py:306:11")
      %14 = input {index = 5, name = "in5"} : f32[1,1,1,16]
      %15 = broadcast_in_dim(%14) {broadcast_dimensions = [0, 1, 2, 3], shape = dims[B, 32, 32, 16]} : f32[B,32,32,16] loc("jit(unet_gn_step)/jvp()/add @ models.py:306:11")
      %16 = add(%13, %15) : f32[B,32,32,16] loc("jit(unet_gn_step)/jvp()/add @ models.py:306:11")
      %17 = negate(%16) : f32[B,32,32,16] loc("neg")
      %18 = exponential(%17) : f32[B,32,32,16] loc("exp")
      %19 = add(%1, %18) : f32[B,32,32,16] loc("add")
      %20 = divide(%1, %19) : f32[B,32,32,16] loc("div")
      %21 = subtract(%1, %20) : f32[B,32,32,16] loc("sub")
      %22 = multiply(%20, %21) : f32[B,32,32,16] loc("mul")
      %23 = input {index = 6, name = "in6"} : f32[B,32,32,16]
      %24 = multiply(%16, %23) : f32[B,32,32,16] loc("mul")
      %25 = multiply(%23, %20) : f32[B,32,32,16] loc("mul")
      %26 = multiply(%24, %22) : f32[B,32,32,16] loc("mul")
      %27 = add(%25, %26) : f32[B,32,32,16] loc("add_any")
      return %27
    }
  }
  return %7
}"#;

/// Group normalization's reductions as the UNet export fuses them (`models.py:303–306`): the
/// per-(batch, group) variance (a reduce row per batch keeping the groups between reduced
/// dimensions) and the scale's gradient (a column reduction over rows of 16 channels), both
/// reading per-group broadcasts whose blocks (4 elements) are shorter than a vector.
const GN_GRADS: &str = r#"graph @t {
  %0 = input {index = 0, name = "x"} : f32[B,32,32,16]
  %1 = input {index = 1, name = "mean"} : f32[B,1,1,4,1]
  %2 = input {index = 2, name = "rstd"} : f32[B,1,1,4,1]
  %3 = input {index = 3, name = "dy"} : f32[B,32,32,16]
  %4 = input {index = 4, name = "zero"} : f32[]
  %5 = fusion(%0, %1, %4) {kind = "input"} : f32[B,4] {
    region @fusion0 {
      symbols B in [1, inf)
      %0 = input {index = 0, name = "in0"} : f32[B,32,32,16]
      %1 = reshape(%0) {shape = dims[B, 32, 32, 4, 4]} : f32[B,32,32,4,4]
      %2 = input {index = 1, name = "in1"} : f32[B,1,1,4,1]
      %3 = broadcast_in_dim(%2) {broadcast_dimensions = [0, 1, 2, 3, 4], shape = dims[B, 32, 32, 4, 4]} : f32[B,32,32,4,4]
      %4 = subtract(%1, %3) : f32[B,32,32,4,4]
      %5 = multiply(%4, %4) : f32[B,32,32,4,4]
      %6 = input {index = 2, name = "in2"} : f32[]
      %7 = reduce(%5, %6) {dimensions = [1, 2, 4]} : f32[B,4] {
        region @body {
          %0 = input {index = 0, name = ""} : f32[]
          %1 = input {index = 1, name = ""} : f32[]
          %2 = add(%0, %1) : f32[]
          return %2
        }
      }
      return %7
    }
  }
  %6 = fusion(%0, %1, %2, %3, %4) {kind = "input"} : f32[16] {
    region @fusion1 {
      symbols B in [1, inf)
      %0 = input {index = 0, name = "in0"} : f32[B,32,32,16]
      %1 = reshape(%0) {shape = dims[B, 32, 32, 4, 4]} : f32[B,32,32,4,4]
      %2 = input {index = 1, name = "in1"} : f32[B,1,1,4,1]
      %3 = broadcast_in_dim(%2) {broadcast_dimensions = [0, 1, 2, 3, 4], shape = dims[B, 32, 32, 4, 4]} : f32[B,32,32,4,4]
      %4 = subtract(%1, %3) : f32[B,32,32,4,4]
      %5 = input {index = 2, name = "in2"} : f32[B,1,1,4,1]
      %6 = broadcast_in_dim(%5) {broadcast_dimensions = [0, 1, 2, 3, 4], shape = dims[B, 32, 32, 4, 4]} : f32[B,32,32,4,4]
      %7 = multiply(%4, %6) : f32[B,32,32,4,4]
      %8 = reshape(%7) {shape = dims[B, 32, 32, 16]} : f32[B,32,32,16]
      %9 = input {index = 3, name = "in3"} : f32[B,32,32,16]
      %10 = multiply(%8, %9) : f32[B,32,32,16]
      %11 = input {index = 4, name = "in4"} : f32[]
      %12 = reduce(%10, %11) {dimensions = [0, 1, 2]} : f32[16] {
        region @body {
          %0 = input {index = 0, name = ""} : f32[]
          %1 = input {index = 1, name = ""} : f32[]
          %2 = add(%0, %1) : f32[]
          return %2
        }
      }
      return %12
    }
  }
  return %5, %6
}"#;

/// [`GN_SILU_BWD`]'s inputs at batch `b` (seeded).
fn gn_silu_inputs(b: usize, seed: u64) -> Vec<Tensor> {
    let n = b * 32 * 32 * 16;
    vec![
        f32t(&[], &[1.0]),
        f32t(&[b, 32, 32, 16], &values(n, seed)),
        f32t(&[b, 1, 1, 4, 1], &values(b * 4, seed + 1)),
        f32t(&[b, 1, 1, 4, 1], &values(b * 4, seed + 2)),
        f32t(&[1, 1, 1, 16], &values(16, seed + 3)),
        f32t(&[1, 1, 1, 16], &values(16, seed + 4)),
        f32t(&[b, 32, 32, 16], &values(n, seed + 5)),
    ]
}

/// GELU-backward inputs at `A x B` (seeded).
fn gelu_inputs(a: usize, b: usize, seed: u64) -> Vec<Tensor> {
    let mut v: Vec<Tensor> = [0.134, 0.044, 0.798, 1.0, 0.5]
        .iter()
        .map(|&c| f32t(&[], &[c]))
        .collect();
    v.push(f32t(&[1, b], &values(b, seed)));
    v.push(f32t(&[a, b], &values(a * b, seed + 1)));
    v.push(f32t(&[a, b], &values(a * b, seed + 2)));
    v
}

/// AdamW's update of one parameter as the export fuses it (`update.py:42`), on `f32[A,B]`:
/// new first and second moments and the new parameter (three results).
const ADAMW: &str = r#"graph @t {
  %0 = input {index = 0, name = "g"} : f32[A,B]
  %1 = input {index = 1, name = "m"} : f32[A,B]
  %2 = input {index = 2, name = "v"} : f32[A,B]
  %3 = input {index = 3, name = "c1"} : f32[]
  %4 = input {index = 4, name = "c2"} : f32[]
  %5 = input {index = 5, name = "p"} : f32[A,B]
  %6:3 = fusion(%0, %1, %2, %3, %4, %5) {kind = "loop"} : f32[A,B], f32[A,B], f32[A,B] {
    region @fusion0 {
      %0 = constant {value = dense<0.1> : f32} : f32[A,B]
      %1 = input {index = 0, name = "in0"} : f32[A,B]
      %2 = multiply(%0, %1) : f32[A,B]
      %3 = constant {value = dense<0.9> : f32} : f32[A,B]
      %4 = input {index = 1, name = "in1"} : f32[A,B]
      %5 = multiply(%3, %4) : f32[A,B]
      %6 = add(%2, %5) : f32[A,B]
      %7 = multiply(%1, %1) : f32[A,B]
      %8 = constant {value = dense<0.05> : f32} : f32[A,B]
      %9 = multiply(%8, %7) : f32[A,B]
      %10 = constant {value = dense<0.95> : f32} : f32[A,B]
      %11 = input {index = 2, name = "in2"} : f32[A,B]
      %12 = multiply(%10, %11) : f32[A,B]
      %13 = add(%9, %12) : f32[A,B]
      %14 = input {index = 3, name = "in3"} : f32[]
      %15 = broadcast_in_dim(%14) {broadcast_dimensions = [], shape = dims[A, B]} : f32[A,B]
      %16 = divide(%6, %15) : f32[A,B]
      %17 = input {index = 4, name = "in4"} : f32[]
      %18 = broadcast_in_dim(%17) {broadcast_dimensions = [], shape = dims[A, B]} : f32[A,B]
      %19 = divide(%13, %18) : f32[A,B]
      %20 = sqrt(%19) : f32[A,B]
      %21 = constant {value = dense<1e-8> : f32} : f32[A,B]
      %22 = add(%20, %21) : f32[A,B]
      %23 = divide(%16, %22) : f32[A,B]
      %24 = input {index = 5, name = "in5"} : f32[A,B]
      %25 = multiply(%0, %24) : f32[A,B]
      %26 = add(%23, %25) : f32[A,B]
      %27 = constant {value = dense<-0.001> : f32} : f32[A,B]
      %28 = multiply(%27, %26) : f32[A,B]
      %29 = add(%24, %28) : f32[A,B]
      return %6, %13, %29
    }
  }
  return %6#0, %6#1, %6#2
}"#;

/// A softmax over the inner dimension of `f32[A,B]`: the max and the sum of `exp` as input
/// fusions, the normalization as a loop fusion.
const SOFTMAX: &str = r#"graph @t {
  %0 = input {index = 0, name = "x"} : f32[A,B]
  %1 = constant {value = dense<0xFF800000> : f32} : f32[]
  %2 = fusion(%0, %1) {kind = "input"} : f32[A] {
    region @fusion0 {
      %0 = input {index = 0, name = "in0"} : f32[A,B]
      %1 = input {index = 1, name = "in1"} : f32[]
      %2 = reduce(%0, %1) {dimensions = [1]} : f32[A] {
        region @body {
          %0 = input {index = 0, name = ""} : f32[]
          %1 = input {index = 1, name = ""} : f32[]
          %2 = maximum(%0, %1) : f32[]
          return %2
        }
      }
      return %2
    }
  }
  %5 = constant {value = dense<0.0> : f32} : f32[]
  %3 = fusion(%0, %2, %5) {kind = "input"} : f32[A] {
    region @fusion1 {
      %0 = input {index = 0, name = "in0"} : f32[A,B]
      %1 = input {index = 1, name = "in1"} : f32[A]
      %2 = broadcast_in_dim(%1) {broadcast_dimensions = [0], shape = dims[A, B]} : f32[A,B]
      %3 = subtract(%0, %2) : f32[A,B]
      %4 = exponential(%3) : f32[A,B]
      %5 = input {index = 2, name = "in2"} : f32[]
      %6 = reduce(%4, %5) {dimensions = [1]} : f32[A] {
        region @body {
          %0 = input {index = 0, name = ""} : f32[]
          %1 = input {index = 1, name = ""} : f32[]
          %2 = add(%0, %1) : f32[]
          return %2
        }
      }
      return %6
    }
  }
  %4 = fusion(%0, %2, %3) {kind = "loop"} : f32[A,B] {
    region @fusion2 {
      %0 = input {index = 0, name = "in0"} : f32[A,B]
      %1 = input {index = 1, name = "in1"} : f32[A]
      %2 = input {index = 2, name = "in2"} : f32[A]
      %3 = broadcast_in_dim(%1) {broadcast_dimensions = [0], shape = dims[A, B]} : f32[A,B]
      %4 = subtract(%0, %3) : f32[A,B]
      %5 = exponential(%4) : f32[A,B]
      %6 = broadcast_in_dim(%2) {broadcast_dimensions = [0], shape = dims[A, B]} : f32[A,B]
      %7 = divide(%5, %6) : f32[A,B]
      return %7
    }
  }
  return %4, %3
}"#;

/// A transposing broadcast (`[B]` to `[B,A]` along dimension 0) and a bias of `[A]` along the
/// inner dimension of `[B,A]`, with integer arithmetic on an `iota`.
const TRANSPOSED: &str = r#"graph @t {
  %0 = input {index = 0, name = "v"} : f32[B]
  %1 = input {index = 1, name = "w"} : f32[A]
  %2 = fusion(%0, %1) {kind = "loop"} : f32[B,A] {
    region @fusion0 {
      %0 = input {index = 0, name = "in0"} : f32[B]
      %1 = input {index = 1, name = "in1"} : f32[A]
      %2 = broadcast_in_dim(%0) {broadcast_dimensions = [0], shape = dims[B, A]} : f32[B,A]
      %3 = broadcast_in_dim(%1) {broadcast_dimensions = [1], shape = dims[B, A]} : f32[B,A]
      %4 = iota {dtype = i64, iota_dimension = 0, shape = dims[B, A]} : i64[B,A]
      %5 = iota {dtype = i64, iota_dimension = 1, shape = dims[B, A]} : i64[B,A]
      %6 = multiply(%4, %5) : i64[B,A]
      %7 = convert(%6) {dtype = f32} : f32[B,A]
      %8 = multiply(%2, %3) : f32[B,A]
      %9 = add(%8, %7) : f32[B,A]
      return %9
    }
  }
  return %2
}"#;

/// Column reductions over the leading dimensions of `f32[A,B,C]` (a layer-norm scale
/// gradient: the sum of `dy * xhat` over the tokens, and a max of a biased `exp`), as input
/// fusions; [`COLUMNS_UNFUSED`] is the same computation without fusion.
const COLUMNS: &str = r#"graph @t {
  %0 = input {index = 0, name = "dy"} : f32[A,B,C]
  %1 = input {index = 1, name = "x"} : f32[A,B,C]
  %2 = input {index = 2, name = "bias"} : f32[C]
  %3 = constant {value = dense<0.0> : f32} : f32[]
  %4 = fusion(%0, %1, %3) {kind = "input"} : f32[C] {
    region @fusion0 {
      %0 = input {index = 0, name = "in0"} : f32[A,B,C]
      %1 = input {index = 1, name = "in1"} : f32[A,B,C]
      %2 = multiply(%0, %1) : f32[A,B,C]
      %3 = input {index = 2, name = "in2"} : f32[]
      %4 = reduce(%2, %3) {dimensions = [0, 1]} : f32[C] {
        region @body {
          %0 = input {index = 0, name = ""} : f32[]
          %1 = input {index = 1, name = ""} : f32[]
          %2 = add(%0, %1) : f32[]
          return %2
        }
      }
      return %4
    }
  }
  %5 = fusion(%1, %2) {kind = "input"} : f32[B,C] {
    region @fusion1 {
      %0 = input {index = 0, name = "in0"} : f32[A,B,C]
      %1 = input {index = 1, name = "in1"} : f32[C]
      %2 = broadcast_in_dim(%1) {broadcast_dimensions = [2], shape = dims[A, B, C]} : f32[A,B,C]
      %3 = add(%0, %2) : f32[A,B,C]
      %4 = exponential(%3) : f32[A,B,C]
      %5 = constant {value = dense<0xFF800000> : f32} : f32[]
      %6 = reduce(%4, %5) {dimensions = [0]} : f32[B,C] {
        region @body {
          %0 = input {index = 0, name = ""} : f32[]
          %1 = input {index = 1, name = ""} : f32[]
          %2 = maximum(%0, %1) : f32[]
          return %2
        }
      }
      return %6
    }
  }
  return %4, %5
}"#;

/// [`COLUMNS`] op by op.
const COLUMNS_UNFUSED: &str = r#"graph @t {
  %0 = input {index = 0, name = "dy"} : f32[A,B,C]
  %1 = input {index = 1, name = "x"} : f32[A,B,C]
  %2 = input {index = 2, name = "bias"} : f32[C]
  %3 = constant {value = dense<0.0> : f32} : f32[]
  %4 = multiply(%0, %1) : f32[A,B,C]
  %5 = reduce(%4, %3) {dimensions = [0, 1]} : f32[C] {
    region @body {
      %0 = input {index = 0, name = ""} : f32[]
      %1 = input {index = 1, name = ""} : f32[]
      %2 = add(%0, %1) : f32[]
      return %2
    }
  }
  %6 = broadcast_in_dim(%2) {broadcast_dimensions = [2], shape = dims[A, B, C]} : f32[A,B,C]
  %7 = add(%1, %6) : f32[A,B,C]
  %8 = exponential(%7) : f32[A,B,C]
  %9 = constant {value = dense<0xFF800000> : f32} : f32[]
  %10 = reduce(%8, %9) {dimensions = [0]} : f32[B,C] {
    region @body {
      %0 = input {index = 0, name = ""} : f32[]
      %1 = input {index = 1, name = ""} : f32[]
      %2 = maximum(%0, %1) : f32[]
      return %2
    }
  }
  return %5, %10
}"#;

fn loop_inputs(a: usize, b: usize, seed: u64) -> Vec<Tensor> {
    vec![
        f32t(&[a, b], &values(a * b, seed)),
        f32t(&[b], &values(b, seed + 1)),
        f32t(&[a], &values(a, seed + 2)),
        f32t(&[], &[0.75]),
        f32t(&[b], &values(b, seed + 3)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Elementwise chains and every index-map kind, at random shapes (unit dimensions and
    /// sizes that are not multiples of 8 included).
    #[test]
    fn loop_fusion_matches_the_reference(a in 1usize..40, b in 1usize..70, seed in 0u64..1000) {
        let bind = [("A", a as i64), ("B", b as i64)];
        let (got, want) = both(LOOP, &bind, loop_inputs(a, b, seed));
        assert_bits(&got, &want, &format!("A={a} B={b}"));
    }

    /// Row reductions (max, sum of exp) and the normalization of a softmax.
    #[test]
    fn softmax_matches_the_reference(a in 1usize..20, b in 0usize..300, seed in 0u64..1000) {
        let bind = [("A", a as i64), ("B", b as i64)];
        let x = f32t(&[a, b], &values(a * b, seed));
        let (got, want) = both(SOFTMAX, &bind, vec![x]);
        assert_bits(&got, &want, &format!("A={a} B={b}"));
    }

    /// Column reductions (a sum over two leading dimensions, a max over one): the generated
    /// kernels, the chunked interpreter and the unfused ops agree bit for bit, at sizes with
    /// one row, empty leading dimensions, and rows above the parallel threshold.
    #[test]
    fn column_reductions_match_the_reference(
        a in 0usize..24, b in 1usize..40, c in 1usize..300, seed in 0u64..1000,
    ) {
        let bind = [("A", a as i64), ("B", b as i64), ("C", c as i64)];
        let n = a * b * c;
        let ins = vec![
            f32t(&[a, b, c], &values(n, seed)),
            f32t(&[a, b, c], &values(n, seed + 1)),
            f32t(&[c], &values(c, seed + 2)),
        ];
        let what = format!("A={a} B={b} C={c}");
        if n > 0 {
            let (got, want) = both(COLUMNS, &bind, ins.clone());
            assert_bits(&got, &want, &what);
        }
        let g = graph(COLUMNS_UNFUSED);
        let unfused = Program::new(&g, &program_schedule(&g), &common::bind(&bind))
            .and_then(|p| p.with_executor(Executor::Reference).run(ins.clone()))
            .unwrap()
            .0;
        let g = graph(COLUMNS);
        let fused = Program::new(&g, &program_schedule(&g), &common::bind(&bind))
            .and_then(|p| p.with_executor(Executor::Reference).run(ins))
            .unwrap()
            .0;
        assert_bits(&fused, &unfused, &what);
    }

    /// A transposing broadcast, a bias and integer `iota` arithmetic.
    #[test]
    fn transposed_maps_match_the_reference(a in 1usize..30, b in 1usize..30, seed in 0u64..1000) {
        let bind = [("A", a as i64), ("B", b as i64)];
        let ins = vec![f32t(&[b], &values(b, seed)), f32t(&[a], &values(a, seed + 7))];
        let (got, want) = both(TRANSPOSED, &bind, ins);
        assert_bits(&got, &want, &format!("A={a} B={b}"));
    }

    /// AdamW's three-result update.
    #[test]
    fn adamw_update_matches_the_reference(a in 1usize..40, b in 1usize..70, seed in 0u64..1000) {
        let bind = [("A", a as i64), ("B", b as i64)];
        let x = values(a * b, seed);
        let v: Vec<f32> = values(a * b, seed + 1).iter().map(|v| v.abs()).collect();
        let ins = vec![
            f32t(&[a, b], &x),
            f32t(&[a, b], &values(a * b, seed + 2)),
            f32t(&[a, b], &v),
            f32t(&[], &[0.1]),
            f32t(&[], &[0.05]),
            f32t(&[a, b], &values(a * b, seed + 3)),
        ];
        let (got, want) = both(ADAMW, &bind, ins);
        assert_bits(&got, &want, &format!("A={a} B={b}"));
    }

    /// GELU-tanh's backward as exported (scalar and bias broadcasts, `tanh`).
    #[test]
    fn gelu_backward_matches_the_reference(a in 1usize..40, b in 1usize..70, seed in 0u64..1000) {
        let bind = [("A", a as i64), ("B", b as i64)];
        let (got, want) = both(GELU_BWD, &bind, gelu_inputs(a, b, seed));
        assert_bits(&got, &want, &format!("A={a} B={b}"));
    }
}

/// Group normalization's loop fusion as a NHWC export fuses it, over `f32[B,H,W,G,C]`: the
/// per-group statistics `[B,G]` and the per-channel scale `[G,C]` broadcast back (index maps
/// whose rows are `C` elements long), a transposing broadcast (`[W,B]`) and an `iota`.
const GROUP_NORM: &str = r#"graph @t {
  %0 = input {index = 0, name = "x"} : f32[B,H,W,G,C]
  %1 = input {index = 1, name = "mean"} : f32[B,G]
  %2 = input {index = 2, name = "scale"} : f32[G,C]
  %3 = input {index = 3, name = "t"} : f32[W,B]
  %4 = fusion(%0, %1, %2, %3) {kind = "loop"} : f32[B,H,W,G,C] {
    region @fusion0 {
      %0 = input {index = 0, name = "in0"} : f32[B,H,W,G,C]
      %1 = input {index = 1, name = "in1"} : f32[B,G]
      %2 = input {index = 2, name = "in2"} : f32[G,C]
      %3 = input {index = 3, name = "in3"} : f32[W,B]
      %4 = broadcast_in_dim(%1) {broadcast_dimensions = [0, 3], shape = dims[B, H, W, G, C]} : f32[B,H,W,G,C]
      %5 = broadcast_in_dim(%2) {broadcast_dimensions = [3, 4], shape = dims[B, H, W, G, C]} : f32[B,H,W,G,C]
      %6 = broadcast_in_dim(%3) {broadcast_dimensions = [2, 0], shape = dims[B, H, W, G, C]} : f32[B,H,W,G,C]
      %7 = subtract(%0, %4) : f32[B,H,W,G,C]
      %8 = multiply(%7, %5) : f32[B,H,W,G,C]
      %9 = add(%8, %6) : f32[B,H,W,G,C]
      %10 = iota {dtype = i32, iota_dimension = 2, shape = dims[B, H, W, G, C]} : i32[B,H,W,G,C]
      %11 = convert(%10) {dtype = f32} : f32[B,H,W,G,C]
      %12 = add(%9, %11) : f32[B,H,W,G,C]
      return %12
    }
  }
  return %4
}"#;

fn group_norm(s: [usize; 5], seed: u64) {
    let [b, h, w, g, c] = s;
    let bind = [
        ("B", b as i64),
        ("H", h as i64),
        ("W", w as i64),
        ("G", g as i64),
        ("C", c as i64),
    ];
    let ins = vec![
        f32t(&s, &values(s.iter().product(), seed)),
        f32t(&[b, g], &values(b * g, seed + 1)),
        f32t(&[g, c], &values(g * c, seed + 2)),
        f32t(&[w, b], &values(w * b, seed + 3)),
    ];
    let (got, want) = both(GROUP_NORM, &bind, ins);
    assert_bits(&got, &want, &format!("{s:?}"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Group normalization's broadcasts (rows of `C` elements, offsets advanced row by row
    /// through the outer dimensions) at random shapes, unit dimensions included.
    #[test]
    fn group_norm_maps_match_the_reference(
        b in 1usize..4, h in 1usize..6, w in 1usize..6, g in 1usize..5, c in 1usize..6,
        seed in 0u64..1000,
    ) {
        group_norm([b, h, w, g, c], seed);
    }
}

/// The same above the parallel threshold: launches carry through every outer dimension, and
/// with rows of 7 the threaded split's launches begin inside a row (at 2 or more threads).
/// A softmax over rows of length 0 (`B = 0`): the row kernel is not called (its index
/// arithmetic divides by the row's extents: a hardware trap, not an error), and each row's max
/// and sum are the reductions' initial values, as in the reference.
#[test]
fn softmax_over_empty_rows_matches_the_reference() {
    for a in [1usize, 3, 17] {
        let bind = [("A", a as i64), ("B", 0)];
        let (got, want) = both(SOFTMAX, &bind, vec![f32t(&[a, 0], &[])]);
        assert_bits(&got, &want, &format!("A={a} B=0"));
    }
}

/// Many short rows (a `reduce` of an innermost dimension of 1 to 15 elements, as a scan's
/// state reductions are): the row kernel writes a batch of rows per call, each folded alone,
/// bit for bit as the reference folds them, at row counts that are not multiples of the batch
/// and above the threaded split's threshold.
#[test]
fn short_rows_match_the_reference() {
    for (a, b) in [
        (5003usize, 1usize),
        (4099, 3),
        (4801, 8),
        (3001, 9),
        (2011, 15),
    ] {
        let bind = [("A", a as i64), ("B", b as i64)];
        let x = f32t(&[a, b], &values(a * b, 3));
        let (got, want) = both(SOFTMAX, &bind, vec![x]);
        assert_bits(&got, &want, &format!("A={a} B={b}"));
    }
}

/// Rows whose length is not a multiple of 64: the row's element loop runs its first multiple
/// of 64 elements, then a remainder loop vectorized with masked iterations (1 to 63 elements,
/// or all of a row shorter than 64). Row lengths on both sides of each vector and remainder
/// boundary, through the row reductions, the softmax's normalization (`exponential`,
/// `divide`) and the loop fusion's every index-map kind: the reference's bits.
#[test]
fn rows_with_a_masked_remainder_match_the_reference() {
    for b in [
        1usize, 7, 15, 16, 17, 47, 63, 64, 65, 113, 127, 128, 129, 191,
    ] {
        let a = 9;
        let bind = [("A", a as i64), ("B", b as i64)];
        let x = f32t(&[a, b], &values(a * b, b as u64));
        let (got, want) = both(SOFTMAX, &bind, vec![x]);
        assert_bits(&got, &want, &format!("softmax A={a} B={b}"));
        let (got, want) = both(LOOP, &bind, loop_inputs(a, b, b as u64));
        assert_bits(&got, &want, &format!("loop A={a} B={b}"));
    }
}

/// The row and column kernels' scratch rows are kept on the thread between launches
/// (`exec/scratch.rs`): a reduction launched after a larger one whose scratch held NaN reads
/// only the rows its own kernel wrote, bit for bit as the reference (the shapes stay below the
/// threaded split, so every launch runs on this thread and reuses its buffer).
#[test]
fn reductions_after_larger_ones_read_only_their_own_rows() {
    for ((a0, b0), (a, b)) in [((7usize, 290usize), (3usize, 5usize)), ((2, 100), (9, 1))] {
        let nan = f32t(&[a0, b0], &vec![f32::NAN; a0 * b0]);
        let _ = both(SOFTMAX, &[("A", a0 as i64), ("B", b0 as i64)], vec![nan]);
        let x = f32t(&[a, b], &values(a * b, 5));
        let (got, want) = both(SOFTMAX, &[("A", a as i64), ("B", b as i64)], vec![x]);
        assert_bits(&got, &want, &format!("A={a} B={b} after A={a0} B={b0}"));
    }
    let cols = |a: usize, b: usize, c: usize, fill: Option<f32>| {
        let n = a * b * c;
        let v = |seed| fill.map_or_else(|| values(n, seed), |f| vec![f; n]);
        let ins = vec![
            f32t(&[a, b, c], &v(1)),
            f32t(&[a, b, c], &v(2)),
            f32t(&[c], &values(c, 3)),
        ];
        both(
            COLUMNS,
            &[("A", a as i64), ("B", b as i64), ("C", c as i64)],
            ins,
        )
    };
    let _ = cols(4, 9, 200, Some(f32::NAN));
    let (got, want) = cols(2, 3, 17, None);
    assert_bits(&got, &want, "A=2 B=3 C=17 after A=4 B=9 C=200");
}

/// Integer `clamp` in a loop fusion (a scan body's start indices, `clamp(0, i, S - 1)`) runs
/// as a generated kernel with the reference's values: `min(max(x, lo), hi)`, for values below,
/// inside and above the bounds, and a bound pair crossed (`hi < lo`).
#[test]
fn integer_clamp_matches_the_reference() {
    let src = r#"graph @t {
  %0 = input {index = 0, name = "x"} : i32[A]
  %1 = input {index = 1, name = "hi"} : i32[A]
  %2 = fusion(%0, %1) {kind = "loop"} : i32[A] {
    region @fusion0 {
      %0 = constant {value = dense<1> : i32} : i32[A]
      %1 = input {index = 0, name = "in0"} : i32[A]
      %2 = input {index = 1, name = "in1"} : i32[A]
      %3 = clamp(%0, %1, %2) : i32[A]
      return %3
    }
  }
  return %2
}"#;
    let a = 37usize;
    let x: Vec<i32> = (0..a as i32).map(|i| i * 7 - 100).collect();
    let hi: Vec<i32> = (0..a as i32).map(|i| i * 3 - 20).collect();
    let (got, want) = both(
        src,
        &[("A", a as i64)],
        vec![i32t(&[a], &x), i32t(&[a], &hi)],
    );
    assert_bits(&got, &want, "clamp");
    let expect: Vec<f64> = x
        .iter()
        .zip(&hi)
        .map(|(&v, &h)| f64::from(v.max(1).min(h)))
        .collect();
    assert_eq!(got[0].to_f64_vec(), expect);
}

#[test]
fn large_group_norm_maps_match_the_reference() {
    group_norm([3, 33, 37, 4, 7], 11);
    group_norm([2, 32, 32, 4, 4], 12);
}

/// Group normalization + SiLU backward as the UNet export fuses it: rows of 4 elements would
/// not vectorize, so the kernel takes rows of 512 whose per-group and per-channel offsets come
/// from tables; the same bits as the reference, also across the threaded split.
#[test]
fn group_norm_rows_read_offset_tables_as_the_reference_reads_maps() {
    for b in [1, 3] {
        let (got, want) = both(GN_SILU_BWD, &[("B", b)], gn_silu_inputs(b as usize, 7));
        assert_bits(&got, &want, &format!("B={b}"));
    }
}

/// [`GN_GRADS`]: the group statistics' reduce rows and the scale gradient's column reduction
/// read their per-group broadcasts through offset tables (rows of 512 and of 16); the same bits
/// as the reference.
#[test]
fn group_norm_reductions_read_offset_tables_as_the_reference_reads_maps() {
    for b in [1usize, 3] {
        let n = b * 32 * 32 * 16;
        let ins = vec![
            f32t(&[b, 32, 32, 16], &values(n, 3)),
            f32t(&[b, 1, 1, 4, 1], &values(b * 4, 4)),
            f32t(&[b, 1, 1, 4, 1], &values(b * 4, 5)),
            f32t(&[b, 32, 32, 16], &values(n, 6)),
            f32t(&[], &[0.0]),
        ];
        let (got, want) = both(GN_GRADS, &[("B", b as i64)], ins);
        assert_bits(&got, &want, &format!("B={b}"));
    }
}

/// Large shapes take the threaded split (and the vector loops' bodies, not only their tails).
#[test]
fn large_fusions_match_the_reference() {
    let (a, b) = (300, 257);
    let bind = [("A", a as i64), ("B", b as i64)];
    let (got, want) = both(LOOP, &bind, loop_inputs(a, b, 5));
    assert_bits(&got, &want, "loop");
    let x = f32t(&[a, b], &values(a * b, 9));
    let (got, want) = both(SOFTMAX, &bind, vec![x]);
    assert_bits(&got, &want, "softmax");
}

/// `reduce_precision` in a loop fusion (what `jax.checkpoint` policies and bf16 casts
/// emit): the generated kernel rounds and saturates bit for bit as the reference does, for
/// bf16 (8, 7), f16 (5, 10) and a tiny (3, 2) format, over every exponent, both signs,
/// ties, subnormals, infinities and NaNs.
#[test]
fn reduce_precision_matches_the_reference() {
    let mut xs: Vec<f32> = (0u32..4096)
        .map(|i| f32::from_bits(i.wrapping_mul(0x9E37_79B9) ^ (i << 20)))
        .collect();
    xs.extend([
        0.0,
        -0.0,
        1.0,
        1.5,
        f32::MAX,
        f32::MIN_POSITIVE,
        1e-40,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(0x7fc0_0001),
        f32::from_bits(0x3f80_8000),
        f32::from_bits(0x3f81_8000),
        65504.0,
        65520.0,
    ]);
    let n = xs.len();
    for (e, m) in [(8, 7), (5, 10), (3, 2)] {
        let src = format!(
            r#"graph @t {{
  %0 = input {{index = 0, name = "x"}} : f32[N]
  %1:2 = fusion(%0) {{kind = "loop"}} : f32[N], f32[N] {{
    region @fusion0 {{
      %0 = input {{index = 0, name = "in0"}} : f32[N]
      %1 = reduce_precision(%0) {{exponent_bits = {e}, mantissa_bits = {m}}} : f32[N]
      %2 = multiply(%1, %1) : f32[N]
      return %1, %2
    }}
  }}
  return %1#0, %1#1
}}"#
        );
        let (got, want) = both(&src, &[("N", n as i64)], vec![f32t(&[n], &xs)]);
        assert_bits(&got, &want, &format!("reduce_precision e={e} m={m}"));
    }
}

/// A second binding compiles nothing: every kernel comes from the cache.
#[test]
fn a_second_binding_reuses_every_kernel() {
    let g = graph(SOFTMAX);
    let sched = program_schedule(&g);
    let step = |a: usize, b: usize| {
        let x = f32t(&[a, b], &values(a * b, 3));
        Program::new(&g, &sched, &bind(&[("A", a as i64), ("B", b as i64)]))
            .and_then(|p| p.run(vec![x]))
            .unwrap_or_else(|e| panic!("{e}"));
    };
    step(7, 300);
    let before = ebb_codegen::stats();
    step(13, 129);
    let after = ebb_codegen::stats();
    assert_eq!(after.kernels_compiled, before.kernels_compiled);
    // Two kernels (the max alone is the plain reduce kernel).
    assert!(after.kernels_reused >= before.kernels_reused + 2);
}

/// The same update of two parameters of different static shapes of one rank (AdamW's, per
/// parameter) has one cache key: the kernel takes extents as parameters.
#[test]
fn groups_differing_only_in_extents_share_a_kernel() {
    let update = |shape: &str| {
        format!(
            r#"graph @t {{
  %0 = input {{index = 0, name = "p"}} : f32[{shape}]
  %1 = input {{index = 1, name = "g"}} : f32[{shape}]
  %2 = input {{index = 2, name = "lr"}} : f32[]
  %3 = fusion(%0, %1, %2) {{kind = "loop"}} : f32[{shape}] {{
    region @fusion0 {{
      %0 = input {{index = 0, name = "in0"}} : f32[{shape}]
      %1 = input {{index = 1, name = "in1"}} : f32[{shape}]
      %2 = input {{index = 2, name = "in2"}} : f32[]
      %3 = broadcast_in_dim(%2) {{broadcast_dimensions = [], shape = dims[{shape}]}} : f32[{shape}]
      %4 = multiply(%1, %3) : f32[{shape}]
      %5 = subtract(%0, %4) : f32[{shape}]
      return %5
    }}
  }}
  return %3
}}"#
        )
    };
    let key = |src: &str| {
        let g = graph(src);
        let id = *g.order().last().unwrap();
        let region = &g.node(id).regions[0];
        let layout = ebb_codegen::KernelLayout::of(region).unwrap();
        (
            ebb_codegen::spec::structure_key(region),
            format!("{layout:?}"),
        )
    };
    assert_eq!(key(&update("64")), key(&update("50257")));
    assert_eq!(key(&update("64, 8")), key(&update("3072, 768")));
    assert_eq!(key(&update("A, B")), key(&update("3, 5")));
    // The index maps' rank is part of the kernel (its parameter layout).
    assert_ne!(key(&update("64")), key(&update("3072, 768")));
    // A different op is a different kernel.
    assert_ne!(
        key(&update("64")),
        key(&update("64").replace("subtract(%0, %4)", "add(%0, %4)"))
    );
}

/// Throughput probe on moderate inputs (not a test of speed: `cargo test --release -p
/// ebb-runtime --test integration jit_throughput -- --ignored --nocapture` prints the figures:
/// per op, the fastest of 10 runs).
#[test]
#[ignore]
fn jit_throughput() {
    let (a, b) = (8192, 256);
    let at = bind(&[("A", a as i64), ("B", b as i64)]);
    let x: Vec<f32> = values(a * b, 1)
        .iter()
        .map(|v| v.clamp(-6.0, 6.0))
        .collect();
    // The same with `x` produced by an op, so that it dies at the fusion: written in place.
    let gelu_bwd_in_place = GELU_BWD.replace(
        "%8 = fusion(%0, %1, %2, %3, %4, %5, %6, %7)",
        "%9 = negate(%6) : f32[A,B]\n  %8 = fusion(%0, %1, %2, %3, %4, %5, %9, %7)",
    );
    let abs: Vec<f32> = x.iter().map(|v| v.abs()).collect();
    let adamw_inputs = vec![
        f32t(&[a, b], &x),
        f32t(&[a, b], &x),
        f32t(&[a, b], &abs),
        f32t(&[], &[0.1]),
        f32t(&[], &[0.05]),
        f32t(&[a, b], &x),
    ];
    let cases = [
        ("softmax", SOFTMAX, vec![f32t(&[a, b], &x)]),
        ("adamw", ADAMW, adamw_inputs),
        ("gelu_bwd", GELU_BWD, gelu_inputs(a, b, 1)),
        (
            "gelu_bwd_in_place",
            &gelu_bwd_in_place,
            gelu_inputs(a, b, 1),
        ),
        ("gn_silu_bwd", GN_SILU_BWD, gn_silu_inputs(8, 1)),
    ];
    for (name, src, inputs) in cases {
        let src: &str = src;
        let g = graph(src);
        let at = if name == "gn_silu_bwd" {
            bind(&[("B", 8)])
        } else {
            at.clone()
        };
        let sched = program_schedule(&g);
        for e in [Executor::Jit, Executor::Reference] {
            let p = Program::new(&g, &sched, &at).unwrap().with_executor(e);
            let mut best = vec![f64::INFINITY; sched.len()];
            for _ in 0..10 {
                let (_, stats) = p.run(inputs.clone()).unwrap();
                for (b, t) in best.iter_mut().zip(&stats.op_time) {
                    *b = b.min(t.as_secs_f64() * 1e3);
                }
            }
            println!("{name} {e:?}: per op ms {best:.2?}");
        }
    }
}

/// `log_plus_one` in a loop fusion (softplus as JAX exports it: `max(x, 0) + log1p(exp(-|x|))`,
/// and `log1p` of the raw input) runs as a generated kernel with the bits of the reference
/// executor and of `fastmath::log1p`, over a sweep through (-1, 8] and the special values
/// (`-1`, below `-1`, `±inf`, NaN, `±0`, subnormals, `f32::MAX`), at a length that is not a
/// multiple of the vector width.
#[test]
fn log_plus_one_matches_the_reference() {
    let src = r#"graph @t {
  %0 = input {index = 0, name = "x"} : f32[A]
  %1:2 = fusion(%0) {kind = "loop"} : f32[A], f32[A] {
    region @fusion0 {
      %0 = input {index = 0, name = "in0"} : f32[A]
      %1 = constant {value = dense<0.0> : f32} : f32[A]
      %2 = maximum(%0, %1) : f32[A]
      %3 = abs(%0) : f32[A]
      %4 = negate(%3) : f32[A]
      %5 = exponential(%4) : f32[A]
      %6 = log_plus_one(%5) : f32[A]
      %7 = add(%2, %6) : f32[A]
      %8 = log_plus_one(%0) : f32[A]
      return %7, %8
    }
  }
  return %1#0, %1#1
}"#;
    let mut x: Vec<f32> = (-9_999..=80_000).map(|i| i as f32 * 1e-4).collect();
    x.extend([
        -1.0,
        -1.5,
        f32::NEG_INFINITY,
        f32::INFINITY,
        f32::NAN,
        0.0,
        -0.0,
        1e-40,
        -1e-40,
        f32::MAX,
        -0.999_999_94,
        3e-8,
    ]);
    let a = x.len();
    let (got, want) = both(src, &[("A", a as i64)], vec![f32t(&[a], &x)]);
    assert_bits(&got, &want, "log_plus_one");
    let direct = f32t(&[a], &ebb_runtime::exec::fastmath::log1p(&x));
    assert!(
        got[1].bits_eq(&direct),
        "the kernel's log1p differs from fastmath::log1p"
    );
}
