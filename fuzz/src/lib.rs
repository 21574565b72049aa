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

/// The C ABI's plan queries (`capi/include/ebb.h`) with fuzzed arguments, as a C trainer
/// calls them: the data is split at its first NUL into a bindings string and a device name
/// (both passed as C strings, the device also as NULL when empty), and its last eight bytes
/// are the budget (any `int64_t`, negative meaning none). The plan is `gpt2_tiny_adamw`'s,
/// loaded once through `ebb_plan_load`. Every call must return a value or an error message,
/// never crash or hang.
pub fn capi(data: &[u8]) {
    use ebb_capi::*;
    use std::ffi::CString;
    use std::sync::OnceLock;
    struct Loaded(*mut EbbPlan);
    // SAFETY: the plan is only read after loading (the C ABI's queries take `const` plans).
    unsafe impl Send for Loaded {}
    // SAFETY: as above.
    unsafe impl Sync for Loaded {}
    static PLAN: OnceLock<Loaded> = OnceLock::new();
    let plan = PLAN
        .get_or_init(|| {
            let path = CString::new(
                ebb_testkit::jax_fixture("gpt2_tiny_adamw")
                    .to_string_lossy()
                    .into_owned(),
            )
            .unwrap_or_default();
            // SAFETY: `path` is a NUL-terminated string.
            Loaded(unsafe { ebb_plan_load(path.as_ptr()) })
        })
        .0;
    if plan.is_null() {
        return;
    }
    let (head, budget) = match data.len().checked_sub(8) {
        Some(k) => (&data[..k], i64::from_le_bytes(data[k..].try_into().unwrap_or([0; 8]))),
        None => (data, -1),
    };
    let mut parts = head.splitn(2, |&b| b == 0);
    let bind = CString::new(parts.next().unwrap_or_default()).unwrap_or_default();
    let device = parts
        .next()
        .map(|d| CString::new(d.iter().copied().filter(|&b| b != 0).collect::<Vec<u8>>()))
        .and_then(Result::ok);
    let device_ptr = device.as_ref().map_or(std::ptr::null(), |d| d.as_ptr());
    // SAFETY: `plan` is live (never freed), the strings are NUL-terminated, and what the
    // calls return is freed with its own function.
    unsafe {
        let _ = ebb_plan_peak_bytes(plan, bind.as_ptr());
        let f = ebb_finalize(plan, bind.as_ptr(), budget, device_ptr);
        if !f.is_null() {
            for i in 0..ebb_finalized_decision_count(f).min(4) {
                let mut d: EbbDecision = std::mem::zeroed();
                let _ = ebb_finalized_decision(f, i, &mut d);
            }
            ebb_finalized_free(f);
        }
        let r = ebb_plan_report_json(plan, bind.as_ptr(), budget, device_ptr);
        ebb_string_free(r);
        let _ = ebb_last_error();
    }
}

/// Seeds of the `capi` target: bindings, a device and a budget as [`capi`] reads them.
pub fn capi_seeds() -> Vec<Vec<u8>> {
    let seed = |bind: &str, device: &str, budget: i64| {
        let mut v = bind.as_bytes().to_vec();
        if !device.is_empty() {
            v.push(0);
            v.extend_from_slice(device.as_bytes());
        }
        v.extend_from_slice(&budget.to_le_bytes());
        v
    };
    vec![
        seed("B=8,S=256", "", -1),
        seed("B=8,S=256", "h100-sxm-pcie5", 64 << 20),
        seed("B=2,S=64", "cpu", 1 << 20),
        seed("B=4,S=128", "custom:flops=1e12,hbm=1e11,link=1e10", 8 << 20),
    ]
}
