//! A kernel's operands: the values a step moves in at their last use (owned by the operands)
//! and the values the program goes on holding, read where their slots keep them (borrowed).
//!
//! A borrowed operand costs no reference-count update: a loop body reads its carried values,
//! its constants and its loop counter many times per iteration, and a clone of each costs an
//! atomic increment, then an atomic decrement when the kernel drops it. Kernels read every
//! operand as a `&[Tensor]` ([`Operands`] dereferences to one); a kernel that keeps or returns
//! an operand, or consumes its operands as a vector, clones the borrowed ones
//! ([`Operands::take_vec`], [`Operands::take_first`]). A run keeps one pair of vectors for the
//! operands of all its steps ([`Storage`]), so a step allocates none.
//!
//! Invariants: a borrowed operand is a bitwise copy of a tensor that a `&'a Tensor` refers to,
//! never dropped and never handed out by value (only by shared reference, or cloned), so it is
//! exactly that reference; mutable access is given to owned operands alone
//! ([`Operands::owned_mut`]), so an in-place write never reaches a held value. Tested through
//! the executor (`tests/exec_borrowed.rs`: a scan reading held values at every turn).

use crate::tensor::Tensor;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;

/// The vectors of [`Operands`], empty, kept between steps (a program's run reuses one pair for
/// every step: no allocation per step, and a small value to pass).
#[derive(Default)]
pub(crate) struct Storage {
    items: Vec<ManuallyDrop<Tensor>>,
    owned: Vec<bool>,
}

/// A kernel's operands in operand order, each owned or borrowed for `'a` (see the module docs).
pub(crate) struct Operands<'a> {
    /// The operands; a borrowed one is a bitwise copy of the tensor it borrows.
    items: Vec<ManuallyDrop<Tensor>>,
    /// Per operand: whether it is owned (dropped with the operands).
    owned: Vec<bool>,
    held: PhantomData<&'a Tensor>,
}

impl<'a> Operands<'a> {
    /// No operands, in `storage`'s vectors (empty).
    #[inline]
    pub(crate) fn in_storage(storage: Storage) -> Operands<'a> {
        debug_assert!(storage.items.is_empty() && storage.owned.is_empty());
        Operands {
            items: storage.items,
            owned: storage.owned,
            held: PhantomData,
        }
    }

    /// Drops the owned operands left and gives the vectors back, empty, for the next step.
    pub(crate) fn release(mut self) -> Storage {
        self.drop_owned();
        Storage {
            items: std::mem::take(&mut self.items),
            owned: std::mem::take(&mut self.owned),
        }
    }

    /// All of `v`, owned.
    pub(crate) fn from_vec(v: Vec<Tensor>) -> Operands<'a> {
        let mut o = Operands::in_storage(Storage::default());
        for t in v {
            o.push_owned(t);
        }
        o
    }

    /// Appends `t`, owned: dropped with the operands unless a kernel takes it.
    #[inline]
    pub(crate) fn push_owned(&mut self, t: Tensor) {
        self.items.push(ManuallyDrop::new(t));
        self.owned.push(true);
    }

    /// Appends `t`, borrowed: read in place, never dropped by the operands.
    #[inline]
    pub(crate) fn push_held(&mut self, t: &'a Tensor) {
        // SAFETY: the copy is never dropped nor moved out (see the module docs): it stands for
        // `t`, which outlives `'a` and is not written while borrowed.
        self.items
            .push(ManuallyDrop::new(unsafe { std::ptr::read(t) }));
        self.owned.push(false);
    }

    /// Operand `k` mutably, if it is owned (`None` for a borrowed one or an index out of range).
    pub(crate) fn owned_mut(&mut self, k: usize) -> Option<&mut Tensor> {
        match self.owned.get(k) {
            Some(true) => Some(&mut self.items[k]),
            _ => None,
        }
    }

    /// Operand `k` by value if it is owned, `with` left in its place (`None`, and nothing
    /// changed, for a borrowed one or an index out of range).
    pub(crate) fn replace_owned(&mut self, k: usize, with: Tensor) -> Option<Tensor> {
        self.owned_mut(k).map(|t| std::mem::replace(t, with))
    }

    /// The operands as a vector (owned ones moved, borrowed ones cloned), leaving none.
    pub(crate) fn take_vec(&mut self) -> Vec<Tensor> {
        let v = self
            .items
            .drain(..)
            .zip(self.owned.drain(..))
            .map(|(t, o)| {
                if o {
                    ManuallyDrop::into_inner(t)
                } else {
                    Tensor::clone(&t)
                }
            })
            .collect();
        v
    }

    /// Operand 0 by value (moved if owned, else cloned), the others left in order, as
    /// `Vec::remove(0)` takes it; `None` without operands.
    pub(crate) fn take_first(&mut self) -> Option<Tensor> {
        if self.items.is_empty() {
            return None;
        }
        let t = self.items.remove(0);
        Some(if self.owned.remove(0) {
            ManuallyDrop::into_inner(t)
        } else {
            Tensor::clone(&t)
        })
    }

    /// The last operand by value (moved if owned, else cloned), the others left in order;
    /// `None` without operands.
    pub(crate) fn take_last(&mut self) -> Option<Tensor> {
        let t = self.items.pop()?;
        Some(if self.owned.pop() == Some(true) {
            ManuallyDrop::into_inner(t)
        } else {
            Tensor::clone(&t)
        })
    }

    /// Drops the owned operands and empties the vectors.
    fn drop_owned(&mut self) {
        for (t, &o) in self.items.iter_mut().zip(&self.owned) {
            if o {
                // SAFETY: an owned operand is dropped here only, once: the vectors are
                // emptied right after.
                unsafe { ManuallyDrop::drop(t) }
            }
        }
        self.items.clear();
        self.owned.clear();
    }
}

impl std::ops::Deref for Operands<'_> {
    type Target = [Tensor];

    #[inline]
    fn deref(&self) -> &[Tensor] {
        let s: &[ManuallyDrop<Tensor>] = &self.items;
        // SAFETY: `ManuallyDrop<Tensor>` is `repr(transparent)` over `Tensor`.
        unsafe { &*(s as *const [ManuallyDrop<Tensor>] as *const [Tensor]) }
    }
}

impl Drop for Operands<'_> {
    fn drop(&mut self) {
        self.drop_owned();
    }
}
