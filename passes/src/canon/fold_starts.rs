//! Rule 9 of [`super::fold`]: the start indices of `dynamic_slice` and `dynamic_update_slice`
//! read through the index arithmetic that builds them.
//!
//! JAX builds each start index of a scan's `dynamic_slice` from the loop counter `c` as
//! `reshape(slice(clamp(0, concatenate(reshape(c), 0, …), concatenate(n - 1, 0, …)), [k:k+1]))`:
//! a vector of all starts, clamped, then split into scalars. In a loop that is not unrolled
//! these ops run in every iteration although the op clamps its starts itself. Here each
//! start operand is followed back through `reshape`, 1-D `slice`, `concatenate`, `constant`,
//! `dim_constant`, integer `add`/`subtract`/`multiply` of dimension constants and `clamp` to
//! the one element it reads, and replaced by what it resolves to:
//! * a scalar of the operand's type already computed (the counter `c`): used directly;
//! * a dimension expression (constant or symbolic): a new scalar `constant` or
//!   `dim_constant`, placed just before the op;
//! * `clamp(lo, x, hi)` with `lo <= 0` and `hi >= D - s` (`D` the operand's dimension, `s`
//!   the slice's or update's size along it): `x`, since the op clamps the start to
//!   `[0, D - s]` and `clamp(0, clamp(lo, x, hi), D - s) == clamp(0, x, D - s)` when
//!   `lo <= 0 <= D - s <= hi` (the op's types give `s <= D`).
//!
//! Anything else (a start that depends on data other than a scalar, or a clamp whose bounds
//! are not provably that wide) leaves the operand as it is. The old index ops, when now
//! unused, are left to DCE.
//!
//! Invariant: every rewired start operand has the operand's type and the same value after the
//! op's own clamping, so the op's result is bit-identical; only the op's start operands change,
//! and each creates at most one new scalar node (no tensor grows). Change count: start operands
//! rewired.

use super::fold::{elements, Num};
use ebb_ir::{DimExpr, Graph, Node, NodeId, Op, TensorType, ValueRef};

/// How far back a start index is followed (JAX's chains are 4 or 5 ops deep).
const MAX_DEPTH: usize = 16;

/// What one element of an integer tensor is, as far as followed.
#[derive(Clone, Debug, PartialEq)]
enum Elem {
    /// A rank-0 value computed by the graph.
    Value(ValueRef),
    /// A dimension expression (a constant when it has no symbol).
    Dim(DimExpr),
    /// `clamp(lo, x, hi)` of elements.
    Clamp(Box<[Elem; 3]>),
}

/// What a start operand is replaced by.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Start {
    /// An existing rank-0 value.
    Value(ValueRef),
    /// A new scalar `constant` or `dim_constant` holding this expression.
    Dim(DimExpr),
}

