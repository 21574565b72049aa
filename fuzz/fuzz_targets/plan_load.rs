//! libFuzzer entry point of the `plan_load` target (see `ebb_testkit::fuzz::plan_load`).
libfuzzer_sys::fuzz_target!(|data: &[u8]| ebb_testkit::fuzz::plan_load(data));

fn main() {
    ebb_fuzz::run_libfuzzer()
}
