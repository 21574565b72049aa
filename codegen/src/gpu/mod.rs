//! GPU kernels from the same lowering as the host's: each kernel is one LLVM function
//! `{name}.core(tid, ntid, ctaid, nctaid, bufs.., params..)` whose grid-stride loop gives
//! thread `ctaid·ntid + tid` the elements `i ≡ ctaid·ntid + tid (mod ntid·nctaid)` of the
//! iteration space `[0, params[0])`. Two entries call it:
//!
//! - **PTX** ([`ptx`]): `{name}(bufs.., params..)`, a `ptx_kernel` reading `%tid.x`, `%ntid.x`,
//!   `%ctaid.x`, `%nctaid.x` (`llvm.nvvm.read.ptx.sreg.*`), compiled for `nvptx64-nvidia-cuda`
//!   at [`SM`] / [`PTX_FEATURES`] into PTX text the driver compiles for the installed GPU.
//! - **simt** ([`simt`]): `{name}.simt(args, nctaid, ntid, block_begin, block_end)` binds the
//!   same four values to loop variables over the blocks `[block_begin, block_end)` and their
//!   threads, compiled for the host (the simulated device runs blocks on its threads).
//!
//! Kernel ABI ([`ABI`]): `bufs` are device pointers (buffers in [`GpuKernel::buffers`] order),
//! then one parameter block of `i64`s ([`GpuKernel::params`]; `params[0]` is the iteration count
//! `n`), a PTX `.param .align 8 .b8 [8·np]` the kernel reads in place (`nvvm.grid_constant`:
//! no thread copies it to local memory; a fused kernel indexes its index maps' shapes and
//! strides there). The simt entry takes them as one array of 64-bit slots, buffers first. Shapes are parameters: one kernel
//! per structure serves every binding. No shared memory, no barriers, no atomics: each thread
//! computes its elements alone, in the order the reference executor uses, so results do not
//! depend on the launch grid.
//!
//! Kernel families: [`GpuKernel::Fusion`] (a loop fusion region, or one elementwise op as a
//! one-member region: the host lowering's body, [`crate::lower`], per element),
//! [`GpuKernel::Copy`] (strided and dynamically offset copies: transpose, slice, reverse,
//! broadcast, concatenate, pad, dynamic (update) slice; [`copy`]), [`GpuKernel::Reduce`]
//! (one thread per result element, folding in the reference `reduce`'s order; [`reduce`]),
//! [`GpuKernel::Gather`] and [`GpuKernel::Scatter`] ([`gather`]), [`GpuKernel::Im2col`]
//! (a convolution's column stack for the GEMM; [`copy`]) and [`GpuKernel::Window`]
//! (`reduce_window`, `select_and_scatter`; [`window`]), [`GpuKernel::Rng`]
//! (`rng_bit_generator`'s threefry blocks; [`rng`]).

pub mod copy;
#[cfg(feature = "llvm")]
mod emit;
pub mod gather;
#[cfg(feature = "llvm")]
mod math;
pub mod reduce;
pub mod rng;
pub mod window;

use crate::layout::KernelLayout;
#[cfg(not(feature = "llvm"))]
use crate::CodegenError;
pub use copy::{CopyKernel, Im2colKernel};
use ebb_ir::Graph;
#[cfg(feature = "llvm")]
pub(crate) use emit::{entry_alloca, for_range, grid_coordinate, window_tap};
#[cfg(feature = "llvm")]
pub use emit::{nvptx_ir, ptx, simt};
pub use gather::{GatherKernel, ScatterKernel};
pub use reduce::{ReduceKernel, ReduceOp};
pub use rng::RngKernel;
pub use window::WindowKernel;

/// The virtual GPU architecture PTX is generated for (Ampere and later run it).
pub const SM: &str = "sm_80";
/// PTX ISA version of the generated text: 8.1 (CUDA 12.1 and later drivers load it), the first
/// whose kernels may take more than 4,096 bytes of parameters (up to [`MAX_PARAM_BYTES`]). A
/// fused kernel passes its index maps' shapes and strides as parameters: the dropout GPT's
/// largest takes 3,454 (27.6 KB).
pub const PTX_FEATURES: &str = "+ptx81";
/// The most bytes of parameters a kernel may take: 32,764 (CUDA 12.1, PTX ISA 8.1, Volta and
/// later GPUs; the CUDA C++ Programming Guide, "Function Parameters").
pub const MAX_PARAM_BYTES: usize = 32_764;
/// The kernel ABI's tag, hashed into every entry's name ([`GpuKernel::name`]): `abi2` passes
/// the parameters as one block (the module docs); `abi1` passed each as its own `.param`.
pub const ABI: &str = "abi2\n";
/// The NVPTX target triple.
pub const TRIPLE: &str = "nvptx64-nvidia-cuda";

