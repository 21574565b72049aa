//! `bitcast_convert` between element types of different sizes (JAX's `rbg` key handling:
//! `ui32[2, 2]` to `ui64[2]`), expressed with equal-size bitcasts, integer converts, shifts
//! and `or`, little-endian as XLA's CPU backend lays the words out: widening by a factor `r`
//! takes the last dimension (of size `r`) as the words, least significant first; narrowing
//! adds a last dimension of size `r`.

use super::super::func::{Importer, R};
use ebb_ir::op::Literal;
use ebb_ir::op::SliceSpec;
use ebb_ir::{DType, DimExpr, Graph, Op, ValueRef};
use melior::ir::OperationRef;

/// The unsigned (or, for 16 bits, signed) integer type of a size, used for the words.
fn word_type(bytes: u64) -> Option<DType> {
    Some(match bytes {
        1 => DType::U8,
        2 => DType::I16,
        4 => DType::U32,
        8 => DType::U64,
        _ => return None,
    })
}

impl<'c, 'a> Importer<'c, 'a> {
    /// `x` bitcast to `to` (sizes may differ; see the module docs).
    pub(super) fn bitcast_resize(
        &mut self,
        g: &mut Graph,
        op: &OperationRef<'c, 'a>,
        x: ValueRef,
        to: DType,
    ) -> R<ValueRef> {
        let from = g.value_type(x).clone();
        let (s, d) = (from.dtype.size_bytes(), to.size_bytes());
        let (Some(ws), Some(wd)) = (word_type(s), word_type(d)) else {
            return Err(self.op_error(op, format!("bitcast_convert from {} to {to}", from.dtype)));
        };
        let same = |imp: &mut Self, g: &mut Graph, v: ValueRef, t: DType| {
            if g.value_type(v).dtype == t {
                Ok(v)
            } else {
                imp.helper(g, op, Op::BitcastConvert(t), &[v])
            }
        };
        // A splat constant of `like`'s type holding `v` (a mask or a shift amount).
        let splat = |imp: &Self, g: &mut Graph, like: ValueRef, v: u64| {
            let t = g.value_type(like).clone();
            let lit = Literal {
                dtype: t.dtype,
                splat: true,
                data: v.to_le_bytes()[..t.dtype.size_bytes() as usize].to_vec(),
            };
            let mut node = ebb_ir::Node::new(Op::Constant(lit), vec![t]);
            node.loc = Some(super::super::func::op_loc(op, &imp.file));
            ValueRef::new(g.add_node(node, &[]), 0)
        };
        let rank = from.rank();
        if s < d {
            let r = (d / s) as i64;
            if from.shape.last().and_then(|k| k.as_const()) != Some(r) {
                return Err(self.op_error(
                    op,
                    format!("widening bitcast_convert needs a last dimension of {r}, got {from}"),
                ));
            }
            let words = same(self, g, x, ws)?;
            let mut acc: Option<ValueRef> = None;
            for k in 0..r {
                let mut limit = from.shape.clone();
                limit[rank - 1] = DimExpr::constant(k + 1);
                let mut start = vec![DimExpr::constant(0); rank];
                start[rank - 1] = DimExpr::constant(k);
                let spec = SliceSpec {
                    start,
                    limit,
                    strides: vec![DimExpr::constant(1); rank],
                };
                let part = self.helper(g, op, Op::Slice(spec), &[words])?;
                let part =
                    self.helper(g, op, Op::Reshape(from.shape[..rank - 1].to_vec()), &[part])?;
                let mut w = self.helper(g, op, Op::Convert(wd), &[part])?;
                let mask = splat(self, g, w, (1u64 << (8 * s)).wrapping_sub(1));
                w = self.helper(g, op, Op::And, &[w, mask])?;
                if k > 0 {
                    let sh = splat(self, g, w, 8 * s * k as u64);
                    w = self.helper(g, op, Op::ShiftLeft, &[w, sh])?;
                }
                acc = Some(match acc {
                    None => w,
                    Some(a) => self.helper(g, op, Op::Or, &[a, w])?,
                });
            }
            let acc = acc.ok_or_else(|| self.op_error(op, "empty bitcast"))?;
            return same(self, g, acc, to);
        }
        let r = (s / d) as i64;
        let words = same(self, g, x, ws)?;
        let mut shape1 = from.shape.clone();
        shape1.push(DimExpr::constant(1));
        let mut parts = Vec::new();
        for k in 0..r {
            let mut v = words;
            if k > 0 {
                let sh = splat(self, g, v, 8 * d * k as u64);
                v = self.helper(g, op, Op::ShiftRightLogical, &[v, sh])?;
            }
            let v = self.helper(g, op, Op::Convert(wd), &[v])?;
            parts.push(self.helper(g, op, Op::Reshape(shape1.clone()), &[v])?);
        }
        let cat = self.helper(g, op, Op::Concatenate(rank as i64), &parts)?;
        same(self, g, cat, to)
    }
}
