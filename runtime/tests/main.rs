//! The integration tests of `ebb-runtime`, one test binary (`autotests = false` in Cargo.toml):
//! every file in this directory is a module here. A new test file must be added below.

mod common;
mod exec_control;
mod exec_dot;
mod exec_elementwise;
mod exec_fusion;
mod exec_gather_scatter;
mod exec_jit;
mod exec_program;
mod exec_reduce;
mod exec_shape_ops;
