//! The roofline time model of a plan on a device: what finalize and the exact
//! ILP (`crate::exact`) price recompute and swap decisions with, so both optimize the
//! same objective.
//!
//! * An op (or fused group) at point `p` takes `max(FLOPs / compute, bytes / memory
//!   bandwidth)` ([`DeviceProfile::op_us`]), with the FLOPs of [`Plan::point_flops`], the bytes
//!   read and written of [`Plan::point_bytes`] and the compute unit of [`Plan::point_kinds`]
//!   (Williams et al., "Roofline", CACM 2009). The step takes the sum over the points (one
//!   stream, no overlap between ops).
//! * A recompute costs the modelled time of the ops it reruns: the same ops at the same shapes
//!   (Checkmate, Jain et al., MLSys 2020, §4.1, prices a recompute by its ops' profiled
//!   costs; DTR, Kirisame et al., ICLR 2021, by their measured compute time).
//! * A swap moves the value over the host link twice, offload (device to host) and reload
//!   (host to device), each on its own copy stream and direction of the link (PCIe is full
//!   duplex), taking `T = bytes / link` each, overlapped with compute (the overlap model of
//!   MONeT, Shah et al., ICLR 2021, §3, and of Capuchin's swap cost). Alone, a swap exposes
//!   `max(0, T − W)`, `W` = the modelled time of the points it is off the device
//!   ([`PointTimes::swap_us`]).
//! * Swaps share the link: the exposed transfer time of a set of swaps is
//!   `max(Σ max(0, T_s − W_s), Σ T_s − step time)` ([`exposed_transfer_us`]): each direction
//!   of the link moves at most the step's modelled time worth of transfers without stalling
//!   compute. This is a lower bound of a copy-stream schedule (the fluid relaxation over each
//!   swap's own window and over the whole step), linear enough for the exact ILP to use.
//!
//! Plans that predate [`Plan::point_bytes`] are priced by FLOPs alone; plans without
//! [`Plan::point_flops`] price a recompute by its candidate's FLOPs at the matrix rate.

use crate::csr::Csr;
use crate::device::{ComputeKind, DeviceProfile};
use crate::format::{Candidate, Plan};
use crate::index::{CandidateIx, ExprIx, ExprValues, IndexVec, PointIx};
use ebb_ir::CandidateId;
use ebb_ir::{DimExpr, Point};
use std::collections::HashMap;

/// The modelled time of each point of one plan at one binding on one device, and what is
/// priced from it alone (the step, a window, a transfer, a swap), as [`CostTables::times`]
/// gives it.
#[derive(Clone, Debug)]
pub struct PointTimes {
    /// Modelled time of the op at each point, µs (empty when the plan has no per-point FLOPs).
    pub point_us: Vec<f64>,
    /// `prefix[p]` = time of points `0..p`, µs.
    prefix: Vec<f64>,
    /// The device's link bandwidth, bytes per µs.
    link_bytes_per_us: f64,
    /// The device's matrix FLOPs per µs (the fallback rate).
    flops_per_us: f64,
}

impl PointTimes {
    /// The times `point_us` (µs per point) on `device` (its link and matrix rates).
    pub fn new(point_us: Vec<f64>, device: &DeviceProfile) -> PointTimes {
        // Written into a vector sized once, so that the running sum stays in a register (a
        // push per point spilled it to the stack around the push's growth check: twice the
        // time).
        let mut prefix = vec![0.0; point_us.len() + 1];
        let mut sum = 0.0;
        for (slot, t) in prefix[1..].iter_mut().zip(&point_us) {
            sum += t;
            *slot = sum;
        }
        PointTimes {
            point_us,
            prefix,
            link_bytes_per_us: device.link_bandwidth / 1e6,
            flops_per_us: device.matrix_flops / 1e6,
        }
    }

    /// Modelled time of the whole step, µs (0 when the plan has no per-point FLOPs).
    pub fn step_us(&self) -> f64 {
        self.prefix[self.prefix.len() - 1]
    }

    /// Modelled time of points `[l, r]`, µs (0 when `r` is `None` or before `l`; `r` is
    /// clamped to the last point).
    pub fn window_us(&self, l: Point, r: Option<Point>) -> f64 {
        let Some(r) = r.filter(|&r| self.prefix.len() > 1 && l <= r) else {
            return 0.0;
        };
        let r = (r.index() + 1).min(self.prefix.len() - 1);
        self.prefix[r] - self.prefix[l.index().min(r)]
    }

