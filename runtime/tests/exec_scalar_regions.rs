//! Tests of region bodies compiled to scalar instructions and of the `reduce_window` walk
//! along one axis, on the regions JAX emits: `jnp.sort`/`jnp.argsort`'s comparator (keys
//! computed once per element), `jnp.argmax`'s variadic `reduce` body, and cumulative sums
//! forward and reversed (the transpose `jax.grad` gives). Each result is checked against the
//! op's definition computed here, on values with NaN, `-0.0`, infinities and ties.

use crate::common;
use common::*;
use ebb_runtime::{Data, Tensor};

/// `jnp.argsort(x, axis=1)` as JAX exports it: `x` and an iota sorted together by a comparator
/// that maps `-0.0` to `0.0` and every NaN to one NaN, then compares in the total order.
const ARGSORT: &str = r#"graph @t {
  %0 = input {index = 0, name = "x"} : f32[A,B]
  %1 = iota {dtype = ui32, iota_dimension = 1, shape = dims[A, B]} : ui32[A,B]
  %2:2 = sort(%0, %1) {dimension = 1, is_stable = true} : f32[A,B], ui32[A,B] {
    region @body {
      %0 = input {index = 0, name = ""} : f32[]
      %1 = input {index = 1, name = ""} : f32[]
      %2 = input {index = 2, name = ""} : ui32[]
      %3 = input {index = 3, name = ""} : ui32[]
      %4 = constant {value = dense<0.0> : f32} : f32[]
      %5 = compare(%0, %4) {compare_type = "FLOAT", comparison_direction = "EQ"} : i1[]
      %6 = select(%5, %4, %0) : f32[]
      %7 = compare(%0, %0) {compare_type = "FLOAT", comparison_direction = "NE"} : i1[]
      %8 = constant {value = dense<0x7fc00000> : f32} : f32[]
      %9 = select(%7, %8, %6) : f32[]
      %10 = compare(%1, %4) {compare_type = "FLOAT", comparison_direction = "EQ"} : i1[]
      %11 = select(%10, %4, %1) : f32[]
      %12 = compare(%1, %1) {compare_type = "FLOAT", comparison_direction = "NE"} : i1[]
      %13 = select(%12, %8, %11) : f32[]
      %14 = compare(%9, %13) {compare_type = "TOTALORDER", comparison_direction = "LT"} : i1[]
      return %14
    }
  }
  return %2#0, %2#1
}"#;

/// `jnp.argmax(x, axis=1)`: a `reduce` of `x` and an iota whose body keeps the larger value
/// (a NaN wins) and, on ties, the smaller index.
const ARGMAX: &str = r#"graph @t {
  %0 = input {index = 0, name = "x"} : f32[A,B]
  %1 = iota {dtype = i32, iota_dimension = 1, shape = dims[A, B]} : i32[A,B]
  %2 = constant {value = dense<0xFF800000> : f32} : f32[]
  %3 = constant {value = dense<0> : i32} : i32[]
  %4:2 = reduce(%0, %1, %2, %3) {dimensions = [1]} : f32[A], i32[A] {
    region @body {
      %0 = input {index = 0, name = ""} : f32[]
      %1 = input {index = 1, name = ""} : i32[]
      %2 = input {index = 2, name = ""} : f32[]
      %3 = input {index = 3, name = ""} : i32[]
      %4 = compare(%0, %2) {compare_type = "FLOAT", comparison_direction = "GT"} : i1[]
      %5 = compare(%0, %0) {compare_type = "FLOAT", comparison_direction = "NE"} : i1[]
      %6 = or(%4, %5) : i1[]
      %7 = compare(%0, %2) {compare_type = "FLOAT", comparison_direction = "EQ"} : i1[]
      %8 = compare(%1, %3) {compare_type = "SIGNED", comparison_direction = "LT"} : i1[]
      %9 = and(%7, %8) : i1[]
      %10 = or(%6, %9) : i1[]
      %11 = select(%6, %0, %2) : f32[]
      %12 = select(%10, %1, %3) : i32[]
      return %11, %12
    }
  }
  return %4#1
}"#;

/// Rows of values with NaN, both zeros, infinities and repeated values.
fn special_rows(a: usize, b: usize) -> Vec<f32> {
    let pool = [
        f32::NAN,
        -0.0,
        0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1.5,
        -1.5,
        1.5,
        -f32::NAN,
        3.25,
    ];
    (0..a * b)
        .map(|i| {
            let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 37;
            if h % 3 == 0 {
                pool[(h / 3) as usize % pool.len()]
            } else {
                ((h % 41) as f32 - 20.0) / 4.0
            }
        })
        .collect()
}

