//! Donation: marks graph inputs whose buffers the caller gives to the step (JAX's
//! `donate_argnums`, XLA's `input_output_alias`, ONNX Runtime's in-place optimizer state), each
//! paired with the graph output that is its updated value
//! ([`InputSpec::aliasing_output`](ebb_ir::op::InputSpec::aliasing_output)).
//!
//! The memory model then keeps a donated input resident only until its last read
//! (`crate::memory`, [`ebb_plan::format::ValueClass::Donated`]); the scheduler may free it early by
//! running its readers (the parameter's update among them) early; the plan checker re-derives
//! its live range and rejects any read after it (a read of an overwritten buffer).
//!
//! Policies ([`DonatePolicy`]):
//! * `keep` (default): what the graph already carries (the textual IR's `aliasing_output`; the
//!   importers do not read StableHLO's `tf.aliasing_output` yet), nothing more;
//! * `none`: no input is donated;
//! * `auto`: besides the imported pairs, every input that is not itself returned is paired
//!   with the first unpaired output of the same type (dtype and symbolic shape) computed by an
//!   op, in argument order — the rule JAX applies to `donate_argnums` over all arguments;
//! * a list of input names or argument indices: exactly those, each paired as `auto` pairs.
//!
//! Inside `case` branches ([`donate_into_branches`]): a branch's block argument is donated to
//! the branch output whose `case` result the op writes into that argument's operand
//! ([`ebb_ir::op::in_place_writes`]: the operand is dead after the op), so the branch frees it
//! after its last read there and may write that output into it in place (an optimizer update
//! skipped on a non-finite gradient updates the moments in their own buffers). Inside `while`
//! bodies: each carried argument is donated to its next value (the loop keeps only what the
//! body returns), so a scan's `dynamic_update_slice` writes the stacked result in place.
//!
//! Loop-invariant `while` carries are handed over to the loop's result
//! ([`crate::carry::hand_over_carries`]) once the inputs are donated (a donated input may be
//! one), so that the operand dies at the loop and the result takes its buffer; a value whose
//! transpose the loops carry is read after them as their result transposed back
//! ([`crate::carry::hand_back_transposes`]); a scan's stacked output starts as a stacked input
//! of its type that dies at the loop ([`crate::stack_reuse`]).
//!
//! Invariant: the graph computes the same outputs, bit for bit: its ops are unchanged but for
//! reads rewired to a `while` result equal to the value read (or its transpose transposed
//! back, [`crate::carry`]) and the scans rewritten by [`crate::stack_reuse`]; every donated
//! input names a distinct output of its own type computed by an op (checked again by
//! [`ebb_ir::verify`]).

use crate::manager::{Pass, PassContext, PassError, PassResult};
use crate::pass_id::PassId;
use ebb_ir::{Graph, NodeId, OpKind};
use serde::Serialize;

/// Which inputs are donated (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DonatePolicy {
    /// The import's donations only.
    #[default]
    Keep,
    /// None.
    None,
    /// Every input with an unpaired same-typed output.
    Auto,
    /// These inputs, by name or argument index.
    List(Vec<String>),
}

impl std::str::FromStr for DonatePolicy {
    type Err = String;

    /// `keep`, `none`, `auto`, or a comma-separated list of input names or indices.
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.trim() {
            "keep" => DonatePolicy::Keep,
            "none" => DonatePolicy::None,
            "auto" => DonatePolicy::Auto,
            "" => return Err("expected keep, none, auto or a list of inputs".into()),
            list => DonatePolicy::List(list.split(',').map(|x| x.trim().to_string()).collect()),
        })
    }
}

/// One donated input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Donation {
    /// Argument index.
    pub input: usize,
    /// Input name (pytree path or parameter name).
    pub name: String,
    /// Index of the graph output that is its updated value.
    pub output: usize,
    /// Size in bytes (symbolic).
    pub bytes: String,
}

