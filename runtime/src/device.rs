//! Device profiles by name, and the `cpu` profile measured on this machine.
//!
//! [`resolve`] maps a name to an [`ebb_plan::device::DeviceProfile`]: the built-in accelerator
//! profiles and `custom:` specifications come from `ebb_plan::device`; `cpu` is calibrated here
//! by three short measurements on the executor's thread pool, about 0.3 s in all:
//! * matrix FLOP/s: an `f32` GEMM of 512³ (2·512³ FLOPs), row blocks in parallel through
//!   `matrixmultiply`, as the executor's `dot_general` runs (`bf16` is computed in `f32`, so
//!   the half rate is the same);
//! * vector FLOP/s: `y = a·x + y` over cache-resident slices (2 FLOPs per element);
//! * memory bandwidth: a parallel copy of 64 MiB (bytes read + written per second); the host
//!   link is the same copy counted once (a swap on the CPU copies into the host pool).
//!
//! Each figure is the best of three runs. The profile is cached as JSON in
//! `$EBB_CACHE_DIR`, else `$XDG_CACHE_HOME/ebb`, else `~/.cache/ebb`, one file per thread count
//! and build (`cpu-profile-release-2t.json`), so that dev and release builds, or runs with
//! another `RAYON_NUM_THREADS`, do not measure again in turn; a cache that cannot be written is
//! skipped.

use ebb_plan::device::{DeviceError, DeviceId, DeviceProfile};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Instant;

/// The cached measurement.
#[derive(Serialize, Deserialize)]
struct Cached {
    /// Threads of the pool it was measured with.
    threads: usize,
    /// `release` or `dev`: the vector loop's speed depends on how this crate was built.
    build: String,
    profile: DeviceProfile,
}

/// The build kind the cache is keyed by.
fn build_kind() -> &'static str {
    if cfg!(debug_assertions) {
        "dev"
    } else {
        "release"
    }
}

/// The profile named `name`: `cpu` (measured, cached; see the module docs), a built-in
/// accelerator profile, or `custom:…`.
///
/// # Errors
/// As [`DeviceProfile::named`] for names other than `cpu`.
pub fn resolve(name: &str) -> Result<DeviceProfile, DeviceError> {
    if DeviceId::from(name) == DeviceId::Cpu {
        Ok(cpu())
    } else {
        DeviceProfile::named(name)
    }
}

/// The `cpu` profile: cached, else measured now (and cached).
pub fn cpu() -> DeviceProfile {
    cpu_cached_in(ebb_codegen::disk_cache::cache_dir().as_deref())
}

/// The `cpu` profile cached in `dir` (the file for this build and thread count; see the module
/// docs), else measured now and cached there; `None`: measured, not cached.
pub fn cpu_cached_in(dir: Option<&Path>) -> DeviceProfile {
    let threads = rayon::current_num_threads();
    let path = dir.map(|d| d.join(cache_file(threads)));
    if let Some(p) = &path {
        if let Some(c) = std::fs::read_to_string(p)
            .ok()
            .and_then(|t| serde_json::from_str::<Cached>(&t).ok())
        {
            if c.threads == threads
                && c.build == build_kind()
                && c.profile.is_valid()
                && c.profile.name == DeviceId::Cpu
            {
                return c.profile;
            }
        }
    }
    let mut profile = calibrate_cpu();
    if let Some(p) = &path {
        let cached = Cached {
            threads,
            build: build_kind().to_string(),
            profile: profile.clone(),
        };
        if write_cache(p, &cached).is_ok() {
            profile.source = format!("{} (cached in {})", profile.source, p.display());
        }
    }
    profile
}

/// Measures the `cpu` profile now (no cache; see the module docs).
pub fn calibrate_cpu() -> DeviceProfile {
    let matrix = best_of_3(gemm_flops);
    let vector = best_of_3(axpy_flops);
    let copy = best_of_3(copy_bytes_per_s);
    DeviceProfile {
        name: DeviceId::Cpu,
        matrix_flops: matrix,
        matrix_half_flops: matrix,
        vector_flops: vector,
        memory_bandwidth: 2.0 * copy,
        link_bandwidth: copy,
        memory_bytes: mem_total_bytes().unwrap_or(0),
        source: format!(
            "measured on this machine ({} threads: 512³ f32 GEMM, axpy, 64 MiB copy)",
            rayon::current_num_threads()
        ),
    }
}

