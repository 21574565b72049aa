//! Buffer recycling: the buffers of values freed after their last use are kept, by element
//! type and length, and handed to the next result of the same type and length, so that a
//! step's large results (attention scores, GEMM outputs) are written into memory the process
//! already touched instead of fresh pages from the OS (on this project's 2-core VM a fresh
//! 8 MiB buffer costs about 2 000 page faults, 3–5 ms, more than the kernel that fills it).
//! A training step allocates the same sizes at every step, so from the second step on nearly
//! every large result is recycled. This is a caching allocator (PyTorch's CUDA caching
//! allocator is the classic one), not the planned arena: the buffers are still separate heap
//! blocks, and the measured peak still counts values, not buffers.
//!
//! Invariant: the pool holds at most `capacity` bytes (the [`crate::Runtime`] sets it to the
//! finalized plan's arena size), only buffers no tensor shares, and a buffer handed out has
//! exactly the requested type and length (its contents are stale: every taker overwrites
//! every element).

use crate::tensor::{Buf, Data, Elem};
use ebb_ir::DType;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Freed buffers by `(element type, length)`, at most a capacity in bytes; see the module docs.
#[derive(Debug, Default)]
pub struct BufferPool {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    free: HashMap<(DType, usize), Vec<Data>, rustc_hash::FxBuildHasher>,
    bytes: u64,
    capacity: u64,
    reused_bytes: u64,
}

fn bytes_of(dtype: DType, n: usize) -> u64 {
    dtype.size_bytes().saturating_mul(n as u64)
}

impl BufferPool {
    /// An empty pool that keeps at most `capacity` bytes (0: it keeps nothing).
    pub fn new(capacity: u64) -> BufferPool {
        BufferPool {
            inner: Mutex::new(Inner {
                capacity,
                ..Default::default()
            }),
        }
    }

    /// Changes the capacity in bytes, dropping buffers (largest first) beyond it.
    pub fn set_capacity(&self, capacity: u64) {
        let Ok(mut p) = self.inner.lock() else {
            return;
        };
        p.capacity = capacity;
        if p.bytes <= capacity {
            return;
        }
        let mut keys: Vec<(DType, usize)> = p.free.keys().copied().collect();
        keys.sort_by_key(|&(d, n)| std::cmp::Reverse(bytes_of(d, n)));
        for k in keys {
            while p.bytes > capacity {
                let Some(d) = p.free.get_mut(&k).and_then(Vec::pop) else {
                    break;
                };
                p.bytes -= bytes_of(k.0, d.len());
            }
        }
        p.free.retain(|_, v| !v.is_empty());
    }