/// The new start operands of op `id` (a `dynamic_slice` or `dynamic_update_slice`):
/// `(operand index, replacement)` for each start that resolves to something cheaper than
/// what it reads now; empty when none does.
pub(super) fn rewrite(g: &Graph, id: NodeId, max: usize) -> Vec<(usize, Start)> {
    let n = g.node(id);
    let operands = g.operands(id);
    // (first start operand, the slice's size along each dimension)
    let (first, sizes): (usize, Vec<DimExpr>) = match &n.op {
        Op::DynamicSlice(sizes) => (1, sizes.clone()),
        Op::DynamicUpdateSlice => match operands.get(1) {
            Some(u) => (2, g.value_type(*u).shape.clone()),
            None => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    let Some(x) = operands.first() else {
        return Vec::new();
    };
    let dims = &g.value_type(*x).shape;
    let mut out = Vec::new();
    for (d, (dim, size)) in dims.iter().zip(&sizes).enumerate() {
        let Some(&cur) = operands.get(first + d) else {
            break;
        };
        let ty = g.value_type(cur);
        if ty.rank() != 0 || !ty.dtype.is_int() {
            continue;
        }
        let Ok(room) = dim.checked_sub(size) else {
            continue;
        };
        let Some(e) = elem(g, cur, 0, max, MAX_DEPTH) else {
            continue;
        };
        let Some(s) = resolve(g, e, &room, ty) else {
            continue;
        };
        if !same(g, cur, &s) {
            out.push((first + d, s));
        }
    }
    out
}

/// The node a [`Start::Dim`] becomes: a scalar `constant` of type `ty` when the expression is
/// a constant that `ty` holds, else a scalar `dim_constant`.
pub(super) fn node(e: &DimExpr, ty: &TensorType) -> Option<Node> {
    let out = vec![TensorType::scalar(ty.dtype)];
    Some(match e.as_const() {
        Some(k) => Node::new(
            Op::Constant(super::fold::build(ty.dtype, &[Num::I(k)], true)?),
            out,
        ),
        None => Node::new(Op::DimConstant(vec![e.clone()]), out),
    })
}

/// Whether `cur` already is what `s` would make it (so that the rule reaches a fixed point).
fn same(g: &Graph, cur: ValueRef, s: &Start) -> bool {
    match s {
        Start::Value(v) => *v == cur,
        Start::Dim(e) => match (&g.node(cur.node).op, e.as_const()) {
            (Op::DimConstant(ds), _) => ds.as_slice() == std::slice::from_ref(e),
            (Op::Constant(_), Some(k)) => {
                matches!(elements(g, cur, 1), Some((true, xs)) if xs == [Num::I(k)])
            }
            _ => false,
        },
    }
}

/// `e` as a start along a dimension whose op clamps starts to `[0, room]` (see the module docs),
/// with type `ty`; `None` when it stays an unresolved `clamp` or a value of another type.
fn resolve(g: &Graph, e: Elem, room: &DimExpr, ty: &TensorType) -> Option<Start> {
    match e {
        Elem::Value(v) => (g.value_type(v) == ty).then_some(Start::Value(v)),
        Elem::Dim(d) => node(&d, ty).map(|_| Start::Dim(d)),
        Elem::Clamp(b) => {
            let [lo, x, hi] = *b;
            let low = matches!(&lo, Elem::Dim(l) if l.as_const().is_some_and(|l| l <= 0));
            let high = matches!(&hi, Elem::Dim(h)
                if h.checked_sub(room).ok().and_then(|d| d.as_const()).is_some_and(|d| d >= 0));
            if low && high {
                resolve(g, x, room, ty)
            } else {
                None
            }
        }
    }
}

/// Element `k` (row-major) of integer value `v`, followed back at most `depth` ops.
fn elem(g: &Graph, v: ValueRef, k: usize, max: usize, depth: usize) -> Option<Elem> {
    let t = g.value_type(v);
    if !t.dtype.is_int() {
        return None;
    }
    let followed = if depth == 0 {
        None
    } else {
        follow(g, v, k, max, depth - 1)
    };
    match followed {
        Some(e) => Some(e),
        None if t.rank() == 0 && k == 0 => Some(Elem::Value(v)),
        None => None,
    }
}

/// Element `k` of `v` through its producer (see [`elem`]).
fn follow(g: &Graph, v: ValueRef, k: usize, max: usize, depth: usize) -> Option<Elem> {
    let n = g.node(v.node);
    if v.output != 0 || n.outputs.len() != 1 {
        return None;
    }
    let t = &n.outputs[0];
    let len = super::fold::num_elements(t)?;
    if k >= len || len > max {
        return None;
    }
    let ops = g.operands(v.node);
    // Operand `i` broadcast when it is a scalar (the `clamp` bounds), else element `k`.
    let arg = |i: usize| -> Option<Elem> {
        let o = *ops.get(i)?;
        let at = if g.value_type(o).rank() == 0 { 0 } else { k };
        elem(g, o, at, max, depth)
    };
    match &n.op {
        Op::Constant(_) => {
            let (splat, xs) = elements(g, v, max)?;
            match xs.get(if splat { 0 } else { k })? {
                Num::I(i) => Some(Elem::Dim(DimExpr::constant(*i))),
                Num::F(_) => None,
            }
        }
        Op::DimConstant(ds) => {
            let d = if ds.len() == 1 { ds.first() } else { ds.get(k) }?;
            Some(Elem::Dim(d.clone()))
        }
        // Row-major order is kept: element k of the result is element k of the operand.
        Op::Reshape(_) => {
            let o = *ops.first()?;
            (super::fold::num_elements(g.value_type(o))? == len).then_some(())?;
            elem(g, o, k, max, depth)
        }
        Op::Slice(s) if t.rank() == 1 => {
            let start = s.start.first()?.as_const()?;
            let stride = s.strides.first()?.as_const()?;
            let at = start.checked_add(stride.checked_mul(i64::try_from(k).ok()?)?)?;
            elem(g, *ops.first()?, usize::try_from(at).ok()?, max, depth)
        }
        Op::Concatenate(0) if t.rank() == 1 => {
            let mut k = k;
            for o in &ops {
                let n = usize::try_from(g.value_type(*o).static_dims()?.first().copied()?).ok()?;
                if k < n {
                    return elem(g, *o, k, max, depth);
                }
                k -= n;
            }
            None
        }
        Op::Add | Op::Subtract | Op::Multiply => {
            let (Elem::Dim(a), Elem::Dim(b)) = (arg(0)?, arg(1)?) else {
                return None;
            };
            let r = match n.op {
                Op::Add => a.checked_add(&b),
                Op::Subtract => a.checked_sub(&b),
                _ => a.checked_mul(&b),
            };
            let r = r.ok()?;
            // A constant must fit the element type (the op would wrap); a symbolic product
            // is left to the op (it may exceed the type where a sum of dimensions does not).
            match r.as_const() {
                Some(c) => {
                    super::fold::build(t.dtype, &[Num::I(c)], true)?;
                }
                None if n.op == Op::Multiply => return None,
                None => {}
            }
            Some(Elem::Dim(r))
        }
        Op::Clamp => Some(Elem::Clamp(Box::new([arg(0)?, arg(1)?, arg(2)?]))),
        _ => None,
    }
}
