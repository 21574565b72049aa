//! Fusion: partitions the graph into loop fusion groups and outlines each into a `fusion` op,
//! so that planning (liveness, scheduling, candidates, the checker) sees only the values that
//! leave a group; a group's working set is its tile buffers
//! ([`ebb_ir::op::fusion_tile_bytes`]), charged at its point.
//!
//! * [`legality`]: which producer may join a group, and the named reasons when not;
//! * [`duplicate`]: which elementwise producers are recomputed in every group that reads them
//!   instead of materialized;
//! * [`partition`](mod@partition): the grouping (reverse program order, producers latest first);
//! * [`siblings`]: multi-output fusion of sibling loop groups that read the same tensor;
//! * [`outline`]: the graph transform.
//!
//! Loop fusion of flat-aligned members (elementwise ops, `convert`, `compare`, `select`,
//! `clamp`, `reshape`, `broadcast_in_dim` — expanding ones read an outside operand — and
//! `iota`), and input fusion of such members under a `reduce` root that keeps its leading
//! dimensions (softmax's max and sum, layer norm's mean and variance, the cross-entropy's
//! log-sum-exp), with cheap producers copied into every group that reads them, and sibling
//! loop groups merged into multi-output groups; not yet: transposes, dot epilogues (their
//! memory effect, the epilogue's result never coexisting with the dot's, is the in-place
//! write of [`ebb_ir::op::in_place_writes`]).
//!
//! Invariant: [`FusePass`] leaves a graph that verifies and computes the same outputs; every
//! `fusion` op's region holds at least two ops.

pub mod duplicate;
pub mod legality;
pub mod outline;
pub mod partition;
pub mod siblings;

pub use legality::NotFused;
pub use partition::{partition, FusionGroup, Partition, Rejection};

use crate::manager::{Pass, PassContext, PassError, PassResult};
use crate::pass_id::PassId;
use ebb_ir::op::FusionKind;
use ebb_ir::Graph;
use serde::Serialize;

/// One fusion group as reported (`ebb compile --json`, `--emit groups`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupSummary {
    /// The `fusion` op's region name (`fusion<N>`).
    pub name: String,
    /// Loop fusion, or input fusion for a group under a `reduce` root (serialized as `loop`,
    /// `input`).
    pub kind: FusionKind,
    /// Op kinds of the members, in program order.
    pub ops: Vec<&'static str>,
    /// Elements of the iteration space.
    pub space: String,
    /// Number of results (values read outside the group or graph outputs).
    pub results: usize,
}

/// A producer-consumer pair left apart, as reported.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RejectionSummary {
    /// Producer op kind and location.
    pub producer: String,
    /// Consumer op kind and location.
    pub consumer: String,
    /// Why.
    #[serde(flatten)]
    pub reason: NotFused,
}

/// What [`FusePass`] did, left in the [`PassContext`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FusionReport {
    /// The groups, in program order.
    pub groups: Vec<GroupSummary>,
    /// Ops moved into groups.
    pub fused_ops: usize,
    /// Pairs not fused, with the reason.
    pub rejected: Vec<RejectionSummary>,
}

impl FusionReport {
    /// One line per group, then one per rejected pair (for `--emit groups` and snapshots).
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for g in &self.groups {
            s += &format!(
                "{} ({}, {} ops, {} elements, {} results): {}\n",
                g.name,
                g.kind,
                g.ops.len(),
                g.space,
                g.results,
                g.ops.join(" ")
            );
        }
        for r in &self.rejected {
            s += &format!(
                "not fused: {} -> {}: {}\n",
                r.producer, r.consumer, r.reason
            );
        }
        s
    }
}

/// The fusion pass (see the module docs). Reports one change per op moved into a group.
#[derive(Clone, Copy, Debug, Default)]
pub struct FusePass;

fn describe(g: &Graph, n: ebb_ir::NodeId) -> String {
    let node = g.node(n);
    match &node.loc {
        Some(l) => format!("{} ({l})", node.kind().name()),
        None => format!("{} (%{})", node.kind().name(), n.index()),
    }
}

