//! Typed options, the one way every interface sets them: the CLI's flags, the Python package's
//! keywords and the C ABI's arguments all go through [`CompileOptionsBuilder`] (what the
//! pipeline does with a model) and [`Pricing::resolve`] (how the runtime prices decisions),
//! so a choice means the same everywhere and its defaults are decided here once.

use crate::compile::CompileOptions;
use anyhow::{anyhow, Result};
use ebb_ir::Bindings;
use ebb_passes::donate::DonatePolicy;
use ebb_passes::manager::StopAfter;
use ebb_passes::remat::OffloadPolicy;
use ebb_passes::rewrite::RuleGroup;
use ebb_plan::device::DeviceProfile;
use ebb_plan::finalize::FinalizeOptions;
use ebb_plan::format::{DecisionKind, Plan};
use std::str::FromStr;

/// One item of a rewrite list as the tools spell it: a rule group's name, or `none` (no
/// groups, not even the default of fusion).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RewriteSpec {
    /// `none`.
    None,
    /// A rule group (`sink_broadcast`, `sink_convert`, `fold_transpose_dot`, `reassociate`).
    Group(RuleGroup),
}

impl FromStr for RewriteSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "none" => Ok(RewriteSpec::None),
            name => RuleGroup::from_name(name)
                .map(RewriteSpec::Group)
                .ok_or_else(|| {
                    let known: Vec<&str> = RuleGroup::ALL.iter().map(|g| g.name()).collect();
                    format!("unknown rule group `{name}` ({}, none)", known.join(", "))
                }),
        }
    }
}

/// The rule groups a list of [`RewriteSpec`] names (`none` contributes none).
pub fn rewrite_groups(specs: &[RewriteSpec]) -> Vec<RuleGroup> {
    specs
        .iter()
        .filter_map(|s| match s {
            RewriteSpec::None => None,
            RewriteSpec::Group(g) => Some(*g),
        })
        .collect()
}

/// Builds [`CompileOptions`] from typed choices, with the pipeline's defaults — the best plan
/// Ebb makes: loop and input fusion on, donation `auto` (every input with an output of its
/// type, i.e. parameters and optimizer state, as JAX's `donate_argnums`), rule groups
/// `fold_transpose_dot` (fusion's default; none without fusion), constant-trip-count loops
/// unrolled. `fusion(false)` and `donate(DonatePolicy::Keep)` give the unfused plan that keeps
/// every input resident, to compare.
///
/// ```
/// use ebb_pipeline::CompileOptions;
/// use ebb_passes::donate::DonatePolicy;
/// let opts = CompileOptions::builder().build();
/// assert!(opts.fusion);
/// assert_eq!(opts.donate, DonatePolicy::Auto);
/// assert_eq!(opts.rewrite_groups.len(), 1); // fold_transpose_dot, fusion's default
/// let plain = CompileOptions::builder().fusion(false).donate(DonatePolicy::Keep).build();
/// assert!(plain.rewrite_groups.is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct CompileOptionsBuilder {
    fusion: bool,
    donate: DonatePolicy,
    rewrite: Option<Vec<RuleGroup>>,
    keep_loops: bool,
    device: Option<DeviceProfile>,
    bind: Option<Bindings>,
    sweep: Vec<Bindings>,
    stop_after: Option<StopAfter>,
    print_after: Vec<String>,
    max_variants: Option<usize>,
    offload: OffloadPolicy,
}

impl Default for CompileOptionsBuilder {
    /// The pipeline's defaults (see [`CompileOptionsBuilder`]).
    fn default() -> Self {
        CompileOptionsBuilder {
            fusion: true,
            donate: DonatePolicy::Auto,
            rewrite: None,
            keep_loops: false,
            device: None,
            bind: None,
            sweep: Vec::new(),
            stop_after: None,
            print_after: Vec::new(),
            max_variants: None,
            offload: OffloadPolicy::Force,
        }
    }
}

impl CompileOptions {
    /// A builder starting from the defaults (see [`CompileOptionsBuilder`]).
    pub fn builder() -> CompileOptionsBuilder {
        CompileOptionsBuilder::default()
    }
}

impl Default for CompileOptions {
    /// The builder's defaults: fusion on, donation `auto` (see [`CompileOptionsBuilder`]).
    fn default() -> Self {
        CompileOptions::builder().build()
    }
}

impl CompileOptionsBuilder {
    /// Loop and input fusion before scheduling ([`CompileOptions::fusion`]).
    pub fn fusion(mut self, on: bool) -> Self {
        self.fusion = on;
        self
    }

    /// Which inputs' buffers the step may reuse after their last read
    /// ([`CompileOptions::donate`]).
    pub fn donate(mut self, policy: DonatePolicy) -> Self {
        self.donate = policy;
        self
    }

    /// The e-graph rule groups to run, replacing the default (`fold_transpose_dot` with
    /// fusion, none without).
    pub fn rewrite(mut self, groups: Vec<RuleGroup>) -> Self {
        self.rewrite = Some(groups);
        self
    }

    /// Unroll `while` loops with a constant trip count (default) or keep them as loops
    /// ([`CompileOptions::keep_loops`]).
    pub fn unroll(mut self, on: bool) -> Self {
        self.keep_loops = !on;
        self
    }

    /// The device recorded in the plan for the runtime to price decisions with.
    pub fn device(mut self, device: Option<DeviceProfile>) -> Self {
        self.device = device;
        self
    }

