//! Tests of the conditionals and bit-level ops that JAX's `lax.cond` and `jax.random` emit,
//! on small hand-written StableHLO: `if` and `case` with branches that capture enclosing
//! tensors (the importer makes the captures explicit operands), the out-of-range index rule,
//! the executor charging the branch it does not take as the planner does, `bitcast_convert`
//! and `ui64` arithmetic, `composite` (inlined), regions reading enclosing constants. The real
//! export is `gpt2_tiny_dropout` (see `exec_numerics`).

use ebb_import::stablehlo::import_str;
use ebb_ir::{Bindings, OpKind};
use ebb_runtime::{execute, program_schedule, Data, Scalar, Tensor};

/// A module whose `@main` has the given signature and body (generic form).
fn module(args: &str, results: &str, body: &str) -> String {
    let arg_types: Vec<&str> = args
        .split(", ")
        .map(|a| a.split_once(": ").map_or(a, |(_, t)| t))
        .collect();
    format!(
        "\"builtin.module\"() ({{\n\"func.func\"() <{{function_type = ({}) -> {results}, \
         sym_name = \"main\"}}> ({{\n^bb0({args}):\n{body}\n}}) : () -> ()\n}}) : () -> ()\n",
        arg_types.join(", ")
    )
}

fn run(text: &str, inputs: Vec<Tensor>) -> (Vec<Tensor>, u64) {
    let (g, _) = import_str(text, "cond.mlir").unwrap_or_else(|e| panic!("{e}"));
    let (out, stats) = execute(&g, &program_schedule(&g), &Bindings::new(), inputs)
        .unwrap_or_else(|e| panic!("{e}"));
    (out, stats.peak_bytes)
}

fn f32s(v: &[f32]) -> Tensor {
    Tensor::from_f32(vec![v.len()], v.to_vec()).unwrap()
}

