//! Constant folding of shape computations (`fold`).
//!
//! Rules, applied in one forward sweep over the program order (a folded value feeds the
//! folding of its users in the same sweep), regions included:
//! 1. `dim_constant` whose dimensions are all constants → `constant` (splat when all equal).
//! 2. `convert` of a splat or small constant → `constant` of the new element type, only when
//!    every element converts exactly (to `i1`: non-zero → true, as the StableHLO spec says;
//!    float → integer truncates toward zero; anything that would round, overflow or is NaN
//!    is left alone).
//! 3. `reshape` / `broadcast_in_dim` of a splat constant → splat `constant` of the result
//!    type, when the result shape is static.
//! 4. `add` / `subtract` / `multiply` / `divide` of two small integer constants → `constant`,
//!    with checked `i64` arithmetic (division truncates toward zero, as in the StableHLO
//!    spec); overflow of the element type or division by zero is left alone.
//! 5. Identity ops are bypassed: `reshape` to the same type, `transpose` with the identity
//!    permutation, `convert` to the same element type, `broadcast_in_dim` to the same shape
//!    with identity `broadcast_dimensions`, `reduce_precision` to a format that holds every
//!    value of the operand's type (`f32` to 8 exponent and 23 mantissa bits, which
//!    `jax.checkpoint` policies emit).
//! 6. Literal canonicalization: a non-splat `constant` whose elements are all equal becomes a
//!    splat (so CSE sees equal constants as equal, and the literal shrinks).
//! 7. Index arithmetic on small integer constants (`canon/fold_index.rs`): `reshape`,
//!    `concatenate`, `slice`, `clamp`, `select`, `compare`, `maximum`, `minimum` → `constant`.
//!    These compute the start indices of a loop's `dynamic_slice`s once the loop is unrolled
//!    ([`super::unroll`]), e.g. `clamp(0, concatenate(reshape(1 - i), 0, 0), 1)`.
//! 8. `broadcast_in_dim` of a splat `constant` of rank > 0 to a symbolic shape → a
//!    `broadcast_in_dim` of a scalar `constant` of that value (`broadcast_dimensions = []`).
//!    JAX broadcasts the same zero from a scalar in one place and from a `[1,1,1,1]` splat in
//!    another; in this one form CSE merges them, as a precise compile merges the splat
//!    constants it folds both into (without this rule, one such pair of `[B,4,S,S]` zeros puts
//!    the dropout step's symbolic plan 3% above its precise plan). The old operand, when now
//!    unused, is left to DCE.
//!
//! 9. Start indices of `dynamic_slice` / `dynamic_update_slice` (`canon/fold_starts.rs`):
//!    each start operand is followed back through the index arithmetic that builds it
//!    (`reshape`, `slice`, `concatenate`, `clamp`, dimension constants) and replaced by the
//!    scalar it reads (the loop counter), a new scalar constant or `dim_constant`; a `clamp`
//!    no narrower than the op's own clamping of the start is dropped. In a loop that is not
//!    unrolled, this removes the per-iteration index ops of a scan.
//!
//! 10. Loop-invariant constants of a `while` (`canon/fold_loop.rs`): a carried value whose
//!     initial operand is a small constant and that the body returns unchanged is read as a
//!     copy of that constant inside the `cond` and `body` regions.
//! 11. `gather` of one window at constant start indices (`canon/fold_gather.rs`) → `slice`
//!     (and a `reshape` dropping the collapsed dimensions).
//!
//! 12. A sum of `scatter`-adds into `+0` whose windows tile the result along one dimension
//!     (`canon/fold_scatter.rs`) → `concatenate` of `0 + update` per window.
//!
//! "Small" means at most [`Fold::max_elements`] elements ([`MAX_FOLD_ELEMENTS`] by default).
//!
//! Invariant: folding never grows memory. A new constant is either a splat (one stored
//! element) that replaces an op producing a tensor of the same type, or a small dense tensor
//! that replaces an op producing the same small tensor; large non-splat constants are never
//! materialized. Result types, graph inputs, outputs and assertions are unchanged, and a
//! folded op's replacement takes its place in the program order. Folded ops are removed;
//! their operands, when now unused, are left to DCE. Rule 9 changes only start operands (each
//! new scalar node takes its place just before the op); rule 11's `slice` reads the gathered
//! window only (no larger than the gather's result); rule 12's pieces are the scatters' updates
//! and its `concatenate` has the replaced sum's type. Change count: ops folded or bypassed
//! plus literals canonicalized plus start operands rewired.

