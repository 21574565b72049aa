//! Element storage of a tensor: a heap vector, or a slice of an arena at a planned offset.
//!
//! [`Buf<T>`] is what every [`crate::Data`] variant holds: [`Buf::Heap`] (a `Vec<T>`, for
//! inputs the caller owns, small results and values outside a finalized plan),
//! [`Buf::Arena`] (an [`ArenaSlice`]: `n` elements at a byte offset of one [`ArenaMemory`],
//! the block the runtime allocates once per finalized plan of `arena_bytes`; see
//! [`ebb_plan::arena`] for how offsets are chosen) or [`Buf::Foreign`] (a [`ForeignSlice`]:
//! memory another library owns, such as a DLPack producer's tensor, read in place and copied
//! to the heap before the first write, so that memory is never written) or [`Buf::View`] (a
//! [`ForeignSlice`] whose owner is another tensor's buffer: a contiguous range of it that a
//! `dynamic_slice` or `slice` reads in place instead of copying, likewise copied to the heap
//! before a write). All dereference to `[T]`, so kernels read and write them the same way.
//!
//! Invariant (what makes [`ArenaSlice`] sound): an [`ArenaMemory`] hands out a byte range only
//! when it overlaps no range still held — a claim is checked against the live claims under a
//! lock and released when the slice is dropped — so every slice owns its bytes alone, like a
//! `Vec`. A plan whose layout would overlap two live values cannot corrupt data: the second
//! claim is refused and the executor keeps that value on the heap (and reports it).

use crate::tensor::Elem;
use ebb_ir::DType;
use std::alloc::Layout;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

/// Alignment of an arena's base address in bytes (offsets are multiples of
/// [`ebb_plan::arena::ALIGN`], so every slice is at least this aligned).
pub const ARENA_BASE_ALIGN: usize = 64;

/// Element storage: a heap vector or an arena slice; see the module docs.
pub enum Buf<T> {
    /// Heap storage.
    Heap(Vec<T>),
    /// Elements at a planned offset of an arena.
    Arena(ArenaSlice<T>),
    /// Elements in memory another library owns (copied to the heap before a write).
    Foreign(ForeignSlice<T>),
    /// A contiguous range of another tensor's buffer, which the slice keeps alive (copied to
    /// the heap before a write; made by `Tensor::contiguous_view`).
    View(ForeignSlice<T>),
}

/// `len` elements of `T` in memory another library owns, kept alive by `owner` (e.g. an
/// imported DLPack tensor, whose deleter runs when the last slice drops it).
pub struct ForeignSlice<T> {
    ptr: NonNull<T>,
    len: usize,
    _owner: Arc<dyn Send + Sync>,
}

// SAFETY: the slice only reads the memory, which its owner keeps alive and which nothing in
// Ebb writes (a write copies to the heap first).
unsafe impl<T: Send> Send for ForeignSlice<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for ForeignSlice<T> {}

impl<T> ForeignSlice<T> {
    /// The `len` elements at `ptr`, kept alive by `owner`; `None` when `ptr` is null or not
    /// aligned for `T`.
    ///
    /// # Safety
    /// `ptr` points at `len` initialized values of `T` that stay valid and unchanged while
    /// `owner` lives.
    pub unsafe fn new(
        ptr: *const T,
        len: usize,
        owner: Arc<dyn Send + Sync>,
    ) -> Option<ForeignSlice<T>> {
        if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return None;
        }
        Some(ForeignSlice {
            ptr: NonNull::new(ptr as *mut T)?,
            len,
            _owner: owner,
        })
    }
}

impl<T> Deref for ForeignSlice<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `new`'s contract: `len` valid values at an aligned `ptr` while `owner` lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Buf<T> {
    /// True for [`Buf::Heap`].
    pub fn is_heap(&self) -> bool {
        matches!(self, Buf::Heap(_))
    }

    /// True for [`Buf::View`].
    pub fn is_view(&self) -> bool {
        matches!(self, Buf::View(_))
    }

    /// The arena and byte offset of an arena slice.
    pub fn arena_offset(&self) -> Option<(&Arc<ArenaMemory>, usize)> {
        match self {
            Buf::Heap(_) | Buf::Foreign(_) | Buf::View(_) => None,
            Buf::Arena(s) => Some((&s.claim.mem, s.claim.offset)),
        }
    }
}

