//! Control flow (ai.onnx): `If`, `Loop`, `Scan`.
//!
//! `If`: the branches become the regions of a `case` whose index is `convert(not(cond))`
//! (branch 0 is `then_branch`), and the enclosing tensors they read (ONNX subgraphs capture
//! by name) its operands after the index, so regions never capture.
//! A condition known at import time (a shape test) imports the taken branch inline.
//!
//! `Loop` becomes a `while` carrying `(i, cond, v..., M, captures..., scan buffers...)`: the
//! `cond` region tests `i < M && cond`, the `body` region is the loop body followed by
//! `i + 1` and, for each scan output, a `dynamic_update_slice` of its row `i` into an
//! `[M, ...]` buffer. Scan outputs need `M` known at import time (symbolically) and a body
//! whose condition output is constantly true, so that every row is written (ONNX would
//! return fewer rows after an early stop).
//!
//! `Scan` becomes a `while` in the same way, its rows sliced out of the carried scan inputs
//! inside the body (see [`Scan`]).

use super::super::ctx::{Cx, NodeAttrs, Val, R};
use super::super::proto::{GraphProto, NodeProto};
use super::super::subgraph::{lower_inline, lower_subgraph, outer_names};
use super::Lower;
use ebb_ir::{DType, Op, TensorType, ValueRef};

/// The ai.onnx control-flow ops, by op type.
pub(super) static OPS: &[(&str, &dyn Lower)] = &[("If", &If), ("Loop", &Loop), ("Scan", &Scan)];

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
        // Enclosing tensors without a known value are captured; constants and shape values
        // are visible inside as they are.
        let (captures, operands) = captured(cx, &[then_g, else_g])?;
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
            lower_subgraph(cx, then_g, &captures, "then_branch", None, None)?,
            lower_subgraph(cx, else_g, &captures, "else_branch", None, None)?,
        ];
        let mut all = vec![index];
        all.extend(operands);
        let outs = cx.emit_n(Op::Case, &all, regions)?;
        Ok(outs.into_iter().map(Val::t).collect())
    }
}

/// The `cond` region of a counted `while` over the carried values of `inputs`: carried value
/// 0 (the `i64` counter) below carried value `trip`, and the `i1` carried value `cond`, if
/// any.
fn while_cond(inputs: &[(String, TensorType)], trip: usize, cond: Option<usize>) -> ebb_ir::Graph {
    let mut g = ebb_ir::Graph::new("cond");
    let cin: Vec<ValueRef> = inputs
        .iter()
        .map(|(_, t)| g.add_input("", t.clone()))
        .collect();
    let lt = ebb_ir::op::CompareSpec {
        direction: ebb_ir::Relation::Lt,
        compare_type: None,
    };
    let b = |op: Op| ebb_ir::Node::new(op, vec![TensorType::new(DType::I1, vec![])]);
    let mut go = ValueRef::new(g.add_node(b(Op::Compare(lt)), &[cin[0], cin[trip]]), 0);
    if let Some(c) = cond {
        go = ValueRef::new(g.add_node(b(Op::And), &[go, cin[c]]), 0);
    }
    g.set_outputs(vec![go], vec![String::new()]);
    g
}

/// The input values of the region being built, in order.
fn region_inputs(sub: &Cx) -> Vec<ValueRef> {
    sub.g
        .inputs()
        .iter()
        .map(|&id| ValueRef::new(id, 0))
        .collect()
}

/// Zero `[len, ...]` buffers for scan outputs of the row types `rows`, each also appended to
/// the loop's carried `inputs` (named `@scan_out<k>`).
fn scan_buffers(
    cx: &mut Cx,
    rows: &[TensorType],
    len: &ebb_ir::DimExpr,
    inputs: &mut Vec<(String, TensorType)>,
) -> R<Vec<ValueRef>> {
    let mut bufs = Vec::new();
    for (k, t) in rows.iter().enumerate() {
        let mut shape = vec![len.clone()];
        shape.extend(t.shape.iter().cloned());
        bufs.push(cx.full(t.dtype, 0.0, &shape)?);
        inputs.push((format!("@scan_out{k}"), TensorType::new(t.dtype, shape)));
    }
    Ok(bufs)
}

/// The row a counted loop's iteration `i` addresses: `i`, or `trips − 1 − i` in reverse.
fn row_index(sub: &mut Cx, i: ValueRef, trips: ValueRef, reverse: bool) -> R<ValueRef> {
    if !reverse {
        return Ok(i);
    }
    let one = sub.scalar(DType::I64, 1.0);
    let last = sub.binary(Op::Subtract, trips, one)?;
    sub.binary(Op::Subtract, last, i)
}

