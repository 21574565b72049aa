//! Tests of loop-fusion results written straight into the `dynamic_update_slice` that reads
//! them (`ebb_runtime::exec::direct_results`): a scan body's fused update goes into its stack's
//! row, and the outputs are bit for bit those of the reference executor, which copies every
//! update; an update whose stack another op reads, or that another op reads, is not marked.

use crate::common;
use common::*;
use ebb_ir::{Graph, OpKind};
use ebb_runtime::exec::direct_results;
use ebb_runtime::{program_schedule, Executor, Program, Tensor};

/// A scan over the rows of `xs` (`[S, N]`): `h' = exp(h)·x_t + x_t` computed by one loop fusion
/// that also yields `h'` as a `[1, N]` row, stacked into `ys` at row `{index}` (`%0` the
/// counter, `%4 = 0`, `%11 = 1`, `%13 = S` defined in the body); `{extra}` adds body ops before
/// the update. Returns the stack and the last state.
fn scan(index: &str, extra: &str) -> String {
    format!(
        r#"graph @scan {{
  symbols N in [1, inf), S in [1, inf)
  %xs = input {{index = 0, name = "xs"}} : f32[S,N]
  %i0 = constant {{value = dense<0> : i32}} : i32[]
  %z = constant {{value = dense<0.0> : f32}} : f32[]
  %h0 = broadcast_in_dim(%z) {{broadcast_dimensions = [], shape = dims[N]}} : f32[N]
  %ys0 = broadcast_in_dim(%z) {{broadcast_dimensions = [], shape = dims[S, N]}} : f32[S,N]
  %w:4 = while(%i0, %h0, %ys0, %xs) : i32[], f32[N], f32[S,N], f32[S,N] {{
    region @cond {{
      %0 = input {{index = 0}} : i32[]
      %1 = input {{index = 1}} : f32[N]
      %2 = input {{index = 2}} : f32[S,N]
      %3 = input {{index = 3}} : f32[S,N]
      %4 = dim_constant {{values = dims[S]}} : i32[]
      %5 = compare(%0, %4) {{comparison_direction = "LT"}} : i1[]
      return %5
    }}
    region @body {{
      %0 = input {{aliasing_output = 0, index = 0}} : i32[]
      %1 = input {{aliasing_output = 1, index = 1}} : f32[N]
      %2 = input {{aliasing_output = 2, index = 2}} : f32[S,N]
      %3 = input {{index = 3}} : f32[S,N]
      %4 = constant {{value = dense<0> : i32}} : i32[]
      %11 = constant {{value = dense<1> : i32}} : i32[]
      %13 = dim_constant {{values = dims[S]}} : i32[]
      %5 = dynamic_slice(%3, %0, %4) {{slice_sizes = dims[1, N]}} : f32[1,N]
      %6 = reshape(%5) {{shape = dims[N]}} : f32[N]
      {extra}
      %8:2 = fusion(%1, %6) {{kind = "loop"}} : f32[N], f32[1,N] {{
        region @cell {{
          %0 = input {{index = 0, name = "in0"}} : f32[N]
          %1 = input {{index = 1, name = "in1"}} : f32[N]
          %2 = exponential(%0) : f32[N]
          %3 = multiply(%2, %1) : f32[N]
          %4 = add(%3, %1) : f32[N]
          %5 = broadcast_in_dim(%4) {{broadcast_dimensions = [1], shape = dims[1, N]}} : f32[1,N]
          return %4, %5
        }}
      }}
      %10 = dynamic_update_slice(%2, %8#1, {index}, %4) : f32[S,N]
      %12 = add(%0, %11) : i32[]
      return %12, %8#0, %10, %3
    }}
  }}
  return %w#2, %w#1
}}"#
    )
}

/// The reversed row index `S - counter - 1`, defined before the fusion.
const REVERSED: &str = "%14 = subtract(%13, %0) : i32[]\n      %15 = subtract(%14, %11) : i32[]";

/// The direct results of the body of `src`'s one `while` at `b`.
fn body_direct(src: &str, b: &[(&str, i64)]) -> Vec<usize> {
    let g = graph(src);
    let w = g
        .order()
        .iter()
        .copied()
        .find(|&id| g.node(id).kind() == OpKind::While)
        .unwrap();
    let body: &Graph = &g.node(w).regions[1];
    direct_results(body, &bind(b))
        .unwrap()
        .into_iter()
        .map(|(id, r)| {
            assert_eq!(body.node(id).kind(), OpKind::Fusion);
            r
        })
        .collect()
}

fn xs(s: usize, n: usize) -> Vec<Tensor> {
    vec![f32t(&[s, n], &values(s * n, 7))]
}

/// Tests that a forward and a reversed scan write the fused row into the stack directly and
/// give the reference executor's bits, at several shapes (one row of one element included).
#[test]
fn a_scan_writes_its_fused_rows_into_the_stack() {
    for (index, extra) in [("%0", ""), ("%15", REVERSED)] {
        let src = scan(index, extra);
        for (s, n) in [(1usize, 1usize), (3, 2), (9, 33), (16, 1024)] {
            let b = [("N", n as i64), ("S", s as i64)];
            assert_eq!(body_direct(&src, &b), vec![1], "{index} S={s} N={n}");
            let (jit, reference) = both(&src, &b, xs(s, n));
            assert_bits(&jit, &reference, &format!("{index} S={s} N={n}"));
        }
    }
}

