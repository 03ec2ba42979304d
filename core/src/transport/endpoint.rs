//! Where to connect: the user's URL parsed for each topology (a single server, a Sentinel group,
//! a Cluster's seed nodes), and the URL pieces the three share (host lists, `host:port`,
//! percent-encoded credentials).

use std::sync::Arc;

use redis::{
    ConnectionAddr, ConnectionInfo, IntoConnectionInfo, ProtocolVersion, RedisConnectionInfo,
};

use crate::error::{Error, Result};
use crate::redact::redact_url;
use crate::transport::cluster::ClusterSpec;
use crate::transport::sentinel::SentinelSpec;

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
        if url.starts_with("redis+sentinel://") || url.starts_with("rediss+sentinel://") {
            let spec = SentinelSpec::parse(url, &redact_url(url))?;
            if tls_ca.is_some() && !spec.tls {
                return Err(Error::invalid(format!(
                    "a TLS CA certificate was given but '{}' is not a rediss+sentinel:// URL",
                    redact_url(url)
                )));
            }
            return Ok(Endpoint {
                address: spec.describe(),
                target: Target::Sentinel(Arc::new(spec)),
                tls_ca,
            });
        }
        if url.starts_with("redis+cluster://") || url.starts_with("rediss+cluster://") {
            let spec = ClusterSpec::parse(url, &redact_url(url))?;
            if tls_ca.is_some() && !spec.tls {
                return Err(Error::invalid(format!(
                    "a TLS CA certificate was given but '{}' is not a rediss+cluster:// URL",
                    redact_url(url)
                )));
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
            return Err(Error::invalid(format!(
                "a TLS CA certificate was given but '{}' is not a rediss:// URL",
                redact_url(url)
            )));
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

/// Parses a comma-separated list of `host[:port]` (`[v6]:port` too), naming each a `role`
/// address in errors (the text after the URL in the message).
pub(crate) fn parse_hosts(
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

/// Percent-decodes a path segment (the master name).
pub(crate) fn decode(segment: &str) -> std::result::Result<String, String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = segment
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    format!("has a bad percent escape in the master name '{segment}'")
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("has a master name '{segment}' that is not UTF-8"))
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
