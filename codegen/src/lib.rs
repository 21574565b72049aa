//! Ebb's code generator: each fusion group (`fusion` op made by `ebb_passes::fuse`) is lowered
//! with inkwell to one LLVM function over the group's flat iteration space and JIT-compiled for
//! the host CPU, once per group structure: shapes are runtime parameters (row length, index
//! maps), so one kernel serves every binding of the symbols.
//!
//! - [`KernelLayout::of`] decides whether a region can be generated and what the kernel reads
//!   and writes ([`layout`]);
//! - [`lower::emit`] emits the IR (loop nest, index maps, per-element semantics of the
//!   reference executor; [`math`] for `exponential`/`tanh`);
//! - [`kernel`] compiles (`default<O3>`, object code for the host CPU) and caches ([`jit`]:
//!   for the process, and on disk in [`disk_cache`]: kernels are compiled once per machine);
//!   [`loader`] links the object code (ORC's LLJIT); [`stats`] counts compiles, loads from
//!   disk and reuses.
//!
//! The caller (the runtime's JIT executor) computes the parameters at the bindings, splits the
//! range over threads, and for an input fusion folds each row the kernel wrote with the
//! reference `reduce` kernel's order.
//!
//! Without the default feature `llvm` only what describes a kernel is built — layouts
//! ([`layout`]), [`KernelSpec`], the GPU kernels' structures and names ([`gpu::GpuKernel`]) —
//! and nothing links LLVM: a runtime built so runs plans whose GPU kernels are stored as PTX.
//!
//! Invariant: a generated kernel computes every element with the same operations, in the same
//! order, as the reference executor, so results are bit-identical to it.

pub mod disk_cache;
pub mod gpu;
#[cfg(feature = "llvm")]
pub mod jit;
pub mod layout;
#[cfg(feature = "llvm")]
pub mod loader;
#[cfg(feature = "llvm")]
mod loop_hint;
#[cfg(feature = "llvm")]
pub mod lower;
#[cfg(feature = "llvm")]
pub mod math;
pub mod spec;

#[cfg(feature = "llvm")]
pub use jit::kernel;
pub use layout::{InputRead, KernelLayout, MapMember, Mode, Unsupported};
#[cfg(not(feature = "llvm"))]
pub use spec::kernel;
pub use spec::{count_reuse, stats, JitStats, KernelSpec, StrideClass};

/// The machine a kernel is generated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// The host CPU (JIT; the C library's transcendental functions).
    Host,
    /// NVPTX, and the simt emulation of the same IR on the host ([`gpu`]).
    Gpu,
}

/// The kernel ABI: `(buffers, params, begin, end)`; see `lower`.
pub type KernelFn = unsafe extern "C" fn(*const *mut u8, *const i64, i64, i64);

/// A compiled kernel (its machine code lives for the rest of the process).
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    /// Entry point.
    pub f: KernelFn,
}

impl Kernel {
    /// Runs the kernel over the flat range `[begin, end)` of its iteration space; an empty
    /// range runs nothing. The kernel's index arithmetic divides by the extents of its
    /// dimensions, which are 0 exactly when the range is empty (a reduced row of length 0), and
    /// an integer division by zero in generated code is a hardware trap (SIGFPE) that kills
    /// the process, not an error.
    ///
    /// # Safety
    /// As [`KernelFn`]'s contract: `bufs` and `params` hold what the kernel's layout
    /// prescribes, and the buffers cover the elements of `[begin, end)` the kernel reads and
    /// writes.
    pub unsafe fn run(&self, bufs: *const *mut u8, params: *const i64, begin: i64, end: i64) {
        if begin < end {
            // SAFETY: forwarded from the caller's contract.
            unsafe { (self.f)(bufs, params, begin, end) }
        }
    }
}

/// Failure to generate or compile a kernel.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodegenError {
    /// The region holds an op the lowering does not implement.
    #[error("not generated: {0}")]
    Unsupported(#[from] Unsupported),
    /// LLVM failed (IR construction, verification, optimization or machine code).
    #[error("JIT: {0}")]
    Jit(String),
    /// This build has no code generator (ebb-codegen without its `llvm` feature; the `ebb`
    /// CLI or ebb-runtime without `jit`): what was asked for cannot be generated.
    #[error("this build of Ebb has no code generator, so it cannot generate {0} (build with the `jit` feature, which the `ebb` CLI has by default)")]
    Disabled(&'static str),
}
