//! libFuzzer entry point of the `ir_text` target (see `ebb_testkit::fuzz::ir_text`).
libfuzzer_sys::fuzz_target!(|data: &[u8]| ebb_testkit::fuzz::ir_text(data));

fn main() {
    ebb_fuzz::run_libfuzzer()
}
