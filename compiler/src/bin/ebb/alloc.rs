//! The `ebb` process's allocator: mimalloc, except for `ebb plan`, which uses the system
//! allocator (glibc's `malloc`).
//!
//! Why two: a step's many small host buffers, a plan file's compile and the compiler's graphs
//! allocate and free at a high rate, and the system allocator took 13–30% more CPU on
//! sub-millisecond steps. A cold `ebb plan` on a stamped binary plan is the opposite case: a
//! process of about 15 ms that allocates about 17 MB in 50 000 blocks (peak 6.4 MB live, the
//! 24-layer GPT-2 plan); there mimalloc's fresh pages (each first touch of an arena's 2 MiB
//! region faults in and zeroes a transparent huge page, 75 MiB peak RSS against 48 MiB) cost
//! more than its faster allocation saves, and the system allocator takes about 15% less CPU.
//! That allocator keeps its freed pages and takes its heap in one range with transparent huge
//! pages asked for ([`keep_heap_pages`], [`huge_heap`]): a handful of 2 MiB faults instead of
//! about 1 500 of 4 KiB. Planned and measured peaks are Ebb's own accounting of its buffers
//! and depend on neither.
//!
//! Invariant: every block is freed by the allocator that allocated it. The choice is made at
//! most once, before `main`, from the command line ([`choose_from_args`], a constructor in
//! `.init_array`, where glibc passes `argc` and `argv`), and only while no block has been
//! allocated: the first allocation fixes the choice (mimalloc, unless the system allocator was
//! chosen before), and a later attempt to choose changes nothing. Elsewhere than on glibc
//! every command uses mimalloc.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// No block allocated and no choice made yet.
const UNDECIDED: u8 = 0;
/// mimalloc, for the rest of the process.
const MIMALLOC: u8 = 1;
/// The system allocator, for the rest of the process.
const SYSTEM: u8 = 2;

/// The choice: [`UNDECIDED`] until the first allocation or [`choose_from_args`], then fixed.
static CHOICE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// The global allocator of the `ebb` binary (see the module docs).
pub(crate) struct EbbAlloc;

/// Whether blocks come from the system allocator; fixes the choice (mimalloc) when it is
/// still open. One atomic load on every call once fixed.
#[inline]
fn system() -> bool {
    match CHOICE.load(Relaxed) {
        MIMALLOC => false,
        SYSTEM => true,
        _ => match CHOICE.compare_exchange(UNDECIDED, MIMALLOC, Relaxed, Relaxed) {
            Ok(_) => false,
            Err(now) => now == SYSTEM,
        },
    }
}

// SAFETY: each method forwards to one of two allocators that uphold `GlobalAlloc`'s contract,
// and `system()` gives the same answer for the whole life of the process once any block
// exists (the module's invariant), so a block is reallocated and freed by the allocator that
// allocated it.
unsafe impl GlobalAlloc for EbbAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if system() {
            unsafe { System.alloc(layout) }
        } else {
            unsafe { mimalloc::MiMalloc.alloc(layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if system() {
            unsafe { System.alloc_zeroed(layout) }
        } else {
            unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if system() {
            unsafe { System.dealloc(ptr, layout) }
        } else {
            unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if system() {
            unsafe { System.realloc(ptr, layout, new_size) }
        } else {
            unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
        }
    }
}

/// Chooses the system allocator when the command is `ebb plan` (`argv[1]` is `plan`) and no
/// block has been allocated yet; runs before `main` (glibc calls `.init_array` entries with
/// `argc`, `argv` and `envp`). Allocates nothing.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" fn choose_from_args(
    argc: std::ffi::c_int,
    argv: *const *const std::ffi::c_char,
    _envp: *const *const std::ffi::c_char,
) {
    if argc < 2 || argv.is_null() {
        return;
    }
    // SAFETY: glibc passes the process's `argv`: `argc` pointers to NUL-terminated strings.
    let command = unsafe {
        let arg = *argv.add(1);
        if arg.is_null() {
            return;
        }
        std::ffi::CStr::from_ptr(arg)
    };
    if command.to_bytes() == b"plan"
        && CHOICE
            .compare_exchange(UNDECIDED, SYSTEM, Relaxed, Relaxed)
            .is_ok()
    {
        keep_heap_pages();
    }
}

/// Keeps the system allocator's freed pages in the process: blocks up to 32 MiB (glibc's
/// largest mmap threshold on 64-bit) come from the heap instead of a fresh `mmap` each, and
/// the heap's top is returned to the kernel only beyond 64 MiB free. A cold `ebb plan` then
/// reuses the pages a freed vector leaves instead of faulting in and zeroing new ones (page
/// faults 2 780 → 2 420 on the 24-layer GPT-2 plan, about 10% of its CPU time). The process
/// lives a few milliseconds, so the memory kept is returned at exit. Then [`huge_heap`].
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_heap_pages() {
    // SAFETY: `mallopt` only sets the allocator's parameters; glibc is initialized before
    // `.init_array` constructors run. A value it refuses leaves its default in place.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
    huge_heap();
}

/// Bytes of heap [`huge_heap`] reserves: above what a cold `ebb plan` of the 24-layer GPT-2
/// plan has live at once (about 6.4 MB).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const HEAP_RESERVE: usize = 16 << 20;

/// A transparent huge page's size on x86-64 and aarch64 (4 KiB base pages).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const HUGE_PAGE: usize = 2 << 20;

/// Grows the heap by [`HEAP_RESERVE`] bytes at once (one block allocated and freed: glibc
/// extends the heap's top by `brk` and keeps it, [`keep_heap_pages`]) and asks the kernel for
/// transparent huge pages on the whole 2 MiB pages of that range (`madvise(MADV_HUGEPAGE)`).
/// The heap's first touches then fault in a few 2 MiB pages instead of about 1 500 pages of
/// 4 KiB, each fault a trap into the kernel (on the 24-layer GPT-2 plan, page faults 2 450 →
/// 900–1 250, of which about 850 are the executable's start-up; CPU 0.72–0.90 of before,
/// the more so the more loaded the machine). Where the kernel gives no huge pages (THP
/// `never`, none free) the range faults in by 4 KiB pages as before. With THP defrag set to
/// `madvise` or `always`, a fault may first compact memory to free a huge page. Allocates
/// nothing through the Rust allocator.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn huge_heap() {
    // SAFETY: a block from `malloc` is freed once, by `free`; `sbrk(0)` only reads the
    // current break; `madvise(MADV_HUGEPAGE)` only sets a paging hint on pages of the heap
    // (mapped, from the block's start to the break) and fails harmlessly otherwise.
    unsafe {
        let block = libc::malloc(HEAP_RESERVE);
        if block.is_null() {
            return;
        }
        let start = block as usize;
        let brk = libc::sbrk(0) as usize;
        libc::free(block);
        // The block lies in the heap below the break unless glibc fell back to `mmap`.
        if brk == usize::MAX || start >= brk || brk - start < HEAP_RESERVE {
            return;
        }
        let first = start.next_multiple_of(HUGE_PAGE);
        let end = brk & !(HUGE_PAGE - 1);
        if end > first {
            libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[used]
#[link_section = ".init_array"]
static CHOOSE_FROM_ARGS: extern "C" fn(
    std::ffi::c_int,
    *const *const std::ffi::c_char,
    *const *const std::ffi::c_char,
) = choose_from_args;