impl<T: Clone> Buf<T> {
    /// The elements as a vector (moved for heap storage, copied out of an arena).
    pub fn into_vec(self) -> Vec<T> {
        match self {
            Buf::Heap(v) => v,
            Buf::Arena(s) => s.to_vec(),
            Buf::Foreign(s) | Buf::View(s) => s.to_vec(),
        }
    }
}

impl<T> Deref for Buf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Buf::Heap(v) => v,
            Buf::Arena(s) => s,
            Buf::Foreign(s) | Buf::View(s) => s,
        }
    }
}

/// Foreign memory and views are copied to the heap first (copy on write): they are never
/// written.
impl<T: Clone> DerefMut for Buf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        if let Buf::Foreign(s) | Buf::View(s) = self {
            *self = Buf::Heap(s.to_vec());
        }
        match self {
            Buf::Heap(v) => v,
            Buf::Arena(s) => s,
            Buf::Foreign(_) | Buf::View(_) => &mut [],
        }
    }
}

impl<T> Default for Buf<T> {
    fn default() -> Self {
        Buf::Heap(Vec::new())
    }
}

/// A copy on the heap (copies never alias an arena range).
impl<T: Clone> Clone for Buf<T> {
    fn clone(&self) -> Self {
        Buf::Heap(self.to_vec())
    }
}

impl<T: PartialEq> PartialEq for Buf<T> {
    fn eq(&self, o: &Self) -> bool {
        **self == **o
    }
}

impl<T: fmt::Debug> fmt::Debug for Buf<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl<T> From<Vec<T>> for Buf<T> {
    fn from(v: Vec<T>) -> Self {
        Buf::Heap(v)
    }
}

impl<'a, T> IntoIterator for &'a Buf<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T> FromIterator<T> for Buf<T> {
    fn from_iter<I: IntoIterator<Item = T>>(it: I) -> Self {
        Buf::Heap(it.into_iter().collect())
    }
}

/// `len` elements of `T` owned at a byte offset of an [`ArenaMemory`]; the claim on the range
/// is released when the slice is dropped.
pub struct ArenaSlice<T> {
    ptr: NonNull<T>,
    len: usize,
    claim: Claim,
}

// SAFETY: the slice owns its range alone (module invariant), like a `Vec<T>`.
unsafe impl<T: Send> Send for ArenaSlice<T> {}
// SAFETY: as above; shared access only reads.
unsafe impl<T: Sync> Sync for ArenaSlice<T> {}

