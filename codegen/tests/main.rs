//! The tests of `ebb-codegen`, one test binary (`autotests = false`, `[lib] test = false` in
//! Cargo.toml): every file in this directory is a module here. A new test file must be added
//! below.

mod disk_cache;
// Kernel generation (feature `llvm`, links LLVM).
#[cfg(feature = "llvm")]
mod gpu;
