//! Tests of the remat/swap candidate search (`ebb_passes::remat`): hand-built forward/backward
//! graphs with the candidates snapshotted under the IR (the pass does not change the graph, so
//! "after" is the candidate list), and negative cases.

use crate::memory_helpers::FWD_BWD;
use ebb_ir::text::print;
use ebb_ir::{DimExpr, Graph};
use ebb_passes::memory::program_order;
use ebb_passes::plan::{build_plan, check, PlanOptions};
use ebb_passes::remat::{find_candidates, CandidateOptions, Found, Rejection, ScheduleIndex};
use ebb_plan::format::{Candidate, DecisionKind, OpPos, Point, ValueId};
use ebb_testkit::graph;

/// `%pos` (or `%pos#k`) of a value id, as the textual IR names it.
fn name(idx: &ScheduleIndex, v: ValueId) -> String {
    let pv = &idx.values()[v.index()];
    if pv.output == 0 {
        format!("%{}", pv.node)
    } else {
        format!("%{}#{}", pv.node, pv.output)
    }
}

fn show(g: &Graph, idx: &ScheduleIndex, c: &Candidate, why: &Option<Rejection>) -> String {
    let at = |p: Point| format!("{p} (%{})", idx.position(idx.node_at(p)));
    let ops: Vec<String> = c
        .recompute
        .iter()
        .map(|&p| format!("%{p} {}", g.node(g.order()[p.index()]).kind()))
        .collect();
    let reads: Vec<String> = c.recompute_reads.iter().map(|&v| name(idx, v)).collect();
    let kinds: Vec<&str> = c
        .kinds
        .iter()
        .map(|k| {
            if *k == DecisionKind::Recompute {
                "recompute"
            } else {
                "swap"
            }
        })
        .collect();
    format!(
        "{} ({} bytes): evict after {}, regenerate before {}, prefetch at {}\n  recompute [{}] reads [{}]; flops {}; transient {}; kinds [{}]{}",
        name(idx, c.value),
        c.bytes_saved,
        at(c.evict_after),
        at(c.regenerate_before),
        at(c.prefetch_at),
        ops.join(", "),
        reads.join(", "),
        c.recompute_flops,
        c.transient_bytes,
        kinds.join(", "),
        why.as_ref().map(|w| format!("; no recompute: {w:?}")).unwrap_or_default()
    )
}

/// Runs the search in program order; returns the snapshot text (IR, then candidates) and the
/// result. Also checks that the plan with every candidate taken (as recompute where allowed,
/// and as swap) passes the independent checker at B=2, S=3.
fn search(text: &str, opts: &CandidateOptions) -> (String, Found) {
    let g = graph(text);
    let s = program_order(&g);
    let (idx, found) = find_candidates(&g, &s, opts).expect("search runs");
    let mut out = format!("{}\n// candidates\n", print(&g));
    for (c, why) in found.candidates.iter().zip(&found.rejections) {
        out.push_str(&show(&g, &idx, c, why));
        out.push('\n');
    }
    for (v, why) in &found.dropped {
        out.push_str(&format!("dropped {}: {why:?}\n", name(&idx, *v)));
    }
    let plan = build_plan(
        &g,
        &s,
        &PlanOptions {
            candidates: opts.clone(),
            ..Default::default()
        },
    )
    .unwrap();
    let b = [("B", 2), ("S", 3)]
        .iter()
        .map(|(n, v)| (ebb_ir::Symbol::new(n), *v))
        .collect();
    for kind in [DecisionKind::Recompute, DecisionKind::Swap] {
        check(&g, &plan, &plan.decisions_of_kind(kind), &b)
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
    }
    (out, found)
}

fn opts() -> CandidateOptions {
    CandidateOptions {
        min_bytes: 0,
        ..CandidateOptions::default()
    }
}