    /// A shared pool of capacity 0 (keeps nothing), for programs and kernel contexts without a
    /// pool of their own.
    pub(crate) fn none() -> &'static Arc<BufferPool> {
        static NONE: OnceLock<Arc<BufferPool>> = OnceLock::new();
        NONE.get_or_init(|| Arc::new(BufferPool::new(0)))
    }

    /// Bytes held now.
    pub fn held_bytes(&self) -> u64 {
        self.inner.lock().map_or(0, |p| p.bytes)
    }

    /// Bytes handed out again since the pool was made.
    pub fn reused_bytes(&self) -> u64 {
        self.inner.lock().map_or(0, |p| p.reused_bytes)
    }

    /// Keeps a freed buffer if it is at least [`recycle_min_bytes`] long and fits under the
    /// capacity (otherwise drops it).
    #[doc(hidden)]
    pub fn put(&self, d: Data) {
        let (dtype, n) = (d.dtype(), d.len());
        if !d.is_heap() {
            return; // an arena range is released when its slice drops
        }
        let size = bytes_of(dtype, n);
        if size < recycle_min_bytes() {
            return; // never handed out again: `take` does not look for it
        }
        let Ok(mut p) = self.inner.lock() else {
            return;
        };
        if n == 0 || p.bytes.saturating_add(size) > p.capacity {
            return;
        }
        p.bytes += size;
        p.free.entry((dtype, n)).or_default().push(d);
    }

    /// Makes this the pool that tensors dropped on this thread return their buffers to, until
    /// the guard is dropped (which restores the previous one).
    #[doc(hidden)]
    pub fn activate(self: &Arc<Self>) -> Active {
        let prev = CURRENT.with(|c| c.replace(Some(self.clone())));
        Active { prev }
    }

    /// A kept buffer of exactly `dtype` and `n` elements (stale contents), if there is one.
    /// A buffer shorter than [`recycle_min_bytes`] is never kept, so none is looked for
    /// (without taking the lock: a loop body's small results ask at every iteration).
    #[doc(hidden)]
    pub fn take(&self, dtype: DType, n: usize) -> Option<Data> {
        let size = bytes_of(dtype, n);
        if size < recycle_min_bytes() {
            return None;
        }
        let mut p = self.inner.lock().ok()?;
        let d = p.free.get_mut(&(dtype, n))?.pop()?;
        p.bytes -= size;
        p.reused_bytes += size;
        Some(d)
    }

    /// [`BufferPool::take`], or a new zeroed buffer.
    pub(crate) fn take_or_zeros(&self, dtype: DType, n: usize) -> Data {
        self.take(dtype, n).unwrap_or_else(|| Data::zeros(dtype, n))
    }

    /// [`BufferPool::take_or_zeros`] as a typed vector of `n` elements.
    pub(crate) fn take_vec<T: Elem>(&self, n: usize) -> Buf<T> {
        self.take(T::DTYPE, n)
            .and_then(T::unwrap)
            .unwrap_or_else(|| Buf::from(vec![T::default(); n]))
    }
}

/// Buffers smaller than this are left to the allocator (small blocks are cheap to allocate
/// and come from memory the process already touched). From this size on, a recycled buffer
/// also saves the zeroing of a new one (`calloc`'s `memset`, which every taker overwrites)
/// and the allocator's path for blocks over 1 KiB (mimalloc's generic one): in a scanned
/// RNN's loop body, whose results of 1 to 6 KiB are made at every iteration, recycling from
/// 1 KiB on made the step at `B=16, S=64` about 2% faster than from 8 KiB on (median of 14
/// alternated pairs), and left `B=8, S=32` (1 KiB results) unchanged. The default of
/// [`recycle_min_bytes`].
pub const RECYCLE_MIN_BYTES: u64 = 1 << 10;

/// The smallest buffer the pool keeps, in bytes: `EBB_RECYCLE_MIN_BYTES` (read once, so that
/// a measurement can sweep it without a rebuild), default [`RECYCLE_MIN_BYTES`]. Any value
/// gives the same bits (every taker overwrites every element).
pub fn recycle_min_bytes() -> u64 {
    static V: OnceLock<u64> = OnceLock::new();
    *V.get_or_init(|| super::par::knob("EBB_RECYCLE_MIN_BYTES", RECYCLE_MIN_BYTES as usize) as u64)
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<BufferPool>>> = const { RefCell::new(None) };
}

/// Restores the previously active pool when dropped (see [`BufferPool::activate`]).
#[doc(hidden)]
pub struct Active {
    prev: Option<Arc<BufferPool>>,
}

impl Drop for Active {
    fn drop(&mut self) {
        let prev = self.prev.take();
        CURRENT.with(|c| *c.borrow_mut() = prev);
    }
}

/// Called by `Tensor`'s `Drop`: moves a large, unshared buffer into the active pool.
pub(crate) fn recycle(data: &mut Arc<Data>) {
    if bytes_of(data.dtype(), data.len()) < recycle_min_bytes() {
        return;
    }
    let Some(d) = Arc::get_mut(data) else {
        return;
    };
    // `try_with`: nothing to do while the thread's locals are being torn down.
    let _ = CURRENT.try_with(|c| {
        if let Ok(cur) = c.try_borrow() {
            if let Some(pool) = cur.as_ref() {
                pool.put(std::mem::replace(d, Data::F32(Buf::from(Vec::new()))));
            }
        }
    });
}
