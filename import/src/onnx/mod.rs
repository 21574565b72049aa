//! ONNX front end: imports an ONNX training graph (a `torch.onnx.export(dynamo=True)` train
//! step, or ONNX Runtime training artifacts with `com.microsoft` ops) into an
//! [`ebb_ir::Graph`] with symbolic shapes, so the whole planner and the CPU executor apply
//! unchanged.
//!
//! Steps:
//! 1. The file is decoded as a `ModelProto` with `prost` ([`proto`]); initializers are decoded
//!    from `raw_data`, the typed fields or external data ([`tensor`]).
//! 2. Graph inputs become `input` nodes; their `dim_param`s are parsed as dimension
//!    expressions over named symbols ([`dims`]), declared in the graph's scope with range
//!    `>= 1`. Unnamed dynamic dimensions become fresh `_unkN` symbols, with a warning, and are
//!    counted in [`ImportStats::unresolved_dims`].
//! 3. Each node is lowered by the lowering registered for its (domain, op type) (`onnx/ops`) into
//!    Ebb's StableHLO-named primitive ops; every result type is inferred by
//!    [`ebb_ir::shape::infer`]. Integer shape computations (`Shape`, `Gather`, `Concat`,
//!    arithmetic, ...) are evaluated symbolically, so `Reshape`, `Expand`, `ConstantOfShape`,
//!    `Range` get symbolic static shapes.
//! 4. Every inferred type is checked against the type the model declares for the value
//!    (`value_info`, graph outputs); a contradiction is [`OnnxError::ShapeMismatch`] naming the
//!    value and both types.
//! 5. The graph is verified ([`ebb_ir::verify::verify`]).
//!
//! Nested graphs (`If`/`Loop`/`Scan` bodies) are decoded and reported in
//! [`ImportStats::nested_graphs`] and in the unsupported-op error of their node.

mod ctx;
pub mod dims;
pub mod error;
mod functions;
mod ops;
pub mod params_from;
pub mod proto;
mod subgraph;
pub mod tensor;

pub use error::{NodeLoc, OnnxError};
pub use ops::supported as supported_ops;

/// Internal helpers, public for the tests in `import/tests/` only.
#[doc(hidden)]
pub mod internals {
    pub use super::ops::shape::exact_div;
    pub use super::ops::symbolic::{binary, concat, gather, slice_indices};
}

use crate::ImportStats;
use ctx::{domain_name, Cx, Val, R};
use dims::{Aliases, DimCheck};
use ebb_ir::{DType, DimExpr, Graph, TensorType};
use prost::Message;
use proto::{type_proto, GraphProto, ModelProto, NodeProto, ValueInfoProto};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::rc::Rc;

/// Options of the ONNX importer.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Element types of tensor-sequence graph inputs, by input name. ONNX Runtime's optimizer
    /// model takes the parameters, gradients and moments as sequences whose element shapes
    /// the model does not state (they are the training model's parameter shapes); each element
    /// becomes a graph input named `<input>[j]`.
    pub sequence_elements: BTreeMap<String, Vec<TensorType>>,
    /// Element types of the sequence inputs not in `sequence_elements`: the training model's
    /// trainable parameters ([`params_from::options_from_training`], `--params-from`).
    pub default_sequence_elements: Option<Vec<TensorType>>,
}

/// Reads and imports the ONNX model at `path` (external data is read relative to its
/// directory).
///
/// Errors: [`OnnxError`] — unreadable file, protobuf decode errors (truncated files),
/// unparseable `dim_param`s, unsupported ops (naming op, domain and node), shape
/// contradictions, invalid graphs.
pub fn import_file(path: &Path) -> Result<(Graph, ImportStats), OnnxError> {
    import_file_with(path, &ImportOptions::default())
}

