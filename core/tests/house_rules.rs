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

/// The lock kinds are spelled once, in `core/src/kinds.rs`'s `lock_kinds!` table: no source of
/// core or of the bindings (Rust, Python, TypeScript) quotes a kind's name (`"fair_lock"`) or its
/// type name (`"FairLock"`) as a string but where listed below. The Node host takes the kinds'
/// numbers from the native `LockKind` enum and the Python host their names from `_native.KINDS`,
/// both made from the table.
#[test]
fn lock_kinds_are_spelled_only_in_their_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in [
        "core/src",
        "bindings-python/src",
        "bindings-python/python/crosslock",
        "bindings-node/src",
        "bindings-node/lib",
    ] {
        let mut stack = vec![root.join(dir)];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path
                    .extension()
                    .is_some_and(|e| e == "rs" || e == "py" || e == "ts")
                {
                    files.push(path);
                }
            }
        }
    }
    files.sort();
    // (file, literal): spellings that are not the lock-kind table's.
    let allowed = [
        // ObjectKind: what a *key* holds, the inspector's own table (a read-write lock's key is one
        // object with two lock kinds).
        ("core/src/inspect.rs", "fair_lock"),
        ("core/src/inspect.rs", "fenced_lock"),
        // The crosslock command's set of object kinds it lists (ObjectKind names).
        ("bindings-node/lib/cli.ts", "fenced_lock"),
        ("bindings-node/lib/cli.ts", "fair_lock"),
        (
            "bindings-python/python/crosslock/__main__.py",
            "fenced_lock",
        ),
        ("bindings-python/python/crosslock/__main__.py", "fair_lock"),
        // The permit struct's own Debug name.
        ("core/src/objects/permit_expirable_semaphore.rs", "Permit"),
        // The Python classes' names, and the package's exports (its type names as Python has them).
        ("bindings-python/src/lock.rs", "Lock"),
        ("bindings-python/python/crosslock/", "Lock"),
    ];
    let mut spelled = Vec::new();
    for &kind in crosslock::LockKind::ALL {
        let name = kind.as_str();
        let type_name = format!("{kind:?}");
        // "lock" is also the noun every message and check uses ("a lock name must be …").
        let words: Vec<&str> = if name == "lock" {
            vec![&type_name]
        } else {
            vec![name, &type_name]
        };
        for file in &files {
            let shown = file.strip_prefix(&root).unwrap().display().to_string();
            if shown == "core/src/kinds.rs" {
                continue;
            }
            let text = std::fs::read_to_string(file).unwrap();
            for (i, line) in text.lines().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") || code.starts_with('*') || code.starts_with('#') {
                    continue; // prose
                }
                for word in &words {
                    let quoted = [format!("\"{word}\""), format!("'{word}'")];
                    if !quoted.iter().any(|q| line.contains(q.as_str())) {
                        continue;
                    }
                    let python_export = shown.ends_with(".py")
                        && (code.starts_with('"') || code.starts_with("__all__"));
                    let listed = allowed.iter().any(|(f, w)| {
                        w == word && (shown == *f || (f.ends_with('/') && shown.starts_with(f)))
                    });
                    let from_table = line.contains("KINDS[");
                    if !(listed || from_table || (python_export && *word == type_name)) {
                        spelled.push(format!("{shown}:{}: {}", i + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(
        files.len() > 60,
        "found only {} source files: is the scan broken?",
        files.len()
    );
    assert!(
        spelled.is_empty(),
        "lock kinds spelled outside core/src/kinds.rs (take them from the table: LockKind, the \
         native LockKind enum, _native.KINDS):\n{}",
        spelled.join("\n")
    );
}

/// Redisson's key and channel names are built in one module, `core/src/layout.rs` (in
/// docs/protocol.md's order): no other source of core quotes a `redisson_…` name or brace-tags a
/// name itself (`{{{name}}}` in a format string). Unit tests, which spell the names they expect,
/// and comments are not looked at.
#[test]
fn redisson_names_are_built_only_in_layout() {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    files.sort();
    let mut built = Vec::new();
    for file in &files {
        if file.ends_with("layout.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (i, line) in text.lines().enumerate() {
            if line.contains("#[cfg(test)]") {
                break; // unit tests sit at the end of a file
            }
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            if line.contains("\"redisson_") || line.contains("{{{") {
                built.push(format!("{}:{}: {}", file.display(), i + 1, code));
            }
        }
    }
    assert!(
        files.len() > 40,
        "found only {} source files: is the scan broken?",
        files.len()
    );
    assert!(
        built.is_empty(),
        "Redisson names built outside core/src/layout.rs (add a builder there):\n{}",
        built.join("\n")
    );
}
