//! `sort` (StableHLO spec, `sort`): a stable sort of every 1-D slice along `dimension` of all
//! operands together, ordered by the comparator region.
//!
//! A slice is ordered, fastest way first:
//! - by one integer key per element ([`one_key`], [`KeyCompare::ordered`]) where the comparator
//!   is `LT`/`GT` in a total order (`TOTALORDER` floats, integers, booleans) on the first
//!   operand, or on per-element keys equal on both sides (JAX's canonicalizing comparator);
//! - by per-element keys under the comparator's `compare` ([`ScalarBody::key_compare`]);
//! - by the comparator itself, per comparison (compiled scalar body or region program).
//!
//! The operands are then gathered in the sorted order with typed copies.
//!
//! Invariant: every way gives the order of a stable sort that asks the comparator only
//! whether one element is less than another (std's `sort_by` keeps equal elements in input
//! order); an integer key's ascending (`LT`) or descending (`GT`) order is the comparator's.
//!
//! [`ScalarBody::key_compare`]: super::scalar_body::ScalarBody::key_compare
//! [`KeyCompare::ordered`]: super::scalar_body::KeyCompare::ordered

use super::layout::strides_of;
use super::reduce::scalar_compare;
use super::region::RegionFn;
use super::scalar_body::{ordered_bits, read_reg};
use super::{program_schedule, Ctx, KernelFailure};
use crate::error::OpError;
use crate::tensor::{Data, Scalar, Tensor};
use ebb_ir::op::SortSpec;
use ebb_ir::{Graph, Op, Relation, ValueRef};
use std::cell::RefCell;
use std::cmp::Ordering;

/// A comparator recognized as `compare(lhs0, rhs0)` on the first operand only: its direction
/// (mirrored where the region swaps the operands) and whether it is `TOTALORDER`.
fn first_operand_compare(r: &Graph) -> Option<(Relation, bool)> {
    let ins = r.inputs();
    let ops = program_schedule(r);
    if ins.len() < 2 || ops.len() != 1 || r.outputs() != [ValueRef::new(ops[0], 0)] {
        return None;
    }
    let Op::Compare(spec) = &r.node(ops[0]).op else {
        return None;
    };
    let (a, b) = (ValueRef::new(ins[0], 0), ValueRef::new(ins[1], 0));
    let operands = r.operands(ops[0]);
    let total = spec.total_order();
    if operands == [a, b] {
        Some((spec.direction, total))
    } else if operands == [b, a] {
        Some((spec.direction.mirror(), total))
    } else {
        None
    }
}

/// For a comparator `compare(lhs0, rhs0)` in direction `dir`: one integer per element of `x`
/// whose ascending (`LT`) or descending (`GT`) order is the comparator's, and whether it is
/// descending. `None` for other directions, and for floats compared without `TOTALORDER`
/// (NaN is unordered there, so no key order is the comparator's).
fn one_key(x: &Tensor, dir: Relation, total: bool) -> Option<(Vec<u64>, bool)> {
    let desc = match dir {
        Relation::Lt => false,
        Relation::Gt => true,
        _ => return None,
    };
    let ty = x.dtype();
    if ty.is_float() && !total {
        return None;
    }
    let keys = (0..x.len())
        .map(|i| read_reg(x.data(), i).map(|r| ordered_bits(ty, r)))
        .collect::<Option<Vec<u64>>>()?;
    Some((keys, desc))
}

