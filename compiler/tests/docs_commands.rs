//! Tests that every `ebb` command shown in the README and in `docs/` still parses: each
//! command line of a code block (`ebb SUB ...`, or `cargo run ... --bin ebb -- SUB ...`) is
//! split as a shell would (`shlex`) and run as `ebb ARGS... --help`, which clap answers with
//! the subcommand's help (exit 0) only when every subcommand, flag and checked value before it
//! parses. Synopsis lines (`[--json]`, `A|B` alternatives) are skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Markdown files whose commands are checked: README.md and every page under docs/.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("docs/ is readable") {
            let p = e.expect("a directory entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The `ebb` argument lists of the command lines in `text`'s code blocks, with their line
/// numbers.
fn commands(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        if raw.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            continue;
        }
        let line = raw.trim();
        let (start, joined) = match pending.take() {
            Some((n, mut acc)) => {
                acc.push(' ');
                acc.push_str(line);
                (n, acc)
            }
            None => (i + 1, line.to_string()),
        };
        if let Some(cont) = joined.strip_suffix('\\') {
            pending = Some((start, cont.trim_end().to_string()));
            continue;
        }
        let joined = joined.trim_start_matches("$ ");
        let args = match joined.find("--bin ebb -- ") {
            Some(k) => &joined[k + "--bin ebb -- ".len()..],
            None => match joined.strip_prefix("ebb ") {
                Some(rest) => rest,
                None => continue,
            },
        };
        // A trailing comment (` # ...`) is not part of the command.
        let args = match args.find("  #").or_else(|| args.find(" # ")) {
            Some(k) => &args[..k],
            None => args,
        };
        let Some(words) = shlex::split(args) else {
            out.push((start, vec![format!("<unbalanced quotes: {args}>")]));
            continue;
        };
        let synopsis = words.iter().any(|w| {
            w.starts_with('[') || w.starts_with('(') || (w.contains('|') && !w.contains('='))
        });
        if !synopsis && !words.is_empty() {
            out.push((start, words));
        }
    }
    out
}

#[test]
fn every_command_in_the_readme_and_docs_parses() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("page is readable");
        for (line, words) in commands(&text) {
            let out = Command::new(env!("CARGO_BIN_EXE_ebb"))
                .args(&words)
                .arg("--help")
                .output()
                .expect("ebb runs");
            checked += 1;
            if !out.status.success() {
                failures.push(format!(
                    "{}:{line}: ebb {}\n{}",
                    page.display(),
                    words.join(" "),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    assert!(checked >= 20, "only {checked} commands found in the docs");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