impl Pass for FusePass {
    fn name(&self) -> &'static str {
        PassId::Fuse.name()
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<PassResult, PassError> {
        let mut p = partition(g);
        let scope = g.scope.clone();
        p.groups = siblings::merge_siblings(g, std::mem::take(&mut p.groups), &scope);
        let rejected = p
            .rejected
            .iter()
            .map(|r| RejectionSummary {
                producer: describe(g, r.producer),
                consumer: describe(g, r.consumer),
                reason: r.reason.clone(),
            })
            .collect();
        let mut report = FusionReport {
            rejected,
            ..FusionReport::default()
        };
        for (i, group) in p.groups.iter().enumerate() {
            let name = format!("fusion{i}");
            let ops = group
                .members
                .iter()
                .map(|&m| g.node(m).kind().name())
                .collect();
            let id = outline::outline(g, group, &name);
            report.fused_ops += group.members.len();
            let kind = match g.node(id).op {
                ebb_ir::Op::Fusion(k) => k,
                _ => FusionKind::Loop,
            };
            report.groups.push(GroupSummary {
                name,
                kind,
                ops,
                space: group.space.to_string(),
                results: g.node(id).outputs.len(),
            });
        }
        fuse_regions(g, &mut report, &mut [0, 0], &scope);
        // The groups changed the values the `case` ops read: their branch donations again.
        crate::donate::donate_into_branches(g);
        let changes = report.fused_ops;
        cx.insert(report);
        Ok(PassResult::changes(changes))
    }
}

/// Fuses inside the regions of every `case` and `while` of `g` (nested ones included), as at
/// the top level: a branch or a loop body runs as a nested program, and the planner charges its
/// peak at the op's point, so its elementwise chains (an optimizer update skipped on a
/// non-finite gradient, a scan step's recurrence) are grouped too and run as generated
/// kernels. Groups are named `case<n>_fusion<i>` (`n` counts the branches fused,
/// `counts[0]`), `while<n>_fusion<i>` in a loop body and `while<n>_cond_fusion<i>` in its
/// condition (`n` counts the loops, `counts[1]`); rejected pairs inside regions are not
/// reported. Sizes are proved under `scope`, the top-level graph's.
fn fuse_regions(
    g: &mut Graph,
    report: &mut FusionReport,
    counts: &mut [usize; 2],
    scope: &ebb_ir::SymbolScope,
) {
    let carriers: Vec<(ebb_ir::NodeId, usize)> = g
        .order()
        .iter()
        .filter_map(|&id| match g.node(id).op {
            ebb_ir::Op::Case => Some((id, 0)),
            ebb_ir::Op::While => Some((id, 1)),
            _ => None,
        })
        .collect();
    for (id, kind) in carriers {
        let op = counts[1];
        if kind == 1 {
            counts[1] += 1;
        }
        let mut region = 0;
        let _ = crate::canon::for_each_region(g, id, |r| -> Result<usize, ()> {
            let prefix = if kind == 0 {
                counts[0] += 1;
                format!("case{}", counts[0] - 1)
            } else if region == 0 {
                format!("while{op}_cond")
            } else {
                format!("while{op}")
            };
            region += 1;
            let mut p = partition(r);
            p.groups = siblings::merge_siblings(r, std::mem::take(&mut p.groups), scope);
            for (i, group) in p.groups.iter().enumerate() {
                let name = format!("{prefix}_fusion{i}");
                let ops = group
                    .members
                    .iter()
                    .map(|&m| r.node(m).kind().name())
                    .collect();
                let fused = outline::outline(r, group, &name);
                report.fused_ops += group.members.len();
                report.groups.push(GroupSummary {
                    name,
                    kind: match r.node(fused).op {
                        ebb_ir::Op::Fusion(k) => k,
                        _ => FusionKind::Loop,
                    },
                    ops,
                    space: group.space.to_string(),
                    results: r.node(fused).outputs.len(),
                });
            }
            fuse_regions(r, report, counts, scope);
            Ok(0)
        });
    }
}
