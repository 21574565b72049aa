//! Tests that the textual IR printer and parser round-trip graphs built with the Graph API,
//! that the format is stable (insta snapshot), and that malformed text gives a located error
//! and never a panic.

use ebb_ir::op::{BroadcastSpec, CustomCallSpec, DotDims, InputSpec};
use ebb_ir::text::{parse, parse_attrs, print, print_attrs};
use ebb_ir::{
    Attr, Attrs, DType, DimExpr, Graph, Literal, Node, NodeId, Op, Relation, ShapeAssertion,
    TensorType, ValueRef,
};
use ebb_testkit::ty;
use proptest::prelude::*;
use std::collections::HashMap;

fn d(s: &str) -> DimExpr {
    s.parse().unwrap_or_else(|e| panic!("bad dim `{s}`: {e}"))
}

fn op(g: &mut Graph, op: Op, outs: Vec<TensorType>, operands: &[ValueRef]) -> ValueRef {
    ValueRef::new(g.add_node(Node::new(op, outs), operands), 0)
}

/// `add` of two scalars: the body of a sum reduction.
fn add_region(dtype: DType) -> Graph {
    let mut r = Graph::new("");
    let a = r.add_input("", TensorType::scalar(dtype));
    let b = r.add_input("", TensorType::scalar(dtype));
    let s = op(&mut r, Op::Add, vec![TensorType::scalar(dtype)], &[a, b]);
    r.set_outputs(vec![s], vec![String::new()]);
    r
}

