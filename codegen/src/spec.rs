//! What a host kernel is made of, independent of LLVM: the region, its layout, the stride
//! class of each index map ([`KernelSpec`]), the structure key that names one kernel for every
//! group of the same structure ([`structure_key`]), and the JIT's process-wide counters
//! ([`JitStats`]: zero in a build without the `llvm` feature, which compiles nothing).

use crate::layout::KernelLayout;
use ebb_ir::Graph;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// The inner stride of an index map, which the kernel is specialized on (and whether it
/// reads one element everywhere).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StrideClass {
    /// The member reads one element everywhere (offset 0: no index arithmetic at all).
    Uniform,
    /// The member repeats one element along a row.
    Zero,
    /// Consecutive elements.
    One,
    /// Any other stride (read from `params`).
    Any,
    /// The offsets inside a row are no single stride (the map's innermost blocks are shorter
    /// than the row: group normalization's per-group broadcasts over rows of several groups):
    /// the offset of the row's element `j` is the row's offset plus `table[j]`, a table of `L`
    /// offsets in `params` whose index is the map's first parameter.
    Table,
}

/// A kernel to generate: the region, its layout, the stride class of each index map, and
/// the stores written in place (`(store, input)`: store `store` goes to input `input`'s
/// buffer).
pub struct KernelSpec<'a> {
    /// The `fusion` op's region.
    pub region: &'a Graph,
    /// Its [`KernelLayout::of`].
    pub layout: &'a KernelLayout,
    /// One per `layout.maps`.
    pub classes: &'a [StrideClass],
    /// In-place stores.
    pub in_place: &'a [(usize, usize)],
}

/// The region's structure: per member in program order its op, result element types and
/// ranks, and operands by position; then the outputs. Names, source locations and extents
/// are left out (the kernel takes extents as parameters; what the shapes decide, which reads
/// are aligned and which broadcasts are index maps, is in the
/// [`KernelLayout`](crate::layout::KernelLayout), part of the
/// cache key too), so the same group in every layer, and the optimizer update of every
/// parameter shape, share one kernel. Payloads are kept except the shapes of
/// `broadcast_in_dim`, `reshape` and `iota`, which the kernel reads only through index maps.
pub fn structure_key(region: &ebb_ir::Graph) -> String {
    use std::fmt::Write;
    let pos: HashMap<ebb_ir::NodeId, usize> = region
        .order()
        .iter()
        .enumerate()
        .map(|(k, &id)| (id, k))
        .collect();
    let at = |v: &ebb_ir::ValueRef| (pos.get(&v.node).copied().unwrap_or(usize::MAX), v.output);
    let mut key = String::new();
    for &id in region.order() {
        let node = region.node(id);
        let op = match &node.op {
            // Input names differ between groups; the index is the position.
            ebb_ir::Op::Input(_) => "input".to_string(),
            ebb_ir::Op::BroadcastInDim(b) => format!("broadcast_in_dim {:?}", b.dims),
            ebb_ir::Op::Reshape(_) | ebb_ir::Op::Iota(_) => node.kind().name().to_string(),
            op => format!("{op:?}"),
        };
        let ins: Vec<_> = region.operands(id).iter().map(at).collect();
        let types: Vec<_> = node.outputs.iter().map(|t| (t.dtype, t.rank())).collect();
        let _ = writeln!(key, "{op} {types:?} {ins:?}");
    }
    let outs: Vec<_> = region.outputs().iter().map(at).collect();
    let _ = write!(key, "-> {outs:?}");
    key
}

/// Process-wide JIT counters (see [`stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JitStats {
    /// Kernels compiled (LLVM ran: IR, optimization, object code).
    pub kernels_compiled: u64,
    /// Kernels whose object code came from the on-disk cache (linked, not compiled).
    pub kernels_loaded: u64,
    /// Kernel requests served from the process's cache.
    pub kernels_reused: u64,
    /// Time spent compiling kernels and linking them, µs.
    pub compile_us: u64,
    /// Time spent reading cached kernels and linking them, µs.
    pub load_us: u64,
}

pub(crate) static COMPILED: AtomicU64 = AtomicU64::new(0);
pub(crate) static LOADED: AtomicU64 = AtomicU64::new(0);
pub(crate) static REUSED: AtomicU64 = AtomicU64::new(0);
pub(crate) static COMPILE_US: AtomicU64 = AtomicU64::new(0);
pub(crate) static LOAD_US: AtomicU64 = AtomicU64::new(0);

/// Current counters.
pub fn stats() -> JitStats {
    JitStats {
        kernels_compiled: COMPILED.load(Ordering::Relaxed),
        kernels_loaded: LOADED.load(Ordering::Relaxed),
        kernels_reused: REUSED.load(Ordering::Relaxed),
        compile_us: COMPILE_US.load(Ordering::Relaxed),
        load_us: LOAD_US.load(Ordering::Relaxed),
    }
}

/// Counts a kernel the caller took from its own cache of this module's kernels (as
/// [`stats`]' `kernels_reused`).
pub fn count_reuse() {
    REUSED.fetch_add(1, Ordering::Relaxed);
}

/// Without the `llvm` feature: no kernel is compiled.
///
/// # Errors
/// Always [`CodegenError::Disabled`] (the runtime's JIT executor then interprets the group).
#[cfg(not(feature = "llvm"))]
pub fn kernel(_spec: &KernelSpec) -> Result<crate::Kernel, crate::CodegenError> {
    Err(crate::CodegenError::Disabled("host kernels"))
}
