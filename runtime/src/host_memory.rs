//! How many more bytes this process may allocate on the host, from every limit that applies to
//! it, so that a step too large for them is refused before it allocates rather than aborted by
//! the allocator (`ulimit -v`) or killed by the kernel (a container's memory limit).
//!
//! The limits read (Linux; each is skipped where it cannot be read or is unlimited):
//! - `MemAvailable` of `/proc/meminfo` (the kernel's estimate of memory available without
//!   swapping);
//! - `RLIMIT_AS` (`ulimit -v`) less the address space in use (`VmSize` of
//!   `/proc/self/status`);
//! - `RLIMIT_DATA` (`ulimit -d`) less the data segment in use (`VmData`);
//! - the cgroup's `memory.max` less its `memory.current` (cgroup v2, for this process's cgroup
//!   and every ancestor), or `memory.limit_in_bytes` less `memory.usage_in_bytes` (cgroup v1).
//!
//! Invariant: [`host_memory_limit`] is the smallest of these headrooms, named by its source.

use std::path::Path;

/// The tightest limit on further host allocations and where it comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostLimit {
    /// Bytes that may still be allocated (never negative).
    pub bytes: i64,
    /// What imposes it, in words (`MemAvailable in /proc/meminfo`, `RLIMIT_AS (ulimit -v)
    /// less the address space in use`, ...).
    pub source: String,
}

/// The tightest of the limits in the module docs; `None` where none can be read.
pub fn host_memory_limit() -> Option<HostLimit> {
    let mut limits = Vec::new();
    if let Some(b) = meminfo_field(&read("/proc/meminfo")?, "MemAvailable:") {
        limits.push(HostLimit {
            bytes: b,
            source: "MemAvailable in /proc/meminfo".into(),
        });
    }
    let status = read("/proc/self/status").unwrap_or_default();
    #[cfg(unix)]
    for (max, field, name) in [
        (
            // SAFETY: `r` is a valid `rlimit` to write to.
            rlimit(|r| unsafe { libc::getrlimit(libc::RLIMIT_AS, r) }),
            "VmSize:",
            "RLIMIT_AS (ulimit -v) less the address space in use",
        ),
        (
            // SAFETY: as above.
            rlimit(|r| unsafe { libc::getrlimit(libc::RLIMIT_DATA, r) }),
            "VmData:",
            "RLIMIT_DATA (ulimit -d) less the data segment in use",
        ),
    ] {
        if let (Some(max), Some(used)) = (max, meminfo_field(&status, field)) {
            limits.push(HostLimit {
                bytes: max.saturating_sub(used).max(0),
                source: name.into(),
            });
        }
    }
    if let Some(l) = cgroup_headroom(
        Path::new("/"),
        &read("/proc/self/cgroup").unwrap_or_default(),
    ) {
        limits.push(l);
    }
    limits.into_iter().min_by_key(|l| l.bytes)
}

#[doc(hidden)]
pub fn read(p: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

/// The value of `field` (`MemAvailable:`, `VmSize:`) in `/proc` text, in bytes (`kB` units).
#[doc(hidden)]
pub fn meminfo_field(text: &str, field: &str) -> Option<i64> {
    let line = text.lines().find(|l| l.starts_with(field))?;
    let kib: i64 = line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// The soft limit `get` reads (a `getrlimit` call on the `rlimit` it is given), bytes; `None`
/// when unlimited or unreadable.
#[cfg(unix)]
fn rlimit(get: impl FnOnce(&mut libc::rlimit) -> libc::c_int) -> Option<i64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    if get(&mut r) != 0 || r.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    i64::try_from(r.rlim_cur).ok()
}

/// The smallest headroom (limit less usage) of the cgroups of `/proc/self/cgroup` text
/// `cgroups`, with `root` the file system root (a test passes a directory of its own).
/// cgroup v2 (`0::/path`): `memory.max` less `memory.current` of the cgroup and each ancestor;
/// cgroup v1 (`N:memory:/path`): `memory.limit_in_bytes` less `memory.usage_in_bytes`.
pub fn cgroup_headroom(root: &Path, cgroups: &str) -> Option<HostLimit> {
    let num = |p: &Path| -> Option<i64> { read(p)?.trim().parse().ok() };
    let mut best: Option<HostLimit> = None;
    let mut consider = |bytes: i64, file: &Path| {
        if best.as_ref().is_none_or(|b| bytes < b.bytes) {
            best = Some(HostLimit {
                bytes: bytes.max(0),
                source: format!(
                    "the cgroup's memory limit ({}) less its usage",
                    file.display()
                ),
            });
        }
    };
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(ctrl), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let rel = path.trim_start_matches('/');
        if ctrl.is_empty() {
            let base = root.join("sys/fs/cgroup");
            let mut dir = base.join(rel);
            loop {
                let max = dir.join("memory.max");
                if let (Some(m), Some(c)) = (num(&max), num(&dir.join("memory.current"))) {
                    consider(m.saturating_sub(c), &max);
                }
                if dir == base || !dir.pop() {
                    break;
                }
            }
        } else if ctrl.split(',').any(|c| c == "memory") {
            let dir = root.join("sys/fs/cgroup/memory").join(rel);
            let max = dir.join("memory.limit_in_bytes");
            // v1 reports "no limit" as a huge number (near i64::MAX rounded to pages).
            if let (Some(m), Some(u)) = (num(&max), num(&dir.join("memory.usage_in_bytes"))) {
                if m < (1 << 62) {
                    consider(m.saturating_sub(u), &max);
                }
            }
        }
    }
    best
}