/// `x` of shape `[a, b]` sorted row by row, stably, by `cmp`: the sorted values and each one's
/// index in its row.
fn sorted_rows(
    x: &[f32],
    b: usize,
    cmp: impl Fn(f32, f32) -> std::cmp::Ordering,
) -> (Vec<f32>, Vec<usize>) {
    let (mut vals, mut idx) = (Vec::new(), Vec::new());
    for row in x.chunks(b) {
        let mut order: Vec<usize> = (0..b).collect();
        order.sort_by(|&i, &j| cmp(row[i], row[j]));
        vals.extend(order.iter().map(|&i| row[i]));
        idx.extend(order.iter().copied());
    }
    (vals, idx)
}

/// Runs `graph` (one input `x: f32[A, B]`) at `[a, b]` on `x`.
fn run_rows(graph: &str, a: usize, b: usize, x: &[f32]) -> Vec<Tensor> {
    run(
        graph,
        &[("A", a as i64), ("B", b as i64)],
        vec![f32t(&[a, b], x)],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Tests `jnp.argsort`'s comparator on rows long and short: the values and indices are a
/// stable sort by the canonicalized key in the total order (NaN last, `-0.0` equal to `0.0`).
#[test]
fn jax_argsort_comparator_sorts_by_its_canonical_keys() {
    for (a, b) in [(3usize, 7usize), (4, 40)] {
        let x = special_rows(a, b);
        let out = run_rows(ARGSORT, a, b, &x);
        let key = |v: f32| {
            if v.is_nan() {
                f32::NAN
            } else if v == 0.0 {
                0.0
            } else {
                v
            }
        };
        let (vals, idx) = sorted_rows(&x, b, |p, q| key(p).total_cmp(&key(q)));
        let idx: Vec<u32> = idx.iter().map(|&i| i as u32).collect();
        let want = [
            f32t(&[a, b], &vals),
            Tensor::new(vec![a, b], Data::U32(idx.into())).unwrap(),
        ];
        assert_bits(&out, &want, &format!("argsort of [{a}, {b}]"));
    }
}

/// `jnp.argmax` of `v` by its definition: the first NaN's index where `v` has one, otherwise
/// the first index of the largest value.
fn argmax_of(v: &[f32]) -> i32 {
    match v.iter().position(|x| x.is_nan()) {
        Some(i) => i as i32,
        None => {
            let m = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            v.iter().position(|&x| x == m).unwrap() as i32
        }
    }
}

/// Tests `jnp.argmax`'s variadic `reduce` body: the first NaN's index where a row has one,
/// otherwise the first index of the largest value.
#[test]
fn jax_argmax_body_picks_the_first_largest_or_nan() {
    let (a, b) = (6usize, 23usize);
    let mut x = special_rows(a, b);
    // A row of ties only.
    x[..b].iter_mut().for_each(|v| *v = 2.0);
    let got = run1(
        ARGMAX,
        &[("A", a as i64), ("B", b as i64)],
        vec![f32t(&[a, b], &x)],
    );
    let want: Vec<i32> = x.chunks(b).map(argmax_of).collect();
    assert_bits(&[got], &[i32t(&[a], &want)], "argmax");
}

/// `reduce_window` of `add` along the middle axis of `f32[2,S,3]`: window `w`, padding
/// `(lo, hi)`, stride `st`.
fn window_along_s(w: &str, lo: &str, hi: &str, st: usize, out_s: &str) -> String {
    format!(
        "graph @t {{
  %0 = input {{index = 0, name = \"x\"}} : f32[2,S,3]
  %1 = constant {{value = dense<0.0> : f32}} : f32[]
  %2 = reduce_window(%0, %1) {{padding = dims[0, 0, {lo}, {hi}, 0, 0], window_dimensions = dims[1, {w}, 1], window_strides = [1, {st}, 1]}} : f32[2,{out_s},3] {{
    region @body {{
      %0 = input {{index = 0, name = \"\"}} : f32[]
      %1 = input {{index = 1, name = \"\"}} : f32[]
      %2 = add(%0, %1) : f32[]
      return %2
    }}
  }}
  return %2
}}"
    )
}

/// The definition: output `o` along the axis folds, from `0.0`, the taps `o·st - lo + k` for
/// `k` in `0..w` in order, a tap outside `0..s` adding `0.0`.
fn window_sums(x: &[f32], s: usize, w: usize, lo: usize, st: usize, out_s: usize) -> Vec<f32> {
    let mut out = Vec::new();
    for p in 0..2 {
        for o in 0..out_s {
            for q in 0..3 {
                let mut acc = 0.0f32;
                for k in 0..w {
                    let i = (o * st + k) as i64 - lo as i64;
                    let v = if (0..s as i64).contains(&i) {
                        x[(p * s + i as usize) * 3 + q]
                    } else {
                        0.0
                    };
                    acc += v;
                }
                out.push(acc);
            }
        }
    }
    out
}

/// Tests cumulative sums forward (padding `S - 1` below: the running sum) and reversed
/// (padding `S - 1` above: `jax.grad`'s transpose of `jnp.cumsum`), a sliding window of 3
/// padded by 1 on both sides and a strided one, on values with `-0.0`, against the
/// definition bit for bit.
#[test]
fn windows_along_one_axis_fold_their_taps_in_order() {
    for s in [1usize, 5, 12] {
        let mut x: Vec<f32> = values(2 * s * 3, s as u64);
        for v in x.iter_mut().step_by(4) {
            *v = -0.0;
        }
        let input = || vec![f32t(&[2, s, 3], &x)];
        let b = &[("S", s as i64)];
        let cases = [
            (window_along_s("S", "S - 1", "0", 1, "S"), s, s - 1, 1, s),
            (window_along_s("S", "0", "S - 1", 1, "S"), s, 0, 1, s),
            (window_along_s("3", "1", "1", 1, "S"), 3, 1, 1, s),
            (
                window_along_s("2", "0", "0", 2, "floordiv(S, 2)"),
                2,
                0,
                2,
                s / 2,
            ),
        ];
        for (k, (src, w, lo, st, out_s)) in cases.into_iter().enumerate() {
            if out_s == 0 {
                continue;
            }
            let got = run1(&src, b, input());
            let want = f32t(&[2, out_s, 3], &window_sums(&x, s, w, lo, st, out_s));
            assert_bits(&[got], &[want], &format!("case {k} at S={s}"));
        }
    }
}

/// `reduce_window` of `add` or `maximum` over NHWC `f32[2,H,W,C]` by the definition: for each
/// output, the window taps in row-major order, a tap at padded, base-dilated position `p`
/// reading `x[p / bd]` where `p ≥ 0`, `p % bd == 0` and `p / bd` is inside, else `init`.
#[allow(clippy::too_many_arguments)]
fn nhwc_window(
    x: &[f32],
    (h, w, c): (usize, usize, usize),
    (oh, ow): (usize, usize),
    win: usize,
    st: usize,
    bd: usize,
    pad: i64,
    max: bool,
) -> Vec<f32> {
    let init = if max { f32::NEG_INFINITY } else { 0.0 };
    let mut out = Vec::new();
    for n in 0..2 {
        for i in 0..oh {
            for j in 0..ow {
                for ch in 0..c {
                    let mut acc = init;
                    for a in 0..win {
                        for b in 0..win {
                            let (p, q) = ((i * st + a) as i64 - pad, (j * st + b) as i64 - pad);
                            let inside = |p: i64, n: usize| {
                                p >= 0 && p % bd as i64 == 0 && ((p / bd as i64) as usize) < n
                            };
                            let v = if inside(p, h) && inside(q, w) {
                                let (p, q) = ((p / bd as i64) as usize, (q / bd as i64) as usize);
                                x[((n * h + p) * w + q) * c + ch]
                            } else {
                                init
                            };
                            acc = if max { acc.max(v) } else { acc + v };
                        }
                    }
                    out.push(acc);
                }
            }
        }
    }
    out
}

/// Tests NHWC pooling windows, whose channel axis is a one-tap identity (each tap adds a row
/// of channels): 2x2 stride-2 max pooling, a 3x3 sum padded by 1, and the gradient of a 2x2
/// stride-2 sum pool (base dilation 2, padding 1), against the definition bit for bit.
#[test]
fn nhwc_windows_fold_rows_of_channels() {
    let (h, c) = (6usize, 8usize);
    let x: Vec<f32> = values(2 * h * h * c, 3);
    // (window, stride, base dilation, padding, max, output side, input side)
    let cases = [
        (2usize, 2usize, 1usize, 0i64, true, 3usize, h),
        (3, 1, 1, 1, false, 6, h),
        (2, 1, 2, 1, false, 6, 3),
    ];
    for (k, (win, st, bd, pad, max, o, side)) in cases.into_iter().enumerate() {
        let xin = &x[..2 * side * side * c];
        let (op, init) = if max {
            ("maximum", "0xFF800000")
        } else {
            ("add", "0.0")
        };
        let src = format!(
            "graph @t {{
  %0 = input {{index = 0, name = \"x\"}} : f32[2,{side},{side},{c}]
  %1 = constant {{value = dense<{init}> : f32}} : f32[]
  %2 = reduce_window(%0, %1) {{base_dilations = [1, {bd}, {bd}, 1], padding = dims[0, 0, {pad}, {pad}, {pad}, {pad}, 0, 0], window_dimensions = dims[1, {win}, {win}, 1], window_strides = [1, {st}, {st}, 1]}} : f32[2,{o},{o},{c}] {{
    region @body {{
      %0 = input {{index = 0, name = \"\"}} : f32[]
      %1 = input {{index = 1, name = \"\"}} : f32[]
      %2 = {op}(%0, %1) : f32[]
      return %2
    }}
  }}
  return %2
}}"
        );
        let got = run1(&src, &[], vec![f32t(&[2, side, side, c], xin)]);
        let want = nhwc_window(xin, (side, side, c), (o, o), win, st, bd, pad, max);
        assert_bits(&[got], &[f32t(&[2, o, o, c], &want)], &format!("case {k}"));
    }
}

/// Tests a window over `f32[2,4,3,6]` that sums pairs along axis 1 (padded by 1 below) and
/// crops the last axis to its first 4 elements (padding −2 above): no axis after axis 1 has
/// the input's extent throughout, so no row of outputs after it is read as a contiguous row
/// of the input (its rows are 6 apart in the input, 4 in the output).
#[test]
fn a_cropped_last_axis_is_not_read_as_a_row() {
    let x: Vec<f32> = values(2 * 4 * 3 * 6, 11);
    let src = "graph @t {
  %0 = input {index = 0, name = \"x\"} : f32[2,4,3,6]
  %1 = constant {value = dense<0.0> : f32} : f32[]
  %2 = reduce_window(%0, %1) {padding = dims[0, 0, 1, 0, 0, 0, 0, -2], window_dimensions = dims[1, 2, 1, 1]} : f32[2,4,3,4] {
    region @body {
      %0 = input {index = 0, name = \"\"} : f32[]
      %1 = input {index = 1, name = \"\"} : f32[]
      %2 = add(%0, %1) : f32[]
      return %2
    }
  }
  return %2
}";
    let got = run1(src, &[], vec![f32t(&[2, 4, 3, 6], &x)]);
    let mut want = Vec::new();
    for n in 0..2 {
        for i in 0..4 {
            for j in 0..3 {
                for c in 0..4 {
                    let mut acc = 0.0f32;
                    for k in 0..2 {
                        let p = i as i64 + k - 1;
                        acc += if p >= 0 {
                            x[((n * 4 + p as usize) * 3 + j) * 6 + c]
                        } else {
                            0.0
                        };
                    }
                    want.push(acc);
                }
            }
        }
    }
    assert_bits(&[got], &[f32t(&[2, 4, 3, 4], &want)], "cropped");
}

/// Tests `jnp.argmax(x, axis=0)` (the reduced axis outer, 37 outputs: more than one set of
/// evaluation lanes, the last one partial): per column, the first NaN's index where the
/// column has one, otherwise the first index of its largest value.
#[test]
fn jax_argmax_body_along_an_outer_axis_over_many_outputs() {
    let (a, b) = (9usize, 37usize);
    let g = ARGMAX
        .replace("iota_dimension = 1", "iota_dimension = 0")
        .replace("dimensions = [1]", "dimensions = [0]")
        .replace(": f32[A], i32[A] {", ": f32[B], i32[B] {");
    let x = special_rows(a, b);
    let got = run1(
        &g,
        &[("A", a as i64), ("B", b as i64)],
        vec![f32t(&[a, b], &x)],
    );
    let want: Vec<i32> = (0..b)
        .map(|j| argmax_of(&(0..a).map(|i| x[i * b + j]).collect::<Vec<f32>>()))
        .collect();
    assert_bits(&[got], &[i32t(&[b], &want)], "argmax along axis 0");
}

/// `lax.top_k`'s sort: `x` and an iota sorted together by `compare(x_lhs, x_rhs)` in
/// direction `GT`, `TOTALORDER`.
const SORT_DESC: &str = r#"graph @t {
  %0 = input {index = 0, name = "x"} : f32[A,B]
  %1 = iota {dtype = i32, iota_dimension = 1, shape = dims[A, B]} : i32[A,B]
  %2:2 = sort(%0, %1) {dimension = 1, is_stable = true} : f32[A,B], i32[A,B] {
    region @body {
      %0 = input {index = 0, name = ""} : f32[]
      %1 = input {index = 1, name = ""} : f32[]
      %2 = input {index = 2, name = ""} : i32[]
      %3 = input {index = 3, name = ""} : i32[]
      %4 = compare(%0, %1) {compare_type = "TOTALORDER", comparison_direction = "GT"} : i1[]
      return %4
    }
  }
  return %2#0, %2#1
}"#;

/// Tests a comparator on the first operand alone in the total order, descending: a stable
/// sort by `total_cmp` reversed (NaN first, `-NaN` last, `0.0` before `-0.0`, ties in input
/// order).
#[test]
fn a_total_order_comparator_sorts_descending_and_stably() {
    for (a, b) in [(3usize, 7usize), (5, 33)] {
        let x = special_rows(a, b);
        let out = run_rows(SORT_DESC, a, b, &x);
        let (vals, idx) = sorted_rows(&x, b, |p, q| q.total_cmp(&p));
        let idx: Vec<i32> = idx.iter().map(|&i| i as i32).collect();
        let want = [f32t(&[a, b], &vals), i32t(&[a, b], &idx)];
        assert_bits(&out, &want, &format!("descending sort of [{a}, {b}]"));
    }
}

/// A variadic `reduce` of `x` and an iota whose body is outside the argmax pattern: the value
/// kept is `maximum(acc, x)` and the index is taken where `x < acc` (`{NEGATE}` is replaced
/// by a body prefix; the result names `%x`).
const MAX_AND_INDEX: &str = r#"graph @t {
  %0 = input {index = 0, name = "x"} : f32[A,B]
  %1 = iota {dtype = i32, iota_dimension = DIM, shape = dims[A, B]} : i32[A,B]
  %2 = constant {value = dense<0xFF800000> : f32} : f32[]
  %3 = constant {value = dense<7> : i32} : i32[]
  %4:2 = reduce(%0, %1, %2, %3) {dimensions = [DIM]} : f32[OUT], i32[OUT] {
    region @body {
      %0 = input {index = 0, name = ""} : f32[]
      %1 = input {index = 1, name = ""} : i32[]
      %2 = input {index = 2, name = ""} : f32[]
      %3 = input {index = 3, name = ""} : i32[]
BODY
      return %6, %8
    }
  }
  return %4#0, %4#1
}"#;

/// Tests that the register-lane fold of a variadic `reduce` (a body of `maximum`, `compare`
/// and `select` compiles to scalar instructions) gives the bits of the per-element path (the
/// same body with `x` passed through two `negate`s, which leaves every bit as it is but does
/// not compile to registers), along the inner axis (fewer outputs than a lane set) and the
/// outer one (37 outputs: several lane sets, the last partial).
#[test]
fn a_variadic_reduce_in_register_lanes_matches_the_per_element_path() {
    let compiled = "      %4 = constant {value = dense<0.0> : f32} : f32[]
      %5 = constant {value = dense<1.0> : f32} : f32[]
      %6 = maximum(%0, %2) : f32[]
      %7 = compare(%2, %0) {compare_type = \"FLOAT\", comparison_direction = \"LT\"} : i1[]
      %8 = select(%7, %1, %3) : i32[]";
    let general = "      %4 = negate(%2) : f32[]
      %5 = negate(%4) : f32[]
      %6 = maximum(%0, %5) : f32[]
      %7 = compare(%5, %0) {compare_type = \"FLOAT\", comparison_direction = \"LT\"} : i1[]
      %8 = select(%7, %1, %3) : i32[]";
    let (a, b) = (9usize, 37usize);
    let x = special_rows(a, b);
    for (dim, out) in [("1", "A"), ("0", "B")] {
        let graph = |body: &str| {
            MAX_AND_INDEX
                .replace("DIM", dim)
                .replace("OUT", out)
                .replace("BODY", body)
        };
        let fast = run_rows(&graph(compiled), a, b, &x);
        let slow = run_rows(&graph(general), a, b, &x);
        assert_bits(&fast, &slow, &format!("reduce over dimension {dim}"));
    }
}
