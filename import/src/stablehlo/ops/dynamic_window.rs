//! `stablehlo.custom_call @stablehlo.dynamic_reduce_window` (what JAX emits for
//! `jnp.cumsum`/`cumprod`/`cummax` along a symbolic axis): `reduce_window` with its window
//! attributes passed as integer operands. Operands: the inputs, as many init values, then
//! `window_dimensions`, `window_strides`, `base_dilations`, `window_dilations` (each
//! `i32[rank]`) and `padding` (`i32[rank, 2]`); `called_computations = [@body]` names the
//! reduction body. The attribute operands are followed symbolically (they are shape
//! computations over the input dimensions), so the op becomes a static `reduce_window` whose
//! window sizes and padding are symbolic (`[1, S, 1]` padded by `S - 1` for a cumulative sum
//! over `S`); strides and dilations must be constants.

use super::super::func::{op_name, Frame, Importer, R};
use super::super::mlir_text as mt;
use ebb_ir::op::Window;
use ebb_ir::{DimExpr, Graph, Op, TensorType, ValueRef};
use melior::ir::block::BlockLike;
use melior::ir::operation::OperationLike;
use melior::ir::{OperationRef, RegionLike, RegionRef, ValueLike};

/// The custom-call target this file imports.
pub(crate) const DYNAMIC_REDUCE_WINDOW: &str = "stablehlo.dynamic_reduce_window";

impl<'c, 'a> Importer<'c, 'a> {
    /// Imports a `dynamic_reduce_window` custom call as a `reduce_window` (see the module docs).
    pub(super) fn dynamic_reduce_window(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
    ) -> R<()> {
        let count = op.operand_count();
        if count < 7 || !(count - 5).is_multiple_of(2) {
            return Err(self.op_error(
                &op,
                format!("{DYNAMIC_REDUCE_WINDOW} takes inputs, as many init values and 5 window operands, not {count} operands"),
            ));
        }
        let n = (count - 5) / 2;
        if op.result_count() != n {
            return Err(self.op_error(&op, format!("expects {n} results")));
        }
        let rank = self.result_type(&op, 0)?.dims.len();
        let sizes = self.shape_operand(frame, &op, 2 * n)?;
        let constants = |imp: &Self, i: usize, what: &str| -> R<Vec<i64>> {
            imp.shape_operand(frame, &op, i)?
                .iter()
                .map(|d| {
                    d.as_const().ok_or_else(|| {
                        imp.op_error(&op, format!("symbolic {what} `{d}` are not supported"))
                    })
                })
                .collect()
        };
        let strides = constants(self, 2 * n + 1, "window strides")?;
        let base = constants(self, 2 * n + 2, "base dilations")?;
        let dilations = constants(self, 2 * n + 3, "window dilations")?;
        let padding = self.shape_operand(frame, &op, 2 * n + 4)?;
        if [sizes.len(), strides.len(), base.len(), dilations.len()]
            .iter()
            .any(|&l| l != rank)
            || padding.len() != 2 * rank
        {
            return Err(self.op_error(
                &op,
                format!("window operands do not have one entry per dimension (rank {rank})"),
            ));
        }
        for d in &sizes {
            if d.as_const().is_some_and(|k| k < 1) {
                return Err(self.op_error(&op, format!("window size {d} is not positive")));
            }
        }
        let mut w = Window::symbolic(sizes);
        w.strides = strides;
        w.base_dilations = base;
        w.window_dilations = dilations;
        w.padding = padding
            .chunks_exact(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect::<Vec<(DimExpr, DimExpr)>>();
        let data: Vec<usize> = (0..2 * n).collect();
        let operands: Vec<ValueRef> = self.operand_tensors(g, frame, &op, Some(&data))?;
        let body = self.called_body(&op)?;
        let block = body
            .first_block()
            .ok_or_else(|| self.op_error(&op, "the reduction body is empty"))?;
        let args = (0..block.argument_count())
            .map(|k| {
                let a = block
                    .argument(k)
                    .map_err(|e| self.op_error(&op, e.to_string()))?;
                let t = mt::parse_tensor_type(&a.r#type().to_string())
                    .map_err(|m| self.op_error(&op, m))?;
                let d: Option<Vec<i64>> = t.dims.iter().copied().collect();
                let d = d.ok_or_else(|| self.op_error(&op, "dynamic body argument"))?;
                Ok((TensorType::fixed(t.dtype, &d), None))
            })
            .collect::<R<Vec<_>>>()?;
        let region = self.import_region(&op, body, &args, frame, "body")?;
        self.add_node(
            g,
            frame,
            &op,
            Op::ReduceWindow(w),
            &operands,
            vec![region],
            None,
        )
    }

    /// The body region of the one function named by `op`'s `called_computations`, found
    /// among the functions of the module holding `op`.
    fn called_body(&self, op: &OperationRef<'c, 'a>) -> R<RegionRef<'c, 'a>> {
        let text = self
            .attr_text(op, "called_computations")
            .ok_or_else(|| self.op_error(op, "missing `called_computations`"))?;
        let names: Vec<&str> = text
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
            .map(|s| s.trim().trim_start_matches('@'))
            .filter(|s| !s.is_empty())
            .collect();
        let [name] = names.as_slice() else {
            return Err(self.op_error(op, format!("expects one called computation, found {text}")));
        };
        let mut module = op.parent_operation();
        while let Some(m) = module {
            if op_name(&m) == "builtin.module" {
                break;
            }
            module = m.parent_operation();
        }
        let block = module
            .and_then(|m| m.region(0).ok())
            .and_then(|r| r.first_block())
            .ok_or_else(|| self.op_error(op, "not inside a module"))?;
        let mut f = block.first_operation();
        while let Some(o) = f {
            let sym = o
                .attribute("sym_name")
                .ok()
                .and_then(|a| mt::parse_string(&a.to_string()));
            if op_name(&o) == "func.func" && sym.as_deref() == Some(*name) {
                return o.region(0).map_err(|e| self.op_error(op, e.to_string()));
            }
            f = o.next_in_block();
        }
        Err(self.op_error(op, format!("calls unknown function @{name}")))
    }
}