fn best_of_3(f: fn() -> f64) -> f64 {
    let x = (0..3).map(|_| f()).fold(0.0f64, f64::max);
    if x.is_finite() && x > 0.0 {
        x
    } else {
        1e9
    }
}

/// FLOP/s of a 512³ `f32` GEMM split into row blocks across the pool.
fn gemm_flops() -> f64 {
    const N: usize = 512;
    const ROWS: usize = 64;
    let a: Vec<f32> = (0..N * N).map(|i| (i % 7) as f32 * 0.25).collect();
    let b: Vec<f32> = (0..N * N).map(|i| (i % 5) as f32 * 0.5).collect();
    let mut c = vec![0.0f32; N * N];
    let t = Instant::now();
    c.par_chunks_mut(ROWS * N)
        .enumerate()
        .for_each(|(i, block)| {
            let rows = block.len() / N;
            let a = &a[i * ROWS * N..];
            // SAFETY: `a` holds at least `rows` rows of N, `b` is N×N, `block` is rows×N; all
            // row-major with the strides given, and `block` does not alias the inputs.
            unsafe {
                matrixmultiply::sgemm(
                    rows,
                    N,
                    N,
                    1.0,
                    a.as_ptr(),
                    N as isize,
                    1,
                    b.as_ptr(),
                    N as isize,
                    1,
                    0.0,
                    block.as_mut_ptr(),
                    N as isize,
                    1,
                )
            }
        });
    let s = t.elapsed().as_secs_f64();
    std::hint::black_box(&c);
    2.0 * (N * N * N) as f64 / s
}

/// FLOP/s of `y = a·x + y` over 16 Ki-element slices, 64 passes, one slice per task.
fn axpy_flops() -> f64 {
    const LEN: usize = 16 << 10;
    const PASSES: usize = 64;
    let tasks = rayon::current_num_threads() * 4;
    let x = vec![1.0f32; LEN];
    let mut ys = vec![vec![0.5f32; LEN]; tasks];
    let t = Instant::now();
    ys.par_iter_mut().for_each(|y| {
        for _ in 0..PASSES {
            for (y, x) in y.iter_mut().zip(&x) {
                *y += 0.999 * *x;
            }
            std::hint::black_box(&mut *y);
        }
    });
    let s = t.elapsed().as_secs_f64();
    2.0 * (LEN * PASSES * tasks) as f64 / s
}

/// Bytes/s copied by a parallel copy of 64 MiB (each byte read once and written once).
fn copy_bytes_per_s() -> f64 {
    const LEN: usize = 16 << 20; // f32 elements: 64 MiB
    const CHUNK: usize = 1 << 18;
    let src = vec![1.0f32; LEN];
    let mut dst = vec![0.0f32; LEN];
    // Touch the destination first so page faults are not timed.
    dst.par_chunks_mut(CHUNK).for_each(|d| d.fill(2.0));
    let t = Instant::now();
    dst.par_chunks_mut(CHUNK)
        .zip(src.par_chunks(CHUNK))
        .for_each(|(d, s)| d.copy_from_slice(s));
    let s = t.elapsed().as_secs_f64();
    std::hint::black_box(&dst);
    (LEN * 4) as f64 / s
}

/// `MemTotal` of `/proc/meminfo`, bytes.
fn mem_total_bytes() -> Option<i64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The cache file of the `cpu` profile measured with `threads` threads by this build (see the
/// module docs).
fn cache_file(threads: usize) -> String {
    format!("cpu-profile-{}-{threads}t.json", build_kind())
}

/// Writes the cache through a temporary file in the same directory, renamed into place.
fn write_cache(path: &std::path::Path, c: &Cached) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir)?;
    // Unique per process and call: tests calibrate from several threads at once.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".cpu-profile.{}.{n}.tmp", std::process::id()));
    let text = serde_json::to_string_pretty(c).map_err(std::io::Error::other)?;
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
