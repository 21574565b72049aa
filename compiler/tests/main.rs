//! The integration tests of `ebb-compiler`, one test binary (`autotests = false` in Cargo.toml,
//! needs the `stablehlo` feature): every file in this directory is a module here. A new test
//! file must be added below.

mod bench;
mod bench_shapes;
mod cli;
mod device_check;
mod docs_commands;
mod hostile;
mod kernel_cache;
mod pack;
mod reliability;
mod units;
