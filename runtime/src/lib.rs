//! Ebb's runtime: what happens once the symbolic shapes are bound.
//!
//! The decisions — a symbolic plan finalized at concrete bindings under a memory budget
//! (evict/recompute/swap, arena offsets), cached per shape — are made by `ebb_plan`; this crate
//! executes them.
//!
//! * [`step`] — the embedding API: [`Runtime::step`] finalizes (cached) and executes one
//!   training step per batch under a budget, performing the evictions, recomputes and swaps.
//! * [`exec`] — the CPU reference executor: [`execute`] / [`Program`] run an imported
//!   [`ebb_ir::Graph`] at concrete bindings in any valid schedule (a topological order of the
//!   non-input ops), free every intermediate after its last use, and report the resident bytes
//!   at every program point ([`ExecStats`]) under the same memory model as the planner
//!   (`ebb_passes::memory`). Kernels follow the StableHLO specification; `dot_general` and
//!   `convolution` go through a real GEMM (`matrixmultiply`); large elementwise ops, copies and
//!   reductions are split over threads (rayon) in fixed blocks, so outputs are deterministic
//!   and bit-identical under every schedule.
//! * [`tensor`] — [`Tensor`]: a shape plus a typed, shared buffer ([`Data`], one variant per
//!   element type; `bf16`/`f16` via the `half` crate, `i1` as `bool`).
//! * [`npz`] — reading `.npz` reference data (inputs and outputs exported from JAX).
//! * [`error`] — typed errors of the executor and the loader ([`ExecError`], [`NpzError`]).

pub mod buffer;
pub mod device;
pub mod error;
pub mod exec;
pub mod f16_conv;
pub mod host_memory;
pub mod inputs;
pub mod npz;
pub mod raw;
pub mod step;
pub mod tensor;
pub mod warm;

pub use error::{ExecError, NpzError, OpError};
pub use exec::device::{DeviceBuffer, StepInput, StepTensor};
pub use exec::{execute, program_schedule, ExecStats, Executor, Program};
pub use step::{Runtime, RuntimeError, StepIo, StepOutput, StepReport};
pub use tensor::{Data, Scalar, Tensor, TensorError};