/// What [`DonatePass`] decided, left in the [`PassContext`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DonationReport {
    /// The donated inputs, in argument order.
    pub donated: Vec<Donation>,
}

/// The donation pass (see the module docs); one change per input whose donation changed.
#[derive(Clone, Debug, Default)]
pub struct DonatePass {
    /// The policy.
    pub policy: DonatePolicy,
}

/// Why a listed input cannot be donated.
fn refuse(name: &str, why: &str) -> PassError {
    PassError::Failed {
        pass: PassId::Donate.name(),
        message: format!("--donate: input `{name}` {why}"),
    }
}

/// The first output not yet `taken`, computed by an op, whose type is `input`'s.
fn partner(g: &Graph, input: NodeId, taken: &[bool]) -> Option<usize> {
    let ty = g.node(input).outputs.first()?;
    g.outputs().iter().enumerate().position(|(k, o)| {
        !taken[k] && g.node(o.node).kind() != OpKind::Input && g.value_type(*o) == ty
    })
}

/// Applies `policy` to `g`; returns the number of inputs whose donation changed.
///
/// # Errors
/// [`PassError::Failed`] when a listed input does not exist, is returned unchanged, or has no
/// unpaired output of its type.
pub fn apply(g: &mut Graph, policy: &DonatePolicy) -> Result<usize, PassError> {
    let inputs = g.inputs().to_vec();
    let before: Vec<Option<usize>> = inputs.iter().map(|&id| g.aliasing_output(id)).collect();
    let returned = |id: NodeId| g.outputs().iter().any(|o| o.node == id);
    let mut taken = vec![false; g.outputs().len()];
    // The new pairing, computed in full before the graph changes (nothing half-applied).
    let after: Vec<Option<usize>> = match policy {
        DonatePolicy::Keep => before.clone(),
        DonatePolicy::None => vec![None; inputs.len()],
        DonatePolicy::Auto => {
            for k in before.iter().flatten() {
                if let Some(t) = taken.get_mut(*k) {
                    *t = true;
                }
            }
            let mut after = before.clone();
            for (&id, a) in inputs.iter().zip(after.iter_mut()) {
                if a.is_none() && !returned(id) {
                    *a = partner(g, id, &taken);
                    if let Some(k) = *a {
                        taken[k] = true;
                    }
                }
            }
            after
        }
        DonatePolicy::List(names) => {
            let mut chosen = vec![false; inputs.len()];
            for name in names {
                let i = name
                    .parse::<usize>()
                    .ok()
                    .filter(|&i| i < inputs.len())
                    .or_else(|| inputs.iter().position(|&id| g.input_name(id) == name))
                    .ok_or_else(|| {
                        refuse(name, "is not an input name or argument index of the graph")
                    })?;
                chosen[i] = true;
            }
            let mut after = vec![None; inputs.len()];
            for (i, &id) in inputs.iter().enumerate().filter(|(i, _)| chosen[*i]) {
                let name = match g.input_name(id) {
                    "" => i.to_string(),
                    n => n.to_string(),
                };
                if returned(id) {
                    return Err(refuse(
                        &name,
                        "is returned unchanged, so it cannot be donated",
                    ));
                }
                let k = partner(g, id, &taken).ok_or_else(|| {
                    refuse(
                        &name,
                        "has no unpaired output of its type (nothing updates it)",
                    )
                })?;
                taken[k] = true;
                after[i] = Some(k);
            }
            after
        }
    };
    for (&id, &a) in inputs.iter().zip(&after) {
        g.set_aliasing_output(id, a);
    }
    Ok(before.iter().zip(&after).filter(|(b, a)| b != a).count())
}

