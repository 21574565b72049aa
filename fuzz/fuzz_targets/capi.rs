//! libFuzzer entry point of the `capi` target (see `ebb_fuzz::capi`).
libfuzzer_sys::fuzz_target!(|data: &[u8]| ebb_fuzz::capi(data));

fn main() {
    ebb_fuzz::run_libfuzzer()
}
