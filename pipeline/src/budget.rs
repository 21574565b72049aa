//! A budget resolved to bytes at many shapes of one plan, as a runtime that steps new shapes
//! resolves `50%` at each: the graph's program-order liveness (symbolic sizes, region
//! transients included) is built once, on the first shape that needs it, and evaluated at
//! each shape after.
//!
//! Invariant: a resolver used at many shapes returns at each exactly what a fresh one returns
//! there ([`crate::resolve_budget`], one resolver per call): the same liveness, evaluated at
//! that shape's bindings; only the symbolic build is shared. [`StepBudget`] is a runtime's
//! budget over its steps: the Python `ebb.Runtime` and the C `ebb_runtime_new_budget` hold one.

use crate::bind::size_error;
use crate::size::Budget;
use anyhow::Result;
use ebb_ir::{Bindings, Graph};
use ebb_passes::memory::{self, Liveness};
use ebb_plan::format::Plan;
use ebb_runtime::Runtime;
use std::collections::HashMap;
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

/// A runtime's budget at every shape it steps, as the Python and C runtimes take it: none,
/// bytes (set once in the runtime), or a budget resolved per shape (`50%` of that shape's
/// program-order peak, or a share of its scheduled peak) through one [`BudgetResolver`],
/// each shape's bytes resolved once and kept.
///
/// Invariant: before each step at `b`, [`StepBudget::apply`] leaves the runtime's budget at
/// exactly what [`crate::resolve_budget`] gives at `b` (for a per-shape budget), or
/// untouched (bytes or none, fixed at the runtime's creation by [`StepBudget::fixed_bytes`]).
#[derive(Debug)]
pub struct StepBudget {
    /// A budget in bytes, set once in the runtime; `None` for none or a per-shape one.
    fixed: Option<i64>,
    /// The resolver of a per-shape budget; `None` for bytes or none.
    resolver: Option<BudgetResolver>,
    /// Bytes resolved per shape seen (symbol values in symbol order).
    resolved: HashMap<Vec<i64>, i64>,
}

impl StepBudget {
    /// The budget `budget` (`None`: no budget) of a runtime.
    pub fn new(budget: Option<Budget>) -> Self {
        Self {
            fixed: match budget {
                Some(Budget::Bytes(b)) => Some(b),
                _ => None,
            },
            resolver: budget
                .filter(|b| !matches!(b, Budget::Bytes(_)))
                .map(BudgetResolver::new),
            resolved: HashMap::new(),
        }
    }

    /// The bytes to create the runtime with: the budget in bytes, `None` for no budget or a
    /// per-shape one (set before each step by [`StepBudget::apply`]).
    pub fn fixed_bytes(&self) -> Option<i64> {
        self.fixed
    }

    /// Sets `rt`'s budget for a step at `b`: a per-shape budget is resolved at `b` on the
    /// runtime's graph the first time `b` is seen (about 20 ms for the first shape of the
    /// 24-layer GPT, the program-order liveness build; then O(values + points)) and kept;
    /// bytes or none leave `rt` as it is.
    ///
    /// # Errors
    /// Bindings the plan's facts or shape assertions reject; sizes that do not evaluate at
    /// `b`.
    pub fn apply(&mut self, rt: &mut Runtime, b: &Bindings) -> Result<()> {
        let Some(resolver) = &self.resolver else {
            return Ok(());
        };
        let key: Vec<i64> = b.values().copied().collect();
        let bytes = match self.resolved.get(&key) {
            Some(&x) => x,
            None => {
                crate::check_plan_bindings(rt.plan(), b)?;
                let x = resolver.resolve(rt.plan(), rt.graph(), b)?;
                self.resolved.insert(key, x);
                x
            }
        };
        rt.set_budget(Some(bytes));
        Ok(())
    }

    /// Prepares `rt`'s plan atlas from full finalizes at `samples` (see
    /// [`Runtime::prepare_atlas`]): under a per-shape budget each sample is finalized under
    /// its own bytes and the atlas is keyed by the budget's share of the peak
    /// ([`Runtime::prepare_atlas_relative`]). Returns the number of entries.
    ///
    /// # Errors
    /// A sample with an unknown symbol, or one the plan's facts or shape assertions reject;
    /// sizes that do not evaluate at a sample.
    pub fn prepare_atlas(&self, rt: &Runtime, samples: &[Bindings]) -> Result<usize> {
        for b in samples {
            rt.plan().symbols.check_known(b)?;
            crate::check_plan_bindings(rt.plan(), b)?;
        }
        match &self.resolver {
            Some(resolver) => {
                let budgets = samples
                    .iter()
                    .map(|b| Ok((b.clone(), resolver.resolve(rt.plan(), rt.graph(), b)?)))
                    .collect::<Result<Vec<_>>>()?;
                Ok(rt.prepare_atlas_relative(&budgets))
            }
            None => Ok(rt.prepare_atlas(samples)),
        }
    }
}
