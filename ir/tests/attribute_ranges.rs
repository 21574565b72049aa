//! The verifier refuses every attribute out of the range the shape rules rely on, in a graph
//! read from text (a plan's embedded graph), so nothing accepted here fails later at finalize
//! or run time: slice bounds past the dimension, an iota or concatenate dimension past the
//! rank, a transpose that is not a permutation, reduce bodies of the wrong arity, regions
//! nested deeper than the bound. The valid graph is edited one attribute at a time (seeded
//! values), and each edit must be refused with the op named.

use ebb_ir::text::parse;
use ebb_ir::verify::verify;

/// A valid graph: slice, iota, concatenate and reduce of `f32[4]`.
const VALID: &str = r#"graph @main {
  %0 = input {index = 0, name = ""} : f32[4]
  %1 = slice(%0) {limit_indices = dims[4], start_indices = dims[2], strides = dims[1]} : f32[2] loc("v.mlir:4:10")
  %2 = iota {dtype = f32, iota_dimension = 0, shape = dims[2]} : f32[2] loc("v.mlir:5:10")
  %3 = concatenate(%1, %2) {dimension = 0} : f32[4] loc("v.mlir:6:10")
  %4 = constant {value = dense<0.0> : f32} : f32[] loc("v.mlir:7:10")
  %5 = reduce(%3, %4) {dimensions = [0]} : f32[] {
    region @body {
      %0 = input {index = 0, name = ""} : f32[]
      %1 = input {index = 1, name = ""} : f32[]
      %2 = add(%0, %1) : f32[] loc("v.mlir:10:12")
      return %2
    }
  } loc("v.mlir:8:10")
  return %5
}"#;

/// `VALID` with `from` replaced by `to`: refused (at parse or verification) with `want` in
/// the message.
#[track_caller]
fn refused(from: &str, to: &str, want: &str) {
    assert!(VALID.contains(from), "{from}");
    let text = VALID.replacen(from, to, 1);
    let e = match parse(&text) {
        Err(e) => e.to_string(),
        Ok(g) => match verify(&g) {
            Err(e) => e.to_string(),
            Ok(()) => panic!("accepted: {from} -> {to}"),
        },
    };
    assert!(
        e.contains(want),
        "{from} -> {to}: expected `{want}` in: {e}"
    );
}

#[test]
fn the_valid_graph_verifies() {
    verify(&parse(VALID).unwrap()).unwrap();
}

#[test]
fn slice_bounds_past_the_dimension_are_refused() {
    let mut x: u64 = 3;
    for _ in 0..6 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let limit = 5 + (x >> 40) % 1000;
        refused(
            "limit_indices = dims[4], start_indices = dims[2]",
            &format!(
                "limit_indices = dims[{limit}], start_indices = dims[{}]",
                limit - 2
            ),
            "0 <= start <= limit <= size",
        );
    }
    refused(
        "start_indices = dims[2]",
        "start_indices = dims[-1]",
        "0 <= start",
    );
    refused("strides = dims[1]", "strides = dims[0]", "stride 0");
}

#[test]
fn iota_and_concatenate_dimensions_past_the_rank_are_refused() {
    refused(
        "iota_dimension = 0",
        "iota_dimension = 3",
        "dimension 3 out of range for rank 1",
    );
    refused("iota_dimension = 0", "iota_dimension = -1", "out of range");
    refused(
        "{dimension = 0} : f32[4]",
        "{dimension = 2} : f32[4]",
        "dimension 2 out of range",
    );
}

#[test]
fn reduce_bodies_of_the_wrong_arity_are_refused() {
    refused(
        "      return %2\n",
        "      return %2, %2\n",
        "its body takes 2 values and returns 2",
    );
    refused(
        "      return %2\n",
        "      %3 = convert(%2) {dtype = f64} : f64[]\n      return %3\n",
        "scalar of the init value's type f32",
    );
}

#[test]
fn transposes_must_be_permutations() {
    let text = r#"graph @main {
  %0 = input {index = 0, name = ""} : f32[2, 3]
  %1 = transpose(%0) {permutation = [0, 0]} : f32[2, 2]
  return %1
}"#;
    let e = verify(&parse(text).unwrap()).unwrap_err().to_string();
    assert!(e.contains("names dimension 0 twice"), "{e}");
}

#[test]
fn regions_deeper_than_the_bound_are_refused_at_parse() {
    let depth = ebb_ir::graph::MAX_REGION_DEPTH + 1;
    let mut body = String::from("%0 = input {index = 0, name = \"\"} : f32[]\nreturn %0\n");
    for _ in 0..depth {
        body = format!(
            "%0 = input {{index = 0, name = \"\"}} : f32[]\n%1 = input {{index = 1, name = \"\"}} : f32[]\n%2 = reduce(%0, %1) {{dimensions = []}} : f32[] {{\nregion @body {{\n{body}}}\n}}\nreturn %2\n"
        );
    }
    let e = parse(&format!("graph @main {{\n{body}}}"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("regions nested more than 65 deep"), "{e}");
}
