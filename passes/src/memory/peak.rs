//! Peak memory: resident bytes per program point at concrete bindings, the symbolic peak (a
//! `max` over points of symbolic sums, with dominated points pruned by proofs), and a
//! schedule-independent lower bound.
//!
//! Invariants:
//! * [`Liveness::resident_bytes`] evaluates each *distinct* size once per binding and sums by
//!   a difference array, so it is linear in the number of ranges and points.
//! * [`Liveness::symbolic_peak`] is *sound*: a point is dropped only when its sum is proven
//!   (by [`SymbolScope::compare`]) to be at most the sum of a point that is kept, so at every
//!   binding satisfying the scope's facts `symbolic_peak(scope).eval(b) == peak(b).0`.
//! * [`lower_bound`] is at most the peak of *every* schedule of the graph.

use super::info::{GraphInfo, NONE};
use super::liveness::Liveness;
use super::ValueClass;
use ebb_ir::dim::DimError;
use ebb_ir::{Bindings, DimExpr, Graph, Point, SymbolScope};
use std::collections::HashMap;
use std::fmt;

/// Number of representative bindings used to skip comparisons that cannot be proven.
const PRUNE_SAMPLES: usize = 8;
/// Above this many kept terms the pairwise pruning stops (sound: it only keeps more terms).
const MAX_PAIRWISE_TERMS: usize = 256;

impl Liveness {
    /// Bytes resident at each program point at bindings `b`: every live range covering the
    /// point (parameters, optimizer state, inputs, outputs, intermediates) plus the transient
    /// region memory of the op at that point.
    ///
    /// # Errors
    /// [`DimError::Unbound`] when a size mentions a symbol that `b` does not bind;
    /// [`DimError::Overflow`] when a size or a sum does not fit in `i64`.
    pub fn resident_bytes(&self, b: &Bindings) -> Result<Vec<i64>, DimError> {
        let vals = self.sizes.eval(b)?;
        self.resident_from_sizes(&vals)
    }

    /// [`Liveness::resident_bytes`] from the sizes already evaluated (indexed by size id).
    pub(crate) fn resident_from_sizes(&self, vals: &[i64]) -> Result<Vec<i64>, DimError> {
        let mut delta = vec![0i128; self.points + 1];
        for (r, &sid) in self.ranges.iter().zip(&self.size_of) {
            let v = i128::from(vals[sid as usize]);
            delta[r.def.index()] += v;
            delta[r.last_use.index() + 1] -= v;
        }
        for (t, &sid) in self.transients.iter().zip(&self.transient_size) {
            let v = i128::from(vals[sid as usize]);
            delta[t.point.index()] += v;
            delta[t.point.index() + 1] -= v;
        }
        let mut acc = 0i128;
        delta[..self.points]
            .iter()
            .map(|d| {
                acc += d;
                i64::try_from(acc).map_err(|_| DimError::Overflow)
            })
            .collect()
    }

    /// The peak: `(bytes, point)` with the first point where the resident bytes are largest.
    ///
    /// # Errors
    /// As [`Liveness::resident_bytes`].
    pub fn peak(&self, b: &Bindings) -> Result<(i64, Point), DimError> {
        let r = self.resident_bytes(b)?;
        let (peak, p) = argmax(&r);
        Ok((peak, Point::new(p)))
    }

    /// The resident bytes of every point as a symbolic sum of sizes (bytes), indexed by point.
    /// Coefficient overflow (sums beyond 2^63 bytes) saturates the point and all later ones to
    /// `i64::MAX`, an upper bound.
    pub fn symbolic_resident(&self) -> Vec<DimExpr> {
        let mut out = Vec::with_capacity(self.points);
        let mut running = Some(DimExpr::zero());
        let mut ti = 0;
        for p in 0..self.points {
            for &r in self.starts.row(p) {
                running = running.and_then(|x| x.checked_add(&self.ranges[r as usize].bytes).ok());
            }
            let mut here = running.clone();
            while ti < self.transients.len() && self.transients[ti].point.index() == p {
                here = here.and_then(|x| x.checked_add(&self.transients[ti].bytes).ok());
                ti += 1;
            }
            out.push(here.unwrap_or_else(|| DimExpr::constant(i64::MAX)));
            for &r in self.ends.row(p) {
                running = running.and_then(|x| x.checked_sub(&self.ranges[r as usize].bytes).ok());
            }
        }
        out
    }

