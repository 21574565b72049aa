//! The plan's tables in a binary plan file: one record per schedule variant, the fields of
//! [`Plan`] in order, every field always written (a format without field names cannot skip
//! defaults), symbolic expressions and the symbol scope as indices into the file's tables
//! ([`super::exprs`]), alternatives flattened into the list of variants.

use super::exprs::{Interner, Ix, Tables};
use super::BinaryError;
use crate::device::{ComputeKind, DeviceProfile};
use crate::format::{
    Candidate, DecisionKind, InPlaceWrite, Plan, PlanKernel, PlanValue, PointBytes, Threshold,
    ValueClass,
};
use ebb_ir::dim::Bindings;
use ebb_ir::graph::ShapeAssertion;
use ebb_ir::index::{CandidateId, OpPos, Point, ValueId};
use serde::{Deserialize, Serialize};

/// One schedule variant: [`Plan`] without `alternatives`.
#[derive(Serialize, Deserialize)]
pub(super) struct BinVariant {
    version: u32,
    graph_name: String,
    symbols: Ix,
    assertions: Vec<ShapeAssertion>,
    ops: usize,
    schedule: Vec<OpPos>,
    values: Vec<BinValue>,
    region_transients: Vec<(Point, Ix)>,
    in_place_writes: Vec<InPlaceWrite>,
    candidates: Vec<BinCandidate>,
    forced_swaps: Vec<CandidateId>,
    host_placed: Vec<ValueId>,
    bound: Option<Bindings>,
    peak_terms: Vec<Ix>,
    point_flops: Option<Vec<Ix>>,
    point_bytes: Option<Vec<Ix>>,
    point_kinds: Option<Vec<ComputeKind>>,
    device: Option<DeviceProfile>,
    graph_ir: Option<String>,
    graph_digest: Option<String>,
    thresholds: Vec<Threshold>,
    kernels: Vec<PlanKernel>,
}

/// [`PlanValue`] with its size as an index.
#[derive(Serialize, Deserialize)]
struct BinValue {
    node: OpPos,
    output: u32,
    bytes: Ix,
    def: Point,
    last_use: Point,
    class: ValueClass,
}

/// [`Candidate`] with every field written, expressions as indices.
#[derive(Serialize, Deserialize)]
struct BinCandidate {
    value: ValueId,
    evict_after: Point,
    regenerate_before: Point,
    prefetch_at: Point,
    recompute: Vec<OpPos>,
    recompute_reads: Vec<ValueId>,
    bytes_saved: Ix,
    recompute_flops: Ix,
    transient_bytes: Ix,
    swap_bytes: Ix,
    regen_peak_bytes: Option<Ix>,
    kinds: Vec<DecisionKind>,
}

/// The variants of `plan` (itself first, then its alternatives), without the embedded graph
/// text (the file holds the graph in binary form).
///
/// # Errors
/// [`BinaryError::Encode`] when an alternative has alternatives of its own (no plan the
/// compiler writes has) or the scope does not serialize.
pub(super) fn variants_of(plan: &Plan, ix: &mut Interner) -> Result<Vec<BinVariant>, BinaryError> {
    let mut out = Vec::with_capacity(1 + plan.alternatives.len());
    out.push(variant_of(plan, ix)?);
    out[0].graph_ir = None;
    for a in &plan.alternatives {
        if !a.alternatives.is_empty() {
            return Err(BinaryError::Encode(
                "an alternative has alternatives of its own".into(),
            ));
        }
        out.push(variant_of(a, ix)?);
    }
    Ok(out)
}

fn variant_of(p: &Plan, ix: &mut Interner) -> Result<BinVariant, BinaryError> {
    // Destructured, so that a field added to `Plan` does not compile until it is stored here.
    let Plan {
        version,
        graph_name,
        symbols,
        assertions,
        ops,
        schedule,
        values,
        region_transients,
        in_place_writes,
        candidates,
        forced_swaps,
        host_placed,
        bound,
        peak_terms,
        point_flops,
        point_bytes,
        point_kinds,
        device,
        graph_ir,
        graph_digest,
        alternatives: _,
        thresholds,
        kernels,
    } = p.clone();
    Ok(BinVariant {
        version,
        graph_name,
        symbols: ix.scope(&symbols)?,
        assertions,
        ops,
        schedule,
        values: values
            .iter()
            .map(|v| BinValue {
                node: v.node,
                output: v.output,
                bytes: ix.expr(&v.bytes),
                def: v.def,
                last_use: v.last_use,
                class: v.class,
            })
            .collect(),
        region_transients: region_transients
            .iter()
            .map(|t| (t.point, ix.expr(&t.bytes)))
            .collect(),
        in_place_writes,
        candidates: candidates
            .into_iter()
            .map(|c| BinCandidate::of(c, ix))
            .collect(),
        forced_swaps,
        host_placed,
        bound,
        peak_terms: ix.exprs(&peak_terms),
        point_flops: point_flops.map(|v| ix.exprs(&v)),
        point_bytes: point_bytes.map(|v| ix.exprs(&v)),
        point_kinds,
        device,
        graph_ir,
        graph_digest,
        thresholds,
        kernels,
    })
}

