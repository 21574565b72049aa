//! [`ScheduleIndex`]: per-op and per-value data of a graph under a schedule, precomputed once in
//! `Vec`s indexed by position, point or value id, so that candidate search and plan building
//! are linear in the size of the graph.
//!
//! The index follows the residency rules of [`ebb_plan::format`] (module docs "Live ranges"), the
//! same as `crate::memory`: points are the non-input ops; inputs are resident at every point
//! (donated inputs from point 0 to their last read),
//! outputs from their definition to the last point, intermediates from their definition to
//! their last read (only at their definition when unread). Values are numbered as in
//! [`ebb_plan::format::Plan::values`]: sorted by (program-order position, result index).

use super::RematError;
use ebb_ir::{Graph, NodeId, OpKind, ValueRef};
use ebb_plan::format::{OpPos, PlanValue, Point, ValueClass, ValueId};
use petgraph::visit::NodeIndexable;

/// Positions, points, value ids, live ranges and use points of a scheduled graph.
#[derive(Clone, Debug)]
pub struct ScheduleIndex {
    /// `NodeId::index()` → program-order position (`usize::MAX` for ids not in the order).
    pos_of_id: Vec<usize>,
    /// Program-order position → point.
    point_of_pos: Vec<usize>,
    /// Point → node.
    node_at: Vec<NodeId>,
    /// Number of points (at least 1).
    points: usize,
    /// Program-order position → first value id of that op's results.
    value_base: Vec<usize>,
    /// The value table (sizes in bytes, live ranges, classes).
    values: Vec<PlanValue>,
    /// `uses[use_start[v]..use_start[v + 1]]`: the distinct points that read value `v`, sorted.
    use_start: Vec<usize>,
    uses: Vec<Point>,
}

