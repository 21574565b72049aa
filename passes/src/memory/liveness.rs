//! Liveness analysis: the live range of every value of a graph under a [`Schedule`].
//!
//! Program point `p` is the execution of `schedule[p]`. A value is resident from its def point
//! to its last use, both inclusive, so during op `p` both its operands and its results are
//! resident. Inputs (parameters, optimizer state, batch) are resident at every point, outputs
//! from their def point to the last point; a value without users lives at its def point only.
//! A donated input is resident from point 0 to its last read.
//! Region-carrying ops add their transient inner memory at their own point
//! ([`Transient`]; see `info.rs` for the conservative rule).
//!
//! Invariant: ranges are listed inputs first (argument order), then the results of the ops in
//! schedule order; every range has `def <= last_use < points`. Building is linear in the size
//! of the graph (one pass over the schedule and the users of each value).

use super::info::{Csr, GraphInfo, NONE};
use super::sizes::SizeTable;
use super::{LiveRange, Schedule, ValueClass};
use ebb_ir::{DimExpr, NodeId, Point, ValueRef};

/// Transient memory of a region-carrying op (a `while` body's intermediates), charged at the
/// op's program point only.
#[derive(Clone, Debug)]
pub struct Transient {
    /// The region-carrying op.
    pub node: NodeId,
    /// Its program point.
    pub point: Point,
    /// Bytes: the region's peak minus its inputs (see the module docs of `memory`).
    pub bytes: DimExpr,
}

/// Live ranges of all values under one schedule, with a per-point index (see the module docs).
#[derive(Clone, Debug)]
pub struct Liveness {
    /// One range per value: inputs first, then op results in schedule order.
    pub ranges: Vec<LiveRange>,
    /// Number of program points: the schedule's length, at least 1 (a graph without ops has
    /// one empty point, at which its inputs are resident).
    pub points: usize,
    /// Transient region memory, in schedule order.
    pub transients: Vec<Transient>,
    /// Range -> size id in `sizes`.
    pub(crate) size_of: Vec<u32>,
    /// Transient -> size id.
    pub(crate) transient_size: Vec<u32>,
    /// Point -> ranges defined there.
    pub(crate) starts: Csr,
    /// Point -> ranges whose last use is there.
    pub(crate) ends: Csr,
    /// Value id (of the graph view) -> range index (`NONE` for values of ops not scheduled).
    pub(crate) range_of_value: Vec<u32>,
    /// Node index -> first value id, to find a [`ValueRef`]'s range.
    pub(crate) value_base: Vec<u32>,
    /// The distinct sizes, evaluated once per binding.
    pub(crate) sizes: SizeTable,
}