/// The donated inputs of `g` (see [`DonationReport`]).
pub fn report(g: &Graph) -> DonationReport {
    let donated = g
        .inputs()
        .iter()
        .enumerate()
        .filter_map(|(i, &id)| {
            let output = g.aliasing_output(id)?;
            Some(Donation {
                input: i,
                name: g.input_name(id).to_string(),
                output,
                bytes: g.node(id).outputs.first()?.size_bytes().to_string(),
            })
        })
        .collect();
    DonationReport { donated }
}

impl Pass for DonatePass {
    fn name(&self) -> &'static str {
        PassId::Donate.name()
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<PassResult, PassError> {
        let changes = apply(g, &self.policy)?;
        let changes = changes
            + crate::carry::own_splats(g)
            + crate::carry::hand_over_carries(g)
            + crate::carry::hand_back_transposes(g)
            + crate::stack_reuse::reuse_stacks(g);
        donate_into_branches(g);
        cx.insert(report(g));
        Ok(PassResult::changes(changes))
    }
}

/// Donates block arguments of the regions of every `case` and `while` of `g` (nested ones
/// included), and returns how many:
/// * a `case` whose operand `i` the op writes a result `j` into
///   ([`ebb_ir::op::in_place_writes`]): in each branch, argument `i - 1` is donated to output
///   `j`;
/// * a `while` body: argument `i` (the carried value `i`) is donated to output `i` (its next
///   value). The loop hands each iteration's values to the body and keeps only what the body
///   returns, so the body may free an argument after its last read and write its next value
///   into it in place (a scan's `dynamic_update_slice` into the stacked result).
///
/// Each pair is donated where the region computes that output with an op, the argument is not
/// returned, and the two have one type. Clears the regions' earlier donations first, so a pass
/// that changes the graph calls it again.
pub fn donate_into_branches(g: &mut Graph) -> usize {
    let writes = ebb_ir::op::in_place_writes(g);
    let carriers: Vec<NodeId> = g
        .order()
        .iter()
        .copied()
        .filter(|&id| matches!(g.node(id).op, ebb_ir::Op::Case | ebb_ir::Op::While))
        .collect();
    let mut total = 0;
    for id in carriers {
        let is_while = g.node(id).op == ebb_ir::Op::While;
        // (block argument, region output) pairs, and which region they are for (a `while`'s
        // body is region 1; every `case` branch).
        let pairs: Vec<(usize, usize)> = if is_while {
            (0..g.operands(id).len()).map(|i| (i, i)).collect()
        } else {
            let w = writes.get(&id).map_or(&[][..], Vec::as_slice);
            w.iter()
                .filter_map(|w| Some((w.operand.checked_sub(1)?, w.result)))
                .collect()
        };
        let mut region = 0;
        let done = crate::canon::for_each_region(g, id, |r| -> Result<usize, ()> {
            let donating = !is_while || region == 1;
            region += 1;
            for arg in r.inputs().to_vec() {
                r.set_aliasing_output(arg, None);
            }
            let n = if donating { donate_pairs(r, &pairs) } else { 0 };
            Ok(n + donate_into_branches(r))
        });
        total += done.unwrap_or(0);
    }
    total
}

/// Donates argument `a` of region `r` to output `o` for each pair `(a, o)` where `r` computes
/// the output with an op, does not return the argument, has not donated another argument to
/// that output, and the two have one type; returns how many.
fn donate_pairs(r: &mut Graph, pairs: &[(usize, usize)]) -> usize {
    let mut n = 0;
    for &(a, o) in pairs {
        let (Some(&arg), Some(&out)) = (r.inputs().get(a), r.outputs().get(o)) else {
            continue;
        };
        let computed = r.node(out.node).kind() != OpKind::Input;
        let returned = r.outputs().iter().any(|x| x.node == arg);
        let taken = r.inputs().iter().any(|&x| r.aliasing_output(x) == Some(o));
        if computed && !returned && !taken && r.node(arg).outputs.first() == Some(r.value_type(out))
        {
            r.set_aliasing_output(arg, Some(o));
            n += 1;
        }
    }
    n
}
