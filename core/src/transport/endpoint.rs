//! Where to connect: the user's URL parsed for each topology (a single server, a Sentinel group,
//! a Cluster's seed nodes), and the URL pieces they share: the split of a `redis+sentinel://` or
//! `redis+cluster://` URL into its parts ([`split_url`], with the one way their messages are
//! written), host lists, `host:port`, percent-encoded credentials.

use std::sync::Arc;

use redis::{
    ConnectionAddr, ConnectionInfo, IntoConnectionInfo, ProtocolVersion, RedisConnectionInfo,
};

use crate::error::{Error, Result};
use crate::redact::redact_url;
use crate::transport::cluster::{self, ClusterSpec};
use crate::transport::sentinel::{self, SentinelSpec};

/// Where and how to connect, parsed from the user's URL.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) target: Target,
    /// PEM root certificates to trust instead of the built-in roots (TLS only).
    pub(crate) tls_ca: Option<Vec<u8>>,
    /// `host:port` (or the socket path, or the sentinel group), safe to print: never contains a
    /// password.
    pub(crate) address: String,
}

#[derive(Clone)]
pub(crate) enum Target {
    /// One server.
    Node(Box<ConnectionInfo>),
    /// The master of a group that sentinels watch over.
    Sentinel(Arc<SentinelSpec>),
    /// A Redis Cluster, found from its seed nodes.
    Cluster(Arc<ClusterSpec>),
}

/// One data node: how to reach it, and its address for messages.
#[derive(Clone)]
pub(crate) struct Node {
    pub(crate) info: ConnectionInfo,
    pub(crate) address: String,
}

impl PartialEq for Node {
    fn eq(&self, other: &Self) -> bool {
        self.address == other.address
    }
}

impl Endpoint {
    pub(crate) fn parse(url: &str, tls_ca: Option<Vec<u8>>) -> Result<Self> {
        if sentinel::URL.matches(url) {
            let spec = SentinelSpec::parse(url, &redact_url(url))?;
            if tls_ca.is_some() && !spec.tls {
                return Err(tls_ca_refused(url, sentinel::URL.tls));
            }
            return Ok(Endpoint {
                address: spec.describe(),
                target: Target::Sentinel(Arc::new(spec)),
                tls_ca,
            });
        }
        if cluster::URL.matches(url) {
            let spec = ClusterSpec::parse(url, &redact_url(url))?;
            if tls_ca.is_some() && !spec.tls {
                return Err(tls_ca_refused(url, cluster::URL.tls));
            }
            return Ok(Endpoint {
                address: spec.describe(),
                target: Target::Cluster(Arc::new(spec)),
                tls_ca,
            });
        }
        let scheme_ok = ["redis://", "rediss://", "unix://", "redis+unix://"]
            .iter()
            .any(|s| url.starts_with(s));
        if !scheme_ok {
            return Err(Error::invalid(format!(
                "'{}' is not a Redis URL: write redis://host:port/db (rediss:// for TLS, \
                 redis+sentinel://host:port/<master>, redis+cluster://host:port)",
                redact_url(url),
            )));
        }
        let info = url.into_connection_info().map_err(|e| {
            Error::invalid(format!(
                "cannot parse the Redis URL '{}': {e}; write redis://[user:password@]host:port/db",
                redact_url(url)
            ))
        })?;
        let db = info.redis_settings().db();
        if !crate::limits::DB.contains(db.into()) {
            return Err(Error::invalid(format!(
                "'{}' selects the database {db}, which no Redis server has: a database index is a \
                 whole number in {} (and below the server's `databases` setting, 16 by default)",
                redact_url(url),
                crate::limits::DB.shown
            )));
        }
        let address = match info.addr() {
            ConnectionAddr::Tcp(host, port) => format!("{host}:{port}"),
            ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port} (TLS)"),
            ConnectionAddr::Unix(path) => path.display().to_string(),
            _ => "the configured address".to_owned(),
        };
        if tls_ca.is_some() && !matches!(info.addr(), ConnectionAddr::TcpTls { .. }) {
            return Err(tls_ca_refused(url, "rediss://"));
        }
        Ok(Endpoint {
            target: Target::Node(Box::new(info)),
            address,
            tls_ca,
        })
    }

    /// Whether this is a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.target, Target::Cluster(_))
    }

    pub(crate) fn client(&self, node: &Node, protocol: ProtocolVersion) -> Result<redis::Client> {
        let settings = node
            .info
            .redis_settings()
            .clone()
            .set_protocol(protocol)
            .set_lib_name(crate::naming::LIB_NAME, crate::naming::LIB_VER);
        let info = node.info.clone().set_redis_settings(settings);
        let client = match &self.tls_ca {
            Some(pem) => redis::Client::build_with_tls(
                info,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem.clone()),
                },
            ),
            None => redis::Client::open(info),
        };
        client.map_err(|e| {
            Error::invalid(format!(
                "cannot set up the connection to {}: {e}",
                node.address
            ))
            .with_source(e)
        })
    }
}