/// `sort`: sorts all operands together along `spec.dimension` by the comparator (stable).
pub(crate) fn sort(
    ctx: &Ctx,
    spec: &SortSpec,
    ops: Vec<Tensor>,
) -> Result<Vec<Tensor>, KernelFailure> {
    let first = ops
        .first()
        .ok_or_else(|| OpError::Invalid("sort without operands".into()))?;
    let shape = first.shape().to_vec();
    if ops.iter().any(|t| t.shape() != shape.as_slice()) {
        return Err(OpError::Invalid("sort operands must share a shape".into()).into());
    }
    let rank = shape.len() as i64;
    let mut d = spec.dimension;
    if d < 0 {
        d += rank;
    }
    if d < 0 || d >= rank.max(1) {
        return Err(OpError::Invalid(format!("dimension {d} out of range")).into());
    }
    let d = d as usize;
    let region = ctx
        .node
        .regions
        .first()
        .ok_or_else(|| OpError::Invalid("sort without a comparator".into()))?;
    let fast = first_operand_compare(region);
    let f = RegionFn::of(ctx, 0, "comparator")?;
    let len = shape.get(d).copied().unwrap_or(1);
    let st = strides_of(&shape);
    let stride = st.get(d).copied().unwrap_or(1);
    let total: usize = shape.iter().product();
    let err: RefCell<Option<OpError>> = RefCell::new(None);
    let get = |t: &Tensor, i: usize| {
        t.data()
            .get(i)
            .ok_or_else(|| OpError::Invalid("index out of range".into()))
    };
    // A comparator of per-element keys: the keys computed once per element.
    let keyed = match (&fast, f.scalar()) {
        (None, Some(body)) => body.key_compare().and_then(|kc| {
            let datas: Vec<&Data> = ops.iter().map(|t| t.data()).collect();
            Some((kc, body.keys_all(&kc, &datas, total)?))
        }),
        _ => None,
    };
    // One integer key per element where the comparator allows.
    let ordered = match (&fast, &keyed) {
        (Some((dir, total)), _) => one_key(first, *dir, *total),
        (None, Some((kc, keys))) => kc.ordered(keys),
        _ => None,
    };
    let less = |i: usize, j: usize| -> bool {
        let r = (|| -> Result<bool, OpError> {
            if let Some((kc, keys)) = &keyed {
                return kc
                    .less(keys[i].0, keys[j].1)
                    .ok_or_else(|| OpError::Invalid("comparator key types differ".into()));
            }
            match &fast {
                Some((dir, total)) => scalar_compare(get(first, i)?, get(first, j)?, *dir, *total),
                None => {
                    let mut buf = [Scalar::I1(false); 8];
                    let mut heap = Vec::new();
                    let args: &mut [Scalar] = if 2 * ops.len() <= buf.len() {
                        &mut buf[..2 * ops.len()]
                    } else {
                        heap.resize(2 * ops.len(), Scalar::I1(false));
                        &mut heap
                    };
                    for (k, t) in ops.iter().enumerate() {
                        args[2 * k] = get(t, i)?;
                        args[2 * k + 1] = get(t, j)?;
                    }
                    f.test(args)
                }
            }
        })();
        r.unwrap_or_else(|e| {
            err.borrow_mut().get_or_insert(e);
            false
        })
    };
    // slices along d: start offsets are all indices with idx[d] == 0
    let starts: Vec<usize> = (0..total)
        .filter(|&i| len == 0 || (i / stride) % len == 0)
        .collect();
    let mut order: Vec<usize> = Vec::with_capacity(len);
    let mut src = vec![0usize; total];
    for &s in &starts {
        order.clear();
        order.extend((0..len).map(|k| s + k * stride));
        // A stable sort by `less` alone (std's `sort_by` asks only whether an element is
        // less than another, so the order of equal elements is theirs on input either way).
        match &ordered {
            Some((k, false)) => order.sort_by_key(|&i| k[i]),
            Some((k, true)) => order.sort_by(|&i, &j| k[j].cmp(&k[i])),
            None => order.sort_by(|&i, &j| {
                if less(i, j) {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }),
        }
        for (k, &from) in order.iter().enumerate() {
            src[s + k * stride] = from;
        }
    }
    if let Some(e) = err.into_inner() {
        return Err(e.into());
    }
    let out = ops
        .iter()
        .map(|t| {
            let data = crate::tensor::map_same!(t.data(), v => src.iter().map(|&i| v[i]).collect::<Vec<_>>());
            Tensor::from_parts(shape.clone(), data)
        })
        .collect();
    if total == 0 {
        return Ok(ops);
    }
    Ok(out)
}
