//! Reading text inputs (`.mlir` modules, plan JSON): bytes that are not UTF-8 or that hold a
//! NUL byte are refused with the byte offset and the line and column where the problem is.

use std::path::Path;

/// Bytes that are not usable as a text input.
#[derive(Debug, thiserror::Error)]
pub enum TextError {
    /// The file could not be read.
    #[error("cannot read {path}: {error}")]
    Io {
        /// File path.
        path: String,
        /// The operating system's error (part of this message, not a `source`).
        error: std::io::Error,
    },
    /// The bytes are not UTF-8.
    #[error("{file}:{line}:{col}: not valid UTF-8 at byte {offset}")]
    Utf8 {
        /// File name.
        file: String,
        /// Byte offset of the first invalid byte.
        offset: usize,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        col: usize,
    },
    /// A NUL byte (which text inputs never contain; MLIR's parser cannot take one).
    #[error("{file}:{line}:{col}: NUL byte at byte {offset} (a text file cannot contain NUL)")]
    Nul {
        /// File name.
        file: String,
        /// Byte offset of the NUL.
        offset: usize,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        col: usize,
    },
}

/// The 1-based line and column (in characters) just after `prefix`, which must be UTF-8 up
/// to its end (invalid bytes count as one character each).
pub fn line_col(prefix: &[u8]) -> (usize, usize) {
    let line_start = prefix
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line = 1 + prefix.iter().filter(|&&b| b == b'\n').count();
    let col = 1 + String::from_utf8_lossy(&prefix[line_start..])
        .chars()
        .count();
    (line, col)
}

/// `bytes` as text: UTF-8 without NUL bytes; `file` names it in errors.
///
/// # Errors
/// [`TextError::Utf8`] or [`TextError::Nul`] with the offset, line and column.
pub fn decode(bytes: Vec<u8>, file: &str) -> Result<String, TextError> {
    let text = String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let (line, col) = line_col(&e.as_bytes()[..offset]);
        TextError::Utf8 {
            file: file.to_string(),
            offset,
            line,
            col,
        }
    })?;
    check_no_nul(&text, file)?;
    Ok(text)
}

/// Checks that `text` holds no NUL byte; `file` names it in the error.
///
/// # Errors
/// [`TextError::Nul`] with the offset, line and column of the first NUL.
pub fn check_no_nul(text: &str, file: &str) -> Result<(), TextError> {
    match text.bytes().position(|b| b == 0) {
        None => Ok(()),
        Some(offset) => {
            let (line, col) = line_col(&text.as_bytes()[..offset]);
            Err(TextError::Nul {
                file: file.to_string(),
                offset,
                line,
                col,
            })
        }
    }
}

/// Reads `path` as text ([`decode`]).
///
/// # Errors
/// [`TextError::Io`] for an unreadable file or one that is not a regular file (a FIFO, a
/// device: refused before reading, [`ebb_ir::fsio`]), and those of [`decode`].
pub fn read(path: &Path) -> Result<String, TextError> {
    let file = path.display().to_string();
    let bytes = ebb_ir::fsio::read_regular(path).map_err(|error| TextError::Io {
        path: file.clone(),
        error,
    })?;
    decode(bytes, &file)
}
