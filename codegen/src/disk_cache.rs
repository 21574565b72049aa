//! The on-disk cache of compiled kernels: each kernel's object code (what LLVM's code
//! generator made of the optimized module, for this CPU) in one file, so that a second process
//! running the same plan — or the same group in another plan — compiles nothing.
//!
//! **Where**: `$EBB_CACHE_DIR/kernels`, else `$XDG_CACHE_HOME/ebb/kernels`, else
//! `~/.cache/ebb/kernels` (the directory [`cache_dir`] also holds the measured `cpu` profile).
//! `EBB_KERNEL_CACHE=off` (or `0`) turns the cache off.
//!
//! **Key**: the kernel's in-process key (the group's structure, layout, stride classes and
//! in-place stores; see [`crate::spec::structure_key`]) and everything the object code depends
//! on besides: Ebb's version and a digest of the code generator's sources (computed by the
//! build script, so a build with other lowering code never loads these objects), LLVM's
//! version, the target triple, and the host CPU's name and features. The file is named by the
//! SHA-256 of the key and holds the whole key, which is compared on reading: a collision or
//! another build's file is a miss, never a wrong kernel.
//!
//! **Concurrency**: a file is written to a uniquely named temporary file in the same directory
//! and renamed over its name (atomic on POSIX file systems), so a reader sees a whole file or
//! none; two processes compiling the same kernel both write it, the last rename wins, both
//! files being the same kernel. A truncated or foreign file is a miss.
//!
//! **Size**: at most `EBB_KERNEL_CACHE_MAX_BYTES` (default [`DEFAULT_MAX_BYTES`]): after a
//! store, the least recently used files (a hit refreshes a file's modification time) are
//! removed until the directory holds at most 3/4 of the bound.

use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

/// The default bound on the kernel cache's size, bytes (256 MiB; a kernel is 2–20 KiB).
pub const DEFAULT_MAX_BYTES: u64 = 256 << 20;

/// The first bytes of a cache file (format version 1).
const MAGIC: &[u8; 6] = b"EBBK1\n";

/// The file name extension of cache files.
const EXT: &str = "ebbk";

/// Ebb's cache directory: `$EBB_CACHE_DIR`, else `$XDG_CACHE_HOME/ebb`, else `~/.cache/ebb`
/// (`None` when none of these variables is set).
pub fn cache_dir() -> Option<PathBuf> {
    std::env::var_os("EBB_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("ebb")))
        .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/ebb")))
}

/// The kernel cache's directory, `None` when the cache is off (`EBB_KERNEL_CACHE=off|0`) or
/// there is no cache directory.
pub fn kernels_dir() -> Option<PathBuf> {
    match std::env::var("EBB_KERNEL_CACHE").as_deref() {
        Ok("off" | "0" | "false") => None,
        _ => cache_dir().map(|d| d.join("kernels")),
    }
}

/// The bound on the cache's size (`EBB_KERNEL_CACHE_MAX_BYTES`, else [`DEFAULT_MAX_BYTES`]).
pub fn max_bytes() -> u64 {
    std::env::var("EBB_KERNEL_CACHE_MAX_BYTES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_MAX_BYTES)
}

/// The code generator's identity: Ebb's version and the digest of `codegen/src` the build
/// script computed.
pub fn build_id() -> String {
    format!(
        "ebb {} codegen {}",
        env!("CARGO_PKG_VERSION"),
        env!("EBB_CODEGEN_DIGEST")
    )
}

/// The file of `key` in `dir`. Public for the tests only.
#[doc(hidden)]
pub fn file_of(dir: &Path, key: &str) -> PathBuf {
    let h = Sha256::digest(key.as_bytes());
    let hex: String = h.iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("{hex}.{EXT}"))
}

/// The object code stored for `key` in `dir`, if a whole file for exactly this key is there.
/// A hit refreshes the file's modification time (the least recently used files go first).
pub fn load(dir: &Path, key: &str) -> Option<Vec<u8>> {
    let path = file_of(dir, key);
    let bytes = std::fs::read(&path).ok()?;
    let object = parse(&bytes, key)?.to_vec();
    if let Ok(f) = std::fs::File::options().append(true).open(&path) {
        let _ = f.set_modified(SystemTime::now());
    }
    Some(object)
}

/// The object code in a cache file's `bytes`, if the file is whole and made for `key`.
fn parse<'a>(bytes: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    let (klen, rest) = read_len(rest)?;
    let (k, rest) = (rest.get(..klen)?, rest.get(klen..)?);
    if k != key.as_bytes() {
        return None;
    }
    let (olen, rest) = read_len(rest)?;
    (rest.len() == olen).then_some(rest)
}

fn read_len(b: &[u8]) -> Option<(usize, &[u8])> {
    let n = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
    Some((usize::try_from(n).ok()?, b.get(8..)?))
}

/// Stores `object` for `key` in `dir` (created if needed) atomically, then keeps the directory
/// within `max` bytes.
///
/// # Errors
/// The directory or the file cannot be written (the caller goes on without the cache).
pub fn store(dir: &Path, key: &str, object: &[u8], max: u64) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let path = file_of(dir, key);
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{}.{n}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(MAGIC)?;
        f.write_all(&(key.len() as u64).to_le_bytes())?;
        f.write_all(key.as_bytes())?;
        f.write_all(&(object.len() as u64).to_le_bytes())?;
        f.write_all(object)?;
        std::fs::rename(&tmp, &path)
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    prune(dir, max);
    Ok(())
}

/// Total bytes of the cache files in `dir`.
pub fn size(dir: &Path) -> u64 {
    entries(dir).iter().map(|e| e.1).sum()
}

/// The cache files of `dir`: path, bytes, modification time.
fn entries(dir: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == EXT))
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            Some((e.path(), m.len(), m.modified().ok()?))
        })
        .collect()
}

/// Removes the least recently used files of `dir` while it holds more than `max` bytes, down
/// to 3/4 of `max` (so that a run near the bound does not prune at every store).
pub fn prune(dir: &Path, max: u64) {
    let mut files = entries(dir);
    let mut total: u64 = files.iter().map(|e| e.1).sum();
    if total <= max {
        return;
    }
    files.sort_by_key(|e| e.2);
    let target = max / 4 * 3;
    for (path, bytes, _) in files {
        if total <= target {
            break;
        }
        // Another process may have removed it already.
        if std::fs::remove_file(&path).is_ok() {
            total = total.saturating_sub(bytes);
        }
    }
}
