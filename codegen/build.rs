//! Computes `EBB_CODEGEN_DIGEST`: a digest (FNV-1a, 64 bits) of the code generator's sources,
//! part of the on-disk kernel cache's key (`src/disk_cache.rs`), so that a build whose
//! lowering differs never loads kernels another build compiled.

use std::path::Path;

fn main() {
    let src = Path::new("src");
    println!("cargo:rerun-if-changed=src");
    let mut files: Vec<_> = std::fs::read_dir(src)
        .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "rs"));
    files.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in files {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        let bytes = std::fs::read(&p).unwrap_or_default();
        for b in name.unwrap_or_default().bytes().chain(bytes) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    println!("cargo:rustc-env=EBB_CODEGEN_DIGEST={h:016x}");
}
