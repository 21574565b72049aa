//! Plan files: writing a plan as JSON or in the binary form ([`ebb_plan::binary`]), and
//! reading either back with its graph, verified.
//!
//! A JSON plan, and a binary plan without a matching stamp, is verified in full against its
//! embedded graph ([`ebb_passes::plan::verify_plan`]). A binary plan whose stamp matches its
//! bytes was verified in full when it was written ([`plan_file_bytes`]); loading it runs only
//! the structural checks ([`ebb_passes::plan::check_stamped_structure`]). Either way the
//! commands that report or execute at a binding prove it there with the independent checker
//! ([`crate::prove_at`]).

use anyhow::{Context, Result};
use ebb_ir::Graph;
use ebb_plan::binary::{self, Stamp};
use ebb_plan::format::Plan;
use std::path::Path;

/// The form of a plan file.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum PlanFormat {
    /// Pretty-printed JSON with the graph as textual IR ([`Plan::to_json`]).
    #[default]
    Json,
    /// The binary form, stamped as verified ([`ebb_plan::binary`]).
    Binary,
}

/// The bytes of `plan`'s file in `format`. A binary file is stamped only after the plan and
/// graph decoded from exactly these bytes pass the full verification
/// ([`ebb_passes::plan::verify_plan`]); that costs about what loading an unstamped plan does.
///
/// # Errors
/// A plan without its embedded graph, a graph that does not parse or verify, an encoding
/// error, or a plan that does not verify once read back.
pub fn plan_file_bytes(plan: &Plan, format: PlanFormat) -> Result<Vec<u8>> {
    match format {
        PlanFormat::Json => Ok(plan.to_json().into_bytes()),
        PlanFormat::Binary => {
            let g = crate::plan_graph(plan)?;
            let mut bytes = binary::encode(plan, &g)?;
            let decoded = binary::decode(&bytes).context("reading the binary plan back")?;
            verify_decoded_in_full(decoded).context("the binary plan read back does not verify")?;
            binary::stamp(&mut bytes)?;
            Ok(bytes)
        }
    }
}

/// Reads a plan file (JSON or binary, told apart by its first bytes) and verifies it (see the
/// module docs). With `with_text`, a binary plan gets its graph's text in `graph_ir` too
/// (printed from the graph), for callers that hand the plan to something that parses it (the
/// runtime); without, its `graph_ir` may be `None`.
///
/// # Errors
/// Unreadable file, invalid JSON or binary (typed errors, never a panic), or a failed
/// verification, each with the path.
pub fn read_plan_file(path: &Path, with_text: bool) -> Result<(Plan, Graph)> {
    read(path, with_text, false)
}

/// [`read_plan_file`] for a report on the plan at bindings (`ebb plan`): a binary plan whose
/// stamp matches is decoded with [`binary::DecodeOptions::elide_fusion_bodies`], so its graph's
/// fusion regions are empty and their in-place writes and tile bytes come from the file. Such
/// a graph serves the memory model and the plan checker ([`crate::plan_report_proven_on`]),
/// and nothing that prints, verifies or executes it. Other files load as with
/// [`read_plan_file`].
///
/// # Errors
/// As [`read_plan_file`].
pub fn read_plan_file_for_report(path: &Path) -> Result<(Plan, Graph)> {
    read(path, false, true)
}

/// [`read_plan_file`], fusion regions elided when `elide` allows.
fn read(path: &Path, with_text: bool, elide: bool) -> Result<(Plan, Graph)> {
    let file = path.display().to_string();
    // The errors of `ebb_import::text::read`, which reads a JSON plan.
    let bytes =
        ebb_ir::fsio::read_regular(path).map_err(|error| ebb_import::text::TextError::Io {
            path: file.clone(),
            error,
        })?;
    if !binary::is_binary(&bytes) {
        let text = ebb_import::text::decode(bytes, &file)?;
        let plan = Plan::from_json(&text).with_context(|| file.clone())?;
        let g = ebb_passes::plan::verify_plan(&plan)
            .with_context(|| format!("{file}: the plan does not verify"))?;
        return Ok((plan, g));
    }
    let options = binary::DecodeOptions {
        elide_fusion_bodies: elide,
    };
    let decoded = binary::decode_with(&bytes, options).with_context(|| file.clone())?;
    let stamp = decoded.stamp;
    let (mut plan, g) = if stamp == Stamp::Matches {
        ebb_passes::plan::check_stamped_structure(&decoded.graph, &decoded.plan)
            .with_context(|| format!("{file}: the plan does not match its graph"))?;
        (decoded.plan, decoded.graph)
    } else {
        verify_decoded_in_full(decoded).with_context(|| match stamp {
            Stamp::Differs => format!(
                "{file}: the plan does not verify (its bytes changed after it was stamped as verified)"
            ),
            _ => format!("{file}: the plan does not verify"),
        })?
    };
    if with_text && plan.graph_ir.is_none() {
        plan.graph_ir = Some(ebb_ir::text::print(&g));
    }
    Ok((plan, g))
}

/// The full verification of a decoded binary plan, as of a JSON one: the graph passes the IR
/// verifier, its text has the recorded digest, and [`ebb_passes::plan::verify_plan`] accepts
/// the plan with that text embedded. Returns the plan (with `graph_ir`) and the verified graph.
fn verify_decoded_in_full(d: binary::Decoded) -> Result<(Plan, Graph)> {
    let binary::Decoded {
        mut plan, graph, ..
    } = d;
    ebb_ir::verify::verify(&graph).map_err(|e| anyhow::anyhow!("embedded graph: {e}"))?;
    plan.graph_ir = Some(ebb_ir::text::print(&graph));
    let g = ebb_passes::plan::verify_plan(&plan)?;
    Ok((plan, g))
}
