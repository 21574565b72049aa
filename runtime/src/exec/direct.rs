//! Loop-fusion results written straight into the row of the buffer that a
//! `dynamic_update_slice` then updates with them, instead of into a buffer of their own that
//! the update copies.
//!
//! This is the body of a `lax.scan`: a loop fusion computes the iteration's outputs (and the
//! residuals the linearization saves), and one `dynamic_update_slice` per output writes it
//! into row `i` of its stack. With the update written into the row directly, the executor
//! moves the stack on as the update's result without running its kernel: nothing is copied.
//!
//! A result `r` of a `fusion` step `F` is marked *direct* into the operand `x` of a
//! `dynamic_update_slice` step `D` when all of these hold (checked once, at preparation):
//! - `r` is `D`'s update (operand 1) and read by no other op, nor a program output;
//! - `x` is moved into `D` (its last use) and read by no other op, nor a program output, nor
//!   an operand of `F`, and it is defined before `F`, as are `D`'s start indices;
//! - `r` and `x` have one element type.
//!
//! At run time ([`claim`]) the executor writes the result into `x`'s buffer only in a run of
//! the JIT executor without an arena or evictions, and when that buffer is a heap or arena
//! buffer no other tensor shares and the update's clamped rectangle is one contiguous range of
//! it; the result is then a view of that range ([`Buf::View`]), and `D`'s result is `x`
//! itself.
//!
//! Invariant: the values are those of the run without direct writes, bit for bit. Between `F`
//! and `D` no op reads `x` (its only reader is `D`), so writing the rectangle early is not
//! observed; `D`'s kernel would write the same elements at the same place (a no-op), and the
//! view is dropped after `D`, its last reader, so `D`'s result owns its buffer alone again.
//!
//! [`Buf::View`]: crate::buffer::Buf::View

use super::{Step, NONE};
use crate::tensor::Tensor;
use ebb_ir::op::FusionKind;
use ebb_ir::{DType, Graph, Op};

/// A result of a `fusion` step written into the operand of the `dynamic_update_slice` that
/// reads it (see the module docs).
#[derive(Clone, Debug)]
pub(super) struct Direct {
    /// Result index within the step.
    pub result: usize,
    /// Value id of the updated operand (`x`).
    pub target: u32,
    /// Value ids of the update's start indices.
    pub starts: Vec<u32>,
    /// Step index of the `dynamic_update_slice`.
    pub update: u32,
}

/// A [`Direct`] result's destination at run time: `ptr` is element `start` of `target`'s
/// buffer, which the kernel writes the result's elements from.
pub(crate) struct Dest<'a> {
    /// Result index within the step.
    pub result: usize,
    /// The updated operand, whose buffer no other tensor shares.
    pub target: &'a Tensor,
    /// Flat element offset of the update's rectangle in `target`.
    pub start: usize,
    /// Address of element `start` of `target`'s buffer.
    pub ptr: *mut u8,
    /// Step index of the `dynamic_update_slice` ([`Direct::update`]).
    pub update: u32,
}

