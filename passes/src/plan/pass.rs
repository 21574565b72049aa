//! The plan pass of the pass manager: builds the [`Plan`] of the graph under the schedule that
//! [`SchedulePass`](crate::schedule::SchedulePass) left in the [`PassContext`], one alternative
//! plan per kept schedule variant, embeds the graph as textual IR (`graph_ir`) so that the plan
//! is self-contained, and leaves the plan in the context.
//!
//! Invariant: the graph is left as it was; the plan's positions refer to its program order.

use super::{build_plan, PlanOptions};
use crate::manager::{Pass, PassContext, PassError, PassResult};
use crate::pass_id::PassId;
use crate::schedule::Scheduled;
use ebb_ir::Graph;

/// The plan pass (see the module docs). Reports one change per remat/swap candidate of the
/// chosen schedule's plan.
#[derive(Clone, Debug, Default)]
pub struct PlanPass {
    /// Options of [`build_plan`].
    pub opts: PlanOptions,
}

impl Pass for PlanPass {
    fn name(&self) -> &'static str {
        PassId::Plan.name()
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<PassResult, PassError> {
        let scheduled = cx.get::<Scheduled>().ok_or(PassError::Missing {
            pass: PassId::Plan.name(),
            needs: "schedule",
            producer: PassId::Schedule.name(),
        })?;
        let failed = |what: &str, e: super::BuildError| PassError::Failed {
            pass: PassId::Plan.name(),
            message: format!("{what}: {e}"),
        };
        let mut plan = build_plan(g, &scheduled.schedule, &self.opts)
            .map_err(|e| failed("building the plan", e))?;
        for s in &scheduled.variants {
            plan.alternatives.push(
                build_plan(g, s, &self.opts).map_err(|e| failed("building a plan variant", e))?,
            );
        }
        plan.embed_graph(ebb_ir::text::print(g));
        let candidates = plan.candidates.len();
        cx.insert(plan);
        Ok(PassResult::changes(candidates))
    }
}
