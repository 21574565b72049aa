//! The shape-only part of a convolution kept across steps: its classes ([`super::conv`]'s
//! dense sub-convolutions with their patch offsets) and the patch runs each lowering builds
//! from them, in a small process-wide cache keyed by the convolution's whole geometry, so that
//! a step repeated at one shape computes them once (at a small batch they cost about as much
//! as a convolution's arithmetic).
//!
//! Invariant: a plan is a function of its key alone (the geometry: operand shapes, dimension
//! numbers, strides, dilations, padding, groups), so a cached plan is the plan a fresh
//! computation would give. Only plans of at most [`MAX_OFFSETS`] patch offsets are kept, at
//! most [`CAPACITY`] of them (the oldest goes first).

use super::conv::{classes, Class, ColumnRuns, Geometry, Runs};
use std::sync::{Arc, Mutex, OnceLock};

/// Plans kept.
const CAPACITY: usize = 32;

/// Largest plan kept, in patch offsets (16 bytes each): 1 MiB.
const MAX_OFFSETS: usize = 1 << 16;

/// The classes of a convolution and, per class, the patch runs of the lowering that serves it
/// (built at first use).
pub(super) struct Plan {
    key: Vec<i64>,
    pub(super) classes: Vec<Class>,
    rows: Vec<OnceLock<Runs>>,
    cols: Vec<OnceLock<Vec<ColumnRuns>>>,
}

impl Plan {
    /// The rows lowering's runs of class `c`, built by `make` at first use.
    pub(super) fn rows(&self, c: usize, make: impl FnOnce() -> Runs) -> &Runs {
        self.rows[c].get_or_init(make)
    }

    /// The contraction lowering's runs (one per row part) of class `c`, built by `make` at
    /// first use.
    pub(super) fn cols(&self, c: usize, make: impl FnOnce() -> Vec<ColumnRuns>) -> &[ColumnRuns] {
        self.cols[c].get_or_init(make)
    }
}

/// The plan of geometry `g`: the cached one with its key, else a new one (cached when small).
pub(super) fn plan(g: &Geometry) -> Arc<Plan> {
    static CACHE: Mutex<Vec<Arc<Plan>>> = Mutex::new(Vec::new());
    let key = g.key();
    let cache = || CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = cache().iter().find(|p| p.key == key) {
        return Arc::clone(p);
    }
    let cls = classes(&g.dims);
    let n = cls.len();
    let offsets: usize = cls.iter().map(|c| c.off.len()).sum();
    let p = Arc::new(Plan {
        key,
        classes: cls,
        rows: (0..n).map(|_| OnceLock::new()).collect(),
        cols: (0..n).map(|_| OnceLock::new()).collect(),
    });
    if offsets <= MAX_OFFSETS {
        let mut c = cache();
        // Another thread may have cached this geometry meanwhile: keep one plan per key.
        if let Some(q) = c.iter().find(|q| q.key == p.key) {
            return Arc::clone(q);
        }
        if c.len() >= CAPACITY {
            c.remove(0);
        }
        c.push(Arc::clone(&p));
    }
    p
}
