//! House rules that no compiler lint keeps: every public async method of the crate documents its
//! cancel safety (a `# Cancel safety` section in its doc comment), every public item shows an
//! example (a doctest, compiled by `cargo test --doc`), every module imports only modules of
//! its own layer or a lower one ([`LAYERS`]), and every fan-out of calls goes through
//! `transport::fanout::at_most_in_flight` ([`FAN_OUTS`]); and docs tell core's tables as they are
//! (connect defaults, instruments).

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
        (
            "core/src/objects/permit_expirable_semaphore/permit.rs",
            "Permit",
        ),
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

/// The layers of `core/src`, lowest first. A module may use modules of its own layer or of a
/// lower one, never of a higher one: read bottom-up, each layer needs only what is below it.
///
/// - **leaf**: helpers, tables and names that need nothing of the crate but each other.
/// - **runtime**: the process runtime (built on first use, rebuilt after `fork()`).
/// - **transport**: everything that talks to Redis (connections, topologies, pub/sub, lanes).
/// - **session + engine**: one layer. A session's connected state (`Ctx`) owns the engine's
///   tables (holds, gates, settling) and starts its renewal, and every engine operation works
///   on a `Ctx`: the two are one unit, split in files, not in layers.
/// - **client**: the public facade (connect, close, listeners).
/// - **objects**: one file per Redisson object; their factories are `impl Client` blocks.
/// - **observe**: `inspect` and `watch`, which read every object's keys.
/// - **host**: what bindings and embedders use (`host`, `ffi`).
const LAYERS: &[(&str, &[&str])] = &[
    (
        "leaf",
        &[
            "util",
            "error",
            "owner",
            "kinds",
            "layout",
            "limits",
            "naming",
            "redact",
            "scripts",
            "options",
            "telemetry",
        ],
    ),
    ("runtime", &["runtime"]),
    ("transport", &["transport"]),
    ("session + engine", &["session", "engine"]),
    ("client", &["client"]),
    ("objects", &["objects"]),
    ("observe", &["inspect", "watch"]),
    ("host", &["host", "ffi"]),
];

/// Imports against the order that are allowed, each with its reason: (file, module it names).
const EXCEPTIONS: &[(&str, &str, &str)] = &[];

/// The top-level module a `crate::` path names: `crate::engine::holds::Holds` is `engine`;
/// `crate::Owner` (a root re-export) is the module `lib.rs` re-exports it from. `None` for a
/// macro (`crate::lock_kinds!`, exported at the root) and for what `lib.rs` re-exports from
/// another crate.
fn named_module(name: &str, root: &[(String, String)]) -> Option<String> {
    if name.chars().next().is_some_and(char::is_lowercase) {
        return Some(name.to_owned());
    }
    root.iter()
        .find(|(item, _)| item == name)
        .map(|(_, module)| module.clone())
}

/// What `lib.rs` re-exports from the crate's own modules, as (item, module): `pub use
/// engine::holds::{LostLock, ..};` gives `("LostLock", "engine")`. What it re-exports from other
/// crates (`tokio_util`) is left out.
fn root_reexports(lib: &str) -> Vec<(String, String)> {
    let declared: Vec<&str> = lib
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let line = line
                .strip_prefix("pub ")
                .or_else(|| line.strip_prefix("pub(crate) "))
                .unwrap_or(line);
            line.strip_prefix("mod ")?.strip_suffix(';')
        })
        .collect();
    let mut out = Vec::new();
    for line in lib.lines() {
        let Some(path) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let path = path.trim_end_matches(';');
        let module = path.split("::").next().unwrap().to_owned();
        if !declared.contains(&module.as_str()) {
            continue;
        }
        let items = match path.split_once('{') {
            Some((_, list)) => list.trim_end_matches('}').to_owned(),
            None => path.rsplit("::").next().unwrap().to_owned(),
        };
        for item in items.split(',') {
            let item = item.trim();
            let item = item.rsplit(" as ").next().unwrap();
            if !item.is_empty() {
                out.push((item.to_owned(), module.clone()));
            }
        }
    }
    out
}

/// Every `crate::` path in `code`, as the first name after `crate::` (each name of a
/// `crate::{a, b::C}` group).
fn crate_paths(code: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':' || c == '$') {
            continue; // `$crate::`, `some_crate::`, `a::crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            let mut depth = 0;
            let mut start = 0;
            let list = &group[..end];
            for (i, c) in list.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(ident(list[start..i].trim()));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            out.push(ident(list[start..].trim()));
        } else {
            let name = ident(rest);
            if !rest[name.len()..].starts_with('!') {
                out.push(name);
            }
        }
    }
    out.retain(|n| !n.is_empty());
    out
}

