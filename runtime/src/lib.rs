//! Ebb's runtime. This crate currently holds the CPU reference executor and its host tensors:
//!
//! * [`tensor`] — [`Tensor`]: a shape plus a typed, shared buffer ([`Data`], one variant per
//!   element type).
//! * [`exec`] — [`execute`] / [`Program`]: runs an imported [`ebb_ir::Graph`] at concrete
//!   bindings in any valid schedule (topological order of the non-input ops), frees every
//!   intermediate after its last use, and reports the resident bytes at every program point
//!   ([`ExecStats`]) under the same memory model as the planner (`ebb_passes::memory`).
//!   Kernels follow the StableHLO specification; `dot_general` and `convolution` go through a
//!   real GEMM (`matrixmultiply`), large elementwise ops, copies and reductions are split over
//!   threads (rayon) in fixed blocks, so results are deterministic and bit-identical under
//!   every schedule.
//! * [`npz`] — reading `.npz` reference data (inputs and outputs exported from JAX).
//! * [`error`] — typed errors ([`ExecError`], [`NpzError`]).
//!
//! Not here yet (see DESIGN.md): plan finalization at bindings, arena offsets, plan cache,
//! eviction/regeneration at run time, CUDA.

pub mod arena;
pub mod cache;
pub mod error;
pub mod exec;
pub mod finalize;
pub mod npz;
pub mod tensor;

pub use error::{ExecError, NpzError, OpError};
pub use exec::{execute, program_schedule, ExecStats, Program};
pub use tensor::{Data, Scalar, Tensor, TensorError};