/// A GPU kernel, independent of the shapes.
#[derive(Clone, Debug)]
pub enum GpuKernel {
    /// A loop fusion region's results, element by element (every index map with a runtime
    /// stride). Buffers: the region inputs, then one per region output (an output written in
    /// place is passed its input's pointer). Params: `n`, then the host kernel's parameters
    /// ([`KernelLayout::param_count`]) with the row length 1 and base 0.
    Fusion {
        /// The region (its own inputs and outputs).
        region: Graph,
        /// Its [`KernelLayout::of_target`] for [`Target::Gpu`] (loop mode).
        layout: KernelLayout,
    },
    /// A strided copy ([`CopyKernel`]).
    Copy(CopyKernel),
    /// A reduction ([`ReduceKernel`]).
    Reduce(ReduceKernel),
    /// A gather ([`GatherKernel`]).
    Gather(GatherKernel),
    /// A scatter ([`ScatterKernel`]).
    Scatter(ScatterKernel),
    /// A convolution's column stack ([`Im2colKernel`]).
    Im2col(Im2colKernel),
    /// `reduce_window` or `select_and_scatter` ([`WindowKernel`]).
    Window(WindowKernel),
    /// `rng_bit_generator` ([`RngKernel`]).
    Rng(RngKernel),
}

impl GpuKernel {
    /// The structure key: equal keys, equal code.
    pub fn key(&self) -> String {
        match self {
            GpuKernel::Fusion { region, layout } => format!(
                "fusion\n{}\n{:?}",
                crate::spec::structure_key(region),
                layout
            ),
            GpuKernel::Copy(c) => format!("{c:?}"),
            GpuKernel::Reduce(r) => format!("{r:?}"),
            GpuKernel::Gather(g) => format!("{g:?}"),
            GpuKernel::Scatter(s) => format!("{s:?}"),
            GpuKernel::Im2col(k) => format!("{k:?}"),
            GpuKernel::Window(k) => format!("{k:?}"),
            GpuKernel::Rng(k) => format!("{k:?}"),
        }
    }

    /// The entry's symbol: `ebb_` and the 64-bit FNV-1a hash of [`ABI`] and
    /// [`GpuKernel::key`] in hex (PTX stored by a build of another ABI names other entries).
    pub fn name(&self) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in ABI.bytes().chain(self.key().bytes()) {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("ebb_{h:016x}")
    }

    /// Bytes of parameters a launch passes: 8 per buffer pointer and per `i64` parameter
    /// (at most [`MAX_PARAM_BYTES`] for the kernel to load).
    pub fn param_bytes(&self) -> usize {
        8 * (self.buffers() + self.params())
    }

    /// Number of buffer (pointer) arguments.
    pub fn buffers(&self) -> usize {
        match self {
            GpuKernel::Fusion { layout, .. } => layout.inputs.len() + layout.stores.len(),
            GpuKernel::Copy(c) => c.buffers(),
            GpuKernel::Reduce(_) | GpuKernel::Gather(_) | GpuKernel::Scatter(_) => 3,
            GpuKernel::Im2col(_) => 2,
            GpuKernel::Window(k) => k.buffers(),
            GpuKernel::Rng(_) => 3,
        }
    }

    /// Number of `i64` parameters (the first is the iteration count).
    pub fn params(&self) -> usize {
        match self {
            GpuKernel::Fusion { layout, .. } => 1 + layout.param_count(),
            GpuKernel::Copy(c) => c.params(),
            GpuKernel::Reduce(r) => r.params(),
            GpuKernel::Gather(g) => g.params(),
            GpuKernel::Scatter(s) => s.params(),
            GpuKernel::Im2col(k) => k.params(),
            GpuKernel::Window(k) => k.params(),
            GpuKernel::Rng(k) => k.params(),
        }
    }
}

/// The simt entry of a kernel: `(args, nctaid, ntid, block_begin, block_end)`.
pub type SimtFn = unsafe extern "C" fn(*const u64, u32, u32, u32, u32);

/// Without the `llvm` feature: no IR is built.
///
/// # Errors
/// Always [`CodegenError::Disabled`].
#[cfg(not(feature = "llvm"))]
pub fn nvptx_ir(_kernel: &GpuKernel) -> Result<String, CodegenError> {
    Err(CodegenError::Disabled("NVPTX IR"))
}

/// Without the `llvm` feature: no PTX is generated (a plan must carry its kernels' PTX,
/// stored by `ebb compile --target cuda` in a build with the feature).
///
/// # Errors
/// Always [`CodegenError::Disabled`].
#[cfg(not(feature = "llvm"))]
pub fn ptx(_kernel: &GpuKernel) -> Result<String, CodegenError> {
    Err(CodegenError::Disabled("PTX"))
}

/// Without the `llvm` feature: the simulated device has no kernels.
///
/// # Errors
/// Always [`CodegenError::Disabled`].
#[cfg(not(feature = "llvm"))]
pub fn simt(_kernel: &GpuKernel) -> Result<SimtFn, CodegenError> {
    Err(CodegenError::Disabled("simt kernels"))
}
