//! libFuzzer entry point of the `dim_param` target (see `ebb_testkit::fuzz::dim_param`).
libfuzzer_sys::fuzz_target!(|data: &[u8]| ebb_testkit::fuzz::dim_param(data));

fn main() {
    ebb_fuzz::run_libfuzzer()
}
