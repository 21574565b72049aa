//! The libFuzzer driver of Ebb's fuzz targets (`ebb_testkit::fuzz`).
//!
//! The targets cannot use libFuzzer's own `main` (`#![no_main]`): the MLIR static libraries
//! linked for the StableHLO front end include `mlir-opt`'s `main` (libMLIRMlirOptMain.a),
//! which the linker would find first. Each target binary therefore has a Rust `main` that
//! hands its arguments to libFuzzer's documented entry point `LLVMFuzzerRunDriver`, with the
//! `LLVMFuzzerTestOneInput` that `libfuzzer_sys::fuzz_target!` defines.

use std::ffi::{c_char, c_int, CString};
use std::os::unix::ffi::OsStringExt;

extern "C" {
    fn LLVMFuzzerRunDriver(
        argc: *mut c_int,
        argv: *mut *mut *mut c_char,
        callback: unsafe extern "C" fn(*const u8, usize) -> c_int,
    ) -> c_int;
    fn LLVMFuzzerTestOneInput(data: *const u8, size: usize) -> c_int;
}

/// Runs libFuzzer with this process's arguments and exits with its status.
pub fn run_libfuzzer() -> ! {
    let args: Vec<CString> = std::env::args_os()
        .map(|a| CString::new(a.into_vec()).unwrap_or_default())
        .collect();
    let mut ptrs: Vec<*mut c_char> = args.iter().map(|a| a.as_ptr() as *mut c_char).collect();
    ptrs.push(std::ptr::null_mut());
    let mut argc = args.len() as c_int;
    let mut argv = ptrs.as_mut_ptr();
    // SAFETY: `argv` holds `argc` NUL-terminated strings and a null pointer, all alive until
    // the process exits; the callback is the one `fuzz_target!` defines.
    let rc = unsafe { LLVMFuzzerRunDriver(&mut argc, &mut argv, LLVMFuzzerTestOneInput) };
    std::process::exit(rc)
}
