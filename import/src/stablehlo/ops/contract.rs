//! Contractions and windows: `dot_general`, `convolution` (with the result element type when it
//! differs from the lhs's), `reduce`, `reduce_window` and `select_and_scatter` (windows with the
//! spec's defaults filled in).

use super::super::func::{Frame, Importer, R};
use super::super::mlir_text as mt;
use ebb_ir::op::{ConvDimensionNumbers, ConvSpec, DotDims, Window};
use ebb_ir::{DType, Graph, Op, ValueRef};
use melior::ir::OperationRef;

impl<'c, 'a> Importer<'c, 'a> {
    /// `dot_general` and `convolution`.
    pub(super) fn contraction_op(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
        name: &str,
    ) -> R<()> {
        match name {
            "dot_general" => {
                let mut dims = self.dot_dims(&op)?;
                let operands = self.operand_tensors(g, frame, &op, None)?;
                dims.result_dtype = self.result_dtype(g, &op, &operands)?;
                self.finish_with(g, frame, &op, Op::DotGeneral(dims), &operands)
            }
            "convolution" => {
                let mut spec = self.conv_spec(&op)?;
                let operands = self.operand_tensors(g, frame, &op, None)?;
                spec.result_dtype = self.result_dtype(g, &op, &operands)?;
                self.finish_with(g, frame, &op, Op::Convolution(spec), &operands)
            }
            _ => Err(self.unsupported(&op)),
        }
    }

    /// `reduce`, `reduce_window`, `select_and_scatter`.
    pub(super) fn reduction_op(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
        name: &str,
    ) -> R<()> {
        let payload = match name {
            "reduce" => Op::Reduce(self.required_ints_attr(&op, "dimensions")?),
            "reduce_window" => Op::ReduceWindow(self.window(&op)?),
            "select_and_scatter" => Op::SelectAndScatter(self.window(&op)?),
            _ => return Err(self.unsupported(&op)),
        };
        self.finish(g, frame, &op, payload, None)
    }

    /// The result element type of a contraction when it differs from the lhs's (mixed
    /// precision), else `None`.
    fn result_dtype(
        &self,
        g: &Graph,
        op: &OperationRef<'c, 'a>,
        operands: &[ValueRef],
    ) -> R<Option<DType>> {
        let rd = self.result_type(op, 0)?.dtype;
        let lhs = operands
            .first()
            .ok_or_else(|| self.op_error(op, "missing operand 0"))?;
        Ok((rd != g.value_type(*lhs).dtype).then_some(rd))
    }

    /// `dot_dimension_numbers` (`#stablehlo.dot<lhs_batching_dimensions = [0], ...>`).
    fn dot_dims(&self, op: &OperationRef<'c, 'a>) -> R<DotDims> {
        let name = "dot_dimension_numbers";
        let mut d = DotDims::default();
        for (k, v) in self.struct_fields(op, name, "dot")? {
            match k.as_str() {
                "lhs_batching_dimensions" => d.lhs_batch = v,
                "rhs_batching_dimensions" => d.rhs_batch = v,
                "lhs_contracting_dimensions" => d.lhs_contract = v,
                "rhs_contracting_dimensions" => d.rhs_contract = v,
                _ => return Err(self.unknown_field(op, name, &k)),
            }
        }
        Ok(d)
    }

    /// `convolution`'s configuration with the spec's defaults filled in (unit strides and
    /// dilations, zero padding, group counts 1); `result_dtype` is left `None`.
    fn conv_spec(&self, op: &OperationRef<'c, 'a>) -> R<ConvSpec> {
        let text = self
            .attr_text(op, "dimension_numbers")
            .ok_or_else(|| self.op_error(op, "missing dimension_numbers"))?;
        let dims = mt::parse_conv_dimension_numbers(&text)
            .as_deref()
            .and_then(ConvDimensionNumbers::parse)
            .ok_or_else(|| {
                self.op_error(
                    op,
                    format!("unsupported dimension_numbers {}", super::abbrev(&text)),
                )
            })?;
        let n = dims.input_spatial.len();
        if dims.kernel_spatial.len() != n || dims.output_spatial.len() != n {
            return Err(self.op_error(
                op,
                "dimension_numbers: input, kernel and output have different spatial ranks",
            ));
        }
        let spec = ConvSpec {
            window_strides: self.ints_n_attr(op, "window_strides", n, 1)?,
            padding: self.padding_attr(op, n)?,
            lhs_dilation: self.ints_n_attr(op, "lhs_dilation", n, 1)?,
            rhs_dilation: self.ints_n_attr(op, "rhs_dilation", n, 1)?,
            feature_group_count: self.int_attr(op, "feature_group_count").unwrap_or(1),
            batch_group_count: self.int_attr(op, "batch_group_count").unwrap_or(1),
            ..ConvSpec::new(dims)
        };
        if spec.feature_group_count < 1 || spec.batch_group_count < 1 {
            return Err(self.op_error(op, "group counts must be >= 1"));
        }
        Ok(spec)
    }

    /// The window of `reduce_window`/`select_and_scatter`: `window_dimensions` with the
    /// optional strides, dilations and padding, defaults filled in.
    fn window(&self, op: &OperationRef<'c, 'a>) -> R<Window> {
        let mut w = Window::new(self.required_ints_attr(op, "window_dimensions")?);
        let n = w.dimensions.len();
        w.strides = self.ints_n_attr(op, "window_strides", n, 1)?;
        w.base_dilations = self.ints_n_attr(op, "base_dilations", n, 1)?;
        w.window_dilations = self.ints_n_attr(op, "window_dilations", n, 1)?;
        Ok(w.with_padding(&self.padding_attr(op, n)?))
    }
}
