//! The roofline time model of a plan on a device: what the runtime's finalize and the exact
//! ILP (`ebb_passes::exact`) price recompute and swap decisions with, so both optimize the
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

use crate::device::{ComputeKind, DeviceProfile};
use crate::plan::{Candidate, Plan};
use crate::{DimExpr, Point};

/// The modelled time of each point of one plan at one binding on one device, and what is
/// priced from it alone (the step, a window, a transfer, a swap): shared by [`StepCosts`] and
/// the runtime's prepared cost tables, so both price with the same formulas.
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
/// dereferences to), with the point of each program-order position for pricing recomputes.
#[derive(Clone, Debug)]
pub struct StepCosts {
    /// The per-point times.
    times: PointTimes,
    /// The point of each program-order position (`None` for inputs and positions not
    /// scheduled).
    point_of: Vec<Option<u32>>,
}

impl std::ops::Deref for StepCosts {
    type Target = PointTimes;

    fn deref(&self) -> &PointTimes {
        &self.times
    }
}

impl StepCosts {
    /// Evaluates the per-point costs of `plan` on `device` with `eval` (the caller's memoized
    /// evaluator at its bindings).
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
        Self::from_points(plan, device, |p| {
            let b = match bytes.get(p) {
                Some(b) => eval(b)?,
                None => 0,
            };
            Ok((eval(&flops[p])?, b))
        })
    }

    /// As [`StepCosts::new`], with `at(p)` = the evaluated `(point_flops[p], point_bytes[p])`
    /// (bytes 0 where the plan has none), called once per point when the plan has per-point
    /// FLOPs.
    ///
    /// # Errors
    /// The first error of `at`.
    pub fn from_points<E>(
        plan: &Plan,
        device: &DeviceProfile,
        mut at: impl FnMut(usize) -> Result<(i64, i64), E>,
    ) -> Result<StepCosts, E> {
        let mut point_us = Vec::with_capacity(plan.schedule.len());
        if let Some(flops) = &plan.point_flops {
            let kinds = plan.point_kinds.as_deref().unwrap_or_default();
            let default = default_kind(plan);
            for p in 0..flops.len() {
                let (f, bytes) = at(p)?;
                let kind = kinds.get(p).copied().unwrap_or(default);
                point_us.push(device.op_us(f as f64, bytes as f64, kind));
            }
        }
        let mut point_of = vec![None; plan.ops];
        for (p, pos) in plan.schedule.iter().enumerate() {
            if let Some(slot) = point_of.get_mut(pos.index()) {
                *slot = Some(p as u32);
            }
        }
        Ok(StepCosts {
            times: PointTimes::new(point_us, device),
            point_of,
        })
    }

    /// Modelled time of `c`'s recompute, µs: the sum over the ops it reruns; `flops / matrix
    /// rate` (`flops` = its evaluated `recompute_flops`) when the plan has no per-point costs.
    pub fn recompute_us(&self, c: &Candidate, flops: i64) -> f64 {
        if self.point_us.is_empty() {
            return self.fallback_us(flops);
        }
        c.recompute
            .iter()
            .map(|pos| {
                match self.point_of.get(pos.index()).copied().flatten() {
                    Some(p) => self.point_us.get(p as usize).copied(),
                    None => None,
                }
                .unwrap_or(0.0)
            })
            .sum()
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
