//! House rules that no compiler lint keeps: every public async method of the crate documents its
//! cancel safety (a `# Cancel safety` section in its doc comment), and every public item shows an
//! example (a doctest, compiled by `cargo test --doc`).

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_public_async_method_documents_its_cancel_safety() {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    files.sort();
    let mut missing = Vec::new();
    let mut seen = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.trim_start().starts_with("pub async fn ") {
                continue;
            }
            seen += 1;
            // The doc comment and attributes directly above the signature.
            let documented = lines[..i]
                .iter()
                .rev()
                .take_while(|l| {
                    let l = l.trim_start();
                    l.starts_with("///") || l.starts_with("#[")
                })
                .any(|l| l.trim_start().trim_start_matches('/').trim() == "# Cancel safety");
            if !documented {
                missing.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        seen > 20,
        "found only {seen} public async methods: is the scan broken?"
    );
    assert!(
        missing.is_empty(),
        "public async methods without a `# Cancel safety` section:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_public_item_has_an_example() {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    files.sort();
    let starts = [
        "pub fn ",
        "pub async fn ",
        "pub const fn ",
        "pub struct ",
        "pub enum ",
        "pub trait ",
        "pub type ",
        "pub const ",
    ];
    let mut missing = Vec::new();
    let mut seen = 0;
    for file in &files {
        // The binding helpers are hidden from the docs.
        if file.ends_with("ffi.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.contains("#[cfg(test)]") {
                break; // unit tests sit at the end of a file
            }
            let item = line.trim_start();
            // Macro templates: their documentation (and example) comes from each instantiation.
            if !starts.iter().any(|s| item.starts_with(s)) || item.contains('$') {
                continue;
            }
            let doc: Vec<&str> = lines[..i]
                .iter()
                .rev()
                .map(|l| l.trim_start())
                .take_while(|l| l.starts_with("///") || l.starts_with("#["))
                .collect();
            if doc.iter().any(|l| l.contains("doc(hidden)")) || item.starts_with("pub trait Sealed")
            {
                continue;
            }
            seen += 1;
            if !doc
                .iter()
                .any(|l| l.starts_with("///") && l.contains("```"))
            {
                missing.push(format!("{}:{}: {}", file.display(), i + 1, item));
            }
        }
    }
    assert!(
        seen > 150,
        "found only {seen} public items: is the scan broken?"
    );
    assert!(
        missing.is_empty(),
        "public items without an example in their docs:\n{}",
        missing.join("\n")
    );
}
