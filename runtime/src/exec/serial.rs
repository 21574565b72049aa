//! Whether a step's kernels split any work over threads at given bindings: a step none of
//! whose kernels splits runs on the caller's thread ([`crate::Runtime`]), without handing it
//! to rayon's pool.
//!
//! Handing a step to the pool costs two thread wake-ups (the pool's worker, then the waiting
//! caller: futex waits and wakes, tens of µs on this project's VM), as much as a whole
//! sub-millisecond step's kernels. It pays off only through the kernels that split their work
//! (a split from a thread outside the pool injects a job and waits for it, a split inside the
//! pool is a local `join`); a step whose every kernel stays below its split threshold at the
//! bindings gains nothing from it.
//!
//! The thresholds are the kernels' own, read from [`super::par`]: a value (operand or result)
//! of at least [`PAR_MIN`], [`par_min`] or [`copy_min`] elements (elementwise, fused loops,
//! reductions, copies, layout changes), a `dot_general` of at least [`dot_min`]
//! multiply-adds, a `convolution` of at least [`PAR_MIN`] multiply-adds (its GEMM and
//! depthwise forms split earlier than a `dot_general`), a `reduce_window` or
//! `select_and_scatter` whose elements times window size reach [`PAR_MIN`]. Nested regions
//! (`while` bodies, `case` branches, `fusion` regions) are walked with the same bindings; a
//! dimension that does not evaluate counts as a split.
//!
//! Invariant: this only chooses the thread a step starts on. Kernels partition their work by
//! the pool's thread count ([`rayon::current_num_threads`], the global pool's from any
//! thread) and the shapes, and every split gives the same bits on any number of threads
//! ([`super::par`]), so the outputs are bit-identical either way.

use super::par::{copy_min, dot_min, par_min, PAR_MIN};
use ebb_ir::{Bindings, DimExpr, Graph, Op, TensorType};

/// Whether no kernel of `g` (its nested regions included) splits its work over threads at
/// `b` (see the module docs).
pub fn no_kernel_splits(g: &Graph, b: &Bindings) -> bool {
    let limits = Limits {
        elems: par_min().min(copy_min()).min(PAR_MIN) as u128,
        dot: u128::from(dot_min()),
        window: PAR_MIN as u128,
    };
    graph_stays_below(g, b, &limits)
}

/// The split thresholds, read once per walk.
struct Limits {
    /// Elements of a value from which some kernel splits.
    elems: u128,
    /// Multiply-adds from which a `dot_general` splits.
    dot: u128,
    /// Elements times window size from which a windowed reduction splits (also a
    /// `convolution`'s multiply-adds).
    window: u128,
}

/// Elements of `t` at `b` (`None`: a dimension does not evaluate or is negative).
fn elements(t: &TensorType, b: &Bindings) -> Option<u128> {
    product(&t.shape, b)
}

/// The product of `dims` at `b` (`None`: one does not evaluate or is negative).
fn product(dims: &[DimExpr], b: &Bindings) -> Option<u128> {
    dims.iter().try_fold(1u128, |acc, d| {
        let v = u128::try_from(d.eval(b).ok()?).ok()?;
        acc.checked_mul(v)
    })
}

fn graph_stays_below(g: &Graph, b: &Bindings, lim: &Limits) -> bool {
    g.order().iter().all(|&id| {
        if !g.contains(id) {
            return true;
        }
        let node = g.node(id);
        let outs: Option<Vec<u128>> = node.outputs.iter().map(|t| elements(t, b)).collect();
        let Some(outs) = outs else {
            return false;
        };
        if outs.iter().any(|&n| n >= lim.elems) {
            return false;
        }
        let out0 = outs.first().copied().unwrap_or(0);
        let operand = |i: usize| {
            g.operands(id)
                .get(i)
                .map(|&v| g.value_type(v).shape.clone())
        };
        let below = match &node.op {
            Op::DotGeneral(dd) => {
                let Some(lhs) = operand(0) else {
                    return false;
                };
                let k: Option<Vec<DimExpr>> = dd
                    .lhs_contract
                    .iter()
                    .map(|&d| usize::try_from(d).ok().and_then(|d| lhs.get(d).cloned()))
                    .collect();
                k.and_then(|k| product(&k, b))
                    .and_then(|k| out0.checked_mul(k))
                    .is_some_and(|w| w < lim.dot)
            }
            Op::Convolution(_) => operand(1)
                .and_then(|k| product(&k, b))
                .and_then(|k| out0.checked_mul(k))
                .is_some_and(|w| w < lim.window),
            Op::ReduceWindow(w) | Op::SelectAndScatter(w) => {
                let inputs = g
                    .operands(id)
                    .iter()
                    .map(|&v| elements(g.value_type(v), b))
                    .try_fold(out0, |m, n| n.map(|n| m.max(n)));
                inputs
                    .zip(product(&w.dimensions, b))
                    .and_then(|(n, win)| n.checked_mul(win))
                    .is_some_and(|w| w < lim.window)
            }
            _ => true,
        };
        below && node.regions.iter().all(|r| graph_stays_below(r, b, lim))
    })
}
