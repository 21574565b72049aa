//! `rng_bit_generator` (JAX's `rbg` and `unsafe_rbg` PRNG implementations): the bits' shape
//! and type come from the declared result type, which must be static; the algorithm from
//! `rng_algorithm`. Ebb's bits are its own (the spec leaves them to the implementation), so
//! they differ from XLA's.

use super::super::func::{Frame, Importer, R};
use super::super::mlir_text as mt;
use ebb_ir::op::{RngAlgorithm, RngSpec};
use ebb_ir::{DimExpr, Graph, Op};
use melior::ir::OperationRef;

impl<'c, 'a> Importer<'c, 'a> {
    /// `rng_bit_generator(state) -> (state, bits)`.
    pub(super) fn rng_op(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
    ) -> R<()> {
        let algorithm = self
            .attr_text(&op, "rng_algorithm")
            .and_then(|t| mt::parse_enum(&t))
            .and_then(|a| RngAlgorithm::from_name(&a))
            .ok_or_else(|| self.op_error(&op, "missing or unknown `rng_algorithm`"))?;
        let bits = self.result_type(&op, 1)?;
        let shape = bits
            .dims
            .iter()
            .map(|d| d.map(DimExpr::constant))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| self.op_error(&op, "random bits of a dynamic shape"))?;
        let spec = RngSpec {
            algorithm,
            shape,
            dtype: bits.dtype,
        };
        self.finish(g, frame, &op, Op::RngBitGenerator(spec), None)
    }
}
