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
//! Invariant: a generated kernel computes every element with the same operations, in the same
//! order, as the reference executor, so results are bit-identical to it.

pub mod disk_cache;
pub mod gpu;
pub mod jit;
pub mod layout;
pub mod loader;
pub mod lower;
pub mod math;

pub use jit::{kernel, stats, JitStats};
pub use layout::{InputRead, KernelLayout, MapMember, Mode, Unsupported};
pub use lower::{KernelSpec, StrideClass};

/// The machine a kernel is generated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// The host CPU (JIT; the C library's transcendental functions).
    Host,
    /// NVPTX, and the simt emulation of the same IR on the host ([`gpu`]).
    Gpu,
}

/// The kernel ABI: `(buffers, params, begin, end)`; see [`lower`].
pub type KernelFn = unsafe extern "C" fn(*const *mut u8, *const i64, i64, i64);

/// A compiled kernel (its machine code lives for the rest of the process).
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    /// Entry point.
    pub f: KernelFn,
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
}
