//! In-place writes (`ebb_ir::op::in_place_writes`) of loop fusions and scatters: which operand a result
//! overwrites and the named negative cases (an operand read later, a graph output, an input
//! that is not donated), the planned peak that counts an overwritten operand once, and the
//! independent checker deriving the same peak.

use ebb_ir::op::{in_place_writes, InPlace};
use ebb_ir::text::parse;
use ebb_ir::{Graph, OpKind};
use ebb_passes::fuse::FusePass;
use ebb_passes::manager::{Pass, PassContext};
use ebb_passes::memory::program_order;
use ebb_passes::plan::{build_plan, check, PlanOptions};

/// `d = x·w` (materialized: a `dot_general`), then `negate(exp(d))` (one loop fusion), and
/// whatever `extra` adds before the `return` of `ret`.
fn fused_graph(extra: &str, ret: &str) -> Graph {
    let text = format!(
        r#"graph @inplace {{
  %x = input {{index = 0, name = "x"}} : f32[B,64]
  %w = input {{index = 1, name = "w"}} : f32[64,64]
  %d = dot_general(%x, %w) {{lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]}} : f32[B,64]
  %e = exponential(%d) : f32[B,64]
  %n = negate(%e) : f32[B,64]
{extra}  return {ret}
}}"#
    );
    let mut g = ebb_testkit::graph(&text);
    FusePass.run(&mut g, &mut PassContext::new()).unwrap();
    ebb_ir::verify::verify(&g).unwrap();
    g
}

/// The in-place writes of the graph's one `fusion` op.
fn writes(g: &Graph) -> Vec<InPlace> {
    let fusion = *g
        .order()
        .iter()
        .find(|&&n| g.node(n).kind() == OpKind::Fusion)
        .expect("a fusion op");
    in_place_writes(g).remove(&fusion).unwrap_or_default()
}

/// Planned peak (no decisions) and the checker's, at `B = b`.
fn peaks(g: &Graph, b: i64) -> (i64, i64) {
    let bind = ebb_testkit::bind(&[("B", b)]);
    let plan = build_plan(g, &program_order(g), &PlanOptions::default()).unwrap();
    let checked = check(g, &plan, &[], &bind).unwrap();
    (plan.peak_at(&bind).unwrap(), checked.peak)
}

/// Tests that the fusion overwrites `d`, its dying operand, and that the planned peak, the
/// checker's, counts `d` and the result once: inputs + `d` + the tiles, not + the result.
#[test]
fn a_dying_operand_is_overwritten() {
    let g = fused_graph("", "%n");
    assert_eq!(
        writes(&g),
        [InPlace {
            operand: 0,
            result: 0
        }]
    );
    let b = 4096;
    let (planned, checked) = peaks(&g, b);
    assert_eq!(planned, checked);
    let (inputs, d) = (b * 64 * 4 + 64 * 64 * 4, b * 64 * 4);
    // Tiles: one chunk (2048 elements) of the copied operand and of each member's result.
    assert!(planned < inputs + 2 * d, "{planned}");
    assert!(planned >= inputs + d, "{planned}");
}

/// Tests that the in-place writes a graph keeps follow its changes: once `d` is a graph output
/// too (`set_outputs` after the writes were asked for), the fusion no longer overwrites it.
#[test]
fn the_kept_writes_follow_a_change_of_the_graph() {
    let mut g = fused_graph("", "%n");
    assert_eq!(writes(&g).len(), 1);
    let dot = *g
        .order()
        .iter()
        .find(|&&n| g.node(n).kind() == OpKind::DotGeneral)
        .expect("the dot");
    let mut outputs = g.outputs().to_vec();
    outputs.push(ebb_ir::ValueRef::new(dot, 0));
    let mut names = g.output_names.clone();
    names.push("d".into());
    g.set_outputs(outputs, names);
    assert_eq!(writes(&g), []);
    assert_eq!(writes(&g.clone()), []);
}

