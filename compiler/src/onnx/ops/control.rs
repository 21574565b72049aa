//! `If` (ai.onnx): the branches become the regions of a `case` whose index is
//! `convert(not(cond))` (branch 0 is `then_branch`), and the enclosing tensors they read
//! (ONNX subgraphs capture by name) its operands after the index, so regions never capture.
//! A condition known at import time (a shape test) imports the taken branch inline.

use super::super::ctx::{Cx, Val, R};
use super::super::proto::{GraphProto, NodeProto};
use super::super::{lower_inline, lower_subgraph, outer_names};
use super::Lower;
use ebb_ir::{DType, Op};

/// The ai.onnx control-flow ops, by op type.
pub(super) static OPS: &[(&str, &dyn Lower)] = &[("If", &If)];

/// The graph attribute `name` of `n`.
fn branch<'n>(cx: &Cx, n: &'n NodeProto, name: &str) -> R<&'n GraphProto> {
    n.attribute
        .iter()
        .find(|a| a.name.as_deref() == Some(name))
        .and_then(|a| a.g.as_ref())
        .ok_or_else(|| cx.err(format!("missing graph attribute `{name}`")))
}

/// `If(cond) {then_branch, else_branch}`.
struct If;

impl Lower for If {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let then_g = branch(cx, n, "then_branch")?;
        let else_g = branch(cx, n, "else_branch")?;
        if then_g.output.len() != n.output.len() || else_g.output.len() != n.output.len() {
            return Err(cx.err("the branches return another number of values than the node"));
        }
        if let Some(c) = cx.input_scalar_f64(n, 0) {
            return lower_inline(cx, if c != 0.0 { then_g } else { else_g });
        }
        let outer: Vec<String> = {
            let mut v = outer_names(then_g);
            for o in outer_names(else_g) {
                if !v.contains(&o) {
                    v.push(o);
                }
            }
            v
        };
        // Enclosing tensors without a known value are captured; constants and shape values
        // are visible inside as they are.
        let mut captures = Vec::new();
        let mut operands = Vec::new();
        for o in outer {
            let v = cx.val(&o)?;
            if v.t.is_some() && v.lit.is_none() && v.s.is_none() {
                let t = cx.tensor(&o)?;
                captures.push((o, cx.ty(t)));
                operands.push(t);
            }
        }
        let cond = cx.input(n, 0)?;
        if cx.ty(cond).shape.iter().any(|d| d.as_const() != Some(1)) {
            return Err(cx.err(format!(
                "the condition must hold one element, got {}",
                cx.ty(cond)
            )));
        }
        let cond = cx.reshape(cond, &[])?;
        let not = cx.unary(Op::Not, cond)?;
        let index = cx.convert(not, DType::I32)?;
        let regions = vec![
            lower_subgraph(cx, then_g, &captures, "then_branch")?,
            lower_subgraph(cx, else_g, &captures, "else_branch")?,
        ];
        let mut all = vec![index];
        all.extend(operands);
        let outs = cx.emit_n(Op::Case, &all, regions)?;
        Ok(outs.into_iter().map(Val::t).collect())
    }
}
