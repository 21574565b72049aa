//! Tests of `dot_general` and `convolution` against direct (sum-of-products) definitions from
//! the StableHLO spec, over random dimension numbers, layouts, strides, padding, dilations and
//! groups.

use crate::common;
use common::*;
use ebb_runtime::Tensor;
use ebb_testkit::Lcg;
use proptest::prelude::*;

/// `n` values in `[-1, 1)` drawn from `seed`.
fn pseudo(n: usize, seed: u64) -> Vec<f32> {
    let mut g = Lcg::new(seed.wrapping_add(0x9E3779B97F4A7C15));
    (0..n).map(|_| g.symmetric_f32()).collect()
}

fn shuffle(v: &mut [usize], seed: u64) {
    Lcg::new(seed).shuffle(v);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Tests dot_general with random batching/contracting/free dimension counts and operand
    /// dimension orders (so both the strided no-copy path and the copying path run) against
    /// `result[b, i, j] = sum_k lhs[b, i, k] * rhs[b, k, j]`.
    #[test]
    fn dot_general_matches_definition(
        bs in prop::collection::vec(1usize..4, 0..3),
        cs in prop::collection::vec(1usize..5, 0..3),
        lfs in prop::collection::vec(1usize..5, 0..3),
        rfs in prop::collection::vec(1usize..5, 0..3),
        seed in any::<u64>(),
    ) {
        // canonical lhs dims: batch, free, contracting; rhs: batch, contracting, free
        let lcanon: Vec<usize> = bs.iter().chain(&lfs).chain(&cs).copied().collect();
        let rcanon: Vec<usize> = bs.iter().chain(&cs).chain(&rfs).copied().collect();
        let mut lpos: Vec<usize> = (0..lcanon.len()).collect(); // canonical dim -> actual position
        let mut rpos: Vec<usize> = (0..rcanon.len()).collect();
        shuffle(&mut lpos, seed);
        shuffle(&mut rpos, seed ^ 0xabc);
        let mut lshape = vec![0; lcanon.len()];
        for (c, &p) in lpos.iter().enumerate() { lshape[p] = lcanon[c]; }
        let mut rshape = vec![0; rcanon.len()];
        for (c, &p) in rpos.iter().enumerate() { rshape[p] = rcanon[c]; }
        let (nb, nc, nlf) = (bs.len(), cs.len(), lfs.len());
        let lb: Vec<usize> = (0..nb).map(|i| lpos[i]).collect();
        let lc: Vec<usize> = (0..nc).map(|i| lpos[nb + nlf + i]).collect();
        let rb: Vec<usize> = (0..nb).map(|i| rpos[i]).collect();
        let rc: Vec<usize> = (0..nc).map(|i| rpos[nb + i]).collect();
        // the free dims appear in the result in their order in the operand
        let mut lfree: Vec<(usize, usize)> = (0..nlf).map(|i| (lpos[nb + i], i)).collect();
        lfree.sort();
        let mut rfree: Vec<(usize, usize)> = (0..rfs.len()).map(|i| (rpos[nb + nc + i], i)).collect();
        rfree.sort();
        let out: Vec<usize> = bs.iter().copied()
            .chain(lfree.iter().map(|&(_, i)| lfs[i]))
            .chain(rfree.iter().map(|&(_, i)| rfs[i]))
            .collect();
        let src = format!(
            "graph @t {{\n  %0 = input {{index = 0, name = \"l\"}} : f32[{}]\n  %1 = input {{index = 1, name = \"r\"}} : f32[{}]\n  %2 = dot_general(%0, %1) {{lhs_batching_dimensions = {}, lhs_contracting_dimensions = {}, rhs_batching_dimensions = {}, rhs_contracting_dimensions = {}}} : f32[{}]\n  return %2\n}}",
            dims(&lshape), dims(&rshape), list(&lb), list(&lc), list(&rb), list(&rc), dims(&out)
        );
        let lv = pseudo(lshape.iter().product(), seed);
        let rv = pseudo(rshape.iter().product(), seed + 1);
        let got = run1(&src, &[], vec![f32t(&lshape, &lv), f32t(&rshape, &rv)]);
        prop_assert_eq!(got.shape(), out.as_slice());
        let (lst, rst) = (strides(&lshape), strides(&rshape));
        let mut want = Vec::new();
        for oi in indices(&out) {
            let mut acc = 0f64;
            for ki in indices(&cs) {
                let mut lo = 0;
                let mut ro = 0;
                for i in 0..nb { lo += oi[i] * lst[lb[i]]; ro += oi[i] * rst[rb[i]]; }
                for (k, &(p, _)) in lfree.iter().enumerate() { lo += oi[nb + k] * lst[p]; }
                for (k, &(p, _)) in rfree.iter().enumerate() { ro += oi[nb + nlf + k] * rst[p]; }
                for i in 0..nc { lo += ki[i] * lst[lc[i]]; ro += ki[i] * rst[rc[i]]; }
                acc += lv[lo] as f64 * rv[ro] as f64;
            }
            want.push(acc);
        }
        assert_close(&got, &want, 1e-5);
    }
}