    /// The peak as a symbolic `max` over program points of the resident bytes, with points
    /// whose sum is proven (under `scope`) to be at most another kept point's sum removed:
    /// first against the next point (a chain that ends at a kept point), then against the
    /// previous kept point, then pairwise after deduplication. A comparison is only attempted
    /// when it holds at every representative binding of the scope (a necessary condition for
    /// a proof), so the prover runs on few pairs.
    pub fn symbolic_peak(&self, scope: &SymbolScope) -> SymbolicPeak {
        let sums = self.symbolic_resident();
        let samples = self.sample_values(scope);
        let sample_le = |a: usize, b: usize| samples.iter().all(|v| v[a] <= v[b]);
        let proven_le =
            |a: usize, b: usize| sample_le(a, b) && scope.compare(&sums[a], &sums[b]).is_le();
        // 1. Dominated by the next point (chains end at the last point, which is kept).
        let mut alive: Vec<usize> = (0..sums.len())
            .filter(|&p| p + 1 == sums.len() || !proven_le(p, p + 1))
            .collect();
        // 2. Dominated by the previous kept point.
        let mut kept: Vec<usize> = Vec::with_capacity(alive.len());
        for &p in &alive {
            match kept.last() {
                Some(&q) if proven_le(p, q) => {}
                _ => kept.push(p),
            }
        }
        // 3. Deduplicate, then pairwise among the rest, largest first at the samples.
        let mut seen: HashMap<&DimExpr, ()> = HashMap::new();
        kept.retain(|&p| seen.insert(&sums[p], ()).is_none());
        let scale: Vec<f64> = samples
            .iter()
            .map(|v| v.iter().copied().max().unwrap_or(1).max(1) as f64)
            .collect();
        let score = |p: usize| {
            samples
                .iter()
                .zip(&scale)
                .map(|(v, s)| v[p] as f64 / s)
                .sum::<f64>()
        };
        let mut order: Vec<(f64, usize)> = kept.iter().map(|&p| (score(p), p)).collect();
        order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        alive.clear();
        for (_, p) in order {
            if alive.len() >= MAX_PAIRWISE_TERMS {
                alive.push(p);
                continue;
            }
            if alive.iter().any(|&q| proven_le(p, q)) {
                continue;
            }
            alive.retain(|&q| !proven_le(q, p));
            alive.push(p);
        }
        alive.sort_unstable();
        SymbolicPeak {
            terms: alive
                .into_iter()
                .map(|p| (sums[p].clone(), Point::new(p)))
                .collect(),
        }
    }

    /// Resident bytes at up to [`PRUNE_SAMPLES`] representative bindings of `scope` (those
    /// where everything evaluates), one vector per binding.
    fn sample_values(&self, scope: &SymbolScope) -> Vec<Vec<i64>> {
        let mut out = Vec::new();
        let bindings = scope.representative_bindings(PRUNE_SAMPLES);
        let bindings = if bindings.is_empty() {
            vec![Bindings::new()]
        } else {
            bindings
        };
        for b in bindings {
            if let Ok(r) = self.resident_bytes(&b) {
                out.push(r);
            }
        }
        out
    }
}

/// `(max, first index of the max)`; `(0, 0)` for an empty slice.
pub(crate) fn argmax(v: &[i64]) -> (i64, usize) {
    let mut best = (0, 0);
    for (i, &x) in v.iter().enumerate() {
        if i == 0 || x > best.0 {
            best = (x, i);
        }
    }
    best
}

