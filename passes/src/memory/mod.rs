//! The memory model: liveness, peak memory (concrete and symbolic) and a lower bound, for a
//! graph with symbolic shapes under a [`Schedule`].
//!
//! # Model
//! * A *schedule* is the non-input ops in execution order (a topological order); program
//!   point `p` is the execution of `schedule[p]`.
//! * Every tensor is resident on the device: parameters, optimizer state and batch inputs for
//!   the whole schedule, outputs from their def point to the last point, intermediates from
//!   their def point to their last use (inclusive). During op `p` both its operands and its
//!   results are resident; a value without users lives at its def point only.
//! * A *donated* input ([`ebb_ir::Graph::aliasing_output`]; JAX's `donate_argnums`) is resident
//!   from point 0 to its last read only: after it, its bytes may hold other values (its
//!   updated output among them).
//! * An op that writes a result into an operand dying at it ([`ebb_ir::op::in_place_writes`]:
//!   loop fusions, `scatter`, `dynamic_update_slice`, and a `case` whose result a branch
//!   forwards from an operand or that takes a dying same-typed operand's buffer) holds that
//!   buffer once: its transient bytes are reduced by the operand's (`info.rs`). Nothing else
//!   is reused in place and nothing aliases.
//! * A value's size is [`TensorType::size_bytes`](ebb_ir::TensorType::size_bytes) (bytes), a
//!   [`DimExpr`] over the graph's symbols.
//! * Regions: a region-carrying op (`while`) is charged, at its own point, the region's own
//!   symbolic peak minus the region's inputs (conservative: the loop's carried values are
//!   counted as the op's operands and results outside, the body's outputs once more inside).
//!   A `case` is charged its largest branch's peak minus the branch inputs, less its results
//!   not written in place (the branch's outputs), and at least 0; a branch's inputs donated to
//!   its outputs (their operands die at the `case`) are freed after their last read there.
//!   Scalar regions (`reduce`, `sort`, `scatter` bodies) are ignored.
//!
//! # Use
//! [`liveness`] builds the [`LiveRange`]s; [`Liveness::resident_bytes`] and
//! [`Liveness::peak`] evaluate them at [`Bindings`] (each distinct size evaluated once, then
//! summed by index); [`Liveness::symbolic_peak`] gives the peak as a pruned symbolic `max`;
//! [`lower_bound`] bounds the peak of every schedule from below.
//!
//! Invariant of the module: for every schedule `s` of `g` and every binding `b` satisfying
//! `g.scope`, `lower_bound(g, b) <= liveness(g, s).peak(b).0 ==
//! liveness(g, s).symbolic_peak(&g.scope).eval(b)`.

mod breakdown;
mod info;
mod liveness;
mod peak;
mod sizes;

pub use breakdown::Breakdown;
pub(crate) use info::{GraphInfo, NONE};
pub use liveness::{Liveness, Transient};
pub(crate) use peak::{argmax, lower_bound_of};
pub use peak::{lower_bound, SymbolicPeak};
pub use sizes::SizeTable;

use ebb_ir::{Bindings, DimExpr, Graph, NodeId, OpKind, Point, SymbolScope, ValueRef};
use petgraph::visit::NodeIndexable;

/// A schedule: the non-input ops of a graph in execution order (a topological order).
pub type Schedule = Vec<NodeId>;

/// The graph's program order without its input nodes.
pub fn program_order(g: &Graph) -> Schedule {
    g.order()
        .iter()
        .copied()
        .filter(|&id| g.contains(id) && g.node(id).kind() != OpKind::Input)
        .collect()
}

/// How long a value stays resident.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueClass {
    /// A graph input (resident at every point). An input that is also an output is an input.
    Input,
    /// A donated graph input: resident from point 0 to its last read (point 0 when unread).
    Donated,
    /// A graph output produced by an op (resident from its def point to the last point).
    Output,
    /// Anything else (resident from its def point to its last use).
    Intermediate,
}

/// The live range of one value under a schedule (see the module docs).
#[derive(Clone, Debug)]
pub struct LiveRange {
    /// The value.
    pub value: ValueRef,
    /// Its size in bytes.
    pub bytes: DimExpr,
    /// Point of the producing op (0 for inputs).
    pub def: Point,
    /// Last point that reads it, inclusive (the last point for inputs and outputs; `def` for
    /// a value without users; the last read for a donated input).
    pub last_use: Point,
    /// Input, output or intermediate.
    pub class: ValueClass,
}

/// Liveness of every value of `g` under schedule `s`; region peaks are pruned under
/// `g.scope`. Linear in the size of the graph.
pub fn liveness(g: &Graph, s: &Schedule) -> Liveness {
    liveness_in_scope(g, s, &g.scope)
}

/// [`liveness`] with region peaks pruned under `scope` (for regions, the enclosing graph's).
pub(crate) fn liveness_in_scope(g: &Graph, s: &Schedule, scope: &SymbolScope) -> Liveness {
    Liveness::from_info(&GraphInfo::build(g, scope), s)
}

/// The memory model's view of one graph, built once ([`GraphInfo`]: value numbering, interned
/// sizes, operands, users and region transients) and shared by every query on that graph:
/// the liveness under any schedule and the lower bound. [`liveness`] and [`lower_bound`]
/// build it afresh on each call; a caller asking several questions of one graph (the `ebb plan`
/// report: program order, the scheduled variant, the lower bound) builds it once here.
///
/// Invariant: `GraphMemory::new(g).liveness(s)` equals `liveness(g, s)` and
/// `GraphMemory::new(g).lower_bound(b)` equals `lower_bound(g, b)`; so do
/// [`GraphMemory::of_plan`]'s for a plan built from `g`.
#[derive(Clone, Debug)]
pub struct GraphMemory {
    info: GraphInfo,
}

