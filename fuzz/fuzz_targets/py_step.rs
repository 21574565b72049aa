//! libFuzzer entry point of the `py_step` target (see `ebb_testkit::fuzz::py_step`).
libfuzzer_sys::fuzz_target!(|data: &[u8]| ebb_testkit::fuzz::py_step(data));

fn main() {
    ebb_fuzz::run_libfuzzer()
}
