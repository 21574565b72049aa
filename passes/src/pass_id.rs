//! The names of Ebb's passes in one table, [`PassId`]: the registry
//! ([`crate::registry::pass_by_name`]), every pass's [`Pass::name`](crate::manager::Pass::name),
//! the compile pipeline's stop points and the CLI's `--print-after` all read them here.
//!
//! Invariant: every pass of [`PassId::ALL`] built by [`crate::registry::pass`] reports its id's
//! name (test `registry::tests`).

use std::fmt;

/// One of Ebb's passes, by identity; [`PassId::name`] is how the command line and reports
/// spell it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum PassId {
    /// Loop unrolling ([`crate::canon::Unroll`]).
    Unroll,
    /// Dead-code elimination ([`crate::canon::Dce`]).
    Dce,
    /// Common-subexpression elimination ([`crate::canon::Cse`]).
    Cse,
    /// Constant folding ([`crate::canon::Fold`]).
    Fold,
    /// Forwarding of slices ([`crate::canon::ForwardSlices`]).
    ForwardSlices,
    /// Input donation ([`crate::donate::DonatePass`]).
    Donate,
    /// E-graph rewrites ([`crate::rewrite::RewritePass`]).
    Rewrite,
    /// Loop-invariant code motion ([`crate::licm::Licm`]).
    Licm,
    /// Loop-carried dot-accumulates ([`crate::dot_accumulate::DotAccumulate`]).
    DotAccumulate,
    /// Loop and input fusion ([`crate::fuse::FusePass`]).
    Fuse,
    /// Op scheduling, an analysis ([`crate::schedule::SchedulePass`]).
    Schedule,
    /// The memory plan, an analysis ([`crate::plan::PlanPass`]).
    Plan,
}

impl PassId {
    /// Every pass, in the order the registry lists them.
    pub const ALL: [PassId; 12] = [
        PassId::Unroll,
        PassId::Dce,
        PassId::Cse,
        PassId::Fold,
        PassId::ForwardSlices,
        PassId::Donate,
        PassId::Rewrite,
        PassId::Licm,
        PassId::DotAccumulate,
        PassId::Fuse,
        PassId::Schedule,
        PassId::Plan,
    ];

    /// The pass's name (`unroll`, `dce`, `cse`, `fold`, `forward_slices`, `donate`, `rewrite`,
    /// `licm`, `dot_accumulate`, `fuse`, `schedule`, `plan`).
    pub const fn name(self) -> &'static str {
        match self {
            PassId::Unroll => "unroll",
            PassId::Dce => "dce",
            PassId::Cse => "cse",
            PassId::Fold => "fold",
            PassId::ForwardSlices => "forward_slices",
            PassId::Donate => "donate",
            PassId::Rewrite => "rewrite",
            PassId::Licm => "licm",
            PassId::DotAccumulate => "dot_accumulate",
            PassId::Fuse => "fuse",
            PassId::Schedule => "schedule",
            PassId::Plan => "plan",
        }
    }

    /// The pass called `name`, if any.
    pub fn from_name(name: &str) -> Option<PassId> {
        PassId::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Every name, comma-separated, in [`PassId::ALL`]'s order (for messages).
    pub fn known() -> String {
        PassId::ALL.map(PassId::name).join(", ")
    }
}

impl fmt::Display for PassId {
    /// [`PassId::name`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
