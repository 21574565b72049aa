//! The phases of [`Program::new`](super::Program::new): value ids for the inputs and every
//! scheduled op's results (types evaluated at the bindings), the schedule validated as a
//! topological order of exactly the non-input ops, the graph outputs, which operands each
//! step may take (its last read of an intermediate or donated value), the in-place writes,
//! the point after which each intermediate or donated value is freed, and the
//! initializations of carried values that a `while` overwrites whole (`super::overwrite`).
//!
//! Invariant: value ids are dense, inputs first (in graph input order), then each step's
//! results in schedule order; every value read by a step was defined before it; a value is
//! freed exactly once, at its last read (or at its definition when never read), unless it
//! is a graph input that is not donated or a graph output.

use super::{eval_type, Class, OutType, Step, NONE};
use crate::error::ExecError;
use ebb_ir::{Bindings, Graph, NodeId, Op, OpKind};

/// The schedule error of graph `g`.
fn sched_err(g: &Graph, msg: String) -> ExecError {
    ExecError::Schedule {
        graph: g.name.clone(),
        msg,
    }
}

/// The values defined so far.
pub(super) struct Values {
    /// Value id of result 0 of each node, by node index (`NONE` if not computed yet).
    pub base: Vec<u32>,
    /// Types of the graph inputs at the bindings.
    pub inputs: Vec<OutType>,
    /// Bytes of each value.
    pub sizes: Vec<u64>,
    /// Values defined.
    pub count: usize,
}

impl Values {
    /// The graph inputs' values.
    ///
    /// # Errors
    /// [`ExecError::Schedule`] for an input without a type; [`ExecError::Shape`] when a type
    /// cannot be evaluated at `bindings`.
    pub fn of_inputs(g: &Graph, bindings: &Bindings) -> Result<Values, ExecError> {
        let bound = g
            .petgraph()
            .node_indices()
            .map(|n| n.index() + 1)
            .max()
            .unwrap_or(0);
        let mut v = Values {
            base: vec![NONE; bound],
            inputs: Vec::with_capacity(g.inputs().len()),
            sizes: Vec::new(),
            count: 0,
        };
        for &id in g.inputs() {
            let node = g.node(id);
            let t = node
                .outputs
                .first()
                .ok_or_else(|| sched_err(g, "an input node without a type".into()))?;
            let ot = eval_type(g, node, t.dtype, &t.shape, bindings)?;
            v.base[id.index()] = v.count as u32;
            v.count += 1;
            v.sizes.push(ot.bytes());
            v.inputs.push(ot);
        }
        Ok(v)
    }

    /// One step per scheduled op, its results given value ids; also the point defining each
    /// value (0 for inputs).
    ///
    /// # Errors
    /// [`ExecError::Schedule`] when `schedule` is not a topological order of exactly the
    /// non-input ops of `g`; [`ExecError::Shape`] when a type cannot be evaluated.
    pub fn steps(
        &mut self,
        g: &Graph,
        schedule: &[NodeId],
        bindings: &Bindings,
    ) -> Result<(Vec<Step>, Vec<u32>), ExecError> {
        let num_ops = g.node_count() - g.inputs().len();
        if schedule.len() != num_ops {
            return Err(sched_err(
                g,
                format!(
                    "it has {} ops, the graph has {num_ops} non-input ops",
                    schedule.len()
                ),
            ));
        }
        let mut steps = Vec::with_capacity(schedule.len());
        let mut def = vec![0u32; self.count];
        for (p, &id) in schedule.iter().enumerate() {
            let operands = self.operands_at(g, p, id)?;
            let node = g.node(id);
            let mut out = Vec::with_capacity(node.outputs.len());
            for t in &node.outputs {
                let ot = eval_type(g, node, t.dtype, &t.shape, bindings)?;
                self.sizes.push(ot.bytes());
                out.push(ot);
            }
            self.base[id.index()] = self.count as u32;
            let first_result = self.count as u32;
            self.count += node.outputs.len();
            def.resize(self.count, p as u32);
            steps.push(Step {
                node: id,
                take: vec![false; operands.len()],
                moved: vec![false; operands.len()],
                held: vec![false; operands.len()],
                operands,
                first_result,
                out,
                frees: Vec::new(),
                in_place: Vec::new(),
                in_place_bytes: 0,
                launch: Default::default(),
                regions: node.regions.iter().map(|_| Default::default()).collect(),
                overwritten: Vec::new(),
                unread: false,
                direct: Vec::new(),
            });
        }
        Ok((steps, def))
    }

