//! libFuzzer entry point of the `npz` target (see `ebb_testkit::fuzz::npz`).
libfuzzer_sys::fuzz_target!(|data: &[u8]| ebb_testkit::fuzz::npz(data));

fn main() {
    ebb_fuzz::run_libfuzzer()
}
