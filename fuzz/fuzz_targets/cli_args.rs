//! libFuzzer entry point of the `cli_args` target (see `ebb_testkit::fuzz::cli_args`).
libfuzzer_sys::fuzz_target!(|data: &[u8]| ebb_testkit::fuzz::cli_args(data));

fn main() {
    ebb_fuzz::run_libfuzzer()
}
