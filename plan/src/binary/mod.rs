//! The binary plan file: a plan and its graph in a form that loads without the textual IR's
//! parser, the shape rules or JSON, and an optional *verification stamp*.
//!
//! # Layout
//! | bytes | field |
//! |---|---|
//! | 0..8 | [`MAGIC`] |
//! | 8..12 | [`BINARY_VERSION`], little-endian `u32` |
//! | 12..20 | [`fingerprint`] of the op set and element types this build encodes |
//! | 20..52 | the stamp: SHA-256 (FIPS 180-4) of bytes `0..20` followed by the payload, or 32 zero bytes when the file is not stamped |
//! | 52.. | the payload: [postcard](https://docs.rs/postcard) of the plan's schedule variants ([`tables`]) and its graph ([`graph`]) |
//!
//! Symbolic sizes and shapes are indices into a table of the distinct [`ebb_ir::DimExpr`]s as
//! text, each parsed once; the graph's distinct op payloads (as attribute dictionaries,
//! [`ebb_ir::op::Op::to_attrs`]), result types and locations are tables too, and its ops
//! integers naming them ([`graph`]). Enums other than op kinds and element types are stored by
//! variant index: [`BINARY_VERSION`] changes with any change to a stored type; op kinds are
//! stored by name and the [`fingerprint`] changes with the op set.
//!
//! The file also holds two shape-independent analyses of the graph, each a pure function of
//! it: every body's in-place writes ([`ebb_ir::op::in_place_writes`]) and every fusion
//! region's tile bytes ([`ebb_ir::op::fusion_tile_bytes`]). A report on a stamped file
//! ([`DecodeOptions::elide_fusion_bodies`]) takes them from the file instead of deriving
//! them, and so needs no fusion region's ops.
//!
//! # The stamp
//! A writer stamps a file only after the plan read back from exactly these bytes passed the full
//! verification against its graph (`ebb_passes::plan::verify_plan`). A loader that finds the
//! stamp equal to the digest of the bytes it read may skip re-deriving the plan from its graph:
//! the bytes are those that were verified. The stamp is an integrity check against accidental
//! change (a truncated copy, an edited or corrupted file), **not** a security measure: anyone
//! can recompute a SHA-256, so a stamp proves nothing about who wrote the file. A file whose
//! stamp does not match, or that has none, is fully verified, as a JSON plan is. Whatever the
//! stamp, the independent plan checker proves every figure reported at a binding
//! (`ebb_pipeline::prove_at`).
//!
//! Malformed or truncated files give a [`BinaryError`], never a panic.

mod exprs;
mod graph;
mod tables;

use crate::format::{Plan, PlanError, PLAN_VERSION};
use ebb_ir::Graph;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The first bytes of a binary plan file (a JSON plan starts with `{`).
pub const MAGIC: &[u8; 8] = b"EBBPLAN\x00";

/// The layout and payload version; [`decode`] rejects others.
pub const BINARY_VERSION: u32 = 2;

/// Length of the header before the payload.
const HEADER: usize = 52;

/// Where the stamp lies in the header.
const STAMP: std::ops::Range<usize> = 20..52;

/// Errors reading or writing a binary plan file.
#[derive(Debug, thiserror::Error)]
pub enum BinaryError {
    /// Shorter than the header.
    #[error("binary plan file truncated: {len} bytes, the header alone is {HEADER}")]
    Truncated {
        /// The file's length.
        len: usize,
    },
    /// Not a binary plan file.
    #[error("not a binary plan file (it does not start with the plan magic bytes)")]
    Magic,
    /// A layout version this build cannot read.
    #[error("binary plan version {found} is not supported (expected {BINARY_VERSION}); re-run `ebb compile`")]
    Version {
        /// The version in the file.
        found: u32,
    },
    /// Written by a build with another op set or element types.
    #[error("the binary plan was written by an ebb with another op set (fingerprint {found}, this build {expected}); re-run `ebb compile`")]
    Fingerprint {
        /// The fingerprint in the file, hex.
        found: String,
        /// This build's, hex.
        expected: String,
    },
    /// The payload does not decode (truncated, corrupted, or bytes left over).
    #[error("binary plan payload: {0}")]
    Payload(String),
    /// The graph does not rebuild (see [`graph`]).
    #[error("binary plan graph: {0}")]
    Graph(String),
    /// The plan has another version or an index out of range ([`Plan::validate_indices`]).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The plan cannot be written in this form.
    #[error("cannot write the binary plan: {0}")]
    Encode(String),
}

