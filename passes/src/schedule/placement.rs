//! Pinning the user's placements in a schedule: an `annotate_device_placement` to a host
//! memory kind (the offload) runs right after the op that produces its operand, and one to the
//! device (the reload) right before the first op that reads its result.
//!
//! The memory schedulers see these identities as ops that allocate their operand's size and
//! free it when they are its last reader, and may move them anywhere in between: an offload
//! moved late keeps the device copy resident through the forward pass, a reload moved early
//! holds the value through the backward pass, and the user's placement would save nothing.
//! Pinned, the host value's live range spans exactly the gap the user meant, and the plan's
//! forced swap (`crate::remat::candidates`, rule 6) frees it there.
//!
//! Invariant: the result is a topological permutation of the same ops; where pinning would
//! break the order (a placement of a placement's result), the schedule is returned unchanged.

use crate::memory::{validate_schedule, Schedule};
use ebb_ir::{Graph, NodeId, Op};
use std::collections::HashMap;

/// `schedule` with every `annotate_device_placement` pinned (see the module docs).
pub fn pin_placements(g: &Graph, schedule: &Schedule) -> Schedule {
    let placement = |id: NodeId| match g.node(id).op {
        Op::AnnotateDevicePlacement(k) => Some(k.is_host()),
        _ => None,
    };
    if !schedule.iter().any(|&id| placement(id).is_some()) {
        return schedule.clone();
    }
    let pos: HashMap<NodeId, usize> = schedule.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    // Per kept op, the placements to run right before and right after it; offloads of graph
    // inputs run first.
    let mut before: HashMap<NodeId, Vec<NodeId>> = HashMap::new();
    let mut after: HashMap<NodeId, Vec<NodeId>> = HashMap::new();
    let mut first: Vec<NodeId> = Vec::new();
    for &id in schedule {
        match placement(id) {
            Some(true) => {
                let producer = g.operands(id).first().map(|v| v.node);
                match producer.filter(|p| pos.contains_key(p)) {
                    Some(p) => after.entry(p).or_default().push(id),
                    None => first.push(id),
                }
            }
            Some(false) => {
                let reader = g
                    .users(id)
                    .into_iter()
                    .filter_map(|(u, _, _)| pos.get(&u).map(|&i| (i, u)))
                    .min();
                // A reload nobody reads stays where it is.
                let slot = match reader {
                    Some((_, u)) => before.entry(u).or_default(),
                    None => after.entry(id).or_default(),
                };
                slot.push(id);
            }
            None => {}
        }
    }
    let mut out: Schedule = Vec::with_capacity(schedule.len());
    out.extend(&first);
    for &id in schedule {
        if placement(id).is_some() && !after.get(&id).is_some_and(|v| v.contains(&id)) {
            continue;
        }
        if placement(id).is_none() {
            out.extend(before.get(&id).into_iter().flatten());
            out.push(id);
        }
        out.extend(after.get(&id).into_iter().flatten());
    }
    if out.len() != schedule.len() || validate_schedule(g, &out).is_err() {
        return schedule.clone();
    }
    out
}