    /// Fix the symbols to these values before planning (the precise-shape baseline).
    pub fn bind(mut self, b: Option<Bindings>) -> Self {
        self.bind = b;
        self
    }

    /// Extra bindings the scheduler must not be worse than program order at.
    pub fn sweep(mut self, sweep: Vec<Bindings>) -> Self {
        self.sweep = sweep;
        self
    }

    /// Stop after this many pass runs or after the named pass or group.
    pub fn stop_after(mut self, stop: Option<StopAfter>) -> Self {
        self.stop_after = stop;
        self
    }

    /// Record the graph after these passes (names as in [`crate::STOP_POINTS`], or `all`).
    pub fn print_after(mut self, passes: Vec<String>) -> Self {
        self.print_after = passes;
        self
    }

    /// What the plan does with values the user placed on the host (an offload policy's
    /// `annotate_device_placement`; default [`OffloadPolicy::Force`]: swaps the plan must
    /// take; [`CompileOptions::offload`]).
    pub fn offload(mut self, policy: OffloadPolicy) -> Self {
        self.offload = policy;
        self
    }

    /// Schedules kept in a symbolic plan for the runtime to choose from (default 4).
    pub fn max_variants(mut self, n: Option<usize>) -> Self {
        self.max_variants = n;
        self
    }

    /// Whether every choice that changes what is planned (fusion, donation, rewrites,
    /// unrolling, the offload policy) is at its default: a plan file, compiled already,
    /// accepts only these.
    pub fn is_default_pipeline(&self) -> bool {
        let d = CompileOptionsBuilder::default();
        self.fusion == d.fusion
            && self.donate == d.donate
            && self.rewrite.is_none()
            && self.keep_loops == d.keep_loops
            && self.offload == d.offload
    }

    /// The options.
    pub fn build(self) -> CompileOptions {
        let rewrite_groups = match self.rewrite {
            Some(groups) => groups,
            None if self.fusion => vec![RuleGroup::FoldTransposeDot],
            None => Vec::new(),
        };
        CompileOptions {
            bind: self.bind,
            rewrite_groups,
            sweep: self.sweep,
            stop_after: self.stop_after,
            print_after: self.print_after,
            max_variants: self.max_variants,
            fusion: self.fusion,
            keep_loops: self.keep_loops,
            donate: self.donate,
            device: self.device,
            offload: self.offload,
        }
    }
}

/// The decision kinds the runtime may choose (`--kinds`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kinds {
    /// Rematerialization only.
    Recompute,
    /// Offload to host and prefetch back only.
    Swap,
    /// Either, the cheaper per candidate on the device.
    #[default]
    Both,
}

impl Kinds {
    /// The decision kinds.
    pub fn decision_kinds(self) -> Vec<DecisionKind> {
        match self {
            Kinds::Recompute => vec![DecisionKind::Recompute],
            Kinds::Swap => vec![DecisionKind::Swap],
            Kinds::Both => vec![DecisionKind::Recompute, DecisionKind::Swap],
        }
    }
}

impl FromStr for Kinds {
    type Err = String;

    /// `recompute`, `swap` or `both`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "recompute" => Ok(Kinds::Recompute),
            "swap" => Ok(Kinds::Swap),
            "both" => Ok(Kinds::Both),
            _ => Err(format!(
                "unknown decision kinds `{s}` (recompute, swap, both)"
            )),
        }
    }
}

/// The profile named `name`: `cpu` (this machine, measured by the runtime once and cached), a
/// built-in accelerator profile, or a `custom:` specification.
///
/// # Errors
/// An unknown name or a bad `custom:` specification, prefixed `--device`.
pub fn resolve_device(name: &str) -> Result<DeviceProfile> {
    ebb_runtime::device::resolve(name).map_err(|e| anyhow!("--device: {e}"))
}

/// How decisions are priced and which kinds may be chosen (`--device`, `--kinds`).
#[derive(Clone, Debug)]
pub struct Pricing {
    /// The device whose roofline times price recompute and swap.
    pub device: DeviceProfile,
    /// Decision kinds the runtime may choose.
    pub kinds: Vec<DecisionKind>,
}

impl Pricing {
    /// The plan's device ([`Plan::device`], else the library default) with both kinds.
    pub fn for_plan(plan: &Plan) -> Pricing {
        Pricing {
            device: plan.device.clone().unwrap_or_default(),
            kinds: Kinds::Both.decision_kinds(),
        }
    }

    /// The prices for `plan`: the device named `device`, else the plan's device, else the
    /// measured `cpu`; `kinds` may be chosen.
    ///
    /// # Errors
    /// As [`resolve_device`].
    pub fn resolve(device: Option<&str>, kinds: Kinds, plan: &Plan) -> Result<Pricing> {
        let device = match (device, &plan.device) {
            (Some(name), _) => resolve_device(name)?,
            (None, Some(d)) => d.clone(),
            (None, None) => ebb_runtime::device::cpu(),
        };
        Ok(Pricing {
            device,
            kinds: kinds.decision_kinds(),
        })
    }

    /// Finalize options with these prices under `budget` bytes.
    pub fn finalize_options(&self, budget: Option<i64>, offsets: bool) -> FinalizeOptions {
        FinalizeOptions {
            budget,
            device: self.device.clone(),
            kinds: self.kinds.clone(),
            offsets,
        }
    }
}
