//! Rule 7 of [`super::fold`]: index arithmetic on small integer constants.
//!
//! A `reshape`, `concatenate`, `slice`, `clamp`, `select`, `compare`, `maximum` or `minimum`
//! whose operands are all small integer constants (at most [`super::Fold::max_elements`]
//! elements, splats of any static shape) and whose result is a small integer tensor of static
//! shape is evaluated here, following the StableHLO spec's semantics of each op
//! (`clamp(min, operand, max)`, `select(pred, on_true, on_false)`, scalar operands of `clamp`
//! broadcast). These are the ops JAX wraps around a loop counter to build the start indices
//! of a scan's `dynamic_slice`/`dynamic_update_slice`; once a loop is unrolled
//! ([`super::unroll`]) the counter is a constant and so are the indices.
//!
//! Invariant: as for every fold rule, the replacement is a constant of the op's result type no
//! larger than [`super::Fold::max_elements`] elements (or a splat); floats are never touched.

use super::fold::{build, int_elements, num_elements, Num};
use ebb_ir::{DType, Graph, Literal, NodeId, Op};

/// The folded literal of op `id`, when rule 7 applies.
pub(super) fn rewrite(g: &Graph, id: NodeId, max: usize) -> Option<Literal> {
    let n = g.node(id);
    let out = n.outputs.first()?;
    if n.outputs.len() != 1 || !integral(out.dtype) {
        return None;
    }
    let len = num_elements(out)?;
    if len > max || len == 0 {
        return None;
    }
    let operands = g.operands(id);
    // Every operand expanded to its full element list (splats repeated).
    let mut args: Vec<Vec<i64>> = Vec::with_capacity(operands.len());
    for v in &operands {
        let t = g.value_type(*v);
        if !integral(t.dtype) {
            return None;
        }
        let count = num_elements(t)?;
        if count > max {
            return None;
        }
        args.push(int_elements(g, *v, count, max)?);
    }
    let values: Vec<i64> = match &n.op {
        Op::Reshape(_) => args.first()?.clone(),
        Op::Concatenate(dim) => concatenate(g, &operands, &args, *dim)?,
        Op::Slice(s) => {
            let dims = g.value_type(*operands.first()?).static_dims()?;
            let konst = |v: &[ebb_ir::DimExpr]| -> Option<Vec<i64>> {
                v.iter().map(|d| d.as_const()).collect()
            };
            slice(
                &args[0],
                &dims,
                &konst(&s.start)?,
                &konst(&s.limit)?,
                &konst(&s.strides)?,
            )?
        }
        Op::Clamp => {
            // `clamp(min, operand, max)`; `min` and `max` may be scalars.
            let x = args.get(1)?;
            let at = |a: &Vec<i64>, i: usize| if a.len() == 1 { a[0] } else { a[i] };
            let (lo, hi) = (args.first()?, args.get(2)?);
            (0..x.len())
                .map(|i| x[i].max(at(lo, i)).min(at(hi, i)))
                .collect()
        }
        Op::Select => {
            let (p, t, f) = (args.first()?, args.get(1)?, args.get(2)?);
            let at = |a: &Vec<i64>, i: usize| if a.len() == 1 { a[0] } else { a[i] };
            (0..t.len())
                .map(|i| if at(p, i) != 0 { t[i] } else { f[i] })
                .collect()
        }
        Op::Compare(c) => zip(&args, |a, b| i64::from(c.direction.holds(a, b)))?,
        Op::Maximum => zip(&args, i64::max)?,
        Op::Minimum => zip(&args, i64::min)?,
        _ => return None,
    };
    if values.len() != len {
        return None;
    }
    let values: Vec<Num> = values.into_iter().map(Num::I).collect();
    build(out.dtype, &values, false)
}

/// Integer types and `i1` (booleans are 0 and 1).
fn integral(d: DType) -> bool {
    d.is_int() || d == DType::I1
}

/// `f` applied elementwise to two equal-length operands.
fn zip(args: &[Vec<i64>], f: impl Fn(i64, i64) -> i64) -> Option<Vec<i64>> {
    let (a, b) = (args.first()?, args.get(1)?);
    (a.len() == b.len()).then(|| a.iter().zip(b).map(|(x, y)| f(*x, *y)).collect())
}

/// `concatenate` of row-major operands along `dim`.
fn concatenate(
    g: &Graph,
    operands: &[ebb_ir::ValueRef],
    args: &[Vec<i64>],
    dim: i64,
) -> Option<Vec<i64>> {
    let shapes: Option<Vec<Vec<i64>>> = operands
        .iter()
        .map(|v| g.value_type(*v).static_dims())
        .collect();
    let shapes = shapes?;
    let d = usize::try_from(dim).ok()?;
    let outer: usize = shapes
        .first()?
        .get(..d)?
        .iter()
        .map(|&x| x as usize)
        .product();
    let mut out = Vec::new();
    for o in 0..outer {
        for (s, xs) in shapes.iter().zip(args) {
            let inner: usize = s.get(d..)?.iter().map(|&x| x as usize).product();
            out.extend_from_slice(xs.get(o * inner..(o + 1) * inner)?);
        }
    }
    Some(out)
}

/// `slice` of a row-major tensor of shape `dims`.
fn slice(
    xs: &[i64],
    dims: &[i64],
    start: &[i64],
    limit: &[i64],
    strides: &[i64],
) -> Option<Vec<i64>> {
    let rank = dims.len();
    if start.len() != rank || limit.len() != rank || strides.len() != rank {
        return None;
    }
    let mut counts = Vec::with_capacity(rank);
    for k in 0..rank {
        if strides[k] <= 0 || start[k] < 0 || limit[k] > dims[k] || start[k] > limit[k] {
            return None;
        }
        counts.push(((limit[k] - start[k]) + strides[k] - 1) / strides[k]);
    }
    let total: i64 = counts.iter().product();
    let mut out = Vec::with_capacity(total as usize);
    let mut idx = vec![0i64; rank];
    for _ in 0..total {
        let mut flat = 0i64;
        for k in 0..rank {
            flat = flat * dims[k] + start[k] + idx[k] * strides[k];
        }
        out.push(*xs.get(flat as usize)?);
        for k in (0..rank).rev() {
            idx[k] += 1;
            if idx[k] < counts[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Some(out)
}
