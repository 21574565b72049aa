//! Arena-backed execution: every op result is stored at the byte offset the finalized plan's
//! layout ([`ebb_plan::arena`]) gave its residency interval, in one [`ArenaMemory`] per run.
//!
//! How a result gets there:
//! - before the op runs, the ranges of its results are claimed and handed to the kernel, which
//!   writes into them directly where it allocates its results through the context
//!   ([`super::Ctx::take_vec`]: generated fusion kernels, GEMMs, copies, concatenations);
//! - results a kernel produces elsewhere — views that share an operand's buffer (`reshape`,
//!   `optimization_barrier`), results written in place into a dying operand, interpreted
//!   kernels that build their own vectors — are copied into the claimed range after it;
//! - a result written in place into the buffer of a donated input that is not in this arena
//!   (the caller's buffer) stays there: the layout joins an in-place result's range to its
//!   operand's ([`ebb_plan::arena`]), and a graph input's range is never claimed, so the
//!   caller's buffer stands for that range until the result dies (counted in
//!   [`super::ExecStats::in_place_kept_bytes`]); a buffer in another arena is copied in as
//!   above, so that no step's outputs pin an earlier step's arena;
//! - a value evicted after a point is dropped (its range released); a reload copies the host
//!   copy into the offset of the value's next interval, and a recompute's result is copied to
//!   that offset (the recompute's own temporaries are transient and stay on the heap, as the
//!   plan charges them: [`super::ExecStats::regen_peak`]).
//!
//! Graph inputs stay where the caller keeps them (for a training loop: where the previous step
//! wrote its outputs); their planned ranges are never claimed, so the operating system never
//! backs those pages. Graph outputs stay in the arena and keep it alive until the caller drops
//! them ([`crate::Runtime`] then runs the next step in another arena).
//!
//! Invariant: placement never changes a result's elements (copies are bit copies) and never
//! lets two held values share bytes ([`crate::buffer`]): a range still held by a value that
//! outlived its plan interval refuses the claim, and the result stays on the heap, counted in
//! [`super::ExecStats::arena_unplaced_bytes`] (0 for every plan the checker accepts).

use super::{ExecStats, OutType, Program};
use crate::buffer::{ArenaMemory, Buf};
use crate::error::ExecError;
use crate::tensor::{Data, Elem, Tensor};
use ebb_ir::op::InPlace;
use ebb_ir::DType;
use ebb_plan::arena::Arena;
use ebb_plan::format::{Plan, ValueClass};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// Where the results of a program go in an arena; see the module docs.
pub struct Placement {
    mem: Arc<ArenaMemory>,
    offsets: Arc<Offsets>,
}

/// The offsets of a [`Placement`] in the program's value numbering: they depend on the
/// program and the layout alone, not on the arena memory, and serve every step of one
/// finalized plan ([`Program::arena_offsets`], [`Program::with_arena_offsets`]).
pub(crate) struct Offsets {
    /// Bytes of the layout (the arena must hold them).
    arena_bytes: u64,
    /// Offset of each value's first interval (from its def point), by executor value id.
    at_def: Vec<Option<usize>>,
    /// Offset of a value's later interval, by (executor value id, point it starts at).
    back: HashMap<(u32, usize), usize>,
}

impl Placement {
    pub(crate) fn at_def(&self, v: u32) -> Option<usize> {
        self.offsets.at_def.get(v as usize).copied().flatten()
    }

    pub(crate) fn back(&self, v: u32, p: usize) -> Option<usize> {
        self.offsets.back.get(&(v, p)).copied()
    }

    /// Claims `ty`'s elements at `offset`.
    fn claim(&self, ty: &OutType, offset: usize) -> Option<Data> {
        let n = ty.shape.iter().product();
        claim_data(&self.mem, ty.dtype, offset, n)
    }