const IF_BODY: &str = r#"
    %0 = "stablehlo.if"(%p) ({
      %1 = "stablehlo.add"(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      "stablehlo.return"(%1) : (tensor<4xf32>) -> ()
    }, {
      %2 = "stablehlo.multiply"(%y, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %3 = "stablehlo.multiply"(%2, %2) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      "stablehlo.return"(%3) : (tensor<4xf32>) -> ()
    }) : (tensor<i1>) -> tensor<4xf32>
    "func.return"(%0) : (tensor<4xf32>) -> ()"#;

#[test]
fn if_with_captured_tensors_runs_the_taken_branch() {
    let text = module(
        "%p: tensor<i1>, %x: tensor<4xf32>, %y: tensor<4xf32>",
        "tensor<4xf32>",
        IF_BODY,
    );
    let (g, _) = import_str(&text, "cond.mlir").unwrap();
    let case = g
        .order()
        .iter()
        .find(|&&n| g.node(n).kind() == OpKind::Case)
        .copied()
        .expect("a case node");
    // index, then the two captured tensors in first-use order
    assert_eq!(g.operands(case).len(), 3);
    assert_eq!(g.node(case).regions.len(), 2);
    let x = f32s(&[1.0, 2.0, 3.0, 4.0]);
    let y = f32s(&[0.5, 0.5, 2.0, -1.0]);
    let cases = [
        (true, [1.5f32, 2.5, 5.0, 3.0]),
        (false, [0.25, 1.0, 36.0, 16.0]),
    ];
    let mut peaks = Vec::new();
    for (p, want) in cases {
        let (out, peak) = run(
            &text,
            vec![Tensor::scalar(Scalar::I1(p)), x.clone(), y.clone()],
        );
        assert_eq!(out[0].as_f32().unwrap(), want, "pred {p}");
        peaks.push(peak);
    }
    // The plan reserves the larger branch (two 16-byte temporaries) whichever runs.
    assert_eq!(peaks[0], peaks[1]);
}

#[test]
fn case_index_out_of_range_runs_the_last_branch() {
    let body = r#"
    %0 = "stablehlo.case"(%i) ({
      "stablehlo.return"(%x) : (tensor<2xf32>) -> ()
    }, {
      %1 = "stablehlo.negate"(%x) : (tensor<2xf32>) -> tensor<2xf32>
      "stablehlo.return"(%1) : (tensor<2xf32>) -> ()
    }, {
      %2 = "stablehlo.add"(%x, %x) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      "stablehlo.return"(%2) : (tensor<2xf32>) -> ()
    }) : (tensor<i32>) -> tensor<2xf32>
    "func.return"(%0) : (tensor<2xf32>) -> ()"#;
    let text = module("%i: tensor<i32>, %x: tensor<2xf32>", "tensor<2xf32>", body);
    let x = f32s(&[1.0, -3.0]);
    for (i, want) in [
        (0, [1.0f32, -3.0]),
        (1, [-1.0, 3.0]),
        (2, [2.0, -6.0]),
        (7, [2.0, -6.0]),
        (-1, [2.0, -6.0]),
    ] {
        let (out, _) = run(&text, vec![Tensor::scalar(Scalar::I32(i)), x.clone()]);
        assert_eq!(out[0].as_f32().unwrap(), want, "index {i}");
    }
}

#[test]
fn bitcast_convert_and_ui64_arithmetic_are_bit_exact() {
    let body = r#"
    %0 = "stablehlo.convert"(%u) : (tensor<3xui32>) -> tensor<3xui64>
    %1 = "stablehlo.constant"() <{value = dense<4294967296> : tensor<3xui64>}> : () -> tensor<3xui64>
    %2 = "stablehlo.multiply"(%0, %1) : (tensor<3xui64>, tensor<3xui64>) -> tensor<3xui64>
    %3 = "stablehlo.constant"() <{value = dense<32> : tensor<3xui64>}> : () -> tensor<3xui64>
    %4 = "stablehlo.shift_right_logical"(%2, %3) : (tensor<3xui64>, tensor<3xui64>) -> tensor<3xui64>
    %5 = "stablehlo.convert"(%4) : (tensor<3xui64>) -> tensor<3xui32>
    %6 = "stablehlo.constant"() <{value = dense<9> : tensor<3xui32>}> : () -> tensor<3xui32>
    %7 = "stablehlo.shift_right_logical"(%5, %6) : (tensor<3xui32>, tensor<3xui32>) -> tensor<3xui32>
    %8 = "stablehlo.constant"() <{value = dense<1065353216> : tensor<3xui32>}> : () -> tensor<3xui32>
    %9 = "stablehlo.or"(%7, %8) : (tensor<3xui32>, tensor<3xui32>) -> tensor<3xui32>
    %10 = "stablehlo.bitcast_convert"(%9) : (tensor<3xui32>) -> tensor<3xf32>
    "func.return"(%10) : (tensor<3xf32>) -> ()"#;
    let text = module("%u: tensor<3xui32>", "tensor<3xf32>", body);
    let bits = vec![0u32, u32::MAX, 0x8000_0000];
    let u = Tensor::new(vec![3], Data::U32(bits.clone().into())).unwrap();
    let (out, _) = run(&text, vec![u]);
    // JAX's uniform sampling: the top 23 bits as a mantissa of a float in [1, 2).
    let want: Vec<f32> = bits
        .iter()
        .map(|&b| f32::from_bits((b >> 9) | 0x3f80_0000))
        .collect();
    assert_eq!(out[0].as_f32().unwrap(), want);
}

#[test]
fn bitcast_convert_to_a_wrong_shape_is_a_located_error() {
    let body = r#"
    %0 = "stablehlo.bitcast_convert"(%x) : (tensor<2xf32>) -> tensor<2xf64>
    "func.return"(%0) : (tensor<2xf64>) -> ()"#;
    let text = module("%x: tensor<2xf32>", "tensor<2xf64>", body);
    let msg = import_str(&text, "bc.mlir").unwrap_err().to_string();
    assert!(
        msg.contains("stablehlo.bitcast_convert")
            && msg.contains("f64[]")
            && msg.contains("conflicts with the declared"),
        "{msg}"
    );
}

/// JAX keeps `chlo` ops (`sinh`, `top_k`, ...) as `stablehlo.composite` with a private
/// decomposition function, which is inlined.
#[test]
fn composite_is_inlined_from_its_decomposition() {
    let text = r#""builtin.module"() ({
"func.func"() <{function_type = (tensor<3xf32>) -> tensor<3xf32>, sym_name = "main"}> ({
^bb0(%x: tensor<3xf32>):
  %0 = "stablehlo.composite"(%x) <{decomposition = @chlo.sinh.impl, name = "chlo.sinh", version = 1 : i32}> : (tensor<3xf32>) -> tensor<3xf32>
  %1 = "stablehlo.tan"(%0) : (tensor<3xf32>) -> tensor<3xf32>
  "func.return"(%1) : (tensor<3xf32>) -> ()
}) : () -> ()
"func.func"() <{function_type = (tensor<3xf32>) -> tensor<3xf32>, sym_name = "chlo.sinh.impl", sym_visibility = "private"}> ({
^bb0(%a: tensor<3xf32>):
  %0 = "stablehlo.exponential"(%a) : (tensor<3xf32>) -> tensor<3xf32>
  %1 = "stablehlo.negate"(%a) : (tensor<3xf32>) -> tensor<3xf32>
  %2 = "stablehlo.exponential"(%1) : (tensor<3xf32>) -> tensor<3xf32>
  %3 = "stablehlo.subtract"(%0, %2) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %4 = "stablehlo.constant"() <{value = dense<5.000000e-01> : tensor<3xf32>}> : () -> tensor<3xf32>
  %5 = "stablehlo.multiply"(%3, %4) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  "func.return"(%5) : (tensor<3xf32>) -> ()
}) : () -> ()
}) : () -> ()
"#;
    let xs = [0.0f32, 0.5, -1.0];
    let (out, _) = run(text, vec![f32s(&xs)]);
    for (got, x) in out[0].as_f32().unwrap().iter().zip(xs) {
        let want = x.sinh().tan();
        assert!(
            (got - want).abs() <= 1e-6 * want.abs().max(1.0),
            "{got} vs {want}"
        );
    }
}