    /// The operand value ids of op `id` scheduled at point `p`, checking that `id` is a
    /// non-input op of the graph not scheduled before and that its operands are defined.
    fn operands_at(&self, g: &Graph, p: usize, id: NodeId) -> Result<Vec<u32>, ExecError> {
        let err = |msg: String| sched_err(g, format!("point {p}: {msg}"));
        if !g.contains(id) || id.index() >= self.base.len() {
            return Err(err(format!("node {} is not in the graph", id.index())));
        }
        let node = g.node(id);
        if node.kind() == OpKind::Input {
            return Err(err(format!("node {} is an input", id.index())));
        }
        if self.base[id.index()] != NONE {
            return Err(err(format!("node {} is scheduled twice", id.index())));
        }
        let mut operands = Vec::new();
        for v in g.operands(id) {
            let b = self.base.get(v.node.index()).copied().unwrap_or(NONE);
            if b == NONE {
                return Err(err(format!(
                    "`{}` (node {}) uses node {} before it is computed",
                    node.kind(),
                    id.index(),
                    v.node.index()
                )));
            }
            if v.output as usize >= g.node(v.node).outputs.len() {
                return Err(err(format!("operand refers to a missing result {v}")));
            }
            operands.push(b + v.output);
        }
        Ok(operands)
    }

    /// The graph outputs' value ids.
    ///
    /// # Errors
    /// [`ExecError::Schedule`] for an output that refers to a value not computed.
    pub fn outputs(&self, g: &Graph) -> Result<Vec<u32>, ExecError> {
        let mut outputs = Vec::with_capacity(g.outputs().len());
        for (i, v) in g.outputs().iter().enumerate() {
            let b = self.base.get(v.node.index()).copied().unwrap_or(NONE);
            if b == NONE || !g.contains(v.node) || v.output as usize >= g.node(v.node).outputs.len()
            {
                return Err(sched_err(
                    g,
                    format!("output {i} refers to a missing value {v}"),
                ));
            }
            outputs.push(b + v.output);
        }
        Ok(outputs)
    }
}

/// Classifies the values and marks, per step, the operands it may take (move into its
/// kernel): an intermediate or donated value at its last read, read once by that step; and
/// the operands held for the whole run (graph inputs not donated).
/// Returns the classes and each value's last reading point (`NONE` if never read).
pub(super) fn mark_takes(
    g: &Graph,
    steps: &mut [Step],
    outputs: &[u32],
    count: usize,
) -> (Vec<Class>, Vec<u32>) {
    let mut class = vec![Class::Intermediate; count];
    for (c, &id) in class.iter_mut().zip(g.inputs()) {
        *c = if g.aliasing_output(id).is_some() {
            Class::Donated
        } else {
            Class::Input
        };
    }
    for &o in outputs {
        if class[o as usize] == Class::Intermediate {
            class[o as usize] = Class::Output;
        }
    }
    let mut last_use = vec![NONE; count];
    for (p, s) in steps.iter().enumerate() {
        for &v in &s.operands {
            last_use[v as usize] = p as u32;
        }
    }
    for (p, s) in steps.iter_mut().enumerate() {
        for k in 0..s.operands.len() {
            let v = s.operands[k];
            let repeated = s.operands[k + 1..].contains(&v);
            s.take[k] = matches!(class[v as usize], Class::Intermediate | Class::Donated)
                && last_use[v as usize] == p as u32
                && !repeated;
            s.moved[k] = s.take[k] && !s.operands[..k].contains(&v);
            s.held[k] = class[v as usize] == Class::Input;
        }
    }
    hold_sliced(g, steps, &class, &last_use, outputs);
    (class, last_use)
}

/// Whether the results of op `op` may share an operand's buffer (the executor returns the
/// operand itself, a reshaped or forwarded tensor, or a view of it).
fn may_share(op: &Op) -> bool {
    matches!(
        op,
        Op::Reshape(_)
            | Op::BroadcastInDim(_)
            | Op::Slice(_)
            | Op::DynamicSlice(_)
            | Op::OptimizationBarrier
            | Op::AnnotateDevicePlacement(_)
            | Op::Convert(_)
            | Op::BitcastConvert(_)
            | Op::While
            | Op::Case
    )
}

