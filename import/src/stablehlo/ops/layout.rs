//! Data movement: `broadcast_in_dim`/`dynamic_broadcast_in_dim`, `reshape`/`dynamic_reshape`,
//! `iota`/`dynamic_iota`, `transpose`, `concatenate`, `reverse`, `pad`, and the slices
//! (`slice`, `real_dynamic_slice`, `dynamic_slice`). The dynamic forms take their shapes and
//! bounds from symbolic shape operands and become the static ops with symbolic payloads.

use super::super::func::{op_loc, Frame, Importer, R};
use super::has_data;
use ebb_ir::op::{BroadcastSpec, IotaSpec, PadSpec, SliceSpec};
use ebb_ir::{DimExpr, Graph, Node, Op, TensorType, ValueRef};
use melior::ir::OperationRef;

fn consts(v: Vec<i64>) -> Vec<DimExpr> {
    v.into_iter().map(DimExpr::constant).collect()
}

impl<'c, 'a> Importer<'c, 'a> {
    /// Broadcasts, reshapes, iota, `transpose`, `concatenate`, `reverse`, `pad`.
    pub(super) fn layout_op(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
        name: &str,
    ) -> R<()> {
        let (payload, data): (Op, Option<&[usize]>) = match name {
            "broadcast_in_dim" | "dynamic_broadcast_in_dim" => {
                let dims = self.required_ints_attr(&op, "broadcast_dimensions")?;
                let shape = if name == "broadcast_in_dim" {
                    self.static_result_dims(&op)?
                } else {
                    self.shape_operand(frame, &op, 1)?
                };
                (
                    Op::BroadcastInDim(BroadcastSpec { dims, shape }),
                    Some(&[0]),
                )
            }
            "reshape" | "dynamic_reshape" => {
                let shape = if name == "reshape" {
                    self.static_result_dims(&op)?
                } else {
                    self.shape_operand(frame, &op, 1)?
                };
                (Op::Reshape(shape), Some(&[0]))
            }
            "iota" | "dynamic_iota" => {
                let shape = if name == "iota" {
                    self.static_result_dims(&op)?
                } else {
                    self.shape_operand(frame, &op, 0)?
                };
                let spec = IotaSpec {
                    dimension: self.int_attr(&op, "iota_dimension")?,
                    shape,
                    dtype: self.result_type(&op, 0)?.dtype,
                };
                (Op::Iota(spec), Some(&[]))
            }
            "transpose" => (
                Op::Transpose(self.required_ints_attr(&op, "permutation")?),
                None,
            ),
            "concatenate" => (Op::Concatenate(self.int_attr(&op, "dimension")?), None),
            "reverse" => (
                Op::Reverse(self.required_ints_attr(&op, "dimensions")?),
                None,
            ),
            "pad" => {
                let spec = PadSpec {
                    low: self.required_ints_attr(&op, "edge_padding_low")?,
                    high: self.required_ints_attr(&op, "edge_padding_high")?,
                    interior: self.required_ints_attr(&op, "interior_padding")?,
                };
                (Op::Pad(spec), None)
            }
            _ => return Err(self.unsupported(&op)),
        };
        self.finish(g, frame, &op, payload, data)
    }

    /// `slice`, `real_dynamic_slice` (symbolic bounds; data-dependent starts become a
    /// `dynamic_slice`) and `dynamic_slice`.
    pub(super) fn slice_op(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
        name: &str,
    ) -> R<()> {
        let (payload, data): (Op, Option<&[usize]>) = match name {
            "slice" => {
                let spec = SliceSpec {
                    start: consts(self.required_ints_attr(&op, "start_indices")?),
                    limit: consts(self.required_ints_attr(&op, "limit_indices")?),
                    strides: consts(self.required_ints_attr(&op, "strides")?),
                };
                (Op::Slice(spec), None)
            }
            "real_dynamic_slice" => {
                let start = self.shape_operand(frame, &op, 1)?;
                let limit = self.shape_operand(frame, &op, 2)?;
                let strides = self.shape_operand(frame, &op, 3)?;
                if start.iter().any(has_data) {
                    return self.data_dependent_slice(g, frame, op, start, limit, strides);
                }
                let spec = SliceSpec {
                    start,
                    limit,
                    strides,
                };
                (Op::Slice(spec), Some(&[0]))
            }
            "dynamic_slice" => {
                let sizes = consts(self.required_ints_attr(&op, "slice_sizes")?);
                (Op::DynamicSlice(sizes), None)
            }
            _ => return Err(self.unsupported(&op)),
        };
        self.finish(g, frame, &op, payload, data)
    }

    /// `real_dynamic_slice` whose start indices depend on data (a loop counter) but whose sizes
    /// `limit - start` do not: becomes `dynamic_slice` with scalar start operands sliced out of
    /// the start vector (indices are in bounds already, so `dynamic_slice`'s clamping is a no-op).
    fn data_dependent_slice(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
        st: Vec<DimExpr>,
        li: Vec<DimExpr>,
        sr: Vec<DimExpr>,
    ) -> R<()> {
        if sr.iter().any(|k| k.as_const() != Some(1)) {
            return Err(self.op_error(
                &op,
                "data-dependent start indices with non-unit strides are not supported",
            ));
        }
        let sizes: Vec<DimExpr> = st
            .iter()
            .zip(&li)
            .map(|(s, l)| l.clone() - s.clone())
            .collect();
        if sizes.iter().any(has_data) {
            return Err(self.op_error(&op, "slice sizes depend on tensor data"));
        }
        let x = self.operand_tensor(g, frame, &op, 0)?;
        let start = self.operand_tensor(g, frame, &op, 1)?;
        let sty = g.value_type(start).clone();
        let mut operands = vec![x];
        for i in 0..st.len() as i64 {
            let c = |v: i64| vec![DimExpr::constant(v)];
            let slice = Op::Slice(SliceSpec {
                start: c(i),
                limit: c(i + 1),
                strides: c(1),
            });
            let one = TensorType::fixed(sty.dtype, &[1]);
            let mut n = Node::new(slice, vec![one]);
            n.loc = Some(op_loc(&op, &self.file));
            let sl = g.add_node(n, &[start]);
            let mut n = Node::new(Op::Reshape(vec![]), vec![TensorType::scalar(sty.dtype)]);
            n.loc = Some(op_loc(&op, &self.file));
            operands.push(ValueRef::new(g.add_node(n, &[ValueRef::new(sl, 0)]), 0));
        }
        self.add_node(
            g,
            frame,
            &op,
            Op::DynamicSlice(sizes),
            &operands,
            Vec::new(),
            None,
        )
    }
}
