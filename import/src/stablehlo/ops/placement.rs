//! `stablehlo.custom_call @annotate_device_placement`: the memory placement JAX writes for a
//! `jax.checkpoint` offload policy (`save_and_offload_only_these_names(...,
//! offload_dst="pinned_host")`) or a `jax.device_put` to a memory kind, when it lowers for a
//! platform with host memory spaces (GPU, TPU). The target kind is the string
//! `_xla_buffer_placement` of the op's `mhlo.frontend_attributes` (`"pinned_host"`,
//! `"unpinned_host"`, `"device"`); the op has one operand and one result of the same type,
//! static or dynamic. It becomes an [`Op::AnnotateDevicePlacement`] node (an identity carrying
//! the [`MemoryKind`]).
//!
//! An offload policy puts the host value through the backward pass's
//! `optimization_barrier`: `barrier(annotate(x, pinned_host), ...)`, then
//! `annotate(barrier#0, device)` where it is read. The barrier keeps the recomputed ops apart
//! from the forward ones; a value on the host is not recomputed, so it has nothing to keep
//! apart: an `optimization_barrier` operand placed on the host passes around the barrier
//! (its result is the host value itself), so that the host value has one live range from its
//! offload to its reload ([`Importer::optimization_barrier`]). The barrier still orders the
//! reload after the forward pass (its other operands include the incoming gradient): a
//! placement that reads such a host value takes one of the barrier's results as a second,
//! ordering-only operand.
//!
//! Invariant: the imported graph computes the same values as the module (every op here is an
//! identity on its operand).

use super::super::func::{Frame, Importer, R};
use super::super::mlir_text as mt;
use ebb_ir::op::MemoryKind;
use ebb_ir::{Graph, Op, ValueRef};
use melior::ir::operation::OperationLike;
use melior::ir::{OperationRef, Value};

/// The custom-call target this file imports.
pub(crate) const ANNOTATE_DEVICE_PLACEMENT: &str = "annotate_device_placement";

/// The frontend attribute that names the memory kind.
const BUFFER_PLACEMENT: &str = "_xla_buffer_placement";

/// The value of `key` in the printed dictionary attribute `dict` (`{a = "x", b = "y"}`), when it
/// is a string.
pub fn dict_string(dict: &str, key: &str) -> Option<String> {
    let at = dict.find(key)?;
    let rest = dict[at + key.len()..].trim_start().strip_prefix('=')?;
    let rest = rest.trim_start();
    let end = rest
        .char_indices()
        .skip(1)
        .find(|&(_, c)| c == '"')
        .map(|(i, _)| i + 1)?;
    mt::parse_string(&rest[..end])
}

impl<'c, 'a> Importer<'c, 'a> {
    /// Imports `custom_call @annotate_device_placement` (see the module docs). Errors: a
    /// missing or unknown `_xla_buffer_placement`, other than one operand and one result, or a
    /// result type that differs from the operand's.
    pub(super) fn annotate_device_placement(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
    ) -> R<()> {
        if op.operand_count() != 1 || op.result_count() != 1 {
            return Err(self.op_error(
                &op,
                format!(
                    "{ANNOTATE_DEVICE_PLACEMENT} takes one operand and one result, not {} and {}",
                    op.operand_count(),
                    op.result_count()
                ),
            ));
        }
        let named = self
            .attr_text(&op, "mhlo.frontend_attributes")
            .and_then(|d| dict_string(&d, BUFFER_PLACEMENT));
        let Some(named) = named else {
            return Err(self.op_error(
                &op,
                format!(
                    "{ANNOTATE_DEVICE_PLACEMENT} without a string `{BUFFER_PLACEMENT}` in its \
                     `mhlo.frontend_attributes`"
                ),
            ));
        };
        let kind = MemoryKind::from_name(&named).ok_or_else(|| {
            self.op_error(
                &op,
                format!(
                    "{ANNOTATE_DEVICE_PLACEMENT} to memory kind \"{named}\": Ebb knows \
                     \"device\", \"pinned_host\" and \"unpinned_host\""
                ),
            )
        })?;
        let mut operands = self.operand_tensors(g, frame, &op, None)?;
        let after = op.operand(0).ok().and_then(|v| frame.after(v));
        operands.extend(after);
        self.finish_with(g, frame, &op, Op::AnnotateDevicePlacement(kind), &operands)
    }

    /// Imports `optimization_barrier`: operands placed on the host (results of an
    /// `annotate_device_placement` to a host memory kind) pass around it (see the module
    /// docs); the others go through one barrier node, whose results take their places. No
    /// node when every operand is on the host.
    pub(super) fn optimization_barrier(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
    ) -> R<()> {
        let operands = self.operand_tensors(g, frame, &op, None)?;
        if operands.len() != op.result_count() {
            return Err(self.op_error(
                &op,
                format!(
                    "{} operands but {} results",
                    operands.len(),
                    op.result_count()
                ),
            ));
        }
        let on_host: Vec<bool> = operands
            .iter()
            .map(|v| matches!(g.node(v.node).op, Op::AnnotateDevicePlacement(k) if k.is_host()))
            .collect();
        if !on_host.contains(&true) {
            return self.finish_with(g, frame, &op, Op::OptimizationBarrier, &operands);
        }
        let kept: Vec<ValueRef> = operands
            .iter()
            .zip(&on_host)
            .filter(|(_, &h)| !h)
            .map(|(v, _)| *v)
            .collect();
        let barrier = if kept.is_empty() {
            None
        } else {
            let types = kept.iter().map(|v| g.value_type(*v).clone()).collect();
            let mut node = ebb_ir::Node::new(Op::OptimizationBarrier, types);
            node.loc = Some(super::super::func::op_loc(&op, &self.file));
            Some(g.add_node(node, &kept))
        };
        // What reads of the host values are ordered after: the barrier's last result.
        let token = barrier.map(|id| ValueRef::new(id, kept.len() as u32 - 1));
        let mut k = 0u32;
        for (i, (v, &host)) in operands.iter().zip(&on_host).enumerate() {
            let r = op
                .result(i)
                .map_err(|e| self.op_error(&op, e.to_string()))?;
            let t = match barrier {
                Some(id) if !host => {
                    k += 1;
                    ValueRef::new(id, k - 1)
                }
                _ => *v,
            };
            if let (true, Some(token)) = (host, token) {
                frame.set_after(Value::from(r), token);
            }
            frame.set_tensor(Value::from(r), t);
        }
        Ok(())
    }
}