use super::fold_starts::Start;
use super::for_each_region;
use crate::manager::{Pass, PassContext, PassError, PassResult};
use crate::pass_id::PassId;
use ebb_ir::op::BroadcastSpec;
use ebb_ir::op::{f16_bits_to_f32, f32_to_f16_bits};
use ebb_ir::{DType, Graph, Literal, Node, NodeId, Op, OpKind, TensorType, ValueRef};
use std::collections::{HashMap, HashSet};

/// Default for [`Fold::max_elements`]: the largest non-splat constant (in elements) that
/// folding may create or read. Shape vectors and index tuples are far smaller.
pub const MAX_FOLD_ELEMENTS: usize = 64;

/// The constant-folding pass (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct Fold {
    /// Largest non-splat constant, in elements, that folding creates or reads.
    pub max_elements: usize,
}

impl Default for Fold {
    fn default() -> Self {
        Fold {
            max_elements: MAX_FOLD_ELEMENTS,
        }
    }
}

impl Pass for Fold {
    fn name(&self) -> &'static str {
        PassId::Fold.name()
    }

    fn run(&self, g: &mut Graph, _cx: &mut PassContext) -> Result<PassResult, PassError> {
        Ok(PassResult::changes(fold_constants(g, self.max_elements)))
    }
}

/// What to do with one op.
enum Rewrite {
    /// Replace the op's result by an existing value and remove the op.
    Forward(ValueRef),
    /// Replace the op by a `constant` of its result type holding this literal.
    Constant(Literal),
    /// Replace the literal of this `constant` in place.
    Relit(Literal),
    /// Make the op a `broadcast_in_dim` (this payload) of a new scalar `constant` holding this
    /// literal, placed just before it.
    ScalarBroadcast(Literal, Box<BroadcastSpec>),
    /// Set these start operands of a `dynamic_slice` / `dynamic_update_slice` (rule 9).
    Starts(Vec<(usize, Start)>),
    /// Replace the op by this `slice` of this value, then this `reshape` of it (rule 11).
    Slice(Box<(Node, ValueRef, Option<Node>)>),
    /// Replace the `add` tree rooted at the op by this concatenation (rule 12).
    Concat(super::fold_scatter::Tiling),
}