/// What a file's stamp says about its bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Stamp {
    /// Not stamped (32 zero bytes).
    None,
    /// The stamp is the digest of the bytes read: they are the bytes that were verified.
    Matches,
    /// The stamp differs from the digest: the bytes changed after they were verified.
    Differs,
}

/// A decoded binary plan file.
#[derive(Debug)]
pub struct Decoded {
    /// The plan, without `graph_ir` (its graph is [`Decoded::graph`]; `graph_digest` is the
    /// recorded digest of the graph's text).
    pub plan: Plan,
    /// The plan's graph, built as the textual IR's parser builds it (not verified); with
    /// [`Decoded::elided`], its fusion regions are empty.
    pub graph: Graph,
    /// Whether the bytes carry a matching verification stamp.
    pub stamp: Stamp,
    /// Whether the fusion regions of [`Decoded::graph`] were left empty
    /// ([`DecodeOptions::elide_fusion_bodies`]).
    pub elided: bool,
}

/// How [`decode_with`] builds the graph.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeOptions {
    /// For a report on a file whose stamp matches, and only then: every graph body's in-place
    /// writes and every fusion region's tile bytes are taken from the file and remembered
    /// with the graph ([`ebb_ir::op::remember_in_place_writes`],
    /// [`ebb_ir::op::remember_fusion_tile_bytes`]), and each fusion region is left empty (its
    /// name only). What reads a fusion op's region through those two analyses (the
    /// memory model's region transients, the plan checker) gets what it would have derived;
    /// anything else that reads a fusion region (printing, verifying or executing the graph)
    /// must not be given such a graph.
    pub elide_fusion_bodies: bool,
}

/// The whole payload.
#[derive(Serialize, Deserialize)]
struct Payload<'a> {
    /// Distinct symbolic expressions as text ([`exprs`]).
    exprs: Vec<String>,
    /// Distinct symbol scopes as JSON (their serde form skips defaults, which a format without
    /// field names cannot read back).
    scopes: Vec<String>,
    variants: Vec<tables::BinVariant>,
    #[serde(borrow)]
    graph: graph::BinGraph<'a>,
}

/// `items` mapped by `f`, the vector allocated once at their number (collecting into a
/// `Result` would grow it by doubling: that iterator's size hint has no lower bound).
fn try_map<I: IntoIterator, U>(
    items: I,
    f: impl FnMut(I::Item) -> Result<U, BinaryError>,
) -> Result<Vec<U>, BinaryError>
where
    I::IntoIter: ExactSizeIterator,
{
    let items = items.into_iter();
    let mut out = Vec::with_capacity(items.len());
    for u in items.map(f) {
        out.push(u?);
    }
    Ok(out)
}

/// Whether `bytes` start with [`MAGIC`].
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The first 8 bytes of the SHA-256 of [`PLAN_VERSION`], the version of the stored analyses
/// ([`ebb_ir::op::STORED_ANALYSES_VERSION`]), every op kind's name and every element type's
/// name, in order: changes when this build encodes ops or types differently or derives the
/// stored analyses differently.
pub fn fingerprint() -> [u8; 8] {
    let mut h = Sha256::new();
    h.update(b"ebb binary plan\n");
    h.update(PLAN_VERSION.to_le_bytes());
    h.update(ebb_ir::op::STORED_ANALYSES_VERSION.to_le_bytes());
    for k in ebb_ir::OpKind::ALL {
        h.update(k.name().as_bytes());
        h.update(b"\n");
    }
    for d in ebb_ir::DType::ALL {
        h.update(format!("{d:?}\n").as_bytes());
    }
    let mut out = [0; 8];
    out.copy_from_slice(&h.finalize()[..8]);
    out
}

