//! The integration tests of `ebb-runtime`, one test binary (`autotests = false` in Cargo.toml):
//! every file in this directory is a module here. A new test file must be added below.

mod buffer;
mod common;
mod device;
mod exec_arith;
mod exec_control;
mod exec_conv_contraction;
mod exec_conv_rows;
mod exec_dot;
mod exec_dot_half;
mod exec_elementwise;
mod exec_elementwise_kernels;
mod exec_fast_paths;
mod exec_fastmath;
mod exec_fusion;
mod exec_fusion_kept;
mod exec_gather_scatter;
mod exec_gemm_direct;
mod exec_jit;
mod exec_jit_bf16;
mod exec_jit_f16;
mod exec_layout;
mod exec_pool;
mod exec_program;
mod exec_random;
mod exec_reduce;
mod exec_repeat;
mod exec_scalar_regions;
mod exec_scatter_windows;
mod exec_serial;
mod exec_shape_ops;
mod exec_window_rows;
mod f16_conv;
mod host_memory;
mod raw;
mod tensor;