/// The plan of `variants` (the first one, with the others as its alternatives).
///
/// # Errors
/// [`BinaryError::Payload`] when there is no variant or an index is out of its table.
pub(super) fn plan_of(variants: Vec<BinVariant>, t: &Tables) -> Result<Plan, BinaryError> {
    let mut it = variants.into_iter();
    let Some(first) = it.next() else {
        return Err(BinaryError::Payload(
            "the file holds no plan variant".into(),
        ));
    };
    let mut plan = first.into_plan(t)?;
    plan.alternatives = it.map(|v| v.into_plan(t)).collect::<Result<_, _>>()?;
    Ok(plan)
}

impl BinVariant {
    fn into_plan(self, t: &Tables) -> Result<Plan, BinaryError> {
        Ok(Plan {
            version: self.version,
            graph_name: self.graph_name,
            symbols: t.scope(self.symbols)?,
            assertions: self.assertions,
            ops: self.ops,
            schedule: self.schedule,
            values: super::try_map(self.values, |v| {
                Ok(PlanValue {
                    node: v.node,
                    output: v.output,
                    bytes: t.expr(v.bytes)?,
                    def: v.def,
                    last_use: v.last_use,
                    class: v.class,
                })
            })?,
            region_transients: super::try_map(self.region_transients, |(point, b)| {
                Ok(PointBytes {
                    point,
                    bytes: t.expr(b)?,
                })
            })?,
            in_place_writes: self.in_place_writes,
            candidates: super::try_map(self.candidates, |c| c.into_candidate(t))?,
            forced_swaps: self.forced_swaps,
            host_placed: self.host_placed,
            bound: self.bound,
            peak_terms: t.exprs(&self.peak_terms)?,
            point_flops: self.point_flops.map(|v| t.exprs(&v)).transpose()?,
            point_bytes: self.point_bytes.map(|v| t.exprs(&v)).transpose()?,
            point_kinds: self.point_kinds,
            device: self.device,
            graph_ir: self.graph_ir,
            graph_digest: self.graph_digest,
            alternatives: Vec::new(),
            thresholds: self.thresholds,
            kernels: self.kernels,
        })
    }
}

impl BinCandidate {
    fn of(c: Candidate, ix: &mut Interner) -> BinCandidate {
        let Candidate {
            value,
            evict_after,
            regenerate_before,
            prefetch_at,
            recompute,
            recompute_reads,
            bytes_saved,
            recompute_flops,
            transient_bytes,
            swap_bytes,
            regen_peak_bytes,
            kinds,
        } = c;
        BinCandidate {
            value,
            evict_after,
            regenerate_before,
            prefetch_at,
            recompute,
            recompute_reads,
            bytes_saved: ix.expr(&bytes_saved),
            recompute_flops: ix.expr(&recompute_flops),
            transient_bytes: ix.expr(&transient_bytes),
            swap_bytes: ix.expr(&swap_bytes),
            regen_peak_bytes: regen_peak_bytes.map(|e| ix.expr(&e)),
            kinds,
        }
    }

    fn into_candidate(self, t: &Tables) -> Result<Candidate, BinaryError> {
        Ok(Candidate {
            value: self.value,
            evict_after: self.evict_after,
            regenerate_before: self.regenerate_before,
            prefetch_at: self.prefetch_at,
            recompute: self.recompute,
            recompute_reads: self.recompute_reads,
            bytes_saved: t.expr(self.bytes_saved)?,
            recompute_flops: t.expr(self.recompute_flops)?,
            transient_bytes: t.expr(self.transient_bytes)?,
            swap_bytes: t.expr(self.swap_bytes)?,
            regen_peak_bytes: self.regen_peak_bytes.map(|i| t.expr(i)).transpose()?,
            kinds: self.kinds,
        })
    }
}
