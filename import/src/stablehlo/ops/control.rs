//! Conditionals: `case` and `if` (JAX's `lax.cond` and `lax.switch` lower to `case`).
//!
//! StableHLO branches take no arguments: they read enclosing values by implicit capture. The
//! importer makes that explicit: the enclosing tensors the branches read (nested regions
//! included), in first-use order, become the `case` node's operands after the index and every
//! branch region's inputs, so that a region never captures (the IR's rule). Enclosing shape
//! values stay visible symbolically, as in every region. `if` becomes a two-branch `case`
//! whose index is `convert(not(pred))` (true selects branch 0, the true branch).

use super::super::func::{Frame, Importer, R};
use ebb_ir::{DType, Graph, Node, Op, TensorType, ValueRef};
use melior::ir::block::BlockLike;
use melior::ir::operation::OperationLike;
use melior::ir::{OperationRef, RegionLike, Value, ValueLike};
use std::collections::HashSet;

impl<'c, 'a> Importer<'c, 'a> {
    /// `case` (operand 0: the `i32` index) and `if` (operand 0: the `i1` predicate).
    pub(super) fn conditional_op(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
        name: &str,
    ) -> R<()> {
        if op.operand_count() != 1 {
            return Err(self.op_error(&op, "expects exactly one operand (the branch selector)"));
        }
        if op.region_count() == 0 || (name == "if" && op.region_count() != 2) {
            return Err(self.op_error(
                &op,
                format!("unexpected number of branches: {}", op.region_count()),
            ));
        }
        let selector = self.operand_tensor(g, frame, &op, 0)?;
        let index = if name == "if" {
            let not = self.helper(g, &op, Op::Not, &[selector])?;
            self.helper(g, &op, Op::Convert(DType::I32), &[not])?
        } else {
            selector
        };
        let captured = self.captured_tensors(frame, &op);
        let mut operands = vec![index];
        let mut captures = Vec::new();
        for v in captured {
            let e = frame.own(v).cloned().unwrap_or_default();
            let Some(t) = e.t else { continue };
            operands.push(t);
            captures.push((v, g.value_type(t).clone(), e.s.clone()));
        }
        let mut branches = Vec::new();
        for i in 0..op.region_count() {
            let r = op
                .region(i)
                .map_err(|e| self.op_error(&op, e.to_string()))?;
            let label = format!("branch{i}");
            branches.push(self.import_region_capturing(&op, r, &[], &captures, frame, &label)?);
        }
        self.add_node(g, frame, &op, Op::Case, &operands, branches, None)
    }

    /// A one-result node the importer adds to express `op` (its location is `op`'s), with
    /// its type inferred.
    pub(super) fn helper(
        &self,
        g: &mut Graph,
        op: &OperationRef<'c, 'a>,
        payload: Op,
        operands: &[ValueRef],
    ) -> R<ValueRef> {
        let types: Vec<&TensorType> = operands.iter().map(|v| g.value_type(*v)).collect();
        let ty = ebb_ir::shape::infer(&payload, &types, &[])
            .map_err(|e| self.op_error(op, e.to_string()))?
            .and_then(|t| t.into_iter().next())
            .ok_or_else(|| self.op_error(op, "a helper op without a result type"))?;
        let mut node = Node::new(payload, vec![ty]);
        node.loc = Some(super::super::func::op_loc(op, &self.file));
        Ok(ValueRef::new(g.add_node(node, operands), 0))
    }

    /// The values defined in `frame` as tensors that the regions of `op` read (at any depth),
    /// in first-use order, each once.
    fn captured_tensors(&self, frame: &Frame, op: &OperationRef<'c, 'a>) -> Vec<Value<'c, 'a>> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let mut stack = vec![*op];
        while let Some(o) = stack.pop() {
            for i in 0..o.region_count() {
                let Ok(r) = o.region(i) else { continue };
                let Some(block) = r.first_block() else {
                    continue;
                };
                let mut ops = Vec::new();
                let mut next = block.first_operation();
                while let Some(inner) = next {
                    next = inner.next_in_block();
                    ops.push(inner);
                }
                for inner in &ops {
                    for k in 0..inner.operand_count() {
                        let Ok(v) = inner.operand(k) else { continue };
                        let is_tensor = frame.own(v).is_some_and(|e| e.t.is_some());
                        if is_tensor && seen.insert(v.to_raw().ptr as usize) {
                            out.push(v);
                        }
                    }
                }
                // Nested regions after this region's own operands: first use in program
                // order within a branch, branches in order.
                stack.extend(ops.into_iter().rev().filter(|x| x.region_count() > 0));
            }
        }
        out
    }
}
