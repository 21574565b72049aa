//! Executing a finalized plan's decisions: evictions after a point, regenerations (recompute)
//! and reloads (swap) before a point, with a host pool for offloaded tensors.
//!
//! [`Program::events`] turns a plan's [`Decision`]s into [`Events`] in the executor's value
//! numbering; [`Program::run_with`](super::Program::run_with) performs them. The memory model is
//! the plan checker's (`ebb_passes::plan::check`, module docs): before the op at point `p`, the
//! regenerations and reloads due at `p` run in candidate order; a recompute reruns the
//! candidate's ops on resident values and on its own transient results (each dropped after its
//! last reader in the list), so during it the device holds the resident bytes plus its live
//! results — recorded in [`ExecStats::regen_peak`](super::ExecStats::regen_peak); after the op
//! at `p` and its frees, evictions drop the value (recompute) or move a copy to the host pool
//! (swap). A swap's reload happens at the candidate's `prefetch_at`.
//!
//! Invariant: a regenerated value is computed by the same deterministic kernels on equal
//! operands, and a reloaded value is a bit copy, so outputs are bit-identical to a run without
//! decisions.

use super::Program;
use crate::error::ExecError;
use crate::tensor::Tensor;
use ebb_plan::format::{Decision, DecisionKind, OpPos, Plan};
use std::collections::HashMap;

/// A value brought back into device memory before a point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Back {
    /// Copy an offloaded value back from the host pool.
    Reload {
        /// Executor value id.
        value: u32,
    },
    /// Rerun `steps` (indices into the program's steps, in order); the last produces `value`.
    Recompute {
        /// Executor value id.
        value: u32,
        /// Program steps to rerun.
        steps: Vec<usize>,
    },
}

/// An eviction after a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evict {
    /// Executor value id.
    pub value: u32,
    /// Offload a copy to the host pool (swap) instead of dropping it (recompute).
    pub to_host: bool,
}

/// The decisions of a finalized plan in the executor's numbering, bucketed by point.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Events {
    /// Per point: what is brought back before its op, in candidate order.
    pub before: Vec<Vec<Back>>,
    /// Per point: what is evicted after its op and its frees.
    pub after: Vec<Vec<Evict>>,
}

impl Events {
    /// Number of decisions.
    pub fn len(&self) -> usize {
        self.after.iter().map(Vec::len).sum()
    }

