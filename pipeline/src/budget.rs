//! A budget resolved to bytes at many shapes of one plan, as a runtime that steps new shapes
//! resolves `50%` at each: the graph's program-order liveness (symbolic sizes, region
//! transients included) is built once, on the first shape that needs it, and evaluated at
//! each shape after.
//!
//! Invariant: a resolver used at many shapes returns at each exactly what a fresh one returns
//! there ([`crate::resolve_budget`], one resolver per call): the same liveness, evaluated at
//! that shape's bindings; only the symbolic build is shared.

use crate::bind::size_error;
use crate::size::Budget;
use anyhow::Result;
use ebb_ir::{Bindings, Graph};
use ebb_passes::memory::{self, Liveness};
use ebb_plan::format::Plan;
use std::sync::OnceLock;

/// One budget of one plan, resolved per shape (see the module docs).
#[derive(Debug)]
pub struct BudgetResolver {
    /// The budget as given.
    budget: Budget,
    /// The graph's program-order liveness, built at the first fraction of it resolved.
    program_order: OnceLock<Liveness>,
}

impl BudgetResolver {
    /// A resolver of `budget`; nothing is built until a shape needs it.
    pub fn new(budget: Budget) -> Self {
        Self {
            budget,
            program_order: OnceLock::new(),
        }
    }

    /// The budget as given.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// The budget's bytes at `b` for `plan`, whose graph is `g` (the same graph at every
    /// call): bytes as given, a fraction of the program-order peak at `b` (the first such
    /// call builds the program-order liveness, O(ops) symbolic work — about 20 ms on the
    /// 24-layer GPT; later calls evaluate it, O(values + points)), or a fraction of the
    /// plan's scheduled peak at `b`.
    ///
    /// # Errors
    /// Sizes that do not evaluate at `b` (an overflow names the op whose size overflows).
    pub fn resolve(&self, plan: &Plan, g: &Graph, b: &Bindings) -> Result<i64> {
        // (Only a share of the program-order peak reads it.)
        let po = match self.budget {
            Budget::Fraction(_) => {
                let live = self.program_order.get_or_init(|| {
                    memory::GraphMemory::new(g).liveness(&memory::program_order(g))
                });
                live.peak(b).map_err(|e| size_error(g, b, e))?.0
            }
            _ => 0,
        };
        crate::report::resolve_with(plan, g, b, self.budget, po)
    }
}
