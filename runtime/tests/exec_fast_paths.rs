//! The executor's fast paths against their general paths, bit for bit: a
//! `dynamic_update_slice` whose update is one contiguous range of its operand (one range copy)
//! against updates that are not (a strided write) and an index-by-index definition; a
//! `broadcast_in_dim` of one element (a fill) against a broadcast of the same values along a
//! dimension of size 2 (a strided view); and a `while` body that returns one value twice and
//! passes an input through (its outputs are moved, not copied, out of a run).

use crate::common;
use common::*;
use ebb_runtime::{Data, Tensor};

/// A graph updating an `x: T[xs]` with `u: T[us]` at the start indices `i` (one `i32` input per
/// dimension); returns the result.
fn dus_graph(ty: &str, xs: &[usize], us: &[usize]) -> String {
    let idx: Vec<String> = (0..xs.len())
        .map(|k| {
            format!(
                "  %{} = input {{index = {}, name = \"i{k}\"}} : i32[]\n",
                k + 2,
                k + 2
            )
        })
        .collect();
    let args: Vec<String> = (0..xs.len()).map(|k| format!("%{}", k + 2)).collect();
    format!(
        "graph @t {{\n  %0 = input {{aliasing_output = 0, index = 0, name = \"x\"}} : {ty}[{}]\n  \
         %1 = input {{index = 1, name = \"u\"}} : {ty}[{}]\n{}  %{} = dynamic_update_slice(%0, %1, {}) : {ty}[{}]\n  return %{}\n}}",
        dims(xs),
        dims(us),
        idx.concat(),
        xs.len() + 2,
        args.join(", "),
        dims(xs),
        xs.len() + 2
    )
}

/// `x` with `u` written at the starts clamped as the spec says, index by index.
fn dus_definition(x: &[u32], xs: &[usize], u: &[u32], us: &[usize], starts: &[i32]) -> Vec<u32> {
    let mut out = x.to_vec();
    let st = strides(xs);
    let s: Vec<usize> = starts
        .iter()
        .zip(xs.iter().zip(us))
        .map(|(&s, (&d, &n))| (s.max(0) as usize).min(d - n))
        .collect();
    for (k, idx) in indices(us).iter().enumerate() {
        let off: usize = (0..xs.len()).map(|i| (idx[i] + s[i]) * st[i]).sum();
        out[off] = u[k];
    }
    out
}

/// Random bit patterns (NaNs with payloads included) as `f32` and as `i32`.
fn bits(n: usize, seed: u64) -> Vec<u32> {
    let mut g = ebb_testkit::Lcg::new(seed);
    (0..n).map(|_| g.next_u64() as u32).collect()
}

fn tensor(ty: &str, shape: &[usize], v: &[u32]) -> Tensor {
    let data = match ty {
        "f32" => Data::F32(
            v.iter()
                .map(|&b| f32::from_bits(b))
                .collect::<Vec<_>>()
                .into(),
        ),
        _ => Data::I32(v.iter().map(|&b| b as i32).collect::<Vec<_>>().into()),
    };
    Tensor::new(shape.to_vec(), data).unwrap()
}

fn bits_of(t: &Tensor) -> Vec<u32> {
    match t.data() {
        Data::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
        Data::I32(v) => v.iter().map(|&x| x as u32).collect(),
        d => panic!("unexpected {:?}", d.dtype()),
    }
}

/// Tests `dynamic_update_slice` bit for bit against its definition for updates that are one
/// contiguous range of the operand (a scan's row `[1, B, H]` into `[S, B, H]`, a partial
/// leading dimension, the whole operand, a single element) and updates that are not (a column,
/// a partial inner dimension), with start indices in and out of range, on a donated operand
/// (updated in its own buffer) and on one that is also returned (copied first).
#[test]
fn dynamic_update_slice_range_copy_matches_definition() {
    let cases: &[(&[usize], &[usize], &[i32])] = &[
        (&[5, 3, 4], &[1, 3, 4], &[2, 0, 0]),
        (&[5, 3, 4], &[1, 3, 4], &[9, -1, 7]),
        (&[5, 3, 4], &[2, 3, 4], &[1, 0, 0]),
        (&[5, 3, 4], &[1, 1, 4], &[4, 1, 0]),
        (&[5, 3, 4], &[1, 1, 1], &[3, 2, 3]),
        (&[5, 3, 4], &[5, 3, 4], &[0, 0, 0]),
        (&[5, 3, 4], &[1, 2, 4], &[0, 1, 0]),
        (&[5, 3, 4], &[5, 3, 1], &[0, 0, 2]),
        (&[5, 3, 4], &[1, 3, 2], &[2, 0, 1]),
        (&[6, 7], &[1, 7], &[5, 0]),
        (&[6, 7], &[3, 2], &[1, 4]),
        (&[8], &[3], &[6]),
    ];
    for (seed, &(xs, us, starts)) in cases.iter().enumerate() {
        for ty in ["f32", "i32"] {
            let x = bits(xs.iter().product(), 2 * seed as u64);
            let u = bits(us.iter().product(), 2 * seed as u64 + 1);
            // Fresh tensors for each run: the donated operand is then the run's alone.
            let inputs = || {
                let mut v = vec![tensor(ty, xs, &x), tensor(ty, us, &u)];
                v.extend(starts.iter().map(|&s| i32t(&[], &[s])));
                v
            };
            let want = dus_definition(&x, xs, &u, us, starts);
            let src = dus_graph(ty, xs, us);
            let got = run1(&src, &[], inputs());
            assert_eq!(bits_of(&got), want, "{ty} {xs:?} <- {us:?} at {starts:?}");
            // The operand also returned (not donated): the update writes into a copy.
            let held = src
                .replace("aliasing_output = 0, ", "")
                .replace("  return %", "  return %0, %");
            let out = run(&held, &[], inputs()).unwrap();
            assert_eq!(bits_of(&out[0]), x, "{ty} {xs:?}: the input changed");
            assert_eq!(bits_of(&out[1]), want, "{ty} {xs:?} <- {us:?} (copied)");
        }
    }
}

