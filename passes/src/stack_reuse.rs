//! Stacked inputs handed to the stacks a scan builds (`reuse_stacks`, run by the donation
//! pass after the loop-invariant carries are handed over, [`crate::carry`]).
//!
//! A `lax.scan` over `n` steps is a `while` whose counter runs `0, 1, …, n - 1`. In step `c`
//! it reads slice `i(c)` of each stacked input `R` (`dynamic_slice`, `i(c) = c`, or
//! `n - 1 - c` for a reversed scan: the backward pass of a scan reads the forward's stacked
//! residuals that way) and writes slice `i(c)` of each stacked output `G`
//! (`dynamic_update_slice` into a carry that starts as zeros). `R` is held whole until the
//! loop ends and `G` is allocated whole when it starts, so both are charged at the loop,
//! whereas the unrolled program frees each slice of `R` after its step and allocates each
//! slice of `G` as it is computed.
//!
//! When `R` and `G` have one type, `R` dies at the loop, and `i` is a bijection of the steps
//! onto the slices, `G` may start as `R` instead of its zeros: step `c` reads slice `i(c)` of
//! the carry before it writes it, and no earlier step wrote that slice (`i` is injective), so
//! the read sees `R`'s slice; after the last step every slice was written (`i` is onto), so
//! nothing of `R` and nothing of the zeros remains. Here such a loop's reads of `R` are made
//! reads of `G`'s carry, `G`'s initial operand becomes `R`, and `R`'s own carry (returned
//! unchanged, unread after the loop) is removed: the loop then holds one stack where it held
//! two, and its result takes `R`'s buffer by the usual in-place rule for a carry donated to
//! its next value ([`ebb_ir::op::in_place_writes`]), which the planner, the checker and the
//! executor share. That rule writes the update in place only when every other read of the
//! carry precedes it in every schedule; where the update does not depend on the slices read
//! (a scan stacking the state before its step as a residual), the update passes through an
//! `optimization_barrier` with those slices first (the identity, an ordering only).
//!
//! Proven, for a top-level `while` (others are left alone):
//! * a counter carry starting at the constant 0, stepped by the constant 1, and a condition
//!   `counter < n` (signed) with `n` a symbolic dimension expression;
//! * `R`: a carry the body returns unchanged, whose result is unread and which the condition
//!   does not read; in the body only `dynamic_slice`s of slice sizes `[1, d1, …]` (the whole
//!   of every other dimension) read it; its operand is a buffer the step owns (not a
//!   `constant`, a donated input if an input, not a graph output), read once by the loop,
//!   and every other reader precedes the loop;
//! * `G`: a carry of `R`'s type that the condition does not read and that the body reads only
//!   as the operand of one `dynamic_update_slice` it returns, of an update of shape
//!   `[1, d1, …]`;
//! * every such slice and update starts, along dimension 0, at one index `i(c)` equal to `c`
//!   or to `n - 1 - c` for every counter value `c` in `0..n`, with `n` the first dimension of
//!   `R`: the index arithmetic JAX builds (`add`, `subtract`, `clamp`, `reshape`, `slice`,
//!   `concatenate` of constants, dimension constants and the counter) is evaluated as an affine
//!   function of the counter, and a `clamp` is dropped only when the value's range over
//!   `0..n` provably lies within its bounds. The starts along the other dimensions are clamped
//!   to 0 by the ops' semantics (the slice spans the dimension).
//!
//! Invariant: the loop's results that remain are bit-identical to before (the argument
//! above); no result that was read is removed; program order stays valid.

use crate::carry::reach;
use ebb_ir::{DimExpr, Graph, Node, NodeId, Op, OpKind, ValueRef};
use petgraph::Direction;
use std::collections::{BTreeSet, HashMap, HashSet};

/// A value `a + b·c` of the loop counter `c`.
#[derive(Clone, Debug)]
struct Affine {
    a: DimExpr,
    b: i64,
}

/// The induction facts of a counted loop: its counter carry and its trip count `n`.
struct Counted {
    counter: usize,
    n: DimExpr,
}

