//! The tests of `ebb-pipeline`, one test binary (`autotests = false`, `[lib] test = false` in
//! Cargo.toml): every file in this directory is a module here, the tests of a source module in
//! the file named after it (`size.rs` for `src/size.rs`). A new test file must be added below.

mod budget;
mod compile;
mod curve;
mod device_check;
mod numerics;
mod output;
mod size;