/// Folds `g` and its regions (see the module docs); returns the change count. Linear in the
/// size of the graph (each rule looks at an op and its operands' producers only).
pub fn fold_constants(g: &mut Graph, max_elements: usize) -> usize {
    let order: Vec<NodeId> = g.order().to_vec();
    let mut replaced_by: HashMap<NodeId, NodeId> = HashMap::new();
    let mut removed: HashSet<NodeId> = HashSet::new();
    // Scalar start nodes of rule 9, by the op they are placed before.
    let mut starts_before: HashMap<NodeId, Vec<NodeId>> = HashMap::new();
    let mut changes = 0;
    for id in order {
        changes += super::fold_loop::fold_invariants(g, id, max_elements);
        changes += for_each_region(g, id, |r| {
            Ok::<_, std::convert::Infallible>(fold_constants(r, max_elements))
        })
        .unwrap_or(0);
        let Some(rw) = rewrite(g, id, max_elements) else {
            continue;
        };
        changes += 1;
        match rw {
            Rewrite::Forward(v) => {
                g.replace_all_uses(ValueRef::new(id, 0), v);
                removed.insert(id);
            }
            Rewrite::Constant(lit) => {
                let n = g.node(id);
                let mut c = Node::new(Op::Constant(lit), n.outputs.clone());
                c.loc = n.loc.clone();
                let c = g.add_node(c, &[]);
                g.replace_all_uses(ValueRef::new(id, 0), ValueRef::new(c, 0));
                replaced_by.insert(id, c);
                removed.insert(id);
            }
            Rewrite::Relit(lit) => {
                g.node_mut(id).op = Op::Constant(lit);
            }
            Rewrite::ScalarBroadcast(lit, spec) => {
                let scalar = TensorType::scalar(lit.dtype);
                let mut c = Node::new(Op::Constant(lit), vec![scalar]);
                c.loc.clone_from(&g.node(id).loc);
                let c = g.add_node(c, &[]);
                g.node_mut(id).op = Op::BroadcastInDim(*spec);
                g.set_operand(id, 0, ValueRef::new(c, 0));
                // Placed before `id`, which stays.
                replaced_by.insert(id, c);
            }
            Rewrite::Slice(b) => {
                let (slice, src, reshape) = *b;
                let mut last = g.add_node(slice, &[src]);
                let mut placed = vec![last];
                if let Some(r) = reshape {
                    last = g.add_node(r, &[ValueRef::new(last, 0)]);
                    placed.push(last);
                }
                starts_before.entry(id).or_default().extend(placed);
                g.replace_all_uses(ValueRef::new(id, 0), ValueRef::new(last, 0));
                removed.insert(id);
            }
            Rewrite::Concat(t) => {
                let last = concat(g, id, t);
                g.replace_all_uses(ValueRef::new(id, 0), ValueRef::new(last[last.len() - 1], 0));
                starts_before.entry(id).or_default().extend(last);
                removed.insert(id);
            }
            Rewrite::Starts(starts) => {
                changes += starts.len() - 1;
                for (i, s) in starts {
                    let v = match s {
                        Start::Value(v) => v,
                        Start::Dim(e) => {
                            let ty = g.value_type(g.operands(id)[i]).clone();
                            let Some(mut c) = super::fold_starts::node(&e, &ty) else {
                                continue;
                            };
                            c.loc.clone_from(&g.node(id).loc);
                            let c = g.add_node(c, &[]);
                            starts_before.entry(id).or_default().push(c);
                            ValueRef::new(c, 0)
                        }
                    };
                    g.set_operand(id, i as u32, v);
                }
            }
        }
    }
    // New constants were appended; move each to the position of the op it replaces.
    super::place_before(g, &replaced_by);
    super::place_all_before(g, &starts_before);
    if !removed.is_empty() {
        g.remove_nodes(&removed);
    }
    changes
}

/// Appends the nodes of rule 12's concatenation `t` that replaces `add` node `id` (a scalar
/// zero when the graph has none, a `broadcast_in_dim` of it and an `add` per piece, the
/// `concatenate` last); returns them in order.
fn concat(g: &mut Graph, id: NodeId, t: super::fold_scatter::Tiling) -> Vec<NodeId> {
    let loc = g.node(id).loc.clone();
    let out = g.node(id).outputs[0].clone();
    let mut nodes = Vec::new();
    let mut add = |g: &mut Graph, op: Op, ty: TensorType, operands: &[ValueRef]| {
        let mut n = Node::new(op, vec![ty]);
        n.loc.clone_from(&loc);
        let id = g.add_node(n, operands);
        nodes.push(id);
        ValueRef::new(id, 0)
    };
    let zero = match t.zero {
        Some(z) => z,
        None => {
            let z = if t.dtype.is_float() {
                Num::F(0.0)
            } else {
                Num::I(0)
            };
            let lit = build(t.dtype, &[z], true).expect("a zero of a numeric type");
            add(g, Op::Constant(lit), TensorType::scalar(t.dtype), &[])
        }
    };
    let mut pieces = Vec::with_capacity(t.pieces.len());
    for u in t.pieces {
        let ty = g.value_type(u).clone();
        let b = add(
            g,
            super::fold_scatter::broadcast(&ty.shape),
            ty.clone(),
            &[zero],
        );
        pieces.push(add(g, Op::Add, ty, &[b, u]));
    }
    add(g, Op::Concatenate(t.dim), out, &pieces);
    nodes
}

