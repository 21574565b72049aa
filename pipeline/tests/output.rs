//! Tests of `output` (`pipeline/src/output.rs`).

use ebb_pipeline::output::*;
use std::fs;
use std::io;
use std::path::Path;

fn scratch(tag: &str) -> ebb_testkit::Scratch {
    ebb_testkit::scratch(&format!("output-{tag}"))
}

fn leftovers(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn error_chains_print_each_cause_once() {
    #[derive(Debug, thiserror::Error)]
    #[error("cannot read x.mlir: {source}")]
    struct Outer {
        source: io::Error,
    }
    let inner = io::Error::new(io::ErrorKind::NotFound, "No such file or directory");
    let e = anyhow::Error::new(Outer { source: inner }).context("import");
    assert_eq!(
        error_message(&e),
        "import: cannot read x.mlir: No such file or directory"
    );
    let plain = anyhow::anyhow!("root").context("top");
    assert_eq!(error_message(&plain), "top: root");
}

#[test]
fn replaces_regular_files_and_creates_new_ones() {
    let d = scratch("regular");
    let p = d.join("a.json");
    write_file(&p, b"one").unwrap();
    write_file(&p, b"two").unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"two");
    assert!(leftovers(&d).is_empty());
}

#[cfg(unix)]
#[test]
fn replaced_files_keep_their_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let d = scratch("perms");
    let p = d.join("a.json");
    fs::write(&p, "old").unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
    write_file(&p, b"new").unwrap();
    assert_eq!(
        fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o640
    );
}

#[cfg(unix)]
#[test]
fn writes_through_symlinks_and_refuses_dangling_ones() {
    let d = scratch("link");
    let real = d.join("real.txt");
    fs::write(&real, "old").unwrap();
    let link = d.join("link.txt");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    write_file(&link, b"new").unwrap();
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(fs::read(&real).unwrap(), b"new");
    let dangling = d.join("dangling.txt");
    std::os::unix::fs::symlink(d.join("nowhere"), &dangling).unwrap();
    let e = write_file(&dangling, b"x").unwrap_err();
    assert!(matches!(e, OutputError::DanglingLink { .. }), "{e}");
    assert!(leftovers(&d).is_empty());
}

#[test]
fn refuses_directories_and_devices() {
    let d = scratch("dir");
    let e = write_file(&d, b"x").unwrap_err();
    assert!(e.to_string().contains("a directory"), "{e}");
    #[cfg(unix)]
    {
        let e = write_file(Path::new("/dev/null"), b"x").unwrap_err();
        assert!(e.to_string().contains("/dev/null"), "{e}");
        assert!(e.to_string().contains("character device"), "{e}");
    }
}

#[test]
fn missing_directory_is_an_io_error_naming_the_path() {
    let p = Path::new("/nonexistent-ebb-dir/x.json");
    let e = write_file(p, b"x").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cannot write /nonexistent-ebb-dir/x.json"),
        "{e}"
    );
}
