//! The workspace builds each library once for the tests: every member crate with a library
//! sets `[lib] test = false` (its tests live in its integration binary, `tests/main.rs`), so
//! `cargo test` never compiles a library a second time as a unit-test harness — and so no
//! `#[cfg(test)]` code may sit in a library's `src/`, where it would compile to nothing and
//! never run.

use std::path::{Path, PathBuf};

/// The workspace root (this crate's parent directory).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap()
}

/// The member directories named by the root `Cargo.toml`'s `members = [...]`.
fn members() -> Vec<String> {
    let toml = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let line = toml
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("members = [...] in the root Cargo.toml");
    let list = &line[line.find('[').unwrap() + 1..line.rfind(']').unwrap()];
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_library_is_built_twice_and_no_unit_test_hides_in_src() {
    let members = members();
    assert!(members.len() >= 10, "members: {members:?}");
    for m in &members {
        let dir = root().join(m);
        if !dir.join("src/lib.rs").exists() {
            continue;
        }
        let toml = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let lib = toml
            .split("\n[")
            .find(|s| s.starts_with("lib]"))
            .unwrap_or_else(|| panic!("{m}/Cargo.toml: no [lib] section with `test = false`"));
        assert!(
            lib.lines().any(|l| l.trim() == "test = false"),
            "{m}/Cargo.toml: [lib] lacks `test = false` (put the tests in {m}/tests/)"
        );
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            assert!(
                !text.contains("#[cfg(test)]"),
                "{}: #[cfg(test)] in a library that builds no unit tests: move the tests to {m}/tests/",
                f.display()
            );
        }
    }
}