/// The rewrite for op `id`, if a rule applies.
fn rewrite(g: &Graph, id: NodeId, max: usize) -> Option<Rewrite> {
    let n = g.node(id);
    if n.outputs.len() != 1 {
        return None;
    }
    let out = &n.outputs[0];
    let operands = g.operands(id);
    let input = |i: usize| operands.get(i).map(|v| (*v, g.value_type(*v)));
    match &n.op {
        Op::Constant(lit) => canonical_literal(lit, out).map(Rewrite::Relit),
        Op::DimConstant(dims) => {
            let values: Option<Vec<i64>> = dims.iter().map(|d| d.as_const()).collect();
            let values: Option<Vec<Num>> = values?
                .into_iter()
                .map(|v| convert(Num::I(v), out.dtype))
                .collect();
            let values = values?;
            if Some(values.len()) != num_elements(out) {
                return None;
            }
            build(out.dtype, &values, false).map(Rewrite::Constant)
        }
        Op::Convert(_) => {
            let (v, t) = input(0)?;
            if t.dtype == out.dtype {
                return Some(Rewrite::Forward(v));
            }
            let (splat, values) = elements(g, v, max)?;
            let converted: Option<Vec<Num>> =
                values.into_iter().map(|x| convert(x, out.dtype)).collect();
            build(out.dtype, &converted?, splat).map(Rewrite::Constant)
        }
        Op::Reshape(_) | Op::BroadcastInDim(_) => {
            let (v, t) = input(0)?;
            let identity = match &n.op {
                Op::BroadcastInDim(b) => b.dims.iter().copied().eq(0..t.rank() as i64),
                _ => true,
            };
            if identity && t.shape == out.shape {
                return Some(Rewrite::Forward(v));
            }
            match elements(g, v, 1) {
                Some((true, values)) if out.static_dims().is_some() => {
                    build(out.dtype, &values, true).map(Rewrite::Constant)
                }
                Some((true, values)) if t.rank() > 0 && matches!(n.op, Op::BroadcastInDim(_)) => {
                    let lit = build(t.dtype, &values, true)?;
                    let spec = BroadcastSpec {
                        dims: Vec::new(),
                        shape: out.shape.clone(),
                    };
                    Some(Rewrite::ScalarBroadcast(lit, Box::new(spec)))
                }
                Some(_) => None,
                _ => super::fold_index::rewrite(g, id, max).map(Rewrite::Constant),
            }
        }
        Op::ReducePrecision(r) => {
            let (v, t) = input(0)?;
            (r.is_identity_on(t.dtype) && t == out).then_some(Rewrite::Forward(v))
        }
        Op::Transpose(perm) => {
            let (v, t) = input(0)?;
            (perm.iter().copied().eq(0..t.rank() as i64) && t == out).then_some(Rewrite::Forward(v))
        }
        Op::Add if g.node(operands.first()?.node).kind() != OpKind::Constant => {
            super::fold_scatter::tiling(g, id, max).map(Rewrite::Concat)
        }
        Op::Add | Op::Subtract | Op::Multiply | Op::Divide => {
            if !out.dtype.is_int() {
                return None;
            }
            let (a, b) = (input(0)?.0, input(1)?.0);
            let (sa, xa) = elements(g, a, max)?;
            let (sb, xb) = elements(g, b, max)?;
            let splat = sa && sb;
            let len = if splat { 1 } else { num_elements(out)? };
            let pick = |xs: &[Num], s: bool, i: usize| if s { xs[0] } else { xs[i] };
            if (!sa && xa.len() != len) || (!sb && xb.len() != len) {
                return None;
            }
            let mut values = Vec::with_capacity(len);
            for i in 0..len {
                let (Num::I(p), Num::I(q)) = (pick(&xa, sa, i), pick(&xb, sb, i)) else {
                    return None;
                };
                let r = match n.op {
                    Op::Add => p.checked_add(q),
                    Op::Subtract => p.checked_sub(q),
                    Op::Multiply => p.checked_mul(q),
                    _ => p.checked_div(q),
                }?;
                values.push(Num::I(r));
            }
            build(out.dtype, &values, splat).map(Rewrite::Constant)
        }
        Op::DynamicSlice(_) | Op::DynamicUpdateSlice => {
            let starts = super::fold_starts::rewrite(g, id, max);
            (!starts.is_empty()).then_some(Rewrite::Starts(starts))
        }
        Op::Gather(_) => {
            super::fold_gather::as_slice(g, id, max).map(|x| Rewrite::Slice(Box::new(x)))
        }
        _ => super::fold_index::rewrite(g, id, max).map(Rewrite::Constant),
    }
}