/// Rewrites every top-level `while` of `g` as the module docs say; returns the number of
/// stacks handed over.
pub fn reuse_stacks(g: &mut Graph) -> usize {
    let loops: Vec<NodeId> = g
        .order()
        .iter()
        .copied()
        .filter(|&id| g.node(id).kind() == OpKind::While && g.node(id).regions.len() == 2)
        .collect();
    let mut handed = 0;
    for w in loops {
        let pairs = pairs(g, w);
        if pairs.is_empty() {
            continue;
        }
        handed += pairs.len();
        rewrite(g, w, &pairs);
    }
    handed
}

/// The `(R, G)` carry pairs of loop `w` (see the module docs), each carry in one pair.
fn pairs(g: &Graph, w: NodeId) -> Vec<(usize, usize)> {
    let node = g.node(w);
    let [cond, body] = node.regions.as_slice() else {
        return Vec::new();
    };
    let Some(counted) = counted(g, w, cond, body) else {
        return Vec::new();
    };
    let ops = g.operands(w);
    let args = body.inputs();
    let cond_reads = |j: usize| {
        cond.inputs()
            .get(j)
            .is_none_or(|&a| !cond.users(a).is_empty())
    };
    let forwarded = ebb_ir::op::while_forwards(body);
    let before = reach(g, w, Direction::Incoming);
    let users_of_result = |j: usize| {
        g.users(w).iter().any(|&(_, _, out)| out as usize == j)
            || g.outputs().contains(&ValueRef::new(w, j as u32))
    };
    // The slice index of every read and write: one affine function for the whole loop.
    let mut index: Option<Affine> = None;
    let mut same_index = |starts: &[ValueRef]| -> bool {
        let Some(i) = starts.first().and_then(|&s| scalar(g, body, s, &counted)) else {
            return false;
        };
        match &index {
            Some(j) => j.b == i.b && g.scope.prove_eq(&j.a, &i.a),
            None => {
                let n1 = counted.n.checked_sub(&DimExpr::constant(1));
                let ok = (i.b == 1 && g.scope.prove_eq(&i.a, &DimExpr::zero()))
                    || (i.b == -1 && n1.is_ok_and(|n1| g.scope.prove_eq(&i.a, &n1)));
                if ok {
                    index = Some(i);
                }
                ok
            }
        }
    };
    let spans = |shape: &[DimExpr], full: &[DimExpr]| {
        shape.len() == full.len()
            && !full.is_empty()
            && shape[0].as_const() == Some(1)
            && shape[1..]
                .iter()
                .zip(&full[1..])
                .all(|(a, b)| g.scope.prove_eq(a, b))
    };
    let mut stacked = Vec::new();
    for &m in &forwarded {
        let (Some(&v), Some(&arg)) = (ops.get(m), args.get(m)) else {
            continue;
        };
        let ty = g.value_type(v).clone();
        let first_dim = ty.shape.first().cloned();
        if m == counted.counter
            || cond_reads(m)
            || users_of_result(m)
            || !first_dim.is_some_and(|d| g.scope.prove_eq(&d, &counted.n))
            || !owned_and_dying(g, w, v, &ops, &before)
        {
            continue;
        }
        let reads = body.users(arg);
        let ok = !reads.is_empty()
            && reads.iter().all(|&(u, k, _)| {
                let Op::DynamicSlice(sizes) = &body.node(u).op else {
                    return false;
                };
                k == 0 && spans(sizes, &ty.shape) && same_index(&body.operands(u)[1..])
            });
        if ok {
            stacked.push(m);
        }
    }
    let mut built = Vec::new();
    for (k, (&v, &arg)) in ops.iter().zip(args).enumerate() {
        if k == counted.counter || forwarded.contains(&k) || cond_reads(k) {
            continue;
        }
        let Some(&out) = body.outputs().get(k) else {
            continue;
        };
        let dus = body.node(out.node);
        let dus_ops = body.operands(out.node);
        let ty = g.value_type(v);
        let ok = dus.op == Op::DynamicUpdateSlice
            && dus_ops.first() == Some(&ValueRef::new(arg, 0))
            && body.users(arg).len() == 1
            && dus_ops
                .get(1)
                .is_some_and(|&u| spans(&body.value_type(u).shape, &ty.shape))
            && same_index(&dus_ops[2..]);
        if ok {
            built.push(k);
        }
    }
    // A carry whose reads all precede the update already (no ordering to add) first.
    let mut pairs = Vec::new();
    let mut taken = HashSet::new();
    for k in built {
        let ty = g.value_type(ops[k]);
        let dus = body.outputs()[k].node;
        let fits = |m: &&usize| !taken.contains(*m) && g.value_type(ops[**m]) == ty;
        let found = stacked
            .iter()
            .filter(fits)
            .find(|&&m| unordered(body, args[m], dus).is_empty())
            .or_else(|| stacked.iter().find(fits));
        if let Some(&m) = found {
            taken.insert(m);
            pairs.push((m, k));
        }
    }
    pairs
}

