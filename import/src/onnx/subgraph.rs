//! Nested graphs (`If` branches, `Loop` bodies): the names they read from enclosing scopes,
//! their lowering into region graphs of the enclosing op, or inline when a branch is known at
//! import time.
//!
//! Invariant: a region never captures: the enclosing tensors it reads are its inputs (the
//! enclosing op passes them as operands); enclosing constants and shape values are copied in.

use super::ctx::{Cx, Val, R};
use super::proto::GraphProto;
use super::{lower_node, nested_graphs, ops, tensor};
use ebb_ir::{Graph, TensorType, ValueRef};
use std::collections::HashMap;

/// The names a nested graph reads from its enclosing scopes: node inputs (at any depth) that
/// no node of it produces and that are not its initializers, in first-use order.
pub(crate) fn outer_names(gp: &GraphProto) -> Vec<String> {
    fn walk(
        gp: &GraphProto,
        defined: &mut std::collections::HashSet<String>,
        out: &mut Vec<String>,
    ) {
        for t in &gp.initializer {
            defined.insert(t.name.clone().unwrap_or_default());
        }
        for vi in &gp.input {
            defined.insert(vi.name.clone().unwrap_or_default());
        }
        for n in &gp.node {
            for i in n.input.iter().filter(|i| !i.is_empty()) {
                if !defined.contains(i) && !out.contains(i) {
                    out.push(i.clone());
                }
            }
            for (_, sub) in nested_graphs(n) {
                let mut inner = defined.clone();
                walk(sub, &mut inner, out);
            }
            defined.extend(n.output.iter().cloned());
        }
    }
    let mut out = Vec::new();
    walk(gp, &mut Default::default(), &mut out);
    out
}

/// Maps a nested graph's outputs (in the region being built) to the region's outputs.
pub(crate) type Finish<'f> = &'f mut dyn FnMut(&mut Cx, Vec<ValueRef>) -> R<Vec<ValueRef>>;

/// Defines values of the region being built before the nested graph's nodes are lowered
/// (`Scan`'s rows, sliced from the carried scan inputs).
pub(crate) type Prepare<'f> = &'f mut dyn FnMut(&mut Cx) -> R<()>;

/// Lowers a nested graph (an `If` branch, a `Loop` body) into a region graph named `name`:
/// `inputs` (the graph's own inputs by name, then the enclosing values it captures) become
/// the region's inputs, in order; the enclosing constants and shape values are visible as they
/// are; the region's outputs are the graph's, or what `finish` makes of them. Errors for
/// random or in-place ops inside (their extra input or output cannot leave a region).
pub(crate) fn lower_subgraph(
    cx: &mut Cx,
    gp: &GraphProto,
    inputs: &[(String, TensorType)],
    name: &str,
    prepare: Option<Prepare>,
    finish: Option<Finish>,
) -> R<Graph> {
    let max = ebb_ir::graph::MAX_IMPORT_REGION_DEPTH;
    if cx.depth >= max {
        return Err(cx.err(format!(
            "nested graphs more than {max} deep (Ebb imports at most {max} levels of `If`, \
             `Loop` and `Scan` graphs)"
        )));
    }
    let mut sub = Cx {
        file: cx.file.clone(),
        model_dir: cx.model_dir.clone(),
        g: Graph::new(name),
        vals: HashMap::new(),
        opsets: cx.opsets.clone(),
        node: cx.node.clone(),
        warnings: Vec::new(),
        in_place: Vec::new(),
        rng_seed: None,
        depth: cx.depth + 1,
    };
    for (k, v) in &cx.vals {
        if v.lit.is_some() || v.s.is_some() || v.seq.is_some() {
            sub.vals.insert(
                k.clone(),
                Val {
                    t: None,
                    ..v.clone()
                },
            );
        }
    }
    for (k, ty) in inputs {
        let v = sub.g.add_input(k, ty.clone());
        sub.vals.insert(k.clone(), Val::t(v));
    }
    insert_initializers(&mut sub, gp)?;
    if let Some(p) = prepare {
        p(&mut sub)?;
    }
    for (k, n) in gp.node.iter().enumerate() {
        lower_node(&mut sub, n, k)?;
    }
    let mut outs = Vec::new();
    for vi in &gp.output {
        let o = vi.name.clone().unwrap_or_default();
        outs.push(sub.tensor(&o)?);
    }
    let outs = match finish {
        Some(f) => f(&mut sub, outs)?,
        None => outs,
    };
    if sub.rng_seed.is_some() || !sub.in_place.is_empty() {
        return Err(cx.err("random or in-place ops inside a nested graph are not supported"));
    }
    let k = outs.len();
    sub.g.set_outputs(outs, vec![String::new(); k]);
    cx.warnings.append(&mut sub.warnings);
    Ok(sub.g)
}

/// Lowers a nested graph's initializers and nodes into the enclosing graph itself (an `If`
/// whose condition is known at import time); returns its outputs.
pub(crate) fn lower_inline(cx: &mut Cx, gp: &GraphProto) -> R<Vec<Val>> {
    insert_initializers(cx, gp)?;
    let at = cx.node.clone();
    for (k, n) in gp.node.iter().enumerate() {
        lower_node(cx, n, k)?;
    }
    cx.node = at;
    gp.output
        .iter()
        .map(|vi| cx.val(vi.name.as_deref().unwrap_or("")))
        .collect()
}

/// A nested graph's initializers as known values.
fn insert_initializers(cx: &mut Cx, gp: &GraphProto) -> R<()> {
    for t in &gp.initializer {
        let tn = t.name.clone().unwrap_or_default();
        let (dtype, dims, lit) = tensor::decode(t, cx.model_dir.as_deref())
            .map_err(|m| cx.structure(format!("initializer `{tn}`: {m}")))?;
        cx.vals
            .insert(tn, ops::literal_val(TensorType::fixed(dtype, &dims), lit));
    }
    Ok(())
}
