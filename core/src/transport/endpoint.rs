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