/// Whether operand value `v` of loop `w` (operands `ops`) is a buffer the step owns that dies
/// at the loop: not a `constant`, a donated input if an input, not a graph output, read once
/// by the loop, every other reader an ancestor of the loop (in `before`).
fn owned_and_dying(
    g: &Graph,
    w: NodeId,
    v: ValueRef,
    ops: &[ValueRef],
    before: &HashSet<NodeId>,
) -> bool {
    crate::carry::owned(g, v)
        && ops.iter().filter(|&&x| x == v).count() == 1
        && !g.outputs().contains(&v)
        && g.users(v.node)
            .iter()
            .all(|&(u, _, out)| out != v.output || u == w || before.contains(&u))
}

/// The counter and trip count of loop `w`: a carry starting at the constant 0 that the body
/// steps by the constant 1, and a condition `counter < n` (signed), `n` a dimension
/// expression.
fn counted(g: &Graph, w: NodeId, cond: &Graph, body: &Graph) -> Option<Counted> {
    let &[p] = cond.outputs() else { return None };
    let Op::Compare(spec) = &cond.node(p.node).op else {
        return None;
    };
    let signed = spec.compare_type != Some(ebb_ir::op::CompareType::Unsigned);
    if spec.direction != ebb_ir::Relation::Lt || !signed {
        return None;
    }
    let cops = cond.operands(p.node);
    let counter = cond.inputs().iter().position(|&a| a == cops[0].node)?;
    let n = scalar(
        g,
        cond,
        cops[1],
        &Counted {
            counter: usize::MAX,
            n: DimExpr::zero(),
        },
    )?;
    if n.b != 0 || crate::canon::unroll::scalar_int(g, *g.operands(w).get(counter)?) != Some(0) {
        return None;
    }
    let arg = ValueRef::new(*body.inputs().get(counter)?, 0);
    let next = *body.outputs().get(counter)?;
    let nops = body.operands(next.node);
    let one = |v: ValueRef| crate::canon::unroll::scalar_int(body, v) == Some(1);
    let stepped = body.node(next.node).op == Op::Add
        && ((nops[0] == arg && one(nops[1])) || (nops[1] == arg && one(nops[0])));
    stepped.then_some(Counted { counter, n: n.a })
}

/// The value of scalar `v` of region `r` of loop `g` as an affine function of the counter.
fn scalar(g: &Graph, r: &Graph, v: ValueRef, counted: &Counted) -> Option<Affine> {
    let xs = eval(g, r, v, counted, 0)?;
    match xs.as_slice() {
        [x] => Some(x.clone()),
        _ => None,
    }
}