/// A small MLP-like training graph exercising every printed construct.
fn mlp() -> Graph {
    let mut g = Graph::new("main");
    let b = g.scope.declare("B");
    let s = g.scope.declare("S");
    g.scope.set_range(&b, Some(1), Some(65536));
    g.scope.set_range(&s, Some(1), None);
    g.scope.add_divisible(&s, 8);
    let t = g.scope.declare("T");
    g.scope.add_equality(&t, d("2*S"));
    g.assertions.push(ShapeAssertion {
        lhs: d("B"),
        rel: Relation::Ge,
        rhs: d("1"),
        message: "Expected value >= 1 for dimension variable 'B'. Using the following polymorphic shapes \
                  specifications: {0}.\n\"quoted\""
            .into(),
    });
    let w = g.add_input("params['w1']", ty(DType::F32, &["64", "128"]));
    let bias = g.add_input("params['b1']", ty(DType::F32, &["128"]));
    let x = g.add_input("x", ty(DType::F32, &["B", "64"]));
    let dot = op(
        &mut g,
        Op::DotGeneral(DotDims {
            lhs_contract: vec![1],
            rhs_contract: vec![0],
            ..DotDims::default()
        }),
        vec![ty(DType::F32, &["B", "128"])],
        &[x, w],
    );
    g.node_mut(dot.node).loc = Some("model.py:12:3".into());
    let bb = op(
        &mut g,
        Op::BroadcastInDim(BroadcastSpec {
            dims: vec![1],
            shape: vec![d("B"), d("128")],
        }),
        vec![ty(DType::F32, &["B", "128"])],
        &[bias],
    );
    let h = op(
        &mut g,
        Op::Add,
        vec![ty(DType::F32, &["B", "128"])],
        &[dot, bb],
    );
    let zero = op(
        &mut g,
        Op::Constant(Literal::splat_f64(DType::F32, 0.0)),
        vec![TensorType::scalar(DType::F32)],
        &[],
    );
    let relu = op(
        &mut g,
        Op::Maximum,
        vec![ty(DType::F32, &["B", "128"])],
        &[h, h],
    );
    let red = g.add_node(
        Node {
            op: Op::Reduce(vec![1]),
            outputs: vec![ty(DType::F32, &["B"]), ty(DType::F32, &["B"])],
            regions: vec![{
                let mut r = Graph::new("");
                let a0 = r.add_input("", TensorType::scalar(DType::F32));
                let a1 = r.add_input("", TensorType::scalar(DType::F32));
                let b0 = r.add_input("", TensorType::scalar(DType::F32));
                let b1 = r.add_input("", TensorType::scalar(DType::F32));
                let s0 = op(
                    &mut r,
                    Op::Add,
                    vec![TensorType::scalar(DType::F32)],
                    &[a0, b0],
                );
                let s1 = op(
                    &mut r,
                    Op::Maximum,
                    vec![TensorType::scalar(DType::F32)],
                    &[a1, b1],
                );
                r.set_outputs(vec![s0, s1], vec![String::new(), String::new()]);
                r
            }],
            loc: Some("model.py:14:1".into()),
        },
        &[relu, relu, zero, zero],
    );
    let total = g.add_node(
        Node {
            op: Op::Reduce(vec![0]),
            outputs: vec![TensorType::scalar(DType::F32)],
            regions: vec![{
                let mut r = add_region(DType::F32);
                r.name = "body".into();
                r
            }],
            loc: None,
        },
        &[ValueRef::new(red, 0), zero],
    );
    let table = Literal {
        dtype: DType::F32,
        splat: false,
        data: [1.0f32, 2.5, -0.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    };
    let c3 = op(
        &mut g,
        Op::Constant(table),
        vec![ty(DType::F32, &["3"])],
        &[],
    );
    let n = op(
        &mut g,
        Op::DimConstant(vec![d("B*S"), d("floordiv(S, 2)")]),
        vec![ty(DType::I64, &["2"])],
        &[],
    );
    let cv = op(
        &mut g,
        Op::Convert(DType::BF16),
        vec![ty(DType::BF16, &["2"])],
        &[n],
    );
    let cc = op(
        &mut g,
        Op::CustomCall(CustomCallSpec {
            target: "my\ttarget".into(),
            backend_config: Some("{\"alpha\": 0.5}".into()),
            has_side_effect: true,
        }),
        vec![ty(DType::F32, &["3"])],
        &[c3],
    );
    g.set_outputs(
        vec![ValueRef::new(total, 0), ValueRef::new(red, 1), cv, cc],
        vec![
            "loss".into(),
            "params['w']".into(),
            String::new(),
            "aux".into(),
        ],
    );
    g
}

/// Asserts that `a` and `b` have the same structure, op by op in program order.
fn assert_same(a: &Graph, b: &Graph) {
    assert_eq!(a.name, b.name);
    assert_eq!(a.order().len(), b.order().len(), "op count");
    let pos = |g: &Graph| -> HashMap<NodeId, usize> {
        g.order()
            .iter()
            .enumerate()
            .map(|(i, &id)| (id, i))
            .collect()
    };
    let (pa, pb) = (pos(a), pos(b));
    let refs = |g: &Graph, p: &HashMap<NodeId, usize>, vs: &[ValueRef]| -> Vec<(usize, u32)> {
        let _ = g;
        vs.iter().map(|v| (p[&v.node], v.output)).collect()
    };
    for (&ia, &ib) in a.order().iter().zip(b.order()) {
        let (na, nb) = (a.node(ia), b.node(ib));
        assert_eq!(na.op, nb.op, "op {}", na.kind());
        assert_eq!(na.outputs, nb.outputs);
        assert_eq!(na.loc, nb.loc);
        assert_eq!(refs(a, &pa, &a.operands(ia)), refs(b, &pb, &b.operands(ib)));
        assert_eq!(na.regions.len(), nb.regions.len());
        for (ra, rb) in na.regions.iter().zip(&nb.regions) {
            assert_same(ra, rb);
        }
    }
    let inputs = |g: &Graph, p: &HashMap<NodeId, usize>| {
        g.inputs().iter().map(|id| p[id]).collect::<Vec<_>>()
    };
    assert_eq!(inputs(a, &pa), inputs(b, &pb), "input positions");
    for (k, &id) in b.inputs().iter().enumerate() {
        assert!(
            matches!(&b.node(id).op, Op::Input(InputSpec { index, .. }) if *index == k),
            "index of input {k}"
        );
    }
    assert_eq!(refs(a, &pa, a.outputs()), refs(b, &pb, b.outputs()));
    assert_eq!(a.output_names, b.output_names);
    assert_eq!(a.assertions, b.assertions);
    let syms = |g: &Graph| {
        g.scope
            .symbols()
            .iter()
            .map(|s| (s.name().to_string(), g.scope.range(s)))
            .collect::<Vec<_>>()
    };
    assert_eq!(syms(a), syms(b));
    for s in a.scope.symbols() {
        assert_eq!(
            a.scope.divisor_of(&s),
            b.scope.divisor_of(&s),
            "divisor of {}",
            s.name()
        );
    }
    assert_eq!(a.scope.equalities(), b.scope.equalities());
}

fn round_trip(g: &Graph) -> Graph {
    let text = print(g);
    let back = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(print(&back), text);
    assert_same(g, &back);
    back
}

#[test]
fn mlp_round_trips() {
    let g = mlp();
    ebb_ir::verify::verify(&g).unwrap();
    let back = round_trip(&g);
    ebb_ir::verify::verify(&back).unwrap();
    assert_eq!(back.to_string(), print(&g), "Display delegates to print");
}

#[test]
fn mlp_snapshot() {
    insta::assert_snapshot!(print(&mlp()), @r##"
    graph @main {
      symbols B in [1, 65536], S in [1, inf), T in [1, inf)
      fact S % 8 == 0
      fact T == 2*S
      assert B >= 1 : "Expected value >= 1 for dimension variable 'B'. Using the following polymorphic shapes specifications: {0}.\n\"quoted\""
      %0 = input {index = 0, name = "params['w1']"} : f32[64,128]
      %1 = input {index = 1, name = "params['b1']"} : f32[128]
      %2 = input {index = 2, name = "x"} : f32[B,64]
      %3 = dot_general(%2, %0) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[B,128] loc("model.py:12:3")
      %4 = broadcast_in_dim(%1) {broadcast_dimensions = [1], shape = dims[B, 128]} : f32[B,128]
      %5 = add(%3, %4) : f32[B,128]
      %6 = constant {value = dense<0.0> : f32} : f32[]
      %7 = maximum(%5, %5) : f32[B,128]
      %8:2 = reduce(%7, %7, %6, %6) {dimensions = [1]} : f32[B], f32[B] {
        region {
          %0 = input {index = 0, name = ""} : f32[]
          %1 = input {index = 1, name = ""} : f32[]
          %2 = input {index = 2, name = ""} : f32[]
          %3 = input {index = 3, name = ""} : f32[]
          %4 = add(%0, %2) : f32[]
          %5 = maximum(%1, %3) : f32[]
          return %4, %5
        }
      } loc("model.py:14:1")
      %9 = reduce(%8#0, %6) {dimensions = [0]} : f32[] {
        region @body {
          %0 = input {index = 0, name = ""} : f32[]
          %1 = input {index = 1, name = ""} : f32[]
          %2 = add(%0, %1) : f32[]
          return %2
        }
      }
      %10 = constant {value = dense<"0x0000803f0000204000000080"> : f32} : f32[3]
      %11 = dim_constant {values = dims[B*S, floordiv(S, 2)]} : i64[2]
      %12 = convert(%11) {dtype = bf16} : bf16[2]
      %13 = custom_call(%10) {backend_config = "{\"alpha\": 0.5}", call_target_name = "my\ttarget", has_side_effect = true} : f32[3]
      return %9 as "loss", %8#1 as "params['w']", %12, %13 as "aux"
    }
    "##);
}

#[test]
fn inputs_moved_by_a_schedule_keep_argument_order() {
    let mut g = Graph::new("sched");
    let a = g.add_input("a", ty(DType::F32, &["4"]));
    let b = g.add_input("b", ty(DType::F32, &["4"]));
    let n = op(&mut g, Op::Negate, vec![ty(DType::F32, &["4"])], &[b]);
    let s = op(&mut g, Op::Add, vec![ty(DType::F32, &["4"])], &[n, a]);
    g.set_order(vec![b.node, n.node, a.node, s.node]);
    g.set_outputs(vec![s], vec![String::new()]);
    let text = print(&g);
    assert!(
        text.contains("%0 = input {index = 1, name = \"b\"}"),
        "{text}"
    );
    let back = round_trip(&g);
    assert_eq!(back.input_name(back.inputs()[0]), "a");
}

#[test]
fn every_attribute_and_literal_kind_round_trips() {
    let mut a = Attrs::new();
    let floats = [
        0.0,
        -0.0,
        0.1,
        1.0,
        -2.5,
        1e-300,
        5e-324,
        f64::MAX,
        f64::MIN_POSITIVE,
        1e16,
        123456789.125,
    ];
    for (i, v) in floats.iter().enumerate() {
        a.insert(format!("f{i}"), Attr::F64(*v));
    }
    a.insert("fnan".into(), Attr::F64(f64::NAN));
    a.insert("finf".into(), Attr::F64(f64::INFINITY));
    a.insert("fninf".into(), Attr::F64(f64::NEG_INFINITY));
    a.insert("imin".into(), Attr::I64(i64::MIN));
    a.insert("imax".into(), Attr::I64(i64::MAX));
    a.insert("ints".into(), Attr::Ints(vec![-1, 0, 7]));
    a.insert("ints_empty".into(), Attr::Ints(vec![]));
    a.insert("dims_empty".into(), Attr::Dims(vec![]));
    a.insert(
        "dims".into(),
        Attr::Dims(vec![d("B*S*768"), d("min(B, 4)"), d("-3")]),
    );
    a.insert(
        "s".into(),
        Attr::Str("tab\t nl\n bs\\ q\" ctl\u{1} uni é".into()),
    );
    a.insert("not an ident".into(), Attr::Bool(true));
    for dt in DType::ALL {
        a.insert(format!("t_{dt}"), Attr::DType(dt));
        a.insert(
            format!("l_{dt}"),
            Attr::Literal(Literal::splat_f64(dt, 1.0)),
        );
        a.insert(
            format!("m_{dt}"),
            Attr::Literal(Literal::splat_f64(dt, -1.0)),
        );
        let n = dt.size_bytes() as usize;
        let data: Vec<u8> = (0..3 * n).map(|i| (i * 37 + 5) as u8).collect();
        a.insert(
            format!("r_{dt}"),
            Attr::Literal(Literal {
                dtype: dt,
                splat: false,
                data: data.clone(),
            }),
        );
        a.insert(
            format!("x_{dt}"),
            Attr::Literal(Literal {
                dtype: dt,
                splat: true,
                data: data[..n].to_vec(),
            }),
        );
    }
    let lit = |dtype, splat, data: Vec<u8>| Attr::Literal(Literal { dtype, splat, data });
    a.insert(
        "nan_payload".into(),
        lit(DType::F32, true, 0x7fc0_0123u32.to_le_bytes().to_vec()),
    );
    a.insert(
        "f64_nan".into(),
        lit(DType::F64, true, f64::NAN.to_bits().to_le_bytes().to_vec()),
    );
    a.insert(
        "i64_min".into(),
        lit(DType::I64, true, i64::MIN.to_le_bytes().to_vec()),
    );
    a.insert(
        "u32_max".into(),
        lit(DType::U32, true, u32::MAX.to_le_bytes().to_vec()),
    );
    a.insert("i8_min".into(), lit(DType::I8, true, vec![0x80]));
    a.insert("empty".into(), lit(DType::F32, false, vec![]));
    a.insert("bad_splat".into(), lit(DType::F32, true, vec![1, 2]));
    let text = print_attrs(&a);
    let back = parse_attrs(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    // Compared through Debug so that NaN values compare equal.
    assert_eq!(format!("{a:?}"), format!("{back:?}"));
    assert_eq!(print_attrs(&back), text);
}

#[test]
fn odd_names_and_symbols_round_trip() {
    let mut g = Graph::new("");
    let s = g.scope.declare("seq len");
    g.scope.set_range(&s, None, Some(4096));
    let _t = g.scope.declare("T");
    let x = g.add_input("x\u{7f}", ty(DType::F32, &["\"seq len\"", "T"]));
    let z = op(&mut g, Op::OptimizationBarrier, vec![], &[]);
    let _ = z;
    g.set_outputs(vec![x, x], vec![String::new(), "é".into()]);
    round_trip(&g);
}

#[test]
fn hand_written_text_parses() {
    let text = r#"
        // A comment.
        graph @f {
          symbols N in [1, 10]
          %x = input {index = 0, name = "x"} : f32[N]   // trailing comment
          %c = stablehlo.constant {value = dense<2> : f32} : f32[]
          %b = broadcast_in_dim(%c) {broadcast_dimensions = [], shape = dims[N]} : f32[N]
          %y = multiply(%x, %b) : f32[N] loc("f.py:3:1")
          return %y as "y"
        }
    "#;
    let g = parse(text).unwrap();
    ebb_ir::verify::verify(&g).unwrap();
    assert_eq!(g.op_count(), 3);
    let c = g.order()[1];
    assert_eq!(
        g.node(c).op,
        Op::Constant(Literal::splat_f64(DType::F32, 2.0))
    );
    assert_eq!(g.output_names, vec!["y".to_string()]);
    round_trip(&g);
}

#[test]
fn large_graph_round_trips() {
    let mut g = Graph::new("chain");
    let mut v = g.add_input("x", ty(DType::F32, &["B", "S"]));
    for i in 0..20_000 {
        let k = if i % 2 == 0 { Op::Negate } else { Op::Tanh };
        v = op(&mut g, k.clone(), vec![ty(DType::F32, &["B", "S"])], &[v]);
    }
    g.set_outputs(vec![v], vec!["y".into()]);
    let t = std::time::Instant::now();
    round_trip(&g);
    // Linear time: generous bound so that a quadratic regression (minutes) fails.
    assert!(
        t.elapsed().as_secs() < 60,
        "round trip of 20k ops took {:?}",
        t.elapsed()
    );
}

/// (text, expected `line:col`, expected message fragment)
const BAD: &[(&str, &str, &str)] = &[
    ("", "1:1", "expected `graph`"),
    ("graph @g {\n  return\n", "3:1", "expected `}`"),
    (
        "graph @g {\n  %0 = frobnicate : f32[]\n  return\n}",
        "2:8",
        "unknown op `frobnicate`",
    ),
    (
        "graph @g {\n  %0 = add(%1, %1) : f32[]\n  return\n}",
        "2:12",
        "undefined value `%1`",
    ),
    (
        "graph @g {\n  %0 = input {index = 0} : f32[B\n  return %0\n}",
        "3:3",
        "expected `]`",
    ),
    (
        "graph @g {\n  %0 = input {index = 0} : f33[]\n  return %0\n}",
        "2:28",
        "unsupported element type",
    ),
    (
        "graph @g {\n  %0 = constant {value = dense<1.5> : i32} : i32[]\n  return %0\n}",
        "2:32",
        "not a i32 value",
    ),
    (
        "graph @g {\n  %0 = constant {value = dense<300> : i8} : i8[]\n  return %0\n}",
        "2:32",
        "out of range",
    ),
    (
        "graph @g {\n  %0 = input {name = \"x} : f32[]\n  return %0\n}",
        "2:22",
        "unterminated string",
    ),
    (
        "graph @g {\n  %0:2 = input {index = 0} : f32[]\n  return %0\n}",
        "2:3",
        "declares 2 results but 1 types",
    ),
    (
        "graph @g {\n  %0 = input {index = 0} : f32[]\n  %0 = input {index = 1} : f32[]\n  return %0\n}",
        "3:3",
        "defined twice",
    ),
    (
        "graph @g {\n  %0 = input {index = 0} : f32[]\n  return %0#1\n}",
        "3:13",
        "no result #1",
    ),
    (
        "graph @g {\n  %0 = iota {x = [1, B]} : f32[]\n  return\n}",
        "2:22",
        "use `dims[...]`",
    ),
    (
        "graph @g {\n  symbols B in (1, 2]\n  return\n}",
        "2:17",
        "expected `-inf`",
    ),
    (
        "graph @g {\n  assert B ~ 1 : \"\"\n  return\n}",
        "2:12",
        "in dimension expression `B ~ 1`",
    ),
    (
        "graph @g {\n  assert B : \"\"\n  return\n}",
        "2:12",
        "expected a comparison",
    ),
    (
        "graph @g {\n  fact B % 8 == 1\n  return\n}",
        "2:17",
        "written `S % k == 0`",
    ),
    (
        "graph @g {\n  %0 = iota {a = 1, a = 2} : f32[]\n  return\n}",
        "2:21",
        "given twice",
    ),
    (
        "graph @g {\n  return\n} extra",
        "3:3",
        "expected end of input",
    ),
    (
        "graph @g {\n  %0 = iota : f32[(B]\n  return\n}",
        "2:21",
        "unbalanced",
    ),
];

#[test]
fn malformed_text_reports_line_and_column() {
    let mut wrong = Vec::new();
    for (text, at, msg) in BAD {
        let shown = match parse(text) {
            Ok(_) => "parsed".to_string(),
            Err(e) => e.to_string(),
        };
        if !shown.starts_with(&format!("{at}: ")) || !shown.contains(msg) {
            wrong.push(format!(
                "{text:?}:\n  got      `{shown}`\n  expected `{at}: ...{msg}...`"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_prefix_of_a_printed_graph_fails_cleanly() {
    let text = print(&mlp());
    for (i, _) in text.char_indices() {
        let prefix = &text[..i];
        if let Err(e) = parse(prefix) {
            assert!(e.line >= 1 && e.col >= 1);
        }
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let deep = format!(
        "graph {{\n %0 = iota : f32[{}B{}]\n return\n}}",
        "(".repeat(10_000),
        ")".repeat(10_000)
    );
    assert!(parse(&deep).is_err());
    let mut regions = String::from("graph {\n");
    for _ in 0..5_000 {
        regions.push_str("%0 = reduce : f32[] { region {\n");
    }
    assert!(parse(&regions).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn garbled_text_never_panics(edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6)) {
        let mut bytes = print(&mlp()).into_bytes();
        for (i, b) in edits {
            let i = i.index(bytes.len());
            const ALPHABET: &[u8] = b" %#:=,()[]{}<>\"@-0123456789abcxyzBS_.\n\\";
            bytes[i] = ALPHABET[b as usize % ALPHABET.len()];
        }
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(g) = parse(&text) {
            // Whatever parses must print and parse again to the same text.
            let once = print(&g);
            prop_assert_eq!(print(&parse(&once).unwrap()), once);
        }
    }

    #[test]
    fn arbitrary_strings_never_panic(s in "\\PC{0,200}") {
        let _ = parse(&s);
        let _ = parse(&format!("graph {{\n{s}\n return\n}}"));
    }
}

/// Round-trips textual IR files named in `EBB_IR_TEXT` (separated by `:`), e.g. the output of
/// `ebb import FILE --emit ir`: `EBB_IR_TEXT=a.txt:b.txt cargo test -p ebb-ir --test
/// text_roundtrip -- --ignored`.
#[test]
#[ignore = "needs EBB_IR_TEXT"]
fn files_round_trip() {
    let paths = std::env::var("EBB_IR_TEXT").unwrap_or_default();
    for path in paths.split(':').filter(|p| !p.is_empty()) {
        let text = std::fs::read_to_string(path).unwrap();
        let t = std::time::Instant::now();
        let g = parse(&text).unwrap_or_else(|e| panic!("{path}:{e}"));
        let parsed = t.elapsed();
        let again = print(&g);
        if again != text {
            let line = again
                .lines()
                .zip(text.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            panic!("{path}: line {} differs after a round trip", line + 1);
        }
        let verified = ebb_ir::verify::verify(&g).map_err(|e| e.to_string());
        println!(
            "{path}: {} ops, {} bytes, parsed in {parsed:?}, verify: {verified:?}",
            g.op_count(),
            text.len()
        );
    }
}

/// The message of parsing and then verifying `text`, or `None` when both accept it.
fn parse_and_verify(text: &str) -> Option<String> {
    match parse(text) {
        Err(e) => Some(e.to_string()),
        Ok(g) => ebb_ir::verify::verify(&g).err().map(|e| e.to_string()),
    }
}

/// A one-input graph with `op_line` (which defines `%1`) after the input `%0 : f32[4]`.
fn with_op(op_line: &str) -> String {
    format!(
        "graph @g {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[4]\n  {op_line}\n  return %1\n}}"
    )
}

#[test]
fn invalid_ops_are_rejected_with_a_location() {
    let cases = [
        ("%1 = add(%0) : f32[4]", "expects 2 operands, got 1"),
        ("%1 = add(%0, %0, %0) : f32[4]", "expects 2 operands, got 3"),
        ("%1 = negate(%0, %0) : f32[4]", "expects 1 operand, got 2"),
        ("%1 = select(%0, %0) : f32[4]", "expects 3 operands, got 2"),
        (
            "%1 = concatenate(%0, %0) {dimension = 1} : f32[8]",
            "dimension 1 out of range for rank 1",
        ),
        (
            "%1 = concatenate(%0, %0) {dimension = -1} : f32[8]",
            "dimension -1 out of range for rank 1",
        ),
        (
            "%1 = broadcast_in_dim(%0) {shape = dims[4, 4]} : f32[4,4]",
            "broadcast_dimensions",
        ),
    ];
    let mut wrong = Vec::new();
    for (line, msg) in cases {
        let text = with_op(line);
        match parse_and_verify(&text) {
            None => wrong.push(format!("accepted: {line}")),
            // Parse errors start with `line:col:`, verifier errors name the op's position.
            Some(e) if !e.contains(msg) || !(e.starts_with("3:") || e.contains("op #1")) => {
                wrong.push(format!("{line}: `{e}` lacks `{msg}` or a location"))
            }
            Some(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn sizes_that_overflow_are_rejected_by_the_verifier() {
    // Generated: a huge static dimension, i64::MAX, a product that overflows, and values that
    // fit one by one but whose sizes add up past the verifier's total.
    let big = [
        format!("f32[{}]", 1i64 << 62),
        format!("f32[{}]", i64::MAX),
        format!("f32[{},{}]", 1i64 << 32, 1i64 << 32),
        format!("f32[B,{}]", 1i64 << 62),
    ];
    for ty in &big {
        let text = format!(
            "graph @g {{\n  symbols B in [1, 64]\n  %0 = input {{index = 0, name = \"x\"}} : {ty}\n  return %0\n}}"
        );
        let e = parse_and_verify(&text).unwrap_or_else(|| panic!("accepted {ty}"));
        assert!(e.contains("overflows 64-bit integers"), "{ty}: {e}");
    }
    let half = 1i64 << 58; // 2^60 bytes of f32 each: one fits, two exceed 2^61 in total
    let text = format!(
        "graph @g {{\n  %0 = input {{index = 0, name = \"x\"}} : f32[{half}]\n  %1 = negate(%0) : f32[{half}]\n  %2 = negate(%1) : f32[{half}]\n  return %2\n}}"
    );
    let e = parse_and_verify(&text).expect("accepted");
    assert!(e.contains("add up to more than 2^61 bytes"), "{e}");
}