/// Marks the [`Direct`] results of every step (see the module docs). `inputs` is the number
/// of graph inputs (value ids `0..inputs`), `def` each value's defining step, `outputs` the
/// program's output values.
pub(super) fn mark(g: &Graph, steps: &mut [Step], inputs: usize, def: &[u32], outputs: &[u32]) {
    let n = def.len();
    let mut uses = vec![0u32; n];
    for s in steps.iter() {
        for &v in &s.operands {
            if let Some(u) = uses.get_mut(v as usize) {
                *u += 1;
            }
        }
    }
    for &o in outputs {
        if let Some(u) = uses.get_mut(o as usize) {
            // An output is never written early.
            *u += 2;
        }
    }
    let before = |v: u32, f: usize| (v as usize) < inputs || (def[v as usize] as usize) < f;
    let mut found: Vec<(usize, Direct)> = Vec::new();
    for (dp, d) in steps.iter().enumerate() {
        if g.node(d.node).op != Op::DynamicUpdateSlice || d.operands.len() < 2 {
            continue;
        }
        let (x, r) = (d.operands[0], d.operands[1]);
        if x == r || (x as usize) >= n || (r as usize) >= n || (r as usize) < inputs {
            continue;
        }
        if uses[x as usize] != 1 || uses[r as usize] != 1 || !d.moved[0] {
            continue;
        }
        let f = def[r as usize] as usize;
        let Some(fs) = steps.get(f) else {
            continue;
        };
        if fs.first_result == NONE || !matches!(g.node(fs.node).op, Op::Fusion(FusionKind::Loop)) {
            continue;
        }
        let result = (r - fs.first_result) as usize;
        let starts = d.operands[2..].to_vec();
        let dtypes = |v: u32| {
            let p = def[v as usize] as usize;
            steps
                .get(p)
                .and_then(|s| s.out.get((v - s.first_result) as usize))
                .map(|o| o.dtype)
        };
        if fs.operands.contains(&x)
            || !before(x, f)
            || !starts.iter().all(|&v| before(v, f))
            || fs.out.get(result).map(|o| o.dtype).is_none()
            || ((x as usize) >= inputs && dtypes(x) != dtypes(r))
        {
            continue;
        }
        found.push((
            f,
            Direct {
                result,
                target: x,
                starts,
                update: dp as u32,
            },
        ));
    }
    for (f, d) in found {
        steps[f].direct.push(d);
    }
}

/// The flat offset of the rectangle of `sizes` at `starts` in a row-major tensor of `shape`
/// when its elements are one contiguous range of it (every dimension after the first one of
/// size above 1 is whole); `None` otherwise.
pub(crate) fn contiguous_start(
    shape: &[usize],
    sizes: &[usize],
    starts: &[usize],
) -> Option<usize> {
    if shape.len() != sizes.len() || shape.len() != starts.len() {
        return None;
    }
    let first = sizes.iter().position(|&s| s > 1).unwrap_or(sizes.len());
    if (first + 1..shape.len()).any(|d| sizes[d] != shape[d]) {
        return None;
    }
    let mut off = 0usize;
    let mut stride = 1usize;
    for d in (0..shape.len()).rev() {
        off += starts[d] * stride;
        stride *= shape[d];
    }
    Some(off)
}

/// The destination of direct result `d` (of a result of `sizes` elements) in `target` with
/// the start index tensors `starts`, or `None` when the write cannot go there (see the module
/// docs): the target is of another element type than `dtype`, shared, a view or foreign memory, or the rectangle not contiguous.
pub(super) fn claim<'a>(
    d: &Direct,
    target: &'a mut Tensor,
    starts: &[&Tensor],
    dtype: DType,
    sizes: &[usize],
) -> Option<Dest<'a>> {
    if target.dtype() != dtype {
        return None;
    }
    let clamped = super::shape_ops::clamped_starts(starts, target.shape(), sizes).ok()?;
    let start = contiguous_start(target.shape(), sizes, &clamped)?;
    let esize = dtype.size_bytes() as usize;
    let data = target.unique_data_mut()?;
    if !(data.is_heap() || data.arena_offset().is_some()) {
        return None;
    }
    let n: usize = sizes.iter().product();
    if n == 0 || start + n > data.len() {
        return None;
    }
    // SAFETY: `start + n <= len`, so the offset stays inside the buffer.
    let ptr = unsafe { data.as_mut_ptr().add(start * esize) };
    let target: &'a Tensor = target;
    Some(Dest {
        result: d.result,
        target,
        start,
        ptr,
        update: d.update,
    })
}

/// The results of `g`'s steps in program order that [`mark`] marks direct at `bindings`: the
/// `fusion` node and result index of each (for tests and reports).
///
/// # Errors
/// As [`super::Program::new`].
pub fn direct_results(
    g: &Graph,
    bindings: &ebb_ir::Bindings,
) -> Result<Vec<(ebb_ir::NodeId, usize)>, crate::error::ExecError> {
    let p = super::Program::new(g, &super::program_schedule(g), bindings)?;
    Ok(p.prep
        .steps
        .iter()
        .flat_map(|s| s.direct.iter().map(move |d| (s.node, d.result)))
        .collect())
}
