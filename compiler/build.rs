//! Links the `ebb` binary as a position-dependent executable (`-no-pie`).
//!
//! The binary carries LLVM and MLIR (~87 MB): as a PIE its ~77 000 relative relocations are
//! applied by the dynamic loader at every start, writing (and so copying) the pages of
//! `.data.rel.ro` they land in — about 1 ms of every command, a tenth of a cold `ebb plan`. A
//! non-PIE executable has them resolved at link time. The objects stay position-independent
//! (Rust's default); only the final link changes. Libraries (`ebb-capi`, the Python module) are
//! not affected.
fn main() {
    println!("cargo:rustc-link-arg-bin=ebb=-no-pie");
    // Static constructors' code (`.text.startup`) in one place: fewer pages touched at start-up.
    println!("cargo:rustc-link-arg-bin=ebb=-Wl,-z,keep-text-section-prefix");
}
