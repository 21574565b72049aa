//! Model-local functions (`ModelProto.functions`, ONNX IR ≥ 8): every call is expanded in
//! place before lowering, so the lowerings only see primitive ops.
//!
//! A call of function `f` (matched by domain and name) becomes `f`'s nodes with the formal
//! inputs and outputs renamed to the call's values and every other value and node name
//! prefixed with `f#k/` (`k` counts the calls), nested graphs included; an attribute that
//! refers to a function attribute (`ref_attr_name`) takes the call's value, else the
//! function's default (`attribute_proto`), else is dropped (ONNX IR spec, "Functions").
//! Calls inside a function body expand too, up to a depth of 16 (recursion is an error).

use super::ctx::domain_name;
use super::error::OnnxError;
use super::proto::{AttributeProto, FunctionProto, GraphProto, NodeProto};
use std::collections::HashMap;

/// How deep calls may nest.
const MAX_DEPTH: usize = 16;

/// `gp` with every call of a function in `functions` expanded (see the module docs).
///
/// # Errors
/// [`OnnxError::Structure`] for calls nested deeper than 16 (a recursive function) or a call
/// with more inputs or outputs than the function declares.
pub(crate) fn expand(
    gp: &GraphProto,
    functions: &[FunctionProto],
    file: &str,
) -> Result<GraphProto, OnnxError> {
    let by_key: HashMap<(String, String), &FunctionProto> = functions
        .iter()
        .map(|f| {
            let key = (
                domain_name(f.domain.as_deref()).to_string(),
                f.name.clone().unwrap_or_default(),
            );
            (key, f)
        })
        .collect();
    let mut calls = 0usize;
    let mut out = gp.clone();
    out.node = expand_nodes(&gp.node, &by_key, &mut calls, 0, file)?;
    Ok(out)
}

/// Whether `n` calls one of `functions`.
pub(crate) fn is_call(n: &NodeProto, functions: &[FunctionProto]) -> bool {
    functions.iter().any(|f| {
        f.name == n.op_type && domain_name(f.domain.as_deref()) == domain_name(n.domain.as_deref())
    })
}

fn expand_nodes(
    nodes: &[NodeProto],
    fs: &HashMap<(String, String), &FunctionProto>,
    calls: &mut usize,
    depth: usize,
    file: &str,
) -> Result<Vec<NodeProto>, OnnxError> {
    let err = |msg: String| OnnxError::Structure {
        file: file.to_string(),
        msg,
    };
    let mut out = Vec::new();
    for n in nodes {
        let key = (
            domain_name(n.domain.as_deref()).to_string(),
            n.op_type.clone().unwrap_or_default(),
        );
        let Some(f) = fs.get(&key) else {
            let mut n = n.clone();
            for a in n.attribute.iter_mut() {
                if let Some(g) = a.g.as_mut() {
                    g.node = expand_nodes(&g.node, fs, calls, depth, file)?;
                }
                for g in a.graphs.iter_mut() {
                    g.node = expand_nodes(&g.node, fs, calls, depth, file)?;
                }
            }
            out.push(n);
            continue;
        };
        if depth >= MAX_DEPTH {
            return Err(err(format!(
                "function `{}` calls nest deeper than {MAX_DEPTH} (recursion is not supported)",
                key.1
            )));
        }
        if n.input.len() > f.input.len() || n.output.len() > f.output.len() {
            return Err(err(format!(
                "node `{}` calls function `{}` with {} inputs and {} outputs; it takes {} and returns {}",
                n.name.as_deref().unwrap_or(""),
                key.1,
                n.input.len(),
                n.output.len(),
                f.input.len(),
                f.output.len()
            )));
        }
        *calls += 1;
        let prefix = format!("{}#{}/", key.1, calls);
        let mut names: HashMap<String, String> = HashMap::new();
        for (i, formal) in f.input.iter().enumerate() {
            names.insert(formal.clone(), n.input.get(i).cloned().unwrap_or_default());
        }
        for (i, formal) in f.output.iter().enumerate() {
            let actual = n.output.get(i).cloned().unwrap_or_default();
            // An output the call does not take still needs a name of its own.
            let actual = if actual.is_empty() {
                format!("{prefix}{formal}")
            } else {
                actual
            };
            names.insert(formal.clone(), actual);
        }
        let body: Vec<NodeProto> = f
            .node
            .iter()
            .map(|b| instantiate(b, &names, &prefix, &n.attribute, &f.attribute_proto))
            .collect();
        out.extend(expand_nodes(&body, fs, calls, depth + 1, file)?);
    }
    Ok(out)
}

/// A body node of a call: names mapped (or prefixed), attribute references resolved.
fn instantiate(
    b: &NodeProto,
    names: &HashMap<String, String>,
    prefix: &str,
    call_attrs: &[AttributeProto],
    defaults: &[AttributeProto],
) -> NodeProto {
    let rename = |s: &String| -> String {
        if s.is_empty() {
            String::new()
        } else {
            names
                .get(s)
                .cloned()
                .unwrap_or_else(|| format!("{prefix}{s}"))
        }
    };
    let mut n = b.clone();
    n.input = b.input.iter().map(rename).collect();
    n.output = b.output.iter().map(rename).collect();
    n.name = b.name.as_ref().map(|s| format!("{prefix}{s}"));
    n.attribute = b
        .attribute
        .iter()
        .filter_map(|a| {
            let Some(r) = &a.ref_attr_name else {
                let mut a = a.clone();
                if let Some(g) = a.g.as_mut() {
                    rename_graph(g, &rename);
                }
                for g in a.graphs.iter_mut() {
                    rename_graph(g, &rename);
                }
                return Some(a);
            };
            let found = call_attrs
                .iter()
                .chain(defaults)
                .find(|c| c.name.as_deref() == Some(r.as_str()))?;
            let mut v = found.clone();
            v.name = a.name.clone();
            Some(v)
        })
        .collect();
    n
}

/// Renames the values of a nested graph inside a function body.
fn rename_graph(g: &mut GraphProto, rename: &dyn Fn(&String) -> String) {
    for n in g.node.iter_mut() {
        n.input = n.input.iter().map(rename).collect();
        n.output = n.output.iter().map(rename).collect();
        for a in n.attribute.iter_mut() {
            if let Some(sub) = a.g.as_mut() {
                rename_graph(sub, rename);
            }
        }
    }
    for vi in g
        .input
        .iter_mut()
        .chain(g.output.iter_mut())
        .chain(g.value_info.iter_mut())
    {
        vi.name = vi.name.as_ref().map(rename);
    }
    for t in g.initializer.iter_mut() {
        t.name = t.name.as_ref().map(rename);
    }
}