/// The elements of small integer value `v` of region `r` as affine functions of the counter
/// (row-major), for the ops JAX builds slice indices with; `None` for anything else.
fn eval(g: &Graph, r: &Graph, v: ValueRef, counted: &Counted, depth: usize) -> Option<Vec<Affine>> {
    const MAX: usize = 16;
    if depth > 64 || v.output != 0 || !r.value_type(v).dtype.is_int() {
        return None;
    }
    let n = r.node(v.node);
    let ops = r.operands(v.node);
    let arg = |i: usize| eval(g, r, *ops.get(i)?, counted, depth + 1);
    let len = r
        .value_type(v)
        .static_dims()?
        .iter()
        .product::<i64>()
        .try_into()
        .ok()
        .filter(|&l: &usize| l <= MAX)?;
    let konst = |a: DimExpr| Affine { a, b: 0 };
    let out = match &n.op {
        Op::Input(_) => {
            let i = r.inputs().iter().position(|&a| a == v.node)?;
            (i == counted.counter).then(|| {
                vec![Affine {
                    a: DimExpr::zero(),
                    b: 1,
                }]
            })?
        }
        Op::Constant(_) => {
            let (splat, xs) = crate::canon::fold::elements(r, v, MAX)?;
            let xs: Vec<Affine> = xs
                .into_iter()
                .map(|x| match x {
                    crate::canon::fold::Num::I(i) => Some(konst(DimExpr::constant(i))),
                    crate::canon::fold::Num::F(_) => None,
                })
                .collect::<Option<_>>()?;
            if splat {
                vec![xs.first()?.clone(); len]
            } else {
                xs
            }
        }
        Op::DimConstant(dims) => dims.iter().cloned().map(konst).collect(),
        Op::Reshape(_) | Op::Convert(_) => arg(0)?,
        Op::Add | Op::Subtract => {
            let (x, y) = (arg(0)?, arg(1)?);
            if x.len() != y.len() {
                return None;
            }
            let s = if n.op == Op::Add { 1 } else { -1 };
            x.iter()
                .zip(&y)
                .map(|(x, y)| {
                    let a = if s == 1 {
                        x.a.checked_add(&y.a).ok()?
                    } else {
                        x.a.checked_sub(&y.a).ok()?
                    };
                    Some(Affine {
                        a,
                        b: x.b.checked_add(s * y.b)?,
                    })
                })
                .collect::<Option<_>>()?
        }
        Op::Concatenate(0) => (0..ops.len())
            .map(arg)
            .collect::<Option<Vec<_>>>()?
            .concat(),
        Op::Slice(spec) if spec.start.len() == 1 => {
            let x = arg(0)?;
            let (s, l) = (spec.start[0].as_const()?, spec.limit[0].as_const()?);
            if spec.strides[0].as_const() != Some(1) || s < 0 || l < s || l as usize > x.len() {
                return None;
            }
            x[s as usize..l as usize].to_vec()
        }
        Op::Clamp => {
            let (lo, x, hi) = (arg(0)?, arg(1)?, arg(2)?);
            let at = |v: &[Affine], i: usize| v.get(if v.len() == 1 { 0 } else { i }).cloned();
            (0..x.len())
                .map(|i| {
                    let (lo, x, hi) = (at(&lo, i)?, x[i].clone(), at(&hi, i)?);
                    let (min, max) = range(&x, &counted.n)?;
                    (lo.b == 0
                        && hi.b == 0
                        && g.scope.prove_le(&lo.a, &min)
                        && g.scope.prove_le(&max, &hi.a))
                    .then_some(x)
                })
                .collect::<Option<_>>()?
        }
        _ => return None,
    };
    (out.len() == len).then_some(out)
}

/// The smallest and largest value of `x` over the counter values `0..n`.
fn range(x: &Affine, n: &DimExpr) -> Option<(DimExpr, DimExpr)> {
    let last = n.checked_sub(&DimExpr::constant(1)).ok()?;
    match x.b {
        0 => Some((x.a.clone(), x.a.clone())),
        1 => Some((x.a.clone(), x.a.checked_add(&last).ok()?)),
        -1 => Some((x.a.checked_sub(&last).ok()?, x.a.clone())),
        _ => None,
    }
}

/// Hands each `R` (carry `m`) of `pairs` to its `G` (carry `k`) in loop `w`, removing the `R`
/// carries; the old initial operands of the `G`s are removed when nothing else reads them.
fn rewrite(g: &mut Graph, w: NodeId, pairs: &[(usize, usize)]) {
    let ops = g.operands(w);
    let mut node = g.node(w).clone();
    {
        let body = &mut node.regions[1];
        for &(m, k) in pairs {
            let (rm, gk) = (body.inputs()[m], body.inputs()[k]);
            let dus = body.outputs()[k].node;
            order_after(body, unordered(body, rm, dus), dus);
            body.replace_all_uses(ValueRef::new(rm, 0), ValueRef::new(gk, 0));
        }
    }
    let mut operands = ops.clone();
    for &(m, k) in pairs {
        operands[k] = ops[m];
    }
    let drop: BTreeSet<usize> = pairs.iter().map(|&(m, _)| m).collect();
    let keep = |j: &usize| !drop.contains(j);
    node.regions = node
        .regions
        .iter()
        .enumerate()
        .map(|(i, r)| without_inputs(r, &drop, i == 1))
        .collect();
    node.outputs = (0..node.outputs.len())
        .filter(keep)
        .map(|j| node.outputs[j].clone())
        .collect();
    let operands: Vec<ValueRef> = (0..operands.len())
        .filter(keep)
        .map(|j| operands[j])
        .collect();
    let before = g.order().len();
    let new = g.add_node(node, &operands);
    let kept: Vec<usize> = (0..ops.len()).filter(keep).collect();
    for (i, &j) in kept.iter().enumerate() {
        g.replace_all_uses(ValueRef::new(w, j as u32), ValueRef::new(new, i as u32));
    }
    let mut order = g.order().to_vec();
    order.truncate(before);
    for n in order.iter_mut() {
        if *n == w {
            *n = new;
        }
    }
    g.set_order(order);
    g.remove_nodes(&HashSet::from([w]));
    let mut gone = HashSet::new();
    for &(_, k) in pairs {
        let old = ops[k];
        if g.users(old.node).is_empty() && !g.outputs().iter().any(|o| o.node == old.node) {
            gone.insert(old.node);
        }
    }
    g.remove_nodes(&gone);
}

