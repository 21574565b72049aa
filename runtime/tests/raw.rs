//! Tensors from raw bytes (`ebb_runtime::raw::from_raw`): shapes and byte counts are checked.

use ebb_runtime::raw::from_raw;

#[test]
fn shapes_and_byte_counts_from_outside_are_checked() {
    let t = from_raw(vec![0; 8], "float32", vec![2]).unwrap();
    assert_eq!(t.shape(), &[2]);
    // An element count past `usize` (found by the `py_step` fuzz target: it panicked).
    let e = from_raw(vec![0; 8], "float32", vec![usize::MAX / 2, 3]).unwrap_err();
    assert!(e.contains("float32") || e.contains("f32"), "{e}");
    assert!(from_raw(vec![0; 7], "float32", vec![2]).is_err());
    let e = from_raw(vec![0; 8], "complex64", vec![1]).unwrap_err();
    assert!(
        e.contains("`complex64` is not supported") && e.contains("bfloat16"),
        "{e}"
    );
}