/// A symbolic peak: the maximum of `terms`, each the resident bytes (a sum of sizes) at the
/// program point it names. See [`Liveness::symbolic_peak`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymbolicPeak {
    /// `(bytes, point)`, ascending by point.
    pub terms: Vec<(DimExpr, Point)>,
}

impl SymbolicPeak {
    /// The peak in bytes at `b`: the largest term (0 without terms).
    ///
    /// # Errors
    /// The first [`DimError`] of evaluating a term.
    pub fn eval(&self, b: &Bindings) -> Result<i64, DimError> {
        self.eval_with_point(b).map(|(v, _)| v)
    }

    /// The peak in bytes at `b` and the first point of a largest term.
    ///
    /// # Errors
    /// The first [`DimError`] of evaluating a term.
    pub fn eval_with_point(&self, b: &Bindings) -> Result<(i64, Point), DimError> {
        let mut best: Option<(i64, Point)> = None;
        for (e, p) in &self.terms {
            let v = e.eval(b)?;
            if best.is_none_or(|(x, _)| v > x) {
                best = Some((v, *p));
            }
        }
        Ok(best.unwrap_or((0, Point::new(0))))
    }

    /// The peak as one [`DimExpr`] (`max(...)` of the terms; the term itself when there is
    /// one; 0 without terms); `i64::MAX` (an upper bound) when building the `max` overflows.
    pub fn to_expr(&self) -> DimExpr {
        let args: Vec<DimExpr> = self.terms.iter().map(|(e, _)| e.clone()).collect();
        match DimExpr::max_of(&args) {
            None => DimExpr::zero(),
            Some(Ok(e)) => e,
            Some(Err(_)) => DimExpr::constant(i64::MAX),
        }
    }
}

impl fmt::Display for SymbolicPeak {
    /// `max(e1 @p1, e2 @p2, ...)`: each term with the program point it comes from.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("max(")?;
        for (i, (e, p)) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{e} @{p}")?;
        }
        f.write_str(")")
    }
}

/// A lower bound on the peak of every schedule of `g` at bindings `b`, in bytes: the bytes of
/// the inputs that are not donated (resident at every point) plus the larger of
/// * the output bytes (each value once; all outputs are resident at the last point), and
/// * the largest, over ops, of the bytes the op needs resident while it runs that are not
///   inputs: its distinct operands (donated inputs among them) and results and its transient
///   region memory.
///
/// Every schedule runs every op with its operands and results resident and ends with all
/// outputs resident, so no schedule goes below it. (Adding *all* outputs to every op's need
/// would not be a bound: an output is resident only from its def point.)
///
/// # Errors
/// As [`Liveness::resident_bytes`].
pub fn lower_bound(g: &Graph, b: &Bindings) -> Result<i64, DimError> {
    let info = GraphInfo::build(g, &g.scope);
    lower_bound_of(&info, &info.sizes.eval(b)?)
}

/// [`lower_bound`] over a graph view with its sizes evaluated.
pub(crate) fn lower_bound_of(info: &GraphInfo, vals: &[i64]) -> Result<i64, DimError> {
    let size = |v: u32| i128::from(vals[info.value_size[v as usize] as usize]);
    // Inputs resident at every point; a donated input counts only where an op reads it.
    let is_input = |v: u32| matches!(info.class[v as usize], ValueClass::Input);
    let all = 0..info.num_values() as u32;
    let inputs: i128 = all.clone().filter(|&v| is_input(v)).map(size).sum();
    let outputs: i128 = all
        .filter(|&v| matches!(info.class[v as usize], ValueClass::Output))
        .map(size)
        .sum();
    let mut best = outputs;
    for op in 0..info.ops.len() {
        let mut need: i128 = info
            .operands
            .row(op)
            .iter()
            .filter(|&&v| !is_input(v))
            .map(|&v| size(v))
            .sum();
        need += info.results(op).map(size).sum::<i128>();
        let t = info.transient[op];
        if t != NONE {
            need += i128::from(vals[t as usize]);
        }
        best = best.max(need);
    }
    i64::try_from(inputs + best).map_err(|_| DimError::Overflow)
}