/// `buf` (a `[T, ...]` scan buffer) with `row` written at index `at` of its first dimension.
fn write_row(sub: &mut Cx, buf: ValueRef, row: ValueRef, at: ValueRef) -> R<ValueRef> {
    let mut shape1 = vec![ebb_ir::DimExpr::constant(1)];
    shape1.extend(sub.ty(row).shape);
    let slab = sub.reshape(row, &shape1)?;
    let zero = sub.scalar(DType::I64, 0.0);
    let mut operands = vec![buf, slab, at];
    operands.extend(std::iter::repeat_n(zero, shape1.len() - 1));
    sub.emit(Op::DynamicUpdateSlice, &operands)
}

/// Captured enclosing tensors: `(name, type)` for the region inputs, and the graph values to
/// pass as operands.
type Captures = (Vec<(String, TensorType)>, Vec<ValueRef>);

/// The enclosing tensors the nested `graphs` read (without a value known at import time), in
/// first-use order: they become loop-carried or branch operands.
fn captured(cx: &mut Cx, graphs: &[&GraphProto]) -> R<Captures> {
    let mut names: Vec<String> = Vec::new();
    for g in graphs {
        for o in outer_names(g) {
            if !names.contains(&o) {
                names.push(o);
            }
        }
    }
    let mut captures = Vec::new();
    let mut operands = Vec::new();
    for o in names {
        let v = cx.val(&o)?;
        if v.t.is_some() && v.lit.is_none() && v.s.is_none() {
            let t = cx.tensor(&o)?;
            captures.push((o, cx.ty(t)));
            operands.push(t);
        }
    }
    Ok((captures, operands))
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
        let (captures, cap_ops) = captured(cx, &[body])?;
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
            let probe = lower_subgraph(cx, body, &inputs, "body", None, None)?;
            let outs = probe.outputs().to_vec();
            let cond_in = ValueRef::new(probe.inputs()[1], 0);
            let full_run = constant_true(&probe, outs[0]) || (outs[0] == cond_in && cond_true);
            let Some(m_dim) = m_dim.clone().filter(|_| full_run) else {
                return Err(cx.err(
                    "scan outputs need a trip count known at import time and a loop that \
                     cannot stop early",
                ));
            };
            let rows: Vec<TensorType> = outs[1 + nv..]
                .iter()
                .map(|o| probe.value_type(*o).clone())
                .collect();
            bufs = scan_buffers(cx, &rows, &m_dim, &mut inputs)?;
        }
        let ncap = captures.len();
        let mut finish = |sub: &mut Cx, outs: Vec<ValueRef>| -> R<Vec<ValueRef>> {
            let ins = region_inputs(sub);
            let i = ins[0];
            let one = sub.scalar(DType::I64, 1.0);
            let mut r = vec![sub.binary(Op::Add, i, one)?, sub.reshape(outs[0], &[])?];
            r.extend_from_slice(&outs[1..1 + nv]);
            r.extend_from_slice(&ins[2 + nv..3 + nv + ncap]);
            for k in 0..k_scan {
                r.push(write_row(sub, ins[3 + nv + ncap + k], outs[1 + nv + k], i)?);
            }
            Ok(r)
        };
        let body_region = lower_subgraph(cx, body, &inputs, "body", None, Some(&mut finish))?;
        let cond_g = while_cond(&inputs, 2 + nv, Some(1));
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

/// `Scan(initial_state..., scan_inputs...) {body}` (opset 9+): a `while` carrying
/// `(i, states..., T, scan inputs..., captures..., scan buffers...)`. Row `i` of each scan
/// input (along axis 0; reversed for direction 1) is sliced out in the body, and each scan
/// output row is written at `i` (or `T − 1 − i`) into a `[T, ...]` buffer, `T` being the scan
/// inputs' common length. Other axes are not supported.
struct Scan;

