//! Connection names: every connection a client opens is named (`CLIENT SETNAME`) so that
//! `CLIENT LIST` tells which process it is, and the inspector can name the process behind a
//! holder string.
//!
//! A client behind Sentinel names its connections to the sentinels alike.
//!
//! A name is `<base>-<language>-<pid>-<id8>`: `base` is the client's
//! [`client_name`](crate::ClientOptions::client_name) (`crosslock` by default), `language` is
//! `rs`, `py` or `js`, `pid` the process id and `id8` the first 8 hex digits of the client id
//! (the `<client-uuid>` of its holder strings). Every connection also sends
//! `CLIENT SETINFO LIB-NAME crosslock` and `LIB-VER <version>` in its handshake (ignored by
//! servers before Redis 7.2).

use std::sync::OnceLock;

use crate::error::{Error, Result};

/// What `CLIENT SETINFO LIB-NAME` says.
pub(crate) const LIB_NAME: &str = "crosslock";
/// What `CLIENT SETINFO LIB-VER` says.
pub(crate) const LIB_VER: &str = env!("CARGO_PKG_VERSION");
/// The longest `client_name` accepted.
///
/// # Examples
///
/// ```
/// let name = "billing-worker";
/// assert!(name.len() <= crosslock::naming::MAX_NAME);
/// let options = crosslock::ClientOptions::new().client_name(name);
/// # drop(options);
/// ```
pub const MAX_NAME: usize = 64;

static LANGUAGE: OnceLock<&'static str> = OnceLock::new();

/// Sets the language part of connection names (`py`, `js`); `rs` if never set. Only the
/// first call counts.
pub(crate) fn set_language(language: &'static str) {
    let _ = LANGUAGE.set(language);
}

fn language() -> &'static str {
    LANGUAGE.get().copied().unwrap_or("rs")
}

/// Checks a user's `client_name`: 1 to [`MAX_NAME`] printable ASCII characters other than
/// space (what `CLIENT SETNAME` accepts).
pub(crate) fn check_name(name: &str) -> Result<()> {
    let bad = name
        .chars()
        .find(|c| !c.is_ascii_graphic())
        .map(|c| format!("{c:?}"));
    if name.is_empty() || name.len() > MAX_NAME || bad.is_some() {
        let why = match bad {
            Some(c) => format!("it contains {c}"),
            None if name.is_empty() => "it is empty".to_owned(),
            None => format!("it is {} characters long", name.len()),
        };
        return Err(Error::invalid(format!(
            "client_name must be 1 to {MAX_NAME} printable ASCII characters without spaces (as \
             CLIENT SETNAME accepts), but {why}"
        )));
    }
    Ok(())
}

/// The name of a client's connections.
pub(crate) fn connection_name(base: Option<&str>, pid: u32, client_id: &str) -> String {
    let id8: String = client_id.chars().filter(|c| *c != '-').take(8).collect();
    format!("{}-{}-{pid}-{id8}", base.unwrap_or(LIB_NAME), language())
}

/// The process behind a crosslock holder: one of its connections as `CLIENT LIST` shows it.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// for h in client.inspect("orders:42").await?.holders {
///     match &h.process {
///         Some(p) => println!("{} is {} pid {} at {} ({})", h.holder, p.language, p.pid, p.address, p.name),
///         None => println!("{} (not a crosslock client found connected)", h.holder),
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessInfo {
    /// The binding: `rs`, `py` or `js`.
    pub language: String,
    /// Its process id (on its own host).
    pub pid: u32,
    /// The host it connects from, as the server sees it (the address without the port).
    pub host: String,
    /// The address of its connection, `host:port`, as the server sees it.
    pub address: String,
    /// The whole connection name, `<client_name>-<language>-<pid>-<id8>`.
    pub name: String,
}

impl std::fmt::Display for ProcessInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} pid {} on {} ({}, name {})",
            match self.language.as_str() {
                "py" => "Python",
                "js" => "Node.js",
                "rs" => "Rust",
                other => other,
            },
            self.pid,
            self.host,
            self.address,
            self.name
        )
    }
}

/// Splits a connection name into its base, language, pid and id prefix.
fn parse_name(name: &str) -> Option<(&str, &str, u32, &str)> {
    let mut parts = name.rsplitn(4, '-');
    let id8 = parts.next()?;
    let pid = parts.next()?.parse().ok()?;
    let language = parts.next()?;
    let base = parts.next()?;
    (id8.len() == 8 && id8.chars().all(|c| c.is_ascii_hexdigit()))
        .then_some((base, language, pid, id8))
}

/// The crosslock processes in a `CLIENT LIST` reply, by the id prefix of their name.
pub(crate) fn processes(client_list: &str) -> Vec<(String, ProcessInfo)> {
    let mut found = Vec::new();
    for line in client_list.lines() {
        let mut name = None;
        let mut addr = None;
        for field in line.split(' ') {
            if let Some(v) = field.strip_prefix("name=") {
                name = Some(v);
            } else if let Some(v) = field.strip_prefix("addr=") {
                addr = Some(v);
            }
        }
        let (Some(name), Some(addr)) = (name, addr) else {
            continue;
        };
        let Some((_, language, pid, id8)) = parse_name(name) else {
            continue;
        };
        if found
            .iter()
            .any(|(id, _): &(String, ProcessInfo)| id == id8)
        {
            continue;
        }
        let host = match addr.rsplit_once(':') {
            Some((host, _)) => host.trim_start_matches('[').trim_end_matches(']'),
            None => addr,
        };
        found.push((
            id8.to_ascii_lowercase(),
            ProcessInfo {
                language: language.to_owned(),
                pid,
                host: host.to_owned(),
                address: addr.to_owned(),
                name: name.to_owned(),
            },
        ));
    }
    found
}

/// The id prefix a connection name carries for the client id of a holder string.
pub(crate) fn id_prefix(client_id: &str) -> String {
    client_id
        .chars()
        .filter(|c| *c != '-')
        .take(8)
        .collect::<String>()
        .to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        let name = connection_name(Some("orders-api"), 42, "fbb70a4b-1234-5678");
        assert_eq!(name, "orders-api-rs-42-fbb70a4b");
        assert_eq!(
            parse_name(&name),
            Some(("orders-api", "rs", 42, "fbb70a4b"))
        );
        let list = format!(
            "id=3 addr=127.0.0.1:5555 laddr=x fd=8 name={name} age=1\nid=4 addr=127.0.0.1:1 name= age=1\n"
        );
        let found = processes(&list);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "fbb70a4b");
        assert_eq!(found[0].1.host, "127.0.0.1");
        assert_eq!(found[0].1.pid, 42);
    }

    #[test]
    fn bad_names_are_refused() {
        assert!(check_name("a b").is_err());
        assert!(check_name("").is_err());
        assert!(check_name(&"x".repeat(65)).is_err());
        assert!(check_name("orders-api").is_ok());
    }
}
