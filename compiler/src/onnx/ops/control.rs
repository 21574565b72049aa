//! `If` (ai.onnx): the branches become the regions of a `case` whose index is
//! `convert(not(cond))` (branch 0 is `then_branch`), and the enclosing tensors they read
//! (ONNX subgraphs capture by name) its operands after the index, so regions never capture.
//! A condition known at import time (a shape test) imports the taken branch inline.
//!
//! `Loop` becomes a `while` carrying `(i, cond, v..., M, captures..., scan buffers...)`: the
//! `cond` region tests `i < M && cond`, the `body` region is the loop body followed by
//! `i + 1` and, for each scan output, a `dynamic_update_slice` of its row `i` into an
//! `[M, ...]` buffer. Scan outputs need `M` known at import time (symbolically) and a body
//! whose condition output is constantly true, so that every row is written (ONNX would
//! return fewer rows after an early stop).

use super::super::ctx::{Cx, Val, R};
use super::super::proto::{GraphProto, NodeProto};
use super::super::subgraph::{lower_inline, lower_subgraph, outer_names};
use super::Lower;
use ebb_ir::{DType, Op, TensorType, ValueRef};

/// The ai.onnx control-flow ops, by op type.
pub(super) static OPS: &[(&str, &dyn Lower)] = &[("If", &If), ("Loop", &Loop)];

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
            lower_subgraph(cx, then_g, &captures, "then_branch", None)?,
            lower_subgraph(cx, else_g, &captures, "else_branch", None)?,
        ];
        let mut all = vec![index];
        all.extend(operands);
        let outs = cx.emit_n(Op::Case, &all, regions)?;
        Ok(outs.into_iter().map(Val::t).collect())
    }
}

/// `Loop(M?, cond?, v_initial...) {body}` (see the module docs).
struct Loop;

/// Whether `v` is a constant whose every element is true.
fn constant_true(g: &ebb_ir::Graph, v: ValueRef) -> bool {
    matches!(&g.node(v.node).op, Op::Constant(l) if l.dtype == DType::I1 && l.data.iter().all(|&b| b != 0))
}