/// A TLS CA certificate came with `url`, which is not of the TLS `scheme`.
fn tls_ca_refused(url: &str, scheme: &str) -> Error {
    Error::invalid(format!(
        "a TLS CA certificate was given but '{}' is not a {scheme} URL",
        redact_url(url)
    ))
}

/// A URL form of several hosts (`redis+sentinel://`, `redis+cluster://`): its schemes, and how
/// it is written, for messages.
pub(crate) struct UrlForm {
    /// The scheme without TLS, `redis+…://`.
    pub(crate) plain: &'static str,
    /// The scheme with TLS, `rediss+…://`.
    pub(crate) tls: &'static str,
    /// What such a URL is called in "is not a … URL".
    pub(crate) kind: &'static str,
    /// How such a URL is written: the end of every message about one.
    pub(crate) written: &'static str,
}

impl UrlForm {
    /// Whether `url` has one of this form's schemes.
    pub(crate) fn matches(&self, url: &str) -> bool {
        url.starts_with(self.plain) || url.starts_with(self.tls)
    }
}

/// A `redis+sentinel://` or `redis+cluster://` URL cut into its parts ([`split_url`]); what the
/// parts must hold is each form's own rule.
pub(crate) struct UrlParts<'a> {
    /// Whether the scheme is the TLS one.
    pub(crate) tls: bool,
    /// The user info (before the `@`), as [`redact_url`] finds it.
    pub(crate) userinfo: Option<&'a str>,
    /// The hosts, `host[:port],…` (see [`UrlParts::hosts`]).
    hosts: &'a str,
    /// What follows the hosts' `/` (without it), up to the query.
    pub(crate) path: &'a str,
    /// What follows the `?` (see [`UrlParts::pairs`]).
    query: &'a str,
    /// The URL without its credentials, for messages.
    pub(crate) shown: &'a str,
    form: &'static UrlForm,
}

/// Cuts `url`, of the given `form`, into its parts; `shown` is the URL without its credentials,
/// for messages.
///
/// # Errors
///
/// `InvalidArgument` when `url` has neither of the form's schemes.
pub(crate) fn split_url<'a>(
    url: &'a str,
    shown: &'a str,
    form: &'static UrlForm,
) -> Result<UrlParts<'a>> {
    let (tls, rest) = if let Some(rest) = url.strip_prefix(form.plain) {
        (false, rest)
    } else if let Some(rest) = url.strip_prefix(form.tls) {
        (true, rest)
    } else {
        return Err(bad(shown, form, format!("is not a {} URL", form.kind)));
    };
    // The user info first, as redact_url finds it: a password with an unencoded '/' or '?' must
    // not be read as a host or a path, which messages show.
    let (userinfo, rest) = match crate::redact::userinfo_end(rest) {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    };
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
    Ok(UrlParts {
        tls,
        userinfo,
        hosts,
        path,
        query,
        shown,
        form,
    })
}

/// `'<shown>' <what>; write <form>`: how every message about a URL of `form` is written.
fn bad(shown: &str, form: &UrlForm, what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("'{shown}' {what}; write {}", form.written))
}

impl<'a> UrlParts<'a> {
    /// The error that the URL `what` (`has …`, `names …`), with how the form is written.
    pub(crate) fn bad(&self, what: impl std::fmt::Display) -> Error {
        bad(self.shown, self.form, what)
    }