impl Lower for Scan {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let body = branch(cx, n, "body")?;
        let n_scan = n.int_or("num_scan_inputs", 0) as usize;
        let n_state = n.input.len().saturating_sub(n_scan);
        let k_out = body.output.len().saturating_sub(n_state);
        if n_scan == 0 || body.input.len() != n.input.len() || body.output.len() < n_state {
            return Err(cx.err("the body's inputs and outputs do not match the node's"));
        }
        let axes_zero = |a: &str| n.ints(a).is_none_or(|v| v.iter().all(|&x| x == 0));
        if !axes_zero("scan_input_axes") || !axes_zero("scan_output_axes") {
            return Err(cx.err("scan axes other than 0 are not supported"));
        }
        let dirs = |a: &str, k: usize| n.ints(a).unwrap_or_else(|| vec![0; k]);
        let (in_dirs, out_dirs) = (
            dirs("scan_input_directions", n_scan),
            dirs("scan_output_directions", k_out),
        );
        let states = (0..n_state)
            .map(|i| cx.input(n, i))
            .collect::<R<Vec<_>>>()?;
        let xs = (0..n_scan)
            .map(|i| cx.input(n, n_state + i))
            .collect::<R<Vec<_>>>()?;
        let t_dim = cx
            .ty(xs[0])
            .shape
            .first()
            .cloned()
            .ok_or_else(|| cx.err("a scan input of rank 0"))?;
        if xs.iter().any(|x| cx.ty(*x).shape.first() != Some(&t_dim)) {
            return Err(cx.err("the scan inputs differ in length"));
        }
        let t = cx.dim_scalar(&t_dim, DType::I64)?;
        let (captures, cap_ops) = captured(cx, &[body])?;
        let scalar = |d: DType| TensorType::new(d, vec![]);
        let name = |i: usize| body.input[i].name.clone().unwrap_or_default();
        // Carried: i, states, T, scan inputs, captures, buffers. The body region's inputs
        // are named so that the body's own input names resolve: states by their body names,
        // the rows are made inside (from the full scan inputs).
        let mut inputs = vec![("@i".to_string(), scalar(DType::I64))];
        for (k, s) in states.iter().enumerate() {
            inputs.push((name(k), cx.ty(*s)));
        }
        inputs.push(("@trip_count".into(), scalar(DType::I64)));
        for (k, x) in xs.iter().enumerate() {
            inputs.push((format!("@scan_in{k}"), cx.ty(*x)));
        }
        inputs.extend(captures.iter().cloned());
        // A first lowering with the rows as plain inputs gives the scan outputs' types.
        let mut probe_inputs = inputs.clone();
        for (k, x) in xs.iter().enumerate() {
            let mut row = cx.ty(*x);
            row.shape.remove(0);
            probe_inputs.push((name(n_state + k), row));
        }
        let probe = lower_subgraph(cx, body, &probe_inputs, "body", None, None)?;
        let out_types: Vec<TensorType> = probe.outputs()[n_state..]
            .iter()
            .map(|o| probe.value_type(*o).clone())
            .collect();
        let bufs = scan_buffers(cx, &out_types, &t_dim, &mut inputs)?;
        // The body region: rows sliced from the carried scan inputs (defined under the body's
        // scan-input names before its nodes), the body, then the counter and the buffers.
        let mut prepare = |sub: &mut Cx| -> R<()> {
            let ins = region_inputs(sub);
            let (i, tc) = (ins[0], ins[1 + n_state]);
            for k in 0..n_scan {
                let x = ins[2 + n_state + k];
                let at = row_index(sub, i, tc, in_dirs.get(k) == Some(&1))?;
                let xt = sub.ty(x);
                let mut sizes = xt.shape.clone();
                sizes[0] = ebb_ir::DimExpr::constant(1);
                let zero = sub.scalar(DType::I64, 0.0);
                let mut operands = vec![x, at];
                operands.extend(std::iter::repeat_n(zero, xt.rank() - 1));
                let slab = sub.emit(Op::DynamicSlice(sizes), &operands)?;
                let row = sub.reshape(slab, &xt.shape[1..])?;
                sub.vals.insert(name(n_state + k), Val::t(row));
            }
            Ok(())
        };
        let nstate = n_state;
        let ncap = captures.len();
        let mut finish = |sub: &mut Cx, outs: Vec<ValueRef>| -> R<Vec<ValueRef>> {
            let ins = region_inputs(sub);
            let (i, tc) = (ins[0], ins[1 + nstate]);
            let one = sub.scalar(DType::I64, 1.0);
            let mut r = vec![sub.binary(Op::Add, i, one)?];
            r.extend_from_slice(&outs[..nstate]);
            r.extend_from_slice(&ins[1 + nstate..2 + nstate + n_scan + ncap]);
            for k in 0..k_out {
                let at = row_index(sub, i, tc, out_dirs.get(k) == Some(&1))?;
                let buf = ins[2 + nstate + n_scan + ncap + k];
                r.push(write_row(sub, buf, outs[nstate + k], at)?);
            }
            Ok(r)
        };
        let body_region = lower_subgraph(
            cx,
            body,
            &inputs,
            "body",
            Some(&mut prepare),
            Some(&mut finish),
        )?;
        let cond_g = while_cond(&inputs, 1 + n_state, None);
        let zero = cx.scalar(DType::I64, 0.0);
        let mut carried = vec![zero];
        carried.extend(states);
        carried.push(t);
        carried.extend(xs);
        carried.extend(cap_ops);
        carried.extend(bufs);
        let outs = cx.emit_n(Op::While, &carried, vec![cond_g, body_region])?;
        let mut res: Vec<Val> = outs[1..1 + n_state].iter().map(|v| Val::t(*v)).collect();
        res.extend(outs[outs.len() - k_out..].iter().map(|v| Val::t(*v)));
        Ok(res)
    }
}
