//! The memory plan: what the compiler hands to the runtime (`runtime::finalize`) and to the
//! independent plan checker (`ebb_passes::plan::check`). Serialized as JSON (serde); symbolic
//! sizes and costs are [`DimExpr`] text, e.g. `"256*B*S"`.
//!
//! # Points, positions and value ids
//! Each index space has its own type ([`ebb_ir::index`]): [`OpPos`], [`Point`], [`ValueId`] and
//! [`CandidateId`], serialized as bare numbers, and [`ProgPoint`] for "before / after the op at
//! a point" (not part of the format).
//! * A *position* ([`OpPos`]) is an index into the graph's program order
//!   ([`Graph::order`](crate::Graph::order), inputs included) at the time the plan was made:
//!   `plan.schedule`, [`PlanValue::node`] and [`Candidate::recompute`] name ops by position, so
//!   a plan is only meaningful together with the graph it was made from ([`Plan::ops`] records
//!   the length of that order as a guard).
//! * The schedule lists the non-input ops in execution order. A *point* `p` ([`Point`]) is the
//!   execution of `schedule[p]`; a graph without ops still has one point (at which its inputs
//!   are resident).
//! * A [`ValueId`] is an index into [`Plan::values`]. The table lists every result of every op
//!   (inputs included) exactly once, sorted by (producer position, result index): the
//!   ordering is part of the format, so ids map back to graph values without a lookup table.
//!
//! # Live ranges and residency (the accounting of `ebb_passes::memory`)
//! A value is *resident* at point `p` when `def <= p <= last_use`. Inputs (parameters,
//! optimizer state, batch) are resident at every point (`def = 0`, `last_use` = last point),
//! also when they are outputs too; donated inputs ([`ValueClass::Donated`]) from point 0 to
//! the last point that reads them; other graph outputs from their producer's point to the last
//! point; intermediates from their producer's point to the last point that reads them (only at
//! their producer's point when nothing reads them). A region-carrying op (`while`) also holds
//! its transient region memory at its own point, and an op that writes a result into an
//! operand dying at it holds that buffer once ([`Plan::region_transients`]). The resident
//! bytes at `p` are the sizes of the resident values plus that transient memory; the peak is
//! their maximum over the points.
//!
//! # Decisions
//! A [`Candidate`] may be taken as a [`Decision`] of kind [`DecisionKind::Recompute`]
//! (evict after `evict_after`, rerun [`Candidate::recompute`] right before
//! `regenerate_before`) or [`DecisionKind::Swap`] (offload to host after `evict_after`,
//! prefetch back into device memory at `prefetch_at`). The device buffer is counted as freed
//! from point `evict_after + 1`; for a swap it is counted again from `prefetch_at` (the reload
//! is issued before `schedule[prefetch_at]` and must complete before `regenerate_before`),
//! for a recompute from `regenerate_before`. Regenerations and reloads due before the same
//! point run in candidate order (a recompute may read a value regenerated just before it by a
//! candidate with a smaller index). In [`ProgPoint`] terms, the eviction happens at
//! [`Candidate::evict_point`] (after `evict_after`) and the value is back at
//! [`Candidate::back_point`] (before `regenerate_before` or `prefetch_at`). The offload is
//! counted as complete when the buffer is freed: the runtime must wait for the copy before
//! reusing that memory. See
//! `ebb_passes::remat` for how candidates are found and `ebb_passes::plan::check` for the rules
//! a set of decisions must obey.

use crate::device::{ComputeKind, DeviceProfile};
use ebb_ir::dim::{Bindings, DimExpr, Symbol, SymbolScope};
use ebb_ir::graph::ShapeAssertion;
pub use ebb_ir::index::{CandidateId, OpPos, Point, ProgPoint, Side, ValueId};
use serde::{Deserialize, Serialize};

/// The format version written into [`Plan::version`]; [`Plan::from_json`] rejects others.
/// Version 2: the embedded graph's op payloads are typed and parsed strictly (an attribute an
/// op does not have is an error), and optional lists holding only defaults are not printed.
/// Version 3: the plan records the SHA-256 digest of its embedded graph ([`Plan::graph_digest`]),
/// checked whenever the plan is loaded.
pub const PLAN_VERSION: u32 = 3;

