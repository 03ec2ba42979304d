//! Connections to the deployment, behind one type whatever its topology.
//!
//! Only a single node ships today. Everything else in the crate talks to [`Conn`] through a few
//! operations (run a script on the node owning a key, publish command to use, subscribe), so
//! Sentinel and Cluster slot in here without touching the lock types.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, ProtocolVersion, Script};
use tokio::sync::mpsc::UnboundedSender;

use crate::error::{Error, ErrorKind, Result};

/// Where and how to connect, parsed from the user's URL.
#[derive(Clone)]
pub(crate) struct Endpoint {
    info: ConnectionInfo,
    /// PEM root certificates to trust instead of the built-in roots (`rediss://` only).
    tls_ca: Option<Vec<u8>>,
    /// `host:port` (or the socket path), safe to print: never contains a password.
    pub(crate) address: String,
}

impl Endpoint {
    pub(crate) fn parse(url: &str, tls_ca: Option<Vec<u8>>) -> Result<Self> {
        let scheme_ok = ["redis://", "rediss://", "unix://", "redis+unix://"]
            .iter()
            .any(|s| url.starts_with(s));
        if !scheme_ok {
            return Err(Error::invalid(format!(
                "'{}' is not a Redis URL; write redis://[user:password@]host:port/db (or rediss:// \
                 for TLS)",
                redact(url)
            )));
        }
        let info = url.into_connection_info().map_err(|e| {
            Error::invalid(format!(
                "cannot parse the Redis URL '{}': {e}; write redis://[user:password@]host:port/db",
                redact(url)
            ))
        })?;
        let address = match info.addr() {
            ConnectionAddr::Tcp(host, port) => format!("{host}:{port}"),
            ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port} (TLS)"),
            ConnectionAddr::Unix(path) => path.display().to_string(),
            _ => "the configured address".to_owned(),
        };
        if tls_ca.is_some() && !matches!(info.addr(), ConnectionAddr::TcpTls { .. }) {
            return Err(Error::invalid(format!(
                "a TLS CA certificate was given but '{}' is not a rediss:// URL",
                redact(url)
            )));
        }
        Ok(Endpoint { info, address, tls_ca })
    }

    fn client(&self, protocol: ProtocolVersion) -> Result<redis::Client> {
        let settings = self.info.redis_settings().clone().set_protocol(protocol);
        let info = self.info.clone().set_redis_settings(settings);
        let client = match &self.tls_ca {
            Some(pem) => redis::Client::build_with_tls(
                info,
                redis::TlsCertificates { client_tls: None, root_cert: Some(pem.clone()) },
            ),
            None => redis::Client::open(info),
        };
        client.map_err(|e| {
            Error::invalid(format!("cannot set up the connection to {}: {e}", self.address)).with_source(e)
        })
    }
}

/// Hides the password of a URL before it goes into a message.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{}:***{}", &url[..scheme_end + 3], user, &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// Timeouts for the connections of one client.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    pub(crate) connect: Duration,
    pub(crate) response: Duration,
}

/// A connection to the deployment: commands and scripts.
#[derive(Clone)]
pub(crate) struct Conn {
    manager: ConnectionManager,
}

impl Conn {
    /// Connects the command connection.
    pub(crate) async fn connect(endpoint: &Endpoint, timeouts: Timeouts) -> Result<Self> {
        let client = endpoint.client(ProtocolVersion::RESP2)?;
        let config = manager_config(timeouts);
        let manager = connect_within(endpoint, timeouts, client.get_connection_manager_with_config(config)).await?;
        Ok(Conn { manager })
    }

    /// Connects a RESP3 connection whose pushes (messages, disconnections) go to `pushes`, and
    /// which re-subscribes by itself after reconnecting.
    pub(crate) async fn connect_subscriber(
        endpoint: &Endpoint,
        timeouts: Timeouts,
        pushes: UnboundedSender<redis::PushInfo>,
    ) -> Result<Self> {
        let client = endpoint.client(ProtocolVersion::RESP3)?;
        let config = manager_config(timeouts)
            .set_push_sender(pushes)
            .set_automatic_resubscription();
        let manager = connect_within(endpoint, timeouts, client.get_connection_manager_with_config(config)).await?;
        Ok(Conn { manager })
    }

    /// The command a script uses to notify waiters of `channel` (`publish`; `spublish` once
    /// sharded pub/sub on a cluster is supported).
    pub(crate) fn publish_command(&self) -> &'static str {
        "publish"
    }

    /// Runs `script` with `keys` and `args`; errors are attributed to `lock_name`.
    pub(crate) async fn eval<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[&dyn ToArg],
        lock_name: Option<&str>,
    ) -> Result<T> {
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(*key);
        }
        for arg in args {
            arg.push(&mut invocation);
        }
        let mut manager = self.manager.clone();
        invocation
            .invoke_async(&mut manager)
            .await
            .map_err(|e| Error::from_redis(e, lock_name))
    }

    pub(crate) async fn subscribe(&self, channel: &str) -> Result<()> {
        let mut manager = self.manager.clone();
        manager.subscribe(channel).await.map_err(|e| Error::from_redis(e, None))
    }

    pub(crate) async fn unsubscribe(&self, channel: &str) -> Result<()> {
        let mut manager = self.manager.clone();
        manager.unsubscribe(channel).await.map_err(|e| Error::from_redis(e, None))
    }

    pub(crate) async fn ping(&self) -> Result<()> {
        let mut manager = self.manager.clone();
        redis::cmd("PING")
            .query_async::<()>(&mut manager)
            .await
            .map_err(|e| Error::from_redis(e, None))
    }
}

/// Script arguments of mixed types.
pub(crate) trait ToArg: Sync {
    fn push(&self, invocation: &mut redis::ScriptInvocation<'_>);
}

impl<T: redis::ToRedisArgs + Sync> ToArg for T {
    fn push(&self, invocation: &mut redis::ScriptInvocation<'_>) {
        invocation.arg(self);
    }
}

fn manager_config(timeouts: Timeouts) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeouts.connect))
        .set_response_timeout(Some(timeouts.response))
        .set_number_of_retries(3)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(500))
}

async fn connect_within<F>(endpoint: &Endpoint, timeouts: Timeouts, connecting: F) -> Result<ConnectionManager>
where
    F: std::future::Future<Output = redis::RedisResult<ConnectionManager>>,
{
    let unreachable = |detail: String| {
        Error::new(
            ErrorKind::Unavailable,
            format!(
                "cannot connect to Redis at {} within {:?}: {detail}; check that redis-server \
                 runs there and the URL is right",
                endpoint.address, timeouts.connect
            ),
        )
    };
    match tokio::time::timeout(timeouts.connect, connecting).await {
        Ok(Ok(manager)) => Ok(manager),
        Ok(Err(e)) if e.code() == Some("WRONGPASS") || e.code() == Some("NOAUTH") => Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("Redis at {} refused the credentials in the URL: {e}", endpoint.address),
        )
        .with_source(e)),
        Ok(Err(e)) => Err(unreachable(e.to_string()).with_source(e)),
        Err(_) => Err(unreachable("no answer".to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_hides_password() {
        assert_eq!(redact("redis://u:secret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact("redis://h:1/0"), "redis://h:1/0");
    }

    #[test]
    fn rejects_foreign_scheme() {
        let err = Endpoint::parse("http://localhost:6379", None).err().unwrap();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.to_string().contains("redis://"));
    }
}