/// The binary file of `plan` with its graph `graph` (the graph `plan.graph_ir` parses to),
/// not stamped ([`stamp`] stamps it once its read-back is verified).
///
/// # Errors
/// [`BinaryError::Encode`] when an alternative has alternatives of its own or the encoding
/// fails.
pub fn encode(plan: &Plan, graph: &Graph) -> Result<Vec<u8>, BinaryError> {
    let mut ix = exprs::Interner::default();
    let variants = tables::variants_of(plan, &mut ix)?;
    let mut encoded = graph::Encoded::of(graph, &mut ix)?;
    let graph = graph::BinGraph::of(&mut encoded);
    let (exprs, scopes) = ix.into_lists();
    let payload = Payload {
        exprs,
        scopes,
        variants,
        graph,
    };
    let mut out = Vec::with_capacity(1 << 20);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&BINARY_VERSION.to_le_bytes());
    out.extend_from_slice(&fingerprint());
    out.extend_from_slice(&[0; 32]);
    postcard::to_io(&payload, &mut out).map_err(|e| BinaryError::Encode(e.to_string()))?;
    Ok(out)
}

/// Stamps a file made by [`encode`]: records the digest of its bytes as verified. Call it only
/// once the plan [`decode`]d from exactly these bytes has passed the full verification.
///
/// # Errors
/// [`BinaryError::Truncated`] or [`BinaryError::Magic`] for bytes that are not such a file.
pub fn stamp(bytes: &mut [u8]) -> Result<(), BinaryError> {
    header(bytes)?;
    let d = digest(bytes);
    bytes[STAMP].copy_from_slice(&d);
    Ok(())
}

/// Checks the header of `bytes`.
fn header(bytes: &[u8]) -> Result<(), BinaryError> {
    if bytes.len() < HEADER {
        return if bytes.len() >= MAGIC.len() && !is_binary(bytes) {
            Err(BinaryError::Magic)
        } else {
            Err(BinaryError::Truncated { len: bytes.len() })
        };
    }
    if !is_binary(bytes) {
        return Err(BinaryError::Magic);
    }
    let found = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if found != BINARY_VERSION {
        return Err(BinaryError::Version { found });
    }
    let expected = fingerprint();
    if bytes[12..20] != expected {
        return Err(BinaryError::Fingerprint {
            found: hex(&bytes[12..20]),
            expected: hex(&expected),
        });
    }
    Ok(())
}

/// SHA-256 of the header before the stamp, then the payload.
fn digest(bytes: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(&bytes[..STAMP.start]);
    h.update(&bytes[HEADER..]);
    h.finalize().into()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Reads a binary plan file: header, stamp, payload, graph, and the plan's version and index
/// ranges ([`Plan::validate_indices`]). Neither the graph nor the plan is verified here.
///
/// # Errors
/// A [`BinaryError`] for any malformed, truncated or foreign file.
pub fn decode(bytes: &[u8]) -> Result<Decoded, BinaryError> {
    decode_with(bytes, DecodeOptions::default())
}

/// [`decode`] with `options` (see [`DecodeOptions`]).
///
/// # Errors
/// As [`decode`].
pub fn decode_with(bytes: &[u8], options: DecodeOptions) -> Result<Decoded, BinaryError> {
    header(bytes)?;
    let recorded = &bytes[STAMP];
    let stamp = if recorded.iter().all(|&b| b == 0) {
        Stamp::None
    } else if digest(bytes)[..] == recorded[..] {
        Stamp::Matches
    } else {
        Stamp::Differs
    };
    let (payload, rest): (Payload, &[u8]) = postcard::take_from_bytes(&bytes[HEADER..])
        .map_err(|e| BinaryError::Payload(e.to_string()))?;
    if !rest.is_empty() {
        return Err(BinaryError::Payload(format!(
            "{} bytes after the end of the plan",
            rest.len()
        )));
    }
    let t = exprs::Tables::parse(payload.exprs, payload.scopes)?;
    let plan = tables::plan_of(payload.variants, &t)?;
    if plan.version != PLAN_VERSION {
        return Err(PlanError::Version {
            found: plan.version,
        }
        .into());
    }
    plan.validate_indices()?;
    let elided = options.elide_fusion_bodies && stamp == Stamp::Matches;
    let graph = payload.graph.into_graph(&t, elided)?;
    Ok(Decoded {
        plan,
        graph,
        stamp,
        elided,
    })
}
