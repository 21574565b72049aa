//! Command-line flags shared by the subcommands that compile a model (`ebb compile`, and
//! `ebb plan`, `ebb run`, `ebb bench` when given a `.mlir`/`.onnx` file).

use anyhow::{bail, Result};
use ebb_import::{is_model_file, Format};
use ebb_passes::donate::DonatePolicy;
use ebb_passes::remat::OffloadPolicy;
use ebb_pipeline::options::{rewrite_groups, CompileOptionsBuilder, RewriteSpec};
use ebb_pipeline::{CompileOptions, Kinds, Pricing};
use ebb_plan::format::Plan;
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
    /// Loop and input fusion before scheduling (`on`, default): planning then sees only the
    /// values that leave a fusion group; `off` materializes every op result (to compare).
    #[arg(long, value_enum, default_value = "on")]
    pub fusion: OnOff,
    /// Inputs whose buffers the step may reuse after their last read (JAX's
    /// `donate_argnums`): `auto` (default: every input with an output of its type, i.e.
    /// parameters and optimizer state), `keep` (what the graph already carries; the importers
    /// do not read StableHLO's `tf.aliasing_output` yet), `none`, or a comma-separated list
    /// of input names or argument indices.
    #[arg(long, default_value = "auto", value_name = "keep|none|auto|LIST")]
    pub donate: DonatePolicy,
    /// e-graph rule groups to run before fusion (comma-separated: sink_broadcast,
    /// sink_convert, fold_transpose_dot, reassociate; `none` for none). Default:
    /// `fold_transpose_dot` with `--fusion on`, none with `--fusion off` (XLA's transpose folding: a transposed
    /// `dot_general` operand is read through other strides instead of materialized).
    #[arg(long, value_delimiter = ',', value_name = "GROUPS")]
    pub rewrite: Option<Vec<RewriteSpec>>,
    /// Unroll `while` loops whose trip count is a constant (`on`, default: a `lax.scan` over
    /// layers, `fori_loop` with literal bounds, up to 64 iterations), so that liveness,
    /// scheduling and remat/swap see every iteration's tensors; `off` keeps them as loops,
    /// planned whole at their point.
    #[arg(long, value_enum, default_value = "on")]
    pub unroll: OnOff,
    /// Values the model placed on the host (a JAX `jax.checkpoint` offload policy, exported
    /// for a GPU: `annotate_device_placement` to `pinned_host`): `force` (default: the plan
    /// swaps each out after its placement and back before its next use, under any budget),
    /// `hint` (swap candidates whatever their size, taken only when the budget needs them),
    /// `ignore` (plain identities).
    #[arg(long, value_enum, default_value = "force")]
    pub offload_policy: OffloadArg,
}

/// `--offload-policy` as the command line spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OffloadArg {
    /// Swaps the plan must take.
    Force,
    /// Swap candidates, taken when the budget needs them.
    Hint,
    /// Placements are identities.
    Ignore,
}

impl From<OffloadArg> for OffloadPolicy {
    fn from(a: OffloadArg) -> OffloadPolicy {
        match a {
            OffloadArg::Force => OffloadPolicy::Force,
            OffloadArg::Hint => OffloadPolicy::Hint,
            OffloadArg::Ignore => OffloadPolicy::Ignore,
        }
    }
}

impl PipelineFlags {
    /// These choices as a builder ([`CompileOptions::builder`]).
    pub fn builder(&self) -> CompileOptionsBuilder {
        let b = CompileOptions::builder()
            .fusion(self.fusion == OnOff::On)
            .donate(self.donate.clone())
            .unroll(self.unroll == OnOff::On)
            .offload(self.offload_policy.into());
        match &self.rewrite {
            Some(specs) => b.rewrite(rewrite_groups(specs)),
            None => b,
        }
    }

    /// The compile options for `path` (default options with these choices).
    ///
    /// # Errors
    /// A flag other than its default for a plan file, which was compiled already.
    pub fn options_for(&self, path: &Path, format: Option<Format>) -> Result<CompileOptions> {
        let builder = self.builder();
        if !builder.is_default_pipeline() && !is_model_file(path, format) {
            bail!(
                "--fusion, --donate, --rewrite, --unroll and --offload-policy apply when \
                 compiling a model file; \
                 {} is a plan (pass them to `ebb compile`)",
                path.display()
            );
        }
        Ok(builder.build())
    }

    /// `base` with these choices (the pipeline choices replaced, the rest of `base` kept).
    pub fn apply(&self, base: CompileOptions) -> CompileOptions {
        let o = self.builder().build();
        CompileOptions {
            fusion: o.fusion,
            keep_loops: o.keep_loops,
            donate: o.donate,
            rewrite_groups: o.rewrite_groups,
            offload: o.offload,
            ..base
        }
    }
}

/// `--kinds` as the command line spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KindsArg {
    /// Rematerialization only.
    Recompute,
    /// Offload to host and prefetch back only.
    Swap,
    /// Either, the cheaper per candidate on the device.
    Both,
}

impl From<KindsArg> for Kinds {
    fn from(k: KindsArg) -> Kinds {
        match k {
            KindsArg::Recompute => Kinds::Recompute,
            KindsArg::Swap => Kinds::Swap,
            KindsArg::Both => Kinds::Both,
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
    pub kinds: KindsArg,
}

impl DeviceFlags {
    /// The prices for `plan`: `--device`, else the plan's device, else the measured `cpu`.
    ///
    /// # Errors
    /// An unknown device name or a bad `custom:` specification.
    pub fn pricing(&self, plan: &Plan) -> Result<Pricing> {
        Pricing::resolve(self.device.as_deref(), self.kinds.into(), plan)
    }
}

/// Parses a count flag (`--repeat`, `--samples`, `--exec`, ...): an integer >= 0. With
/// `allow_hyphen_values`, `--repeat -1` reaches this parser and gets this message instead of
/// clap's "unexpected argument '-1'".
///
/// # Errors
/// The text and what is accepted.
pub fn count(s: &str) -> Result<usize, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a count (an integer from 0 to {})", usize::MAX))
}

/// Parses a `--seed`: an integer from 0 to 2^64 - 1.
///
/// # Errors
/// The text and what is accepted.
pub fn seed(s: &str) -> Result<u64, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a seed (an integer from 0 to {})", u64::MAX))
}