/// Layouts: for canonical (batch/out, feature/in, spatial0, spatial1), the position of each in
/// the actual tensor, and the dimension-number spelling.
/// (lhs, rhs, result) positions and the dimension numbers.
type Layout = ([usize; 4], [usize; 4], [usize; 4], &'static str);

const LAYOUTS: [Layout; 5] = [
    (
        [0, 1, 2, 3],
        [0, 1, 2, 3],
        [0, 1, 2, 3],
        "[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]",
    ),
    (
        [0, 3, 1, 2],
        [3, 2, 0, 1],
        [0, 3, 1, 2],
        "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]",
    ),
    (
        [1, 0, 2, 3],
        [1, 0, 2, 3],
        [1, 0, 2, 3],
        "[f, b, 0, 1]x[i, o, 0, 1]->[f, b, 0, 1]",
    ),
    (
        [3, 0, 1, 2],
        [3, 0, 1, 2],
        [2, 3, 0, 1],
        "[f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f]",
    ),
    (
        [0, 3, 1, 2],
        [2, 3, 0, 1],
        [0, 3, 1, 2],
        "[b, 0, 1, f]x[0, 1, o, i]->[b, 0, 1, f]",
    ),
];

/// Puts a canonical-layout tensor into the layout given by `pos`.
fn to_layout(canon: &[f32], cshape: &[usize], pos: &[usize; 4]) -> (Vec<f32>, Vec<usize>) {
    let mut shape = vec![0; 4];
    for c in 0..4 {
        shape[pos[c]] = cshape[c];
    }
    let st = strides(&shape);
    let mut out = vec![0f32; canon.len()];
    for (k, ci) in indices(cshape).iter().enumerate() {
        let off: usize = (0..4).map(|c| ci[c] * st[pos[c]]).sum();
        out[off] = canon[k];
    }
    (out, shape)
}

/// One 2-D convolution case: canonical sizes, window attributes and a layout of [`LAYOUTS`].
#[derive(Clone, Copy, Debug)]
struct ConvCase {
    /// Result batch, groups (`batch_groups`: batch groups, else feature groups), kernel input
    /// features, output features per group, input height and width, kernel height and width.
    n: usize,
    g: usize,
    batch_groups: bool,
    ci: usize,
    og: usize,
    hw: (usize, usize),
    k: (usize, usize),
    stride: i64,
    pad: (i64, i64),
    ldil: i64,
    rdil: i64,
    layout: usize,
    seed: u64,
}

/// Runs `case` and compares it with the direct definition (f64 sums); false when the window
/// leaves no output.
fn check_conv(case: ConvCase) -> bool {
    let ConvCase {
        n,
        g,
        batch_groups,
        ci,
        og,
        hw: (h, w),
        k: (kh, kw),
        stride,
        pad: (pad_lo, pad_hi),
        ldil,
        rdil,
        layout,
        seed,
    } = case;
    let (fgc, bgc) = if batch_groups { (1, g) } else { (g, 1) };
    let nb = n * bgc;
    let c = ci * fgc;
    let o = og * g;
    let dil = |d: usize, k: i64| if d == 0 { 0 } else { (d as i64 - 1) * k + 1 };
    let q = |d: usize, k: usize| -> i64 {
        let padded = dil(d, ldil) + pad_lo + pad_hi;
        let win = dil(k, rdil);
        if padded < win {
            0
        } else {
            (padded - win) / stride + 1
        }
    };
    let (qh, qw) = (q(h, kh), q(w, kw));
    if qh <= 0 || qw <= 0 {
        return false;
    }
    let (qh, qw) = (qh as usize, qw as usize);
    let xc = [nb, c, h, w];
    let wc = [o, ci, kh, kw];
    let oc = [n, o, qh, qw];
    let xv = pseudo(xc.iter().product(), seed);
    let wv = pseudo(wc.iter().product(), seed + 7);
    let (lx, lw, lo, dn) = LAYOUTS[layout];
    let (xa, xs) = to_layout(&xv, &xc, &lx);
    let (wa, ws) = to_layout(&wv, &wc, &lw);
    let mut os = vec![0; 4];
    for k in 0..4 {
        os[lo[k]] = oc[k];
    }
    let src = format!(
        "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[{}]\n  %1 = input {{index = 1, name = \"w\"}} : f32[{}]\n  %2 = convolution(%0, %1) {{batch_group_count = {bgc}, dimension_numbers = \"{dn}\", feature_group_count = {fgc}, lhs_dilation = [{ldil}, {ldil}], padding = [{pad_lo}, {pad_hi}, {pad_lo}, {pad_hi}], rhs_dilation = [{rdil}, {rdil}], window_strides = [{stride}, {stride}]}} : f32[{}]\n  return %2\n}}",
        dims(&xs), dims(&ws), dims(&os)
    );
    let got = run1(&src, &[], vec![f32t(&xs, &xa), f32t(&ws, &wa)]);
    let xst = strides(&xc);
    let wst = strides(&wc);
    let (mut want_c, mut bound_c) = (Vec::new(), Vec::new());
    for oi in indices(&oc) {
        let (nn, oo, y, x) = (oi[0], oi[1], oi[2] as i64, oi[3] as i64);
        let grp = oo / og;
        let bn = if bgc > 1 { grp * n + nn } else { nn };
        let c0 = if fgc > 1 { grp * ci } else { 0 };
        let (mut acc, mut abs, mut terms) = (0f64, 0f64, 0usize);
        for cc in 0..ci {
            for ky in 0..kh as i64 {
                for kx in 0..kw as i64 {
                    let py = y * stride + ky * rdil - pad_lo;
                    let px = x * stride + kx * rdil - pad_lo;
                    if py < 0 || px < 0 || py % ldil != 0 || px % ldil != 0 {
                        continue;
                    }
                    let (iy, ix) = ((py / ldil) as usize, (px / ldil) as usize);
                    if iy >= h || ix >= w {
                        continue;
                    }
                    let xo = bn * xst[0] + (c0 + cc) * xst[1] + iy * xst[2] + ix * xst[3];
                    let wo =
                        oo * wst[0] + cc * wst[1] + ky as usize * wst[2] + kx as usize * wst[3];
                    let t = xv[xo] as f64 * wv[wo] as f64;
                    (acc, abs, terms) = (acc + t, abs + t.abs(), terms + 1);
                }
            }
        }
        want_c.push(acc as f32);
        bound_c.push(summation_bound(terms, abs, acc));
    }
    let (want, _) = to_layout(&want_c, &oc, &lo);
    let (bound, _) = to_layout(&bound_c, &oc, &lo);
    let want: Vec<f64> = want.iter().map(|&v| v as f64).collect();
    assert_close_by(&got, &want, |i, b| {
        f64::from(bound[i]).max(1e-5 * (1.0 + b.abs()))
    });
    true
}

/// The largest error of an `f32` sum of `terms` rounded products, in any order and blocking,
/// against the exact sum `exact` whose absolute terms add to `abs`, plus the rounding of the
/// reference to `f32`: γ(terms + 1)·abs + 2u·|exact|, with u = 2⁻²⁴ and γ(n) = n·u / (1 − n·u)
/// (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §3.1 and §4.2).
fn summation_bound(terms: usize, abs: f64, exact: f64) -> f32 {
    let u = f64::from(f32::EPSILON) / 2.0;
    let nu = (terms + 1) as f64 * u;
    (nu / (1.0 - nu) * abs + 2.0 * u * exact.abs()) as f32
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Tests 2-D convolution against the direct definition, including padding (also
    /// negative), strides, lhs (input) and rhs (kernel) dilation, feature groups, batch groups
    /// and the dimension-number layouts of [`LAYOUTS`] (NCHW, NHWC, JAX's weight- and
    /// input-gradient forms).
    #[test]
    fn convolution_matches_definition(
        n in 1usize..3, g in 1usize..3, batch_groups in any::<bool>(), ci in 1usize..3, og in 1usize..3,
        h in 1usize..6, w in 1usize..6, kh in 1usize..4, kw in 1usize..3,
        stride in 1i64..3, pad_lo in -1i64..3, pad_hi in -1i64..3, ldil in 1i64..3, rdil in 1i64..3,
        layout in 0usize..LAYOUTS.len(), seed in any::<u64>(),
    ) {
        let case = ConvCase { n, g, batch_groups, ci, og, hw: (h, w), k: (kh, kw), stride, pad: (pad_lo, pad_hi), ldil, rdil, layout, seed };
        prop_assume!(check_conv(case));
    }

    /// Tests depthwise convolutions (one feature per group, many groups: a depthwise layer's
    /// forward pass and input gradient by feature groups, its weight gradient by batch groups
    /// with a result batch of 1), computed directly rather than by GEMMs, against the direct
    /// definition, in every layout.
    #[test]
    fn depthwise_convolutions_match_definition(
        n in 1usize..4, g in 2usize..70, batch_groups in any::<bool>(),
        h in 1usize..9, w in 1usize..4, kh in 1usize..5, kw in 1usize..3,
        stride in 1i64..3, pad_lo in -1i64..4, pad_hi in -1i64..4, rdil in 1i64..3,
        layout in 0usize..LAYOUTS.len(), seed in any::<u64>(),
    ) {
        let n = if batch_groups { 1 } else { n };
        let case = ConvCase { n, g, batch_groups, ci: 1, og: 1, hw: (h, w), k: (kh, kw), stride, pad: (pad_lo, pad_hi), ldil: 1, rdil, layout, seed };
        prop_assume!(check_conv(case));
    }

    /// Tests the weight-gradient shape of a convolution (a kernel as large as the image, few
    /// output positions, a long contraction over batch and image: the split-contraction
    /// lowering, with lhs dilation as a transposed convolution's weight gradient has) and the
    /// large-image forward shape (several row blocks) against the direct definition.
    #[test]
    fn convolution_weight_gradient_shapes_match_definition(
        n in 1usize..4, ci in 1usize..48, og in 1usize..4, h in 4usize..12, w in 4usize..12,
        kcut in 0usize..3, stride in 1i64..3, pad in 0i64..3, ldil in 1i64..3, rdil in 1i64..3,
        layout in 0usize..LAYOUTS.len(), seed in any::<u64>(),
    ) {
        let k = ((h - kcut).max(1), (w - kcut).max(1));
        let wgrad = ConvCase { n, g: 1, batch_groups: false, ci, og, hw: (h, w), k, stride: 1, pad: (pad, pad), ldil, rdil, layout, seed };
        check_conv(wgrad);
        let fwd = ConvCase { n: ci, g: 1, batch_groups: false, ci: og, og: n, hw: (4 * h, 4 * w), k: (3, 3), stride, pad: (1, 1), ldil, rdil: 1, layout, seed };
        check_conv(fwd);
    }
}

/// Tests that a bf16 dot with an f32 result type accumulates in f32: four products
/// 1 + 2^-7 sum exactly to 4.03125, while rounding the partial sums to bf16 would not (3.0234375
/// is not a bf16 value).
#[test]
fn bf16_dot_accumulates_in_f32() {
    let src = "graph @t {
  %0 = input {index = 0, name = \"a\"} : bf16[1,4]
  %1 = input {index = 1, name = \"b\"} : bf16[4,1]
  %2 = dot_general(%0, %1) {dtype = f32, lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[1,1]
  return %2
}";
    let v = half::bf16::from_f32(1.0 + 1.0 / 128.0);
    let a = Tensor::new(vec![1, 4], ebb_runtime::Data::BF16(vec![v; 4].into())).unwrap();
    let b = Tensor::new(
        vec![4, 1],
        ebb_runtime::Data::BF16(vec![half::bf16::ONE; 4].into()),
    )
    .unwrap();
    assert_eq!(
        run1(src, &[], vec![a, b]).to_f64_vec(),
        vec![4.0 + 4.0 / 128.0]
    );
}

/// Tests an integer dot (wrapping i64 accumulation, converted to the result type).
#[test]
fn integer_dot() {
    let src = "graph @t {
  %0 = input {index = 0, name = \"a\"} : i32[2,3]
  %1 = input {index = 1, name = \"b\"} : i32[3]
  %2 = dot_general(%0, %1) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : i32[2]
  return %2
}";
    let got = run1(
        src,
        &[],
        vec![i32t(&[2, 3], &[1, 2, 3, 4, 5, 6]), i32t(&[3], &[1, -1, 2])],
    );
    assert_eq!(got.as_i32(), Some(&[5, 11][..]));
}

/// Tests both GEMM paths (shallow contraction `K <= 32` with a row kernel, deeper through the
/// packing GEMM), with a transposed rhs, against the definition.
#[test]
fn shallow_and_deep_contractions() {
    for k in [5usize, 16, 32, 33, 70] {
        let (m, n) = (9, 70);
        let src = format!(
            "graph @t {{\n  %0 = input {{index = 0, name = \"a\"}} : f32[{m},{k}]\n  %1 = input {{index = 1, name = \"b\"}} : f32[{n},{k}]\n  %2 = dot_general(%0, %1) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]}} : f32[{m},{n}]\n  return %2\n}}"
        );
        let (a, b) = (pseudo(m * k, 1), pseudo(n * k, 2));
        let got = run1(&src, &[], vec![f32t(&[m, k], &a), f32t(&[n, k], &b)]);
        let want: Vec<f64> = (0..m * n)
            .map(|e| {
                (0..k)
                    .map(|p| a[(e / n) * k + p] as f64 * b[(e % n) * k + p] as f64)
                    .sum()
            })
            .collect();
        assert_close(&got, &want, 1e-5);
    }
}

/// A dot and the same dot with its operands swapped and its result transposed
/// (`fold_transpose_dot`'s result rule: `transpose(dot(x, y)) -> dot(y, x)`) give the same
/// bits, on both sides of the shallow-contraction kernel's bounds (`k ≤ 32`, or a thin product
/// of at most 2 rows or columns and at most 65 536 multiply-adds, and one result side of at
/// least 8): the kernel is chosen from `{m, n}` and `k`, not from their order; and on both
/// sides of the thread split (row blocks for a tall result, column blocks for a wide one).
#[test]
fn swapped_operands_give_the_same_bits() {
    for (m, k, n) in [
        (64, 32, 4),
        (4, 32, 64),
        (9, 5, 3),
        (3, 16, 9),
        (8, 33, 2),
        (5, 7, 5),
        (1, 64, 8),
        (64, 512, 2),
        (3, 64, 8),
        // Large enough to be split across threads: a wide result in column blocks, its
        // transpose in row blocks (the same bits as one unsplit call).
        (24, 100, 700),
        (40, 64, 333),
    ] {
        // x: [k, m], y: [k, n]; forward: dot(x, y) contracting k -> [m, n];
        // swapped: dot(y, x) -> [n, m], then transposed to [m, n].
        let src = format!(
            "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[{k},{m}]\n  %1 = input {{index = 1, name = \"y\"}} : f32[{k},{n}]\n  %2 = dot_general(%0, %1) {{lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]}} : f32[{m},{n}]\n  %3 = dot_general(%1, %0) {{lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]}} : f32[{n},{m}]\n  %4 = transpose(%3) {{permutation = [1, 0]}} : f32[{m},{n}]\n  %5 = subtract(%2, %4) : f32[{m},{n}]\n  return %5\n}}"
        );
        let (x, y) = (pseudo(k * m, 3), pseudo(k * n, 4));
        let got = run1(&src, &[], vec![f32t(&[k, m], &x), f32t(&[k, n], &y)]);
        let diff = got.as_f32().expect("f32");
        assert!(
            diff.iter().all(|&d| d == 0.0),
            "m={m} k={k} n={n}: the swapped dot differs"
        );
    }
}

/// The shallow-contraction product's AVX2/AVX-512 variants give the bits of its baseline
/// build: the same multiplies and adds in the same order, wider vectors and more rows per
/// block only (bands of 64, 32 and 16 columns and the last few, whole and partial blocks of
/// rows, results narrower than 8 with whole and partial 8×8 blocks of the left operand, a
/// row-major and a transposed right operand).
#[test]
fn small_k_variants_give_the_baseline_bits() {
    for (i, (m, k, n)) in [
        (5, 16, 128),
        (3, 7, 70),
        (1, 32, 9),
        (17, 2, 64),
        (13, 16, 96),
        (11, 24, 117),
        (64, 8, 1),
        (70, 3, 5),
        (130, 32, 7),
        (24, 16, 3),
        (9, 12, 2),
        (16, 19, 6),
        (64, 1, 8),
        (1, 64, 8),
        (13, 5, 12),
        (22, 1, 8),
    ]
    .into_iter()
    .enumerate()
    {
        let a = pseudo(m * k, i as u64);
        let b = pseudo(k * n, i as u64 + 100);
        for transposed in [false, true] {
            let (c0, c1) = ebb_runtime::exec::small_k_both((m, k, n), &a, &b, transposed);
            let bits = |c: &[f32]| c.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&c0),
                bits(&c1),
                "m={m} k={k} n={n} transposed={transposed}"
            );
        }
    }
}

/// A shallow contraction whose right operand is read through its strides (transposed: gathered
/// into a contiguous block first) gives the bits of the same product with that operand
/// transposed in memory beforehand (read as it is).
#[test]
fn small_k_strided_operand_gives_the_bits_of_a_contiguous_one() {
    for (i, (m, k, n)) in [
        (5, 16, 128),
        (3, 7, 70),
        (13, 16, 96),
        (64, 8, 1),
        (9, 12, 2),
    ]
    .into_iter()
    .enumerate()
    {
        let a = pseudo(m * k, i as u64 + 7);
        // `bt` holds the `k×n` operand column-major (`n×k` row-major).
        let bt = pseudo(k * n, i as u64 + 300);
        let b: Vec<f32> = (0..k * n).map(|x| bt[(x % n) * k + x / n]).collect();
        let (strided, _) = ebb_runtime::exec::small_k_both((m, k, n), &a, &bt, true);
        let (contiguous, _) = ebb_runtime::exec::small_k_both((m, k, n), &a, &b, false);
        let bits = |c: &[f32]| c.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&strided), bits(&contiguous), "m={m} k={k} n={n}");
    }
}

/// An attention-shaped contraction of `[B, S, H, D]` operands batched over `B` and `H` (batch
/// dimensions that do not merge, read through their strides) gives the bits of the same
/// contraction of the operands transposed to `[B, H, S, D]` first (one contiguous batch), for
/// a shallow (`small_k`) and a deep (packing GEMM) contraction.
#[test]
fn unmerged_batch_dimensions_give_the_bits_of_transposed_operands() {
    let (b, s, h) = (2, 24, 3);
    for d in [16, 40] {
        let n = b * s * h * d;
        let (q, k) = (pseudo(n, 1), pseudo(n, 2));
        let ty = format!("f32[{b},{s},{h},{d}]");
        let inputs = format!(
            "  %0 = input {{index = 0, name = \"q\"}} : {ty}\n  %1 = input {{index = 1, name = \"k\"}} : {ty}\n"
        );
        let batched = "lhs_batching_dimensions = [0, 2], lhs_contracting_dimensions = [3], rhs_batching_dimensions = [0, 2], rhs_contracting_dimensions = [3]";
        let strided = format!(
            "graph @t {{\n{inputs}  %2 = dot_general(%0, %1) {{{batched}}} : f32[{b},{h},{s},{s}]\n  return %2\n}}"
        );
        let contiguous = "lhs_batching_dimensions = [0, 1], lhs_contracting_dimensions = [3], rhs_batching_dimensions = [0, 1], rhs_contracting_dimensions = [3]";
        let transposed = format!(
            "graph @t {{\n{inputs}  %2 = transpose(%0) {{permutation = [0, 2, 1, 3]}} : f32[{b},{h},{s},{d}]\n  %3 = transpose(%1) {{permutation = [0, 2, 1, 3]}} : f32[{b},{h},{s},{d}]\n  %4 = dot_general(%2, %3) {{{contiguous}}} : f32[{b},{h},{s},{s}]\n  return %4\n}}"
        );
        let shape = [b, s, h, d];
        let ins = || vec![f32t(&shape, &q), f32t(&shape, &k)];
        let (x, y) = (run1(&strided, &[], ins()), run1(&transposed, &[], ins()));
        assert!(x.bits_eq(&y), "d = {d}");
    }
}

/// `x` (row-major, `shape`) with its dimensions permuted: result dimension `i` is `x`'s
/// dimension `perm[i]`.
fn permuted(x: &[f32], shape: &[usize], perm: &[usize]) -> (Vec<f32>, Vec<usize>) {
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let mut strides = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let mut out = Vec::with_capacity(x.len());
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..x.len() {
        out.push(
            x[perm
                .iter()
                .zip(&idx)
                .map(|(&p, &i)| i * strides[p])
                .sum::<usize>()],
        );
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < out_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    (out, out_shape)
}

/// A shallow contraction whose operands are read through their strides in each of the ways
/// the shallow product gathers them (rows that are contiguous runs, as attention's `[B, S, H,
/// D]` right operand; columns that are, as a transposed left operand `dk = dattᵀ·q`; neither,
/// with the batch dimension innermost) gives the bits of the same contraction of operands laid
/// out contiguously in memory beforehand.
#[test]
fn small_k_gathered_operands_give_the_bits_of_contiguous_ones() {
    let (b, s, h, d) = (2, 24, 3, 8);
    let ty = |sh: &[usize]| {
        let dims: Vec<String> = sh.iter().map(|x| x.to_string()).collect();
        format!("f32[{}]", dims.join(","))
    };
    let dot = |(ta, tb): (&str, &str), dims: &str, out: &str| {
        format!(
            "graph @t {{\n  %0 = input {{index = 0, name = \"a\"}} : {ta}\n  %1 = input {{index = 1, name = \"b\"}} : {tb}\n  %2 = dot_general(%0, %1) {{{dims}}} : {out}\n  return %2\n}}"
        )
    };
    // `[B,S,H,D]·[B,S,H,D]` contracting `S`: a transposed left operand, row-strided right.
    let shape = [b, s, h, d];
    let (x, y) = (pseudo(b * s * h * d, 11), pseudo(b * s * h * d, 12));
    let strided = dot(
        (&ty(&shape), &ty(&shape)),
        "lhs_batching_dimensions = [0, 2], lhs_contracting_dimensions = [1], rhs_batching_dimensions = [0, 2], rhs_contracting_dimensions = [1]",
        &ty(&[b, h, d, d]),
    );
    // The same operands laid out `[B,H,D,S]` and `[B,H,S,D]`: contiguous blocks.
    let (xc, xs) = permuted(&x, &shape, &[0, 2, 3, 1]);
    let (yc, ys) = permuted(&y, &shape, &[0, 2, 1, 3]);
    let contiguous = dot(
        (&ty(&xs), &ty(&ys)),
        "lhs_batching_dimensions = [0, 1], lhs_contracting_dimensions = [3], rhs_batching_dimensions = [0, 1], rhs_contracting_dimensions = [2]",
        &ty(&[b, h, d, d]),
    );
    let got = run1(&strided, &[], vec![f32t(&shape, &x), f32t(&shape, &y)]);
    let want = run1(&contiguous, &[], vec![f32t(&xs, &xc), f32t(&ys, &yc)]);
    assert!(got.bits_eq(&want), "transposed and row-strided operands");
    // `[S,D,B]·[B,S,N]` batched over the innermost `B` of the left operand: neither its rows
    // nor its columns are contiguous.
    let n = 12;
    let (ls, rs) = ([s, d, b], [b, s, n]);
    let (x, y) = (pseudo(s * d * b, 13), pseudo(b * s * n, 14));
    let strided = dot(
        (&ty(&ls), &ty(&rs)),
        "lhs_batching_dimensions = [2], lhs_contracting_dimensions = [0], rhs_batching_dimensions = [0], rhs_contracting_dimensions = [1]",
        &ty(&[b, d, n]),
    );
    let (xc, xs) = permuted(&x, &ls, &[2, 1, 0]);
    let contiguous = dot(
        (&ty(&xs), &ty(&rs)),
        "lhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_batching_dimensions = [0], rhs_contracting_dimensions = [1]",
        &ty(&[b, d, n]),
    );
    let got = run1(&strided, &[], vec![f32t(&ls, &x), f32t(&rs, &y)]);
    let want = run1(&contiguous, &[], vec![f32t(&xs, &xc), f32t(&rs, &y)]);
    assert!(got.bits_eq(&want), "an operand strided both ways");
}

/// The batched products of a scan step over `B` (`[B,64,8]·[B,8] -> [B,64]`, a
/// matrix-vector product per batch element; `[B,64]·[B,64,8] -> [B,8]`; the outer product
/// `[B,64]·[B,8] -> [B,64,8]`) give, bit for bit, each element summed in `f32` over the
/// contraction in order from zero, a multiply then an add per term.
#[test]
fn scan_step_products_sum_in_order() {
    let (bt, d, s) = (3usize, 64usize, 8usize);
    let src = format!(
        "graph @t {{\n  %0 = input {{index = 0, name = \"h\"}} : f32[{bt},{d},{s}]\n  %1 = input {{index = 1, name = \"c\"}} : f32[{bt},{s}]\n  %2 = input {{index = 2, name = \"g\"}} : f32[{bt},{d}]\n  %3 = dot_general(%0, %1) {{lhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_batching_dimensions = [0], rhs_contracting_dimensions = [1]}} : f32[{bt},{d}]\n  %4 = dot_general(%2, %0) {{lhs_batching_dimensions = [0], lhs_contracting_dimensions = [1], rhs_batching_dimensions = [0], rhs_contracting_dimensions = [1]}} : f32[{bt},{s}]\n  %5 = dot_general(%2, %1) {{lhs_batching_dimensions = [0], lhs_contracting_dimensions = [], rhs_batching_dimensions = [0], rhs_contracting_dimensions = []}} : f32[{bt},{d},{s}]\n  return %3, %4, %5\n}}"
    );
    let (h, c, g) = (pseudo(bt * d * s, 7), pseudo(bt * s, 8), pseudo(bt * d, 9));
    let out = run(
        &src,
        &[],
        vec![
            f32t(&[bt, d, s], &h),
            f32t(&[bt, s], &c),
            f32t(&[bt, d], &g),
        ],
    )
    .unwrap();
    let in_order =
        |terms: &mut dyn Iterator<Item = (f32, f32)>| terms.fold(0f32, |acc, (x, y)| acc + x * y);
    let mut want3 = Vec::new();
    let mut want4 = Vec::new();
    let mut want5 = Vec::new();
    for b in 0..bt {
        for i in 0..d {
            want3.push(in_order(
                &mut (0..s).map(|p| (h[(b * d + i) * s + p], c[b * s + p])),
            ));
        }
        for j in 0..s {
            want4.push(in_order(
                &mut (0..d).map(|p| (g[b * d + p], h[(b * d + p) * s + j])),
            ));
        }
        for i in 0..d {
            for j in 0..s {
                want5.push(0f32 + g[b * d + i] * c[b * s + j]);
            }
        }
    }
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(out[0].as_f32().unwrap()),
        bits(&want3),
        "[B,64,8]·[B,8]"
    );
    assert_eq!(
        bits(out[1].as_f32().unwrap()),
        bits(&want4),
        "[B,64]·[B,64,8]"
    );
    assert_eq!(
        bits(out[2].as_f32().unwrap()),
        bits(&want5),
        "outer product"
    );
}

/// Tests that the dot-accumulate form `dot_general(a, b, c)` gives the bits of
/// `add(c, dot_general(a, b))`, the sum complete before `c` is added once as the left operand
/// (signed zeros, infinities and NaN payloads in `c` included): through the shallow kernel's
/// accumulating store (`k ≤ 32`, the scan's `xᵀ·dG` with `k` the batch) and the packing GEMM
/// (deeper: the product apart, then added), with `c` held by the op alone (written in place)
/// and also returned (copied first).
#[test]
fn dot_accumulate_gives_the_bits_of_the_add() {
    for (m, k, n) in [
        (32, 8, 96),
        (32, 16, 96),
        (9, 5, 70),
        (9, 32, 70),
        (9, 33, 70),
        (9, 300, 70),
        // The packing GEMM with β = 1 (one depth block), in row blocks and in column blocks.
        (64, 64, 64),
        (40, 256, 160),
        (9, 0, 70),
        // Deeper: the product apart.
        (40, 257, 160),
    ] {
        let head = format!(
            "graph @t {{\n  %0 = input {{index = 0, name = \"a\"}} : f32[{k},{m}]\n  %1 = input {{index = 1, name = \"b\"}} : f32[{k},{n}]\n  %2 = input {{index = 2, name = \"c\"}} : f32[{m},{n}]\n"
        );
        let dims = "{lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]}";
        let fused =
            format!("{head}  %3 = dot_general(%0, %1, %2) {dims} : f32[{m},{n}]\n  return %3\n}}");
        let shared = format!(
            "{head}  %3 = dot_general(%0, %1, %2) {dims} : f32[{m},{n}]\n  return %3, %2\n}}"
        );
        let plain = format!("{head}  %3 = dot_general(%0, %1) {dims} : f32[{m},{n}]\n  %4 = add(%2, %3) : f32[{m},{n}]\n  return %4\n}}");
        let (a, b) = (pseudo(k * m, 3), pseudo(k * n, 4));
        let mut c = pseudo(m * n, 5);
        for (i, x) in [
            -0.0,
            0.0,
            f32::INFINITY,
            f32::from_bits(0x7fc0_1234),
            f32::from_bits(0xffc0_0042),
        ]
        .into_iter()
        .enumerate()
        {
            c[i * 7] = x;
        }
        let ins = || vec![f32t(&[k, m], &a), f32t(&[k, n], &b), f32t(&[m, n], &c)];
        let bits =
            |t: &Tensor| -> Vec<u32> { t.as_f32().unwrap().iter().map(|v| v.to_bits()).collect() };
        let want = bits(&run1(&plain, &[], ins()));
        assert_eq!(bits(&run1(&fused, &[], ins())), want, "{m}x{k}x{n}");
        let both = run(&shared, &[], ins()).unwrap();
        assert_eq!(bits(&both[0]), want, "{m}x{k}x{n}, shared accumulator");
        assert_eq!(
            bits(&both[1]),
            c.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }
}

/// `c + a·b` of the dot-accumulate form against `add(c, dot_general(a, b))`, bit for bit,
/// where signed zeros meet: rows of `aᵀ` and columns of `b` whose products underflow to `-0`
/// (an FMA chain ending at `-0`, which the AVX2+FMA kernel stores as `+0` with β = 0) or to
/// `+0`, added to accumulators `-0` and `+0`; through the packing GEMM (row and column blocks,
/// edge tiles) and the shallow kernel.
#[test]
fn dot_accumulate_gives_the_signed_zeros_of_the_add() {
    for (m, k, n) in [(64, 64, 64), (40, 200, 160), (9, 40, 70), (9, 8, 70)] {
        let head = format!(
            "graph @t {{\n  %0 = input {{index = 0, name = \"a\"}} : f32[{k},{m}]\n  %1 = input {{index = 1, name = \"b\"}} : f32[{k},{n}]\n  %2 = input {{index = 2, name = \"c\"}} : f32[{m},{n}]\n"
        );
        let dims = "{lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]}";
        let fused =
            format!("{head}  %3 = dot_general(%0, %1, %2) {dims} : f32[{m},{n}]\n  return %3\n}}");
        let plain = format!("{head}  %3 = dot_general(%0, %1) {dims} : f32[{m},{n}]\n  %4 = add(%2, %3) : f32[{m},{n}]\n  return %4\n}}");
        // Row i of aᵀ: ±1e-30 by i mod 3 (0: regular values); column j of b: 1e-30 or regular.
        let mut a = pseudo(k * m, 7);
        for p in 0..k {
            for i in 0..m {
                match i % 3 {
                    1 => a[p * m + i] = -1e-30,
                    2 => a[p * m + i] = 1e-30,
                    _ => {}
                }
            }
        }
        let mut b = pseudo(k * n, 8);
        for p in 0..k {
            for j in (0..n).filter(|j| j % 2 == 1) {
                b[p * n + j] = 1e-30;
            }
        }
        let c: Vec<f32> = (0..m * n)
            .map(|e| if (e / n + e % n) % 2 == 0 { -0.0 } else { 0.0 })
            .collect();
        let ins = || vec![f32t(&[k, m], &a), f32t(&[k, n], &b), f32t(&[m, n], &c)];
        let bits =
            |t: &Tensor| -> Vec<u32> { t.as_f32().unwrap().iter().map(|v| v.to_bits()).collect() };
        let want = bits(&run1(&plain, &[], ins()));
        assert!(want.contains(&0), "{m}x{k}x{n}: no +0 sum");
        assert_eq!(bits(&run1(&fused, &[], ins())), want, "{m}x{k}x{n}");
    }
}

/// A scan accumulating `xᵀ·g` (`[K, 48]ᵀ·[K, 40]`) into its carry over 3 steps, as the
/// dot-accumulate (`FORM` `dot_general(%2, %3, %1)`) or as `add(carry, dot_general)`.
const ACC_SCAN: &str = r#"graph @main {
  %0 = input {index = 0, name = "x"} : f32[K,48]
  %1 = input {index = 1, name = "g"} : f32[K,40]
  %2 = input {index = 2, name = "acc"} : f32[48,40]
  %3 = constant {value = dense<0> : i32} : i32[]
  %4:4 = while(%3, %2, %0, %1) : i32[], f32[48,40], f32[K,48], f32[K,40] {
    region @cond {
      %0 = input {index = 0, name = ""} : i32[]
      %1 = input {index = 1, name = ""} : f32[48,40]
      %2 = input {index = 2, name = ""} : f32[K,48]
      %3 = input {index = 3, name = ""} : f32[K,40]
      %4 = constant {value = dense<3> : i32} : i32[]
      %5 = compare(%0, %4) {compare_type = "SIGNED", comparison_direction = "LT"} : i1[]
      return %5
    }
    region @body {
      %0 = input {aliasing_output = 0, index = 0, name = ""} : i32[]
      %1 = input {aliasing_output = 1, index = 1, name = ""} : f32[48,40]
      %2 = input {index = 2, name = ""} : f32[K,48]
      %3 = input {index = 3, name = ""} : f32[K,40]
      %4 = constant {value = dense<1> : i32} : i32[]
      %5 = add(%0, %4) : i32[]
FORM
      return %5, %7, %2, %3
    }
  }
  return %4#1 as "acc"
}
"#;

/// Tests that a scan's dot-accumulate deep enough for the packing GEMM (`K = 64`, 256) adds
/// the product into the carry's buffer: no buffer of the product's size is held apart and
/// recycled, and the bits are the scan with `add(carry, dot)`'s; deeper (`K = 257`), the
/// product is computed apart (recycled through the pool), with the same bits.
#[test]
fn a_scan_accumulates_through_the_packing_gemm_without_a_product_buffer() {
    use ebb_runtime::exec::pool::BufferPool;
    use ebb_runtime::{program_schedule, Program};
    use std::sync::Arc;
    let dims = "{lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]}";
    let fused = ACC_SCAN.replace(
        "FORM",
        &format!("      %7 = dot_general(%2, %3, %1) {dims} : f32[48,40]"),
    );
    let plain = ACC_SCAN.replace(
        "FORM",
        &format!("      %6 = dot_general(%2, %3) {dims} : f32[48,40]\n      %7 = add(%1, %6) : f32[48,40]"),
    );
    for k in [64usize, 256, 257] {
        let b = bind(&[("K", k as i64)]);
        let ins = || {
            vec![
                f32t(&[k, 48], &pseudo(k * 48, 1)),
                f32t(&[k, 40], &pseudo(k * 40, 2)),
                f32t(&[48, 40], &pseudo(48 * 40, 3)),
            ]
        };
        let run_pooled = |src: &str| {
            let g = graph(src);
            let pool = Arc::new(BufferPool::new(1 << 24));
            let p = Program::new(&g, &program_schedule(&g), &b)
                .unwrap()
                .with_pool(pool.clone());
            // The inputs held here too: shared, their buffers are never recycled.
            let held = ins();
            let (out, _) = p.run(held.clone()).unwrap();
            drop(held);
            (out, pool.held_bytes() + pool.reused_bytes())
        };
        let (want, _) = run_pooled(&plain);
        let (got, recycled) = run_pooled(&fused);
        assert_bits(&got, &want, &format!("K={k}"));
        if k <= 256 {
            assert_eq!(recycled, 0, "K={k}: a buffer held apart");
        } else {
            assert!(recycled >= 48 * 40 * 4, "K={k}: {recycled}");
        }
    }
}

/// A product gives the same bits split over threads or not, on both sides of the split
/// thresholds (`EBB_PAR_DOT_MIN`, 2¹⁸ multiply-adds, twice that for a skinny product of at
/// most 16 rows or depth: `dot::split_min`): each case runs on a pool of one thread and on one
/// of four, and the two results are compared bit for bit.
#[test]
fn products_give_the_same_bits_on_any_number_of_threads() {
    for (m, k, n) in [
        // Skinny by rows: 2¹⁸ (unsplit), 2.5·2¹⁸ (split).
        (16, 64, 256),
        (16, 64, 640),
        // Skinny by depth: 2¹⁸ (unsplit), 2¹⁹ (split).
        (64, 16, 256),
        (64, 16, 512),
        // Neither: 2¹⁸ (split).
        (32, 64, 128),
    ] {
        let src = format!(
            "graph @t {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[{m},{k}]\n  %1 = input {{index = 1, name = \"y\"}} : f32[{k},{n}]\n  %2 = dot_general(%0, %1) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : f32[{m},{n}]\n  return %2\n}}"
        );
        let (x, y) = (pseudo(m * k, 5), pseudo(k * n, 6));
        let on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a pool");
            pool.install(|| run1(&src, &[], vec![f32t(&[m, k], &x), f32t(&[k, n], &y)]))
        };
        let (one, four) = (on(1), on(4));
        let bits = |t: &Tensor| -> Vec<u32> {
            t.as_f32()
                .expect("f32")
                .iter()
                .map(|v| v.to_bits())
                .collect()
        };
        assert_eq!(bits(&one), bits(&four), "m={m} k={k} n={n}");
    }
}
