//! Tests of the data-movement kernels (`broadcast_in_dim`, `transpose`, `slice`, `pad`,
//! `reverse`, `concatenate`, `dynamic_slice`, `dynamic_update_slice`, `iota`, `reshape`,
//! `constant`, `dim_constant`) against direct index-by-index definitions from the StableHLO
//! spec.

use crate::common;
use common::*;
use proptest::prelude::*;

fn unary_graph(op: &str, in_shape: &[usize], attrs: &str, out_shape: &[usize]) -> String {
    format!(
        "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[{}]\n  %1 = {op}(%0) {{{attrs}}} : f32[{}]\n  return %1\n}}",
        dims(in_shape),
        dims(out_shape)
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Tests that transpose moves element `x[perm^-1(i)]` to `result[i]`.
    #[test]
    fn transpose_matches_definition(shape in prop::collection::vec(1usize..5, 1..5), seed in any::<u64>()) {
        let r = shape.len();
        let mut perm: Vec<usize> = (0..r).collect();
        ebb_testkit::Lcg::new(seed).shuffle(&mut perm);
        let out: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        let src = unary_graph("transpose", &shape, &format!("permutation = {}", list(&perm)), &out);
        let got = run1(&src, &[], vec![arange(&shape)]).to_f64_vec();
        let st = strides(&shape);
        for (k, idx) in indices(&out).iter().enumerate() {
            let off: usize = (0..r).map(|i| idx[i] * st[perm[i]]).sum();
            prop_assert_eq!(got[k], off as f64);
        }
    }

    /// Tests that slice with strides picks `x[start + i * stride]`.
    #[test]
    fn slice_matches_definition(shape in prop::collection::vec(1usize..7, 1..4), s0 in 0usize..3, st0 in 1usize..3) {
        let r = shape.len();
        let start: Vec<usize> = shape.iter().map(|&d| s0.min(d - 1)).collect();
        let limit: Vec<usize> = shape.clone();
        let stride: Vec<usize> = vec![st0; r];
        let out: Vec<usize> = (0..r).map(|i| (limit[i] - start[i]).div_ceil(stride[i])).collect();
        let attrs = format!(
            "limit_indices = dims[{}], start_indices = dims[{}], strides = dims[{}]",
            dims(&limit), dims(&start), dims(&stride)
        );
        let got = run1(&unary_graph("slice", &shape, &attrs, &out), &[], vec![arange(&shape)]).to_f64_vec();
        let st = strides(&shape);
        for (k, idx) in indices(&out).iter().enumerate() {
            let off: usize = (0..r).map(|i| (start[i] + idx[i] * stride[i]) * st[i]).sum();
            prop_assert_eq!(got[k], off as f64);
        }
    }

    /// Tests pad with negative edge padding and interior padding against the spec's
    /// position formula `lo + i * (interior + 1)`.
    #[test]
    fn pad_matches_definition(shape in prop::collection::vec(1usize..5, 1..4), lo in -2i64..3, hi in -2i64..3, it in 0i64..3) {
        let r = shape.len();
        let out: Vec<i64> = shape.iter().map(|&d| d as i64 + lo + hi + (d as i64 - 1) * it).collect();
        prop_assume!(out.iter().all(|&d| d >= 0));
        let out: Vec<usize> = out.iter().map(|&d| d as usize).collect();
        let src = format!(
            "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[{}]\n  %1 = constant {{value = dense<-1.0> : f32}} : f32[]\n  %2 = pad(%0, %1) {{edge_padding_high = [{h}], edge_padding_low = [{l}], interior_padding = [{i}]}} : f32[{}]\n  return %2\n}}",
            dims(&shape),
            dims(&out),
            h = vec![hi.to_string(); r].join(", "),
            l = vec![lo.to_string(); r].join(", "),
            i = vec![it.to_string(); r].join(", "),
        );
        let got = run1(&src, &[], vec![arange(&shape)]).to_f64_vec();
        let mut want = vec![-1.0; got.len()];
        let ost = strides(&out);
        let st = strides(&shape);
        for idx in indices(&shape) {
            let pos: Vec<i64> = idx.iter().map(|&i| lo + i as i64 * (it + 1)).collect();
            if pos.iter().zip(&out).all(|(&p, &d)| p >= 0 && p < d as i64) {
                let o: usize = pos.iter().zip(&ost).map(|(&p, &s)| p as usize * s).sum();
                want[o] = idx.iter().zip(&st).map(|(i, s)| i * s).sum::<usize>() as f64;
            }
        }
        prop_assert_eq!(got, want);
    }
}

/// Tests broadcast_in_dim with a size-1 operand dimension expanded and a new leading dim.
#[test]
fn broadcast_in_dim_expands_unit_dims() {
    let src = unary_graph(
        "broadcast_in_dim",
        &[3, 1],
        "broadcast_dimensions = [1, 2], shape = dims[2, 3, 4]",
        &[2, 3, 4],
    );
    let got = run1(&src, &[], vec![f32t(&[3, 1], &[1.0, 2.0, 3.0])]).to_f64_vec();
    let want: Vec<f64> = indices(&[2, 3, 4])
        .iter()
        .map(|i| (i[1] + 1) as f64)
        .collect();
    assert_eq!(got, want);
}

/// Tests broadcast_in_dim that only adds unit dimensions (the operand's kept in order: the
/// result shares the operand's buffer), and one that also moves a dimension (a copy).
#[test]
fn broadcast_in_dim_adding_unit_dims_keeps_the_elements() {
    for (bd, out, want) in [
        ("[1, 3]", [1, 2, 1, 3], [0., 1., 2., 3., 4., 5.]),
        ("[3, 1]", [1, 3, 1, 2], [0., 3., 1., 4., 2., 5.]),
    ] {
        let attrs = format!("broadcast_dimensions = {bd}, shape = dims[{}]", dims(&out));
        let src = unary_graph("broadcast_in_dim", &[2, 3], &attrs, &out);
        let got = run1(&src, &[], vec![arange(&[2, 3])]).to_f64_vec();
        assert_eq!(got, want);
    }
}

/// Tests reverse along two dimensions.
#[test]
fn reverse_flips_the_given_dimensions() {
    let src = unary_graph("reverse", &[2, 3], "dimensions = [0, 1]", &[2, 3]);
    assert_eq!(
        run1(&src, &[], vec![arange(&[2, 3])]).to_f64_vec(),
        vec![5.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    );
}

/// Tests concatenate along the middle dimension and a symbolic reshape.
#[test]
fn concatenate_and_symbolic_reshape() {
    let src = "graph @t {
  symbols B in [1, inf)
  %0 = input {index = 0, name = \"a\"} : f32[B,1,2]
  %1 = input {index = 1, name = \"b\"} : f32[B,2,2]
  %2 = concatenate(%0, %1) {dimension = 1} : f32[B,3,2]
  %3 = reshape(%2) {shape = dims[B*6]} : f32[B*6]
  return %3
}";
    let got = run1(
        src,
        &[("B", 2)],
        vec![
            f32t(&[2, 1, 2], &[0., 1., 10., 11.]),
            f32t(&[2, 2, 2], &[2., 3., 4., 5., 12., 13., 14., 15.]),
        ],
    );
    assert_eq!(got.shape(), &[12]);
    assert_eq!(
        got.to_f64_vec(),
        vec![0., 1., 2., 3., 4., 5., 10., 11., 12., 13., 14., 15.]
    );
}

/// Tests that dynamic_slice and dynamic_update_slice clamp start indices into range.
#[test]
fn dynamic_slice_and_update_clamp_starts() {
    let src = "graph @t {
  %0 = input {index = 0, name = \"x\"} : f32[4,3]
  %1 = input {index = 1, name = \"i\"} : i32[]
  %2 = input {index = 2, name = \"j\"} : i32[]
  %3 = dynamic_slice(%0, %1, %2) {slice_sizes = dims[2, 2]} : f32[2,2]
  %4 = constant {value = dense<-1.0> : f32} : f32[2,2]
  %5 = dynamic_update_slice(%0, %4, %1, %2) : f32[4,3]
  return %3, %5
}";
    let out = run(
        src,
        &[],
        vec![arange(&[4, 3]), i32t(&[], &[7]), i32t(&[], &[-3])],
    )
    .unwrap();
    // i clamps to 4-2 = 2, j to 0
    assert_eq!(out[0].to_f64_vec(), vec![6., 7., 9., 10.]);
    assert_eq!(
        out[1].to_f64_vec(),
        vec![0., 1., 2., 3., 4., 5., -1., -1., 8., -1., -1., 11.]
    );
}

/// Tests iota along dimension 1 converted to f32, and dim_constant evaluated at the bindings.
#[test]
fn iota_and_dim_constant() {
    let src = "graph @t {
  symbols B in [1, inf), S in [1, inf)
  %0 = iota {dtype = f32, iota_dimension = 1, shape = dims[2, S]} : f32[2,S]
  %1 = dim_constant {values = dims[B*S, S + 1]} : i32[2]
  return %0, %1
}";
    let out = run(src, &[("B", 3), ("S", 4)], vec![]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![0., 1., 2., 3., 0., 1., 2., 3.]);
    assert_eq!(out[1].as_i32(), Some(&[12, 5][..]));
}

/// Tests that a dense (non-splat) literal is laid out row-major.
#[test]
fn dense_constant_literal() {
    let src = "graph @t {
  %0 = constant {value = dense<\"0x0000803f000000400000404000008040\"> : f32} : f32[2,2]
  return %0
}";
    assert_eq!(run1(src, &[], vec![]).to_f64_vec(), vec![1., 2., 3., 4.]);
}

/// A `dynamic_slice` and a `slice` of rows of a graph input (one contiguous range each: read
/// in place, as a loop body reads its stacked input) give the rows' values, also when a
/// result is a graph output (it leaves the run as a copy, not a view of the input) and when a
/// later op reads it.
#[test]
fn contiguous_slices_of_an_input_read_its_values() {
    let src = r#"graph @t {
  %0 = input {index = 0, name = "x"} : f32[4,2,3]
  %1 = constant {value = dense<2> : i32} : i32[]
  %2 = constant {value = dense<0> : i32} : i32[]
  %3 = dynamic_slice(%0, %1, %2, %2) {slice_sizes = dims[1, 2, 3]} : f32[1,2,3]
  %4 = slice(%0) {limit_indices = dims[2, 2, 3], start_indices = dims[1, 1, 0], strides = dims[1, 1, 1]} : f32[1,1,3]
  %5 = reshape(%3) {shape = dims[2, 3]} : f32[2,3]
  %6 = add(%5, %5) : f32[2,3]
  return %3, %4, %6
}"#;
    let out = run(src, &[], vec![arange(&[4, 2, 3])]).unwrap();
    let row: Vec<f64> = (12..18).map(f64::from).collect();
    assert_eq!(out[0].to_f64_vec(), row);
    assert_eq!(out[1].to_f64_vec(), vec![9.0, 10.0, 11.0]);
    let twice: Vec<f64> = row.iter().map(|v| 2.0 * v).collect();
    assert_eq!(out[2].to_f64_vec(), twice);
    assert!(out.iter().all(|t| !t.data().is_view()));
}

/// A `dynamic_slice` of a donated stack that a later `dynamic_update_slice` writes in place (a
/// scan body reading the stack it updates later in the iteration, its row passed through a
/// reshape and an `optimization_barrier`): the readers see the row before the update, the
/// update stays in the stack's own buffer, and a slice that is also returned is the old row.
#[test]
fn slices_of_a_stack_updated_later_read_its_old_values() {
    let src = |ret: &str| {
        format!(
            r#"graph @t {{
  %0 = input {{aliasing_output = 0, index = 0, name = "x"}} : f32[4,3]
  %1 = input {{index = 1, name = "i"}} : i32[]
  %2 = constant {{value = dense<0> : i32}} : i32[]
  %3 = dynamic_slice(%0, %1, %2) {{slice_sizes = dims[1, 3]}} : f32[1,3]
  %4 = reshape(%3) {{shape = dims[3]}} : f32[3]
  %5:2 = optimization_barrier(%4, %1) : f32[3], i32[]
  %6 = multiply(%5#0, %5#0) : f32[3]
  %7 = reshape(%6) {{shape = dims[1, 3]}} : f32[1,3]
  %8 = dynamic_update_slice(%0, %7, %5#1, %2) : f32[4,3]
  return {ret}
}}"#
        )
    };
    let mut want: Vec<f64> = (0..12).map(f64::from).collect();
    for v in &mut want[6..9] {
        *v *= *v;
    }
    let x = arange(&[4, 3]);
    let at = x.as_f32().unwrap().as_ptr();
    let out = run(&src("%8"), &[], vec![x, i32t(&[], &[2])]).unwrap();
    assert_eq!(out[0].to_f64_vec(), want);
    assert_eq!(
        out[0].as_f32().unwrap().as_ptr(),
        at,
        "the update was not in place"
    );
    let out = run(&src("%8, %4"), &[], vec![arange(&[4, 3]), i32t(&[], &[2])]).unwrap();
    assert_eq!(out[0].to_f64_vec(), want);
    assert_eq!(out[1].to_f64_vec(), vec![6.0, 7.0, 8.0]);
    assert!(out.iter().all(|t| !t.data().is_view()));
}