impl Lower for Loop {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let body = branch(cx, n, "body")?;
        let nv = n.input.len().saturating_sub(2);
        if body.input.len() != nv + 2 || body.output.len() < nv + 1 {
            return Err(cx.err(format!(
                "the body takes {} inputs and returns {} values for {nv} loop-carried values",
                body.input.len(),
                body.output.len()
            )));
        }
        let k_scan = body.output.len() - 1 - nv;
        let scalar = |d: DType| TensorType::new(d, vec![]);
        // Trip count (absent: unbounded, as far as an i64 counter goes) and condition.
        let (m, m_dim) = match cx.opt_input(n, 0) {
            Some(_) => {
                let dim = cx.input_dims(n, 0).ok().and_then(|d| d.first().cloned());
                let t = cx.input(n, 0)?;
                let t = cx.reshape(t, &[])?;
                (cx.convert(t, DType::I64)?, dim)
            }
            None => (cx.scalar(DType::I64, (1u64 << 62) as f64), None),
        };
        let cond_given = cx.opt_input(n, 1).is_some();
        let cond_true = !cond_given || cx.input_scalar_f64(n, 1) == Some(1.0);
        let cond0 = if cond_given {
            let c = cx.input(n, 1)?;
            cx.reshape(c, &[])?
        } else {
            cx.full(DType::I1, 1.0, &[])?
        };
        let vs = (0..nv).map(|i| cx.input(n, 2 + i)).collect::<R<Vec<_>>>()?;
        let mut captures = Vec::new();
        let mut cap_ops = Vec::new();
        for o in outer_names(body) {
            let v = cx.val(&o)?;
            if v.t.is_some() && v.lit.is_none() && v.s.is_none() {
                let t = cx.tensor(&o)?;
                captures.push((o, cx.ty(t)));
                cap_ops.push(t);
            }
        }
        let name = |i: usize| body.input[i].name.clone().unwrap_or_default();
        let mut inputs = vec![(name(0), scalar(DType::I64)), (name(1), scalar(DType::I1))];
        for (i, v) in vs.iter().enumerate() {
            inputs.push((name(2 + i), cx.ty(*v)));
        }
        inputs.push(("@trip_count".into(), scalar(DType::I64)));
        inputs.extend(captures.iter().cloned());
        // Scan outputs stack into [M, ...] buffers: M must be known (symbolically) and the
        // loop must run all M iterations.
        let mut bufs = Vec::new();
        if k_scan > 0 {
            let probe = lower_subgraph(cx, body, &inputs, "body", None)?;
            let outs = probe.outputs().to_vec();
            let cond_in = ValueRef::new(probe.inputs()[1], 0);
            let full_run = constant_true(&probe, outs[0]) || (outs[0] == cond_in && cond_true);
            let Some(m_dim) = m_dim.clone().filter(|_| full_run) else {
                return Err(cx.err(
                    "scan outputs need a trip count known at import time and a loop that \
                     cannot stop early",
                ));
            };
            for (k, o) in outs[1 + nv..].iter().enumerate() {
                let t = probe.value_type(*o).clone();
                let mut shape = vec![m_dim.clone()];
                shape.extend(t.shape.iter().cloned());
                bufs.push(cx.full(t.dtype, 0.0, &shape)?);
                inputs.push((format!("@scan{k}"), TensorType::new(t.dtype, shape)));
            }
        }
        let ncap = captures.len();
        let mut finish = |sub: &mut Cx, outs: Vec<ValueRef>| -> R<Vec<ValueRef>> {
            let ins: Vec<ValueRef> = sub
                .g
                .inputs()
                .iter()
                .map(|&id| ValueRef::new(id, 0))
                .collect();
            let i = ins[0];
            let one = sub.scalar(DType::I64, 1.0);
            let mut r = vec![sub.binary(Op::Add, i, one)?, sub.reshape(outs[0], &[])?];
            r.extend_from_slice(&outs[1..1 + nv]);
            r.extend_from_slice(&ins[2 + nv..3 + nv + ncap]);
            for k in 0..k_scan {
                let s = outs[1 + nv + k];
                let mut shape1 = vec![ebb_ir::DimExpr::constant(1)];
                shape1.extend(sub.ty(s).shape);
                let row = sub.reshape(s, &shape1)?;
                let zero = sub.scalar(DType::I64, 0.0);
                let mut operands = vec![ins[3 + nv + ncap + k], row, i];
                operands.extend(std::iter::repeat_n(zero, shape1.len() - 1));
                r.push(sub.emit(Op::DynamicUpdateSlice, &operands)?);
            }
            Ok(r)
        };
        let body_region = lower_subgraph(cx, body, &inputs, "body", Some(&mut finish))?;
        let mut cond_g = ebb_ir::Graph::new("cond");
        let cin: Vec<ValueRef> = inputs
            .iter()
            .map(|(_, t)| cond_g.add_input("", t.clone()))
            .collect();
        let lt = ebb_ir::op::CompareSpec {
            direction: ebb_ir::Relation::Lt,
            compare_type: None,
        };
        let b = |op: Op| ebb_ir::Node::new(op, vec![scalar(DType::I1)]);
        let below = cond_g.add_node(b(Op::Compare(lt)), &[cin[0], cin[2 + nv]]);
        let go = cond_g.add_node(b(Op::And), &[ValueRef::new(below, 0), cin[1]]);
        cond_g.set_outputs(vec![ValueRef::new(go, 0)], vec![String::new()]);
        let zero = cx.scalar(DType::I64, 0.0);
        let mut carried = vec![zero, cond0];
        carried.extend(vs);
        carried.push(m);
        carried.extend(cap_ops);
        carried.extend(bufs);
        let outs = cx.emit_n(Op::While, &carried, vec![cond_g, body_region])?;
        let mut res: Vec<Val> = outs[2..2 + nv].iter().map(|v| Val::t(*v)).collect();
        res.extend(outs[outs.len() - k_scan..].iter().map(|v| Val::t(*v)));
        Ok(res)
    }
}
