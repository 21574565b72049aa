//! Writing the CLI's outputs without clobbering anything and without losing write errors.
//!
//! [`write_file`] replaces a file atomically: the bytes go to a fresh temporary file with a
//! unique name in the target's directory, are flushed to disk (`fsync`), and the temporary file
//! is renamed over the target. Only a regular file (or a path that does not exist yet) is ever
//! replaced: a directory, a FIFO, a device or a socket is refused, so `-o /dev/full` or
//! `-o some.fifo` is an error instead of being silently turned into a regular file. A symbolic
//! link is followed: the file it points to is replaced and the link is kept (a dangling link is
//! refused). The temporary file is removed on every error path.
//!
//! No temporary file outlives its process: the temporary name carries the writer's process id
//! (`.NAME.ebb<PID>.XXXXXX.tmp`); a process that has called [`install_signal_cleanup`] removes
//! its temporary files when `SIGINT`, `SIGTERM`, `SIGHUP` or `SIGQUIT` ends it, and every write
//! first removes the temporary files of the same target left by processes that no longer exist
//! (killed with `SIGKILL`, or by a power cut).
//!
//! [`print_stdout`] writes to standard output and reports failures (`> /dev/full`) as errors;
//! a closed pipe (`ebb ... | head -1`) is [`OutputError::BrokenPipe`], which the CLI treats as
//! a quiet, successful end (as `ripgrep` and other Unix filters do). A standard output that was
//! closed when the process started (`ebb ... >&-`, see [`mark_stdout_closed`]) is an error too,
//! not output silently lost.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// An output that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The target exists and is not a regular file (nor a link to one).
    #[error("cannot write {path}: it is {what}, not a regular file (refusing to replace it)")]
    NotRegular {
        /// The path given.
        path: PathBuf,
        /// What it is: `a directory`, `a FIFO`, `a character device`, ...
        what: &'static str,
    },
    /// The target is a symbolic link whose target does not exist.
    #[error("cannot write {path}: it is a symbolic link to {target}, which does not exist")]
    DanglingLink {
        /// The path given.
        path: PathBuf,
        /// Where the link points.
        target: PathBuf,
    },
    /// Creating, writing, syncing or renaming failed.
    #[error("cannot write {path}: {error}")]
    Io {
        /// The path given.
        path: PathBuf,
        /// The operating system's error (not a `source`: it is part of this message).
        error: io::Error,
    },
    /// The temporary file next to the target could not be created (a missing or read-only
    /// directory).
    #[error("cannot write {path}: cannot create a file in {dir}: {error}")]
    TempFile {
        /// The path given.
        path: PathBuf,
        /// The directory of the target.
        dir: PathBuf,
        /// The operating system's error.
        error: io::Error,
    },
    /// Standard output could not be written (other than a closed pipe).
    #[error("cannot write to standard output: {0}")]
    Stdout(io::Error),
    /// Standard output is a pipe whose reader has gone away.
    #[error("standard output was closed (broken pipe)")]
    BrokenPipe,
}

/// The file that writing `path` replaces: `path` itself, or the final target of a symbolic
/// link. Errors for directories, FIFOs, devices, sockets and dangling links.
fn resolve_target(path: &Path) -> Result<PathBuf, OutputError> {
    let io = |error| OutputError::Io {
        path: path.to_path_buf(),
        error,
    };
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(path.to_path_buf()),
        Err(e) => return Err(io(e)),
    };
    let target = if meta.file_type().is_symlink() {
        match fs::metadata(path) {
            Ok(_) => fs::canonicalize(path).map_err(io)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(OutputError::DanglingLink {
                    path: path.to_path_buf(),
                    target: fs::read_link(path).map_err(io)?,
                })
            }
            Err(e) => return Err(io(e)),
        }
    } else {
        path.to_path_buf()
    };
    let ft = fs::metadata(&target).map_err(io)?.file_type();
    if !ft.is_file() {
        return Err(OutputError::NotRegular {
            path: path.to_path_buf(),
            what: ebb_ir::fsio::describe(&ft),
        });
    }
    Ok(target)
}

/// Checks, before any work is done, that [`write_file`] could replace `path`: it is a regular
/// file, a link to one, or a new name in an existing directory.
///
/// # Errors
/// As [`write_file`] for the target's kind; [`OutputError::TempFile`] when the directory does
/// not exist.
pub fn check_target(path: &Path) -> Result<(), OutputError> {
    let target = resolve_target(path)?;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if dir.is_dir() {
        return Ok(());
    }
    Err(OutputError::TempFile {
        path: path.to_path_buf(),
        dir,
        error: io::Error::new(io::ErrorKind::NotFound, "no such directory"),
    })
}

