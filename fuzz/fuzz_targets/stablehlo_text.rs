//! libFuzzer entry point of the `stablehlo_text` target (see `ebb_testkit::fuzz::stablehlo_text`).
libfuzzer_sys::fuzz_target!(|data: &[u8]| ebb_testkit::fuzz::stablehlo_text(data));

fn main() {
    ebb_fuzz::run_libfuzzer()
}