/// `jnp.sort`'s comparator reads the enclosing function's `0.0` and NaN constants.
#[test]
fn a_region_may_read_enclosing_constants() {
    let body = r#"
    %z = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %0 = "stablehlo.sort"(%x) <{dimension = 0 : i64, is_stable = true}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %1 = "stablehlo.subtract"(%a, %z) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      %2 = "stablehlo.subtract"(%b, %z) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      %3 = "stablehlo.compare"(%1, %2) <{comparison_direction = #stablehlo<comparison_direction GT>}> : (tensor<f32>, tensor<f32>) -> tensor<i1>
      "stablehlo.return"(%3) : (tensor<i1>) -> ()
    }) : (tensor<4xf32>) -> tensor<4xf32>
    "func.return"(%0) : (tensor<4xf32>) -> ()"#;
    let text = module("%x: tensor<4xf32>", "tensor<4xf32>", body);
    let (out, _) = run(&text, vec![f32s(&[1.0, 3.0, -2.0, 2.0])]);
    assert_eq!(out[0].as_f32().unwrap(), [3.0, 2.0, 1.0, -2.0]);
}

/// JAX's `rbg` keys: `ui32[2, 2]` words bitcast to the `ui64[2]` state (least significant
/// word first, as XLA lays them out) and back; `rng_bit_generator` advances the counter by
/// the blocks it used and is a pure function of the state.
#[test]
fn rng_bit_generator_and_resizing_bitcasts() {
    let body = r#"
    %0 = "stablehlo.bitcast_convert"(%k) : (tensor<2x2xui32>) -> tensor<2xui64>
    %1:2 = "stablehlo.rng_bit_generator"(%0) <{rng_algorithm = #stablehlo<rng_algorithm DEFAULT>}> : (tensor<2xui64>) -> (tensor<2xui64>, tensor<5xui32>)
    %2:2 = "stablehlo.rng_bit_generator"(%0) <{rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>}> : (tensor<2xui64>) -> (tensor<2xui64>, tensor<5xui32>)
    %3 = "stablehlo.bitcast_convert"(%1#0) : (tensor<2xui64>) -> tensor<2x2xui32>
    "func.return"(%0, %1#1, %2#1, %3) : (tensor<2xui64>, tensor<5xui32>, tensor<5xui32>, tensor<2x2xui32>) -> ()"#;
    let text = module(
        "%k: tensor<2x2xui32>",
        "(tensor<2xui64>, tensor<5xui32>, tensor<5xui32>, tensor<2x2xui32>)",
        body,
    );
    let words = vec![7u32, 1, 40, 0];
    let k = Tensor::new(vec![2, 2], Data::U32(words.into())).unwrap();
    let (out, _) = run(&text, vec![k]);
    let Data::U64(state) = out[0].data() else {
        panic!("state type")
    };
    assert_eq!(&state[..], [7 | (1 << 32), 40]);
    assert!(
        out[1].bits_eq(&out[2]),
        "the same state gives the same bits"
    );
    // 5 ui32 words take 3 blocks: the counter moves from 40 to 43; the key stays.
    let Data::U32(next) = out[3].data() else {
        panic!("next state type")
    };
    assert_eq!(&next[..], [7, 1, 43, 0]);
}

/// `batch_norm_training`, `batch_norm_inference` and `batch_norm_grad` (decomposed) against
/// direct computations on `x: f32[2, 3, 2]`, features on dimension 1.
#[test]
fn batch_norm_ops_match_direct_computations() {
    let body = r#"
    %0:3 = "stablehlo.batch_norm_training"(%x, %s, %b) <{epsilon = 1.000000e-03 : f32, feature_index = 1 : i64}> : (tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>)
    %1 = "stablehlo.batch_norm_inference"(%x, %s, %b, %0#1, %0#2) <{epsilon = 1.000000e-03 : f32, feature_index = 1 : i64}> : (tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x2xf32>
    %2:3 = "stablehlo.batch_norm_grad"(%x, %s, %0#1, %0#2, %dy) <{epsilon = 1.000000e-03 : f32, feature_index = 1 : i64}> : (tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<2x3x2xf32>) -> (tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>)
    "func.return"(%0#0, %0#1, %0#2, %1, %2#0, %2#1, %2#2) : (tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>) -> ()"#;
    let text = module(
        "%x: tensor<2x3x2xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %dy: tensor<2x3x2xf32>",
        "(tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>)",
        body,
    );
    let x: Vec<f32> = (0..12)
        .map(|i| ((i * 7) % 5) as f32 - 1.5 + 0.1 * i as f32)
        .collect();
    let dy: Vec<f32> = (0..12).map(|i| ((i * 3) % 4) as f32 * 0.5 - 0.7).collect();
    let (s, b) = ([1.5f32, -0.5, 2.0], [0.1f32, 0.2, -0.3]);
    let at = |n: usize, f: usize, k: usize| (n * 3 + f) * 2 + k;
    let eps = 1e-3f64;
    let (mut y, mut mean, mut var, mut dx, mut ds, mut db) = (
        vec![0f64; 12],
        [0f64; 3],
        [0f64; 3],
        vec![0f64; 12],
        [0f64; 3],
        [0f64; 3],
    );
    for f in 0..3 {
        let idx: Vec<usize> = (0..2)
            .flat_map(|n| (0..2).map(move |k| at(n, f, k)))
            .collect();
        let nf = idx.len() as f64;
        mean[f] = idx.iter().map(|&i| x[i] as f64).sum::<f64>() / nf;
        var[f] = idx
            .iter()
            .map(|&i| (x[i] as f64 - mean[f]).powi(2))
            .sum::<f64>()
            / nf;
        let inv = 1.0 / (var[f] + eps).sqrt();
        for &i in &idx {
            let xh = (x[i] as f64 - mean[f]) * inv;
            y[i] = xh * s[f] as f64 + b[f] as f64;
            db[f] += dy[i] as f64;
            ds[f] += dy[i] as f64 * xh;
        }
        for &i in &idx {
            let xh = (x[i] as f64 - mean[f]) * inv;
            dx[i] = s[f] as f64 * inv / nf * (nf * dy[i] as f64 - db[f] - xh * ds[f]);
        }
    }
    let (out, _) = run(
        &text,
        vec![
            Tensor::from_f32(vec![2, 3, 2], x.clone()).unwrap(),
            f32s(&s),
            f32s(&b),
            Tensor::from_f32(vec![2, 3, 2], dy.clone()).unwrap(),
        ],
    );
    let check = |t: &Tensor, want: &[f64], what: &str| {
        for (i, (g, w)) in t.to_f64_vec().iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                "{what}[{i}]: {g} vs {w}"
            );
        }
    };
    check(&out[0], &y, "y");
    check(&out[1], &mean, "mean");
    check(&out[2], &var, "var");
    check(&out[3], &y, "inference with the batch statistics");
    check(&out[4], &dx, "grad_operand");
    check(&out[5], &ds, "grad_scale");
    check(&out[6], &db, "grad_offset");
}
