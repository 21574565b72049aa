//! The scheduling context: the dense graph view, the bindings the heuristics sample, and each
//! value's *size key* — the one number the list schedulers compare.
//!
//! # Comparing symbolic sizes
//! A ready op's effect (bytes allocated minus bytes freed) is a [`DimExpr`]; comparing two of
//! them with [`SymbolScope::compare`](ebb_ir::SymbolScope::compare) for every pair of ready
//! ops would cost `O(ready)` proofs per step. Instead each size gets the key
//! `key(e) = sum_k e(b_k) / total(b_k)` over representative bindings `b_k` that satisfy the
//! scope's facts, where `total(b_k)` is the bytes of all values at `b_k` (so every binding
//! weighs the same, whatever its scale). The key is a positive linear functional of
//! evaluations at valid bindings, so it *agrees with every ordering the prover can prove*
//! (`compare(a, b).is_le()` holds at every valid binding, hence `key(a) <= key(b)`), and it
//! resolves the `Unknown` comparisons by the normalized sum over the samples — the rule the
//! module docs of `schedule` state. Keys are linear, so an op's effect key is the sum of its
//! values' keys and updates in O(1).
//!
//! Invariant: `samples[k]` holds every distinct size evaluated at `bindings[k]` (all of them
//! evaluate without error); `value_key` is indexed by value id.

use crate::memory::{GraphInfo, Liveness, Schedule};
use ebb_ir::{Bindings, Graph, Symbol};
use std::collections::BTreeSet;

/// Values given to symbols that the scope does not bind in a sample (undeclared symbols), by
/// sample index.
const FALLBACK_VALUES: [i64; 6] = [1, 4096, 64, 512, 8, 1024];

/// See the module docs.
pub struct Ctx {
    pub(crate) info: GraphInfo,
    /// The sampled bindings (complete: every symbol of a size is bound).
    pub bindings: Vec<Bindings>,
    /// `samples[k][size id]`: bytes at `bindings[k]`.
    pub samples: Vec<Vec<i64>>,
    /// Value id -> size key (see the module docs).
    pub value_key: Vec<f64>,
}

impl Ctx {
    /// The context of `g`, sampling `n` representative bindings of its scope plus `extra`.
    pub fn new(g: &Graph, n: usize, extra: &[Bindings]) -> Ctx {
        let info = GraphInfo::build(g, &g.scope);
        let mut cands = g.scope.representative_bindings(n);
        if cands.is_empty() {
            cands = (0..n.max(1)).map(|_| Bindings::new()).collect();
        }
        cands.extend(extra.iter().cloned());
        let mut ctx = Ctx {
            info,
            bindings: Vec::new(),
            samples: Vec::new(),
            value_key: Vec::new(),
        };
        ctx.rebind(cands);
        ctx
    }

    /// Replaces the sampled bindings by `cands` (completed with fallback values for symbols
    /// they leave unbound; duplicates and bindings where some size cannot be evaluated, or
    /// the total overflows, are dropped) and recomputes the size keys.
    pub(crate) fn rebind(&mut self, cands: Vec<Bindings>) {
        let info = &self.info;
        let mut symbols = BTreeSet::new();
        for id in 0..info.sizes.len() as u32 {
            symbols.extend(info.sizes.get(id).symbols());
        }
        let mut bindings = Vec::new();
        let mut samples = Vec::new();
        for (k, mut b) in cands.into_iter().enumerate() {
            complete(&mut b, &symbols, k);
            if bindings.contains(&b) {
                continue;
            }
            let Ok(vals) = info.sizes.eval(&b) else {
                continue;
            };
            let total: i128 = info
                .value_size
                .iter()
                .map(|&s| i128::from(vals[s as usize]))
                .sum();
            if i64::try_from(total).is_err() {
                continue;
            }
            bindings.push(b);
            samples.push(vals);
        }
        let mut value_key = vec![0.0; info.num_values()];
        for vals in &samples {
            let total: f64 = info
                .value_size
                .iter()
                .map(|&s| vals[s as usize] as f64)
                .sum::<f64>()
                .max(1.0);
            for (v, &s) in info.value_size.iter().enumerate() {
                value_key[v] += vals[s as usize] as f64 / total;
            }
        }
        self.bindings = bindings;
        self.samples = samples;
        self.value_key = value_key;
    }

    /// Peak bytes of the schedule given by op indices, at every sample binding.
    pub(crate) fn sample_peaks(&self, order: &[u32]) -> Vec<i64> {
        let live = Liveness::from_info(&self.info, &self.to_schedule(order));
        self.samples
            .iter()
            .map(|vals| {
                live.resident_from_sizes(vals)
                    .map_or(i64::MAX, |r| crate::memory::argmax(&r).0)
            })
            .collect()
    }

    /// The schedule (node ids) of the op indices `order`.
    pub(crate) fn to_schedule(&self, order: &[u32]) -> Schedule {
        order.iter().map(|&i| self.info.ops[i as usize]).collect()
    }

    /// Number of ops.
    pub(crate) fn num_ops(&self) -> usize {
        self.info.ops.len()
    }
}

/// Binds every symbol of `symbols` missing from `b` to a fallback value for sample `k`.
fn complete(b: &mut Bindings, symbols: &BTreeSet<Symbol>, k: usize) {
    for (j, s) in symbols.iter().enumerate() {
        b.entry(s.clone())
            .or_insert(FALLBACK_VALUES[(k + j) % FALLBACK_VALUES.len()]);
    }
}