/// The digest recorded in [`Plan::graph_digest`] for the embedded graph `graph_ir`:
/// `sha256:` followed by the SHA-256 (FIPS 180-4) of its UTF-8 bytes in lowercase hex.
pub fn graph_digest(graph_ir: &str) -> String {
    use sha2::{Digest, Sha256};
    let hash = Sha256::digest(graph_ir.as_bytes());
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in hash {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Role of a value in the step (decides how its live range ends).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueClass {
    /// A graph argument (parameter, optimizer state, batch), owned by the caller.
    Input,
    /// A donated graph argument (`donate_argnums`): resident from point 0 to its last read,
    /// after which its bytes are free.
    Donated,
    /// A value returned by the graph (live until the end of the schedule).
    Output,
    /// Anything else: activations, gradients, temporaries.
    Intermediate,
}

/// One row of the value table: a result of an op with its symbolic size and live range.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct PlanValue {
    /// Program-order position of the producing op.
    pub node: OpPos,
    /// Result index on that op.
    pub output: u32,
    /// Size in bytes (`elements * dtype size`).
    pub bytes: DimExpr,
    /// Point at which the value becomes resident (its producer's point; 0 for inputs).
    pub def: Point,
    /// Last point at which the value is resident (see the module docs).
    pub last_use: Point,
    /// Input, output or intermediate.
    pub class: ValueClass,
}

/// A result written into the buffer of an operand that dies at its op
/// ([`ebb_ir::op::in_place_writes`]): the two values share one buffer, so the arena layout
/// gives them one offset.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct InPlaceWrite {
    /// The overwritten operand (last resident at the result's def point).
    pub operand: ValueId,
    /// The result that takes its buffer.
    pub result: ValueId,
}

/// Extra bytes resident at one point only.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct PointBytes {
    /// The point.
    pub point: Point,
    /// Bytes.
    pub bytes: DimExpr,
}

/// How a candidate is taken.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    /// Rematerialization: free the value, recompute it from resident values before its next use.
    Recompute,
    /// Offload to host memory, prefetch back before the next use.
    Swap,
}

/// A value that may be evicted across a gap between two consecutive uses, with what it costs
/// and what it saves (all symbolic). The value is not read at any point strictly between
/// `evict_after` and `regenerate_before`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Candidate {
    /// The value to evict.
    pub value: ValueId,
    /// The value is freed after the op at this point (its definition or a use) has run.
    pub evict_after: Point,
    /// The value is resident again before the op at this point (its next use) runs.
    pub regenerate_before: Point,
    /// For a swap: the point before which the reload is issued
    /// (`evict_after < prefetch_at <= regenerate_before`).
    pub prefetch_at: Point,
    /// For a recompute: the ops to rerun, as program-order positions in execution order; the
    /// last one produces the value. Their operands are either produced earlier in this list
    /// (transient values, freed when the regeneration ends) or listed in `recompute_reads`.
    /// Empty when recompute is not allowed.
    pub recompute: Vec<OpPos>,
    /// Values the recompute reads, all resident right before `regenerate_before` whatever other
    /// candidates are taken.
    pub recompute_reads: Vec<ValueId>,
    /// Bytes freed between `evict_after` and the regeneration: the value's size.
    pub bytes_saved: DimExpr,
    /// Cost of the recompute in FLOPs (the model of `ebb_passes::remat::cost`).
    pub recompute_flops: DimExpr,
    /// Peak bytes of the recompute's transient results (results of `recompute` other than the
    /// value, each live from its op to its last reader in the list): the extra memory the
    /// regeneration needs on top of the value; never more than `bytes_saved`.
    pub transient_bytes: DimExpr,
    /// Bytes copied each way by a swap (the value's size).
    pub swap_bytes: DimExpr,
    /// Largest bytes the recompute holds while it runs, on top of what is resident before it:
    /// the live transient results plus the value once its producer has run (the checker's
    /// regeneration peak minus the resident bytes). At most `bytes_saved + transient_bytes`;
    /// `None` in plans that predate the field (the runtime then uses that bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regen_peak_bytes: Option<DimExpr>,
    /// The decision kinds that are valid for this candidate.
    pub kinds: Vec<DecisionKind>,
}

impl Candidate {
    /// True when `kind` may be chosen for this candidate.
    pub fn allows(&self, kind: DecisionKind) -> bool {
        self.kinds.contains(&kind)
    }

    /// When the value is evicted: after the op at `evict_after` (and that point's frees).
    pub fn evict_point(&self) -> ProgPoint {
        ProgPoint::after(self.evict_after)
    }

    /// When a recompute brings the value back: before the op at `regenerate_before`.
    pub fn regenerate_point(&self) -> ProgPoint {
        ProgPoint::before(self.regenerate_before)
    }

