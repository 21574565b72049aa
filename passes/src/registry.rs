//! The registry of passes by name: what the `ebb` CLI and the compile pipeline can ask the
//! [`PassManager`] to run. It depends on the manager and on every registered pass; neither
//! depends on it, which keeps the module graph acyclic.

use crate::canon::{Cse, Dce, Fold, ForwardSlices, Unroll};
use crate::manager::{Pass, PassError, PassManager};
use crate::plan::PlanPass;
use crate::rewrite::{RewritePass, RuleGroup};
use crate::schedule::SchedulePass;

/// Names accepted by [`pass_by_name`]: the canonicalization passes, `rewrite` (every rule
/// group), `donate` (the `auto` policy), `fuse` (loop fusion), `schedule` (analysis: leaves a schedule in the context) and `plan` (analysis: needs
/// a schedule, leaves a plan).
pub const KNOWN_PASSES: &[&str] = &[
    "unroll",
    "dce",
    "cse",
    "fold",
    "forward_slices",
    "donate",
    "rewrite",
    "fuse",
    "schedule",
    "plan",
];

/// The pass called `name` (one of [`KNOWN_PASSES`]) with its default settings.
///
/// Errors: [`PassError::UnknownPass`] for any other name.
pub fn pass_by_name(name: &str) -> Result<Box<dyn Pass>, PassError> {
    Ok(match name {
        "unroll" => Box::new(Unroll::default()),
        "forward_slices" => Box::new(ForwardSlices),
        "dce" => Box::new(Dce),
        "cse" => Box::new(Cse),
        "fold" => Box::new(Fold::default()),
        "donate" => Box::new(crate::donate::DonatePass {
            policy: crate::donate::DonatePolicy::Auto,
        }),
        "rewrite" => Box::new(RewritePass {
            groups: RuleGroup::ALL.to_vec(),
            ..RewritePass::default()
        }),
        "fuse" => Box::new(crate::fuse::FusePass),
        "schedule" => Box::new(SchedulePass::default()),
        "plan" => Box::new(PlanPass::default()),
        _ => {
            return Err(PassError::UnknownPass {
                name: name.to_string(),
                known: KNOWN_PASSES.join(", "),
            })
        }
    })
}

impl PassManager {
    /// A manager running the passes called `names` (see [`pass_by_name`]), in order.
    ///
    /// Errors: [`PassError::UnknownPass`] naming the first unknown name.
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Result<Self, PassError> {
        let mut m = PassManager::new();
        for n in names {
            m.push(pass_by_name(n.as_ref())?);
        }
        Ok(m)
    }
}
