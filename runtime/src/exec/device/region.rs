//! A `fusion` op that has no one device kernel (an input fusion: a `reduce` root with fused
//! elementwise producers; a loop fusion whose results differ in element count) lowered as
//! its members' device work in region order, each member as the op it is ([`Lower::op`]):
//! the members' results that are the fusion's results are written at the fusion's result
//! addresses, the others (the reduce's operand, say) in workspace, 256-byte aligned, after
//! which each member's own workspace starts.
//!
//! Invariant: the work computes the values the CPU executor computes for the fusion, bit
//! for bit on the simt device (a fusion computes what its members compute one by one, and
//! each member's device work is the reference's operation: [`super::lower`]'s invariant).
//! Where a result range overlaps an operand range (a result written in place of an
//! operand), every result is computed in workspace first and copied to its address after
//! the last member, so no member reads an operand a previous member overwrote. A member
//! without device work makes the whole fusion [`Lowered::Host`].

use super::lower::{Io, Lower, Lowered, Work};
use super::{Access, DevPtr, DevRange, Transfer};
use crate::exec::OutType;
use ebb_ir::{Graph, Node, Op, ValueRef};
use std::collections::HashMap;

/// Workspace alignment (bytes) of the intermediates.
const ALIGN: u64 = 256;

fn overlaps(a: DevRange, b: DevRange) -> bool {
    a.ptr.space == b.ptr.space
        && a.bytes > 0
        && b.bytes > 0
        && a.ptr.offset < b.ptr.offset + b.bytes
        && b.ptr.offset < a.ptr.offset + a.bytes
}

impl Lower<'_> {
    /// The device work of fusion `node` member by member; see the module docs. `ins` and
    /// `outs` are the fusion's operands and results, `ws` its workspace.
    pub(super) fn region(&self, node: &Node, ins: &[Io], outs: &[Io], ws: DevPtr) -> Lowered {
        let (Op::Fusion(_), [r]) = (&node.op, node.regions.as_slice()) else {
            return Lowered::Host;
        };
        self.members(r, ins, outs, ws).unwrap_or(Lowered::Host)
    }

    fn members(&self, r: &Graph, ins: &[Io], outs: &[Io], ws: DevPtr) -> Option<Lowered> {
        if r.inputs().len() != ins.len() || r.outputs().len() != outs.len() {
            return None;
        }
        let sub = Lower {
            graph: r,
            bindings: self.bindings,
            cache: self.cache,
        };
        let in_place = outs
            .iter()
            .any(|o| ins.iter().any(|i| overlaps(o.range(), i.range())));
        // Where each value lives and its concrete type.
        let mut at: HashMap<ValueRef, (DevPtr, OutType)> = HashMap::new();
        for (k, &n) in r.inputs().iter().enumerate() {
            at.insert(ValueRef::new(n, 0), (ins[k].ptr, ins[k].ty.clone()));
        }
        let mut used = 0u64;
        // The first region output slot of each value (a value output twice is copied).
        let mut slot: HashMap<ValueRef, usize> = HashMap::new();
        for (k, v) in r.outputs().iter().enumerate() {
            slot.entry(*v).or_insert(k);
        }
        let mut work: Vec<(Work, Access)> = Vec::new();
        let mut peak = 0u64;
        for &n in r.order() {
            let member = r.node(n);
            if matches!(member.op, Op::Input(_)) {
                continue;
            }
            let operands = r.operands(n);
            let mut in_types = Vec::with_capacity(operands.len());
            for v in &operands {
                let (p, t) = at.get(v)?;
                in_types.push((*p, t.clone()));
            }
            let mut out_types = Vec::with_capacity(member.outputs.len());
            for (k, ty) in member.outputs.iter().enumerate() {
                let t =
                    crate::exec::eval_type(r, member, ty.dtype, &ty.shape, self.bindings).ok()?;
                let v = ValueRef::new(n, k as u32);
                let p = match slot.get(&v) {
                    Some(&o) if !in_place => {
                        if outs[o].ty != &t {
                            return None;
                        }
                        outs[o].ptr
                    }
                    _ => {
                        let p = ws.add(used);
                        used += t.bytes().div_ceil(ALIGN) * ALIGN;
                        p
                    }
                };
                at.insert(v, (p, t.clone()));
                out_types.push((p, t));
            }
            let in_io: Vec<Io> = in_types
                .iter()
                .map(|(p, t)| Io { ptr: *p, ty: t })
                .collect();
            let out_io: Vec<Io> = out_types
                .iter()
                .map(|(p, t)| Io { ptr: *p, ty: t })
                .collect();
            match sub.op(n, &in_io, &out_io, ws.add(used)) {
                Lowered::Device(w, b) => {
                    peak = peak.max(used + b);
                    work.extend(w);
                }
                Lowered::Host => return None,
            }
        }
        peak = peak.max(used);
        // Results computed elsewhere than their address (in place, or a value output twice).
        for (k, v) in r.outputs().iter().enumerate() {
            let (p, t) = at.get(v)?;
            if *p == outs[k].ptr {
                continue;
            }
            if t != outs[k].ty {
                return None;
            }
            let bytes = t.bytes();
            if bytes > 0 {
                let src = DevRange { ptr: *p, bytes };
                work.push((
                    Work::Copy {
                        t: Transfer::Device {
                            src: *p,
                            dst: outs[k].ptr,
                        },
                        bytes,
                    },
                    Access {
                        reads: vec![src],
                        writes: vec![outs[k].range()],
                    },
                ));
            }
        }
        Some(Lowered::Device(work, peak))
    }
}