/// Writes `bytes` to `path` atomically (see the module docs): a unique temporary file next to
/// the target, `fsync`, then a rename over the target. A symbolic link is written through (the
/// file it points to is replaced, the link stays). An existing file keeps its permissions; a new
/// one gets the usual `0666 & !umask`.
///
/// # Errors
/// [`OutputError::NotRegular`] for a directory, FIFO, device or socket;
/// [`OutputError::DanglingLink`]; [`OutputError::TempFile`] when the temporary file cannot be
/// created; [`OutputError::Io`] when it cannot be written, synced or renamed (it is removed).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let target = resolve_target(path)?;
    let io = |error| OutputError::Io {
        path: path.to_path_buf(),
        error,
    };
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let prefix = format!(".{name}.ebb{}.", std::process::id());
    remove_stale_temp_files(&dir, &name);
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    let existing = fs::metadata(&target).ok().map(|m| m.permissions());
    // The signal handler learns each temporary path before the file exists (a signal in
    // between unlinks nothing), so no moment leaves a created file unknown to it.
    let mut armed: Option<Armed> = None;
    // Dropping `tmp` (on any early return below) removes the temporary file.
    let mut tmp = builder
        .make_in(&dir, |path| {
            armed = None;
            armed = Some(Armed::new(path));
            let mut o = fs::OpenOptions::new();
            o.read(true).write(true).create_new(true);
            #[cfg(unix)]
            {
                // A new file gets `0666 & !umask`, as `open(2)` would give it.
                use std::os::unix::fs::OpenOptionsExt;
                o.mode(0o666);
            }
            o.open(path)
        })
        .map_err(|e| OutputError::TempFile {
            path: path.to_path_buf(),
            dir: dir.clone(),
            // tempfile's message ends with the temporary path; keep the system's error only.
            error: {
                let msg = e.to_string();
                let msg = msg.split(" at path ").next().unwrap_or(&msg).to_string();
                io::Error::new(e.kind(), msg)
            },
        })?;
    let _armed = armed;
    if let Some(perms) = existing {
        tmp.as_file().set_permissions(perms).map_err(io)?;
    }
    tmp.write_all(bytes).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(&target).map_err(|e| io(e.error))?;
    // Make the rename durable too (best effort: not every file system syncs directories).
    if let Ok(d) = fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Removes the temporary files of target `name` in `dir` whose writer no longer runs
