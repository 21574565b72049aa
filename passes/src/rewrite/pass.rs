//! The e-graph rewrite pass of the pass manager: runs [`rewrite`] with the chosen rule groups
//! and replaces the graph by the extracted one; the [`RewriteReport`] is left in the
//! [`PassContext`].
//!
//! Invariant: the graph's inputs and outputs (number, order, types) are unchanged, and the
//! graph is replaced only when [`rewrite`] succeeded (its output verifies).

use super::{rewrite, Limits, RewriteReport, RuleGroup};
use crate::manager::{Pass, PassContext, PassError, PassResult};
use crate::pass_id::PassId;
use ebb_ir::Graph;

/// The rewrite pass (see the module docs). Reports one change per e-class whose extracted op
/// differs from the input's op.
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
        let (out, report) =
            rewrite(g, &self.groups, &self.limits).map_err(|e| PassError::Failed {
                pass: PassId::Rewrite.name(),
                message: e.to_string(),
            })?;
        *g = out;
        let changes = report.classes_changed;
        cx.insert::<RewriteReport>(report);
        Ok(PassResult::changes(changes))
    }
}