    /// Modelled time of a recompute of `flops` FLOPs at the matrix rate, µs: the price of a
    /// recompute when the plan has no per-point costs.
    pub fn fallback_us(&self, flops: i64) -> f64 {
        flops as f64 / self.flops_per_us
    }

    /// One transfer of `bytes` in one direction of the link, µs.
    pub fn transfer_us(&self, bytes: i64) -> f64 {
        bytes as f64 / self.link_bytes_per_us
    }

    /// Exposed time of swapping `c` alone (`bytes` each way), µs: one transfer less the
    /// modelled compute between the eviction and the prefetch (points `evict_after + 1 ..=
    /// prefetch_at − 1`), never negative. See [`exposed_transfer_us`] for several swaps.
    pub fn swap_us(&self, c: &Candidate, bytes: i64) -> f64 {
        self.swap_over_us(c.evict_after.next(), c.prefetch_at.prev(), bytes)
    }

    /// Exposed time of a swap of `bytes` each way whose transfers may overlap the compute of
    /// points `[l, r]` ([`PointTimes::window_us`]), µs: as [`PointTimes::swap_us`], for a
    /// caller that holds the window.
    pub fn swap_over_us(&self, l: Point, r: Option<Point>, bytes: i64) -> f64 {
        (self.transfer_us(bytes) - self.window_us(l, r)).max(0.0)
    }
}

/// Modelled time per point of one plan at one binding on one device ([`PointTimes`], which it
/// dereferences to), with each candidate's recompute time: [`CostTables`] built for this one
/// binding, every point's expressions evaluated once.
#[derive(Clone, Debug)]
pub struct StepCosts {
    /// The per-point times.
    times: PointTimes,
    /// The plan's tables (per-point terms, each candidate's recompute points).
    tables: CostTables,
}

impl std::ops::Deref for StepCosts {
    type Target = PointTimes;

    fn deref(&self) -> &PointTimes {
        &self.times
    }
}

impl StepCosts {
    /// Evaluates the per-point costs of `plan` on `device` with `eval` (the caller's memoized
    /// evaluator at its bindings): `point_flops[p]`, then `point_bytes[p]` where the plan has
    /// one, for every point `p` with FLOPs.
    ///
    /// # Errors
    /// The first error of `eval`.
    pub fn new<'p, E>(
        plan: &'p Plan,
        device: &DeviceProfile,
        mut eval: impl FnMut(&'p DimExpr) -> Result<i64, E>,
    ) -> Result<StepCosts, E> {
        let flops = plan.point_flops.as_deref().unwrap_or_default();
        let bytes = plan.point_bytes.as_deref().unwrap_or_default();
        // Every point's expressions by index: FLOPs at `p`, bytes at `flops.len() + p`.
        let n = flops.len();
        let mut values = Vec::with_capacity(2 * n);
        let mut byte_values = Vec::with_capacity(n);
        for (p, f) in flops.iter().enumerate() {
            values.push(eval(f)?);
            if let Some(b) = bytes.get(p) {
                byte_values.push(eval(b)?);
            }
        }
        let flop_index: Vec<ExprIx> = (0..n).map(ExprIx::new).collect();
        let byte_index: Vec<ExprIx> = (n..n + byte_values.len()).map(ExprIx::new).collect();
        values.extend(byte_values);
        let tables = CostTables::new(plan, &flop_index, &byte_index);
        let times = tables.times(device, &IndexVec::from_raw(values));
        Ok(StepCosts { times, tables })
    }

    /// Modelled time of candidate `c`'s recompute, µs ([`CostTables::recompute_us`]): `flops`
    /// = its evaluated `recompute_flops`, the price when the plan has no per-point costs.
    pub fn recompute_us(&self, c: CandidateId, flops: i64) -> f64 {
        self.tables.recompute_us(&self.times, c, flops)
    }
}

/// The compute unit of a point the plan gives no kind for: vector when the plan has per-point
/// bytes (memory-bound ops are then priced by their bytes), else matrix.
pub fn default_kind(plan: &Plan) -> ComputeKind {
    if plan.point_bytes.is_some() {
        ComputeKind::Vector
    } else {
        ComputeKind::Matrix
    }
}