    /// When a swap's reload is issued: before the op at `prefetch_at`.
    pub fn prefetch_point(&self) -> ProgPoint {
        ProgPoint::before(self.prefetch_at)
    }

    /// When the value is resident again if taken as `kind`: [`Candidate::regenerate_point`]
    /// for a recompute, [`Candidate::prefetch_point`] for a swap.
    pub fn back_point(&self, kind: DecisionKind) -> ProgPoint {
        match kind {
            DecisionKind::Recompute => self.regenerate_point(),
            DecisionKind::Swap => self.prefetch_point(),
        }
    }
}

/// A chosen candidate: index into [`Plan::candidates`] and the kind chosen.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct Decision {
    /// Index into [`Plan::candidates`].
    pub candidate: CandidateId,
    /// Recompute or swap.
    pub kind: DecisionKind,
}

/// Where the peak memory (program order or schedule, without decisions) exceeds a budget as a
/// function of one symbol, the others fixed: the runtime decides by comparing the symbol's
/// value with these ranges instead of evaluating the peak.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Threshold {
    /// The free symbol.
    pub symbol: Symbol,
    /// Values of the other symbols.
    pub fixed: Bindings,
    /// The budget in bytes.
    pub budget: i64,
    /// Inclusive ranges of the symbol's values (within its declared range, an unbounded upper
    /// end capped) at which the peak exceeds `budget`, sorted and disjoint. Usually one range
    /// `[first, hi]`, i.e. "exceeds iff `symbol >= first`".
    pub over: Vec<(i64, i64)>,
}

impl Threshold {
    /// The smallest value of the symbol at which the peak exceeds the budget.
    pub fn first_over(&self) -> Option<i64> {
        self.over.first().map(|r| r.0)
    }

    /// True when the peak exceeds the budget at `value`.
    pub fn exceeds(&self, value: i64) -> bool {
        self.over.iter().any(|&(lo, hi)| lo <= value && value <= hi)
    }
}

/// The memory plan of one graph. See the module docs for positions, points and value ids.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// Format version, [`PLAN_VERSION`].
    pub version: u32,
    /// Name of the graph the plan was made for.
    pub graph_name: String,
    /// Symbols with their ranges, divisibility and equality facts.
    pub symbols: SymbolScope,
    /// Run-time shape checks of the graph.
    pub assertions: Vec<ShapeAssertion>,
    /// Number of ops (inputs included) in the program order the positions refer to.
    pub ops: usize,
    /// The schedule: `schedule[p]` is the program-order position of the op run at point `p`.
    pub schedule: Vec<OpPos>,
    /// Every value with its size and live range, sorted by (position, result).
    pub values: Vec<PlanValue>,
    /// Transient memory of region-carrying ops, charged at their point only, less the bytes
    /// of the operands an op writes its results into ([`ebb_ir::op::in_place_writes`]: a
    /// `fusion`, `scatter` or `dynamic_update_slice` whose operand dies at it), so an entry may
    /// be negative.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub region_transients: Vec<PointBytes>,
    /// The in-place writes of the schedule (their bytes are already taken off
    /// `region_transients`); the arena layout places each pair at one offset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_place_writes: Vec<InPlaceWrite>,
    /// Evict/regenerate candidates.
    pub candidates: Vec<Candidate>,
    /// Candidates finalize must take as swaps, whatever the budget (ascending): the windows
    /// of the values the user placed on the host (`annotate_device_placement` to a host memory
    /// kind) under the forcing offload policy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forced_swaps: Vec<CandidateId>,
    /// The values the user placed on the host (ascending; empty when the offload policy
    /// ignores placements).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_placed: Vec<ValueId>,
    /// The bindings the plan was specialized for (`--bind`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bindings>,
    /// Symbolic resident bytes that can be the peak: the peak without decisions at a binding
    /// is the maximum of these expressions (dominated terms are dropped only when proven).
    pub peak_terms: Vec<DimExpr>,
    /// FLOPs of the op at each point (the cost model of `ebb_passes::remat::cost`), used by
    /// the runtime to price swaps (compute that hides a transfer) and to report step FLOPs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point_flops: Option<Vec<DimExpr>>,
    /// Bytes each point's op reads and writes (its operands plus its results; 0 for views
    /// such as `reshape`), for the roofline time model ([`crate::cost`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point_bytes: Option<Vec<DimExpr>>,
    /// The compute unit of each point's op ([`ComputeKind`]), for the roofline time model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point_kinds: Option<Vec<ComputeKind>>,
    /// The device the plan was compiled for (`ebb compile --device`): the runtime prices
    /// decisions with it unless told otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceProfile>,
    /// The planned graph in textual IR (`ebb_ir::text`), so a plan file is self-contained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_ir: Option<String>,
    /// [`graph_digest`] of `graph_ir`, written with it: a loader refuses a plan whose embedded
    /// graph no longer has this digest (the graph was edited after the plan was made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_digest: Option<String>,
    /// Other schedules of the same graph, each a complete plan (without `graph_ir`): the
    /// runtime finalizes whichever variant (this plan is variant 0) has the lowest peak at the
    /// actual shape ([`Plan::best_variant`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<Plan>,
    /// Precomputed budget thresholds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<Threshold>,
    /// GPU kernels of the planned graph (`ebb compile --target cuda`): what the CUDA
    /// executor loads instead of generating them, by symbol.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<PlanKernel>,
}

