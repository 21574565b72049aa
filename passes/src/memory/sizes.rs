//! [`SizeTable`]: the distinct symbolic sizes of a graph, interned once so that evaluating every
//! size at a binding costs one [`DimExpr::eval`] per *distinct* expression (a GPT-2 graph has
//! ~20k values but only a few hundred distinct sizes).
//!
//! Invariant: ids are dense (`0..len()`), id `i` always denotes the same expression, and equal
//! expressions (structurally, which for the canonical [`DimExpr`] means equal as polynomials)
//! share one id.

use ebb_ir::dim::DimError;
use ebb_ir::{Bindings, DimExpr};
use rustc_hash::FxHashMap;

/// Interned table of distinct [`DimExpr`]s (sizes in bytes).
#[derive(Clone, Debug, Default)]
pub struct SizeTable {
    exprs: Vec<DimExpr>,
    /// Looked up only, never iterated (its hasher does not affect any id).
    index: FxHashMap<DimExpr, u32>,
}

impl SizeTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of `e`, adding it when new.
    pub fn intern(&mut self, e: DimExpr) -> u32 {
        if let Some(&id) = self.index.get(&e) {
            return id;
        }
        let id = self.exprs.len() as u32;
        self.index.insert(e.clone(), id);
        self.exprs.push(e);
        id
    }

    /// The expression of id `id`.
    pub fn get(&self, id: u32) -> &DimExpr {
        &self.exprs[id as usize]
    }

    /// Number of distinct expressions.
    pub fn len(&self) -> usize {
        self.exprs.len()
    }

    /// True when no expression was interned.
    pub fn is_empty(&self) -> bool {
        self.exprs.is_empty()
    }

    /// Every expression evaluated at `b`, indexed by id (bytes).
    ///
    /// # Errors
    /// The first [`DimError`] of an evaluation (unbound symbol, overflow).
    pub fn eval(&self, b: &Bindings) -> Result<Vec<i64>, DimError> {
        self.exprs.iter().map(|e| e.eval(b)).collect()
    }
}