/// Tests that an activation saved across the gap to its backward use is the one candidate, with
/// the eviction after its last forward use, the regeneration before the backward use, a
/// recompute from the inputs (`dot_general` then `tanh`), 256*B*S bytes saved and
/// 2*64*64 + 64 FLOPs per row recomputed.
#[test]
fn finds_the_saved_activation_with_points_bytes_and_flops() {
    let (s, found) = search(FWD_BWD, &opts());
    assert_eq!(found.candidates.len(), 1, "{s}");
    let c = &found.candidates[0];
    assert_eq!(
        (c.value, c.evict_after, c.regenerate_before, c.prefetch_at),
        (
            ValueId::new(3),
            Point::new(2),
            Point::new(13),
            Point::new(10)
        )
    );
    assert_eq!(c.recompute, vec![OpPos::new(2), OpPos::new(3)]);
    assert_eq!(c.recompute_reads, vec![ValueId::new(0), ValueId::new(1)]);
    assert_eq!(c.bytes_saved, "256*B*S".parse::<DimExpr>().unwrap());
    assert_eq!(c.recompute_flops, "8256*B*S".parse::<DimExpr>().unwrap());
    assert_eq!(
        c.transient_bytes, c.bytes_saved,
        "the dot_general result lives while tanh runs"
    );
    assert_eq!(c.kinds, vec![DecisionKind::Recompute, DecisionKind::Swap]);
    insta::assert_snapshot!(s);
}

/// Tests that no candidate is made when fewer than `min_gap` points lie strictly inside the
/// gap (here 10: points 3..=12).
#[test]
fn does_not_create_a_candidate_for_a_short_gap() {
    let (_, found) = search(
        FWD_BWD,
        &CandidateOptions {
            min_gap: 11,
            ..opts()
        },
    );
    assert!(found.candidates.is_empty());
    let (_, found) = search(
        FWD_BWD,
        &CandidateOptions {
            min_gap: 10,
            ..opts()
        },
    );
    assert_eq!(found.candidates.len(), 1);
}

/// Tests that values proven smaller than `min_bytes` are skipped (inputs and outputs never are
/// candidates: `x`, `w` and `grad` span the whole gap too).
#[test]
fn does_not_create_candidates_for_small_values_inputs_or_outputs() {
    let (_, found) = search(
        FWD_BWD,
        &CandidateOptions {
            min_bytes: 4096,
            ..opts()
        },
    );
    assert_eq!(
        found.candidates.len(),
        1,
        "256*B*S is not proven below 4096 bytes"
    );
    let small = FWD_BWD.replace("B,S,64", "2,3,64");
    let (_, found) = search(
        &small,
        &CandidateOptions {
            min_bytes: 4096,
            ..opts()
        },
    );
    assert!(found.candidates.is_empty(), "1536 bytes < 4096");
}

/// Tests that a value whose regeneration would read a value that is no longer resident and
/// cannot be recomputed (the result of an opaque `custom_call`) gets no recompute option: it
/// is swap-only, and with swap disabled there is no candidate at all.
#[test]
fn does_not_create_a_candidate_whose_regeneration_reads_an_evicted_value() {
    let text = FWD_BWD.replace(
        "%h1 = dot_general(%x, %w) {lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [0]} : f32[B,S,64]",
        "%h1 = custom_call(%x) {call_target_name = \"opaque\"} : f32[B,S,64]",
    );
    let (s, found) = search(&text, &opts());
    assert_eq!(found.candidates.len(), 1);
    assert_eq!(found.candidates[0].kinds, vec![DecisionKind::Swap]);
    assert_eq!(
        found.rejections[0],
        Some(Rejection::NotRecomputable(OpPos::new(2)))
    );
    insta::assert_snapshot!(s);
    let (_, found) = search(
        &text,
        &CandidateOptions {
            allow_swap: false,
            ..opts()
        },
    );
    assert!(found.candidates.is_empty());
    assert_eq!(
        found.dropped,
        vec![(ValueId::new(3), Rejection::NotRecomputable(OpPos::new(2)))]
    );
}