/// (`.NAME.ebb<PID>.XXXXXX.tmp` with no process `PID`). Best effort: errors are ignored.
fn remove_stale_temp_files(dir: &Path, name: &str) {
    let prefix = format!(".{name}.ebb");
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let file = e.file_name();
        let Some(rest) = file
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .filter(|f| f.ends_with(".tmp"))
        else {
            continue;
        };
        let Some(pid) = rest.split('.').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if pid > 0 && !process_exists(pid) {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Whether a process `pid` exists (`kill(pid, 0)` does not fail with `ESRCH`).
fn process_exists(pid: i32) -> bool {
    #[cfg(unix)]
    {
        // SAFETY: signal 0 only checks that the process exists; nothing is sent.
        let r = unsafe { libc::kill(pid, 0) };
        r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// Longest temporary path the signal handler can remove (longer ones are left to
/// [`remove_stale_temp_files`]).
const SLOT_BYTES: usize = 4096;

/// A temporary file being written, as the signal handler sees it: `state` is 0 (free), 1
/// (being filled or emptied) or 2 (armed: `path` holds a NUL-terminated path).
struct Slot {
    state: AtomicU8,
    path: std::cell::UnsafeCell<[u8; SLOT_BYTES]>,
}

// SAFETY: `path` is written only by the thread that moved `state` from 0 to 1, and read (by
// the signal handler) only while `state` is 2.
unsafe impl Sync for Slot {}

/// The temporary files being written by this process at once (more are left to
/// [`remove_stale_temp_files`]).
static SLOTS: [Slot; 8] = [const {
    Slot {
        state: AtomicU8::new(0),
        path: std::cell::UnsafeCell::new([0; SLOT_BYTES]),
    }
}; 8];

/// A temporary file registered with the signal handler while it exists.
struct Armed(Option<usize>);

impl Armed {
    fn new(path: &Path) -> Armed {
        #[cfg(unix)]
        let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str());
        #[cfg(not(unix))]
        let bytes: &[u8] = &[0];
        if bytes.len() >= SLOT_BYTES || bytes.contains(&0) {
            return Armed(None);
        }
        for (i, slot) in SLOTS.iter().enumerate() {
            if slot
                .state
                .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                // SAFETY: state 1 gives this thread the buffer (see `Slot`).
                let buf = unsafe { &mut *slot.path.get() };
                buf[..bytes.len()].copy_from_slice(bytes);
                buf[bytes.len()] = 0;
                slot.state.store(2, Ordering::Release);
                return Armed(Some(i));
            }
        }
        Armed(None)
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            SLOTS[i].state.store(0, Ordering::Release);
        }
    }
}

/// The signals after which [`install_signal_cleanup`] removes temporary files.
#[cfg(unix)]
const CLEANUP_SIGNALS: [libc::c_int; 4] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

#[cfg(unix)]
extern "C" fn cleanup_and_reraise(sig: libc::c_int) {
    for slot in &SLOTS {
        if slot.state.load(Ordering::Acquire) == 2 {
            // SAFETY: an armed slot holds a NUL-terminated path; `unlink` is
            // async-signal-safe.
            unsafe { libc::unlink(slot.path.get() as *const libc::c_char) };
        }
    }
    // SAFETY: restoring the default action and raising the signal again ends the process
    // as the signal would have (exit status and core dump as usual); both are
    // async-signal-safe.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// Makes `SIGINT`, `SIGTERM`, `SIGHUP` and `SIGQUIT` remove the temporary files this process
/// is writing before it ends (with the signal's usual exit status). For programs that own
/// their signals (the CLI), not for libraries embedded in another process. Idempotent.
pub fn install_signal_cleanup() {
    #[cfg(unix)]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            for sig in CLEANUP_SIGNALS {
                // SAFETY: the handler only touches atomics, static buffers and
                // async-signal-safe calls.
                unsafe {
                    let mut sa: libc::sigaction = std::mem::zeroed();
                    sa.sa_sigaction = cleanup_and_reraise as *const () as usize;
                    libc::sigemptyset(&mut sa.sa_mask);
                    libc::sigaction(sig, &sa, std::ptr::null_mut());
                }
            }
        });
    }
}

/// Set by [`mark_stdout_closed`].
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Records that standard output was closed when the process started (`>&-`): the Rust
/// runtime then opens `/dev/null` in its place, so writes would succeed and the output be
/// lost; [`print_stdout`] fails instead. A program checks descriptor 1 before the runtime
/// starts (the CLI does, from an `.init_array` constructor) and calls this from `main`.
pub fn mark_stdout_closed() {
    STDOUT_CLOSED.store(true, Ordering::Relaxed);
}

/// Writes `text` to standard output and flushes it.
///
/// # Errors
/// [`OutputError::BrokenPipe`] when the reader has gone away, [`OutputError::Stdout`] for
/// any other write failure (`> /dev/full`) and for a standard output closed at start
/// ([`mark_stdout_closed`]).
pub fn print_stdout(text: &str) -> Result<(), OutputError> {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return Err(OutputError::Stdout(io::Error::new(
            io::ErrorKind::Other,
            "it was closed when ebb started (`>&-`); redirect it to a file or `/dev/null` instead",
        )));
    }
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| match e.kind() {
            io::ErrorKind::BrokenPipe => OutputError::BrokenPipe,
            _ => OutputError::Stdout(e),
        })
}

/// True when `e` (or an error in its chain) is [`OutputError::BrokenPipe`]: the CLI ends
/// quietly with success then.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<OutputError>(),
            Some(OutputError::BrokenPipe)
        )
    })
}

/// The text the CLI prints for an error: its message and the messages of its causes, joined
/// by `: `, leaving out every cause whose text the message printed so far already contains.
///
/// Many errors embed their cause's text in their own message *and* expose the cause as their
/// `source()` (thiserror's `#[error("...: {source}")]`, anyhow contexts over such errors);
/// printing the whole chain (`{:#}`) would then say the same thing twice (`X: X`).
pub fn error_message(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if s.is_empty() || msg.contains(&s) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&s);
    }
    msg
}
