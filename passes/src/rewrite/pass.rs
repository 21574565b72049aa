//! The e-graph rewrite pass of the pass manager: runs [`rewrite`] with the chosen rule groups
//! on the graph's main body and then on the regions of every `while` and `case` (nested ones
//! included), replacing each by its extracted form; the [`RewriteReport`] of the main body is
//! left in the [`PassContext`].
//!
//! A loop body or branch runs as a nested program whose ops are executed like the main body's
//! (a `lax.scan` step's weight gradient is `transpose(dot_general(..))` in every iteration,
//! which `fold_transpose_dot` turns into one dot): its dimensions are the enclosing graph's
//! symbols, so it is rewritten under the main body's symbol scope (its own scope is restored
//! afterwards). Regions of other ops (`reduce`, `scatter`, `sort` bodies) are scalar and left
//! alone.
//!
//! Invariant: the graph's inputs and outputs (number, order, types) are unchanged, and so are
//! each rewritten region's (its block arguments and results); the main body is replaced only
//! when [`rewrite`] succeeded (its output verifies), and a region only when its own rewrite
//! succeeded (a region whose rewrite fails is kept as it is, as if no rule applied).

use super::{rewrite, Limits, RewriteReport, RuleGroup};
use crate::manager::{Pass, PassContext, PassError, PassResult};
use crate::pass_id::PassId;
use ebb_ir::{Graph, Op, SymbolScope};

/// The rewrite pass (see the module docs). Reports one change per e-class whose extracted op
/// differs from the input's op, in the main body and in the regions.
#[derive(Clone, Debug, Default)]
pub struct RewritePass {
    /// Rule groups to run.
    pub groups: Vec<RuleGroup>,
    /// Saturation limits.
    pub limits: Limits,
}

impl Pass for RewritePass {
    fn name(&self) -> &'static str {
        PassId::Rewrite.name()
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<PassResult, PassError> {
        let (mut out, report) =
            rewrite(g, &self.groups, &self.limits).map_err(|e| PassError::Failed {
                pass: PassId::Rewrite.name(),
                message: e.to_string(),
            })?;
        let scope = out.scope.clone();
        let in_regions = if self.groups.is_empty() {
            0
        } else {
            rewrite_regions(&mut out, &scope, &self.groups, &self.limits)
        };
        *g = out;
        let changes = report.classes_changed + in_regions;
        cx.insert::<RewriteReport>(report);
        Ok(PassResult::changes(changes))
    }
}

/// Rewrites the regions of every `while` and `case` of `g` under `scope` (the main body's),
/// depth first; returns the e-classes changed in all of them.
fn rewrite_regions(
    g: &mut Graph,
    scope: &SymbolScope,
    groups: &[RuleGroup],
    limits: &Limits,
) -> usize {
    let carriers: Vec<ebb_ir::NodeId> = g
        .order()
        .iter()
        .copied()
        .filter(|&id| matches!(g.node(id).op, Op::While | Op::Case))
        .collect();
    let mut total = 0;
    for id in carriers {
        let changed = crate::canon::for_each_region(g, id, |r| -> Result<usize, ()> {
            let own = std::mem::replace(&mut r.scope, scope.clone());
            let mut changed = 0;
            if let Ok((new, report)) = rewrite(r, groups, limits) {
                *r = new;
                changed = report.classes_changed;
            }
            changed += rewrite_regions(r, scope, groups, limits);
            r.scope = own;
            Ok(changed)
        });
        total += changed.unwrap_or(0);
    }
    total
}