/// Marks as held the sliced operand of a `slice`/`dynamic_slice` whose result, and every value
/// that may share its buffer ([`may_share`], transitively; none of them a program output), is
/// last read before the operand's own last reader: nothing writes the operand while a view of
/// it lives (only its last reader may write into it in place), so the slice may be a view (a
/// scan body's read of the stack it updates later in the iteration). A program output is never
/// written during the run. A view kept past that point would only cost a copy, never a wrong
/// value: a kernel writes only into a buffer it owns alone.
fn hold_sliced(g: &Graph, steps: &mut [Step], class: &[Class], last_use: &[u32], outputs: &[u32]) {
    let mut shared: Vec<bool> = vec![false; class.len()];
    for p in 0..steps.len() {
        let s = &steps[p];
        if !matches!(g.node(s.node).op, Op::Slice(_) | Op::DynamicSlice(_)) {
            continue;
        }
        let Some(&v) = s.operands.first() else {
            continue;
        };
        let held = match class[v as usize] {
            Class::Input | Class::Output => true,
            Class::Donated | Class::Intermediate => {
                // The last point that reads a value sharing the result's buffer.
                shared.fill(false);
                shared[s.first_result as usize] = true;
                let mut end = p as u32;
                for (q, t) in steps.iter().enumerate().skip(p) {
                    if t.operands.iter().any(|&o| shared[o as usize]) {
                        end = end.max(q as u32);
                        let op = &g.node(t.node).op;
                        for r in 0..t.out.len() {
                            // A barrier forwards operand `r` as result `r`.
                            let from = match op {
                                Op::OptimizationBarrier => {
                                    t.operands.get(r).is_some_and(|&o| shared[o as usize])
                                }
                                _ => may_share(op),
                            };
                            shared[t.first_result as usize + r] |= from;
                        }
                    }
                }
                let returned = outputs.iter().any(|&o| shared[o as usize]);
                !returned && last_use[v as usize] != NONE && last_use[v as usize] > end
            }
        };
        steps[p].held[0] = held;
    }
}

/// Records each step's in-place writes ([`ebb_ir::op::in_place_writes`]) and their bytes.
///
/// # Errors
/// [`ExecError::Schedule`] when a write targets an operand the step may not take (it is read
/// after it).
pub(super) fn in_place(g: &Graph, steps: &mut [Step], sizes: &[u64]) -> Result<(), ExecError> {
    let in_place = ebb_ir::op::in_place_writes(g);
    for s in steps.iter_mut() {
        let Some(w) = in_place.get(&s.node) else {
            continue;
        };
        for x in w {
            if !s.take.get(x.operand).copied().unwrap_or(false) {
                return Err(sched_err(
                    g,
                    format!(
                        "`{}` writes in place into operand {}, which is read after it",
                        g.node(s.node).kind().name(),
                        x.operand
                    ),
                ));
            }
            s.in_place_bytes += sizes[s.operands[x.operand] as usize];
        }
        s.in_place = w.clone();
    }
    Ok(())
}

/// Frees each intermediate or donated value after its last read, or after its definition
/// when it is never read. (A graph without ops keeps its donated inputs: there is no point
/// to free them at.)
pub(super) fn place_frees(steps: &mut [Step], class: &[Class], last_use: &[u32], def: &[u32]) {
    for v in 0..class.len() {
        if !matches!(class[v], Class::Intermediate | Class::Donated) {
            continue;
        }
        let p = if last_use[v] == NONE {
            def[v]
        } else {
            last_use[v]
        } as usize;
        if let Some(step) = steps.get_mut(p) {
            step.frees.push(v as u32);
        }
    }
}

/// Marks each `while` step's carried values that the loop overwrites whole before reading
/// them, and each splat `broadcast_in_dim` step that only initializes one of them
/// ([`super::overwrite`]).
pub(super) fn mark_overwritten(g: &Graph, steps: &mut [Step], bindings: &Bindings) {
    let mut of: std::collections::HashMap<NodeId, Vec<usize>> = Default::default();
    for s in steps.iter_mut() {
        if g.node(s.node).op == Op::While {
            s.overwritten = super::overwrite::overwritten_carries(g, s.node, bindings);
            if !s.overwritten.is_empty() {
                of.insert(s.node, s.overwritten.clone());
            }
        }
    }
    if of.is_empty() {
        return;
    }
    for s in steps.iter_mut() {
        s.unread = super::overwrite::initializes_overwritten(g, s.node, |w| {
            of.get(&w).cloned().unwrap_or_default()
        });
    }
}