    /// The hosts, each with `default_port` unless it names one; `role` names them in errors
    /// (see [`parse_hosts`]).
    pub(crate) fn hosts(&self, default_port: u16, role: &str) -> Result<Vec<(String, u16)>> {
        parse_hosts(self.hosts, default_port, role).map_err(|what| self.bad(what))
    }

    /// The user and password of the user info (none without one).
    pub(crate) fn credentials(&self) -> Result<RedisConnectionInfo> {
        credentials(self.userinfo.unwrap_or(""), self.shown)
    }

    /// The query's `key=value` pairs, in order (empty ones skipped); a pair without `=` is an
    /// error that says `hint` (how the form's parameters are written).
    pub(crate) fn pairs(
        &self,
        hint: &'static str,
    ) -> impl Iterator<Item = Result<(&'a str, &'a str)>> + '_ {
        self.query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(move |pair| {
                // Its text may be a secret written in the wrong place: not echoed (the shown
                // URL hides it whole too).
                pair.split_once('=')
                    .ok_or_else(|| self.bad(format!("has a parameter without '=' (write {hint})")))
            })
    }
}

/// Parses a comma-separated list of `host[:port]` (`[v6]:port` too), naming each a `role`
/// address in errors (the text after the URL in the message).
fn parse_hosts(
    hosts: &str,
    default_port: u16,
    role: &str,
) -> std::result::Result<Vec<(String, u16)>, String> {
    let mut out = Vec::new();
    for host in hosts.split(',') {
        let host = host.trim();
        if host.is_empty() {
            return Err(format!("lists an empty {role} address"));
        }
        let (name, port) = match host.rsplit_once(':') {
            Some((name, port)) if !name.ends_with(':') => {
                let port = port
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| format!("has a bad port in the {role} address '{host}'"))?;
                (name, port)
            }
            _ => (host, default_port),
        };
        let name = name.trim_start_matches('[').trim_end_matches(']');
        if name.is_empty() {
            return Err(format!("has no host in the {role} address '{host}'"));
        }
        out.push((name.to_owned(), port));
    }
    Ok(out)
}

pub(crate) fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The user and password of `userinfo` (`user:password`, percent-encoded), read by redis-rs.
pub(crate) fn credentials(userinfo: &str, shown: &str) -> Result<RedisConnectionInfo> {
    if userinfo.is_empty() {
        return Ok(RedisConnectionInfo::default());
    }
    let info = format!("redis://{userinfo}@localhost:1/0")
        .into_connection_info()
        .map_err(|e| {
            Error::invalid(format!(
                "cannot read the user and password of '{shown}': {e}; percent-encode special \
                 characters"
            ))
        })?;
    Ok(info.redis_settings().clone())
}

#[cfg(test)]
mod tests {
    use crate::redact::redact_url;
    use crate::transport::cluster::ClusterSpec;
    use crate::transport::sentinel::SentinelSpec;

    /// How a sentinel URL is written, as every sentinel URL message ends.
    const SENTINEL_FORM: &str = "redis+sentinel://[user:password@]host:port[,host:port…]/<master \
                                 name>[/db][?sentinel_password=…&sentinel_username=…] (or \
                                 rediss+sentinel:// for TLS)";

    /// How a cluster URL is written, as every cluster URL message ends.
    const CLUSTER_FORM: &str = "redis+cluster://[user:password@]host:port[,host:port…]\
                                [?sharded_pubsub=auto|on|off] (or rediss+cluster:// for TLS)";

