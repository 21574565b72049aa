//! The scheduling pass of the pass manager: runs [`schedule_checked`] (the best heuristic
//! schedule, never worse than program order at the sweep's bindings) and, for a symbolic plan,
//! [`schedule_variants`], and leaves them in the [`PassContext`] as [`Scheduled`].
//!
//! Then a scatter or `dynamic_update_slice` into a splat `constant` gets its own broadcast of
//! the splat in that `constant`'s slot of program order and of every schedule
//! ([`own_written_splats_in`]: chosen on the graph with the `constant`, the schedules order the
//! ops as they did, and the op writes in place).
//!
//! Invariant: the graph is left as it was apart from those splats unless
//! [`SchedulePass::apply`] is set; then its program order becomes the schedule (and
//! [`Scheduled::schedule`] is that program order).

use super::{apply_schedule, schedule_checked, schedule_variants, ScheduleOptions, ScheduleReport};
use crate::manager::{Pass, PassContext, PassError, PassResult};
use crate::memory::{program_order, Schedule};
use crate::pass_id::PassId;
use crate::writable_splats::own_written_splats_in;
use ebb_ir::{Bindings, Graph};

/// The result of [`SchedulePass`]: the chosen schedule, the report, and the other kept
/// schedules.
#[derive(Clone, Debug)]
pub struct Scheduled {
    /// The schedule chosen.
    pub schedule: Schedule,
    /// What the scheduler compared and chose.
    pub report: ScheduleReport,
    /// Other good schedules (without the chosen one) for the runtime to choose from per shape.
    pub variants: Vec<Schedule>,
}

/// The scheduling pass (see the module docs). Reports one change per op whose position
/// differs from program order and one per splat made.
#[derive(Clone, Debug, Default)]
pub struct SchedulePass {
    /// Options of the scheduler.
    pub opts: ScheduleOptions,
    /// Bindings the schedule must not be worse than program order at.
    pub sweep: Vec<Bindings>,
    /// Schedules kept in all (the chosen one included); 0 or 1 keeps only the chosen one.
    pub max_variants: usize,
    /// Also replace the graph's program order by the schedule.
    pub apply: bool,
}

impl Pass for SchedulePass {
    fn name(&self) -> &'static str {
        PassId::Schedule.name()
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<PassResult, PassError> {
        let (mut schedule, report) = schedule_checked(g, &self.opts, &self.sweep);
        let mut variants: Vec<_> = if self.max_variants > 1 {
            schedule_variants(g, &self.opts, self.max_variants)
                .into_iter()
                .map(|(_, s)| s)
                .filter(|s| *s != schedule)
                .collect()
        } else {
            Vec::new()
        };
        let made = {
            let mut all: Vec<&mut Schedule> = std::iter::once(&mut schedule)
                .chain(variants.iter_mut())
                .collect();
            own_written_splats_in(g, &mut all)
        };
        let before = program_order(g);
        let moved = before.iter().zip(&schedule).filter(|(a, b)| a != b).count();
        if self.apply && moved > 0 {
            apply_schedule(g, &schedule).map_err(|e| PassError::Failed {
                pass: PassId::Schedule.name(),
                message: e.to_string(),
            })?;
        }
        cx.insert(Scheduled {
            schedule: if self.apply {
                program_order(g)
            } else {
                schedule
            },
            report,
            variants,
        });
        Ok(PassResult::changes(moved + made))
    }
}