    /// The claimed result ranges of a step, to hand to its kernel; not for the results
    /// written in place (their range is the operand's, held until the kernel takes it).
    pub(crate) fn slots(&self, out: &[OutType], first: u32, in_place: &[InPlace]) -> Slots {
        let pending = out
            .iter()
            .enumerate()
            .map(|(i, ty)| {
                if in_place.iter().any(|w| w.result == i) {
                    return None;
                }
                let off = self.at_def(first + i as u32)?;
                self.claim(ty, off)
            })
            .collect();
        Slots {
            pending: RefCell::new(pending),
        }
    }

    /// `t` at `offset` (moved if it is there already, else copied into `slot` or a new claim;
    /// left where it is when the range is held). Adds its bytes to the `arena_*` counter of
    /// `stats` that says which.
    pub(crate) fn place(
        &self,
        t: Tensor,
        offset: usize,
        slot: Option<Data>,
        stats: &mut ExecStats,
    ) -> Tensor {
        let bytes = t.size_bytes();
        if bytes == 0 {
            return t;
        }
        let here = t
            .data()
            .arena_offset()
            .is_some_and(|(m, o)| Arc::ptr_eq(m, &self.mem) && o == offset);
        if here {
            stats.arena_direct_bytes += bytes;
            return t;
        }
        let ty = OutType {
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
        };
        let slot = slot
            .filter(|d| d.dtype() == ty.dtype && d.len() == t.len())
            .or_else(|| self.claim(&ty, offset));
        match slot {
            Some(mut d) => {
                copy_into(&mut d, t.data());
                stats.arena_copied_bytes += bytes;
                Tensor::from_parts(ty.shape, d)
            }
            None => {
                stats.arena_unplaced_bytes += bytes;
                t
            }
        }
    }
}

/// The in-place writes of a step whose operand is outside every arena (the caller's buffer of
/// a donated input, or any heap buffer): `(result, address of the operand's elements)`, taken
/// before the kernel consumes the operands.
pub(crate) fn outside_arena(in_place: &[InPlace], operands: &[Tensor]) -> Vec<(usize, usize)> {
    in_place
        .iter()
        .filter_map(|w| {
            let d = operands.get(w.operand)?.data();
            d.arena_offset()
                .is_none()
                .then(|| (w.result, d.as_ptr() as usize))
        })
        .collect()
}

/// Whether result `i` (`t`) was written into the very buffer of its in-place operand that
/// [`outside_arena`] found outside the arena: it is then left there (see the module docs).
pub(crate) fn kept_in_operand(outside: &[(usize, usize)], i: usize, t: &Tensor) -> bool {
    t.size_bytes() > 0
        && t.data().arena_offset().is_none()
        && outside
            .iter()
            .any(|&(r, at)| r == i && at == t.data().as_ptr() as usize)
}

/// `n` elements of `dtype` claimed at `offset` of `mem`.
fn claim_data(mem: &Arc<ArenaMemory>, dtype: DType, offset: usize, n: usize) -> Option<Data> {
    fn go<T: Elem>(mem: &Arc<ArenaMemory>, off: usize, n: usize) -> Option<Data> {
        Some(T::wrap(Buf::Arena(mem.slice::<T>(off, n)?)))
    }
    use half::{bf16, f16};
    match dtype {
        DType::F32 => go::<f32>(mem, offset, n),
        DType::BF16 => go::<bf16>(mem, offset, n),
        DType::F16 => go::<f16>(mem, offset, n),
        DType::F64 => go::<f64>(mem, offset, n),
        DType::I1 => go::<bool>(mem, offset, n),
        DType::I8 => go::<i8>(mem, offset, n),
        DType::I16 => go::<i16>(mem, offset, n),
        DType::I32 => go::<i32>(mem, offset, n),
        DType::I64 => go::<i64>(mem, offset, n),
        DType::U8 => go::<u8>(mem, offset, n),
        DType::U32 => go::<u32>(mem, offset, n),
        DType::U64 => go::<u64>(mem, offset, n),
    }
}

/// Copies `src` into `dst` (same element type and length, checked by the caller).
pub(crate) fn copy_into(dst: &mut Data, src: &Data) {
    crate::tensor::zip_with!(dst, src, d, s => super::par::copy(d, s));
}