/// Exposed transfer time of a set of swaps, µs: `max(alone, transfers − step_us)` with
/// `alone` = the sum of their [`PointTimes::swap_us`] and `transfers` = the sum of their
/// [`PointTimes::transfer_us`] (see the module docs).
pub fn exposed_transfer_us(alone: f64, transfers: f64, step_us: f64) -> f64 {
    alone.max(transfers - step_us).max(0.0)
}

/// A point whose op has no modelled time (not scheduled, or beyond the per-point costs): 0 µs.
const NO_POINT: PointIx = PointIx::from_raw(u32::MAX);

/// The shape-independent part of the step times of one plan variant, the one implementation of
/// the model's per-point and recompute pricing (used by finalize, prepared once per variant,
/// and by [`StepCosts`] for one binding):
///
/// - each point's roofline time depends only on its FLOPs and bytes expressions and its compute
///   kind, and a plan has few distinct triples (GPT-2 medium: a few hundred over 10 458
///   points): each is timed once per binding and the points read it by index;
/// - a candidate's recompute time sums the times of the points of the ops it reruns; their
///   points are listed once per variant.
#[derive(Clone, Debug, Default)]
pub struct CostTables {
    /// Whether the plan has per-point FLOPs (else recomputes are priced by their FLOPs alone).
    per_point: bool,
    /// Distinct `(FLOPs expression, bytes expression or none, kind)` of the points.
    terms: Vec<(ExprIx, Option<ExprIx>, ComputeKind)>,
    /// Per point (of the per-point FLOPs), its index into `terms`.
    point_term: Vec<u32>,
    /// Per candidate, the points of its `Candidate::recompute` ops in order ([`NO_POINT`] for
    /// an op without a modelled time).
    recompute_points: Csr<CandidateIx, PointIx>,
}

impl CostTables {
    /// The tables of `plan`; `point_flops` and `point_bytes` are its per-point expressions as
    /// interned indices (empty when the plan has none).
    pub(crate) fn new(plan: &Plan, point_flops: &[ExprIx], point_bytes: &[ExprIx]) -> CostTables {
        let per_point = plan.point_flops.is_some();
        let default_kind = default_kind(plan);
        let kinds = plan.point_kinds.as_deref().unwrap_or_default();
        let mut index: HashMap<(ExprIx, Option<ExprIx>, ComputeKind), u32> = HashMap::new();
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
        // The point of each program-order position (the last one scheduled).
        let mut point_of = vec![NO_POINT; plan.ops];
        for (p, pos) in plan.schedule.iter().enumerate() {
            if let Some(slot) = point_of.get_mut(pos.index()) {
                *slot = PointIx::new(p);
            }
        }
        let timed = point_flops.len();
        let recompute_ops = plan.candidates.iter().map(|c| c.recompute.len()).sum();
        let mut recompute_points = Csr::with_capacity(plan.candidates.len(), recompute_ops);
        for c in &plan.candidates {
            for pos in &c.recompute {
                let p = point_of.get(pos.index()).copied().unwrap_or(NO_POINT);
                recompute_points.push(if p.index() < timed { p } else { NO_POINT });
            }
            recompute_points.end_row();
        }
        CostTables {
            per_point,
            terms,
            point_term,
            recompute_points,
        }
    }

    /// The step times at one binding on `device`, given the value of every interned
    /// expression.
    pub(crate) fn times(&self, device: &DeviceProfile, vals: &ExprValues) -> PointTimes {
        let mut point_us = Vec::new();
        if self.per_point {
            let term_us: Vec<f64> = self
                .terms
                .iter()
                .map(|&(f, bytes, kind)| {
                    let bytes = bytes.map_or(0, |b| vals[b]);
                    device.op_us(vals[f] as f64, bytes as f64, kind)
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

    /// Modelled time of candidate `c`'s recompute, µs: the sum of the times `t` gives the points
    /// of the ops it reruns (the last point at which each is scheduled; 0 µs for an op with no
    /// modelled time), or `flops` at the matrix rate when the plan has no per-point costs
    /// (Checkmate, Jain et al., MLSys 2020, §4.1, prices a recompute by its ops' costs).
    pub fn recompute_us(&self, t: &PointTimes, c: CandidateId, flops: i64) -> f64 {
        if t.point_us.is_empty() {
            return t.fallback_us(flops);
        }
        self.recompute_points
            .row(c.into())
            .iter()
            .map(|&p| t.point_us.get(p.index()).copied().unwrap_or(0.0))
            .sum()
    }
}