/// Tests that a `broadcast_in_dim` of a one-element operand (`[]` or `[1]`, filled) gives the
/// bits of the strided broadcast of a two-element operand holding that element twice, and
/// of the definition.
#[test]
fn one_element_broadcast_fill_matches_strided_broadcast() {
    for (k, v) in [1.5f32, -0.0, f32::from_bits(0x7fc0_1234), f32::INFINITY]
        .into_iter()
        .enumerate()
    {
        let src = "graph @t {
  %0 = input {index = 0, name = \"s\"} : f32[]
  %1 = input {index = 1, name = \"o\"} : f32[1]
  %2 = input {index = 2, name = \"t\"} : f32[2]
  %3 = broadcast_in_dim(%0) {broadcast_dimensions = [], shape = dims[3, 2, 5]} : f32[3,2,5]
  %4 = broadcast_in_dim(%1) {broadcast_dimensions = [2], shape = dims[3, 2, 5]} : f32[3,2,5]
  %5 = broadcast_in_dim(%2) {broadcast_dimensions = [1], shape = dims[3, 2, 5]} : f32[3,2,5]
  %6 = broadcast_in_dim(%0) {broadcast_dimensions = [], shape = dims[0, 4]} : f32[0,4]
  return %3, %4, %5, %6
}";
        let out = run(
            src,
            &[],
            vec![f32t(&[], &[v]), f32t(&[1], &[v]), f32t(&[2], &[v, v])],
        )
        .unwrap();
        let want = vec![v.to_bits(); 30];
        for t in &out[..3] {
            assert_eq!(bits_of(t), want, "value {k}");
        }
        assert_eq!(out[3].shape(), &[0, 4]);
    }
}

/// Tests a `while` body that returns one value twice and an input unchanged: every output of
/// each iteration is that value, as the body computes it, and the loop's results are too.
#[test]
fn while_body_returning_a_value_twice() {
    let src = "graph @t {
  %0 = input {index = 0, name = \"x\"} : f32[3]
  %1 = constant {value = dense<0> : i32} : i32[]
  %2:4 = while(%1, %0, %0, %0) : i32[], f32[3], f32[3], f32[3] {
    region @cond {
      %0 = input {index = 0, name = \"\"} : i32[]
      %1 = input {index = 1, name = \"\"} : f32[3]
      %2 = input {index = 2, name = \"\"} : f32[3]
      %3 = input {index = 3, name = \"\"} : f32[3]
      %4 = constant {value = dense<3> : i32} : i32[]
      %5 = compare(%0, %4) {comparison_direction = \"LT\"} : i1[]
      return %5
    }
    region @body {
      %0 = input {index = 0, name = \"\"} : i32[]
      %1 = input {index = 1, name = \"\"} : f32[3]
      %2 = input {index = 2, name = \"\"} : f32[3]
      %3 = input {index = 3, name = \"\"} : f32[3]
      %4 = constant {value = dense<1> : i32} : i32[]
      %5 = add(%0, %4) : i32[]
      %6 = add(%1, %2) : f32[3]
      return %5, %6, %6, %3
    }
  }
  return %2#0, %2#1, %2#2, %2#3
}";
    let out = run(src, &[], vec![f32t(&[3], &[1.0, 2.0, 3.0])]).unwrap();
    assert_eq!(out[0].as_i32(), Some(&[3][..]));
    // x, 2x, 4x, 8x
    assert_eq!(out[1].to_f64_vec(), vec![8.0, 16.0, 24.0]);
    assert_eq!(out[2].to_f64_vec(), vec![8.0, 16.0, 24.0]);
    assert_eq!(out[3].to_f64_vec(), vec![1.0, 2.0, 3.0]);
}