/// A step's claimed result ranges, handed to its kernel through [`super::Ctx::take_vec`] and
/// [`super::Ctx::take_result`].
pub(crate) struct Slots {
    pending: RefCell<Vec<Option<Data>>>,
}

impl Slots {
    /// The range of result `i`, if it has `dtype` and `n` elements and is still unused.
    pub(crate) fn take_at(&self, i: usize, dtype: DType, n: usize) -> Option<Data> {
        let mut p = self.pending.borrow_mut();
        let slot = p.get_mut(i)?;
        if slot.as_ref()?.dtype() == dtype && slot.as_ref()?.len() == n {
            slot.take()
        } else {
            None
        }
    }

    /// The range of result `i`, if the kernel did not use it.
    pub(crate) fn remaining(&self, i: usize) -> Option<Data> {
        self.pending.borrow_mut().get_mut(i)?.take()
    }
}

impl Program<'_> {
    /// The program run with its results at the offsets of `arena`, the layout finalized for
    /// `plan` (the variant this program runs), in `mem`; see the module docs.
    ///
    /// # Errors
    /// [`ExecError::Plan`] when an allocation names a value the program does not compute or
    /// an offset beyond `mem`.
    pub fn with_arena(
        self,
        plan: &Plan,
        arena: &Arena,
        mem: Arc<ArenaMemory>,
    ) -> Result<Self, ExecError> {
        let offsets = Arc::new(self.offsets(plan, arena)?);
        self.with_arena_offsets(offsets, mem)
    }

    /// As [`Program::with_arena`] with the offsets of an earlier program of the same
    /// [`super::Prepared`] and layout ([`Program::arena_offsets`]).
    ///
    /// # Errors
    /// [`ExecError::Plan`] when the layout needs more bytes than `mem` has.
    pub(crate) fn with_arena_offsets(
        mut self,
        offsets: Arc<Offsets>,
        mem: Arc<ArenaMemory>,
    ) -> Result<Self, ExecError> {
        if offsets.arena_bytes > mem.bytes() {
            return Err(ExecError::Plan {
                graph: self.g.name.clone(),
                msg: format!(
                    "the layout needs {} bytes, the arena has {}",
                    offsets.arena_bytes,
                    mem.bytes()
                ),
            });
        }
        self.placement = Some(Placement { mem, offsets });
        Ok(self)
    }

    /// The offsets of an arena-backed program ([`Program::with_arena`]), if it is one.
    pub(crate) fn arena_offsets(&self) -> Option<Arc<Offsets>> {
        self.placement.as_ref().map(|p| p.offsets.clone())
    }

    /// The offsets of `arena`, the layout finalized for `plan`, in this program's numbering.
    fn offsets(&self, plan: &Plan, arena: &Arena) -> Result<Offsets, ExecError> {
        let g = self.g;
        let bad = |msg: String| ExecError::Plan {
            graph: g.name.clone(),
            msg,
        };
        let arena_bytes = u64::try_from(arena.arena_bytes).unwrap_or(0);
        let order = g.order();
        let mut at_def = vec![None; self.prep.num_values];
        let mut back = HashMap::new();
        for a in &arena.allocations {
            let pv = plan
                .values
                .get(a.value.index())
                .ok_or_else(|| bad(format!("the layout places a missing value {}", a.value)))?;
            if matches!(pv.class, ValueClass::Input | ValueClass::Donated) {
                continue; // read where the caller keeps it
            }
            let v = order
                .get(pv.node.index())
                .and_then(|n| self.prep.base.get(n.index()))
                .and_then(|&b| b.checked_add(pv.output))
                .filter(|&v| v != super::NONE && (v as usize) < self.prep.num_values)
                .ok_or_else(|| bad(format!("value {} is not computed", a.value)))?;
            let offset = usize::try_from(a.offset)
                .map_err(|_| bad(format!("value {}: offset {}", a.value, a.offset)))?;
            if a.start == pv.def {
                at_def[v as usize] = Some(offset);
            } else {
                back.insert((v, a.start.index()), offset);
            }
        }
        Ok(Offsets {
            arena_bytes,
            at_def,
            back,
        })
    }
}
