//! The modelled step times of one finalize, read through tables prepared once per plan variant:
//! the same numbers as [`ebb_ir::cost::StepCosts`] (the same [`PointTimes`], same operands, same
//! order of summation), without its per-finalize map from program positions to points.
//!
//! - Each point's roofline time depends only on its FLOPs and bytes expressions and its compute
//!   kind, and a plan has few distinct triples (GPT-2 medium: a few hundred over 10 458
//!   points): each is timed once per finalize and the points read it by index.
//! - A candidate's recompute time sums the times of the points of the ops it reruns; their
//!   points are listed once per variant ([`CostTables::recompute_points`]).

use ebb_ir::cost::{default_kind, PointTimes};
use ebb_ir::device::{ComputeKind, DeviceProfile};
use ebb_ir::plan::Plan;
use std::collections::HashMap;

/// A point whose op has no modelled time (not scheduled, or beyond the per-point costs): 0 µs.
const NO_POINT: u32 = u32::MAX;

/// The shape-independent part of the step times of one plan variant (see the module docs).
#[derive(Clone, Debug, Default)]
pub(super) struct CostTables {
    /// Whether the plan has per-point FLOPs (else recomputes are priced by their FLOPs alone).
    per_point: bool,
    /// Distinct `(FLOPs expression, bytes expression or none, kind)` of the points, the
    /// expressions as indices into the prepared expressions.
    terms: Vec<(u32, Option<u32>, ComputeKind)>,
    /// Per point (of the per-point FLOPs), its index into `terms`.
    point_term: Vec<u32>,
    /// CSR per candidate `c`: the points of its `Candidate::recompute` ops in order
    /// ([`NO_POINT`] for an op without a modelled time) are
    /// `recompute_points[recompute_first[c]..recompute_first[c + 1]]`.
    recompute_first: Vec<u32>,
    recompute_points: Vec<u32>,
}

impl CostTables {
    /// The tables of `plan`; `point_flops` and `point_bytes` are its per-point expressions as
    /// interned indices (empty when the plan has none).
    pub(super) fn new(plan: &Plan, point_flops: &[u32], point_bytes: &[u32]) -> CostTables {
        let per_point = plan.point_flops.is_some();
        let default_kind = default_kind(plan);
        let kinds = plan.point_kinds.as_deref().unwrap_or_default();
        let mut index: HashMap<(u32, Option<u32>, ComputeKind), u32> = HashMap::new();
        let mut terms = Vec::new();
        let point_term = (0..point_flops.len())
            .map(|p| {
                let kind = kinds.get(p).copied().unwrap_or(default_kind);
                let key = (point_flops[p], point_bytes.get(p).copied(), kind);
                *index.entry(key).or_insert_with(|| {
                    terms.push(key);
                    (terms.len() - 1) as u32
                })
            })
            .collect();
        // The point of each program-order position (the last one scheduled, as `StepCosts`).
        let mut point_of = vec![NO_POINT; plan.ops];
        for (p, pos) in plan.schedule.iter().enumerate() {
            if let Some(slot) = point_of.get_mut(pos.index()) {
                *slot = p as u32;
            }
        }
        let timed = point_flops.len();
        let mut recompute_first = Vec::with_capacity(plan.candidates.len() + 1);
        let mut recompute_points = Vec::new();
        recompute_first.push(0);
        for c in &plan.candidates {
            recompute_points.extend(c.recompute.iter().map(|pos| {
                let p = point_of.get(pos.index()).copied().unwrap_or(NO_POINT);
                if (p as usize) < timed {
                    p
                } else {
                    NO_POINT
                }
            }));
            recompute_first.push(recompute_points.len() as u32);
        }
        CostTables {
            per_point,
            terms,
            point_term,
            recompute_first,
            recompute_points,
        }
    }

    /// The step times at one binding on `device`: `at` reads an interned expression's value.
    pub(super) fn times(&self, device: &DeviceProfile, at: impl Fn(u32) -> i64) -> PointTimes {
        let mut point_us = Vec::new();
        if self.per_point {
            let term_us: Vec<f64> = self
                .terms
                .iter()
                .map(|&(f, bytes, kind)| {
                    let bytes = bytes.map_or(0, &at);
                    device.op_us(at(f) as f64, bytes as f64, kind)
                })
                .collect();
            point_us = self
                .point_term
                .iter()
                .map(|&t| term_us[t as usize])
                .collect();
        }
        PointTimes::new(point_us, device)
    }

    /// Modelled time of candidate `c`'s recompute, µs (as `StepCosts::recompute_us`): the sum
    /// of the times of the points it reruns, or `flops` at the matrix rate when the plan has no
    /// per-point costs.
    pub(super) fn recompute_us(&self, t: &PointTimes, c: usize, flops: i64) -> f64 {
        if t.point_us.is_empty() {
            return t.fallback_us(flops);
        }
        let (lo, hi) = (
            self.recompute_first[c] as usize,
            self.recompute_first[c + 1] as usize,
        );
        self.recompute_points[lo..hi]
            .iter()
            .map(|&p| t.point_us.get(p as usize).copied().unwrap_or(0.0))
            .sum()
    }
}
