//! Tests of `reduce`, `reduce_window` and `select_and_scatter`: recognized bodies against
//! direct definitions, general (multi-input) bodies, padding and dilation.

use crate::common;
use common::*;
use proptest::prelude::*;

fn body(dtype: &str, op: &str) -> String {
    format!(
        "region @body {{
      %0 = input {{index = 0, name = \"\"}} : {dtype}[]
      %1 = input {{index = 1, name = \"\"}} : {dtype}[]
      %2 = {op}(%0, %1) : {dtype}[]
      return %2
    }}"
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Tests reduce-add and reduce-max over a random set of dimensions (merged, split across
    /// threads or not) against a direct loop.
    #[test]
    fn reduce_matches_definition(shape in prop::collection::vec(1usize..6, 1..5), mask in any::<u8>(), max in any::<bool>()) {
        let r = shape.len();
        let red: Vec<usize> = (0..r).filter(|i| mask >> i & 1 == 1).collect();
        let kept: Vec<usize> = (0..r).filter(|i| !red.contains(i)).collect();
        let out: Vec<usize> = kept.iter().map(|&i| shape[i]).collect();
        let (op, init) = if max { ("maximum", "-inf") } else { ("add", "0.0") };
        let src = format!(
            "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[{}]\n  %1 = constant {{value = dense<{init}> : f32}} : f32[]\n  %2 = reduce(%0, %1) {{dimensions = [{}]}} : f32[{}] {{\n    {}\n  }}\n  return %2\n}}",
            dims(&shape),
            red.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "),
            dims(&out),
            body("f32", op)
        );
        let n: usize = shape.iter().product();
        let x: Vec<f32> = (0..n).map(|i| ((i * 7919) % 101) as f32 - 50.0).collect();
        let got = run1(&src, &[], vec![f32t(&shape, &x)]);
        let ost = strides(&out);
        let mut want = vec![if max { f64::NEG_INFINITY } else { 0.0 }; out.iter().product()];
        for (k, idx) in indices(&shape).iter().enumerate() {
            let o: usize = kept.iter().zip(&ost).map(|(&d, &s)| idx[d] * s).sum();
            want[o] = if max { want[o].max(x[k] as f64) } else { want[o] + x[k] as f64 };
        }
        prop_assert_eq!(got.to_f64_vec(), want);
    }
}

/// Tests a large reduction (split across threads along the kept dimension) over the last
/// dimension and over the first dimension.
#[test]
fn large_reductions_over_first_and_last_dims() {
    let (m, n) = (300, 257);
    let x: Vec<f32> = (0..m * n).map(|i| (i % 13) as f32).collect();
    for (dim, out) in [(1usize, m), (0, n)] {
        let src = format!(
            "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[{m},{n}]\n  %1 = constant {{value = dense<1.0> : f32}} : f32[]\n  %2 = reduce(%0, %1) {{dimensions = [{dim}]}} : f32[{out}] {{\n    {}\n  }}\n  return %2\n}}",
            body("f32", "add")
        );
        let got = run1(&src, &[], vec![f32t(&[m, n], &x)]).to_f64_vec();
        for (o, g) in got.iter().enumerate() {
            let want: f64 = 1.0
                + (0..if dim == 1 { n } else { m })
                    .map(|k| x[if dim == 1 { o * n + k } else { k * n + o }] as f64)
                    .sum::<f64>();
            assert_eq!(*g, want, "dim {dim} output {o}");
        }
    }
}

/// A `bf16` reduction of leading rows into kept columns (a bias gradient), large enough to
/// split its columns over threads: every result is the rows combined in order in `f64` (the
/// values span 2^±40, so the `f64` sums round and another order would give other bits),
/// rounded once.
#[test]
fn column_reductions_combine_rows_in_order() {
    use half::bf16;
    let (m, n) = (300, 257);
    let x: Vec<bf16> = (0..m * n)
        .map(|i| {
            let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            let e = (h % 81) as i32 - 40;
            bf16::from_f64(
                ((h >> 8) % 255) as f64 / 128.0
                    * 2f64.powi(e)
                    * if h & 1 == 0 { 1.0 } else { -1.0 },
            )
        })
        .collect();
    let src = format!(
        "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : bf16[{m},{n}]\n  %1 = constant {{value = dense<0.0> : bf16}} : bf16[]\n  %2 = reduce(%0, %1) {{dimensions = [0]}} : bf16[{n}] {{\n    {}\n  }}\n  return %2\n}}",
        body("bf16", "add")
    );
    let t =
        ebb_runtime::Tensor::new(vec![m, n], ebb_runtime::Data::BF16(x.clone().into())).unwrap();
    let got = run1(&src, &[], vec![t]);
    let ebb_runtime::Data::BF16(got) = got.data() else {
        panic!("not bf16");
    };
    for j in 0..n {
        let want = (0..m).fold(0f64, |a, i| a + x[i * n + j].to_f64());
        assert_eq!(
            got[j].to_bits(),
            bf16::from_f64(want).to_bits(),
            "column {j}"
        );
    }
}

/// `f16` sums and products (widened to `f32` before the reduction) over leading rows (split
/// over threads by columns) and over the innermost dimension: every result is its elements
/// combined in order in `f64` from the init value, rounded once as `f16::from_f32` of the
/// `f32` rounding; one column and one row hold an infinity.
#[test]
fn f16_sums_and_products_combine_in_order() {
    use half::f16;
    let (m, n) = (300, 257);
    let mut x: Vec<f16> = (0..m * n)
        .map(|i| {
            let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            let e = (h % 16) as i32 - 12;
            let s = if h & 1 == 0 { 1.0 } else { -1.0 };
            f16::from_f64(((h >> 8) % 255 + 1) as f64 / 128.0 * 2f64.powi(e) * s)
        })
        .collect();
    x[5 * n + 7] = f16::INFINITY;
    let t = ebb_runtime::Tensor::new(vec![m, n], ebb_runtime::Data::F16(x.clone().into())).unwrap();
    for (op, init) in [("add", 0.5f64), ("multiply", 1.0)] {
        for (dim, out) in [(0usize, n), (1, m)] {
            let src = format!(
                "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f16[{m},{n}]\n  %1 = constant {{value = dense<{init:?}> : f16}} : f16[]\n  %2 = reduce(%0, %1) {{dimensions = [{dim}]}} : f16[{out}] {{\n    {}\n  }}\n  return %2\n}}",
                body("f16", op)
            );
            let got = run1(&src, &[], vec![t.clone()]);
            let ebb_runtime::Data::F16(got) = got.data() else {
                panic!("not f16");
            };
            for (k, g) in got.iter().enumerate() {
                let at = |i: usize| if dim == 0 { x[i * n + k] } else { x[k * n + i] };
                let len = if dim == 0 { m } else { n };
                let want = (0..len).fold(init, |a, i| {
                    let v = at(i).to_f64();
                    if op == "add" {
                        a + v
                    } else {
                        a * v
                    }
                });
                let want = f16::from_f32(want as f32);
                assert_eq!(g.to_bits(), want.to_bits(), "{op} over {dim}, result {k}");
            }
        }
    }
}

/// Group normalization's statistics: `f32[P,G,C]` reduced over positions and channels into
/// `f32[G]`; every result is, position by position, its `C` channels summed in order in `f64`
/// and added to the running sum (the values span 2^±40, so another order gives other bits),
/// rounded once.
#[test]
fn reductions_around_a_kept_block_combine_rows_in_order() {
    let (p, g, c) = (97, 4, 5);
    let x: Vec<f32> = (0..p * g * c)
        .map(|i| {
            let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            let e = (h % 81) as i32 - 40;
            (((h >> 8) % 255) as f64 / 128.0 * 2f64.powi(e) * if h & 1 == 0 { 1.0 } else { -1.0 })
                as f32
        })
        .collect();
    let src = format!(
        "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[{p},{g},{c}]\n  %1 = constant {{value = dense<0.0> : f32}} : f32[]\n  %2 = reduce(%0, %1) {{dimensions = [0, 2]}} : f32[{g}] {{\n    {}\n  }}\n  return %2\n}}",
        body("f32", "add")
    );
    let got = run1(&src, &[], vec![f32t(&[p, g, c], &x)]).to_f64_vec();
    for k in 0..g {
        let want = (0..p).fold(0f64, |a, i| {
            let row = &x[(i * g + k) * c..(i * g + k + 1) * c];
            let s = row[1..]
                .iter()
                .fold(f64::from(row[0]), |s, &v| s + f64::from(v));
            a + s
        });
        assert_eq!(
            got[k].to_bits(),
            f64::from(want as f32).to_bits(),
            "group {k}"
        );
    }
}

/// An embedding bag's sum (and a product): `[P, N, K]` reduced over its middle dimension
/// into `[P, K]`, `f32` large enough to split its blocks over threads, and `bf16`: every result
/// is the init then its `N` elements combined in order in `f64` (the values span 2^±40, so
/// another order gives other bits), rounded once.
#[test]
fn middle_reductions_combine_rows_in_order() {
    use half::bf16;
    let (p, n, k) = (301, 4, 64);
    let x: Vec<f64> = (0..p * n * k)
        .map(|i| {
            let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            let e = (h % 81) as i32 - 40;
            ((h >> 8) % 255 + 1) as f64 / 128.0 * 2f64.powi(e) * if h & 1 == 0 { 1.0 } else { -1.0 }
        })
        .collect();
    for (op, init) in [("add", 0.5f64), ("multiply", 1.0)] {
        let want = |x: &[f64], o: usize| {
            let (b, c) = (o / k, o % k);
            (0..n).fold(init, |a, j| {
                let v = x[(b * n + j) * k + c];
                if op == "add" {
                    a + v
                } else {
                    a * v
                }
            })
        };
        for dtype in ["f32", "bf16"] {
            let src = format!(
                "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : {dtype}[{p},{n},{k}]\n  %1 = constant {{value = dense<{init:?}> : {dtype}}} : {dtype}[]\n  %2 = reduce(%0, %1) {{dimensions = [1]}} : {dtype}[{p},{k}] {{\n    {}\n  }}\n  return %2\n}}",
                body(dtype, op)
            );
            if dtype == "f32" {
                let xs: Vec<f32> = x.iter().map(|&v| v as f32).collect();
                let xd: Vec<f64> = xs.iter().map(|&v| f64::from(v)).collect();
                let got = run1(&src, &[], vec![f32t(&[p, n, k], &xs)]).to_f64_vec();
                for (o, g) in got.iter().enumerate() {
                    let w = f64::from(want(&xd, o) as f32);
                    assert_eq!(g.to_bits(), w.to_bits(), "{op} {dtype} result {o}");
                }
            } else {
                let xs: Vec<bf16> = x.iter().map(|&v| bf16::from_f64(v)).collect();
                let xd: Vec<f64> = xs.iter().map(|v| v.to_f64()).collect();
                let t = ebb_runtime::Tensor::new(vec![p, n, k], ebb_runtime::Data::BF16(xs.into()))
                    .unwrap();
                let got = run1(&src, &[], vec![t]);
                let ebb_runtime::Data::BF16(got) = got.data() else {
                    panic!("not bf16");
                };
                for (o, g) in got.iter().enumerate() {
                    let w = bf16::from_f64(want(&xd, o));
                    assert_eq!(g.to_bits(), w.to_bits(), "{op} {dtype} result {o}");
                }
            }
        }
    }
}

/// The reductions lift `bf16`/`f16` to `f64` through `f32`: `half`'s `to_f64`, bit for bit,
/// for every pattern (NaN payloads included).
#[test]
fn low_precision_elements_lift_to_f64_as_half_does() {
    use ebb_runtime::tensor::Elem;
    for b in 0..=u16::MAX {
        let (x, y) = (half::bf16::from_bits(b), half::f16::from_bits(b));
        assert_eq!(
            Elem::to_f64(x).to_bits(),
            x.to_f64().to_bits(),
            "bf16 {b:#06x}"
        );
        assert_eq!(
            Elem::to_f64(y).to_bits(),
            y.to_f64().to_bits(),
            "f16 {b:#06x}"
        );
    }
}

/// Tests a two-input reduce (argmax: value and index) whose body is evaluated through the
/// region, with ties resolved toward the smaller index by the body itself.
#[test]
fn argmax_reduce_runs_the_region() {
    let src = "graph @t {
  %0 = input {index = 0, name = \"x\"} : f32[2,4]
  %1 = iota {dtype = i32, iota_dimension = 1, shape = dims[2, 4]} : i32[2,4]
  %2 = constant {value = dense<-inf> : f32} : f32[]
  %3 = constant {value = dense<0> : i32} : i32[]
  %4:2 = reduce(%0, %1, %2, %3) {dimensions = [1]} : f32[2], i32[2] {
    region @body {
      %0 = input {index = 0, name = \"\"} : f32[]
      %1 = input {index = 1, name = \"\"} : i32[]
      %2 = input {index = 2, name = \"\"} : f32[]
      %3 = input {index = 3, name = \"\"} : i32[]
      %4 = compare(%0, %2) {comparison_direction = \"GE\"} : i1[]
      %5 = select(%4, %0, %2) : f32[]
      %6 = select(%4, %1, %3) : i32[]
      return %5, %6
    }
  }
  return %4#0, %4#1
}";
    let out = run(
        src,
        &[],
        vec![f32t(&[2, 4], &[1., 5., 5., 2., -3., -1., -2., -9.])],
    )
    .unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![5., -1.]);
    assert_eq!(out[1].as_i32(), Some(&[1, 1][..]));
}

/// Tests a boolean and-reduction (the fixtures' `reduce_and` bounds checks).
#[test]
fn boolean_and_reduce() {
    let src = format!(
        "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : i1[2,3]\n  %1 = constant {{value = dense<true> : i1}} : i1[]\n  %2 = reduce(%0, %1) {{dimensions = [1]}} : i1[2] {{\n    {}\n  }}\n  return %2\n}}",
        body("i1", "and")
    );
    let x = ebb_runtime::Tensor::new(
        vec![2, 3],
        ebb_runtime::Data::I1(vec![true, true, true, true, false, true].into()),
    )
    .unwrap();
    assert_eq!(run1(&src, &[], vec![x]).to_f64_vec(), vec![1., 0.]);
}

fn window_graph(
    attrs: &str,
    in_shape: &[usize],
    out_shape: &[usize],
    op: &str,
    init: &str,
) -> String {
    format!(
        "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[{}]\n  %1 = constant {{value = dense<{init}> : f32}} : f32[]\n  %2 = reduce_window(%0, %1) {{{attrs}}} : f32[{}] {{\n    {}\n  }}\n  return %2\n}}",
        dims(in_shape),
        dims(out_shape),
        body("f32", op)
    )
}

/// Tests 2x2/stride-2 max pooling, and padding (padding elements are the init value).
#[test]
fn reduce_window_max_pool_and_padding() {
    let src = window_graph(
        "window_dimensions = [2, 2], window_strides = [2, 2]",
        &[4, 4],
        &[2, 2],
        "maximum",
        "-inf",
    );
    assert_eq!(
        run1(&src, &[], vec![arange(&[4, 4])]).to_f64_vec(),
        vec![5., 7., 13., 15.]
    );
    // sum over windows of 3 with padding 1 on each side: [0+0+1, 0+1+2, 1+2+3, 2+3+0]
    let src = window_graph(
        "padding = [1, 1], window_dimensions = [3]",
        &[4],
        &[4],
        "add",
        "0.0",
    );
    assert_eq!(
        run1(&src, &[], vec![arange(&[4])]).to_f64_vec(),
        vec![1., 3., 6., 5.]
    );
}

/// Tests base dilation (holes take the init value) and window dilation.
#[test]
fn reduce_window_dilations() {
    // base dilation 2: [0, _, 1, _, 2] ; windows of 2 with stride 1 -> max(0,_)=0, max(_,1)=1, 1, 2
    let src = window_graph(
        "base_dilations = [2], window_dimensions = [2]",
        &[3],
        &[4],
        "maximum",
        "-inf",
    );
    assert_eq!(
        run1(&src, &[], vec![arange(&[3])]).to_f64_vec(),
        vec![0., 1., 1., 2.]
    );
    // window dilation 2: windows {0,2}, {1,3}, {2,4}
    let src = window_graph(
        "window_dilations = [2], window_dimensions = [2]",
        &[5],
        &[3],
        "add",
        "0.0",
    );
    assert_eq!(
        run1(&src, &[], vec![arange(&[5])]).to_f64_vec(),
        vec![2., 4., 6.]
    );
}

/// Tests select_and_scatter as the gradient of max pooling: each source value lands on its
/// window's maximum (first one on ties, as `GE` keeps the current choice).
#[test]
fn select_and_scatter_routes_to_the_window_maximum() {
    let src = "graph @t {
  %0 = input {index = 0, name = \"x\"} : f32[2,4]
  %1 = input {index = 1, name = \"src\"} : f32[1,2]
  %2 = constant {value = dense<0.0> : f32} : f32[]
  %3 = select_and_scatter(%0, %1, %2) {window_dimensions = [2, 2], window_strides = [2, 2]} : f32[2,4] {
    region @select {
      %0 = input {index = 0, name = \"\"} : f32[]
      %1 = input {index = 1, name = \"\"} : f32[]
      %2 = compare(%0, %1) {comparison_direction = \"GE\"} : i1[]
      return %2
    }
    region @scatter {
      %0 = input {index = 0, name = \"\"} : f32[]
      %1 = input {index = 1, name = \"\"} : f32[]
      %2 = add(%0, %1) : f32[]
      return %2
    }
  }
  return %3
}";
    let x = f32t(&[2, 4], &[1., 9., 3., 3., 4., 2., 3., 0.]);
    let got = run1(src, &[], vec![x, f32t(&[1, 2], &[10., 20.])]);
    assert_eq!(got.to_f64_vec(), vec![0., 10., 20., 0., 0., 0., 0., 0.]);
}

/// Tests a `reduce_window` whose window size and padding are symbolic (`jnp.cumsum` over a
/// symbolic axis: window `[1, S]` padded by `S - 1` below): at several bindings of `S` the
/// result is the running sum along that axis, and a running maximum likewise.
#[test]
fn reduce_window_with_a_symbolic_window_is_a_cumulative_reduction() {
    for (op, init) in [("add", "0.0"), ("maximum", "-inf")] {
        let src = format!(
            "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[2,S]\n  %1 = constant {{value = dense<{init}> : f32}} : f32[]\n  %2 = reduce_window(%0, %1) {{padding = dims[0, 0, S - 1, 0], window_dimensions = dims[1, S]}} : f32[2,S] {{\n    {}\n  }}\n  return %2\n}}",
            body("f32", op)
        );
        for s in [1usize, 3, 6] {
            let x: Vec<f32> = (0..2 * s).map(|i| ((i * 7) % 5) as f32 - 2.0).collect();
            let got = run1(&src, &[("S", s as i64)], vec![f32t(&[2, s], &x)]).to_f64_vec();
            let mut want = Vec::new();
            for row in x.chunks(s) {
                let mut acc = if op == "add" {
                    0.0f32
                } else {
                    f32::NEG_INFINITY
                };
                for &v in row {
                    acc = if op == "add" { acc + v } else { acc.max(v) };
                    want.push(acc as f64);
                }
            }
            assert_eq!(got, want, "{op} at S={s}");
        }
    }
}

/// Tests NCHW max pooling and its gradient above the parallel threshold (windows 2x2 stride 2
/// and overlapping 3x3 stride 2, values with ties) against direct loops: the row-wise window
/// walk and the per-image split of `select_and_scatter` give the definition's bits.
#[test]
fn max_pooling_and_its_gradient_match_the_definition() {
    let (b, c, h) = (8, 8, 29);
    for (k, s) in [(2usize, 2usize), (3, 2)] {
        let o = (h - k) / s + 1;
        let n = b * c * h * h;
        let x: Vec<f32> = (0..n).map(|i| ((i * 7919) % 101) as f32 - 50.0).collect();
        let g: Vec<f32> = (0..b * c * o * o).map(|i| (i % 13) as f32 + 0.5).collect();
        let win =
            format!("window_dimensions = [1, 1, {k}, {k}], window_strides = [1, 1, {s}, {s}]");
        let pool = window_graph(&win, &[b, c, h, h], &[b, c, o, o], "maximum", "-inf");
        let grad = format!(
            "graph @t {{
  %0 = input {{index = 0, name = \"x\"}} : f32[{b},{c},{h},{h}]
  %1 = input {{index = 1, name = \"src\"}} : f32[{b},{c},{o},{o}]
  %2 = constant {{value = dense<0.0> : f32}} : f32[]
  %3 = select_and_scatter(%0, %1, %2) {{{win}}} : f32[{b},{c},{h},{h}] {{
    region @select {{
      %0 = input {{index = 0, name = \"\"}} : f32[]
      %1 = input {{index = 1, name = \"\"}} : f32[]
      %2 = compare(%0, %1) {{comparison_direction = \"GE\"}} : i1[]
      return %2
    }}
    {}
  }}
  return %3
}}",
            body("f32", "add").replace("@body", "@scatter")
        );
        let (mut want_pool, mut want_grad) = (Vec::new(), vec![0f32; n]);
        for p in 0..b * c {
            for (qy, qx) in (0..o).flat_map(|y| (0..o).map(move |x| (y, x))) {
                let taps = (0..k).flat_map(|dy| (0..k).map(move |dx| (dy, dx)));
                let at = |(dy, dx): (usize, usize)| p * h * h + (qy * s + dy) * h + qx * s + dx;
                let m = taps.clone().fold(f32::NEG_INFINITY, |a, t| a.max(x[at(t)]));
                want_pool.push(m as f64);
                let chosen = taps.map(at).reduce(|a, t| if x[a] >= x[t] { a } else { t });
                want_grad[chosen.unwrap()] += g[(p * o + qy) * o + qx];
            }
        }
        let xt = f32t(&[b, c, h, h], &x);
        let got = run1(&pool, &[], vec![xt.clone()]).to_f64_vec();
        assert_eq!(got, want_pool, "pool {k}x{k}");
        let got = run1(&grad, &[], vec![xt, f32t(&[b, c, o, o], &g)]).to_f64_vec();
        let want: Vec<f64> = want_grad.iter().map(|&v| v as f64).collect();
        assert_eq!(got, want, "gradient {k}x{k}");
    }
}
