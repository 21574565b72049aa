//! The registry of passes by name: what the `ebb` CLI and the compile pipeline can ask the
//! [`PassManager`] to run. It depends on the manager and on every registered pass; neither
//! depends on it, which keeps the module graph acyclic.

use crate::canon::{Cse, Dce, Fold, ForwardSlices, Unroll};
use crate::manager::{Pass, PassError, PassManager};
use crate::pass_id::PassId;
use crate::plan::PlanPass;
use crate::rewrite::{RewritePass, RuleGroup};
use crate::schedule::SchedulePass;

/// The pass `id` with its default settings: the canonicalization passes, `rewrite` (every rule
/// group), `donate` (the `auto` policy), `fuse` (loop fusion), `schedule` (analysis: leaves a
/// schedule in the context) and `plan` (analysis: needs a schedule, leaves a plan).
pub fn pass(id: PassId) -> Box<dyn Pass> {
    match id {
        PassId::Unroll => Box::new(Unroll::default()),
        PassId::ForwardSlices => Box::new(ForwardSlices),
        PassId::Dce => Box::new(Dce),
        PassId::Cse => Box::new(Cse),
        PassId::Fold => Box::new(Fold::default()),
        PassId::Donate => Box::new(crate::donate::DonatePass {
            policy: crate::donate::DonatePolicy::Auto,
        }),
        PassId::Rewrite => Box::new(RewritePass {
            groups: RuleGroup::ALL.to_vec(),
            ..RewritePass::default()
        }),
        PassId::Licm => Box::new(crate::licm::Licm),
        PassId::DotAccumulate => Box::new(crate::dot_accumulate::DotAccumulate),
        PassId::Fuse => Box::new(crate::fuse::FusePass),
        PassId::Schedule => Box::new(SchedulePass::default()),
        PassId::Plan => Box::new(PlanPass::default()),
    }
}

/// The pass called `name` ([`PassId::name`]) with its default settings ([`pass`]).
///
/// Errors: [`PassError::UnknownPass`] for any other name.
pub fn pass_by_name(name: &str) -> Result<Box<dyn Pass>, PassError> {
    PassId::from_name(name)
        .map(pass)
        .ok_or_else(|| PassError::UnknownPass {
            name: name.to_string(),
            known: PassId::known(),
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