impl Liveness {
    /// Liveness of the graph viewed by `info` under `s`. Nodes of `s` that are not ops of the
    /// graph occupy a point but define nothing; ops missing from `s` get no range and their
    /// uses are ignored. `s` is assumed topological (see [`super::validate_schedule`]); a use
    /// before the def is clamped to the def point.
    pub(crate) fn from_info(info: &GraphInfo, s: &Schedule) -> Liveness {
        let points = s.len().max(1);
        let last = points - 1;
        let mut point_of_op = vec![NONE; info.ops.len()];
        for (p, id) in s.iter().enumerate() {
            if let Some(&op) = info.op_of_node.get(id.index()) {
                if op != NONE && point_of_op[op as usize] == NONE {
                    point_of_op[op as usize] = p as u32;
                }
            }
        }
        let mut ranges = Vec::with_capacity(info.num_values());
        let mut size_of = Vec::with_capacity(info.num_values());
        let mut range_of_value = vec![NONE; info.num_values()];
        let mut push = |v: u32, def: Point, last_use: Point, ranges: &mut Vec<LiveRange>| {
            range_of_value[v as usize] = ranges.len() as u32;
            size_of.push(info.value_size[v as usize]);
            ranges.push(LiveRange {
                value: info.values[v as usize],
                bytes: info.sizes.get(info.value_size[v as usize]).clone(),
                def,
                last_use,
                class: info.class[v as usize].clone(),
            });
        };
        // Point of the last scheduled reader of value `v`.
        let last_read = |v: u32| {
            info.users
                .row(v as usize)
                .iter()
                .map(|&u| point_of_op[u as usize])
                .filter(|&q| q != NONE)
                .max()
                .map(|q| q as usize)
        };
        let first_op_value = info
            .op_values
            .first()
            .copied()
            .unwrap_or(info.num_values() as u32);
        for v in 0..first_op_value {
            let last_use = match info.class[v as usize] {
                ValueClass::Donated => last_read(v).unwrap_or(0),
                _ => last,
            };
            push(v, Point::new(0), Point::new(last_use), &mut ranges);
        }
        let mut transients = Vec::new();
        let mut transient_size = Vec::new();
        for (p, id) in s.iter().enumerate() {
            let Some(&op) = info.op_of_node.get(id.index()) else {
                continue;
            };
            if op == NONE || point_of_op[op as usize] != p as u32 {
                continue;
            }
            for v in info.results(op as usize) {
                let last_use = match info.class[v as usize] {
                    ValueClass::Intermediate => last_read(v).map_or(p, |q| q.max(p)),
                    _ => last,
                };
                push(v, Point::new(p), Point::new(last_use), &mut ranges);
            }
            let t = info.transient[op as usize];
            if t != NONE {
                transients.push(Transient {
                    node: *id,
                    point: Point::new(p),
                    bytes: info.sizes.get(t).clone(),
                });
                transient_size.push(t);
            }
        }
        let starts: Vec<(u32, u32)> = ranges
            .iter()
            .enumerate()
            .map(|(i, r)| (r.def.index() as u32, i as u32))
            .collect();
        // In range order: `Csr::from_pairs` keeps each row's items in the order given, so each
        // point lists its ranges ascending.
        let ends: Vec<(u32, u32)> = ranges
            .iter()
            .enumerate()
            .map(|(i, r)| (r.last_use.index() as u32, i as u32))
            .collect();
        Liveness {
            starts: Csr::from_pairs(points, &starts),
            ends: Csr::from_pairs(points, &ends),
            ranges,
            points,
            transients,
            size_of,
            transient_size,
            range_of_value,
            value_base: info.value_base.clone(),
            sizes: info.sizes.clone(),
        }
    }

    /// The live range of `v`, if `v` is a value of the graph whose producer was scheduled.
    pub fn range_of(&self, v: ValueRef) -> Option<&LiveRange> {
        let base = *self.value_base.get(v.node.index())?;
        if base == NONE {
            return None;
        }
        let r = *self
            .range_of_value
            .get(base.checked_add(v.output)? as usize)?;
        self.ranges.get(r as usize).filter(|x| x.value == v)
    }

    /// Indices (into `ranges`) of the values defined at point `p` (for `p == 0` this includes
    /// the inputs). Empty when `p` is out of range.
    pub fn defined_at(&self, p: Point) -> &[u32] {
        if p.index() < self.points {
            self.starts.row(p.index())
        } else {
            &[]
        }
    }

    /// Indices (into `ranges`) of the values whose last use is point `p` (they are freed after
    /// it). Empty when `p` is out of range.
    pub fn freed_after(&self, p: Point) -> &[u32] {
        if p.index() < self.points {
            self.ends.row(p.index())
        } else {
            &[]
        }
    }

    /// Indices (into `ranges`) of the values resident at point `p`, ascending. Linear in the
    /// number of ranges; use [`Liveness::resident_bytes`] for sizes at every point.
    pub fn live_at(&self, p: Point) -> Vec<usize> {
        (0..self.ranges.len())
            .filter(|&i| self.ranges[i].def <= p && p <= self.ranges[i].last_use)
            .collect()
    }
}
