//! Tests of `ebb_passes::writable_splats` (run by the scheduling pass): a `scatter` or
//! `dynamic_update_slice` into a splat `constant` (the zeros of an embedding table's gradient
//! once constant folding has made them a constant at static shapes) gets its own broadcast
//! of the splat and writes its result into that buffer: the same bits on the reference
//! executor, one table-sized buffer at the op instead of two, planned == measured == checked.

use crate::licm::run_at;
use ebb_ir::op::{in_place_writes, InPlace};
use ebb_ir::{Graph, OpKind};
use ebb_passes::manager::PassContext;
use ebb_passes::memory::program_order;
use ebb_passes::plan::{build_plan, check, PlanOptions};
use ebb_passes::registry::pass;
use ebb_passes::schedule::Scheduled;
use ebb_passes::writable_splats::own_written_splats;
use ebb_passes::PassId;

const TABLE: i64 = 1024 * 256 * 4;

/// An embedding table's gradient: the updates `u [B, 256]` scatter-added into a splat
/// `constant` `0.0` of the table's shape at rows `ids`; `extra` is added before the return
/// of `ret`.
fn embed_grad(extra: &str, ret: &str) -> String {
    format!(
        r#"graph @embed_grad {{
  symbols B in [1, inf)
  %ids = input {{index = 0, name = "ids"}} : i32[B,1]
  %u = input {{index = 1, name = "u"}} : f32[B,256]
  %z = constant {{value = dense<0.0> : f32}} : f32[1024,256]
  %g = scatter(%z, %ids, %u) {{index_vector_dim = 1, indices_are_sorted = false, inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], unique_indices = false, update_window_dims = [1]}} : f32[1024,256] {{
    region @body {{
      %a = input {{index = 0, name = ""}} : f32[]
      %b = input {{index = 1, name = ""}} : f32[]
      %r = add(%a, %b) : f32[]
      return %r
    }}
  }}
{extra}  return {ret}
}}"#
    )
}

/// The first node of kind `k` in program order.
fn first(g: &Graph, k: OpKind) -> ebb_ir::NodeId {
    *g.order()
        .iter()
        .find(|&&n| g.node(n).kind() == k)
        .expect("a node of that kind")
}

/// The planned peak of `g` at `B = 8` in program order, equal to the checker's.
fn peak(g: &Graph) -> i64 {
    let b = ebb_testkit::bind(&[("B", 8)]);
    let plan = build_plan(g, &program_order(g), &PlanOptions::default()).unwrap();
    let planned = plan.peak_at(&b).unwrap();
    assert_eq!(planned, check(g, &plan, &[], &b).unwrap().peak);
    planned
}

/// Tests that the scheduling pass gives the scatter its own zeros, in the splat's slot, which
/// it then overwrites: the splat `constant` is gone, the bits are the same on the reference
/// executor, and the peak (planned, checked and measured) drops from two tables to one.
#[test]
fn a_scatter_into_a_splat_constant_writes_in_place_after_scheduling() {
    let g = ebb_testkit::graph(&embed_grad("", "%g"));
    assert!(in_place_writes(&g).is_empty());
    let before = peak(&g);
    assert!(before >= 2 * TABLE, "{before}");
    let mut h = g.clone();
    let mut cx = PassContext::new();
    pass(PassId::Schedule).run(&mut h, &mut cx).unwrap();
    ebb_ir::verify::verify(&h).unwrap();
    let scatter = first(&h, OpKind::Scatter);
    let zeros = h.operands(scatter)[0].node;
    assert_eq!(h.node(zeros).kind(), OpKind::BroadcastInDim);
    let at = |n| h.order().iter().position(|&m| m == n).unwrap();
    assert_eq!(at(zeros) + 1, at(scatter));
    assert!(!h
        .order()
        .iter()
        .any(|&n| h.node(n).kind() == OpKind::Constant && h.node(n).outputs[0].rank() > 0));
    assert_eq!(
        in_place_writes(&h).remove(&scatter),
        Some(vec![InPlace {
            operand: 0,
            result: 0
        }])
    );
    // The schedule left in the context is of the rewritten graph: the new nodes in it, the
    // removed constant not.
    let scheduled = cx.get::<Scheduled>().unwrap();
    let mut sorted = scheduled.schedule.clone();
    sorted.sort();
    let mut ops = program_order(&h);
    ops.sort();
    assert_eq!(sorted, ops);
    let at_s = |n| scheduled.schedule.iter().position(|&m| m == n).unwrap();
    assert_eq!(at_s(zeros) + 1, at_s(scatter));
    let after = peak(&h);
    assert!(after < 2 * TABLE, "{after}");
    let b = ebb_testkit::bind(&[("B", 8)]);
    let ((bits_g, _), (bits_h, measured)) = (run_at(&g, &b), run_at(&h, &b));
    assert_eq!(bits_g, bits_h);
    assert_eq!(measured as i64, after);
}