/// Tests the negative cases: `d` read after the fusion by an op that does not feed it, `d`
/// a graph output, and the fusion reading a graph input that is not donated — no write.
#[test]
fn no_write_where_the_old_value_is_still_needed() {
    let later = "  %k = dot_general(%d, %w) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[B,64]\n";
    assert_eq!(writes(&fused_graph(later, "%n, %k")), []);
    assert_eq!(writes(&fused_graph("", "%n, %d")), []);
    let on_input = parse(
        r#"graph @input {
  %x = input {index = 0, name = "x"} : f32[B,64]
  %e = exponential(%x) : f32[B,64]
  %n = negate(%e) : f32[B,64]
  return %n
}"#,
    )
    .unwrap();
    let mut g = on_input.clone();
    FusePass.run(&mut g, &mut PassContext::new()).unwrap();
    assert_eq!(writes(&g), []);
    // Donated (`aliasing_output`), the same input is overwritten: XLA's input-output alias.
    let mut g = on_input;
    let x = g.inputs()[0];
    g.set_aliasing_output(x, Some(0));
    FusePass.run(&mut g, &mut PassContext::new()).unwrap();
    assert_eq!(
        writes(&g),
        [InPlace {
            operand: 0,
            result: 0
        }]
    );
    let (planned, checked) = peaks(&g, 4096);
    assert_eq!(planned, checked);
    assert!(planned < 2 * 4096 * 64 * 4, "{planned}");
}

/// Tests that a reader of the operand that the fusion depends on (here the `reduce` that
/// feeds it through a broadcast) does not prevent the write: the fusion reads `d` last in
/// every schedule.
#[test]
fn readers_that_feed_the_fusion_allow_the_write() {
    let text = r#"graph @feeds {
  %x = input {index = 0, name = "x"} : f32[B,64]
  %w = input {index = 1, name = "w"} : f32[64,64]
  %zero = constant {value = dense<0.0> : f32} : f32[]
  %d = dot_general(%x, %w) {lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]} : f32[B,64]
  %m = reduce(%d, %zero) {dimensions = [1]} : f32[B] {
    region @body {
      %a = input {index = 0, name = ""} : f32[]
      %b = input {index = 1, name = ""} : f32[]
      %r = maximum(%a, %b) : f32[]
      return %r
    }
  }
  %mb = broadcast_in_dim(%m) {broadcast_dimensions = [0], shape = dims[B, 64]} : f32[B,64]
  %s = subtract(%d, %mb) : f32[B,64]
  %n = negate(%s) : f32[B,64]
  return %n
}"#;
    let mut g = parse(text).unwrap();
    FusePass.run(&mut g, &mut PassContext::new()).unwrap();
    assert_eq!(writes(&g).len(), 1);
    let (planned, checked) = peaks(&g, 4096);
    assert_eq!(planned, checked);
}

/// Tests a `scatter` (an embedding gradient: scatter-add of the updates into zeros of the
/// table's shape): the zeros die at it, so it writes into their buffer, and the planned and
/// checked peaks count that buffer once; a constant base (shared, read-only) is not written.
#[test]
fn a_scatter_writes_into_its_dying_input() {
    let text = |base: &str| {
        format!(
            r#"graph @embed_grad {{
  %ids = input {{index = 0, name = "ids"}} : i32[B,1]
  %u = input {{index = 1, name = "u"}} : f32[B,256]
  %zero = constant {{value = dense<0.0> : f32}} : f32[]
{base}  %g = scatter(%z, %ids, %u) {{index_vector_dim = 1, indices_are_sorted = false, inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], unique_indices = false, update_window_dims = [1]}} : f32[1024,256] {{
    region @body {{
      %a = input {{index = 0, name = ""}} : f32[]
      %b = input {{index = 1, name = ""}} : f32[]
      %r = add(%a, %b) : f32[]
      return %r
    }}
  }}
  return %g
}}"#
        )
    };
    let g = parse(&text(
        "  %z = broadcast_in_dim(%zero) {broadcast_dimensions = [], shape = dims[1024, 256]} : f32[1024,256]\n",
    ))
    .unwrap();
    let scatter = *g.order().last().unwrap();
    assert_eq!(
        in_place_writes(&g).remove(&scatter),
        Some(vec![InPlace {
            operand: 0,
            result: 0
        }])
    );
    let (planned, checked) = peaks(&g, 8);
    assert_eq!(planned, checked);
    let table = 1024 * 256 * 4;
    assert!(planned < 2 * table, "{planned}");
    let g = parse(&text(
        "  %z = constant {value = dense<0.0> : f32} : f32[1024,256]\n",
    ))
    .unwrap();
    assert!(in_place_writes(&g).is_empty());
}