/// Tests that a memory-expanding recompute is refused: regenerating the bf16 `convert` would
/// first materialize its f32 `broadcast_in_dim` operand (twice the bytes the eviction saves).
#[test]
fn does_not_recompute_a_memory_expanding_op() {
    let text = r#"graph @main {
  symbols B in [1, inf), S in [1, inf)
  %x = input {index = 0, name = "x"} : f32[B,S]
  %b = broadcast_in_dim(%x) {broadcast_dimensions = [0, 1], shape = dims[B, S, 64]} : f32[B,S,64]
  %c = convert(%b) {dtype = bf16} : bf16[B,S,64]
  %u = convert(%c) {dtype = f32} : f32[B,S,64]
  %n1 = negate(%u) : f32[B,S,64]
  %n2 = negate(%n1) : f32[B,S,64]
  %n3 = negate(%n2) : f32[B,S,64]
  %n4 = negate(%n3) : f32[B,S,64]
  %n5 = negate(%n4) : f32[B,S,64]
  %n6 = negate(%n5) : f32[B,S,64]
  %n7 = negate(%n6) : f32[B,S,64]
  %n8 = negate(%n7) : f32[B,S,64]
  %n9 = negate(%n8) : f32[B,S,64]
  %back = convert(%n9) {dtype = bf16} : bf16[B,S,64]
  %g = multiply(%back, %c) : bf16[B,S,64]
  return %g as "grad"
}"#;
    let (s, found) = search(text, &opts());
    let c = found
        .candidates
        .iter()
        .position(|c| c.value == ValueId::new(2))
        .expect("the convert is a candidate");
    assert_eq!(found.rejections[c], Some(Rejection::MemoryExpanding), "{s}");
    assert_eq!(found.candidates[c].kinds, vec![DecisionKind::Swap]);
    insta::assert_snapshot!(s);
    // Recomputing straight from the input is fine: bf16 from an f32 value that is still live.
    let direct = text.replace("%c = convert(%b)", "%c = convert(%u0)").replace(
        "%b = broadcast_in_dim(%x) {broadcast_dimensions = [0, 1], shape = dims[B, S, 64]} : f32[B,S,64]",
        "%u0 = input {index = 1, name = \"u0\"} : f32[B,S,64]",
    );
    let (_, found) = search(&direct, &opts());
    let c = found
        .candidates
        .iter()
        .position(|c| c.value == ValueId::new(2))
        .expect("candidate");
    assert_eq!(found.rejections[c], None);
    assert_eq!(found.candidates[c].recompute, vec![OpPos::new(2)]);
}

/// Tests that a recompute longer than `max_recompute_ops` is refused.
#[test]
fn does_not_recompute_more_than_max_ops() {
    let (_, found) = search(
        FWD_BWD,
        &CandidateOptions {
            max_recompute_ops: 1,
            ..opts()
        },
    );
    assert_eq!(found.rejections, vec![Some(Rejection::TooManyOps)]);
    assert_eq!(found.candidates[0].kinds, vec![DecisionKind::Swap]);
}

/// Tests that a value read by a recompute is pinned at the reader's regeneration point: `%h1`
/// (saved too, read at the end) splits its gap at the point where `%h2` is regenerated from
/// it, and comes first in candidate order so it is back before `%h2`'s recompute reads it.
#[test]
fn pins_values_that_a_recompute_reads() {
    let text = FWD_BWD
        .replace("%g = multiply(%n10, %h2) : f32[B,S,64]", "%g0 = multiply(%n10, %h2) : f32[B,S,64]\n  %n11 = negate(%g0) : f32[B,S,64]\n  %n12 = negate(%n11) : f32[B,S,64]\n  %n13 = negate(%n12) : f32[B,S,64]\n  %n14 = negate(%n13) : f32[B,S,64]\n  %n15 = negate(%n14) : f32[B,S,64]\n  %n16 = negate(%n15) : f32[B,S,64]\n  %n17 = negate(%n16) : f32[B,S,64]\n  %n18 = negate(%n17) : f32[B,S,64]\n  %n19 = negate(%n18) : f32[B,S,64]\n  %g = multiply(%n19, %h1) : f32[B,S,64]");
    let (s, found) = search(
        &text,
        &CandidateOptions {
            min_gap: 5,
            ..opts()
        },
    );
    let h1: Vec<(usize, usize)> = found
        .candidates
        .iter()
        .filter(|c| c.value == ValueId::new(2))
        .map(|c| (c.evict_after.index(), c.regenerate_before.index()))
        .collect();
    assert_eq!(h1, vec![(1, 13), (13, 23)], "{s}");
    let h2 = found
        .candidates
        .iter()
        .find(|c| c.value == ValueId::new(3))
        .unwrap();
    assert_eq!(
        (h2.regenerate_before, h2.recompute_reads.clone()),
        (Point::new(13), vec![ValueId::new(2)])
    );
    insta::assert_snapshot!(s);
}