impl GraphMemory {
    /// The view of `g`, region peaks pruned under `g.scope` (linear in the size of `g`).
    pub fn new(g: &Graph) -> GraphMemory {
        GraphMemory {
            info: GraphInfo::build(g, &g.scope),
        }
    }

    /// [`GraphMemory::new`] for `g` with `plan`'s region transient memory instead of the one
    /// `new` derives: `plan` (variant 0) was built from `g` by [`crate::plan::build_plan`],
    /// whose `region_transients` are `new`'s expressions, each op's at its point of the plan's
    /// schedule; the plan checker proves them at any binding it checks. That spares
    /// normalizing every region's memory again (most of `new`'s cost on a fused graph).
    /// `None` when the plan's points do not name `g`'s ops one to one.
    pub fn of_plan(g: &Graph, plan: &ebb_plan::format::Plan) -> Option<GraphMemory> {
        let order = g.order();
        let bound = order.iter().map(|id| id.index() + 1).max().unwrap_or(0);
        let mut by_node: Vec<Option<&DimExpr>> = vec![None; bound];
        for t in &plan.region_transients {
            let pos = plan.schedule.get(t.point.index())?;
            let id = order.get(pos.index())?;
            let slot = by_node.get_mut(id.index())?;
            if slot.is_some() {
                return None;
            }
            *slot = Some(&t.bytes);
        }
        let info = GraphInfo::build_with(g, |id| by_node.get(id.index())?.cloned());
        Some(GraphMemory { info })
    }

    /// [`liveness`] of the graph under `s`.
    pub fn liveness(&self, s: &Schedule) -> Liveness {
        Liveness::from_info(&self.info, s)
    }

    /// [`lower_bound`] of the graph at `b`, bytes.
    ///
    /// # Errors
    /// As [`lower_bound`].
    pub fn lower_bound(&self, b: &Bindings) -> Result<i64, ebb_ir::dim::DimError> {
        lower_bound_of(&self.info, &self.info.sizes.eval(b)?)
    }
}

/// A schedule that is not a topological permutation of the graph's non-input ops.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The schedule names a node that is not a non-input op of the graph.
    #[error("schedule position {position}: node {node} is not an op of the graph")]
    UnknownNode {
        /// Position in the schedule.
        position: Point,
        /// Node index.
        node: usize,
    },
    /// An op occurs twice.
    #[error("schedule position {position}: op {node} (`{op}`) is scheduled twice")]
    Duplicate {
        /// Position of the second occurrence.
        position: Point,
        /// Node index.
        node: usize,
        /// Op name.
        op: String,
    },
    /// An op is missing.
    #[error("op {node} (`{op}`) is not scheduled")]
    Missing {
        /// Node index.
        node: usize,
        /// Op name.
        op: String,
    },
    /// An op runs before one of its operands is produced.
    #[error("schedule position {position}: op {node} (`{op}`) runs before its operand from node {operand}")]
    NotTopological {
        /// Position of the op.
        position: Point,
        /// Node index of the op.
        node: usize,
        /// Op name.
        op: String,
        /// Node index of the producer scheduled later (or never).
        operand: usize,
    },
}

/// Checks that `s` is a topological permutation of `g`'s non-input ops.
///
/// # Errors
/// The first problem found, as a [`ScheduleError`].
pub fn validate_schedule(g: &Graph, s: &Schedule) -> Result<(), ScheduleError> {
    let pg = g.petgraph();
    let mut done = vec![false; pg.node_bound()];
    for &id in g.inputs() {
        if let Some(d) = done.get_mut(id.index()) {
            *d = true;
        }
    }
    for (position, &id) in Point::all(s.len()).zip(s) {
        if !g.contains(id) || g.node(id).kind() == OpKind::Input {
            return Err(ScheduleError::UnknownNode {
                position,
                node: id.index(),
            });
        }
        let op = g.node(id).kind().name().to_string();
        if done[id.index()] {
            return Err(ScheduleError::Duplicate {
                position,
                node: id.index(),
                op,
            });
        }
        for src in pg.neighbors_directed(id, petgraph::Direction::Incoming) {
            if !done[src.index()] {
                return Err(ScheduleError::NotTopological {
                    position,
                    node: id.index(),
                    op,
                    operand: src.index(),
                });
            }
        }
        done[id.index()] = true;
    }
    for id in program_order(g) {
        if !done[id.index()] {
            return Err(ScheduleError::Missing {
                node: id.index(),
                op: g.node(id).kind().name().to_string(),
            });
        }
    }
    Ok(())
}

/// Peak bytes of `s` at each of `bindings` (one evaluation of the distinct sizes per binding).
///
/// # Errors
/// The first [`DimError`](ebb_ir::dim::DimError) of an evaluation.
pub fn peaks(
    g: &Graph,
    s: &Schedule,
    bindings: &[Bindings],
) -> Result<Vec<i64>, ebb_ir::dim::DimError> {
    let live = liveness(g, s);
    bindings
        .iter()
        .map(|b| live.peak(b).map(|(v, _)| v))
        .collect()
}