/// The readers of `arg` in region `r` that are not ancestors of node `dus`.
fn unordered(r: &Graph, arg: NodeId, dus: NodeId) -> Vec<NodeId> {
    let earlier = reach(r, dus, Direction::Incoming);
    let mut late: Vec<NodeId> = r
        .users(arg)
        .into_iter()
        .map(|(u, _, _)| u)
        .filter(|u| !earlier.contains(u))
        .collect();
    late.dedup();
    late
}

/// Makes the `dynamic_update_slice` `dus` of region `r` follow the nodes `reads` (slices of
/// the carry it updates): its update passes through an `optimization_barrier` with their
/// results, placed right before it, so that the update is written in place only after every
/// read, in every schedule. The barrier is the identity; nothing else reads its other results.
fn order_after(r: &mut Graph, reads: Vec<NodeId>, dus: NodeId) {
    if reads.is_empty() {
        return;
    }
    let update = r.operands(dus)[1];
    let mut ins = vec![update];
    ins.extend(reads.iter().map(|&n| ValueRef::new(n, 0)));
    let types = ins.iter().map(|&v| r.value_type(v).clone()).collect();
    let mut barrier = Node::new(Op::OptimizationBarrier, types);
    barrier.loc.clone_from(&r.node(dus).loc);
    let barrier = r.add_node(barrier, &ins);
    r.set_operand(dus, 1, ValueRef::new(barrier, 0));
    let mut order: Vec<NodeId> = r
        .order()
        .iter()
        .copied()
        .filter(|&n| n != barrier)
        .collect();
    let at = order.iter().position(|&n| n == dus).unwrap_or(order.len());
    order.insert(at, barrier);
    r.set_order(order);
}

/// A copy of region `r` without its inputs in `drop` (which nothing reads) and, with
/// `outputs`, without its outputs of those indices; donations are cleared (the donation pass
/// makes them anew).
fn without_inputs(r: &Graph, drop: &BTreeSet<usize>, outputs: bool) -> Graph {
    let mut out = Graph::new(&r.name);
    out.scope = r.scope.clone();
    out.assertions = r.assertions.clone();
    let mut map: HashMap<NodeId, NodeId> = HashMap::new();
    for (i, &a) in r.inputs().iter().enumerate() {
        if !drop.contains(&i) {
            let ty = r.value_type(ValueRef::new(a, 0)).clone();
            map.insert(a, out.add_input(r.input_name(a), ty).node);
        }
    }
    for &id in r.order() {
        if r.node(id).kind() == OpKind::Input {
            continue;
        }
        let operands: Vec<ValueRef> = r
            .operands(id)
            .iter()
            .map(|v| ValueRef::new(map[&v.node], v.output))
            .collect();
        let node: Node = r.node(id).clone();
        map.insert(id, out.add_node(node, &operands));
    }
    let (mut outs, mut names) = (Vec::new(), Vec::new());
    for (j, v) in r.outputs().iter().enumerate() {
        if !outputs || !drop.contains(&j) {
            outs.push(ValueRef::new(map[&v.node], v.output));
            names.push(r.output_names.get(j).cloned().unwrap_or_default());
        }
    }
    out.set_outputs(outs, names);
    out
}
