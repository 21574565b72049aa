//! Command-line flags shared by the subcommands that compile a model (`ebb compile`, and
//! `ebb plan`, `ebb run`, `ebb bench` when given a `.mlir`/`.onnx` file).

use crate::frontend::{is_model_file, Format};
use crate::pipeline::{CompileOptions, Pricing};
use anyhow::{bail, Result};
use ebb_passes::donate::DonatePolicy;
use ebb_passes::rewrite::RuleGroup;
use ebb_plan::device::DeviceProfile;
use ebb_plan::format::{DecisionKind, Plan};
use std::path::Path;

/// A switch (`on`/`off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// How to import a model file that `ebb plan`, `ebb run`, `ebb bench` and `ebb pack` compile
/// first (`ebb import` and `ebb compile` take the same flag).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ImportFlags {
    /// An ONNX Runtime optimizer model's training model: its trainable parameters (inputs
    /// with a `<param>_grad.accumulation.buffer` input, in input order) are the elements of
    /// the optimizer's `params`, `gradients` and moment sequences.
    #[arg(long, value_name = "TRAINING.onnx")]
    pub params_from: Option<std::path::PathBuf>,
}

impl ImportFlags {
    /// The training model to read the optimizer's sequence elements from, for `path`.
    ///
    /// # Errors
    /// `--params-from` given with a plan file, which was compiled already.
    pub fn params_from_for(&self, path: &Path, format: Option<Format>) -> Result<Option<&Path>> {
        match &self.params_from {
            Some(_) if !is_model_file(path, format) => bail!(
                "--params-from applies when compiling a model file; {} is a plan (pass it to \
                 `ebb compile`)",
                path.display()
            ),
            p => Ok(p.as_deref()),
        }
    }
}

/// Pipeline choices that change what is planned: loop unrolling, fusion, donation and e-graph
/// rewrites.
#[derive(Clone, Debug, clap::Args)]
pub struct PipelineFlags {
    /// Loop and input fusion before scheduling (`on`): planning then sees only the values
    /// that leave a fusion group; `off` (default) materializes every op result.
    #[arg(long, value_enum, default_value = "off")]
    pub fusion: OnOff,
    /// Inputs whose buffers the step may reuse after their last read (JAX's
    /// `donate_argnums`): `keep` (default: what the graph already carries; the importers do
    /// not read StableHLO's `tf.aliasing_output` yet),
    /// `none`, `auto` (every input with an output of its type, i.e. parameters and optimizer
    /// state), or a comma-separated list of input names or argument indices.
    #[arg(long, default_value = "keep", value_name = "keep|none|auto|LIST")]
    pub donate: DonatePolicy,
    /// e-graph rule groups to run before fusion (comma-separated: sink_broadcast,
    /// sink_convert, fold_transpose_dot, reassociate; `none` for none). Default: none, and
    /// `fold_transpose_dot` with `--fusion on` (XLA's transpose folding: a transposed
    /// `dot_general` operand is read through other strides instead of materialized).
    #[arg(long, value_delimiter = ',', value_name = "GROUPS")]
    pub rewrite: Option<Vec<String>>,
    /// Unroll `while` loops whose trip count is a constant (`on`, default: a `lax.scan` over
    /// layers, `fori_loop` with literal bounds, up to 64 iterations), so that liveness,
    /// scheduling and remat/swap see every iteration's tensors; `off` keeps them as loops,
    /// planned whole at their point.
    #[arg(long, value_enum, default_value = "on")]
    pub unroll: OnOff,
}

impl PipelineFlags {
    /// The compile options for `path` (default options with these choices).
    ///
    /// # Errors
    /// A flag other than its default for a plan file, which was compiled already.
    pub fn options_for(&self, path: &Path, format: Option<Format>) -> Result<CompileOptions> {
        let changed = self.fusion == OnOff::On
            || self.donate != DonatePolicy::Keep
            || self.rewrite.is_some()
            || self.unroll == OnOff::Off;
        if changed && !is_model_file(path, format) {
            bail!(
                "--fusion, --donate, --rewrite and --unroll apply when compiling a model file; \
                 {} is a plan (pass them to `ebb compile`)",
                path.display()
            );
        }
        self.apply(CompileOptions::default())
    }

    /// `base` with these choices.
    ///
    /// # Errors
    /// An unknown rule group name in `--rewrite`.
    pub fn apply(&self, base: CompileOptions) -> Result<CompileOptions> {
        let fusion = self.fusion == OnOff::On;
        let rewrite_groups = match &self.rewrite {
            None if fusion => vec![RuleGroup::FoldTransposeDot],
            None => Vec::new(),
            Some(names) => names
                .iter()
                .filter(|n| n.as_str() != "none")
                .map(|n| {
                    RuleGroup::from_name(n).ok_or_else(|| {
                        let known: Vec<&str> = RuleGroup::ALL.iter().map(|g| g.name()).collect();
                        anyhow::anyhow!(
                            "--rewrite: unknown rule group `{n}` ({}, none)",
                            known.join(", ")
                        )
                    })
                })
                .collect::<Result<Vec<_>>>()?,
        };
        Ok(CompileOptions {
            fusion,
            keep_loops: self.unroll == OnOff::Off,
            donate: self.donate.clone(),
            rewrite_groups,
            ..base
        })
    }
}

/// `--kinds`: the decision kinds the runtime may choose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kinds {
    /// Rematerialization only.
    Recompute,
    /// Offload to host and prefetch back only.
    Swap,
    /// Either, the cheaper per candidate on the device.
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

/// How the runtime prices and chooses decisions: `--device` and `--kinds`.
#[derive(Clone, Debug, clap::Args)]
pub struct DeviceFlags {
    /// Device whose roofline times price recompute and swap: `cpu` (this machine, measured
    /// once in about 0.3 s and cached), `a100-40g-pcie4`, `h100-sxm-pcie5`, `h200-pcie5`, or
    /// `custom:flops=312T,hbm=1.5T,link=32G[,half=…,vector=…,mem=…]` (rates per second,
    /// link per direction). Default: the device the plan was compiled for
    /// (`ebb compile --device`), else `cpu`.
    #[arg(long, value_name = "NAME")]
    pub device: Option<String>,
    /// Decision kinds the runtime may choose.
    #[arg(long, value_enum, default_value = "both")]
    pub kinds: Kinds,
}

impl DeviceFlags {
    /// The prices for `plan`: `--device`, else the plan's device, else the measured `cpu`.
    ///
    /// # Errors
    /// An unknown device name or a bad `custom:` specification.
    pub fn pricing(&self, plan: &Plan) -> Result<Pricing> {
        let device = match (&self.device, &plan.device) {
            (Some(name), _) => resolve_device(name)?,
            (None, Some(d)) => d.clone(),
            (None, None) => ebb_runtime::device::cpu(),
        };
        Ok(Pricing {
            device,
            kinds: self.kinds.decision_kinds(),
        })
    }
}

/// The profile named `name` (`--device`).
///
/// # Errors
/// An unknown name or a bad `custom:` specification.
pub fn resolve_device(name: &str) -> Result<DeviceProfile> {
    ebb_runtime::device::resolve(name).map_err(|e| anyhow::anyhow!("--device: {e}"))
}
