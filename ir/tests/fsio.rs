//! Tests of `fsio` (`ir/src/fsio.rs`).

use ebb_ir::fsio::*;
use std::io;
use std::path::Path;

#[test]
fn regular_files_open_and_others_are_refused_without_blocking() {
    let dir = std::env::temp_dir().join(format!("ebb-fsio-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("a.txt");
    std::fs::write(&f, b"abc").unwrap();
    assert_eq!(read_regular(&f).unwrap(), b"abc");
    let e = read_regular(&dir).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert_eq!(e.to_string(), "it is a directory, not a regular file");
    #[cfg(unix)]
    {
        let e = read_regular(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "it is a character device, not a regular file"
        );
        let fifo = dir.join("p.fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // No writer: a blocking open would wait forever.
        let e = read_regular(&fifo).unwrap_err();
        assert_eq!(e.to_string(), "it is a FIFO, not a regular file");
    }
    std::fs::remove_dir_all(&dir).ok();
}