/// One GPU kernel stored with a plan.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct PlanKernel {
    /// The entry's symbol (the kernel's structure hash).
    pub name: String,
    /// The virtual architecture the PTX targets (`sm_80`).
    pub arch: String,
    /// The PTX text.
    pub ptx: String,
}

/// Errors reading or validating a plan.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Not JSON of a plan: the line and column and what was expected there (in JSON terms,
    /// without the names of Ebb's internal types).
    #[error("invalid plan JSON at line {line}, column {column}: {msg}")]
    Json {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        msg: String,
    },
    /// A version this build cannot read.
    #[error("plan version {found} is not supported (expected {PLAN_VERSION})")]
    Version {
        /// The version in the file.
        found: u32,
    },
    /// An index that points outside its table.
    #[error("plan field `{field}`[{index}] = {value} is out of range (< {limit} expected)")]
    OutOfRange {
        /// The field (`schedule`, `values.node`, `candidates.value`, ...).
        field: &'static str,
        /// Index of the bad entry.
        index: usize,
        /// The bad value.
        value: usize,
        /// The bound it must stay under.
        limit: usize,
    },
}

/// [`PlanError::Json`] of a serde error, its message in JSON terms: serde names the Rust type
/// it expected (`expected struct Candidate`), which means nothing to whoever edits the file.
fn json_error(e: serde_json::Error) -> PlanError {
    let msg = e.to_string();
    // serde appends " at line L column C"; the variant carries them on their own.
    let msg = match msg.rfind(" at line ") {
        Some(k) => &msg[..k],
        None => &msg,
    };
    let mut out = String::with_capacity(msg.len());
    let mut words = msg.split(' ').peekable();
    while let Some(w) = words.next() {
        let named = match w {
            "struct" => Some("a JSON object"),
            "enum" => Some("one of its names (a string)"),
            "tuple"
                if words
                    .peek()
                    .is_some_and(|n| n.starts_with(char::is_uppercase)) =>
            {
                Some("a JSON array")
            }
            _ => None,
        };
        if !out.is_empty() {
            out.push(' ');
        }
        match named {
            Some(t)
                if words
                    .peek()
                    .is_some_and(|n| n.starts_with(char::is_uppercase)) =>
            {
                words.next();
                out.push_str(t);
            }
            _ => out.push_str(w),
        }
    }
    PlanError::Json {
        line: e.line(),
        column: e.column(),
        msg: out,
    }
}

impl Plan {
    /// The plan as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        // A plan holds only strings, integers, vectors and maps with string keys, so
        // serialization cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads a plan from JSON, checks its version and that every index is in range
    /// ([`Plan::validate_indices`]).
    ///
    /// # Errors
    /// [`PlanError::Json`], [`PlanError::Version`], [`PlanError::OutOfRange`].
    pub fn from_json(text: &str) -> Result<Plan, PlanError> {
        #[derive(Deserialize)]
        struct VersionOnly {
            version: u32,
        }
        // One parse when the plan is of this version; the version alone is read only to say
        // why a plan does not parse (a plan of another version, or no plan at all).
        let parsed = serde_json::from_str::<Plan>(text);
        let plan = match parsed {
            Ok(plan) => plan,
            Err(e) => {
                let v: VersionOnly = serde_json::from_str(text).map_err(json_error)?;
                if v.version != PLAN_VERSION {
                    return Err(PlanError::Version { found: v.version });
                }
                return Err(json_error(e));
            }
        };
        if plan.version != PLAN_VERSION {
            return Err(PlanError::Version {
                found: plan.version,
            });
        }
        plan.validate_indices()?;
        Ok(plan)
    }