/// One literal element: integers (and `i1`) as `i64`, floats as `f64`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Num {
    I(i64),
    F(f64),
}

/// Static element count of `t`, if its shape is static.
pub(super) fn num_elements(t: &TensorType) -> Option<usize> {
    t.static_dims()?
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?))
}

/// The `count` integers of value `v` when it is a `constant` of integers (a splat repeated):
/// [`elements`] with every element an integer.
pub(crate) fn int_elements(g: &Graph, v: ValueRef, count: usize, max: usize) -> Option<Vec<i64>> {
    let (splat, xs) = elements(g, v, max)?;
    let ints = xs
        .iter()
        .map(|x| match x {
            Num::I(i) => Some(*i),
            Num::F(_) => None,
        })
        .collect::<Option<Vec<i64>>>()?;
    Some(if splat { vec![ints[0]; count] } else { ints })
}

/// The one index vector of a `gather` or `scatter` of one window: the `len` integers of
/// `indices` when it is a constant of rank 0, or of rank 1 with `index_vector_dim = 0`, holding
/// exactly `len` of them ([`int_elements`]).
pub(crate) fn one_index_vector(
    g: &Graph,
    indices: ValueRef,
    index_vector_dim: i64,
    len: usize,
    max: usize,
) -> Option<Vec<i64>> {
    let ty = g.value_type(indices);
    let held = match ty.rank() {
        0 if index_vector_dim == 0 => 1,
        1 if index_vector_dim == 0 => usize::try_from(ty.shape[0].as_const()?).ok()?,
        _ => return None,
    };
    if held != len {
        return None;
    }
    int_elements(g, indices, len, max)
}

/// The elements of value `v` when it is produced by a `constant`: `(true, [x])` for a splat
/// (or a one-element tensor), `(false, xs)` for a dense literal of at most `max` elements.
pub(crate) fn elements(g: &Graph, v: ValueRef, max: usize) -> Option<(bool, Vec<Num>)> {
    let n = g.node(v.node);
    let Op::Constant(lit) = &n.op else {
        return None;
    };
    if v.output != 0 {
        return None;
    }
    let ty = n.outputs.first()?;
    if lit.dtype != ty.dtype {
        return None;
    }
    let stored = lit.stored_elements();
    let count = num_elements(ty);
    if stored == 1 && (lit.splat || count == Some(1)) {
        return Some((true, vec![read(lit, 0)?]));
    }
    if lit.splat
        || Some(stored) != count
        || stored > max
        || lit.data.len() != stored * lit.dtype.size_bytes() as usize
    {
        return None;
    }
    (0..stored)
        .map(|i| read(lit, i))
        .collect::<Option<Vec<_>>>()
        .map(|xs| (false, xs))
}

/// Element `i` of `lit`.
fn read(lit: &Literal, i: usize) -> Option<Num> {
    if lit.dtype.is_float() {
        lit.get_f64(i).map(Num::F)
    } else {
        lit.get_i64(i).map(Num::I)
    }
}

