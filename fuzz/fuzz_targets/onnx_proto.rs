//! libFuzzer entry point of the `onnx_proto` target (see `ebb_testkit::fuzz::onnx_proto`).
libfuzzer_sys::fuzz_target!(|data: &[u8]| ebb_testkit::fuzz::onnx_proto(data));

fn main() {
    ebb_fuzz::run_libfuzzer()
}