impl ScheduleIndex {
    /// Indexes `g` under `schedule` (the non-input ops in execution order, as
    /// `crate::memory::Schedule`).
    ///
    /// # Errors
    /// [`RematError::Schedule`] when the schedule is not a topological permutation of the
    /// graph's non-input ops.
    pub fn new(g: &Graph, schedule: &[NodeId]) -> Result<ScheduleIndex, RematError> {
        let order = g.order();
        let n = order.len();
        let mut pos_of_id = vec![usize::MAX; g.petgraph().node_bound()];
        for (i, id) in order.iter().enumerate() {
            pos_of_id[id.index()] = i;
        }
        let bad = |point: usize, problem: String| RematError::Schedule {
            point: Point::new(point),
            problem,
        };
        let is_input: Vec<bool> = order
            .iter()
            .map(|&id| g.node(id).kind() == OpKind::Input)
            .collect();
        let mut point_of_pos = vec![usize::MAX; n];
        for (p, id) in schedule.iter().enumerate() {
            let pos = pos_of_id.get(id.index()).copied().unwrap_or(usize::MAX);
            if pos == usize::MAX || is_input[pos] || point_of_pos[pos] != usize::MAX {
                return Err(bad(
                    p,
                    format!(
                        "node {} is not an op of the graph or is scheduled twice",
                        id.index()
                    ),
                ));
            }
            point_of_pos[pos] = p;
        }
        if let Some(pos) = (0..n).find(|&pos| !is_input[pos] && point_of_pos[pos] == usize::MAX) {
            return Err(bad(
                schedule.len(),
                format!("op {} is not scheduled", order[pos].index()),
            ));
        }
        let points = schedule.len().max(1);
        let last = points - 1;
        let mut value_base = Vec::with_capacity(n + 1);
        let mut values = Vec::new();
        for (pos, &id) in order.iter().enumerate() {
            value_base.push(values.len());
            let (class, def, last_use) = if is_input[pos] && g.aliasing_output(id).is_some() {
                // Donated: resident until its last read, set below (point 0 when unread).
                (ValueClass::Donated, Point::new(0), Point::new(0))
            } else if is_input[pos] {
                (ValueClass::Input, Point::new(0), Point::new(last))
            } else {
                let p = Point::new(point_of_pos[pos]);
                (ValueClass::Intermediate, p, p)
            };
            for (k, t) in g.node(id).outputs.iter().enumerate() {
                let bytes = t.size_bytes();
                values.push(PlanValue {
                    node: OpPos::new(pos),
                    output: k as u32,
                    bytes,
                    def,
                    last_use,
                    class,
                });
            }
        }
        value_base.push(values.len());
        // Use points, collected then bucketed per value (CSR), deduplicated.
        let mut reads: Vec<(usize, usize)> = Vec::new();
        for (p, &id) in schedule.iter().enumerate() {
            for v in g.operands(id) {
                let pos = pos_of_id[v.node.index()];
                if !is_input[pos] && point_of_pos[pos] >= p {
                    return Err(bad(
                        p,
                        format!("op {} reads {} before it is defined", id.index(), v),
                    ));
                }
                reads.push((value_base[pos] + v.output as usize, p));
            }
        }
        reads.sort_unstable();
        reads.dedup();
        let mut use_start = vec![0; values.len() + 1];
        for &(v, _) in &reads {
            use_start[v + 1] += 1;
        }
        for i in 0..values.len() {
            use_start[i + 1] += use_start[i];
        }
        let uses: Vec<Point> = reads.iter().map(|&(_, p)| Point::new(p)).collect();
        for (v, val) in values.iter_mut().enumerate() {
            if matches!(val.class, ValueClass::Intermediate | ValueClass::Donated) {
                if let Some(&u) = uses[use_start[v]..use_start[v + 1]].last() {
                    val.last_use = u;
                }
            }
        }
        for o in g.outputs() {
            let v = value_base[pos_of_id[o.node.index()]] + o.output as usize;
            if values[v].class == ValueClass::Intermediate {
                values[v].class = ValueClass::Output;
                values[v].last_use = Point::new(last);
            }
        }
        let node_at = schedule.to_vec();
        Ok(ScheduleIndex {
            pos_of_id,
            point_of_pos,
            node_at,
            points,
            value_base,
            values,
            use_start,
            uses,
        })
    }

    /// Number of points (ops in the schedule, inputs included).
    pub fn points(&self) -> usize {
        self.points
    }

    /// Program-order position of `node`.
    pub fn position(&self, node: NodeId) -> OpPos {
        OpPos::new(self.pos_of_id[node.index()])
    }

    /// Point at which `node` runs (`Point::new(usize::MAX)` for an input).
    pub fn point(&self, node: NodeId) -> Point {
        Point::new(self.point_of_pos[self.position(node).index()])
    }

    /// The node that runs at point `p`.
    pub fn node_at(&self, p: Point) -> NodeId {
        self.node_at[p.index()]
    }

    /// The schedule as program-order positions (`Plan::schedule`).
    pub fn schedule_positions(&self) -> Vec<OpPos> {
        self.node_at.iter().map(|id| self.position(*id)).collect()
    }

    /// The value id of `v`.
    pub fn value_id(&self, v: ValueRef) -> ValueId {
        ValueId::new(self.value_base[self.position(v.node).index()] + v.output as usize)
    }

    /// The value table (see the module docs for the numbering).
    pub fn values(&self) -> &[PlanValue] {
        &self.values
    }

    /// The distinct points that read value `v`, sorted ascending.
    pub fn uses(&self, v: ValueId) -> &[Point] {
        &self.uses[self.use_start[v.index()]..self.use_start[v.index() + 1]]
    }

    /// The value ids of all results of `node`, ascending.
    pub fn results(&self, node: NodeId) -> impl Iterator<Item = ValueId> + Clone {
        let pos = self.position(node).index();
        ValueId::new(self.value_base[pos]).upto(ValueId::new(self.value_base[pos + 1]))
    }
}
