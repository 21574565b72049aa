//! Tests of `text` (`import/src/text.rs`).

use ebb_import::text::*;

#[test]
fn invalid_utf8_and_nul_bytes_are_located() {
    let e = decode(b"ab\ncd\xffe".to_vec(), "m.mlir").unwrap_err();
    assert_eq!(e.to_string(), "m.mlir:2:3: not valid UTF-8 at byte 5");
    let e = decode("é\n\nxé\0".as_bytes().to_vec(), "m.mlir").unwrap_err();
    assert_eq!(
        e.to_string(),
        "m.mlir:3:3: NUL byte at byte 7 (a text file cannot contain NUL)"
    );
    assert_eq!(decode(b"ok\n".to_vec(), "m").unwrap(), "ok\n");
}
