//! Indexing: `gather`/`dynamic_gather` (symbolic slice sizes from a shape operand), `scatter`
//! and `sort`.

use super::super::func::{Frame, Importer, R};
use ebb_ir::op::{GatherDims, ScatterDims, SortSpec};
use ebb_ir::{DimExpr, Graph, Op};
use melior::ir::OperationRef;

impl<'c, 'a> Importer<'c, 'a> {
    /// `gather`, `dynamic_gather`, `scatter`, `sort`.
    pub(super) fn index_op(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
        name: &str,
    ) -> R<()> {
        let (payload, data): (Op, Option<&[usize]>) = match name {
            "gather" | "dynamic_gather" => {
                let mut dims = self.gather_dims(&op)?;
                dims.slice_sizes = if name == "gather" {
                    self.required_ints_attr(&op, "slice_sizes")?
                        .into_iter()
                        .map(DimExpr::constant)
                        .collect()
                } else {
                    self.shape_operand(frame, &op, 2)?
                };
                dims.indices_are_sorted = self.bool_attr(&op, "indices_are_sorted");
                (Op::Gather(dims), Some(&[0, 1]))
            }
            "scatter" => (Op::Scatter(self.scatter_dims(&op)?), None),
            "sort" => {
                let spec = SortSpec {
                    dimension: self.int_attr(&op, "dimension")?,
                    is_stable: self.bool_attr(&op, "is_stable"),
                };
                (Op::Sort(spec), None)
            }
            _ => return Err(self.unsupported(&op)),
        };
        self.finish(g, frame, &op, payload, data)
    }

    /// `gather`'s `dimension_numbers` (`#stablehlo.gather<offset_dims = [1], ...>`; the MLIR
    /// printer omits `index_vector_dim` when it is 0). `slice_sizes` is left empty.
    fn gather_dims(&self, op: &OperationRef<'c, 'a>) -> R<GatherDims> {
        let name = "dimension_numbers";
        let mut d = GatherDims::default();
        for (k, v) in self.struct_fields(op, name, "gather")? {
            match k.as_str() {
                "offset_dims" => d.offset_dims = v,
                "collapsed_slice_dims" => d.collapsed_slice_dims = v,
                "operand_batching_dims" => d.operand_batching_dims = v,
                "start_indices_batching_dims" => d.start_indices_batching_dims = v,
                "start_index_map" => d.start_index_map = v,
                "index_vector_dim" => d.index_vector_dim = v.first().copied().unwrap_or(0),
                _ => return Err(self.unknown_field(op, name, &k)),
            }
        }
        Ok(d)
    }

    /// `scatter`'s `scatter_dimension_numbers` and flags.
    fn scatter_dims(&self, op: &OperationRef<'c, 'a>) -> R<ScatterDims> {
        let name = "scatter_dimension_numbers";
        let mut d = ScatterDims::default();
        for (k, v) in self.struct_fields(op, name, "scatter")? {
            match k.as_str() {
                "update_window_dims" => d.update_window_dims = v,
                "inserted_window_dims" => d.inserted_window_dims = v,
                "input_batching_dims" => d.input_batching_dims = v,
                "scatter_indices_batching_dims" => d.scatter_indices_batching_dims = v,
                "scatter_dims_to_operand_dims" => d.scatter_dims_to_operand_dims = v,
                "index_vector_dim" => d.index_vector_dim = v.first().copied().unwrap_or(0),
                _ => return Err(self.unknown_field(op, name, &k)),
            }
        }
        d.indices_are_sorted = self.bool_attr(op, "indices_are_sorted");
        d.unique_indices = self.bool_attr(op, "unique_indices");
        Ok(d)
    }
}