/// [`import_file`] with options.
pub fn import_file_with(
    path: &Path,
    opts: &ImportOptions,
) -> Result<(Graph, ImportStats), OnnxError> {
    let bytes = ebb_ir::fsio::read_regular(path).map_err(|source| OnnxError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let model = decode_model(&bytes, &path.display().to_string())?;
    import_model(&model, &path.display().to_string(), path.parent(), opts)
}

/// Imports an ONNX model from its serialized bytes; `file` names it in errors, `model_dir` is
/// where external data files are looked up.
pub fn import_bytes(
    bytes: &[u8],
    file: &str,
    model_dir: Option<&Path>,
) -> Result<(Graph, ImportStats), OnnxError> {
    let model = decode_model(bytes, file)?;
    import_model(&model, file, model_dir, &ImportOptions::default())
}

/// Every node of the model at `path` whose op Ebb does not lower, by `domain::OpType`, with
/// its count and the first node's name (nested graphs and model-local functions included);
/// empty when every op is supported. For triage: `ebb import --allow-unsupported`.
///
/// Errors: unreadable file, protobuf decode errors.
pub fn unsupported_ops(path: &Path) -> Result<Vec<crate::UnsupportedUse>, OnnxError> {
    fn walk(
        nodes: &[NodeProto],
        fs: &[proto::FunctionProto],
        out: &mut Vec<crate::UnsupportedUse>,
    ) {
        for (k, n) in nodes.iter().enumerate() {
            let op_type = n.op_type.clone().unwrap_or_default();
            let domain = ctx::domain_name(n.domain.as_deref()).to_string();
            if ops::lookup(&domain, &op_type).is_none() && !functions::is_call(n, fs) {
                crate::count_unsupported(out, format!("{domain}::{op_type}"), || {
                    n.name
                        .clone()
                        .filter(|s| !s.is_empty())
                        .unwrap_or(format!("#{k}"))
                });
            }
            for (_, g) in nested_graphs(n) {
                walk(&g.node, fs, out);
            }
        }
    }
    let bytes = ebb_ir::fsio::read_regular(path).map_err(|source| OnnxError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let model = decode_model(&bytes, &path.display().to_string())?;
    let mut out = Vec::new();
    if let Some(g) = &model.graph {
        walk(&g.node, &model.functions, &mut out);
    }
    for f in &model.functions {
        walk(&f.node, &model.functions, &mut out);
    }
    Ok(out)
}

/// Decodes a serialized `ModelProto` (for tools and tests that edit models).
///
/// Errors: [`OnnxError::Decode`] for bytes that are not a valid model.
pub fn decode_model(bytes: &[u8], file: &str) -> Result<ModelProto, OnnxError> {
    ModelProto::decode(bytes).map_err(|source| OnnxError::Decode {
        file: file.to_string(),
        source,
    })
}

/// Serializes a `ModelProto`.
pub fn encode_model(model: &ModelProto) -> Vec<u8> {
    model.encode_to_vec()
}

/// Imports a decoded model (see the module docs).
pub fn import_model(
    model: &ModelProto,
    file: &str,
    model_dir: Option<&Path>,
    opts: &ImportOptions,
) -> Result<(Graph, ImportStats), OnnxError> {
    let gp = model.graph.as_ref().ok_or_else(|| OnnxError::Structure {
        file: file.into(),
        msg: "the model has no graph".into(),
    })?;
    let expanded;
    let gp = if model.functions.is_empty() {
        gp
    } else {
        expanded = functions::expand(gp, &model.functions, file)?;
        &expanded
    };
    let mut opsets = HashMap::new();
    for o in &model.opset_import {
        opsets.insert(
            domain_name(o.domain.as_deref()).to_string(),
            o.version.unwrap_or(0),
        );
    }
    check_opsets(&opsets, gp, file)?;
    let name = gp
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or("main".into());
    let mut cx = Cx {
        file: file.to_string(),
        model_dir: model_dir.map(|p| p.to_path_buf()),
        g: Graph::new(&name),
        vals: HashMap::new(),
        opsets,
        node: NodeLoc::default(),
        warnings: Vec::new(),
        in_place: Vec::new(),
        rng_seed: None,
        depth: 0,
    };
    let mut stats = ImportStats::default();
    import_graph(&mut cx, gp, &mut stats, opts)?;
    ebb_ir::verify::verify(&cx.g).map_err(|source| OnnxError::Verify {
        file: file.into(),
        source: Box::new(source),
    })?;
    stats.unresolved_dims = count_unknown_dims(&cx.g);
    stats.warnings = std::mem::take(&mut cx.warnings);
    Ok((cx.g, stats))
}

fn import_graph(
    cx: &mut Cx,
    gp: &GraphProto,
    stats: &mut ImportStats,
    opts: &ImportOptions,
) -> R<()> {
    if !gp.sparse_initializer.is_empty() {
        return Err(cx.structure("sparse initializers are not supported"));
    }
    let mut declared: HashMap<&str, &ValueInfoProto> = HashMap::new();
    for vi in gp.value_info.iter().chain(&gp.output) {
        if let Some(n) = vi.name.as_deref() {
            declared.insert(n, vi);
        }
    }
    for t in &gp.initializer {
        let name = t.name.clone().unwrap_or_default();
        let (dtype, dims, lit) = tensor::decode(t, cx.model_dir.as_deref())
            .map_err(|m| cx.structure(format!("initializer `{name}`: {m}")))?;
        let ty = TensorType::fixed(dtype, &dims);
        cx.vals.insert(name, ops::literal_val(ty, lit));
    }
    let mut unknown = 0usize;
    for vi in &gp.input {
        let name = vi.name.clone().unwrap_or_default();
        if cx.vals.contains_key(&name) {
            continue; // an initializer listed as an input (IR < 4): its default value is used
        }
        if let Some(Some(type_proto::Value::SequenceType(_))) = vi.r#type.as_ref().map(|t| &t.value)
        {
            let elems = opts
                .sequence_elements
                .get(&name)
                .or(opts.default_sequence_elements.as_ref())
                .ok_or_else(|| {
                    cx.structure(format!(
                        "graph input `{name}` is a tensor sequence whose element types the model does not state (an ONNX Runtime optimizer model): pass its training model, `--params-from TRAINING.onnx` (ImportOptions::sequence_elements in the API)"
                    ))
                })?;
            let vals = elems
                .iter()
                .enumerate()
                .map(|(j, t)| Val::t(cx.g.add_input(&format!("{name}[{j}]"), t.clone())))
                .collect();
            cx.vals.insert(
                name,
                Val {
                    seq: Some(Rc::new(vals)),
                    ..Default::default()
                },
            );
            continue;
        }
        let ty = input_type(cx, vi, &mut unknown)?;
        let v = cx.g.add_input(&name, ty);
        cx.vals.insert(name, Val::t(v));
    }
    let mut aliases = Aliases::default();
    for (k, n) in gp.node.iter().enumerate() {
        record_nested(n, stats);
        lower_node(cx, n, k)?;
        check_outputs(cx, n, &declared, &mut aliases)?;
        *stats
            .source_ops
            .entry(format!(
                "{}::{}",
                domain_name(n.domain.as_deref()),
                n.op_type.as_deref().unwrap_or("")
            ))
            .or_default() += 1;
    }
    cx.node = NodeLoc::default();
    let mut outs = Vec::new();
    let mut names = Vec::new();
    for vi in &gp.output {
        let name = vi.name.clone().unwrap_or_default();
        if !cx.vals.contains_key(&name) {
            return Err(cx.structure(format!("graph output `{name}` is never produced")));
        }
        outs.push(cx.tensor(&name)?);
        names.push(name);
    }
    for (name, v) in std::mem::take(&mut cx.in_place) {
        outs.push(v);
        names.push(format!("{name}@after"));
    }
    cx.g.set_outputs(outs, names);
    Ok(())
}

/// The Ebb type of a graph input's declared type.
fn input_type(cx: &mut Cx, vi: &ValueInfoProto, unknown: &mut usize) -> R<TensorType> {
    let name = vi.name.as_deref().unwrap_or("");
    let (dtype, dims) = declared_type(cx, vi)?
        .ok_or_else(|| cx.structure(format!("graph input `{name}` has no tensor type")))?;
    let mut shape = Vec::new();
    for (j, d) in dims.into_iter().enumerate() {
        shape.push(match d {
            Decl::Value(k) if k < 0 => {
                return Err(cx.structure(format!(
                    "graph input `{name}` dimension {j}: dim_value {k} is negative"
                )))
            }
            Decl::Value(k) => DimExpr::constant(k),
            Decl::Param(p) => {
                let bad = |msg: String| OnnxError::DimParam {
                    file: cx.file.clone(),
                    value: name.into(),
                    dim: j,
                    param: p.clone(),
                    msg,
                };
                let e = dims::parse_dim_param(&p).map_err(bad)?;
                if let Some(k) = e.as_const().filter(|&k| k < 0) {
                    return Err(bad(format!("the dimension is negative ({k})")));
                }
                dims::declare_all(&mut cx.g.scope, &e);
                e
            }
            Decl::Unknown => {
                let s = format!("{}{}", dims::UNKNOWN_PREFIX, *unknown);
                *unknown += 1;
                cx.warnings.push(format!(
                    "graph input `{name}` dimension {j} has neither dim_value nor dim_param; named `{s}` (unresolved)"
                ));
                DimExpr::symbol(&cx.g.scope.declare(&s))
            }
        });
    }
    let t = TensorType::new(dtype, shape);
    if t.checked_size_bytes().is_err() {
        return Err(cx.structure(format!(
            "graph input `{name}` of type {t}: its size in bytes overflows 64-bit integers"
        )));
    }
    Ok(t)
}

/// One declared dimension.
enum Decl {
    Value(i64),
    Param(String),
    Unknown,
}

/// The element type and dimensions `vi` declares, `None` without a shape. Errors for
/// non-tensor types and unsupported element types.
fn declared_type(cx: &Cx, vi: &ValueInfoProto) -> R<Option<(DType, Vec<Decl>)>> {
    use proto::tensor_shape_proto::dimension::Value as D;
    let name = vi.name.as_deref().unwrap_or("");
    let Some(tp) = vi.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return Ok(None);
    };
    let type_proto::Value::TensorType(tt) = tp else {
        return Err(cx.structure(format!(
            "value `{name}` is not a tensor (sequence, map, sparse and optional types are not supported)"
        )));
    };
    let code = tt.elem_type.unwrap_or(0);
    let dtype = tensor::dtype_of(code).ok_or_else(|| {
        cx.structure(format!(
            "value `{name}` has unsupported element type {}",
            tensor::data_type_name(code)
        ))
    })?;
    let Some(shape) = &tt.shape else {
        return Ok(None);
    };
    let dims = shape
        .dim
        .iter()
        .map(|d| match &d.value {
            Some(D::DimValue(k)) => Decl::Value(*k),
            Some(D::DimParam(p)) if !p.is_empty() => Decl::Param(p.clone()),
            _ => Decl::Unknown,
        })
        .collect();
    Ok(Some((dtype, dims)))
}

/// The opset versions the importer's lowerings follow, per domain: `ai.onnx` up to 23 (the
/// ops it lowers keep their meaning from opset 20 to 23, which only add element types and new
/// ops), `ai.onnx.ml` up to 5, Microsoft's and the training domains at version 1. A domain not
/// listed is not checked here: its nodes are unsupported ops.
pub const OPSETS: &[(&str, i64)] = &[
    ("ai.onnx", 23),
    ("ai.onnx.ml", 5),
    ("com.microsoft", 1),
    ("com.microsoft.experimental", 1),
    ("ai.onnx.training", 1),
    ("ai.onnx.preview.training", 1),
];

/// Refuses an imported opset version outside [`OPSETS`], naming the first node of that domain
/// (a model would otherwise be lowered with another version's semantics).
fn check_opsets(opsets: &HashMap<String, i64>, gp: &GraphProto, file: &str) -> R<()> {
    for &(domain, max) in OPSETS {
        let Some(&v) = opsets.get(domain) else {
            continue;
        };
        if (1..=max).contains(&v) {
            continue;
        }
        let first = gp
            .node
            .iter()
            .enumerate()
            .find(|(_, n)| domain_name(n.domain.as_deref()) == domain)
            .map(|(k, n)| {
                let name = n
                    .name
                    .clone()
                    .filter(|s| !s.is_empty())
                    .unwrap_or(format!("#{k}"));
                format!(
                    "; its first node is `{name}` ({domain}::{})",
                    n.op_type.as_deref().unwrap_or("")
                )
            })
            .unwrap_or_default();
        return Err(OnnxError::Structure {
            file: file.into(),
            msg: format!(
                "opset_import: domain `{domain}` version {v} is not supported (Ebb imports \
                 versions 1 to {max} of `{domain}`){first}"
            ),
        });
    }
    Ok(())
}

pub(crate) fn lower_node(cx: &mut Cx, n: &NodeProto, k: usize) -> R<()> {
    let op_type = n.op_type.clone().unwrap_or_default();
    let domain = domain_name(n.domain.as_deref()).to_string();
    cx.node = NodeLoc {
        name: n
            .name
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or(format!("#{k}")),
        op_type: op_type.clone(),
        domain: domain.clone(),
    };
    let Some(op) = ops::lookup(&domain, &op_type) else {
        let nested: Vec<String> = nested_graphs(n)
            .into_iter()
            .map(|(a, g)| format!("{a} ({} nodes)", g.node.len()))
            .collect();
        return Err(OnnxError::UnsupportedOp {
            file: cx.file.clone(),
            node: Box::new(cx.node.clone()),
            opset: cx.opset(),
            nested: if nested.is_empty() {
                String::new()
            } else {
                format!("; nested graphs: {}", nested.join(", "))
            },
        });
    };
    // Each value is assigned once (ONNX graphs are in SSA form): a second definition would
    // silently replace the first for every later reader.
    for (i, name) in n.output.iter().enumerate() {
        if !name.is_empty() && (cx.vals.contains_key(name) || n.output[..i].contains(name)) {
            return Err(cx.err(format!(
                "output {i} defines value `{name}`, which is already defined (by a graph input, \
                 an initializer or an earlier node): each value must be defined once"
            )));
        }
    }
    let outs = op.lower(cx, n)?;
    for (i, name) in n.output.iter().enumerate() {
        if name.is_empty() {
            continue;
        }
        let v = outs.get(i).cloned().ok_or_else(|| {
            cx.err(format!(
                "output {i} (`{name}`) is not produced by Ebb's lowering"
            ))
        })?;
        cx.vals.insert(name.clone(), v);
    }
    Ok(())
}

/// Checks the node's outputs against their declared types (see the module docs).
fn check_outputs(
    cx: &mut Cx,
    n: &NodeProto,
    declared: &HashMap<&str, &ValueInfoProto>,
    aliases: &mut Aliases,
) -> R<()> {
    for name in n.output.iter().filter(|s| !s.is_empty()) {
        let Some(vi) = declared.get(name.as_str()) else {
            continue;
        };
        let Some((dtype, dims)) = declared_type(cx, vi)? else {
            continue;
        };
        let v = cx.val(name)?;
        let ty = match (v.t, &v.s, &v.lit) {
            (Some(t), _, _) => cx.ty(t),
            (None, _, Some(l)) => l.0.clone(),
            (None, Some(s), None) => TensorType::fixed(s.dtype, &s.shape),
            _ => continue,
        };
        let mut ok = dtype == ty.dtype && dims.len() == ty.rank();
        let mut shown = Vec::new();
        for (j, d) in dims.iter().enumerate() {
            let inferred = ty.shape.get(j);
            match d {
                Decl::Value(k) => {
                    shown.push(k.to_string());
                    if ok && inferred.and_then(|x| x.as_const()) != Some(*k) {
                        let e = DimExpr::constant(*k);
                        ok = inferred.is_some_and(|x| cx.g.scope.prove_eq(x, &e));
                    }
                }
                Decl::Param(p) => {
                    shown.push(p.clone());
                    let (Ok(e), Some(x)) = (dims::parse_dim_param(p), inferred) else {
                        continue;
                    };
                    if ok && aliases.check(&cx.g.scope, &e, x) == DimCheck::Contradict {
                        ok = false;
                    }
                }
                Decl::Unknown => shown.push("?".into()),
            }
        }
        if !ok {
            return Err(OnnxError::ShapeMismatch {
                file: cx.file.clone(),
                node: Box::new(cx.node.clone()),
                value: name.clone(),
                declared: format!("{dtype}[{}]", shown.join(",")),
                inferred: ty.to_string(),
            });
        }
    }
    Ok(())
}

/// The graph-valued attributes of `n`: (attribute name, graph).
pub(crate) fn nested_graphs(n: &NodeProto) -> Vec<(String, &GraphProto)> {
    let mut v = Vec::new();
    for a in &n.attribute {
        let an = a.name.clone().unwrap_or_default();
        if let Some(g) = &a.g {
            v.push((an.clone(), g));
        }
        for (i, g) in a.graphs.iter().enumerate() {
            v.push((format!("{an}[{i}]"), g));
        }
    }
    v
}

fn record_nested(n: &NodeProto, stats: &mut ImportStats) {
    for (a, g) in nested_graphs(n) {
        stats.nested_graphs.push(format!(
            "{} ({}).{a}: {} nodes",
            n.name.as_deref().unwrap_or(""),
            n.op_type.as_deref().unwrap_or(""),
            g.node.len()
        ));
    }
}

/// Dimensions (of op results, regions included) that mention an unknown-dimension symbol.
fn count_unknown_dims(g: &Graph) -> usize {
    let mut n = 0;
    for &id in g.order() {
        let node = g.node(id);
        for t in &node.outputs {
            n += t
                .shape
                .iter()
                .filter(|d| {
                    d.symbols()
                        .iter()
                        .any(|s| s.name().starts_with(dims::UNKNOWN_PREFIX))
                })
                .count();
        }
        n += node.regions.iter().map(count_unknown_dims).sum::<usize>();
    }
    n
}