    /// True when there is no decision.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Program<'_> {
    /// Maps `decisions` on `plan` (the plan variant this program runs: its schedule must be the
    /// program's) to [`Events`].
    ///
    /// # Errors
    /// [`ExecError::Plan`] when a decision names a missing candidate, a kind the candidate does
    /// not allow, or a value/position outside the graph, or when the plan's schedule is not
    /// the program's.
    pub fn events(&self, plan: &Plan, decisions: &[Decision]) -> Result<Events, ExecError> {
        let g = self.g;
        let bad = |msg: String| ExecError::Plan {
            graph: g.name.clone(),
            msg,
        };
        let order = g.order();
        let node_at = |pos: OpPos| {
            order
                .get(pos.index())
                .copied()
                .filter(|&id| g.contains(id))
                .ok_or_else(|| bad(format!("position {pos} is not in the graph")))
        };
        if plan.schedule.len() != self.prep.steps.len() {
            return Err(bad(format!(
                "the plan schedules {} ops, the program {}",
                plan.schedule.len(),
                self.prep.steps.len()
            )));
        }
        for (p, &pos) in plan.schedule.iter().enumerate() {
            if node_at(pos)? != self.prep.steps[p].node {
                return Err(bad(format!(
                    "point {p}: the plan runs position {pos}, the program another op"
                )));
            }
        }
        let points = self.prep.steps.len().max(1);
        let mut ev = Events {
            before: vec![Vec::new(); points],
            after: vec![Vec::new(); points],
        };
        let mut sorted: Vec<&Decision> = decisions.iter().collect();
        sorted.sort_by_key(|d| d.candidate);
        for d in sorted {
            let c = plan
                .candidate(d.candidate)
                .ok_or_else(|| bad(format!("no candidate {}", d.candidate)))?;
            if !c.allows(d.kind) {
                return Err(bad(format!(
                    "candidate {} does not allow {:?}",
                    d.candidate, d.kind
                )));
            }
            let pv = plan
                .values
                .get(c.value.index())
                .ok_or_else(|| bad(format!("no value {}", c.value)))?;
            let node = node_at(pv.node)?;
            let value = self.prep.base[node.index()]
                .checked_add(pv.output)
                .filter(|&v| (v as usize) < self.prep.num_values)
                .ok_or_else(|| bad(format!("value {} is not computed", c.value)))?;
            let back = match d.kind {
                DecisionKind::Swap => Back::Reload { value },
                DecisionKind::Recompute => {
                    let steps = c
                        .recompute
                        .iter()
                        .map(|&pos| {
                            let n = node_at(pos)?;
                            match self.prep.step_of.get(n.index()) {
                                Some(&s) if s != super::NONE => Ok(s as usize),
                                _ => Err(bad(format!("recompute position {pos} is not scheduled"))),
                            }
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    Back::Recompute { value, steps }
                }
            };
            // Evicted after a point, back before a later one.
            let (out_at, back_at) = (c.evict_point(), c.back_point(d.kind));
            let (out_p, back_p) = (out_at.point(), back_at.point());
            if out_p.index() >= points || back_p.index() >= points || back_at <= out_at {
                return Err(bad(format!(
                    "candidate {}: window ({out_p}, {back_p}) is outside the schedule",
                    d.candidate
                )));
            }
            ev.after[out_p.index()].push(Evict {
                value,
                to_host: d.kind == DecisionKind::Swap,
            });
            ev.before[back_p.index()].push(back);
        }
        Ok(ev)
    }

    /// Brings `back` into device memory before point `p`. `resident` is the device bytes
    /// before it, updated; returns the largest device bytes while it ran.
    pub(super) fn bring_back(
        &self,
        back: &Back,
        p: usize,
        slots: &mut [Option<Tensor>],
        host: &mut HashMap<u32, Tensor>,
        resident: &mut u64,
        stats: &mut super::ExecStats,
    ) -> Result<u64, ExecError> {
        let g = self.g;
        let bad = |msg: String| ExecError::Plan {
            graph: g.name.clone(),
            msg,
        };
        match back {
            Back::Reload { value } => {
                let t = host.remove(value).ok_or_else(|| {
                    bad(format!(
                        "point {p}: reload of value {value}, which is not offloaded"
                    ))
                })?;
                slots[*value as usize] = {
                    // A bit copy: into the planned range, or a new heap buffer.
                    let t = if self.placement.is_some() {
                        t
                    } else {
                        t.deep_copy()
                    };
                    Some(self.back_in_arena(*value, p, t, stats))
                };
                *resident += self.prep.sizes[*value as usize];
                Ok(*resident)
            }
            Back::Recompute { value, steps } => {
                let v = *value;
                if slots[v as usize].is_some() {
                    return Err(bad(format!(
                        "point {p}: recompute of value {v}, which is resident"
                    )));
                }
                // Last reader (index into `steps`) of every value the recompute produces.
                let mut last: HashMap<u32, usize> = HashMap::new();
                for (k, &si) in steps.iter().enumerate() {
                    let s = &self.prep.steps[si];
                    for &o in &s.operands {
                        if let Some(x) = last.get_mut(&o) {
                            *x = k;
                        }
                    }
                    for i in 0..s.out.len() as u32 {
                        last.insert(s.first_result + i, k);
                    }
                }
                let mut temps: HashMap<u32, Tensor> = HashMap::new();
                let (mut live, mut peak) = (0u64, *resident);
                for (k, &si) in steps.iter().enumerate() {
                    let s = &self.prep.steps[si];
                    let mut operands = Vec::with_capacity(s.operands.len());
                    for &o in &s.operands {
                        let t = temps
                            .get(&o)
                            .or(slots[o as usize].as_ref())
                            .cloned()
                            .ok_or_else(|| {
                                bad(format!(
                                    "point {p}: recompute of value {v} reads value {o}, which is not resident"
                                ))
                            })?;
                        operands.push(t);
                    }
                    let (results, _) = self.run_kernel(si, s, operands, None)?;
                    for (i, t) in results.into_iter().enumerate() {
                        let u = s.first_result + i as u32;
                        live += self.prep.sizes[u as usize];
                        temps.insert(u, t);
                    }
                    peak = peak.max(*resident + live);
                    for (&u, &l) in &last {
                        if l == k && u != v && temps.remove(&u).is_some() {
                            live -= self.prep.sizes[u as usize];
                        }
                    }
                }
                let t = temps.remove(&v).ok_or_else(|| {
                    bad(format!(
                        "point {p}: the recompute does not produce value {v}"
                    ))
                })?;
                slots[v as usize] = Some(self.back_in_arena(v, p, t, stats));
                *resident += self.prep.sizes[v as usize];
                Ok(peak)
            }
        }
    }

    /// `t`, brought back before point `p`, at its planned offset in an arena-backed run.
    fn back_in_arena(&self, v: u32, p: usize, t: Tensor, stats: &mut super::ExecStats) -> Tensor {
        match self.placement.as_ref() {
            Some(pl) => match pl.back(v, p) {
                Some(off) => pl.place(t, off, None, stats),
                None => t,
            },
            None => t,
        }
    }
}
