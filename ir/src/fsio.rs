//! Opening input files without blocking on them: every file Ebb reads (models, plans, `.npz`
//! inputs, ONNX external data) goes through [`open_regular`], which refuses anything but a
//! regular file (a FIFO, a character or block device, a socket, a directory) before a single
//! byte is read.
//!
//! Invariant: opening never blocks. The file is opened with `O_NONBLOCK` (a FIFO without a
//! writer then opens at once instead of waiting for one), its type is read from the open
//! descriptor (`fstat`, so a file swapped between a check and the open cannot slip through),
//! and a non-regular file is closed again with [`NotRegular`] as the error. On a regular file
//! `O_NONBLOCK` has no effect (POSIX `open(2)`).

use std::fs::{File, FileType};
use std::io::{self, Read};
use std::path::Path;

/// The error of [`open_regular`] for a file that is not a regular file; it is wrapped in an
/// [`io::Error`] of kind [`io::ErrorKind::InvalidInput`] whose message says what the file is.
#[derive(Debug, thiserror::Error)]
#[error("it is {what}, not a regular file")]
pub struct NotRegular {
    /// What the file is: `a FIFO`, `a character device`, `a directory`, ...
    pub what: &'static str,
}

/// What a file type is, in words (`a FIFO`, `a character device`, `a directory`, ...).
pub fn describe(ft: &FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    if ft.is_dir() {
        "a directory"
    } else if ft.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading when it is a regular file (symbolic links followed), without
/// blocking (see the module docs).
///
/// # Errors
/// The operating system's error for a missing or unreadable file; an error of kind
/// [`io::ErrorKind::InvalidInput`] holding [`NotRegular`] for anything but a regular file.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let file = opts.open(path)?;
    let ft = file.metadata()?.file_type();
    if !ft.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            NotRegular {
                what: describe(&ft),
            },
        ));
    }
    #[cfg(unix)]
    {
        // Back to blocking reads (no effect on a regular file, but reads then never see
        // `EAGAIN` on file systems that honour the flag).
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        // SAFETY: `fd` is the open descriptor `file` owns; F_GETFL/F_SETFL touch only its
        // status flags.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
            }
        }
    }
    Ok(file)
}

/// The whole content of the regular file at `path` ([`open_regular`], then read to the end).
///
/// # Errors
/// As [`open_regular`], and read errors.
pub fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    let mut f = open_regular(path)?;
    let mut bytes = Vec::with_capacity(f.metadata().map_or(0, |m| m.len() as usize));
    f.read_to_end(&mut bytes)?;
    Ok(bytes)
}