/// Tests the rows' values on a small case: the stack holds every state in order.
#[test]
fn the_stacked_rows_are_the_states() {
    let src = scan("%0", "");
    let b = [("N", 2), ("S", 3)];
    let x = f32t(&[3, 2], &[0.5, -1., 0.25, 2., -0.75, 0.]);
    let out = run(&src, &b, vec![x.clone()]).unwrap();
    let xv = x.to_f64_vec();
    let mut h = [0f32; 2];
    let mut want = Vec::new();
    for t in 0..3 {
        for j in 0..2 {
            let xt = xv[t * 2 + j] as f32;
            h[j] = h[j].exp() * xt + xt;
        }
        want.extend(h.iter().map(|&v| v as f64));
    }
    // (The kernels' `exp` may differ from the C library's in the last bit.)
    assert_close(&out[0], &want, 1e-6);
    assert_close(&out[1], &want[4..], 1e-6);
}

/// Tests that an update is not marked when the body reads the stack elsewhere (a slice of it
/// before the fusion) or reads the update again (returned as well): the outputs still match.
#[test]
fn an_update_read_elsewhere_is_not_written_early() {
    let b = [("N", 4), ("S", 5)];
    let read = "%20 = dynamic_slice(%2, %0, %4) {slice_sizes = dims[1, N]} : f32[1,N]";
    // The slice's reader comes after the update.
    let src = scan("%0", read).replace(
        "%12 = add(%0, %11) : i32[]",
        "%12 = add(%0, %11) : i32[]\n      %21 = reshape(%20) {shape = dims[N]} : f32[N]\n      \
         %22 = add(%8#0, %21) : f32[N]",
    );
    let src = src.replace("return %12, %8#0, %10, %3", "return %12, %22, %10, %3");
    assert!(body_direct(&src, &b).is_empty());
    let (jit, reference) = both(&src, &b, xs(5, 4));
    assert_bits(&jit, &reference, "stack read");
    let twice = scan("%0", "")
        .replace(
            "%12 = add(%0, %11) : i32[]",
            "%12 = add(%0, %11) : i32[]\n      %23 = reshape(%8#1) {shape = dims[N]} : f32[N]",
        )
        .replace("return %12, %8#0, %10, %3", "return %12, %23, %10, %3");
    assert!(body_direct(&twice, &b).is_empty());
    let (jit, reference) = both(&twice, &b, xs(5, 4));
    assert_bits(&jit, &reference, "update read twice");
}

/// Tests the write at the top level of a program (no arena), counted in `direct_bytes`: the
/// stack an op computes gets the fused row at a clamped index, the other rows unchanged.
#[test]
fn a_program_counts_its_direct_bytes() {
    let src = r#"graph @g {
  symbols N in [1, inf), S in [1, inf)
  %ys = input {index = 0, name = "ys"} : f32[S,N]
  %x = input {index = 1, name = "x"} : f32[N]
  %i = input {index = 2, name = "i"} : i32[]
  %z = constant {value = dense<0> : i32} : i32[]
  %st = negate(%ys) : f32[S,N]
  %f:2 = fusion(%x) {kind = "loop"} : f32[1,N], f32[N] {
    region @r {
      %0 = input {index = 0, name = "in0"} : f32[N]
      %1 = exponential(%0) : f32[N]
      %2 = broadcast_in_dim(%1) {broadcast_dimensions = [1], shape = dims[1, N]} : f32[1,N]
      %3 = negate(%1) : f32[N]
      return %2, %3
    }
  }
  %u = dynamic_update_slice(%st, %f#0, %i, %z) : f32[S,N]
  return %u, %f#1
}"#;
    let g = graph(src);
    let sched = program_schedule(&g);
    for (s, n, i) in [(4usize, 3usize, 1i32), (4, 3, 9), (2, 70, -3)] {
        let b = bind(&[("N", n as i64), ("S", s as i64)]);
        assert_eq!(direct_results(&g, &b).unwrap().len(), 1);
        let ys = f32t(&[s, n], &values(s * n, 3));
        let x = f32t(&[n], &values(n, 4));
        let inputs = vec![ys.clone(), x.clone(), i32t(&[], &[i])];
        let run = |e: Executor| {
            Program::new(&g, &sched, &b)
                .unwrap()
                .with_executor(e)
                .run(inputs.clone())
                .unwrap()
        };
        let (jit, st) = run(Executor::Jit);
        let (reference, rst) = run(Executor::Reference);
        assert_bits(&jit, &reference, &format!("S={s} N={n} i={i}"));
        assert_eq!(st.direct_bytes, 4 * n as u64);
        assert_eq!(rst.direct_bytes, 0);
        let row = i.clamp(0, s as i32 - 1) as usize;
        // The row is `exp(x)`, which the second result negates (exactly).
        let (yv, ev, got) = (ys.to_f64_vec(), jit[1].to_f64_vec(), jit[0].to_f64_vec());
        for r in 0..s {
            for j in 0..n {
                let want = if r == row { -ev[j] } else { -yv[r * n + j] };
                assert_eq!(got[r * n + j].to_bits(), want.to_bits(), "row {r} col {j}");
            }
        }
    }
}