/// Tests that a splat `constant` that another op reads after the scatter stays for that
/// reader, and the scatter still writes into a splat of its own.
#[test]
fn a_splat_constant_read_again_stays_for_its_other_reader() {
    let text = embed_grad("  %s = add(%g, %z) : f32[1024,256]\n", "%s");
    let mut g = ebb_testkit::graph(&text);
    assert_eq!(own_written_splats(&mut g), 1);
    ebb_ir::verify::verify(&g).unwrap();
    let add = first(&g, OpKind::Add);
    let z = g.operands(add)[1].node;
    assert_eq!(g.node(z).kind(), OpKind::Constant);
    let scatter = first(&g, OpKind::Scatter);
    assert_eq!(
        g.node(g.operands(scatter)[0].node).kind(),
        OpKind::BroadcastInDim
    );
    assert!(in_place_writes(&g).contains_key(&scatter));
}

/// Tests a `dynamic_update_slice` into a splat `constant` (a padded copy: `zeros.at[i].set(x)`)
/// and a `scatter` into a non-splat constant: the first gets its own splat and writes into
/// it; the second is left alone (its values are not one splat).
#[test]
fn dynamic_update_slice_too_but_not_a_dense_constant() {
    let text = r#"graph @pad {
  %x = input {index = 0, name = "x"} : f32[4,256]
  %i = input {index = 1, name = "i"} : i32[]
  %z = constant {value = dense<0.0> : f32} : f32[1024,256]
  %j = constant {value = dense<0> : i32} : i32[]
  %p = dynamic_update_slice(%z, %x, %i, %j) : f32[1024,256]
  %c = constant {value = dense<"0x0000803f00000040"> : f32} : f32[2]
  %ids = constant {value = dense<0> : i32} : i32[1,1]
  %one = constant {value = dense<5.0> : f32} : f32[1]
  %q = scatter(%c, %ids, %one) {index_vector_dim = 1, indices_are_sorted = false, inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], unique_indices = false, update_window_dims = []} : f32[2] {
    region @body {
      %a = input {index = 0, name = ""} : f32[]
      %b = input {index = 1, name = ""} : f32[]
      %r = add(%a, %b) : f32[]
      return %r
    }
  }
  return %p, %q
}"#;
    let mut g = ebb_testkit::graph(text);
    let b = ebb_testkit::bind(&[]);
    let (bits, _) = run_at(&g, &b);
    assert_eq!(own_written_splats(&mut g), 1);
    ebb_ir::verify::verify(&g).unwrap();
    let dus = first(&g, OpKind::DynamicUpdateSlice);
    assert_eq!(
        g.node(g.operands(dus)[0].node).kind(),
        OpKind::BroadcastInDim
    );
    assert!(in_place_writes(&g).contains_key(&dus));
    let scatter = first(&g, OpKind::Scatter);
    assert_eq!(g.node(g.operands(scatter)[0].node).kind(), OpKind::Constant);
    assert_eq!(run_at(&g, &b).0, bits);
}