/// `x` converted to `to` with StableHLO `convert` semantics, or `None` when the result would
/// not be exact (rounding, overflow, NaN).
fn convert(x: Num, to: DType) -> Option<Num> {
    Some(match (x, to) {
        (Num::I(v), DType::I1) => Num::I(i64::from(v != 0)),
        (Num::F(f), DType::I1) => Num::I(i64::from(f != 0.0)),
        (Num::F(f), t) if !t.is_float() => {
            // Float to integer truncates toward zero; out-of-range values are left alone.
            if !f.is_finite() || f.trunc().abs() >= 9.0e18 {
                return None;
            }
            Num::I(f.trunc() as i64)
        }
        (Num::I(v), t) if t.is_float() => {
            let f = v as f64;
            if f as i64 != v || v.unsigned_abs() > (1u64 << 53) {
                return None;
            }
            Num::F(f)
        }
        (x, _) => x,
    })
}

/// Little-endian bytes of `x` as `dtype`, or `None` when `x` is not exactly representable.
fn encode(dtype: DType, x: Num) -> Option<Vec<u8>> {
    match (dtype, x) {
        (DType::I1, Num::I(v @ (0 | 1))) => Some(vec![v as u8]),
        (DType::I8, Num::I(v)) => i8::try_from(v).ok().map(|v| v.to_le_bytes().to_vec()),
        (DType::U8, Num::I(v)) => u8::try_from(v).ok().map(|v| vec![v]),
        (DType::I16, Num::I(v)) => i16::try_from(v).ok().map(|v| v.to_le_bytes().to_vec()),
        (DType::I32, Num::I(v)) => i32::try_from(v).ok().map(|v| v.to_le_bytes().to_vec()),
        (DType::U32, Num::I(v)) => u32::try_from(v).ok().map(|v| v.to_le_bytes().to_vec()),
        (DType::U64, Num::I(v)) => u64::try_from(v).ok().map(|v| v.to_le_bytes().to_vec()),
        (DType::I64, Num::I(v)) => Some(v.to_le_bytes().to_vec()),
        (DType::F64, Num::F(f)) if !f.is_nan() => Some(f.to_le_bytes().to_vec()),
        (t, Num::F(f)) if t.is_float() => {
            let y = f as f32;
            if y as f64 != f {
                return None;
            }
            match t {
                DType::F32 => Some(y.to_le_bytes().to_vec()),
                DType::BF16 => {
                    let bits = y.to_bits();
                    (bits & 0xffff == 0).then(|| ((bits >> 16) as u16).to_le_bytes().to_vec())
                }
                DType::F16 => {
                    let h = f32_to_f16_bits(y);
                    (f16_bits_to_f32(h) == y).then(|| h.to_le_bytes().to_vec())
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// A literal of `dtype` from `values` (one value when `splat`); all-equal values become a
/// splat. `None` when a value is not exactly representable.
pub(super) fn build(dtype: DType, values: &[Num], splat: bool) -> Option<Literal> {
    let first = values.first()?;
    if splat || values.iter().all(|x| x == first) {
        return Some(Literal {
            dtype,
            splat: true,
            data: encode(dtype, *first)?,
        });
    }
    let mut data = Vec::with_capacity(values.len() * dtype.size_bytes() as usize);
    for &x in values {
        data.extend(encode(dtype, x)?);
    }
    Some(Literal {
        dtype,
        splat: false,
        data,
    })
}

/// The splat form of a dense literal whose elements are all equal (rule 6), if it has one.
fn canonical_literal(lit: &Literal, ty: &TensorType) -> Option<Literal> {
    let size = lit.dtype.size_bytes() as usize;
    if lit.splat
        || lit.dtype != ty.dtype
        || lit.data.is_empty()
        || !lit.data.len().is_multiple_of(size)
    {
        return None;
    }
    if num_elements(ty) != Some(lit.data.len() / size) {
        return None;
    }
    let first = &lit.data[..size];
    lit.data
        .chunks_exact(size)
        .all(|c| c == first)
        .then(|| Literal {
            dtype: lit.dtype,
            splat: true,
            data: first.to_vec(),
        })
}
