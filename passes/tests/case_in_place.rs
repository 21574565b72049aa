//! `case` results written in place (`ebb_ir::op::in_place_writes`): a result a branch returns
//! unchanged from an operand takes that operand's buffer, another result the buffer of a
//! same-typed operand that dies at the op; the branches' block arguments of those operands are
//! donated (`ebb_passes::donate::donate_into_branches`), so a branch frees them after their
//! last read; the op is charged its largest branch's peak beyond the results held apart. The
//! planned peak equals the checker's, and the named negative case (an operand read after the
//! op) keeps its buffer.

use ebb_ir::op::{in_place_writes, InPlace};
use ebb_ir::{Graph, OpKind};
use ebb_passes::donate::donate_into_branches;
use ebb_passes::fuse::FusePass;
use ebb_passes::manager::{Pass, PassContext};
use ebb_passes::memory::{liveness, program_order};
use ebb_passes::plan::{build_plan, check, PlanOptions};

/// A skipped optimizer step: `g = x·x`; branch 0 computes the moment `m' = m + g` and the
/// update `-(m'·g)`, branch 1 (the skip) returns the moment unchanged and zero updates; after the `case`,
/// `p = x + update`. `m` is donated to output 0 (the new moment); `after` adds a reader of
/// `g` after the `case` (as output 2) when set.
fn skip_step(after: bool) -> Graph {
    let (extra, ret) = if after {
        ("  %q = negate(%g) : f32[N]\n", ", %q")
    } else {
        ("", "")
    };
    ebb_testkit::graph(&format!(
        r#"graph @skip {{
  %ok = input {{index = 0, name = "ok"}} : i32[]
  %m = input {{aliasing_output = 0, index = 1, name = "m"}} : f32[N]
  %x = input {{index = 2, name = "x"}} : f32[N]
  %g = multiply(%x, %x) : f32[N]
  %c:2 = case(%ok, %m, %g) : f32[N], f32[N] {{
    region {{
      %0 = input {{index = 0}} : f32[N]
      %1 = input {{index = 1}} : f32[N]
      %2 = add(%0, %1) : f32[N]
      %3 = multiply(%2, %1) : f32[N]
      %4 = negate(%3) : f32[N]
      return %2, %4
    }}
    region {{
      %0 = input {{index = 0}} : f32[N]
      %1 = input {{index = 1}} : f32[N]
      %2 = constant {{value = dense<0.0> : f32}} : f32[]
      %3 = broadcast_in_dim(%2) {{broadcast_dimensions = [], shape = dims[N]}} : f32[N]
      return %0, %3
    }}
  }}
{extra}  %p = add(%x, %c#1) : f32[N]
  return %c#0, %p{ret}
}}"#
    ))
}

fn case_node(g: &Graph) -> ebb_ir::NodeId {
    *g.order()
        .iter()
        .find(|&&n| g.node(n).kind() == OpKind::Case)
        .expect("a case op")
}

/// Planned peak (program order, no decisions), the checker's, and the planned resident bytes
/// at the `case` (point 1), at `N = n`.
fn peaks(g: &Graph, n: i64) -> (i64, i64, i64) {
    let bind = ebb_testkit::bind(&[("N", n)]);
    let order = program_order(g);
    let plan = build_plan(g, &order, &PlanOptions::default()).unwrap();
    let checked = check(g, &plan, &[], &bind).unwrap();
    let at_case = liveness(g, &order).resident_bytes(&bind).unwrap()[1];
    (plan.peak_at(&bind).unwrap(), checked.peak, at_case)
}

/// Tests that the moment, forwarded by the skip branch, and the gradient, dying at the `case`,
/// hold the two results; that the branches' arguments are donated where they compute the
/// output; and that the peak counts each buffer once: `x`, `m`, `g` and branch 0's one
/// temporary (its new moment, while `m` and `g` are still read), then `p` beside `x`, `m'`
/// and the update.
#[test]
fn forwarded_and_dying_operands_hold_the_results() {
    let mut g = skip_step(false);
    let case = case_node(&g);
    assert_eq!(
        in_place_writes(&g).remove(&case),
        Some(vec![
            InPlace {
                operand: 1,
                result: 0
            },
            InPlace {
                operand: 2,
                result: 1
            },
        ])
    );
    assert_eq!(donate_into_branches(&mut g), 3);
    ebb_ir::verify::verify(&g).unwrap();
    let branches = &g.node(case).regions;
    let donated = |b: usize| -> Vec<Option<usize>> {
        let r = &branches[b];
        r.inputs().iter().map(|&a| r.aliasing_output(a)).collect()
    };
    // Branch 0 computes both outputs; branch 1 returns `m` itself (not donated).
    assert_eq!(donated(0), [Some(0), Some(1)]);
    assert_eq!(donated(1), [None, Some(1)]);
    let n = 100_000;
    let (planned, checked, at_case) = peaks(&g, n);
    assert_eq!(planned, checked);
    // ok (4 bytes), then buffers of 4n bytes: at the case x, m, g and branch 0's `m'`, then
    // (`m` and `g` freed after their last reads) x, `m'`, `m'·g` and the update: 4; after
    // it, x, the new moment, the update and p: 4. (Results held apart would add 2 more, and
    // branch 0's outputs counted inside as well as outside 2 more again.)
    assert_eq!(at_case, 4 + 4 * 4 * n);
    assert_eq!(planned, 4 + 4 * 4 * n);
}

/// Tests that an operand read after the `case` keeps its buffer: the update is then held apart
/// (and so is branch 0's temporary), and the checker agrees.
#[test]
fn an_operand_read_later_keeps_its_buffer() {
    let mut g = skip_step(true);
    let case = case_node(&g);
    assert_eq!(
        in_place_writes(&g).remove(&case),
        Some(vec![InPlace {
            operand: 1,
            result: 0
        }])
    );
    donate_into_branches(&mut g);
    ebb_ir::verify::verify(&g).unwrap();
    let n = 100_000;
    let (planned, checked, at_case) = peaks(&g, n);
    assert_eq!(planned, checked);
    // At the case: x and g (kept), with branch 0's peak beside them: `m'`, `m'·g` and the
    // update (`m` freed after its read): 5 buffers at once.
    assert_eq!(at_case, 4 + 5 * 4 * n);
}

/// Tests that fusion inside the branches lets branch 0 write its outputs over its donated
/// arguments: the `case` is then charged nothing beyond its operands.
#[test]
fn fused_branches_write_over_their_arguments() {
    let mut g = skip_step(false);
    FusePass.run(&mut g, &mut PassContext::new()).unwrap();
    ebb_ir::verify::verify(&g).unwrap();
    let case = case_node(&g);
    let b0 = &g.node(case).regions[0];
    assert!(b0
        .order()
        .iter()
        .any(|&n| b0.node(n).kind() == OpKind::Fusion));
    let n = 100_000;
    let (planned, checked, at_case) = peaks(&g, n);
    assert_eq!(planned, checked);
    // At the case: x, m, g, and the fusion's tiles only (far below one more buffer): the
    // fusion writes `m'` over `m` and the update over `g`.
    assert!(at_case < 4 + 13 * n, "{at_case}");
    assert!(at_case >= 4 + 12 * n, "{at_case}");
}