/// A file's code without comments and without its `#[cfg(test)]` module (tests may reach up).
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if trimmed == "#[cfg(test)]"
            && lines
                .get(i + 1)
                .is_some_and(|next| next.trim_start().starts_with("mod "))
        {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// The layer of `core/src` module `module`.
fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

/// Every import against [`LAYERS`] in the files under `src`, as `file: module (layer) imports
/// module (layer)`, plus every module that is in no layer.
fn layering_violations(src: &Path) -> (Vec<String>, usize) {
    let mut files = Vec::new();
    sources(src, &mut files);
    files.sort();
    let root = root_reexports(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let mut violations = Vec::new();
    let mut edges = 0;
    for file in &files {
        let relative = file
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if relative == "lib.rs" {
            continue;
        }
        let own = relative
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_owned();
        let Some(own_layer) = layer_of(&own) else {
            violations.push(format!(
                "{relative}: module `{own}` is in no layer of LAYERS"
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for name in crate_paths(&code_of(&text)) {
            let Some(module) = named_module(&name, &root) else {
                continue;
            };
            if module == own {
                continue;
            }
            edges += 1;
            let Some(layer) = layer_of(&module) else {
                violations.push(format!(
                    "{relative}: `crate::{name}` names `{module}`, which is in no layer of LAYERS"
                ));
                continue;
            };
            let excepted = EXCEPTIONS
                .iter()
                .any(|(f, m, _)| *f == relative && *m == module);
            if layer > own_layer && !excepted {
                violations.push(format!(
                    "{relative}: `{own}` ({}) uses `crate::{name}` of `{module}` ({}), a layer above it",
                    LAYERS[own_layer].0, LAYERS[layer].0
                ));
            }
        }
    }
    violations.sort();
    violations.dedup();
    (violations, edges)
}

#[test]
fn every_module_imports_only_its_own_layer_or_below() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (violations, edges) = layering_violations(&src);
    assert!(
        edges > 100,
        "found only {edges} imports: is the scan broken?"
    );
    assert!(
        violations.is_empty(),
        "imports against the layer order (util/error/.. -> runtime -> transport -> session + \
         engine -> client -> objects -> observe -> host; see LAYERS in core/tests/house_rules.rs):\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_layering_scan_reads_grouped_and_root_paths() {
    let root = root_reexports(
        "mod engine;\nmod owner;\npub use engine::holds::{LostLock, LostReason};\n\
         pub use owner::Owner;\npub use tokio_util::sync::CancellationToken;\n",
    );
    assert_eq!(named_module("CancellationToken", &root), None);
    assert_eq!(named_module("Owner", &root).as_deref(), Some("owner"));
    assert_eq!(named_module("LostReason", &root).as_deref(), Some("engine"));
    let code = code_of(
        "use crate::{client::Client, error::{Error, Result}};\n\
         // use crate::objects::ms;\n\
         let x = crate::runtime::pid(); crate::lock_kinds!(m); $crate::kinds::K;\n\
         #[cfg(test)]\nmod tests {\n    use crate::watch::Watch;\n}\n",
    );
    assert_eq!(crate_paths(&code), ["client", "error", "runtime"]);
}

/// The futures combinators that await many calls together. A fan-out of Redis calls goes through
/// `transport::fanout::at_most_in_flight`, which polls its parts with no lane: polled on a blocking caller's
/// lane, each part would make its round trip in turn.
const FAN_OUTS: &[&str] = &[
    "join_all",
    "try_join_all",
    "select_all",
    "FuturesUnordered",
    "FuturesOrdered",
    "join!",
    "try_join!",
];

/// Where those combinators are allowed outside `at_most_in_flight`, each with its reason: (file,
/// combinator, why no part of it can take a lane).
const FAN_OUT_EXCEPTIONS: &[(&str, &str, &str)] = &[
    (
        "transport/fanout.rs",
        "FuturesUnordered",
        "at_most_in_flight itself, inside ambient::no_lane",
    ),
    (
        "transport/fanout.rs",
        "join_all",
        "per_group: one future per node (a cluster master; the one server), each an \
         at_most_in_flight, inside ambient::no_lane (the renewal rounds and close())",
    ),
    (
        "session.rs",
        "try_join!",
        "connects (the command and pub/sub connections), no script",
    ),
    (
        "transport/sentinel.rs",
        "join_all",
        "asks the sentinels on their own connections, never Conn::eval",
    ),
    (
        "objects/multi_lock/guard.rs",
        "select_all",
        "waits on the parts' lost tokens, no Redis call",
    ),
];

#[test]
fn every_fan_out_goes_through_at_most_in_flight() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut found = Vec::new();
    let mut seen = 0;
    for file in &files {
        let relative = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for combinator in FAN_OUTS {
            let named = code.match_indices(combinator).any(|(at, _)| {
                // A whole name: `join!` is not `try_join!`.
                !code[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            if !named {
                continue;
            }
            seen += 1;
            let excepted = FAN_OUT_EXCEPTIONS
                .iter()
                .any(|(f, c, _)| *f == relative && c == combinator);
            if !excepted {
                found.push(format!("{relative}: {combinator}"));
            }
        }
    }
    assert!(
        seen >= FAN_OUT_EXCEPTIONS.len(),
        "found only {seen} uses of the fan-out combinators: is the scan broken?"
    );
    assert!(
        found.is_empty(),
        "calls awaited together outside transport::fanout::at_most_in_flight (which polls them with no \
         lane; a blocking caller's lane makes them one after another), or add an exception \
         saying why no part can take a lane:\n{}",
        found.join("\n")
    );
}

/// A file's prose as one line: each line without its indentation and comment markers (`///`,
/// `//!`, `//`, `/**`, `*`, `#`), whitespace runs made one space, so a phrase may wrap.
fn prose_of(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut line = line.trim_start();
        for marker in ["//!", "///", "//", "/**", "*/", "*", "#"] {
            if let Some(rest) = line.strip_prefix(marker) {
                line = rest;
                break;
            }
        }
        for word in line.split_whitespace() {
            out.push_str(word);
            out.push(' ');
        }
    }
    out
}

/// Every connect default written in text (core's rustdoc, the bindings' docstrings and doc
/// comments, docs/api.md, the README) says what core's `ClientOptions::default()` (and
/// `ReplicaSync::DEFAULT_TIMEOUT`) holds, so none can drift from core's value; and the bindings'
/// signatures spell none of their own (they take core's: `None` / `undefined` → core's default,
/// `_native.CONNECT_DEFAULTS`, `clientDefaults()`).
#[test]
fn written_connect_defaults_are_cores() {
    use std::time::Duration;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let d = crosslock::ClientOptions::default();
    let durations = [
        ("connect_timeout", d.connect_timeout),
        ("response_timeout", d.response_timeout),
        ("watchdog_timeout", d.watchdog_timeout),
        ("fair_lock_wait_timeout", d.fair_lock_wait_timeout),
        (
            "replica_wait_timeout",
            crosslock::ReplicaSync::DEFAULT_TIMEOUT,
        ),
        ("renewal", d.watchdog_timeout / 3),
    ];
    // Seconds as prose writes them: `30`, `0.5`.
    let seconds = |d: Duration| {
        let s = d.as_secs_f64();
        if s.fract() == 0.0 {
            format!("{}", s as u64)
        } else {
            format!("{s}")
        }
    };
    let mut values: Vec<(String, String)> = Vec::new();
    for (name, value) in durations {
        values.push((format!("{{{name}:s}}"), seconds(value)));
        values.push((
            format!("{{{name}:py}}"),
            format!("{:?}", value.as_secs_f64()),
        ));
        values.push((format!("{{{name}:ms}}"), value.as_millis().to_string()));
        if value.as_secs() % 60 == 0 && value.subsec_nanos() == 0 {
            values.push((
                format!("{{{name}:min}}"),
                (value.as_secs() / 60).to_string(),
            ));
        }
    }
    values.push((
        "{watchdog_batch_size}".into(),
        d.watchdog_batch_size.to_string(),
    ));
    values.push(("{lanes}".into(), d.lanes.name().into()));
    values.push(("{lanes:rust}".into(), format!("{:?}", d.lanes)));
    // Each default where it is written down: (file, phrases).
    let written: &[(&str, &[&str])] = &[
        (
            "core/src/options.rs",
            &[
                "waits out a Redis outage before failing the same way. Default {connect_timeout:s} s.",
                "How long one command may take before failing. Default {response_timeout:s} s",
                "renewed every third of it. Default {watchdog_timeout:s} s",
                "How many locks one renewal script renews. Default {watchdog_batch_size}.",
                "consider it dead and skip it. Default {fair_lock_wait_timeout:s} s",
                "Default [`Lanes::{lanes:rust}`]",
                "`replicaWaitTimeout`): {replica_wait_timeout:s} s.",
            ],
        ),
        (
            "core/src/objects/lock.rs",
            &[
                "a {watchdog_timeout:s} s lease (the client's `watchdog_timeout`) renewed every {renewal:s} s",
            ],
        ),
        (
            "core/src/objects/group_lock.rs",
            &["the watchdog keeps it ({watchdog_timeout:s} s renewed every {renewal:s} s)"],
        ),
        (
            "core/src/objects/fair_lock.rs",
            &[
                "`fair_lock_wait_timeout` (Redisson's `fairLockWaitTimeout`, {fair_lock_wait_timeout:min} min)",
            ],
        ),
        (
            "bindings-python/python/crosslock/client.py",
            &[
                "connect_timeout: seconds connecting may take (default {connect_timeout:py}).",
                "response_timeout: seconds one command may take (default {response_timeout:py}).",
                "renewed every third of it (default {watchdog_timeout:py}).",
                "skip it as dead (default {fair_lock_wait_timeout:py}).",
                "replica_wait_timeout: seconds to wait for those replicas (default {replica_wait_timeout:py}).",
                "``\"{lanes}\"`` (the default",
            ],
        ),
        (
            "bindings-python/python/crosslock/_lockable.py",
            &["kept by the watchdog ({watchdog_timeout:s} s, renewed every {renewal:s} s"],
        ),
        (
            "bindings-python/python/crosslock/fair_lock.py",
            &["``fair_lock_wait_timeout``, {fair_lock_wait_timeout:min} minutes by default"],
        ),
        (
            "bindings-node/lib/client.ts",
            &[
                "rejects with `RedisUnavailableError` (default {connect_timeout:ms}).",
                "How long one command may take (default {response_timeout:ms}).",
                "renewed every third of it (default {watchdog_timeout:ms},",
                "How many locks one renewal script renews (default {watchdog_batch_size}).",
                "skip it as dead (default {fair_lock_wait_timeout:ms},",
                "How long to wait for those replicas, in milliseconds (default {replica_wait_timeout:ms}).",
                "`'{lanes}'` (the default)",
                "expire after their lease ({watchdog_timeout:s} s with the watchdog)",
            ],
        ),
        (
            "bindings-node/lib/lockable.ts",
            &["(a {watchdog_timeout:s} s lease renewed every {renewal:s} s by default)"],
        ),
        (
            "bindings-node/lib/fair_lock.ts",
            &["`fairLockWaitTimeout`, {fair_lock_wait_timeout:min} minutes by default"],
        ),
        (
            "docs/api.md",
            &[
                "| connect timeout (default {connect_timeout:s} s) |",
                "| command timeout (default {response_timeout:s} s) |",
                "| watchdog timeout (default {watchdog_timeout:s} s) |",
                "(off by default; at most {replica_wait_timeout:s} s by default)",
                "| fair-lock wait (default {fair_lock_wait_timeout:min} min) |",
                ".lanes(Lanes::SyncOnly)`: `{lanes:rust}` (default)",
                "`connect(url, lanes=\"sync\")`: `\"{lanes}\"` (default)",
                "`connect(url, { lanes: 'none' })`: `'{lanes}'` (default)",
            ],
        ),
        (
            "README.md",
            &[
                "Without a lease a lock lives {watchdog_timeout:s} s and is renewed every {renewal:s} s",
                "bounded by the response timeout** (default {response_timeout:s} s)",
                "The `lanes` option chooses who gets lanes: `{lanes}` (the default)",
            ],
        ),
    ];
    let mut wrong = Vec::new();
    for (file, phrase) in written
        .iter()
        .flat_map(|(file, phrases)| phrases.iter().map(move |p| (file, p)))
    {
        let mut expected = (*phrase).to_owned();
        for (key, value) in &values {
            expected = expected.replace(key.as_str(), value);
        }
        for (at, _) in phrase.match_indices('{') {
            let key = phrase[at..].split_inclusive('}').next().unwrap();
            let placeholder = key.ends_with('}')
                && key[1..key.len() - 1]
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_' || c == ':');
            assert!(
                !placeholder || values.iter().any(|(k, _)| k == key),
                "{key} in {phrase:?} is no placeholder this test knows"
            );
        }
        let text = prose_of(&std::fs::read_to_string(root.join(file)).unwrap());
        if !text.contains(prose_of(&expected).trim_end()) {
            wrong.push(format!("{file}: \"{expected}\""));
        }
    }
    assert!(
        wrong.is_empty(),
        "connect defaults written otherwise than core's ClientOptions::default() says (or the \
         phrase moved: update this list):\n{}",
        wrong.join("\n")
    );
    // Signatures take core's defaults: no number after a timeout keyword's `=`.
    let mut spelled = Vec::new();
    for file in [
        "bindings-python/src/client.rs",
        "bindings-python/python/crosslock/client.py",
        "bindings-python/python/crosslock/_native.pyi",
    ] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        for (i, line) in text.lines().enumerate() {
            for (at, _) in line.match_indices("_timeout") {
                let rest = line[at + "_timeout".len()..].trim_start();
                let rest = rest.strip_prefix(": float").unwrap_or(rest).trim_start();
                if let Some(value) = rest.strip_prefix('=')
                    && value.trim_start().starts_with(|c: char| c.is_ascii_digit())
                {
                    spelled.push(format!("{file}:{}: {}", i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        spelled.is_empty(),
        "connect defaults spelled in a binding's signature (take core's: None there, \
         _native.CONNECT_DEFAULTS in the package):\n{}",
        spelled.join("\n")
    );
}

/// docs/api.md's table of instruments says what core's table ([`Instrument::ALL`]) says: every
/// instrument, once, with its kind, unit and attributes, in the table's order.
///
/// [`Instrument::ALL`]: crosslock::telemetry::Instrument::ALL
#[test]
fn the_documented_instruments_are_cores() {
    use crosslock::telemetry::{Instrument, InstrumentKind};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let api = std::fs::read_to_string(root.join("docs/api.md")).unwrap();
    // The section's own lines: from its heading to the next one.
    let section = api
        .split("\n## Metrics\n")
        .nth(1)
        .expect("docs/api.md has a Metrics section");
    let section = section.split("\n#").next().unwrap();
    let documented: Vec<Vec<String>> = section
        .lines()
        .filter(|l| l.starts_with("| `crosslock."))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .take(4)
                .map(|cell| cell.trim().to_owned())
                .collect()
        })
        .collect();
    let core: Vec<Vec<String>> = Instrument::ALL
        .iter()
        .map(|i| {
            let unit = match i.unit() {
                "s" => "s".to_owned(),
                annotation => format!("`{annotation}`"),
            };
            let kind = match i.kind() {
                InstrumentKind::Histogram => "histogram",
                InstrumentKind::Counter => "counter",
                InstrumentKind::UpDownCounter => "up-down counter",
            };
            let attributes = match i.attributes() {
                [] => "(none)".to_owned(),
                keys => keys
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            vec![format!("`{}`", i.name()), kind.to_owned(), unit, attributes]
        })
        .collect();
    assert_eq!(
        documented, core,
        "docs/api.md's Metrics table against core's"
    );
}

/// The repository's own text files (docs, sources, scripts), build outputs and dependencies left
/// out.
fn repository_texts(dir: &Path, out: &mut Vec<PathBuf>) {
    const SKIP: &[&str] = &[
        "target",
        "node_modules",
        "dist",
        "results-raw",
        "__pycache__",
    ];
    const TEXT: &[&str] = &[
        "md", "rs", "py", "pyi", "ts", "mjs", "cjs", "toml", "json", "sh", "txt", "java", "yml",
    ];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with('.') && name != ".ci" {
            continue;
        }
        if path.is_dir() {
            if !SKIP.contains(&name.as_str()) {
                repository_texts(&path, out);
            }
        } else if name == "dev"
            || path
                .extension()
                .is_some_and(|e| TEXT.contains(&e.to_string_lossy().as_ref()))
        {
            out.push(path);
        }
    }
}

#[test]
fn no_merge_conflict_is_left_in_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    repository_texts(root, &mut files);
    assert!(
        files.len() > 100,
        "the walk found only {} files",
        files.len()
    );
    let mut left = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            if line.starts_with("<<<<<<< ") || line.starts_with(">>>>>>> ") {
                left.push(format!("{}:{}: {line}", file.display(), i + 1));
            }
        }
    }
    assert!(
        left.is_empty(),
        "merge conflict markers left in:\n{}",
        left.join("\n")
    );
}