    /// Checks that every position, point and value id is inside its table, in the plan and in
    /// each of its alternatives (not the semantics: that is the plan checker's job).
    ///
    /// # Errors
    /// [`PlanError::OutOfRange`] naming the first bad field.
    pub fn validate_indices(&self) -> Result<(), PlanError> {
        let points = self.points();
        let check = |field, index, value, limit| {
            if value < limit {
                Ok(())
            } else {
                Err(PlanError::OutOfRange {
                    field,
                    index,
                    value,
                    limit,
                })
            }
        };
        for (i, &s) in self.schedule.iter().enumerate() {
            check("schedule", i, s.index(), self.ops)?;
        }
        for (i, v) in self.values.iter().enumerate() {
            check("values.node", i, v.node.index(), self.ops)?;
            check("values.def", i, v.def.index(), points)?;
            check("values.last_use", i, v.last_use.index(), points)?;
        }
        for (i, t) in self.region_transients.iter().enumerate() {
            check("region_transients.point", i, t.point.index(), points.max(1))?;
        }
        for (i, w) in self.in_place_writes.iter().enumerate() {
            check(
                "in_place_writes.operand",
                i,
                w.operand.index(),
                self.values.len(),
            )?;
            check(
                "in_place_writes.result",
                i,
                w.result.index(),
                self.values.len(),
            )?;
        }
        for (i, c) in self.candidates.iter().enumerate() {
            check("candidates.value", i, c.value.index(), self.values.len())?;
            check("candidates.evict_after", i, c.evict_after.index(), points)?;
            check(
                "candidates.regenerate_before",
                i,
                c.regenerate_before.index(),
                points,
            )?;
            check("candidates.prefetch_at", i, c.prefetch_at.index(), points)?;
            for &r in &c.recompute {
                check("candidates.recompute", i, r.index(), self.ops)?;
            }
            for &r in &c.recompute_reads {
                check(
                    "candidates.recompute_reads",
                    i,
                    r.index(),
                    self.values.len(),
                )?;
            }
        }
        for alt in &self.alternatives {
            alt.validate_indices()?;
        }
        Ok(())
    }

    /// Embeds `graph_ir` (the planned graph in textual IR) and records its [`graph_digest`].
    pub fn embed_graph(&mut self, graph_ir: String) {
        self.graph_digest = Some(graph_digest(&graph_ir));
        self.graph_ir = Some(graph_ir);
    }

    /// The value `id`.
    ///
    /// # Panics
    /// When `id` is not below `values.len()` (never for a plan that passed
    /// [`Plan::validate_indices`] and an id taken from it).
    pub fn value(&self, id: ValueId) -> &PlanValue {
        &self.values[id.index()]
    }

    /// The candidate `id`, `None` when out of range.
    pub fn candidate(&self, id: CandidateId) -> Option<&Candidate> {
        self.candidates.get(id.index())
    }

    /// Number of points: the schedule's length, at least 1 (see the module docs).
    pub fn points(&self) -> usize {
        self.schedule.len().max(1)
    }

    /// One decision of `kind` for every candidate that allows it.
    pub fn decisions_of_kind(&self, kind: DecisionKind) -> Vec<Decision> {
        CandidateId::all(self.candidates.len())
            .filter(|&c| self.candidates[c.index()].allows(kind))
            .map(|candidate| Decision { candidate, kind })
            .collect()
    }

    /// The peak without decisions at `b`: the maximum of [`Plan::peak_terms`] (0 when empty).
    ///
    /// # Errors
    /// Variant `i`: 0 is this plan, `i > 0` is `alternatives[i - 1]`.
    pub fn variant(&self, i: usize) -> Option<&Plan> {
        if i == 0 {
            Some(self)
        } else {
            self.alternatives.get(i - 1)
        }
    }

    /// The variant with the lowest peak (without decisions) at `b`, and that peak; ties go to
    /// the lower index.
    ///
    /// # Errors
    /// When a peak term does not evaluate at `b`.
    pub fn best_variant(&self, b: &Bindings) -> Result<(usize, i64), ebb_ir::dim::DimError> {
        let mut best = (0, self.peak_at(b)?);
        for (k, a) in self.alternatives.iter().enumerate() {
            let p = a.peak_at(b)?;
            if p < best.1 {
                best = (k + 1, p);
            }
        }
        Ok(best)
    }

    /// [`ebb_ir::dim::DimError`] when a term does not evaluate (unbound symbol, overflow).
    pub fn peak_at(&self, b: &Bindings) -> Result<i64, ebb_ir::dim::DimError> {
        let mut best = 0;
        for t in &self.peak_terms {
            best = best.max(t.eval(b)?);
        }
        Ok(best)
    }
}