impl<T> Deref for ArenaSlice<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` points at `len` initialized elements inside the arena's allocation,
        // aligned for `T`, claimed by this slice alone and alive while `claim` holds the arena.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> DerefMut for ArenaSlice<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

struct Claim {
    mem: Arc<ArenaMemory>,
    offset: usize,
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.mem.release(self.offset);
    }
}

/// What an [`ArenaMemory`] measured since it was made (or since [`ArenaMemory::reset_usage`]),
/// bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ArenaUsage {
    /// Highest end offset of any range handed out: the part of the arena actually used.
    pub high_water_bytes: u64,
    /// Largest total of the ranges held at one time.
    pub peak_live_bytes: u64,
    /// Total of the ranges held now.
    pub live_bytes: u64,
    /// Claims granted.
    pub claims: u64,
    /// Claims refused because the range overlapped one still held.
    pub refused: u64,
}

#[derive(Default)]
struct State {
    /// Held ranges `(offset, end)` (end exclusive), disjoint and sorted by offset: a step
    /// holds tens of ranges, where a sorted vector's binary search and short moves cost less
    /// than a tree's nodes.
    live: Vec<(usize, usize)>,
    usage: ArenaUsage,
}

/// One block of `bytes` bytes, aligned to [`ARENA_BASE_ALIGN`], from which [`ArenaSlice`]s
/// are claimed at planned offsets; see the module docs. The block is allocated zeroed, so the
/// operating system backs only the pages a step touches.
pub struct ArenaMemory {
    base: NonNull<u8>,
    bytes: usize,
    state: Mutex<State>,
}

// SAFETY: the block is plain memory; access to it goes through claims (module invariant) and
// the bookkeeping is behind a mutex.
unsafe impl Send for ArenaMemory {}
// SAFETY: as above.
unsafe impl Sync for ArenaMemory {}

/// The allocator refused an arena of this many bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cannot allocate an arena of {0} bytes")]
pub struct ArenaAllocError(pub u64);

impl ArenaMemory {
    /// A zeroed arena of `bytes` bytes.
    ///
    /// # Errors
    /// [`ArenaAllocError`] when the size does not fit the address space or the allocator
    /// fails (no abort: a step too large for the machine is refused with its size).
    pub fn new(bytes: u64) -> Result<Arc<ArenaMemory>, ArenaAllocError> {
        let err = ArenaAllocError(bytes);
        let n = usize::try_from(bytes).map_err(|_| err)?;
        let layout = Layout::from_size_align(n.max(1), ARENA_BASE_ALIGN).map_err(|_| err)?;
        // SAFETY: `layout` has a non-zero size.
        let base = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }).ok_or(err)?;
        Ok(Arc::new(ArenaMemory {
            base,
            bytes: n,
            state: Mutex::new(State::default()),
        }))
    }

    /// Size in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes as u64
    }

    /// What was measured so far.
    pub fn usage(&self) -> ArenaUsage {
        self.state.lock().map(|s| s.usage).unwrap_or_default()
    }

    /// Restarts the measurement (the high-water mark and peak from the ranges held now).
    pub fn reset_usage(&self) {
        if let Ok(mut s) = self.state.lock() {
            let live = s.usage.live_bytes;
            let top = s.live.iter().map(|&(_, e)| e).max().unwrap_or(0) as u64;
            s.usage = ArenaUsage {
                high_water_bytes: top,
                peak_live_bytes: live,
                live_bytes: live,
                ..Default::default()
            };
        }
    }

    /// `n` elements of `T` at byte `offset`, if the range lies inside the arena, is aligned
    /// for `T` and overlaps no range still held. The contents are stale (whatever the range
    /// held before; zeros for `i1`, whose other byte values are not booleans).
    pub fn slice<T: Elem>(self: &Arc<Self>, offset: usize, n: usize) -> Option<ArenaSlice<T>> {
        let size = n.checked_mul(std::mem::size_of::<T>())?;
        let end = offset.checked_add(size)?;
        if end > self.bytes || !offset.is_multiple_of(std::mem::align_of::<T>()) || size == 0 {
            return None;
        }
        {
            let mut s = self.state.lock().ok()?;
            // The held range with the greatest offset below `end` is the only one that can
            // overlap `[offset, end)` (the ranges are disjoint); with none overlapping, no held
            // range starts inside `[offset, end)`, so `at` is also where `offset` sorts.
            let at = s.live.partition_point(|&(o, _)| o < end);
            if at > 0 && s.live[at - 1].1 > offset {
                s.usage.refused += 1;
                return None;
            }
            s.live.insert(at, (offset, end));
            let u = &mut s.usage;
            u.claims += 1;
            u.live_bytes += size as u64;
            u.peak_live_bytes = u.peak_live_bytes.max(u.live_bytes);
            u.high_water_bytes = u.high_water_bytes.max(end as u64);
        }
        // SAFETY: `offset + size <= bytes`, so the pointer stays inside the allocation.
        let ptr = unsafe { self.base.as_ptr().add(offset) }.cast::<T>();
        if T::DTYPE == DType::I1 {
            // SAFETY: the range was just claimed by this slice alone.
            unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0, size) };
        }
        Some(ArenaSlice {
            ptr: NonNull::new(ptr)?,
            len: n,
            claim: Claim {
                mem: self.clone(),
                offset,
            },
        })
    }

    fn release(&self, offset: usize) {
        if let Ok(mut s) = self.state.lock() {
            if let Ok(at) = s.live.binary_search_by_key(&offset, |&(o, _)| o) {
                let (_, end) = s.live.remove(at);
                s.usage.live_bytes -= (end - offset) as u64;
            }
        }
    }
}

impl Drop for ArenaMemory {
    fn drop(&mut self) {
        if let Ok(layout) = Layout::from_size_align(self.bytes.max(1), ARENA_BASE_ALIGN) {
            // SAFETY: allocated in `new` with this layout; no slice outlives the `Arc`.
            unsafe { std::alloc::dealloc(self.base.as_ptr(), layout) };
        }
    }
}

impl fmt::Debug for ArenaMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ArenaMemory({} bytes, {:?})", self.bytes, self.usage())
    }
}
