//! Links the `ebb` binary for a fast start: position-dependent (`-no-pie`), its static
//! constructors' code in one place, the functions a cold `ebb plan` runs laid out together,
//! and the C++ standard library (`libstdc++`) linked statically.
//!
//! The binary carries LLVM and MLIR (~78 MB):
//! - as a PIE its ~77 000 relative relocations are applied by the dynamic loader at every
//!   start, writing (and so copying) the pages of `.data.rel.ro` they land in — about 1 ms of
//!   every command, a tenth of a cold `ebb plan`. A non-PIE executable has them resolved at
//!   link time. The objects stay position-independent (Rust's default); only the final link
//!   changes.
//! - against the shared `libstdc++.so`, LLVM's and MLIR's references to it (vtables, type
//!   information, `operator new`) are ~4 500 symbol relocations the dynamic loader looks up by
//!   name at every start (~0.5–0.9 ms of CPU). Linked from `libstdc++.a` they are resolved at
//!   link time. `llvm-sys` and `mlir-sys` ask for `-lstdc++`; a directory holding only a link to
//!   the compiler's `libstdc++.a`, searched first, makes that name resolve to the archive for
//!   this binary alone (rustc's toolchain links LLVM the same way). Where the C++ compiler
//!   (`$CXX`, else `c++`) names no `libstdc++.a`, the binary links the shared library as
//!   before, with a build warning.
//! - the code a cold `ebb plan` runs (LLVM's and MLIR's static constructors, the decode,
//!   finalize, the checker, the report: ~1.7 MB) lay spread over ~40 MB of text, one page fault
//!   per 64 KiB window touched (266 on the 24-layer GPT). `ebb.order` lists those functions
//!   (`scripts/link-order.sh` regenerates it with callgrind) and lld lays them out first, in
//!   that order (`--symbol-ordering-file`; names the binary lacks are skipped without a word:
//!   the Rust ones change with the toolchain, the features and the profile, the C++ ones only
//!   with LLVM).
//!
//! Libraries (`ebb-capi`, the Python module) and test binaries are not affected.
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rustc-link-arg-bin=ebb=-no-pie");
    // Static constructors' code (`.text.startup`) in one place: fewer pages touched at start-up.
    println!("cargo:rustc-link-arg-bin=ebb=-Wl,-z,keep-text-section-prefix");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=ebb.order");
    let order =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("ebb.order");
    if order.is_file() {
        println!(
            "cargo:rustc-link-arg-bin=ebb=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bin=ebb=-Wl,--no-warn-symbol-ordering");
    }
    println!("cargo:rerun-if-env-changed=CXX");
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu {
        match static_libstdcxx_dir() {
            Ok(dir) => println!("cargo:rustc-link-arg-bin=ebb=-L{}", dir.display()),
            Err(why) => {
                println!("cargo:warning=`ebb` links the shared libstdc++ (a slower start): {why}")
            }
        }
    }
}

/// A directory under `OUT_DIR` holding `libstdc++.a`, a link to the archive the C++ compiler
/// (`$CXX`, else `c++`) links: searched before the system's directories, it turns `-lstdc++`
/// into the static library.
///
/// # Errors
/// A message when the compiler cannot be run or names no existing `libstdc++.a`.
fn static_libstdcxx_dir() -> Result<PathBuf, String> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".to_string());
    let out = Command::new(&cxx)
        .arg("-print-file-name=libstdc++.a")
        .output()
        .map_err(|e| format!("cannot run `{cxx}`: {e}"))?;
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let archive = Path::new(&printed);
    // The compiler prints the bare name when it finds no such file.
    if !out.status.success() || !archive.is_absolute() || !archive.is_file() {
        return Err(format!("`{cxx} -print-file-name=libstdc++.a` found none"));
    }
    let dir = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?)
        .join("static-libstdcxx");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let link = dir.join("libstdc++.a");
    let _ = std::fs::remove_file(&link);
    #[cfg(unix)]
    std::os::unix::fs::symlink(archive, &link).map_err(|e| format!("{}: {e}", link.display()))?;
    #[cfg(not(unix))]
    std::fs::copy(archive, &link).map_err(|e| format!("{}: {e}", link.display()))?;
    Ok(dir)
}