    #[test]
    fn sentinel_and_cluster_url_messages_are_pinned_word_for_word() {
        for (url, shown, what) in [
            ("redis://h", "redis://h", "is not a sentinel URL"),
            (
                "redis+sentinel://127.0.0.1:26379",
                "redis+sentinel://127.0.0.1:26379",
                "names no master group",
            ),
            (
                "redis+sentinel://127.0.0.1:26379/my@master",
                "redis+sentinel://***@master",
                "names no master group (an '@' in the master name is written %40)",
            ),
            (
                "redis+sentinel://127.0.0.1:x/m",
                "redis+sentinel://127.0.0.1:x/m",
                "has a bad port in the sentinel address '127.0.0.1:x'",
            ),
            (
                "redis+sentinel://,127.0.0.1/m",
                "redis+sentinel://,127.0.0.1/m",
                "lists an empty sentinel address",
            ),
            (
                "redis+sentinel://[]:1/m",
                "redis+sentinel://[]:1/m",
                "has no host in the sentinel address '[]:1'",
            ),
            (
                "redis+sentinel://u:s3cr3t@127.0.0.1/m/db",
                "redis+sentinel://***@127.0.0.1/m/db",
                "has 'db' where the database number goes (a whole number in 0..2^31-1)",
            ),
            (
                "redis+sentinel://127.0.0.1/m/0/extra",
                "redis+sentinel://127.0.0.1/m/0/extra",
                "has 'extra' after the database number",
            ),
            (
                "redis+sentinel://127.0.0.1/m%zz",
                "redis+sentinel://127.0.0.1/m%zz",
                "has a bad percent escape in the master name 'm%zz'",
            ),
            (
                "redis+sentinel://127.0.0.1/m?s3cr3t",
                "redis+sentinel://127.0.0.1/m?***",
                "has a parameter without '=' (write sentinel_username=…&sentinel_password=…)",
            ),
            (
                "rediss+sentinel://127.0.0.1/m?sentinel_password=s3cr3t&password=x",
                "rediss+sentinel://127.0.0.1/m?sentinel_password=***&password=***",
                "has the unknown parameter 'password' (sentinel_username and sentinel_password \
                 are the ones there are)",
            ),
        ] {
            let err = SentinelSpec::parse(url, &redact_url(url)).err().expect(url);
            assert_eq!(
                err.to_string(),
                format!("'{shown}' {what}; write {SENTINEL_FORM}")
            );
        }
        for (url, shown, what) in [
            ("redis://h", "redis://h", "is not a cluster URL"),
            (
                "redis+cluster://u:s3cr3t@h:1/3",
                "redis+cluster://***@h:1/3",
                "selects the database '3', but a Redis Cluster has only database 0",
            ),
            // The database is checked before the hosts.
            (
                "redis+cluster://h:0/3",
                "redis+cluster://h:0/3",
                "selects the database '3', but a Redis Cluster has only database 0",
            ),
            (
                "redis+cluster://h:1?sharded_pubsub=maybe",
                "redis+cluster://h:1?sharded_pubsub=maybe",
                "sets sharded_pubsub to 'maybe' (auto, on or off are the choices)",
            ),
            (
                "rediss+cluster://h:1?db=2",
                "rediss+cluster://h:1?db=2",
                "has the unknown parameter 'db' (sharded_pubsub is the one there is)",
            ),
            (
                "redis+cluster://h:0",
                "redis+cluster://h:0",
                "has a bad port in the seed node address 'h:0'",
            ),
            (
                "redis+cluster://h:1,,h:2",
                "redis+cluster://h:1,,h:2",
                "lists an empty seed node address",
            ),
            (
                "redis+cluster://h:1?s3cr3t",
                "redis+cluster://h:1?***",
                "has a parameter without '=' (write sharded_pubsub=auto|on|off)",
            ),
        ] {
            let err = ClusterSpec::parse(url, &redact_url(url)).err().expect(url);
            assert_eq!(
                err.to_string(),
                format!("'{shown}' {what}; write {CLUSTER_FORM}")
            );
        }
    }

    #[test]
    fn a_tls_ca_for_a_plain_url_is_refused_word_for_word() {
        for (url, scheme) in [
            ("redis+sentinel://u:s3cr3t@h/m", "rediss+sentinel://"),
            ("redis+cluster://u:s3cr3t@h:1", "rediss+cluster://"),
            ("redis://u:s3cr3t@h:1/0", "rediss://"),
        ] {
            let err = super::Endpoint::parse(url, Some(b"pem".to_vec()))
                .err()
                .expect(url);
            assert_eq!(
                err.to_string(),
                format!(
                    "a TLS CA certificate was given but '{}' is not a {scheme} URL",
                    redact_url(url)
                )
            );
            assert!(!err.to_string().contains("s3cr3t"), "{err}");
        }
        let err = super::Endpoint::parse("http://h", None).err().unwrap();
        assert_eq!(
            err.to_string(),
            "'http://h' is not a Redis URL: write redis://host:port/db (rediss:// for TLS, \
             redis+sentinel://host:port/<master>, redis+cluster://host:port)"
        );
    }
}
