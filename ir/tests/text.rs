//! Tests of the lexer (`ir/src/text/lexer.rs`) and of printing details; whole-graph round
//! trips are in `text_roundtrip.rs`.

use ebb_ir::graph::Graph;
use ebb_ir::op::{Attr, Attrs, CustomCallSpec, Op};
use ebb_ir::text::lexer::{Cursor, Number};
use ebb_ir::text::{parse, parse_attrs, print, print_attrs};
use ebb_ir::types::TensorType;
use ebb_ir::{DType, Node};

#[test]
fn lexer_numbers_strings_and_trivia() {
    let mut c = Cursor::new("  // comment\n -12 3.5 1e-7 7e 0x1F \"a\\n\\u{e9}\\\"\"");
    assert_eq!(c.number(), Some(Number::Int("-12")));
    assert_eq!(c.number(), Some(Number::Float("3.5")));
    assert_eq!(c.number(), Some(Number::Float("1e-7")));
    assert_eq!(c.number(), Some(Number::Int("7")));
    assert_eq!(c.ident(), Some("e"));
    assert_eq!(c.hex(), Some("1F"));
    assert_eq!(c.string().unwrap(), "a\né\"");
    assert!(c.at_end());
}

#[test]
fn dim_spans_stop_at_delimiters_outside_parentheses() {
    let mut c = Cursor::new("floordiv(S, 2)*B, \"seq, len\" + 1] >= x");
    assert_eq!(c.dim_span().unwrap().0, "floordiv(S, 2)*B");
    assert!(c.eat(","));
    assert_eq!(c.dim_span().unwrap().0, "\"seq, len\" + 1");
    assert!(c.eat("]"));
    assert!(c.dim_span().is_err(), "an empty expression is an error");
}

#[test]
fn errors_count_columns_in_characters() {
    let c = Cursor::new("éé\nab");
    let e = c.error_at(2, "x");
    assert_eq!((e.line, e.col), (1, 2));
    let e = c.error_at(6, "x");
    assert_eq!((e.line, e.col), (2, 2));
    assert_eq!(e.to_string(), "2:2: x");
}

#[test]
fn empty_graph_prints_minimally() {
    let g = Graph::new("main");
    assert_eq!(print(&g), "graph @main {\n  return\n}\n");
    assert_eq!(print(&parse("graph @main { return }").unwrap()), print(&g));
}

#[test]
fn zero_result_ops_and_multi_result_references() {
    let mut g = Graph::new("m");
    let x = g.add_input("x", TensorType::scalar(DType::F32));
    let call = Op::CustomCall(CustomCallSpec::default());
    g.add_node(Node::new(call, vec![]), &[x]);
    let two = g.add_node(
        Node::new(
            Op::OptimizationBarrier,
            vec![TensorType::scalar(DType::F32); 2],
        ),
        &[x, x],
    );
    g.set_outputs(vec![ebb_ir::ValueRef::new(two, 1)], vec![String::new()]);
    let text = print(&g);
    assert!(
        text.contains("%1:0 = custom_call(%0) {call_target_name = \"\"} : ()\n"),
        "{text}"
    );
    assert!(
        text.contains("%2:2 = optimization_barrier(%0, %0) : f32[], f32[]\n"),
        "{text}"
    );
    assert!(text.contains("return %2#1\n"), "{text}");
    assert_eq!(print(&parse(&text).unwrap()), text);
    let e = parse("graph { %0:2 = optimization_barrier : f32[], f32[]\n return %0 }").unwrap_err();
    assert!(e.message.contains("name one as `%0#k`"), "{e}");
}

#[test]
fn float_attributes_print_exactly() {
    let mut a = Attrs::new();
    a.insert("a".into(), Attr::F64(1e16));
    a.insert("b".into(), Attr::F64(-0.0));
    a.insert("c".into(), Attr::F64(f64::NEG_INFINITY));
    a.insert("d".into(), Attr::I64(-3));
    let text = print_attrs(&a);
    assert_eq!(text, "{a = 1e16, b = -0.0, c = -inf, d = -3}");
    let back = parse_attrs(&text).unwrap();
    assert!(matches!(back["b"], Attr::F64(v) if v == 0.0 && v.is_sign_negative()));
    assert_eq!(back["d"], Attr::I64(-3));
    assert!(parse_attrs("{a = 1} x").is_err());
}

#[test]
fn payloads_are_validated_when_parsed() {
    let e = parse("graph {\n %0 = input {index = 0} : f32[2,3]\n %1 = transpose(%0) {perm = [1, 0]} : f32[3,2]\n return %1 }")
        .unwrap_err();
    assert_eq!(e.line, 3, "{e}");
    assert!(
        e.message.contains("attribute `permutation` is missing"),
        "{e}"
    );
    let e = parse("graph {\n %0 = input {index = 0} : i32[2]\n %1 = compare(%0, %0) {comparison_direction = \"XX\"} : i1[2]\n return %1 }")
        .unwrap_err();
    assert!(e.message.contains("comparison_direction"), "{e}");
}

#[test]
fn case_with_several_branches_and_bitcast_round_trip() {
    let text = "graph @m {\n  %0 = input {index = 0, name = \"i\"} : i32[]\n  %1 = input {index = 1, name = \"x\"} : ui32[B]\n  %2 = case(%0, %1) : f32[B] {\n    region {\n      %0 = input {index = 0} : ui32[B]\n      %1 = bitcast_convert(%0) {dtype = f32} : f32[B]\n      return %1\n    }\n    region {\n      %0 = input {index = 0} : ui32[B]\n      %1 = convert(%0) {dtype = f32} : f32[B]\n      return %1\n    }\n  }\n  return %2\n}\n";
    let g = parse(text).unwrap_or_else(|e| panic!("{e}"));
    ebb_ir::verify::verify(&g).unwrap();
    assert_eq!(print(&g), print(&parse(&print(&g)).unwrap()));
    // A branch returning another type than branch 0 is rejected by verification.
    let bad = text.replacen(
        "%1 = convert(%0) {dtype = f32} : f32[B]",
        "%1 = convert(%0) {dtype = i32} : i32[B]",
        1,
    );
    let g = parse(&bad).unwrap();
    assert!(ebb_ir::verify::verify(&g).is_err());
}
